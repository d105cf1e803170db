package locomo

import (
	"context"
	"os"
	"testing"
)

// TestDevSplit runs the whole dev split when LOCOMO_DATA names the file
// (e.g. ../shared/data/locomo/locomo-dev.json); it is skipped otherwise.
func TestDevSplit(t *testing.T) {
	path := os.Getenv("LOCOMO_DATA")
	if path == "" {
		t.Skip("set LOCOMO_DATA to the LoCoMo JSON file to run the dev split")
	}
	convs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"bm25", ""} {
		rep, err := Run(context.Background(), convs, Options{Baseline: b})
		if err != nil {
			t.Fatal(err)
		}
		rep.WriteText(os.Stdout)
		if rep.Questions == 0 {
			t.Fatal("no questions evaluated")
		}
	}
}

// TestDevSplitRecords runs the records level of the dev split when
// LOCOMO_DATA is set.
func TestDevSplitRecords(t *testing.T) {
	path := os.Getenv("LOCOMO_DATA")
	if path == "" {
		t.Skip("set LOCOMO_DATA to the LoCoMo JSON file to run the dev split")
	}
	ev, err := Evaluate(context.Background(), EvalOptions{Data: path, Level: LevelRecords})
	if err != nil {
		t.Fatal(err)
	}
	ev.WriteText(os.Stdout)
	if ev.Tendril.Questions == 0 {
		t.Fatal("no questions evaluated")
	}
}
