package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/tool"
	"github.com/tendrilai/tendril/internal/tool/builtin"
)

func call(actor, args string) tool.Call {
	return tool.Call{AgentID: "main", ActorID: actor, SessionID: "s-" + actor, Channel: "api", Args: json.RawMessage(args)}
}

func mustRun(t *testing.T, tl tool.Tool, c tool.Call) string {
	t.Helper()
	out, err := tl.Run(context.Background(), c)
	if err != nil {
		t.Fatalf("%s %s: %v", tl.Name(), c.Args, err)
	}
	return out
}

func TestNotes(t *testing.T) {
	st := newFakeStore()
	notes, search := builtin.NewNotes(st), builtin.NewNotesSearch(st)
	if notes.Class() != tool.ClassWrite || search.Class() != tool.ClassRead {
		t.Fatal("notes must be write class, notes_search read class")
	}

	out := mustRun(t, notes, call("telegram:12", `{"action":"add","text":"Fig has rust spots on lower leaves","section":" Back-Yard ","plants":["Fig"," fig ",""]}`))
	if out != "Saved note rec-1 (section: back-yard; plants: fig)." {
		t.Fatalf("add = %q", out)
	}
	rec, _ := st.Get(context.Background(), "rec-1")
	if rec.Namespace != "/main/telegram:12/notes/" || rec.Strategy != memory.StrategySemantic || rec.Metadata["type"] != "note" ||
		rec.Metadata["section"] != "back-yard" || strings.Join(rec.Metadata["plants"].([]string), ",") != "fig" || rec.Sources[0] != "s-telegram:12" {
		t.Fatalf("stored record = %+v", rec)
	}
	mustRun(t, notes, call("telegram:12", `{"action":"add","text":"Garlic planted, 20 cloves","section":"raised-bed-2","plants":["garlic"]}`))
	// Actor 123 shares a prefix with actor 12 and must never see 12's notes.
	mustRun(t, notes, call("telegram:123", `{"action":"add","text":"My fig fruits are splitting","plants":["fig"]}`))

	out = mustRun(t, search, call("telegram:12", `{"plant":"FIG"}`))
	if !strings.Contains(out, "1 note(s)") || !strings.Contains(out, "[rec-1] 2026-11-30 section=back-yard plants=fig: Fig has rust spots") {
		t.Fatalf("search by plant = %q", out)
	}
	q := st.lastQuery()
	if q.Namespace != "/main/telegram:12/notes/" || q.NamespacePath != "" || len(q.Filters) != 2 ||
		q.Filters[0] != (memory.Filter{Key: "type", Op: memory.OpEquals, Value: "note"}) ||
		q.Filters[1] != (memory.Filter{Key: "plants", Op: memory.OpContains, Value: "fig"}) {
		t.Fatalf("query = %+v", q)
	}
	out = mustRun(t, search, call("telegram:12", `{"query":"garlic","section":"raised-bed-2"}`))
	if !strings.Contains(out, "Garlic planted") || strings.Contains(out, "Fig") {
		t.Fatalf("search by query+section = %q", out)
	}
	out = mustRun(t, search, call("telegram:123", `{}`))
	if !strings.Contains(out, "1 note(s)") || !strings.Contains(out, "splitting") {
		t.Fatalf("actor 123 list = %q", out)
	}

	// Actor 123 can neither delete nor learn about actor 12's note.
	_, err := notes.Run(context.Background(), call("telegram:123", `{"action":"delete","id":"rec-1"}`))
	if err == nil || err.Error() != `no note "rec-1" for this user` {
		t.Fatalf("cross-actor delete: err = %v", err)
	}
	if r, _ := st.Get(context.Background(), "rec-1"); r.Status != memory.StatusActive {
		t.Fatal("cross-actor delete changed the note")
	}
	// The owner can; the note leaves default searches.
	if out := mustRun(t, notes, call("telegram:12", `{"action":"delete","id":"rec-1"}`)); out != "Deleted note rec-1." {
		t.Fatalf("delete = %q", out)
	}
	if out := mustRun(t, search, call("telegram:12", `{"plant":"fig"}`)); out != "No notes found." {
		t.Fatalf("after delete = %q", out)
	}
	if out := mustRun(t, notes, call("telegram:12", `{"action":"delete","id":"rec-1"}`)); !strings.Contains(out, "already deleted") {
		t.Fatalf("second delete = %q", out)
	}
}

