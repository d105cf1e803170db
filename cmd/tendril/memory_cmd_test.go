package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

// runRoot runs the tendril command line with args in-process and returns
// what it printed (stdout and stderr together) and its error.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestMemoryCLI(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	st, err := sqlitestore.Open(home, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := memory.MustNamespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: "telegram:7"})
	rec, _ := st.Put(ctx, memory.Record{Namespace: ns, Strategy: memory.StrategyUserPreference, Content: "I only use organic fertiliser",
		Metadata: map[string]any{"type": "preference"}})
	st.Put(ctx, memory.Record{Namespace: ns, Content: "has a fig tree", Metadata: map[string]any{"plants": []string{"fig"}}})
	st.AppendEvents(ctx, []memory.Event{{ActorID: "telegram:7", SessionID: "s1", Text: "the fig leaves have rust", Timestamp: time.Now()}})
	st.Close()
	sessDir := filepath.Join(home, "agents", "main", "sessions")
	os.MkdirAll(sessDir, 0o700)
	sessFile := filepath.Join(sessDir, "telegram_7.jsonl")
	os.WriteFile(sessFile, []byte("{}\n"), 0o600)

	out, err := runRoot(t, "--home", home, "memory", "search", "organic fertiliser", "--actor", "telegram:7", "--explain")
	if err != nil || !strings.Contains(out, rec.ID) || !strings.Contains(out, "explain:") || !strings.Contains(out, "[Explicit]") {
		t.Fatalf("search: %v\n%s", err, out)
	}
	out, err = runRoot(t, "--home", home, "memory", "search", "fig", "--actor", "telegram:7", "--filter", "plants:CONTAINS:fig", "--json")
	var hits []memory.Hit
	if err != nil || json.Unmarshal([]byte(out), &hits) != nil || len(hits) != 1 || hits[0].Record.Content != "has a fig tree" {
		t.Fatalf("filtered search: %v\n%s", err, out)
	}
	_, err = runRoot(t, "--home", home, "memory", "search", "fig", "--actor", "telegram:7", "--filter", "mood:EQUALS_TO:x")
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("undeclared filter key: %v, want usage error", err)
	}
	if _, err := runRoot(t, "--home", home, "memory", "search", "fig"); !errors.As(err, &ue) {
		t.Fatalf("missing --actor: %v", err)
	}
	if _, err := runRoot(t, "--home", home, "memory", "search", "  ", "--actor", "telegram:7"); !errors.As(err, &ue) || !strings.Contains(err.Error(), "memory list") {
		t.Fatalf("empty query: %v, want a usage error pointing at memory list", err)
	}
	// Punctuation or emoji only: the same CLI hint, not the API's.
	for _, q := range []string{"!!!", "🌱🌱"} {
		if _, err := runRoot(t, "--home", home, "memory", "search", q, "--actor", "telegram:7"); !errors.As(err, &ue) || !strings.Contains(err.Error(), "tendril memory list") {
			t.Fatalf("search %q: %v, want the usage error naming `tendril memory list`", q, err)
		}
	}
	out, err = runRoot(t, "--home", home, "memory", "show", rec.ID, "--json")
	if err != nil || !strings.Contains(out, "organic") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	out, err = runRoot(t, "--home", home, "memory", "list", "--actor", "telegram:7")
	if err != nil || !strings.Contains(out, "has a fig tree") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if out, err = runRoot(t, "--home", home, "memory", "rebuild"); err != nil || !strings.Contains(out, "1 actor") {
		t.Fatalf("rebuild: %v\n%s", err, out)
	}
	exp := filepath.Join(t.TempDir(), "exp")
	if out, err = runRoot(t, "--home", home, "memory", "export", "--format", "md", "--out", exp); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(exp, "telegram%3A7", "semantic.md")); err != nil {
		t.Fatalf("export missing semantic.md: %v", err)
	}
	// A typo names an actor with nothing stored: said so, not "forgot".
	out, err = runRoot(t, "--home", home, "memory", "forget", "--actor", "telegram:77")
	if err != nil || !strings.Contains(out, `nothing stored for actor "telegram:77"`) || strings.Contains(out, "forgot") {
		t.Fatalf("forget of an unknown actor: %v\n%s", err, out)
	}
	out, err = runRoot(t, "--home", home, "memory", "forget", "--actor", "telegram:7", "--sessions")
	if err != nil || !strings.Contains(out, "verification search found 0 items") || !strings.Contains(out, "1 session(s)") ||
		!strings.Contains(out, "removed 2 record(s), 1 event(s)") || strings.Contains(out, "nothing stored") {
		t.Fatalf("forget: %v\n%s", err, out)
	}
	if _, err := os.Stat(sessFile); !os.IsNotExist(err) {
		t.Fatalf("session file survived: %v", err)
	}
	out, _ = runRoot(t, "--home", home, "memory", "search", "organic fig rust", "--actor", "telegram:7", "--json")
	if strings.TrimSpace(out) != "[]" {
		t.Fatalf("after forget: %s", out)
	}
}

