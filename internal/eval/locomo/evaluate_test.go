package locomo

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestEvaluateFromFile(t *testing.T) {
	data := filepath.Join(t.TempDir(), "l.json")
	if err := os.WriteFile(data, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls [][2]int
	ev, err := Evaluate(context.Background(), EvalOptions{Data: data, Ks: []int{1, 10}, Progress: func(d, n int) { calls = append(calls, [2]int{d, n}) }})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Baseline != nil || ev.Tendril == nil || ev.Tendril.Questions != 3 || ev.Tendril.Baseline != "" {
		t.Fatalf("evaluation %+v", ev)
	}
	if !reflect.DeepEqual(calls, [][2]int{{1, 3}, {2, 3}, {3, 3}}) {
		t.Fatalf("progress %v", calls)
	}
	js, ok := ev.JSON().(map[string]any)
	if !ok || js["questions"] != 3 {
		t.Fatalf("single-run JSON is the report's own: %v", ev.JSON())
	}
	var b strings.Builder
	ev.WriteText(&b)
	if !strings.Contains(b.String(), "ranking tendril") || strings.Contains(b.String(), "same run") {
		t.Fatalf("text %s", b.String())
	}
}

func TestEvaluateBaselineSideBySide(t *testing.T) {
	convs, _ := Parse([]byte(sample))
	for _, base := range []string{"bm25", "fts5"} {
		dir := t.TempDir()
		var calls int
		ev, err := Evaluate(context.Background(), EvalOptions{Conversations: convs, Baseline: base, Dir: dir, Progress: func(d, n int) { calls++ }})
		if err != nil {
			t.Fatal(err)
		}
		if ev.Baseline == nil || ev.Baseline.Baseline != base || ev.Tendril.Baseline != "" {
			t.Fatalf("%s: %+v", base, ev)
		}
		if calls != 6 {
			t.Fatalf("%s: %d progress calls, want 3 per run", base, calls)
		}
		for _, sub := range []string{"baseline", "tendril"} {
			if _, err := os.Stat(filepath.Join(dir, sub)); err != nil {
				t.Fatalf("%s: run dir %s: %v", base, sub, err)
			}
		}
		js := ev.JSON().(map[string]any)
		if len(js) != 2 || js["baseline_"+base] == nil || js["tendril"] == nil {
			t.Fatalf("%s: JSON keys %v", base, js)
		}
		var b strings.Builder
		ev.WriteText(&b)
		out := b.String()
		if strings.Index(out, "ranking baseline "+base) > strings.Index(out, "ranking tendril") ||
			!strings.Contains(out, "tendril vs "+base+" (same run): recall@10 1.000 vs 1.000 (×1.00)") {
			t.Fatalf("%s: text\n%s", base, out)
		}
	}
}

func TestEvaluateRecords(t *testing.T) {
	convs, _ := Parse([]byte(sample))
	dir := t.TempDir()
	ev, err := Evaluate(context.Background(), EvalOptions{Conversations: convs, Level: LevelRecords, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Tendril.Level != LevelRecords || ev.Tendril.Questions != 3 {
		t.Fatalf("records %+v", ev.Tendril)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs-conv-x.db")); err != nil {
		t.Fatalf("the pipeline's job database: %v", err)
	}
}

func TestEvaluateErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Evaluate(ctx, EvalOptions{}); err == nil {
		t.Fatal("no data accepted")
	}
	if _, err := Evaluate(ctx, EvalOptions{Data: filepath.Join(t.TempDir(), "missing.json")}); err == nil {
		t.Fatal("missing file accepted")
	}
	convs, _ := Parse([]byte(sample))
	if _, err := Evaluate(ctx, EvalOptions{Conversations: convs, Level: "x"}); err == nil {
		t.Fatal("bad level accepted")
	}
	if _, err := Evaluate(ctx, EvalOptions{Conversations: convs, Baseline: "x"}); err == nil {
		t.Fatal("bad baseline accepted")
	}
}

func TestParseKs(t *testing.T) {
	if ks, err := ParseKs("5, 10,20 ,50"); err != nil || !reflect.DeepEqual(ks, []int{5, 10, 20, 50}) {
		t.Fatalf("ks %v %v", ks, err)
	}
	for _, bad := range []string{"", "0", "5,-1", "5,,10", "x"} {
		if _, err := ParseKs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