func TestNotesBadInput(t *testing.T) {
	st := newFakeStore()
	notes, search := builtin.NewNotes(st), builtin.NewNotesSearch(st)
	tests := []struct {
		tool    tool.Tool
		actor   string
		args    string
		wantErr string
	}{
		{notes, "a", `{"action":"add"}`, "non-empty text"},
		{notes, "a", `{"action":"add","text":"` + strings.Repeat("x", builtin.MaxNoteRunes+1) + `"}`, "split it"},
		{notes, "a", `{"action":"add","text":"x","plants":[` + strings.Repeat(`"p",`, 20) + `"q"]}`, "at most 20 plants"},
		{notes, "a", `{"action":"add","text":"x","section":"` + strings.Repeat("s", 65) + `"}`, "section is over 64"},
		{notes, "a", `{"action":"update","id":"x"}`, `action must be "add" or "delete"`},
		{notes, "a", `{"action":"delete"}`, "needs the note id"},
		{notes, "a", `{"action":"add","text":"x","namespace":"/main/b/notes/"}`, `unknown field "namespace"`},
		{notes, "a", `not json`, "invalid arguments"},
		{search, "a", `{"limit":51}`, "limit must be between 1 and 50"},
		{search, "a", `{"actor":"b"}`, `unknown field "actor"`},
		// Hostile actor IDs never become namespaces.
		{notes, "", `{"action":"add","text":"x"}`, "invalid agent or actor ID"},
		{search, "a\x00", `{}`, "invalid agent or actor ID"},
		{search, strings.Repeat("a", 257), `{}`, "invalid agent or actor ID"},
	}
	for _, tc := range tests {
		_, err := tc.tool.Run(context.Background(), call(tc.actor, tc.args))
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s actor %q %.60s: err = %v, want %q", tc.tool.Name(), tc.actor, tc.args, err, tc.wantErr)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.recs) != 0 {
		t.Fatalf("bad input stored %d records", len(st.recs))
	}
}

