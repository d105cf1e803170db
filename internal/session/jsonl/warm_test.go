package jsonl_test

import (
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
)

// Recent lists the sessions of every agent by the time their files were
// last written, most recent first, at most n and at most MaxOpen, and
// skips empty sessions.
func TestRecent(t *testing.T) {
	dir := t.TempDir()
	st, err := jsonl.Open(dir, jsonl.Options{Fsync: jsonl.FsyncNever, MaxOpen: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys := []session.Key{
		{AgentID: "main", Channel: "api", ID: "a"},
		{AgentID: "main", Channel: "telegram", ID: "b"},
		{AgentID: "other", Channel: "api", ID: "c"},
		{AgentID: "main", Channel: "api", ID: "d"},
	}
	base := time.Now().Add(-time.Hour)
	// Written in order a, b, c, d, then a again: a is the most recent.
	mod := map[session.Key]time.Time{keys[0]: base.Add(4 * time.Minute), keys[1]: base.Add(time.Minute),
		keys[2]: base.Add(2 * time.Minute), keys[3]: base.Add(3 * time.Minute)}
	for i, k := range keys {
		if err := st.Append(ctx, k, node("n"+k.ID, "", "hello")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(jsonl.PathFor(dir, k), mod[k], mod[k]); err != nil {
			t.Fatal(i, err)
		}
	}
	// An empty session file is not worth warming.
	empty := session.Key{AgentID: "main", Channel: "api", ID: "empty"}
	if err := os.WriteFile(jsonl.PathFor(dir, empty), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	got, err := st.Recent(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []session.Key{keys[0], keys[3]}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Recent(2) = %v, want %v", got, want)
	}
	got, err = st.Recent(ctx, 10) // capped at MaxOpen
	if err != nil {
		t.Fatal(err)
	}
	if want := []session.Key{keys[0], keys[3], keys[2]}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Recent(10) = %v, want %v", got, want)
	}
	if got, err := st.Recent(ctx, 0); err != nil || len(got) != 0 {
		t.Fatalf("Recent(0) = %v, %v; want none", got, err)
	}

	// What warming reads is what a turn then reads, from the same store.
	nodes, err := session.BuildContext(ctx, st, keys[0], session.Limits{MaxHistoryMessages: 10})
	if err != nil || len(nodes) != 1 || nodes[0].ID != "na" {
		t.Fatalf("BuildContext after Recent = %v, %v", nodes, err)
	}
}
