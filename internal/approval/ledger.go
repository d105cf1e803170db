package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/tool"
)

// Entry types in the ledger.
const (
	EntryRequest  = "request"  // an ask verdict opened a request
	EntryDecision = "decision" // an operator approved or denied a request
	EntryExecute  = "execute"  // a tool call started (allowed, or an approved request consumed)
	EntryResult   = "result"   // a tool call finished
	EntryDeny     = "deny"     // a call or an authorization was refused
	EntryRules    = "rules"    // rules were saved; open approvals are invalidated
	EntryYolo     = "yolo"     // a YOLO window was opened (or closed with duration 0)
	EntryReset    = "reset"    // first entry after an operator reset of a broken ledger
)

// genesis is the prev of the first entry.
var genesis = strings.Repeat("0", 64)

// callRecord is the bound part of a call as written to the ledger.
type callRecord struct {
	AgentID   string     `json:"agent_id"`
	ActorID   string     `json:"actor_id"`
	SessionID string     `json:"session_id"`
	Tool      string     `json:"tool"`
	Class     tool.Class `json:"class"`
	ArgsHash  string     `json:"args_hash"`
}

// reqRecord is a Request as persisted.
type reqRecord struct {
	ID           string          `json:"id"`
	AgentID      string          `json:"agent_id"`
	ActorID      string          `json:"actor_id"`
	SessionID    string          `json:"session_id"`
	Channel      string          `json:"channel,omitempty"`
	Tool         string          `json:"tool"`
	Class        tool.Class      `json:"class"`
	ArgsHash     string          `json:"args_hash"`
	Args         json.RawMessage `json:"args"`
	CreatedAt    time.Time       `json:"created_at"`
	ExpiresAt    time.Time       `json:"expires_at"`
	RulesVersion int64           `json:"rules_version"`
	Reason       string          `json:"reason,omitempty"`
	Resume       json.RawMessage `json:"resume,omitempty"`
}

// entry is one ledger line.
type entry struct {
	Seq  int64     `json:"seq"`
	At   time.Time `json:"at"`
	Type string    `json:"type"`
	Prev string    `json:"prev"`
	Hash string    `json:"hash,omitempty"`

	Request   *reqRecord  `json:"request,omitempty"`
	RequestID string      `json:"request_id,omitempty"`
	Approved  *bool       `json:"approved,omitempty"`
	By        string      `json:"by,omitempty"`
	Binding   string      `json:"binding,omitempty"`
	Call      *callRecord `json:"call,omitempty"`
	Reason    string      `json:"reason,omitempty"`

	ExecSeq    int64  `json:"exec_seq,omitempty"`
	OK         *bool  `json:"ok,omitempty"`
	OutputHash string `json:"output_sha256,omitempty"`
	Error      string `json:"error,omitempty"`

	Rules        map[string]Rule `json:"rules,omitempty"`
	RulesVersion int64           `json:"rules_version,omitempty"`

	Until      *time.Time `json:"until,omitempty"`
	DurationMS int64      `json:"duration_ms,omitempty"`

	Archived       string `json:"archived,omitempty"`
	ArchivedSHA256 string `json:"archived_sha256,omitempty"`
	BrokenLine     int    `json:"broken_line,omitempty"`
	LastGoodHash   string `json:"last_good_hash,omitempty"`
}

// encode fills e.Hash and returns the canonical line including '\n'.
func encode(e *entry) ([]byte, error) {
	e.Hash = ""
	e.At = e.At.UTC()
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("approval: encode entry: %w", err)
	}
	n, err := parse(raw)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(raw) + 80)
	write(&buf, n)
	sum := sha256.Sum256(buf.Bytes())
	e.Hash = hex.EncodeToString(sum[:])
	n.obj = append(n.obj, member{key: "hash", val: &node{k: kStr, str: e.Hash}})
	buf.Reset()
	write(&buf, n)
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// BadEntry locates the first entry that failed verification.
type BadEntry struct {
	Line   int    `json:"line"`   // 1-based line number in the ledger
	Seq    int64  `json:"seq"`    // the seq the line claims, 0 if unreadable
	Reason string `json:"reason"` // e.g. "hash mismatch", "prev does not match line 3"
}

