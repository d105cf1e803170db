package builtin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/tool/builtin"
)

// The notes and memory tools against the real embedded store: the
// indexed-key filters (type, section, plants) apply to notes, deletes hide
// them, and actors stay apart.
func TestNotesOnSQLiteStore(t *testing.T) {
	st, err := sqlitestore.Open(t.TempDir(), sqlitestore.Options{AgentID: "main", IndexedKeys: memory.DefaultIndexedKeys(), SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	notes, search, ms := builtin.NewNotes(st), builtin.NewNotesSearch(st), builtin.NewMemorySearch(st)

	mustRun(t, notes, call("telegram:12", `{"action":"add","text":"Fig has rust spots on the lower leaves","section":"back-yard","plants":["fig"]}`))
	mustRun(t, notes, call("telegram:12", `{"action":"add","text":"Planted garlic, twenty cloves","section":"raised-bed-2","plants":["garlic"]}`))
	mustRun(t, notes, call("telegram:12", `{"action":"add","text":"Fig and rose both fed with compost","section":"back-yard","plants":["fig","rose"]}`))
	mustRun(t, notes, call("telegram:123", `{"action":"add","text":"My fig fruits split after rain","plants":["fig"]}`))

	tests := []struct {
		actor, args string
		want        []string
		notWant     []string
	}{
		{"telegram:12", `{"plant":"fig"}`, []string{"2 note(s)", "rust spots", "compost"}, []string{"garlic", "split"}},
		{"telegram:12", `{"section":"raised-bed-2"}`, []string{"1 note(s)", "garlic"}, []string{"Fig"}},
		{"telegram:12", `{"query":"compost","plant":"rose"}`, []string{"1 note(s)", "compost"}, []string{"rust"}},
		{"telegram:123", `{"plant":"fig"}`, []string{"1 note(s)", "split"}, []string{"rust", "compost"}},
		{"telegram:1", `{}`, []string{"No notes found."}, nil},
	}
	for _, tc := range tests {
		out := mustRun(t, search, call(tc.actor, tc.args))
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s %s: output lacks %q:\n%s", tc.actor, tc.args, w, out)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%s %s: output has %q:\n%s", tc.actor, tc.args, w, out)
			}
		}
	}

	// memory_search sees the actor's notes through its subtree, with filters.
	out := mustRun(t, ms, call("telegram:12", `{"query":"fig","filters":[{"key":"type","op":"EQUALS_TO","value":"note"},{"key":"plants","op":"CONTAINS","value":"rose"}]}`))
	if !strings.Contains(out, "compost") || strings.Contains(out, "rust") || !strings.Contains(out, "notes, id ") {
		t.Fatalf("memory_search = %s", out)
	}
	if _, err := ms.Run(context.Background(), call("telegram:12", `{"query":"fig","filters":[{"key":"colour","op":"EQUALS_TO","value":"red"}]}`)); err == nil ||
		!strings.Contains(err.Error(), "colour") {
		t.Fatalf("undeclared key: err = %v", err)
	}

	// Delete hides the note from searches; the other actor cannot delete it.
	id := between(mustRun(t, search, call("telegram:12", `{"query":"garlic"}`)), "[", "]")
	if _, err := notes.Run(context.Background(), call("telegram:123", `{"action":"delete","id":"`+id+`"}`)); err == nil {
		t.Fatal("another actor deleted the note")
	}
	mustRun(t, notes, call("telegram:12", `{"action":"delete","id":"`+id+`"}`))
	if out := mustRun(t, search, call("telegram:12", `{"query":"garlic"}`)); out != "No notes found." {
		t.Fatalf("after delete: %s", out)
	}
}

func between(s, a, b string) string {
	i := strings.Index(s, a)
	j := strings.Index(s[i+1:], b)
	if i < 0 || j < 0 {
		return ""
	}
	return s[i+1 : i+1+j]
}
