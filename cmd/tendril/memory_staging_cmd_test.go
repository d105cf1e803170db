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

	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

// runTendril runs the root command in-process and returns stdout and the
// error Execute returned.
func runTendril(t *testing.T, home string, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"--home", home}, args...))
	err := root.Execute()
	return out.String(), err
}

func TestMemoryStagingCLI(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	// Store 0.9 sends ordinary preferences (≈0.7–0.8) to staging.
	if err := os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"memory": {"storeThreshold": 0.9}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(home, assistant.MemoryStoreOptions(cfg))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(st, assistant.PipelineOptions(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, s := range []string{"I like jazz", "I like rock music"} {
		if err := p.RecordTurn(ctx, cfg.AgentID, "u1", "s1", []memory.Event{{Role: "user", Text: s}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx, cfg.AgentID, "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteEpisodic(ctx, cfg.AgentID, "u1", "s1", "Remember that the user has a lemon tree in the garden"); err != nil {
		t.Fatal(err)
	}
	p.Close()
	st.Close()

	out, err := runTendril(t, home, "memory", "staging", "list", "--actor", "u1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var listed struct{ Staged []memory.Record }
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var jazz, rock, note string
	for _, r := range listed.Staged {
		switch r.Content {
		case "Remember that the user has a lemon tree in the garden":
			note = r.ID
		case "I like jazz":
			jazz = r.ID
		case "I like rock music":
			rock = r.ID
		}
	}
	if jazz == "" || rock == "" || note == "" {
		t.Fatalf("staged: %s", out)
	}
	if out, err := runTendril(t, home, "memory", "staging", "list"); err != nil || !strings.Contains(out, "I like jazz") || !strings.Contains(out, "SCORE") {
		t.Fatalf("table: %q %v", out, err)
	}
	if out, err := runTendril(t, home, "memory", "staging", "approve", jazz); err != nil || !strings.Contains(out, "approved "+jazz) {
		t.Fatalf("approve: %q %v", out, err)
	}
	if out, err := runTendril(t, home, "memory", "staging", "reject", rock); err != nil || !strings.Contains(out, "rejected "+rock) {
		t.Fatalf("reject: %q %v", out, err)
	}
	out, _ = runTendril(t, home, "memory", "staging", "list", "--json")
	if strings.Contains(out, `"I like jazz"`) || strings.Contains(out, `"I like rock music"`) {
		t.Fatalf("still staged after review: %s", out)
	}
	// Errors: approving twice is an error (exit 1); missing ID is usage (exit 2).
	if _, err := runTendril(t, home, "memory", "staging", "approve", jazz); err == nil {
		t.Fatal("approving an active record succeeded")
	}
	var ue usageError
	if _, err := runTendril(t, home, "memory", "staging", "reject"); !errors.As(err, &ue) {
		t.Fatalf("reject without id: %v, want a usage error", err)
	}
	if _, err := runTendril(t, home, "memory", "staging", "approve", note); err != nil {
		t.Fatal(err)
	}
	// Harvest: the approved lemon-tree note becomes a long-term record, once.
	out, err = runTendril(t, home, "memory", "harvest", "--actor", "u1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	// Store 0.9 stages the harvested record too: it counts as new.
	var h struct{ New int }
	if err := json.Unmarshal([]byte(out), &h); err != nil || h.New != 1 {
		t.Fatalf("harvest: %s %v", out, err)
	}
	if out, err = runTendril(t, home, "memory", "harvest"); err != nil || !strings.Contains(out, "u1: 0 new record(s)") {
		t.Fatalf("second harvest: %q %v", out, err)
	}
	if _, err := runTendril(t, home, "memory", "harvest", "--llm"); !errors.As(err, &ue) {
		t.Fatalf("harvest --llm without a model: %v, want a usage error", err)
	}
	if out, err := runTendril(t, home, "memory", "staging", "--help"); err != nil || !strings.Contains(out, "never proposed again") {
		t.Fatalf("help: %q %v", out, err)
	}
}