func TestMemorySearch(t *testing.T) {
	st := newFakeStore()
	ctx := context.Background()
	put := func(ns string, s memory.Strategy, content string) {
		if _, err := st.Put(ctx, memory.Record{Namespace: ns, Strategy: s, Content: content, Metadata: map[string]any{"type": "fact"}}); err != nil {
			t.Fatal(err)
		}
	}
	put("/main/u1/long_term/", memory.StrategyUserPreference, "Only uses organic fertiliser")
	put("/main/u1/long_term/", memory.StrategySemantic, "Has raised beds with fast drainage and organic compost")
	put("/main/u1/episodic/s1/", memory.StrategySummary, "Asked about petunias wilting in a heatwave")
	put("/main/u10/long_term/", memory.StrategyUserPreference, "Prefers organic sprays")
	put("/other/u1/long_term/", memory.StrategySemantic, "organic in another agent")

	ms := builtin.NewMemorySearch(st)
	out := mustRun(t, ms, call("u1", `{"query":"organic"}`))
	lines := strings.Split(out, "\n")
	if len(lines) != 2 || !strings.Contains(out, "[Explicit] Only uses organic fertiliser (user_preference, long_term, id rec-1)") ||
		!strings.Contains(out, "[Inferred] Has raised beds") || !strings.HasPrefix(lines[0], "1. [1.000]") {
		t.Fatalf("search = %q", out)
	}
	if strings.Contains(out, "sprays") || strings.Contains(out, "another agent") {
		t.Fatalf("leaked another scope: %q", out)
	}
	q := st.lastQuery()
	if q.NamespacePath != "/main/u1/" || q.Namespace != "" || q.TopK != 10 {
		t.Fatalf("query = %+v", q)
	}

	mustRun(t, ms, tool.Call{AgentID: "main", ActorID: "u1", Args: json.RawMessage(`{"query":"beds","limit":3,"strategies":["semantic"],
		"filters":[{"key":"type","op":"equals_to","value":"fact"},{"key":"createdAt","op":"AFTER","value":"2026-01-01"},
		{"key":"plants","op":"CONTAINS","value":["fig","rose"]},{"key":"section","op":"EXISTS"},{"key":"n","op":"GREATER_THAN","value":2}]}`)})
	q = st.lastQuery()
	want := []memory.Filter{
		{Key: "type", Op: memory.OpEquals, Value: "fact"},
		{Key: "createdAt", Op: memory.OpAfter, Value: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Key: "plants", Op: memory.OpContains, Value: []string{"fig", "rose"}},
		{Key: "section", Op: memory.OpExists},
		{Key: "n", Op: memory.OpGreater, Value: 2.0},
	}
	if len(q.Filters) != len(want) || q.TopK != 3 || len(q.Strategies) != 1 || q.Strategies[0] != memory.StrategySemantic {
		t.Fatalf("query = %+v", q)
	}
	for i := range want {
		got, _ := json.Marshal(q.Filters[i])
		exp, _ := json.Marshal(want[i])
		if string(got) != string(exp) {
			t.Errorf("filter %d = %s, want %s", i, got, exp)
		}
	}

	for _, tc := range []struct{ args, wantErr string }{
		{`{}`, "query is required"},
		{`{"query":"x","filters":[{"key":"a","op":"EXISTS"},{"key":"a","op":"EXISTS"},{"key":"a","op":"EXISTS"},{"key":"a","op":"EXISTS"},{"key":"a","op":"EXISTS"},{"key":"a","op":"EXISTS"}]}`, "at most 5 filters"},
		{`{"query":"x","filters":[{"key":"a","op":"LIKE","value":"x"}]}`, `unknown filter op "LIKE"`},
		{`{"query":"x","filters":[{"key":"a","op":"EQUALS_TO"}]}`, "needs a value"},
		{`{"query":"x","filters":[{"key":"createdAt","op":"BEFORE","value":"yesterday"}]}`, "not RFC 3339"},
		{`{"query":"x","filters":[{"key":"a","op":"EQUALS_TO","value":true}]}`, "must be a string, number or list"},
		{`{"query":"x","strategies":["secret"]}`, `unknown strategy "secret"`},
		{`{"query":"x","namespacePath":"/main/"}`, `unknown field "namespacePath"`},
	} {
		if _, err := ms.Run(ctx, call("u1", tc.args)); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

type fakeEpisodic struct {
	mu    sync.Mutex
	calls [][4]string
	err   error
}

func (f *fakeEpisodic) WriteEpisodic(_ context.Context, agentID, actorID, sessionID, text string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, [4]string{agentID, actorID, sessionID, text})
	if f.err != nil {
		return "", f.err
	}
	return "staged for review (importance 0.55)", nil
}

func TestMemoryWrite(t *testing.T) {
	ep := &fakeEpisodic{}
	mw := builtin.NewMemoryWrite(ep)
	if mw.Class() != tool.ClassWrite {
		t.Fatal("memory_write must be write class")
	}
	out := mustRun(t, mw, call("telegram:7", `{"text":"  Planted garlic in bed 2 on 3 March  "}`))
	if out != "memory_write: staged for review (importance 0.55)" {
		t.Fatalf("out = %q", out)
	}
	if got := ep.calls[0]; got != [4]string{"main", "telegram:7", "s-telegram:7", "Planted garlic in bed 2 on 3 March"} {
		t.Fatalf("WriteEpisodic got %q", got)
	}
	for _, tc := range []struct{ actor, args, wantErr string }{
		{"telegram:7", `{"text":""}`, "text is required"},
		{"telegram:7", `{"text":"x","actor_id":"telegram:8"}`, `unknown field "actor_id"`},
		{"telegram:7", `{"text":"` + strings.Repeat("y", builtin.MaxEpisodicRunes+1) + `"}`, "over 2000"},
		{"a\nb", `{"text":"x"}`, "invalid agent or actor ID"},
	} {
		if _, err := mw.Run(context.Background(), call(tc.actor, tc.args)); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want %q", tc.args, err, tc.wantErr)
		}
	}
	if len(ep.calls) != 1 {
		t.Fatalf("bad input reached the writer: %d calls", len(ep.calls))
	}
	ep.err = errors.New("gate closed")
	if _, err := mw.Run(context.Background(), call("x", `{"text":"hello"}`)); err == nil || err.Error() != "memory_write: gate closed" {
		t.Fatalf("writer error: %v", err)
	}
}

type stubReminders struct{}

func (stubReminders) Name() string            { return "reminders" }
func (stubReminders) Description() string     { return "reminders" }
func (stubReminders) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (stubReminders) Class() tool.Class       { return tool.ClassWrite }
func (stubReminders) Run(context.Context, tool.Call) (string, error) {
	return "", nil
}

