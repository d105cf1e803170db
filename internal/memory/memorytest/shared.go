package memorytest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// ExerciseShared runs the scale-out cases (SPEC §9) against pairs of
// stores sharing one backend: a write on one instance is searched on the
// other at once, with the same hits and scores; updates, status changes,
// new events, rejections and Forget cross instances too.
func ExerciseShared(t *testing.T, newPair NewShared) {
	t.Run("CrossInstanceVisibility", func(t *testing.T) { testCrossInstance(t, newPair) })
	t.Run("CrossInstanceForget", func(t *testing.T) { testCrossForget(t, newPair) })
}

func testCrossInstance(t *testing.T, newPair NewShared) {
	a, b := newPair(t)
	defer a.Close()
	defer b.Close()
	ns := lt("main", "u1")
	q := memory.Query{NamespacePath: "/main/u1/", Text: "fig tree"}
	// b caches u1 (empty, then one record) before a writes more.
	if got := search(t, b, q); len(got) != 0 {
		t.Fatalf("fresh store found %v", ids(got))
	}
	r1 := put(t, a, memory.Record{Namespace: ns, Content: "has a fig tree by the wall"})
	if got := ids(search(t, b, q)); !reflect.DeepEqual(got, []string{r1.ID}) {
		t.Fatalf("b after a's first write: %v, want [%s]", got, r1.ID)
	}
	r2 := put(t, a, memory.Record{Namespace: ns, Content: "the fig tree needs pruning in winter"})
	if err := a.AppendEvents(ctx, []memory.Event{
		{ID: "ev-x1", ActorID: "u1", SessionID: "s1", Role: "user", Text: "my fig tree has rust", Timestamp: time.Now().Add(-time.Minute)},
		{ID: "ev-x2", ActorID: "u1", SessionID: "s1", Role: "assistant", Text: "remove the spotted leaves", Timestamp: time.Now()},
	}); err != nil {
		t.Fatal(err)
	}
	same := func(stage string) {
		t.Helper()
		for _, q := range []memory.Query{q, {NamespacePath: "/main/u1/", Text: "leaves"}, {NamespacePath: "/main/u1/"},
			{NamespacePath: "/main/u1/", Statuses: []memory.Status{memory.StatusSuperseded}}} {
			ha, hb := search(t, a, q), search(t, b, q)
			if !reflect.DeepEqual(summarize(ha), summarize(hb)) {
				t.Fatalf("%s: query %+v differs between instances:\na %v\nb %v", stage, q, summarize(ha), summarize(hb))
			}
		}
	}
	same("after records and events")
	got := search(t, b, memory.Query{NamespacePath: "/main/u1/", Text: "spotted leaves"})
	if len(got) == 0 || got[0].Record.ID != "ev-x2" {
		t.Fatalf("b does not find a's event first: %v", ids(got))
	}
	// An update on b (supersede) is seen by a.
	r1.Status = memory.StatusSuperseded
	put(t, b, r1)
	if got := ids(search(t, a, memory.Query{Namespace: ns, Text: "fig tree"})); !reflect.DeepEqual(got, []string{r2.ID}) {
		t.Fatalf("a after b superseded %s: %v, want [%s]", r1.ID, got, r2.ID)
	}
	same("after supersede")
	if g, err := a.Get(ctx, r1.ID); err != nil || g.Status != memory.StatusSuperseded {
		t.Fatalf("a.Get after b's update = %+v, %v", g, err)
	}
	if evs, err := b.Events(ctx, "u1", "s1"); err != nil || len(evs) != 2 {
		t.Fatalf("b.Events = %d, %v", len(evs), err)
	}
	ra, okA := a.(memory.RejectionStore)
	rb, okB := b.(memory.RejectionStore)
	if okA && okB {
		if err := ra.MarkRejected(ctx, "u1", "likes plastic flowers"); err != nil {
			t.Fatal(err)
		}
		if rej, err := rb.IsRejected(ctx, "u1", "Likes plastic flowers!"); err != nil || !rej {
			t.Fatalf("b.IsRejected after a.MarkRejected = %v, %v", rej, err)
		}
	}
}