// VerifyReport is the outcome of verifying a ledger.
type VerifyReport struct {
	Path     string    `json:"path"`
	OK       bool      `json:"ok"`
	Entries  int       `json:"entries"`   // entries verified good (before any bad one)
	HeadHash string    `json:"head_hash"` // hash of the last good entry
	HeadSeq  int64     `json:"head_seq"`
	FirstBad *BadEntry `json:"first_bad,omitempty"`
}

// Summary describes a failed report in one line, "" when OK.
func (r VerifyReport) Summary() string {
	if r.FirstBad == nil {
		return ""
	}
	return fmt.Sprintf("ledger %s: line %d: %s", r.Path, r.FirstBad.Line, r.FirstBad.Reason)
}

// decodeLine verifies one line (without its '\n') against the chain head
// and returns the entry. The line must be byte-identical to its own RFC 8785
// canonical form, so any single-byte change is either a syntax error, a
// non-canonical form or a different value, and a different value changes the
// hash.
func decodeLine(line []byte, prevHash string, prevSeq int64) (*entry, error) {
	if len(line) == 0 {
		return nil, errors.New("empty line")
	}
	n, err := parse(line)
	if err != nil {
		return nil, fmt.Errorf("not canonical JSON: %v", err)
	}
	var buf bytes.Buffer
	buf.Grow(len(line))
	write(&buf, n)
	if !bytes.Equal(buf.Bytes(), line) {
		return nil, errors.New("not in RFC 8785 canonical form")
	}
	if n.k != kObj {
		return nil, errors.New("entry is not an object")
	}
	var e entry
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("bad entry: %v", err)
	}
	claimed := e.Hash
	if len(claimed) != 64 {
		return nil, errors.New("missing or malformed hash")
	}
	// Recompute over the canonical form without "hash".
	buf.Reset()
	write(&buf, n.without("hash"))
	sum := sha256.Sum256(buf.Bytes())
	if hex.EncodeToString(sum[:]) != claimed {
		return nil, errors.New("hash mismatch (entry altered)")
	}
	if e.Prev != prevHash {
		return nil, errors.New("prev does not match the previous entry's hash (chain broken)")
	}
	if e.Seq != prevSeq+1 {
		return nil, fmt.Errorf("seq %d follows %d (entry missing or reordered)", e.Seq, prevSeq)
	}
	return &e, nil
}

// VerifyLedger reads and verifies the ledger at path without modifying it:
// canonical form, hashes, the prev chain, sequence numbers and the
// semantics of every entry (a decision names an existing open request with
// a matching binding, a request is consumed at most once, …). A missing file
// verifies as empty. The error is for I/O only; a bad ledger gives a report
// with OK false and FirstBad set.
//
// When <dir>/ledger.lock exists it is locked while reading, so a line being
// appended by a running server is never mistaken for a torn write.
func VerifyLedger(path string) (VerifyReport, error) {
	if lf, err := os.Open(filepath.Join(filepath.Dir(path), "ledger.lock")); err == nil {
		if lockFile(lf) == nil {
			defer unlockFile(lf)
		}
		defer lf.Close()
	}
	return verifyFile(path)
}

// verifyFile is VerifyLedger without taking the lock (the gate holds it).
func verifyFile(path string) (VerifyReport, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return VerifyReport{Path: path, OK: true, HeadHash: genesis}, nil
	}
	if err != nil {
		return VerifyReport{Path: path}, fmt.Errorf("approval: read ledger: %w", err)
	}
	return VerifyBytes(b, path), nil
}

// VerifyBytes verifies ledger content b (as read from path, which is only
// used in the report).
func VerifyBytes(b []byte, path string) VerifyReport {
	return newLedgerState().load(b, path)
}
