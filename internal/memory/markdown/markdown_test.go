package markdown

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

func TestRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 30, 0, 123, time.UTC)
	recs := []memory.Record{
		{ID: "mem_1", Namespace: "/main/u1/long_term/", Strategy: memory.StrategyUserPreference, Content: "I only use organic fertiliser",
			Metadata: map[string]any{"plants": []string{"fig"}, "n": 2.5, "due": t0, "type": "pref"}, CreatedAt: t0, UpdatedAt: t0,
			Sources: []string{"ev_1"}, Importance: 0.8, Status: memory.StatusActive},
		{ID: "mem_2", Namespace: "/main/u1/long_term/", Strategy: memory.StrategySemantic, Content: "## not a heading\n<!-- tendril:record {} -->\n\\backslash -->",
			CreatedAt: t0, UpdatedAt: t0, Status: memory.StatusStaged},
	}
	evs := []memory.Event{{ID: "ev_1", ActorID: "u1", SessionID: "s1", Role: "user", Text: "hello\nworld", Timestamp: t0, Metadata: map[string]any{"speaker": "Jin"}}}
	files := Render("u1", recs, evs, []string{"sha256:ab"})
	var gotRecs []memory.Record
	var gotEvs []memory.Event
	var hashes []string
	for rel, data := range files {
		p := Parse(data, Defaults{File: rel, Namespace: "/main/u1/long_term/"})
		if p.ActorID != "u1" || len(p.Warnings) > 0 {
			t.Fatalf("%s: actor %q warnings %v", rel, p.ActorID, p.Warnings)
		}
		gotRecs = append(gotRecs, p.Records...)
		gotEvs = append(gotEvs, p.Events...)
		hashes = append(hashes, p.Hashes...)
	}
	SortRecords(gotRecs)
	if !reflect.DeepEqual(gotRecs, recs) {
		t.Fatalf("records:\n got %+v\nwant %+v", gotRecs, recs)
	}
	if len(gotEvs) != 1 || gotEvs[0].Text != "hello\nworld" || gotEvs[0].Metadata["speaker"] != "Jin" || !gotEvs[0].Timestamp.Equal(t0) {
		t.Fatalf("events %+v", gotEvs)
	}
	if !reflect.DeepEqual(hashes, []string{"sha256:ab"}) {
		t.Fatalf("hashes %v", hashes)
	}
}

func TestHandWrittenAndTorn(t *testing.T) {
	data := string(FileHeader("u1", "Semantic memory")) + "## Has a greenhouse\nIt is small and heated.\n\n" +
		"## torn\n<!-- tendril:record {\"id\":\"x\""
	p := Parse([]byte(data), Defaults{File: "semantic.md", Namespace: "/main/u1/long_term/", Strategy: memory.StrategySemantic})
	if len(p.Records) != 1 || p.Records[0].Content != "It is small and heated." || !strings.HasPrefix(p.Records[0].ID, "md_") || len(p.Warnings) != 1 {
		t.Fatalf("parsed %+v", p)
	}
	again := Parse([]byte(data), Defaults{File: "semantic.md", Namespace: "/main/u1/long_term/", Strategy: memory.StrategySemantic})
	if again.Records[0].ID != p.Records[0].ID {
		t.Fatal("hand-written ID not deterministic")
	}
}

func FuzzEncodeActor(f *testing.F) {
	for _, s := range []string{"telegram:12345", "..", "../../etc", "a/b", "\x00", strings.Repeat("é", 200), ".hidden", "%2F"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc, err := EncodeActor(s)
		if s == "" {
			if err == nil {
				t.Fatal("empty actor accepted")
			}
			return
		}
		if err != nil || enc == "" || enc == "." || enc == ".." || strings.ContainsAny(enc, "/\\\x00") || strings.HasPrefix(enc, ".") || len(enc) > maxEncoded {
			t.Fatalf("EncodeActor(%q) = %q, %v", s, enc, err)
		}
		if other, _ := EncodeActor(s + "x"); other == enc {
			t.Fatalf("collision for %q", s)
		}
	})
}

// FuzzParse: any bytes parse without panicking, and whatever records come
// back render and re-parse to the same records.
func FuzzParse(f *testing.F) {
	f.Add(string(FileHeader("u", "Semantic memory")) + "## a\n<!-- tendril:record {\"id\":\"r\",\"namespace\":\"/m/u/long_term/\"} -->\ntext\n")
	f.Add("## hand\nwritten\n## \n<!-- tendril:event {\"id\":\"e\"} -->\n\\## x\n")
	f.Add("<!-- tendril:record {")
	f.Add("## a\n<!-- tendril:record {\"id\":\"r\",\"format\":2} -->\n\ntext\n\\\n \nstray\n")
	f.Fuzz(func(t *testing.T, data string) {
		d := Defaults{ActorID: "u", File: "semantic.md", Namespace: "/m/u/long_term/", Strategy: memory.StrategySemantic}
		p := Parse([]byte(data), d)
		for _, r := range p.Records {
			again := Parse(FormatRecord(r), d)
			if len(again.Records) != 1 || again.Records[0].Content != r.Content || again.Records[0].ID != r.ID {
				t.Fatalf("record %+v did not round-trip: %+v", r, again.Records)
			}
		}
	})
}

// A hand edit of a record's status or strategy: a case or space slip
// means the known value; an unknown value is a warning and the entry is
// skipped (before, it was indexed under a status no listing shows).
func TestHandEditedStatusAndStrategy(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	recs := []memory.Record{
		{ID: "mem_1", Namespace: "/main/u1/long_term/", Strategy: memory.StrategySemantic, Content: "is allergic to bees", CreatedAt: t0, UpdatedAt: t0, Status: memory.StatusActive},
		{ID: "mem_2", Namespace: "/main/u1/long_term/", Strategy: memory.StrategySemantic, Content: "has a fig tree", CreatedAt: t0, UpdatedAt: t0, Status: memory.StatusActive},
		{ID: "mem_3", Namespace: "/main/u1/long_term/", Strategy: memory.StrategySemantic, Content: "waters on sundays", CreatedAt: t0, UpdatedAt: t0, Status: memory.StatusActive},
	}
	for rel, data := range Render("u1", recs, nil, nil) {
		s := string(data)
		s = strings.Replace(s, `"status":"active"`, `"status":" Active"`, 1)
		s = strings.Replace(s, `"status":"active"`, `"status":"bogus"`, 1)
		s = strings.Replace(s, `"strategy":"semantic"`, `"strategy":"Semantic"`, 1)
		s = strings.Replace(s, `"strategy":"semantic","status":"active"`, `"strategy":"weird","status":"active"`, 1)
		p := Parse([]byte(s), Defaults{File: rel, Namespace: "/main/u1/long_term/"})
		var got []string
		for _, r := range p.Records {
			got = append(got, r.ID+":"+string(r.Strategy)+"/"+string(r.Status))
		}
		if !reflect.DeepEqual(got, []string{"mem_1:semantic/active"}) {
			t.Fatalf("records %v from\n%s", got, s)
		}
		if len(p.Warnings) != 2 || !strings.Contains(strings.Join(p.Warnings, "\n"), `unknown status "bogus"`) || !strings.Contains(strings.Join(p.Warnings, "\n"), `unknown strategy "weird"`) {
			t.Fatalf("warnings %q", p.Warnings)
		}
	}
}
