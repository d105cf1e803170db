// Package memorytest is the conformance suite every memory.Store backend
// must pass (SPEC §4; like riverdrivertest.Exercise): namespaces and
// whole-segment matching, every filter operator, undeclared-key
// validation, supersede, staging and rejection, rebuild equivalence,
// forgetting, explicit-first assembly, the retrieval timeout fallback, an
// isolation property test, hostile actor IDs (path, LIKE and SQL
// metacharacters), text no backend may alter (NUL, invalid UTF-8: stored
// exactly or rejected with memory.ErrInvalidQuery), ID ownership across
// actors and updates. ExerciseShared adds the scale-out cases for backends
// that several instances share.
package memorytest

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// NewStore opens a fresh, empty store with the default indexed keys (type,
// section STRING; plants STRINGLIST). The suite closes it.
type NewStore func(t *testing.T) memory.Store

// Rebuilder is implemented by stores whose index is derived (embedded:
// Markdown → SQLite) and can be recreated.
type Rebuilder interface {
	Rebuild(ctx context.Context, progress func(done, total int)) error
}

// NewShared opens two stores over one shared backend (two instances
// behind a load balancer): each may have its own caches, and what one
// writes the other must see at once. The suite closes both.
type NewShared func(t *testing.T) (memory.Store, memory.Store)

// Exercise runs the whole suite against stores made by newStore.
func Exercise(t *testing.T, newStore NewStore) {
	t.Run("Namespaces", func(t *testing.T) { testNamespaces(t, newStore(t)) })
	t.Run("Filters", func(t *testing.T) { testFilters(t, newStore(t)) })
	t.Run("UndeclaredKey", func(t *testing.T) { testUndeclared(t, newStore(t)) })
	t.Run("Supersede", func(t *testing.T) { testSupersede(t, newStore(t)) })
	t.Run("StagingAndRejection", func(t *testing.T) { testStaging(t, newStore(t)) })
	t.Run("Events", func(t *testing.T) { testEvents(t, newStore(t)) })
	t.Run("RebuildEquivalence", func(t *testing.T) { testRebuild(t, newStore(t)) })
	t.Run("Forget", func(t *testing.T) { testForget(t, newStore(t)) })
	t.Run("ExplicitFirst", func(t *testing.T) { testExplicitFirst(t, newStore(t)) })
	t.Run("TimeoutFallback", func(t *testing.T) { testTimeout(t, newStore(t)) })
	t.Run("Isolation", func(t *testing.T) { testIsolation(t, newStore(t)) })
	t.Run("HostileActors", func(t *testing.T) { testHostileActors(t, newStore(t)) })
	t.Run("UnstorableText", func(t *testing.T) { testUnstorableText(t, newStore(t)) })
	t.Run("IDOwnership", func(t *testing.T) { testIDOwnership(t, newStore(t)) })
	t.Run("UpdateKeepsCreatedAt", func(t *testing.T) { testUpdate(t, newStore(t)) })
}

var ctx = context.Background()

func lt(agent, actor string) string {
	return memory.MustNamespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: agent, ActorID: actor})
}

func put(t *testing.T, s memory.Store, r memory.Record) memory.Record {
	t.Helper()
	got, err := s.Put(ctx, r)
	if err != nil {
		t.Fatalf("Put %q: %v", r.Content, err)
	}
	return got
}

func ids(hits []memory.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Record.ID
	}
	return out
}

func search(t *testing.T, s memory.Store, q memory.Query) []memory.Hit {
	t.Helper()
	hits, err := s.Search(ctx, q)
	if err != nil {
		t.Fatalf("Search %+v: %v", q, err)
	}
	return hits
}

