package approval_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/approval/approvaltest"
)

// The file backend passes the conformance suite every ledger backend runs.
func TestFileLedgerConformance(t *testing.T) {
	approvaltest.Exercise(t, func(t *testing.T) approvaltest.Ledger {
		dir := t.TempDir()
		return approvaltest.Ledger{
			Open: func(t *testing.T, opts approval.Options) *approval.Gate {
				g, err := approval.Open(dir, opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { g.Close() })
				return g
			},
			Tamper: func(t *testing.T, seq int64) {
				path := filepath.Join(dir, "ledger.jsonl")
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				lines := bytes.SplitAfter(b, []byte{'\n'})
				start := len(bytes.Join(lines[:seq-1], nil))
				b[start+len(lines[seq-1])/2] ^= 0x01
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}
