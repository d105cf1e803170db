package markdown

import (
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

var semDefaults = Defaults{ActorID: "u1", File: "semantic.md", Namespace: "/main/u1/long_term/", Strategy: memory.StrategySemantic}

func rec(id, content string, t time.Time) memory.Record {
	return memory.Record{ID: id, Namespace: "/main/u1/long_term/", Strategy: memory.StrategySemantic, Content: content,
		CreatedAt: t, UpdatedAt: t, Importance: 0.5, Status: memory.StatusActive}
}

// An ID appended again is one record, its last entry; the earlier entries
// are counted stale.
func TestParseLastEntryWins(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	a, b := rec("mem_a", "likes figs", t0), rec("mem_b", "has a greenhouse", t0)
	a2 := a
	a2.UpdatedAt = t0.Add(time.Hour)
	a2.Sources = []string{"ev_9"}
	a3 := a2
	a3.Status = memory.StatusSuperseded
	a3.Content = "likes figs and plums"
	data := append(FileHeader("u1", "Semantic memory"), FormatRecord(a)...)
	data = append(data, FormatRecord(b)...)
	data = append(data, FormatRecord(a2)...)
	data = append(data, FormatRecord(a3)...)
	p := Parse(data, semDefaults)
	if len(p.Warnings) > 0 || len(p.Records) != 2 {
		t.Fatalf("parsed %+v", p)
	}
	if p.Records[0].ID != "mem_b" || p.Records[1].ID != "mem_a" {
		t.Fatalf("order = %s, %s; want mem_b, mem_a (order of last entries)", p.Records[0].ID, p.Records[1].ID)
	}
	got := p.Records[1]
	if got.Content != a3.Content || got.Status != memory.StatusSuperseded || !got.UpdatedAt.Equal(a3.UpdatedAt) || len(got.Sources) != 1 {
		t.Fatalf("mem_a = %+v, want its last entry %+v", got, a3)
	}
	if want := int64(len(FormatRecord(a)) + len(FormatRecord(a2))); p.Stale != 2 || p.StaleBytes != want {
		t.Fatalf("stale = %d entries %d bytes, want 2 and %d", p.Stale, p.StaleBytes, want)
	}
	// The compact form of the same records has nothing stale.
	c := Parse(Render("u1", p.Records, nil, nil)["semantic.md"], semDefaults)
	if c.Stale != 0 || len(c.Records) != 2 {
		t.Fatalf("compact parse %+v", c)
	}
}

// A hand edit counts only in the last entry of an ID: an edit of an
// earlier (stale) entry is ignored, and emptying the last entry deletes
// the record, earlier entries included.
func TestParseHandEditOfStaleAndLastEntry(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	a := rec("mem_a", "likes figs", t0)
	a2 := a
	a2.UpdatedAt = t0.Add(time.Hour)
	old, last := string(FormatRecord(a)), string(FormatRecord(a2))
	head := string(FileHeader("u1", "Semantic memory"))

	p := Parse([]byte(head+strings.Replace(old, "-->\nlikes figs\n", "-->\nlikes pears\n", 1)+last), semDefaults)
	if len(p.Records) != 1 || p.Records[0].Content != "likes figs" {
		t.Fatalf("edit of a stale entry: %+v", p.Records)
	}
	p = Parse([]byte(head+old+strings.Replace(last, "-->\nlikes figs\n", "-->\nlikes pears\n", 1)), semDefaults)
	if len(p.Records) != 1 || p.Records[0].Content != "likes pears" {
		t.Fatalf("edit of the last entry: %+v", p.Records)
	}
	p = Parse([]byte(head+old+strings.Replace(last, "-->\nlikes figs\n", "-->\n", 1)), semDefaults)
	if len(p.Records) != 0 {
		t.Fatalf("emptied last entry: %+v, want the record deleted", p.Records)
	}
	p = Parse([]byte(head+old), semDefaults)
	if len(p.Records) != 1 || !p.Records[0].UpdatedAt.Equal(t0) {
		t.Fatalf("last entry deleted: %+v, want the earlier entry back", p.Records)
	}
}

// A write torn anywhere in the final, appended entry (as a crash may
// leave it) loses no earlier record: the other records parse whole, and
// the record being rewritten is either its earlier entry or the start of
// its new one.
func TestParseTornAppendedEntry(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	a, b := rec("mem_a", "likes figs\nand plums in summer", t0), rec("mem_b", "has a greenhouse", t0)
	a2 := a
	a2.UpdatedAt = t0.Add(time.Hour)
	a2.Sources = []string{"ev_9"}
	base := append(FileHeader("u1", "Semantic memory"), FormatRecord(a)...)
	base = append(base, FormatRecord(b)...)
	tail := FormatRecord(a2)
	for cut := 0; cut < len(tail); cut++ {
		data := append(append([]byte(nil), base...), tail[:cut]...)
		p := Parse(data, semDefaults)
		byID := map[string]memory.Record{}
		for _, r := range p.Records {
			if strings.HasPrefix(r.ID, "md_") {
				continue // a torn heading line reads as a hand-written title
			}
			byID[r.ID] = r
		}
		if len(byID) != 2 || byID["mem_b"].Content != b.Content {
			t.Fatalf("cut %d: records %+v", cut, p.Records)
		}
		ga := byID["mem_a"]
		switch {
		case ga.UpdatedAt.Equal(a.UpdatedAt) && ga.Content == a.Content: // the earlier entry
		case ga.UpdatedAt.Equal(a2.UpdatedAt) && strings.HasPrefix(a2.Content, ga.Content) && ga.Content != "":
		default:
			t.Fatalf("cut %d: mem_a = %+v", cut, ga)
		}
	}
}
