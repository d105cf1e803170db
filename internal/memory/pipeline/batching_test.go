package pipeline

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// extractNow runs one extraction of the session's events after its cursor
// and moves the cursor, as a memory.extract job does.
func (f *fixture) extractNow(actor, session string) {
	f.t.Helper()
	f.extractWith(f.p, actor, session)
}

// extractWith is extractNow through pipeline p (another process's).
func (f *fixture) extractWith(p *Pipeline, actor, session string) {
	f.t.Helper()
	ep, err := p.q.epoch(ctx, actor)
	if err != nil {
		f.t.Fatal(err)
	}
	err = p.extractSession(ctx, ep, "main", actor, session, false, func(tx txn, cur sessionState, moved bool) error {
		if !moved {
			return nil
		}
		return setCursorTx(ctx, tx, "main", actor, session, cur)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// outcome renders every record of the actor independently of IDs and
// write times: strategy, status, content, sources and, for a superseded
// record, the content that superseded it; sorted.
func outcome(t *testing.T, st memory.Store, actor string) (lines []string, counts map[memory.Status]int) {
	t.Helper()
	recs := allOf(t, st, actor)
	byID := map[string]memory.Record{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	counts = map[memory.Status]int{}
	for _, r := range recs {
		counts[r.Status]++
		by := ""
		if id, _ := r.Metadata[keySupersededBy].(string); id != "" {
			by = " ← " + byID[id].Content
		}
		src := append([]string(nil), r.Sources...)
		sort.Strings(src)
		lines = append(lines, fmt.Sprintf("%s %s %q %v%s", r.Strategy, r.Status, r.Content, src, by))
	}
	sort.Strings(lines)
	return lines, counts
}

// batchingCorpus has supersessions (location, fertiliser, name), exact and
// near duplicates, a re-assertion after a supersession, staged and dropped
// statements, and small talk.
var batchingCorpus = []string{
	"I live in Busan", "ok thanks", "I only use organic fertiliser", "call me Jin",
	"I have a fig tree", "I live in Busan", "what about aphids?", "I moved to Seoul",
	"I only use chemical fertiliser", "my sister is called Mina", "I only use organic fertiliser",
	"call me Jinny", "I live in Busan", "haha", "I have a fig tree and I also grow basil",
	"keep answers short", "항상 한국어로 답해줘", "저는 유기농 비료만 써요", "I went to the market yesterday and bought seedlings",
	"I like jazz", "I really like jazz", "I moved to Seoul",
}

// loadSoakTexts returns the LoCoMo turn texts in the order tendril-soak
// cycles them (conversations, then sessions, in order), from
// $TENDRIL_LOCOMO; nil when it is unset (the corpus run is opt-in).
func loadSoakTexts(t *testing.T) []string {
	if os.Getenv("TENDRIL_LOCOMO") == "" {
		return nil
	}
	var texts []string
	for _, s := range locomoSessions(t) {
		for _, e := range s.events {
			if x := strings.TrimSpace(e.Text); x != "" {
				texts = append(texts, x)
			}
		}
	}
	return texts
}

// The same turns give the same records however they are split into
// extraction jobs: all in one job, one job per turn, or jobs of 2, 3, 7
// and 50 turns (each job reads from the session's cursor, as jobs coalesced
// by ExtractMinInterval do).
func TestExtractionIndependentOfBatching(t *testing.T) {
	type corpus struct {
		name  string
		texts []string
		turns int
		kinds []string
	}
	cs := []corpus{{"synthetic", batchingCorpus, 3 * len(batchingCorpus), []string{"mem", "sqlite"}}}
	if texts := loadSoakTexts(t); texts != nil {
		n := 1500
		if s := os.Getenv("TENDRIL_BATCHING_TURNS"); s != "" {
			n, _ = strconv.Atoi(s)
		}
		cs = append(cs, corpus{"locomo", texts, n, []string{"mem"}})
	}
	for _, c := range cs {
		for _, kind := range c.kinds {
			t.Run(c.name+"/"+kind, func(t *testing.T) {
				var want []string
				for _, every := range []int{c.turns, 1, 2, 3, 7, 50} {
					f := newFixture(t, kind)
					for i := 0; i < c.turns; i++ {
						f.clk.Add(time.Second)
						text := c.texts[i%len(c.texts)]
						if err := f.p.RecordTurn(ctx, "main", "u1", "s1", []memory.Event{
							{ID: fmt.Sprintf("t%05d-1u", i), Role: "user", Text: text},
							{ID: fmt.Sprintf("t%05d-2a", i), Role: "assistant", Text: "echo: " + text}}); err != nil {
							t.Fatal(err)
						}
						if (i+1)%every == 0 {
							f.extractNow("u1", "s1")
						}
					}
					f.extractNow("u1", "s1")
					got, counts := outcome(t, f.store, "u1")
					t.Logf("%d turns in jobs of %d: %v", c.turns, every, counts)
					if want == nil {
						want = got
						continue
					}
					if strings.Join(got, "\n") != strings.Join(want, "\n") {
						t.Errorf("jobs of %d turns: records differ from one job:\n got %q\nwant %q", every, got, want)
					}
				}
			})
		}
	}
}

// Two sessions of one actor contradict each other; each session's job
// extracts its own turns. The active location is the one stated last
// whichever job runs first (storeAndSupersede compares when each was
// stated; before, the one extracted last won), and the earlier statement
// is kept, superseded by the later one.
func TestSupersedeAcrossSessionsIndependentOfJobOrder(t *testing.T) {
	for _, order := range [][]string{{"s1", "s2"}, {"s2", "s1"}} {
		t.Run(strings.Join(order, "-then-"), func(t *testing.T) {
			f := newFixture(t, "mem")
			f.turn("u1", "s1", "I live in Busan") // stated first
			f.turn("u1", "s1", "ok")
			f.turn("u1", "s2", "I moved to Seoul") // stated later
			f.turn("u1", "s2", "ok")
			for _, s := range order {
				f.extractNow("u1", s)
			}
			got, _ := outcome(t, f.store, "u1")
			t.Logf("jobs %v: %q", order, got)
			act := contents(f.active("u1"))
			if len(act) != 1 || act[0] != "I moved to Seoul" {
				t.Errorf("jobs %v: active %q, want the later statement [I moved to Seoul]", order, act)
			}
		})
	}
}

// Two processes (two Pipelines on one job database and one store, as two
// instances on one PostgreSQL) extract two sessions of one actor at once:
// the second consolidates between the first's listing and its write. The
// first's write finds the actor's consolidation generation moved, writes
// nothing and starts over from a fresh listing, so the statement both
// sessions made is one record (merged), and the later location wins.
// Without the generation check both added "I have a fig tree", and both
// locations stayed active.
func TestConsolidationRaceAcrossProcesses(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		other, err := New(f.store, f.options())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close() })
		f.turn("u1", "s1", "I have a fig tree")
		f.turn("u1", "s1", "I live in Busan")
		f.turn("u1", "s2", "I have a fig tree")
		f.turn("u1", "s2", "I moved to Seoul")
		lists := 0
		f.p.afterList = func(actor, session string) {
			lists++
			if lists == 1 { // the other process runs between our listing and our write
				f.extractWith(other, "u1", "s2")
			}
		}
		f.extractNow("u1", "s1")
		if lists < 2 {
			t.Fatalf("the first extraction listed %d times, want a retry after the other process's write", lists)
		}
		act := contents(f.active("u1"))
		sort.Strings(act)
		if want := []string{"I have a fig tree", "I moved to Seoul"}; strings.Join(act, "|") != strings.Join(want, "|") {
			t.Fatalf("active records %q, want %q", act, want)
		}
	})
}

