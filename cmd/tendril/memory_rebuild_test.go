package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

// Notes appended by hand to a layer file, after the blank line that ends
// the last entry, are named by rebuild (file and line) and do not become
// part of that record.
func TestMemoryRebuildReportsStrayLines(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	st, err := sqlitestore.Open(home, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := memory.MustNamespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: "api:me"})
	rec, err := st.Put(context.Background(), memory.Record{Namespace: ns, Content: "has a fig tree"})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(home, "memory", "api%3Ame", "semantic.md")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Count(string(data), "\n") + 1
	os.WriteFile(file, append(data, "TODO: ask about the roses\nrm -rf the weeds\n"...), 0o600)

	out, err := runRoot(t, "--home", home, "memory", "rebuild")
	want := "warning: api:me: semantic.md:" + strconv.Itoa(line) + ": 2 lines (to line " + strconv.Itoa(line+1) + ") ignored, they belong to no entry: text after the end of record " + rec.ID
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "1 Markdown warning(s)") {
		t.Fatalf("rebuild: %v\n%s\nwant %q", err, out, want)
	}
	out, err = runRoot(t, "--home", home, "memory", "show", rec.ID, "--json")
	var r memory.Record
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.Content != "has a fig tree" {
		t.Fatalf("show after rebuild: %v\n%s\nwant the content without the appended lines", err, out)
	}
}