func testCrossForget(t *testing.T, newPair NewShared) {
	a, b := newPair(t)
	defer a.Close()
	defer b.Close()
	seed(t, a)
	q := memory.Query{NamespacePath: "/main/u1/", Text: "fig organic fertiliser tree orchids"}
	if len(search(t, b, q)) == 0 {
		t.Fatal("b finds nothing of a's seed")
	}
	if err := a.Forget(ctx, "main", "u1"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []memory.Query{q, {NamespacePath: "/main/u1/", Statuses: []memory.Status{memory.StatusStaged, memory.StatusActive, memory.StatusSuperseded, memory.StatusRejected}}} {
		if got := search(t, b, q); len(got) != 0 {
			t.Fatalf("b still finds %v after a forgot u1", ids(got))
		}
	}
	// The actor writes again after being forgotten: b sees only the new memory.
	r := put(t, b, memory.Record{Namespace: lt("main", "u1"), Content: "a new fig fact"})
	if got := ids(search(t, a, memory.Query{NamespacePath: "/main/u1/", Text: "fig"})); !reflect.DeepEqual(got, []string{r.ID}) {
		t.Fatalf("after forget and a new write: a finds %v, want [%s]", got, r.ID)
	}
	if got := search(t, b, memory.Query{NamespacePath: "/main/u2/", Text: "fig"}); len(got) != 1 {
		t.Fatalf("u2 touched by forgetting u1: %v", ids(got))
	}
}

// hostileActors are actor IDs that break naive paths, LIKE patterns, SQL
// quoting or prefix matching.
var hostileActors = []string{"a", "a/b", "..", ".", "%2F", "%", "_", "a%", `a\`, "*", "'; DROP TABLE memory_records; --",
	"telegram:5", "ünïcødé 名前", "a b", strings.Repeat("x", 300), "-rf", "a\nb"}

func testHostileActors(t *testing.T, s memory.Store) {
	defer s.Close()
	rs, _ := s.(memory.RejectionStore)
	for i, actor := range hostileActors {
		ns, err := memory.Namespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: actor})
		if err != nil {
			t.Fatalf("namespace of %q: %v", actor, err)
		}
		put(t, s, memory.Record{ID: fmt.Sprintf("hostile-%d", i), Namespace: ns, Content: "shared word basil " + fmt.Sprint(i)})
		if err := s.AppendEvents(ctx, []memory.Event{{ID: fmt.Sprintf("hostile-ev-%d", i), ActorID: actor, SessionID: "s/" + actor, Text: "basil event", Timestamp: time.Now()}}); err != nil {
			t.Fatalf("append events for %q: %v", actor, err)
		}
		if rs != nil {
			if err := rs.MarkRejected(ctx, actor, "rejected basil"); err != nil {
				t.Fatalf("mark rejected for %q: %v", actor, err)
			}
		}
	}
	check := func(skip map[string]bool) {
		t.Helper()
		for i, actor := range hostileActors {
			path := "/main/" + memory.EscapeSegment(actor) + "/"
			hits := search(t, s, memory.Query{NamespacePath: path, Text: "basil"})
			want := []string{fmt.Sprintf("hostile-%d", i), fmt.Sprintf("hostile-ev-%d", i)}
			if skip[actor] {
				want = nil
			}
			got := ids(hits)
			if len(got) != len(want) || (len(want) > 0 && !(contains(got, want[0]) && contains(got, want[1]))) {
				t.Fatalf("actor %q: hits %v, want %v", actor, got, want)
			}
			evs, err := s.Events(ctx, actor, "")
			if err != nil || len(evs) != len(want)/2 {
				t.Fatalf("actor %q: events %d, %v", actor, len(evs), err)
			}
			if rs != nil {
				if rej, err := rs.IsRejected(ctx, actor, "rejected basil"); err != nil || rej == skip[actor] {
					t.Fatalf("actor %q: rejected %v, %v", actor, rej, err)
				}
			}
		}
	}
	check(nil)
	// Forgetting the actors that are LIKE wildcards or prefixes of others
	// removes only them.
	gone := map[string]bool{"%": true, "_": true, "a": true, `a\`: true}
	for actor := range gone {
		if err := s.Forget(ctx, "main", actor); err != nil {
			t.Fatalf("forget %q: %v", actor, err)
		}
	}
	check(gone)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// testUnstorableText: a NUL byte or invalid UTF-8 either round-trips
// exactly or is rejected with memory.ErrInvalidQuery — never stored
// altered, never an internal error; lookups by such IDs find nothing.
func testUnstorableText(t *testing.T, s memory.Store) {
	defer s.Close()
	ns := lt("main", "u1")
	for _, bad := range []string{"nul \x00 inside", "bad utf8 \xff\xfe"} {
		for _, rec := range []memory.Record{
			{Namespace: ns, Content: bad},
			{Namespace: ns, Content: "fine", Metadata: map[string]any{"type": bad}},
			{ID: "id-" + bad, Namespace: ns, Content: "fine"},
			{Namespace: ns, Content: "fine", Sources: []string{bad}},
		} {
			got, err := s.Put(ctx, rec)
			if err != nil {
				if !errors.Is(err, memory.ErrInvalidQuery) {
					t.Fatalf("Put %+v: %v, want nil or ErrInvalidQuery", rec, err)
				}
				continue
			}
			back, err := s.Get(ctx, got.ID)
			if err != nil || back.Content != got.Content || !reflect.DeepEqual(back.Metadata, got.Metadata) || !reflect.DeepEqual(back.Sources, got.Sources) {
				t.Fatalf("Put %+v stored it altered: %+v, %v", rec, back, err)
			}
		}
		err := s.AppendEvents(ctx, []memory.Event{{ActorID: "u1", SessionID: "s", Text: bad}})
		if err != nil && !errors.Is(err, memory.ErrInvalidQuery) {
			t.Fatalf("AppendEvents %q: %v, want nil or ErrInvalidQuery", bad, err)
		}
		if err == nil {
			evs, _ := s.Events(ctx, "u1", "s")
			if len(evs) == 0 || evs[len(evs)-1].Text != bad {
				t.Fatalf("event %q stored altered: %+v", bad, evs)
			}
		}
		if _, err := s.Get(ctx, "id"+bad); err != nil && !errors.Is(err, memory.ErrNotFound) {
			t.Fatalf("Get(%q): %v, want a record or ErrNotFound", bad, err)
		}
		if _, err := s.Search(ctx, memory.Query{NamespacePath: "/main/" + memory.EscapeSegment(bad) + "/", Text: "fine"}); err != nil {
			t.Fatalf("search under actor %q: %v", bad, err)
		}
		if _, err := s.Events(ctx, bad, ""); err != nil {
			t.Fatalf("Events(%q): %v", bad, err)
		}
	}
}

// testIDOwnership: an ID of one actor's record or event cannot be taken
// over by another actor, by Put or AppendEvents.
func testIDOwnership(t *testing.T, s memory.Store) {
	defer s.Close()
	r := put(t, s, memory.Record{ID: "owned-1", Namespace: lt("main", "u1"), Content: "u1's secret basil"})
	if _, err := s.Put(ctx, memory.Record{ID: r.ID, Namespace: lt("main", "u2"), Content: "overwrite"}); !errors.Is(err, memory.ErrInvalidQuery) {
		t.Fatalf("Put of u1's ID under u2: %v, want ErrInvalidQuery", err)
	}
	if err := s.AppendEvents(ctx, []memory.Event{{ID: "owned-ev", ActorID: "u1", Text: "u1 event"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []memory.Event{{ID: "owned-ev", ActorID: "u2", Text: "u2 takes it"}}); !errors.Is(err, memory.ErrInvalidQuery) {
		t.Fatalf("AppendEvents of u1's event ID for u2: %v, want ErrInvalidQuery", err)
	}
	if _, err := s.Put(ctx, memory.Record{ID: "owned-ev", Namespace: lt("main", "u2"), Content: "record over u1's event"}); !errors.Is(err, memory.ErrInvalidQuery) {
		t.Fatalf("Put over u1's event ID for u2: %v, want ErrInvalidQuery", err)
	}
	g, err := s.Get(ctx, r.ID)
	if err != nil || g.Content != r.Content {
		t.Fatalf("u1's record changed: %+v, %v", g, err)
	}
	if got := search(t, s, memory.Query{NamespacePath: "/main/u2/"}); len(got) != 0 {
		t.Fatalf("u2 has %v", ids(got))
	}
}

// testUpdate: Put of an existing ID without CreatedAt keeps the original
// creation time and moves UpdatedAt.
func testUpdate(t *testing.T, s memory.Store) {
	defer s.Close()
	t0 := time.Date(2026, 2, 1, 8, 0, 0, 0, time.UTC)
	r := put(t, s, memory.Record{ID: "upd-1", Namespace: lt("main", "u1"), Content: "likes basil", CreatedAt: t0, UpdatedAt: t0})
	u := put(t, s, memory.Record{ID: "upd-1", Namespace: lt("main", "u1"), Content: "likes basil and mint"})
	if !u.CreatedAt.Equal(r.CreatedAt) || !u.UpdatedAt.After(t0) {
		t.Fatalf("update: created %v updated %v (was %v)", u.CreatedAt, u.UpdatedAt, r.CreatedAt)
	}
	g, err := s.Get(ctx, "upd-1")
	if err != nil || g.Content != "likes basil and mint" || !g.CreatedAt.Equal(t0) || !g.UpdatedAt.Equal(u.UpdatedAt) {
		t.Fatalf("Get after update = %+v, %v", g, err)
	}
	if got := ids(search(t, s, memory.Query{NamespacePath: "/main/u1/", Text: "mint"})); !reflect.DeepEqual(got, []string{"upd-1"}) {
		t.Fatalf("search after update = %v", got)
	}
}