// An approval in another process lands between an extraction's listing
// and its write: the approved "I live in Daegu" supersedes Busan, and the
// extraction, finding the consolidation generation moved, starts over and
// lets the later "I moved to Seoul" supersede Daegu. Without the check the
// extraction wrote from its stale listing (Busan the only active location)
// and left Daegu and Seoul both active.
func TestApprovalRacingAnExtraction(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		other, err := New(f.store, f.options())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close() })
		f.turn("u1", "s1", "I live in Busan")
		f.turn("u1", "s1", "ok")
		f.extractNow("u1", "s1")
		busan := f.active("u1")
		if len(busan) != 1 || topicOf(busan[0]) == "" {
			t.Fatalf("want one active record with a topic after s1, got %+v", busan)
		}
		staged := busan[0]
		staged.ID, staged.Content, staged.Status = "", "I live in Daegu", memory.StatusStaged
		staged.Metadata = mergeMeta(busan[0].Metadata, nil)
		staged.Sources = nil
		st, err := f.store.Put(ctx, staged)
		if err != nil {
			t.Fatal(err)
		}
		f.turn("u1", "s2", "I moved to Seoul")
		f.turn("u1", "s2", "ok")
		lists := 0
		f.p.afterList = func(actor, session string) {
			lists++
			if lists == 1 {
				if _, err := other.Approve(ctx, st.ID); err != nil {
					t.Error(err)
				}
			}
		}
		f.extractNow("u1", "s2")
		if act := contents(f.active("u1")); len(act) != 1 || act[0] != "I moved to Seoul" {
			t.Fatalf("active %q (after %d listings), want only [I moved to Seoul]", act, lists)
		}
	})
}
