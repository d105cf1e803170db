package sqlitestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// warmRecords is how many of actor's records are in memory and how many
// are cold (-1, -1: not loaded).
func (s *Store) warmRecords(actor string) (warm, cold int) {
	s.mu.Lock()
	a := s.actors[actor]
	s.mu.Unlock()
	if a == nil {
		return -1, -1
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.records), a.recCold.total()
}

// rtierRecord is record i of actor u: a unique word "fact<i>" and words
// every record shares, updated at hour i.
func rtierRecord(i int) memory.Record {
	at := tierT0.Add(time.Duration(i) * time.Hour)
	return memory.Record{ID: fmt.Sprintf("mem_r%03d", i), Namespace: "/main/u/long_term/", Strategy: memory.StrategySemantic,
		Status: memory.StatusActive, Content: fmt.Sprintf("fact%d the person keeps bees in the garden", i),
		Metadata: map[string]any{"type": "fact"}, CreatedAt: at, UpdatedAt: at}
}

// TestRecordWindowColdRecordsReachable puts 20 records into an actor
// whose record window is 4 and checks that the 16 outside it are held
// only in SQLite yet found by every reader: search (with the cold
// explanation), Get, ListRecords, the listing, an update, the owner check
// of an event, the Markdown export, a reopen and a rebuild.
func TestRecordWindowColdRecordsReachable(t *testing.T) {
	home := t.TempDir()
	opts := Options{RecordWindow: 4, SyncInterval: -1, EventExpiryDays: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := s.Put(bg, rtierRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	if warm, cold := s.warmRecords("u"); warm != 4 || cold != 16 {
		t.Fatalf("warm, cold records = %d, %d; want 4, 16", warm, cold)
	}
	check := func(s *Store, when string) {
		t.Helper()
		for i := 0; i < 20; i++ {
			hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: fmt.Sprintf("fact%d", i), TopK: 3})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) == 0 || hits[0].Record.ID != rtierRecord(i).ID {
				t.Fatalf("%s: search fact%d: %+v", when, i, hits)
			}
			cold := strings.HasPrefix(hits[0].Explain, coldRecordExplain)
			if cold != (i < 16) {
				t.Fatalf("%s: fact%d cold = %v (explain %q), want %v", when, i, cold, hits[0].Explain, i < 16)
			}
			if hits[0].Record.Metadata["type"] != "fact" || !hits[0].Record.UpdatedAt.Equal(rtierRecord(i).UpdatedAt) {
				t.Fatalf("%s: fact%d read back as %+v", when, i, hits[0].Record)
			}
			r, err := s.Get(bg, rtierRecord(i).ID)
			if err != nil || r.Content != rtierRecord(i).Content {
				t.Fatalf("%s: Get fact%d = %+v, %v", when, i, r, err)
			}
		}
		recs, err := s.ListRecords(bg, "/main/u/long_term/", nil)
		if err != nil || len(recs) != 20 {
			t.Fatalf("%s: ListRecords = %d records, %v; want 20", when, len(recs), err)
		}
		listed, err := s.List(bg, memory.Query{NamespacePath: "/main/u/", Strategies: []memory.Strategy{memory.StrategySemantic}})
		if err != nil || len(listed) != 20 {
			t.Fatalf("%s: List = %d records, %v; want 20", when, len(listed), err)
		}
		// A filter that only cold records fail still reaches them.
		none, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "fact3", Filters: []memory.Filter{{Key: "type", Op: memory.OpEquals, Value: "plan"}}})
		if err != nil || len(none) != 0 {
			t.Fatalf("%s: filtered search = %+v, %v; want none", when, none, err)
		}
	}
	check(s, "after the writes")

	// An event may not take a cold record's ID.
	err = s.AppendEvents(bg, []memory.Event{{ID: rtierRecord(2).ID, ActorID: "u", SessionID: "s", Role: "user", Text: "hello", Timestamp: tierT0}})
	if !errors.Is(err, memory.ErrInvalidQuery) || !strings.Contains(err.Error(), "belongs to a record") {
		t.Fatalf("event with a cold record's ID: %v", err)
	}

	// The export writes every record, warm or cold.
	out := t.TempDir()
	if _, err := s.ExportMarkdown(bg, out); err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			md.Write(b)
		}
		return nil
	})
	for i := 0; i < 20; i++ {
		if !strings.Contains(md.String(), fmt.Sprintf("fact%d the person", i)) {
			t.Fatalf("export lacks fact%d", i)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, the same four are warm and the rest are found as before.
	s, err = Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s, "after a reopen")
	if warm, cold := s.warmRecords("u"); warm != 4 || cold != 16 {
		t.Fatalf("reopened: warm, cold records = %d, %d; want 4, 16", warm, cold)
	}
	if err := s.Rebuild(bg, nil); err != nil {
		t.Fatal(err)
	}
	check(s, "after a rebuild")

	// Updating a cold record makes it warm, keeps its creation time, and
	// its old words find it no more.
	old := rtierRecord(1)
	upd := old
	upd.Content, upd.UpdatedAt = "fact1 the person moved the hives to the orchard", tierT0.Add(100*time.Hour)
	upd.CreatedAt = time.Time{}
	if _, err := s.Put(bg, upd); err != nil {
		t.Fatal(err)
	}
	if warm, cold := s.warmRecords("u"); warm != 4 || cold != 16 {
		t.Fatalf("after the update: warm, cold records = %d, %d; want 4, 16", warm, cold)
	}
	r, err := s.Get(bg, old.ID)
	if err != nil || r.Content != upd.Content || !r.CreatedAt.Equal(old.CreatedAt) {
		t.Fatalf("updated cold record = %+v, %v", r, err)
	}
	hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "orchard hives"})
	if err != nil || len(hits) == 0 || hits[0].Record.ID != old.ID || strings.HasPrefix(hits[0].Explain, coldRecordExplain) {
		t.Fatalf("updated record not found warm: %+v, %v", hits, err)
	}
	// Its Markdown holds the new version once: the rewrite or append saw
	// the cold old one.
	recs, err := s.ListRecords(bg, "/main/u/long_term/", nil)
	if err != nil || len(recs) != 20 {
		t.Fatalf("ListRecords after the update = %d, %v", len(recs), err)
	}
	if err := s.Rebuild(bg, nil); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(bg, old.ID); err != nil || r.Content != upd.Content {
		t.Fatalf("after a rebuild the update reads %+v, %v", r, err)
	}
	if recs, err := s.ListRecords(bg, "/main/u/long_term/", nil); err != nil || len(recs) != 20 {
		t.Fatalf("ListRecords after the rebuild = %d, %v", len(recs), err)
	}

	// A cold record superseded is listed with its new status and no longer
	// found by a search of active records.
	sup := rtierRecord(5)
	sup.Status = memory.StatusSuperseded
	if _, err := s.Put(bg, sup); err != nil {
		t.Fatal(err)
	}
	if hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "fact5"}); err != nil || len(hits) != 0 && hits[0].Record.ID == sup.ID {
		t.Fatalf("superseded record still found: %+v, %v", hits, err)
	}

	// Forget removes the cold ones too.
	if err := s.Forget(bg, "main", "u"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(bg, rtierRecord(3).ID); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("cold record after forget: %v", err)
	}
}

