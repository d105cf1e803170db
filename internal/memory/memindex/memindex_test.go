package memindex

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/search"
)

func TestNormalizeRecord(t *testing.T) {
	r, err := NormalizeRecord(memory.Record{Content: "  a\r\nb  ", Namespace: "/agent/actor//facts/"}, func() string { return "mem_1" })
	if err != nil {
		t.Fatal(err)
	}
	if r.Content != "a\nb" || r.Strategy != memory.StrategySemantic || r.Status != memory.StatusActive || r.ID != "mem_1" {
		t.Fatalf("normalized = %+v", r)
	}
	if r.Namespace != memory.CleanNamespace("/agent/actor//facts/") {
		t.Fatalf("namespace = %q", r.Namespace)
	}
	for name, bad := range map[string]memory.Record{
		"empty content":    {Namespace: "/a/b"},
		"unknown status":   {Content: "x", Namespace: "/a/b", Status: "nope"},
		"newline in id":    {Content: "x", Namespace: "/a/b", ID: "a\nb"},
		"unknown strategy": {Content: "x", Namespace: "/a/b", Strategy: "nope"},
	} {
		if _, err := NormalizeRecord(bad, func() string { return "mem_1" }); !errors.Is(err, memory.ErrInvalidQuery) {
			t.Errorf("%s: err = %v, want ErrInvalidQuery", name, err)
		}
	}
	if _, err := NormalizeRecord(memory.Record{Content: "x"}, nil); !errors.Is(err, memory.ErrInvalidNamespace) {
		t.Errorf("empty namespace: err = %v, want ErrInvalidNamespace", err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if d := DefaultTimes(r, now); !d.CreatedAt.Equal(now) || !d.UpdatedAt.Equal(now) {
		t.Fatalf("default times = %v, %v", d.CreatedAt, d.UpdatedAt)
	}
}

func TestListAndMasks(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := map[string]memory.Record{
		"b": {ID: "b", Namespace: "/ag/ac/facts", Strategy: memory.StrategySemantic, Status: memory.StatusActive, Content: "beta", CreatedAt: t0},
		"a": {ID: "a", Namespace: "/ag/ac/facts", Strategy: memory.StrategySemantic, Status: memory.StatusActive, Content: "alpha", CreatedAt: t0},
		"s": {ID: "s", Namespace: "/ag/ac/facts", Strategy: memory.StrategySemantic, Status: memory.StatusStaged, Content: "staged", CreatedAt: t0},
	}
	c := NewCond(memory.Query{NamespacePath: "/ag/ac"}, []memory.Status{memory.StatusActive}, nil)
	ptrs := map[string]*memory.Record{}
	for id, r := range recs {
		ptrs[id] = &r
	}
	hits := List(Actor{Records: ptrs}, c, 0, Events{})
	if len(hits) != 2 || hits[0].Record.ID != "a" || hits[1].Record.ID != "b" || hits[0].Explain != ListedExplain {
		t.Fatalf("list = %+v", hits)
	}
	ix := search.NewIndex(search.DefaultParams())
	docs := []memory.Record{recs["a"], recs["s"]}
	for _, r := range docs {
		ix.Add(RecordDoc(r))
	}
	var ms Masks
	m := ms.Get(ix, docs, c)
	if m.Scope.N() != 1 || !m.Scope.Allowed(0) || m.Scope.Allowed(1) {
		t.Fatalf("mask allows %d documents", m.Scope.N())
	}
	if ms.Get(ix, docs, c) != m {
		t.Fatal("second Get computed a new mask")
	}
	got := Rank(ix, docs, nil, m.Scope, "alpha", nil, 5, true)
	if len(got) != 1 || got[0].Record.ID != "a" || got[0].Score <= 0 {
		t.Fatalf("rank = %+v", got)
	}
}

// TestKeyOrder: the binary sort keys order documents exactly as the
// keys they replaced ("0"/"1" + UTC time text to the nanosecond + ID).
func TestKeyOrder(t *testing.T) {
	old := func(kind string, ts time.Time, id string) string {
		return kind + ts.UTC().Format("2006-01-02T15:04:05.000000000") + id
	}
	base := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	times := []time.Time{
		{}, time.Unix(0, 0), time.Unix(-1, 999999999), time.Unix(-1, 0), base, base.Add(time.Nanosecond), base.Add(-time.Nanosecond),
		base.Add(time.Second), base.Add(-time.Second + time.Nanosecond), base.In(time.FixedZone("x", 3600)),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(1969, 12, 31, 23, 59, 59, 5, time.UTC),
	}
	ids := []string{"", "a", "ab", "b", "ev_01", "ev_02", "mem_z"}
	type k struct{ old, new string }
	var keys []k
	for _, ts := range times {
		for _, id := range ids {
			keys = append(keys, k{old("0", ts, id), RecordKey(memory.Record{ID: id, CreatedAt: ts})})
			keys = append(keys, k{old("1", ts, id), EventKey(memory.Event{ID: id, Timestamp: ts})})
		}
	}
	for _, a := range keys {
		for _, b := range keys {
			if (a.old < b.old) != (a.new < b.new) || (a.old == b.old) != (a.new == b.new) {
				t.Fatalf("order differs: old %q vs %q, new %q vs %q", a.old, b.old, a.new, b.new)
			}
		}
	}
	if got := len(EventKey(memory.Event{ID: "ev_x", Timestamp: base})); got != 13+4 {
		t.Fatalf("event key length %d, want 17", got)
	}
}

// TestMatchEvent: MatchEvent answers as Match over the event's record.
func TestMatchEvent(t *testing.T) {
	e := memory.Event{ID: "e1", ActorID: "ac", SessionID: "s1", Role: "user", Text: "hi", Timestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Metadata: map[string]any{"topic": "fig"}}
	ns := EventNamespace("ag", e)
	for _, c := range []Cond{
		NewCond(memory.Query{NamespacePath: "/ag/ac"}, []memory.Status{memory.StatusActive}, nil),
		NewCond(memory.Query{NamespacePath: "/ag/other"}, []memory.Status{memory.StatusActive}, nil),
		NewCond(memory.Query{NamespacePath: "/ag/ac"}, []memory.Status{memory.StatusStaged}, nil),
		NewCond(memory.Query{NamespacePath: "/ag/ac", Strategies: []memory.Strategy{memory.StrategySemantic}}, []memory.Status{memory.StatusActive}, nil),
		NewCond(memory.Query{NamespacePath: "/ag/ac"}, []memory.Status{memory.StatusActive}, []memory.Filter{{Key: "topic", Op: memory.OpEquals, Value: "fig"}}),
		NewCond(memory.Query{NamespacePath: "/ag/ac"}, []memory.Status{memory.StatusActive}, []memory.Filter{{Key: "role", Op: memory.OpEquals, Value: "assistant"}}),
	} {
		if got, want := c.MatchEvent(e, ns), c.Match(EventRecord(e, ns)); got != want {
			t.Errorf("%+v: MatchEvent %v, Match %v", c, got, want)
		}
	}
}

// TestEventTermsSame: an index built from EventTerms (each turn's text
// analysed once) ranks and explains exactly as one built from EventDoc,
// image captions included.
func TestEventTermsSame(t *testing.T) {
	t0 := time.Date(2023, 5, 8, 13, 0, 0, 0, time.UTC)
	texts := []string{"I painted a sunrise by the lake yesterday", "That's lovely!", "Look at this", "Caroline's idea, last week", "비료를 샀어요"}
	var evs []memory.Event
	for i, text := range texts {
		e := memory.Event{ID: fmt.Sprint("e", i), ActorID: "a", SessionID: "s1", Role: []string{"user", "assistant"}[i%2], Text: text, Timestamp: t0.Add(time.Duration(i) * time.Minute)}
		if i == 2 {
			e.Metadata = map[string]any{"caption": "a photo of a lake at sunrise"}
		}
		evs = append(evs, e)
	}
	p := search.DefaultParams()
	a, b := search.NewIndex(p), search.NewIndex(p)
	for i, e := range evs {
		var ctx []string
		var ctxTerms [][]string
		for _, j := range []int{i - 1, i + 1} {
			if j >= 0 && j < len(evs) {
				ctx, ctxTerms = append(ctx, evs[j].Text), append(ctxTerms, p.Analyzer.Terms(evs[j].Text))
			}
		}
		a.Add(EventDoc(e, false, ctx))
		b.AddAnalyzed(EventTerms(e, ctx, p.Analyzer, p.Analyzer.Terms(e.Text), ctxTerms))
	}
	for _, q := range []string{"photo of the lake", "sunrise painting", "what was Caroline's idea", "비료"} {
		g, w := b.Search(q, nil, 10), a.Search(q, nil, 10)
		if len(g) == 0 || len(g) != len(w) {
			t.Fatalf("%q: %d results, want %d (> 0)", q, len(g), len(w))
		}
		for i := range g {
			if g[i].Doc != w[i].Doc || g[i].Score != w[i].Score || g[i].Explain != w[i].Explain {
				t.Fatalf("%q rank %d: %d %v, want %d %v", q, i, g[i].Doc, g[i].Score, w[i].Doc, w[i].Score)
			}
		}
	}
}