func TestEvalLocomoCLI(t *testing.T) {
	data := filepath.Join(t.TempDir(), "l.json")
	os.WriteFile(data, []byte(`[{"sample_id":"c","conversation":{"speaker_a":"A","speaker_b":"B",
	"session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[{"speaker":"A","dia_id":"D1:1","text":"I bought a red bike"},
	{"speaker":"B","dia_id":"D1:2","text":"nice"}]},"qa":[{"question":"What colour is A's bike?","answer":"red","evidence":["D1:1"],"category":4}]}]`), 0o600)
	out, err := runRoot(t, "eval", "locomo", "--data", data, "--json")
	var js map[string]any
	if err != nil || json.Unmarshal([]byte(out), &js) != nil || js["questions"].(float64) != 1 {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	if _, err := runRoot(t, "eval", "locomo"); err == nil {
		t.Fatal("missing --data accepted")
	}
	// --folds is checked against the file's conversations before anything
	// runs: more folds than conversations, and (events) anything but
	// leave-one-conversation-out, are usage errors that name the count
	for _, folds := range []string{"2", "6"} {
		_, err := runRoot(t, "eval", "locomo", "--data", data, "--folds", folds)
		if err == nil || !strings.Contains(err.Error(), "holds 1 conversation;") || !strings.Contains(err.Error(), "needs at least 2") {
			t.Fatalf("--folds %s on one conversation: %v", folds, err)
		}
	}
	// two conversations: more folds than that names the count (and the
	// choice that works, which exists here)
	two := filepath.Join(t.TempDir(), "two.json")
	b, _ := os.ReadFile(data)
	conv := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(b)), "["), "]")
	os.WriteFile(two, []byte("["+conv+","+strings.Replace(conv, `"sample_id":"c"`, `"sample_id":"d"`, 1)+"]"), 0o600)
	if _, err := runRoot(t, "eval", "locomo", "--data", two, "--folds", "3"); err == nil || !strings.Contains(err.Error(), "holds 2 conversations") || !strings.Contains(err.Error(), "--folds 2 is leave-one-conversation-out") {
		t.Fatalf("--folds 3 on two conversations: %v", err)
	}
}

// A hand edit that breaks an entry is reported by rebuild (file and line),
// not only in a log: the entry stays in its file and out of the index.
func TestMemoryRebuildReportsSkippedEntries(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	st, err := sqlitestore.Open(home, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := memory.MustNamespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: "api:me"})
	for _, c := range []string{"has a fig tree", "waters the lawn on sundays"} {
		if _, err := st.Put(context.Background(), memory.Record{Namespace: ns, Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	file := filepath.Join(home, "memory", "api%3Ame", "semantic.md")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// break the metadata of the first record entry
	const mark = "<!-- tendril:record {"
	i := strings.Index(string(data), mark)
	if i < 0 {
		t.Fatalf("no record comment in\n%s", data)
	}
	broken := string(data[:i+len(mark)]) + "not json, " + string(data[i+len(mark):])
	os.WriteFile(file, []byte(broken), 0o600)
	out, err := runRoot(t, "--home", home, "memory", "rebuild")
	if err != nil || !strings.Contains(out, "warning: api:me: semantic.md:") || !strings.Contains(out, "1 Markdown warning(s)") {
		t.Fatalf("rebuild after a broken edit: %v\n%s", err, out)
	}
	if after, _ := os.ReadFile(file); string(after) != broken {
		t.Fatal("rebuild changed the file holding the broken entry")
	}
	out, err = runRoot(t, "--home", home, "memory", "rebuild")
	if err != nil || !strings.Contains(out, "warning:") {
		t.Fatalf("second rebuild forgot the warning: %v\n%s", err, out)
	}
}
