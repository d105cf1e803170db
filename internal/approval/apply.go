package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// MaxYolo caps a YOLO window (SPEC §6.3).
const MaxYolo = 30 * time.Minute

var requestIDRE = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`)

// ValidRequestID reports whether s has the form of a request ID (a ULID:
// 26 Crockford base-32 characters).
func ValidRequestID(s string) bool { return requestIDRE.MatchString(s) }

type reqState struct {
	rec       reqRecord
	decided   bool
	approved  bool
	by        string
	decidedAt time.Time
	executed  bool
	execSeq   int64
}

type decisionEvent struct {
	seq      int64
	id       string
	approved bool
}

// ledgerState is the state rebuilt by replaying ledger entries.
type ledgerState struct {
	reqs         map[string]*reqState
	order        []string
	rules        map[string]Rule
	rulesVersion int64
	yolo         *entry // last yolo entry
	execs        map[int64]bool
	head         string
	seq          int64
	offset       int64 // bytes of the good prefix
	lines        int
	decisions    []decisionEvent // drained by the gate to fire OnDecision
	firstType    string          // type of entry 1
}

func newLedgerState() *ledgerState {
	return &ledgerState{reqs: map[string]*reqState{}, rules: map[string]Rule{}, execs: map[int64]bool{}, head: genesis}
}

// load replays b (the whole file, or a tail when continuing) and reports.
func (s *ledgerState) load(b []byte, path string) VerifyReport {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return s.report(path, "incomplete last line (torn write or truncation)", 0)
		}
		line := b[:i]
		e, err := decodeLine(line, s.head, s.seq)
		if err != nil {
			return s.report(path, err.Error(), claimedSeq(line))
		}
		if err := s.apply(e); err != nil {
			return s.report(path, err.Error(), e.Seq)
		}
		s.head, s.seq = e.Hash, e.Seq
		s.offset += int64(i + 1)
		s.lines++
		b = b[i+1:]
	}
	return VerifyReport{Path: path, OK: true, Entries: s.lines, HeadHash: s.head, HeadSeq: s.seq}
}

func (s *ledgerState) report(path, reason string, seq int64) VerifyReport {
	return VerifyReport{Path: path, Entries: s.lines, HeadHash: s.head, HeadSeq: s.seq,
		FirstBad: &BadEntry{Line: s.lines + 1, Seq: seq, Reason: reason}}
}

func claimedSeq(line []byte) int64 {
	var x struct {
		Seq int64 `json:"seq"`
	}
	json.Unmarshal(line, &x)
	return x.Seq
}

// binding is the digest of every field a decision is bound to.
func binding(r *reqRecord) string {
	raw, _ := json.Marshal(map[string]string{
		"request_id": r.ID, "agent_id": r.AgentID, "actor_id": r.ActorID, "session_id": r.SessionID,
		"tool": r.Tool, "args_hash": r.ArgsHash, "expires_at": r.ExpiresAt.UTC().Format(time.RFC3339Nano),
	})
	c, _ := Canonical(raw)
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:])
}

// apply checks an entry's semantics against the state so far and applies it.
func (s *ledgerState) apply(e *entry) error {
	if e.At.IsZero() {
		return errors.New("entry has no time")
	}
	if e.Seq == 1 {
		s.firstType = e.Type
	}
	switch e.Type {
	case EntryRequest:
		r := e.Request
		if r == nil || !ValidRequestID(r.ID) {
			return errors.New("request entry without a valid request")
		}
		if _, dup := s.reqs[r.ID]; dup {
			return fmt.Errorf("request %s appears twice", r.ID)
		}
		if h, err := ArgsHash(r.Args); err != nil || h != r.ArgsHash {
			return fmt.Errorf("request %s: args_hash does not match its args", r.ID)
		}
		if r.RulesVersion != s.rulesVersion {
			return fmt.Errorf("request %s: rules_version %d, current %d", r.ID, r.RulesVersion, s.rulesVersion)
		}
		if !r.ExpiresAt.After(r.CreatedAt) {
			return fmt.Errorf("request %s: expires_at not after created_at", r.ID)
		}
		s.reqs[r.ID] = &reqState{rec: *r}
		s.order = append(s.order, r.ID)
	case EntryDecision:
		rs, ok := s.reqs[e.RequestID]
		if !ok || e.Approved == nil {
			return fmt.Errorf("decision for unknown request %q", e.RequestID)
		}
		if rs.decided || rs.executed {
			return fmt.Errorf("second decision for request %s", e.RequestID)
		}
		if e.Binding != binding(&rs.rec) {
			return fmt.Errorf("decision binding does not match request %s", e.RequestID)
		}
		if !e.At.Before(rs.rec.ExpiresAt) {
			return fmt.Errorf("decision for request %s after it expired", e.RequestID)
		}
		if rs.rec.RulesVersion != s.rulesVersion {
			return fmt.Errorf("decision for request %s invalidated by a rule change", e.RequestID)
		}
		rs.decided, rs.approved, rs.by, rs.decidedAt = true, *e.Approved, e.By, e.At
		s.decisions = append(s.decisions, decisionEvent{e.Seq, e.RequestID, *e.Approved})
	case EntryExecute:
		if e.Call == nil {
			return errors.New("execute entry without call")
		}
		if e.RequestID != "" {
			rs, ok := s.reqs[e.RequestID]
			switch {
			case !ok:
				return fmt.Errorf("execute for unknown request %q", e.RequestID)
			case !rs.decided || !rs.approved:
				return fmt.Errorf("execute for request %s that was not approved", e.RequestID)
			case rs.executed:
				return fmt.Errorf("request %s executed twice", e.RequestID)
			case e.Binding != binding(&rs.rec):
				return fmt.Errorf("execute binding does not match request %s", e.RequestID)
			case e.Call.ArgsHash != rs.rec.ArgsHash || e.Call.Tool != rs.rec.Tool || e.Call.AgentID != rs.rec.AgentID ||
				e.Call.ActorID != rs.rec.ActorID || e.Call.SessionID != rs.rec.SessionID:
				return fmt.Errorf("execute call does not match request %s", e.RequestID)
			case !e.At.Before(rs.rec.ExpiresAt):
				return fmt.Errorf("execute for request %s after it expired", e.RequestID)
			case rs.rec.RulesVersion != s.rulesVersion:
				return fmt.Errorf("execute for request %s after a rule change", e.RequestID)
			}
			rs.executed, rs.execSeq = true, e.Seq
		}
		s.execs[e.Seq] = false
	case EntryResult:
		done, ok := s.execs[e.ExecSeq]
		if !ok || done {
			return fmt.Errorf("result for unknown or finished execution seq %d", e.ExecSeq)
		}
		s.execs[e.ExecSeq] = true
	case EntryDeny:
		if e.Call == nil && e.RequestID == "" {
			return errors.New("deny entry names no call")
		}
	case EntryRules:
		if e.RulesVersion != s.rulesVersion+1 {
			return fmt.Errorf("rules_version %d does not follow %d", e.RulesVersion, s.rulesVersion)
		}
		for k, v := range e.Rules {
			if !validToolName(k) || v.strictness() == 2 && v != RuleNever {
				return fmt.Errorf("invalid rule %q: %q", k, v)
			}
		}
		s.rules = copyRules(e.Rules)
		s.rulesVersion = e.RulesVersion
	case EntryYolo:
		if e.Until == nil || e.DurationMS < 0 || time.Duration(e.DurationMS)*time.Millisecond > MaxYolo {
			return errors.New("invalid yolo entry")
		}
		s.yolo = e
	case EntryReset:
		if e.Seq != 1 {
			return errors.New("reset entry not at the start of the ledger")
		}
		s.rules = copyRules(e.Rules)
		s.rulesVersion = e.RulesVersion
	default:
		return fmt.Errorf("unknown entry type %q", e.Type)
	}
	return nil
}

func copyRules(m map[string]Rule) map[string]Rule {
	out := make(map[string]Rule, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