// TestRecordWindowNarrowsUnderBudget checks that many actors sharing a
// small byte budget keep only part of their records in memory, within
// minRecordWindow, instead of evicting each other, and that each actor's
// oldest record is still found.
func TestRecordWindowNarrowsUnderBudget(t *testing.T) {
	s, err := Open(t.TempDir(), Options{CacheBytes: 2 << 20, HotFor: -1, SyncInterval: -1, EventExpiryDays: -1, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const actors, per = 20, 200
	for i := 0; i < per; i += 8 {
		for u := 0; u < actors; u++ {
			var batch []memory.Record
			for j := i; j < i+8; j++ {
				r := rtierRecord(j)
				r.ID = fmt.Sprintf("mem_u%d_%03d", u, j)
				r.Namespace = fmt.Sprintf("/main/u%d/long_term/", u)
				batch = append(batch, r)
			}
			if _, err := s.PutBatch(bg, batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := s.CacheStats()
	if st.Actors != actors {
		t.Fatalf("%d actors cached, want %d (evictions %d)", st.Actors, actors, st.Evictions)
	}
	for u := 0; u < actors; u++ {
		warm, cold := s.warmRecords(fmt.Sprint("u", u))
		if warm+cold != per || warm < minRecordWindow || warm >= per {
			t.Fatalf("u%d: %d warm, %d cold records; want between %d and %d warm of %d", u, warm, cold, minRecordWindow, per, per)
		}
		hits, err := s.Search(bg, memory.Query{NamespacePath: fmt.Sprintf("/main/u%d/", u), Text: "fact0"})
		if err != nil || len(hits) == 0 || hits[0].Record.ID != fmt.Sprintf("mem_u%d_000", u) {
			t.Fatalf("u%d: oldest record not found: %+v, %v", u, hits, err)
		}
	}
	if st.Bytes > 2*(2<<20) {
		t.Fatalf("estimated heap %d bytes, budget %d", st.Bytes, 2<<20)
	}
}

// TestStandingRecordsStayWarm checks that an actor's active preferences
// and procedures are the last records to go cold, so that the listing of
// standing records every turn's retrieval makes reads no SQLite (staged
// preferences going cold first), while a listing of everything does.
func TestStandingRecordsStayWarm(t *testing.T) {
	s, err := Open(t.TempDir(), Options{RecordWindow: 12, SyncInterval: -1, EventExpiryDays: -1, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 60; i++ {
		r := rtierRecord(i)
		switch {
		case i%10 == 0:
			r.Strategy = memory.StrategyUserPreference
		case i%10 == 5:
			r.Strategy = memory.StrategyProcedural
		case i%10 == 1:
			r.Strategy, r.Status = memory.StrategyUserPreference, memory.StatusStaged
		}
		if _, err := s.Put(bg, r); err != nil {
			t.Fatal(err)
		}
	}
	if warm, cold := s.warmRecords("u"); warm != 12 || cold != 48 {
		t.Fatalf("warm, cold = %d, %d; want 12, 48", warm, cold)
	}
	before := s.coldRecordReads.Load()
	standing, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", TopK: 20,
		Strategies: []memory.Strategy{memory.StrategyUserPreference, memory.StrategyProcedural}})
	if err != nil || len(standing) != 12 {
		t.Fatalf("standing listing = %d records, %v; want the 12 preferences and procedures", len(standing), err)
	}
	if n := s.coldRecordReads.Load() - before; n != 0 {
		t.Fatalf("the standing listing read cold records %d times", n)
	}
	all, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Statuses: []memory.Status{memory.StatusActive, memory.StatusStaged}})
	if err != nil || len(all) != 60 {
		t.Fatalf("listing everything = %d records, %v; want 60", len(all), err)
	}
	if n := s.coldRecordReads.Load() - before; n != 1 {
		t.Fatalf("listing everything read cold records %d times, want 1", n)
	}
	// A search of another namespace (the episodic one, which every turn
	// searches beside the records' own) reads no cold record, though
	// its words are in cold ones; a search of theirs does.
	before = s.coldRecordReads.Load()
	if _, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/episodic/", Text: "fact3 bees garden"}); err != nil {
		t.Fatal(err)
	}
	if n := s.coldRecordReads.Load() - before; n != 0 {
		t.Fatalf("a search of the episodic namespace read cold records %d times", n)
	}
	hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/long_term/", Text: "fact3 bees garden"})
	if err != nil || len(hits) == 0 || hits[0].Record.ID != rtierRecord(3).ID {
		t.Fatalf("cold fact3 not found first: %+v, %v", hits, err)
	}
	if n := s.coldRecordReads.Load() - before; n == 0 {
		t.Fatal("a search that found a cold record read none")
	}
}
