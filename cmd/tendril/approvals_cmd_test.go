package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// "approvals yolo --for" beyond the cap is a usage error in the CLI's
// terms (the flag, in minutes), not the API's "seconds … by is required",
// and writes nothing; within the cap the window opens.
func TestApprovalsYoloForCap(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	ledger := filepath.Join(home, "approvals", "ledger.jsonl")
	for _, d := range []string{"10h", "31m", "30m1s"} {
		out, err := runRoot(t, "--home", home, "approvals", "yolo", "--for", d)
		var ue usageError
		if !errors.As(err, &ue) || err.Error() != "--for must be at most 30m (the YOLO window's cap)" {
			t.Fatalf("--for %s: %v (%T), want the usage error \"--for must be at most 30m …\"\n%s", d, err, err, out)
		}
		if strings.Contains(err.Error()+out, "seconds") || strings.Contains(err.Error()+out, "by is required") {
			t.Fatalf("--for %s: the API's wording leaked: %v\n%s", d, err, out)
		}
		if b, _ := os.ReadFile(ledger); bytes.Contains(b, []byte(`"yolo"`)) {
			t.Fatalf("--for %s wrote a YOLO entry:\n%s", d, b)
		}
	}
	out, err := runRoot(t, "--home", home, "approvals", "yolo", "--for", "30m")
	if err != nil || !strings.Contains(out, "YOLO window open until") || strings.Contains(out, "capped") {
		t.Fatalf("--for 30m: %v\n%s", err, out)
	}
	b, err := os.ReadFile(ledger)
	if err != nil || !bytes.Contains(b, []byte(`"by":"cli:`)) {
		t.Fatalf("the YOLO entry does not name the CLI's operator: %v\n%s", err, b)
	}
}