func TestRegister(t *testing.T) {
	names := func(r *tool.Registry) string {
		var n []string
		for _, t := range r.List() {
			n = append(n, t.Name()+":"+string(t.Class()))
		}
		return strings.Join(n, ",")
	}
	tests := []struct {
		name string
		deps builtin.Deps
		want string
	}{
		{"bare", builtin.Deps{}, "weather:read"},
		{"memory", builtin.Deps{Memory: newFakeStore(), Episodic: &fakeEpisodic{}},
			"memory_search:read,memory_write:write,notes:write,notes_search:read,weather:read"},
		{"reminders seam", builtin.Deps{Reminders: stubReminders{}}, "reminders:write,weather:read"},
		{"exec off by default", builtin.Deps{Shell: builtin.ShellOptions{Timeout: time.Second}}, "weather:read"},
		{"exec on", builtin.Deps{EnableExec: true}, "shell:exec,weather:read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tool.NewRegistry()
			if err := builtin.Register(r, tc.deps); err != nil {
				t.Fatal(err)
			}
			if got := names(r); got != tc.want {
				t.Fatalf("registered %s, want %s", got, tc.want)
			}
			for _, tl := range r.List() {
				var schema map[string]any
				if err := json.Unmarshal(tl.Schema(), &schema); err != nil || schema["type"] != "object" {
					t.Errorf("%s schema is not a JSON Schema object: %v", tl.Name(), err)
				}
			}
		})
	}
	r := tool.NewRegistry()
	_ = builtin.Register(r, builtin.Deps{})
	if err := builtin.Register(r, builtin.Deps{}); !errors.Is(err, tool.ErrDuplicate) {
		t.Fatalf("second Register: err = %v, want ErrDuplicate", err)
	}
}

func TestActorPath(t *testing.T) {
	for _, tc := range []struct {
		agent, actor, want string
	}{
		{"main", "telegram:12345", "/main/telegram:12345/"},
		{"main", "web:ünïcode", "/main/web:ünïcode/"},
		{"main", "a/b", "/main/a%2Fb/"},
		{"main", "..", "/main/%2E%2E/"},
		{"main", "a%2Fb", "/main/a%252Fb/"},
		{"", "a", ""},
		{"main", "a\nb", ""},
		{"main", "a\xffb", ""},
	} {
		got, err := builtin.ActorPath(tc.agent, tc.actor)
		if got != tc.want || (tc.want == "") != errors.Is(err, builtin.ErrBadScope) {
			t.Errorf("ActorPath(%q, %q) = %q, %v; want %q", tc.agent, tc.actor, got, err, tc.want)
		}
	}
}

// Actor IDs that look like paths are one escaped segment each: none of
// them reaches actor "a"'s notes or memories.
func TestHostileActorIDsStayInTheirSegment(t *testing.T) {
	st := newFakeStore()
	notes, search, ms := builtin.NewNotes(st), builtin.NewNotesSearch(st), builtin.NewMemorySearch(st)
	mustRun(t, notes, call("a", `{"action":"add","text":"secret fig note","plants":["fig"]}`))
	if _, err := st.Put(context.Background(), memory.Record{Namespace: "/main/a/long_term/", Strategy: memory.StrategySemantic, Content: "secret fig fact"}); err != nil {
		t.Fatal(err)
	}
	for _, actor := range []string{"a/notes", "a/..", "..", ".", "a/", "/a", "a%2F", "a/long_term", "*", "a\\"} {
		if out := mustRun(t, search, call(actor, `{}`)); out != "No notes found." {
			t.Errorf("actor %q notes_search = %q", actor, out)
		}
		if out := mustRun(t, ms, call(actor, `{"query":"secret fig"}`)); !strings.HasPrefix(out, "Nothing found") {
			t.Errorf("actor %q memory_search = %q", actor, out)
		}
		if _, err := notes.Run(context.Background(), call(actor, `{"action":"delete","id":"rec-1"}`)); err == nil {
			t.Errorf("actor %q deleted a's note", actor)
		}
		q := st.lastQuery()
		if !strings.HasPrefix(q.NamespacePath, "/main/") || strings.Count(q.NamespacePath, "/") != 3 {
			t.Errorf("actor %q searched %q: not one segment", actor, q.NamespacePath)
		}
	}
}