func testNamespaces(t *testing.T, s memory.Store) {
	defer s.Close()
	a := put(t, s, memory.Record{Namespace: lt("main", "12"), Content: "likes tomatoes in raised beds", Strategy: memory.StrategySemantic})
	b := put(t, s, memory.Record{Namespace: lt("main", "123"), Content: "likes tomatoes on the balcony", Strategy: memory.StrategySemantic})
	c := put(t, s, memory.Record{Namespace: "/main/12/episodic/s1/", Content: "talked about tomatoes yesterday", Strategy: memory.StrategySummary})
	for _, r := range []memory.Record{a, b, c} {
		if r.ID == "" || r.CreatedAt.IsZero() || r.Status != memory.StatusActive {
			t.Fatalf("Put did not fill id/timestamps/status: %+v", r)
		}
	}
	cases := []struct {
		name string
		q    memory.Query
		want []string
	}{
		{"path actor 12 never sees 123", memory.Query{NamespacePath: "/main/12/", Text: "tomatoes"}, []string{a.ID, c.ID}},
		{"path without trailing slash", memory.Query{NamespacePath: "/main/12", Text: "tomatoes"}, []string{a.ID, c.ID}},
		{"path actor 123", memory.Query{NamespacePath: "/main/123/", Text: "tomatoes"}, []string{b.ID}},
		{"path prefix 1 matches nothing", memory.Query{NamespacePath: "/main/1/", Text: "tomatoes"}, nil},
		{"exact long_term", memory.Query{Namespace: "/main/12/long_term/", Text: "tomatoes"}, []string{a.ID}},
		{"exact does not include subtree", memory.Query{Namespace: "/main/12/episodic/", Text: "tomatoes"}, nil},
		{"path episodic", memory.Query{NamespacePath: "/main/12/episodic/", Text: "tomatoes"}, []string{c.ID}},
		{"list without text", memory.Query{NamespacePath: "/main/12/"}, []string{a.ID, c.ID}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ids(search(t, s, tc.q))
			sort.Strings(got)
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			if len(got) == 0 && len(want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
	if _, err := s.Search(ctx, memory.Query{Text: "x"}); !errors.Is(err, memory.ErrInvalidQuery) {
		t.Fatalf("query without namespace: err %v, want ErrInvalidQuery", err)
	}
	if _, err := s.Search(ctx, memory.Query{Namespace: "/a/b/", NamespacePath: "/a/", Text: "x"}); !errors.Is(err, memory.ErrInvalidQuery) {
		t.Fatalf("query with both namespace forms: err %v, want ErrInvalidQuery", err)
	}
	got, err := s.Get(ctx, a.ID)
	if err != nil || got.Content != a.Content || got.Namespace != a.Namespace {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := s.Get(ctx, "no-such-id"); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("Get unknown: %v, want ErrNotFound", err)
	}
}

func testFilters(t *testing.T, s memory.Store) {
	defer s.Close()
	ns := lt("main", "u1")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r1 := put(t, s, memory.Record{Namespace: ns, Content: "fig tree pruning note", CreatedAt: t0, UpdatedAt: t0,
		Metadata: map[string]any{"type": "note", "section": "pruning", "plants": []string{"fig", "olive"}}})
	r2 := put(t, s, memory.Record{Namespace: ns, Content: "petunia watering note", CreatedAt: t0.Add(48 * time.Hour), UpdatedAt: t0.Add(72 * time.Hour),
		Metadata: map[string]any{"type": "note", "section": "watering", "plants": []string{"petunia"}}})
	r3 := put(t, s, memory.Record{Namespace: ns, Content: "fertiliser preference note", CreatedAt: t0.Add(96 * time.Hour), UpdatedAt: t0.Add(96 * time.Hour),
		Metadata: map[string]any{"type": "preference"}})
	day2 := t0.Add(24 * time.Hour)
	cases := []struct {
		name string
		f    []memory.Filter
		want []string
	}{
		{"EQUALS_TO string", []memory.Filter{{Key: "section", Op: memory.OpEquals, Value: "pruning"}}, []string{r1.ID}},
		{"EQUALS_TO stringlist element", []memory.Filter{{Key: "plants", Op: memory.OpEquals, Value: "petunia"}}, []string{r2.ID}},
		{"CONTAINS string", []memory.Filter{{Key: "section", Op: memory.OpContains, Value: "water"}}, []string{r2.ID}},
		{"CONTAINS stringlist", []memory.Filter{{Key: "plants", Op: memory.OpContains, Value: "olive"}}, []string{r1.ID}},
		{"EXISTS", []memory.Filter{{Key: "plants", Op: memory.OpExists}}, []string{r1.ID, r2.ID}},
		{"NOT_EXISTS", []memory.Filter{{Key: "plants", Op: memory.OpNotExists}}, []string{r3.ID}},
		{"BEFORE createdAt", []memory.Filter{{Key: "createdAt", Op: memory.OpBefore, Value: day2}}, []string{r1.ID}},
		{"AFTER createdAt (string value)", []memory.Filter{{Key: "createdAt", Op: memory.OpAfter, Value: day2.Format(time.RFC3339)}}, []string{r2.ID, r3.ID}},
		{"GREATER_THAN updatedAt", []memory.Filter{{Key: "updatedAt", Op: memory.OpGreater, Value: t0.Add(72 * time.Hour)}}, []string{r3.ID}},
		{"GREATER_THAN_OR_EQUALS updatedAt", []memory.Filter{{Key: "updatedAt", Op: memory.OpGreaterEq, Value: t0.Add(72 * time.Hour)}}, []string{r2.ID, r3.ID}},
		{"LESS_THAN updatedAt", []memory.Filter{{Key: "updatedAt", Op: memory.OpLess, Value: t0.Add(72 * time.Hour)}}, []string{r1.ID}},
		{"LESS_THAN_OR_EQUALS updatedAt", []memory.Filter{{Key: "updatedAt", Op: memory.OpLessEq, Value: t0.Add(72 * time.Hour)}}, []string{r1.ID, r2.ID}},
		{"AND of two", []memory.Filter{{Key: "type", Op: memory.OpEquals, Value: "note"}, {Key: "createdAt", Op: memory.OpAfter, Value: day2}}, []string{r2.ID}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Filters apply before ranking: "note" matches all three texts,
			// only the filtered ones may come back.
			got := ids(search(t, s, memory.Query{NamespacePath: ns, Text: "note", Filters: tc.f}))
			sort.Strings(got)
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
	// NUMBER operators run on stores declaring a NUMBER key; the default
	// declaration has none, so a numeric comparison on a STRING key must be
	// a validation error.
	if _, err := s.Search(ctx, memory.Query{NamespacePath: ns, Text: "note", Filters: []memory.Filter{{Key: "section", Op: memory.OpGreater, Value: 3.0}}}); !errors.Is(err, memory.ErrInvalidFilter) {
		t.Fatalf("GREATER_THAN on STRING: err %v, want ErrInvalidFilter", err)
	}
	six := make([]memory.Filter, 6)
	for i := range six {
		six[i] = memory.Filter{Key: "type", Op: memory.OpExists}
	}
	if _, err := s.Search(ctx, memory.Query{NamespacePath: ns, Text: "note", Filters: six}); !errors.Is(err, memory.ErrInvalidFilter) {
		t.Fatalf("6 filters: err %v, want ErrInvalidFilter", err)
	}
}

func testUndeclared(t *testing.T, s memory.Store) {
	defer s.Close()
	ns := lt("main", "u1")
	put(t, s, memory.Record{Namespace: ns, Content: "mood is happy", Metadata: map[string]any{"mood": "happy"}})
	for _, f := range []memory.Filter{
		{Key: "mood", Op: memory.OpEquals, Value: "happy"},
		{Key: "mood", Op: memory.OpExists},
		{Key: "", Op: memory.OpExists},
		{Key: "type", Op: "LIKE", Value: "x"},
	} {
		_, err := s.Search(ctx, memory.Query{NamespacePath: ns, Text: "happy", Filters: []memory.Filter{f}})
		if !errors.Is(err, memory.ErrInvalidFilter) {
			t.Errorf("filter %+v: err %v, want ErrInvalidFilter", f, err)
		}
	}
}

func testSupersede(t *testing.T, s memory.Store) {
	defer s.Close()
	ns := lt("main", "u1")
	old := put(t, s, memory.Record{Namespace: ns, Strategy: memory.StrategyUserPreference, Content: "prefers chemical fertiliser"})
	newer := put(t, s, memory.Record{Namespace: ns, Strategy: memory.StrategyUserPreference, Content: "prefers organic fertiliser only"})
	old.Status = memory.StatusSuperseded
	old.Metadata = map[string]any{"supersededBy": newer.ID}
	put(t, s, old)
	got := ids(search(t, s, memory.Query{NamespacePath: ns, Text: "fertiliser"}))
	if !reflect.DeepEqual(got, []string{newer.ID}) {
		t.Fatalf("active search = %v, want only %s", got, newer.ID)
	}
	hist := search(t, s, memory.Query{NamespacePath: ns, Text: "fertiliser", Statuses: []memory.Status{memory.StatusSuperseded}})
	if len(hist) != 1 || hist[0].Record.ID != old.ID || hist[0].Record.Metadata["supersededBy"] != newer.ID {
		t.Fatalf("superseded history = %+v", hist)
	}
	g, err := s.Get(ctx, old.ID)
	if err != nil || g.Status != memory.StatusSuperseded || !g.CreatedAt.Equal(old.CreatedAt) {
		t.Fatalf("Get superseded = %+v, %v", g, err)
	}
}

func testStaging(t *testing.T, s memory.Store) {
	defer s.Close()
	ns := lt("main", "u1")
	st := put(t, s, memory.Record{Namespace: ns, Content: "might like basil", Status: memory.StatusStaged, Importance: 0.5})
	if got := search(t, s, memory.Query{NamespacePath: ns, Text: "basil"}); len(got) != 0 {
		t.Fatalf("staged record visible to default search: %v", ids(got))
	}
	staged := search(t, s, memory.Query{NamespacePath: ns, Statuses: []memory.Status{memory.StatusStaged}})
	if len(staged) != 1 || staged[0].Record.ID != st.ID {
		t.Fatalf("staging list = %v", ids(staged))
	}
	st.Status = memory.StatusRejected
	put(t, s, st)
	if got := search(t, s, memory.Query{NamespacePath: ns, Statuses: []memory.Status{memory.StatusStaged}}); len(got) != 0 {
		t.Fatalf("rejected item still staged: %v", ids(got))
	}
	rs, ok := s.(memory.RejectionStore)
	if !ok {
		t.Skip("store does not implement memory.RejectionStore")
	}
	if rej, err := rs.IsRejected(ctx, "u1", "Might like BASIL!"); err != nil || rej {
		t.Fatalf("IsRejected before MarkRejected = %v, %v", rej, err)
	}
	if err := rs.MarkRejected(ctx, "u1", "might like basil"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		actor, content string
		want           bool
	}{
		{"u1", "Might like   BASIL!", true},
		{"u1", "might like mint", false},
		{"u2", "might like basil", false},
	} {
		got, err := rs.IsRejected(ctx, c.actor, c.content)
		if err != nil || got != c.want {
			t.Errorf("IsRejected(%s, %q) = %v, %v; want %v", c.actor, c.content, got, err, c.want)
		}
	}
}

func testEvents(t *testing.T, s memory.Store) {
	defer s.Close()
	now := time.Now().UTC().Truncate(time.Second)
	evs := []memory.Event{
		{ActorID: "u1", SessionID: "s1", Role: "user", Text: "my fig tree has rust spots", Timestamp: now.Add(-2 * time.Hour)},
		{ActorID: "u1", SessionID: "s1", Role: "assistant", Text: "remove the affected leaves", Timestamp: now.Add(-2*time.Hour + time.Minute)},
		{ActorID: "u1", SessionID: "s2", Role: "user", Text: "the petunias wilt in the heat", Timestamp: now.Add(-time.Hour)},
		{ActorID: "u2", SessionID: "s9", Role: "user", Text: "my fig tree is fine", Timestamp: now},
	}
	if err := s.AppendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	all, err := s.Events(ctx, "u1", "")
	if err != nil || len(all) != 3 || all[0].Text != evs[0].Text || all[2].SessionID != "s2" {
		t.Fatalf("Events(u1) = %+v, %v", all, err)
	}
	s1, _ := s.Events(ctx, "u1", "s1")
	if len(s1) != 2 {
		t.Fatalf("Events(u1,s1) = %d events, want 2", len(s1))
	}
	// Idempotent retry: the same IDs again add nothing.
	if err := s.AppendEvents(ctx, all); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Events(ctx, "u1", ""); len(again) != 3 {
		t.Fatalf("re-append duplicated events: %d", len(again))
	}
	hits := search(t, s, memory.Query{NamespacePath: "/main/u1/episodic/", Text: "fig tree rust"})
	if len(hits) == 0 || hits[0].Record.Sources[0] != all[0].ID || hits[0].Explain == "" {
		t.Fatalf("past exchange not found first with explanation: %+v", hits)
	}
	// NoExplain: the same hits, in the same order with the same scores,
	// without explanations.
	quiet := search(t, s, memory.Query{NamespacePath: "/main/u1/episodic/", Text: "fig tree rust", NoExplain: true})
	if len(quiet) != len(hits) {
		t.Fatalf("NoExplain: %d hits, want %d", len(quiet), len(hits))
	}
	for i := range quiet {
		if quiet[i].Record.ID != hits[i].Record.ID || quiet[i].Score != hits[i].Score || quiet[i].Explain != "" {
			t.Fatalf("NoExplain hit %d = %s %v %q, want %s %v without explanation", i, quiet[i].Record.ID, quiet[i].Score, quiet[i].Explain, hits[i].Record.ID, hits[i].Score)
		}
	}
	for _, h := range hits {
		if strings.Contains(h.Record.Content, "fine") {
			t.Fatalf("actor u2's event leaked: %+v", h)
		}
	}
}

func searchable(t *testing.T, s memory.Store) []memory.Query {
	return []memory.Query{
		{NamespacePath: "/main/u1/", Text: "organic fertiliser"},
		{NamespacePath: "/main/u1/", Text: "fig tree"},
		{NamespacePath: "/main/u1/", Text: "tomato", Filters: []memory.Filter{{Key: "type", Op: memory.OpEquals, Value: "note"}}},
		{NamespacePath: "/main/u1/", Statuses: []memory.Status{memory.StatusStaged}},
		{NamespacePath: "/main/u2/", Text: "fig"},
	}
}

func testRebuild(t *testing.T, s memory.Store) {
	defer s.Close()
	rb, ok := s.(Rebuilder)
	if !ok {
		t.Skip("store has no derived index to rebuild")
	}
	seed(t, s)
	queries := searchable(t, s)
	before := make([][]memory.Hit, len(queries))
	for i, q := range queries {
		before[i] = search(t, s, q)
	}
	if err := rb.Rebuild(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for i, q := range queries {
		after := search(t, s, q)
		if !reflect.DeepEqual(summarize(before[i]), summarize(after)) {
			t.Fatalf("query %+v differs after rebuild:\nbefore %v\nafter  %v", q, summarize(before[i]), summarize(after))
		}
	}
}

func summarize(hits []memory.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = fmt.Sprintf("%s %.9f %s %s %v", h.Record.ID, h.Score, h.Record.Content, h.Record.Status, h.Record.Metadata)
	}
	return out
}

func seed(t *testing.T, s memory.Store) {
	t.Helper()
	ns := lt("main", "u1")
	put(t, s, memory.Record{Namespace: ns, Strategy: memory.StrategyUserPreference, Content: "I only use organic fertiliser", Importance: 0.9})
	put(t, s, memory.Record{Namespace: ns, Content: "has a fig tree by the wall", Metadata: map[string]any{"plants": []string{"fig"}}})
	put(t, s, memory.Record{Namespace: ns, Content: "tomato staking note", Metadata: map[string]any{"type": "note", "section": "staking"}})
	put(t, s, memory.Record{Namespace: ns, Content: "maybe likes orchids", Status: memory.StatusStaged})
	put(t, s, memory.Record{Namespace: "/main/u1/episodic/s1/", Strategy: memory.StrategySummary, Content: "Session about fig rust and organic sprays"})
	put(t, s, memory.Record{Namespace: lt("main", "u2"), Content: "has a fig tree too"})
	if err := s.AppendEvents(ctx, []memory.Event{
		{ActorID: "u1", SessionID: "s1", Role: "user", Text: "the fig tree leaves have orange spots", Timestamp: time.Now().Add(-time.Hour)},
		{ActorID: "u1", SessionID: "s1", Role: "assistant", Text: "that is fig rust; use an organic copper spray", Timestamp: time.Now().Add(-time.Hour + time.Second)},
	}); err != nil {
		t.Fatal(err)
	}
}

func testForget(t *testing.T, s memory.Store) {
	defer s.Close()
	seed(t, s)
	if rs, ok := s.(memory.RejectionStore); ok {
		if err := rs.MarkRejected(ctx, "u1", "likes plastic flowers"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Forget(ctx, "main", "u1"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []memory.Query{
		{NamespacePath: "/main/u1/", Text: "fig organic fertiliser tree orchids"},
		{NamespacePath: "/main/u1/"},
		{NamespacePath: "/main/u1/", Statuses: []memory.Status{memory.StatusStaged, memory.StatusActive, memory.StatusSuperseded, memory.StatusRejected}},
	} {
		if got := search(t, s, q); len(got) != 0 {
			t.Fatalf("after Forget, %+v still finds %v", q, ids(got))
		}
	}
	if evs, err := s.Events(ctx, "u1", ""); err != nil || len(evs) != 0 {
		t.Fatalf("after Forget, events = %d, %v", len(evs), err)
	}
	if rs, ok := s.(memory.RejectionStore); ok {
		if rej, _ := rs.IsRejected(ctx, "u1", "likes plastic flowers"); rej {
			t.Fatal("after Forget, rejection hash remains")
		}
	}
	if got := search(t, s, memory.Query{NamespacePath: "/main/u2/", Text: "fig"}); len(got) != 1 {
		t.Fatalf("Forget(u1) touched u2: %v", ids(got))
	}
}

func testExplicitFirst(t *testing.T, s memory.Store) {
	defer s.Close()
	ns := lt("main", "u1")
	inf1 := put(t, s, memory.Record{Namespace: ns, Strategy: memory.StrategySemantic, Content: "aphids on the roses in spring, sprayed soapy water on roses aphids"})
	pref := put(t, s, memory.Record{Namespace: ns, Strategy: memory.StrategyUserPreference, Content: "I only use organic fertiliser"})
	conflict := put(t, s, memory.Record{Namespace: ns, Strategy: memory.StrategySemantic, Content: "uses organic fertiliser"})
	proc := put(t, s, memory.Record{Namespace: ns, Strategy: memory.StrategyProcedural, Content: "keep answers short about aphids"})
	r := memory.NewRetriever(s, memory.RetrieveOptions{})
	hits, err := r.Recall(ctx, "main", "u1", "how do I treat aphids with organic fertiliser")
	if err != nil {
		t.Fatal(err)
	}
	got := ids(hits)
	if len(got) < 3 {
		t.Fatalf("recall = %v", got)
	}
	if !(got[0] == pref.ID || got[0] == proc.ID) || !(got[1] == pref.ID || got[1] == proc.ID) {
		t.Fatalf("explicit records not first: %v (pref %s, proc %s)", got, pref.ID, proc.ID)
	}
	for _, id := range got {
		if id == conflict.ID {
			t.Fatalf("inferred record conflicting with explicit one kept: %v", got)
		}
	}
	if got[2] != inf1.ID {
		t.Fatalf("inferred record missing after explicit ones: %v", got)
	}
	block := memory.RenderBlock(hits)
	if !strings.HasPrefix(block, "What you remember about this user:\n- [Explicit] ") || !strings.Contains(block, "[Inferred] aphids") {
		t.Fatalf("block:\n%s", block)
	}
	other, _ := r.Recall(ctx, "main", "u2", "how do I treat aphids with organic fertiliser")
	if len(other) != 0 {
		t.Fatalf("another actor recalled %v", ids(other))
	}
}

// slowStore delays every Search past the retriever's timeout.
type slowStore struct {
	memory.Store
	delay time.Duration
	err   error
}

func (s slowStore) Search(ctx context.Context, q memory.Query) ([]memory.Hit, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.err != nil {
		return nil, s.err
	}
	return s.Store.Search(ctx, q)
}

func testTimeout(t *testing.T, s memory.Store) {
	defer s.Close()
	seed(t, s)
	cases := []struct {
		name  string
		store memory.Store
	}{
		{"slow store", slowStore{Store: s, delay: time.Hour}},
		{"failing store", slowStore{Store: s, err: errors.New("disk on fire")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stats []memory.RetrieveStats
			r := memory.NewRetriever(tc.store, memory.RetrieveOptions{Timeout: 50 * time.Millisecond, Metrics: func(st memory.RetrieveStats) { stats = append(stats, st) }})
			hits, err := r.Recall(ctx, "main", "u1", "organic fertiliser")
			if err != nil || len(hits) != 0 {
				t.Fatalf("Recall = %v, %v; want no memory and no error", ids(hits), err)
			}
			if r.Failures() != 1 || len(stats) != 1 || !stats[0].Failed {
				t.Fatalf("failure not counted: failures %d, stats %+v", r.Failures(), stats)
			}
		})
	}
	r := memory.NewRetriever(s, memory.RetrieveOptions{})
	hits, _ := r.Recall(ctx, "main", "u1", "   ")
	if r.Query("  ") != memory.DefaultFallbackQuery || r.Failures() != 0 {
		t.Fatalf("fallback query %q, failures %d", r.Query(""), r.Failures())
	}
	_ = hits
}

// testIsolation is the property test: random actors with overlapping
// content, random queries and filters; no result ever crosses actors.
func testIsolation(t *testing.T, s memory.Store) {
	defer s.Close()
	rng := rand.New(rand.NewSource(42))
	actors := []string{"1", "12", "123", "a/b", "a", "telegram:5", "..", "%2F"}
	words := []string{"fig", "tomato", "organic", "fertiliser", "aphids", "basil", "water", "rust", "petunia", "rose"}
	owner := map[string]string{}
	for i := 0; i < 60; i++ {
		actor := actors[rng.Intn(len(actors))]
		var content []string
		for j := 0; j < 4; j++ {
			content = append(content, words[rng.Intn(len(words))])
		}
		rec := put(t, s, memory.Record{Namespace: lt("main", actor), Content: strings.Join(content, " "),
			Metadata: map[string]any{"type": []string{"note", "fact"}[rng.Intn(2)], "plants": []string{words[rng.Intn(3)]}}})
		owner[rec.ID] = actor
		if i%3 == 0 {
			ev := memory.Event{ID: fmt.Sprintf("ev-iso-%d", i), ActorID: actor, SessionID: "s", Role: "user", Text: strings.Join(content, " "), Timestamp: time.Now()}
			if err := s.AppendEvents(ctx, []memory.Event{ev}); err != nil {
				t.Fatal(err)
			}
			owner[ev.ID] = actor
		}
	}
	for i := 0; i < 100; i++ {
		actor := actors[rng.Intn(len(actors))]
		q := memory.Query{NamespacePath: "/main/" + memory.EscapeSegment(actor) + "/", Text: words[rng.Intn(len(words))] + " " + words[rng.Intn(len(words))]}
		if rng.Intn(2) == 0 {
			q.Filters = []memory.Filter{{Key: "plants", Op: memory.OpContains, Value: words[rng.Intn(3)]}}
		}
		if rng.Intn(3) == 0 {
			q.Text = ""
		}
		for _, h := range search(t, s, q) {
			if owner[h.Record.ID] != actor {
				t.Fatalf("query for actor %q returned %s of actor %q", actor, h.Record.ID, owner[h.Record.ID])
			}
		}
		r := memory.NewRetriever(s, memory.RetrieveOptions{})
		hits, _ := r.Recall(ctx, "main", actor, q.Text)
		for _, h := range hits {
			if owner[h.Record.ID] != actor {
				t.Fatalf("recall for actor %q returned %s of actor %q", actor, h.Record.ID, owner[h.Record.ID])
			}
		}
	}
}
