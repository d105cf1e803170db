// Package approval is the approval gate of SPEC §6.3: per-tool rules, the
// effective decision (strictest of rule, breaker and floor), requests bound
// to their exact call, and an append-only, hash-chained ledger of requests,
// decisions, executions and rule changes that fails closed on any break.
//
// The ledger is the only source of truth. Every entry is the RFC 8785
// canonical JSON of one object; entry.hash is the hex SHA-256 of the
// canonical entry without its "hash" member, and entry.prev is the hash of
// the entry before (64 zeros for the first). Where it is stored is a Log:
// by default (Open) the file <dir>/ledger.jsonl, one entry per line, which
// several processes (the server and the CLI) may append to: each append
// takes an exclusive flock on <dir>/ledger.lock, first reads and verifies
// whatever other processes appended, then writes and fsyncs its own line.
// With PostgreSQL (package pgledger, OpenLog) the same happens in one
// transaction under an advisory lock, one row per entry.
package approval

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// Rule is a per-tool approval rule.
type Rule string

// Rules, from least to most strict.
const (
	RuleAlways Rule = "always"
	RuleAsk    Rule = "ask"
	RuleNever  Rule = "never"
)

func (r Rule) strictness() int {
	switch r {
	case RuleAlways:
		return 0
	case RuleAsk:
		return 1
	}
	return 2 // Never and anything unknown
}

// ParseRule accepts "always", "ask" or "never" (any case).
func ParseRule(s string) (Rule, error) {
	switch r := Rule(strings.ToLower(strings.TrimSpace(s))); r {
	case RuleAlways, RuleAsk, RuleNever:
		return r, nil
	}
	return "", fmt.Errorf("approval: unknown rule %q (want always, ask or never)", s)
}

// ParseRules converts config rules (tool → "always"|"ask"|"never").
func ParseRules(m map[string]string) (map[string]Rule, error) {
	out := make(map[string]Rule, len(m))
	for k, v := range m {
		if !validToolName(k) {
			return nil, fmt.Errorf("approval: invalid tool name %q in rules", k)
		}
		r, err := ParseRule(v)
		if err != nil {
			return nil, fmt.Errorf("approval: rule for %s: %w", k, err)
		}
		out[k] = r
	}
	return out, nil
}

func strictest(rs ...Rule) Rule {
	out := RuleAlways
	for _, r := range rs {
		if r.strictness() > out.strictness() {
			out = r
		}
	}
	if out.strictness() == 2 {
		return RuleNever
	}
	return out
}

// Verdict is the gate's answer for one call.
type Verdict string

// Verdicts.
const (
	Allow Verdict = "allow"
	Ask   Verdict = "ask"
	Deny  Verdict = "deny"
)

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.:\-]{1,128}$`)

func validToolName(s string) bool { return toolNameRE.MatchString(s) }

// DefaultRule is the rule for a class with no per-tool rule: read → always,
// write → ask, exec → never, or ask when exec tools are enabled. Unknown
// classes are treated as exec.
func DefaultRule(class tool.Class, execEnabled bool) Rule {
	switch class {
	case tool.ClassRead:
		return RuleAlways
	case tool.ClassWrite:
		return RuleAsk
	}
	if execEnabled {
		return RuleAsk
	}
	return RuleNever
}

// BreakerRule is the breaker's ceiling for a class: NORMAL imposes nothing;
// WARNING removes write and exec tools; CRITICAL leaves only read tools.
// Either way only read-class tools survive a tripped breaker.
func BreakerRule(class tool.Class, level state.Level) Rule {
	if level == state.Normal || class == tool.ClassRead {
		return RuleAlways
	}
	return RuleNever
}

// FloorRule is the minimum that nothing relaxes: exec tools always at least
// ask (never when exec is disabled), and unknown classes never run.
func FloorRule(class tool.Class, execEnabled bool) Rule {
	switch class {
	case tool.ClassRead, tool.ClassWrite:
		return RuleAlways
	case tool.ClassExec:
		if execEnabled {
			return RuleAsk
		}
	}
	return RuleNever
}

// Effective combines the layers: strictest(rule′, breaker, floor), where
// rule′ is the per-tool rule (or DefaultRule) with ask relaxed to always
// while a YOLO window is open. YOLO never touches never, exec tools or the
// floor. It returns the rule and a human reason naming the deciding layer.
func Effective(rules map[string]Rule, name string, class tool.Class, level state.Level, execEnabled, yolo bool) (Rule, string) {
	rule, ok := rules[name]
	src := "rule for " + name
	if !ok {
		rule, src = DefaultRule(class, execEnabled), fmt.Sprintf("default rule for %s tools", class)
	}
	if yolo && rule == RuleAsk && class != tool.ClassExec {
		rule, src = RuleAlways, "YOLO window (ask treated as always)"
	}
	br := BreakerRule(class, level)
	fl := FloorRule(class, execEnabled)
	eff := strictest(rule, br, fl)
	switch {
	case eff == br && br != rule && br.strictness() > rule.strictness():
		src = fmt.Sprintf("breaker %s allows only read-only tools", level)
	case eff == fl && fl.strictness() > rule.strictness():
		if class == tool.ClassExec && !execEnabled {
			src = "exec tools are disabled (TENDRIL_ENABLE_EXEC_TOOLS)"
		} else if class == tool.ClassExec {
			src = "floor: exec tools always ask"
		} else {
			src = fmt.Sprintf("floor: unknown tool class %q", class)
		}
	}
	return eff, src
}
