package state

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Level is the circuit-breaker level on stability (SPEC §6.2).
type Level int

// Breaker levels, in increasing severity.
const (
	Normal Level = iota
	Warning
	Critical
)

// String returns "NORMAL", "WARNING" or "CRITICAL".
func (l Level) String() string {
	switch l {
	case Normal:
		return "NORMAL"
	case Warning:
		return "WARNING"
	case Critical:
		return "CRITICAL"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// MarshalText writes the String form.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads "NORMAL", "WARNING" or "CRITICAL" (any case, spaces
// trimmed), or the integer form "0", "1" or "2". Anything else is an error
// and leaves l unchanged.
func (l *Level) UnmarshalText(b []byte) error {
	switch strings.ToUpper(strings.TrimSpace(string(b))) {
	case "NORMAL", "0":
		*l = Normal
	case "WARNING", "1":
		*l = Warning
	case "CRITICAL", "2":
		*l = Critical
	default:
		return fmt.Errorf("unknown breaker level %q", b)
	}
	return nil
}

// UnmarshalJSON reads a JSON string accepted by UnmarshalText, or the
// integer form 0, 1 or 2 that a plain int encoding of Level produces (e.g.
// a copy of the level held in an int field of an older record). JSON null
// leaves l unchanged. Levels always marshal as strings, via MarshalText.
func (l *Level) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("breaker level: %w", err)
		}
		return l.UnmarshalText([]byte(s))
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("breaker level %s: want a string or 0, 1, 2", b)
	}
	switch n.String() {
	case "0", "1", "2":
		return l.UnmarshalText([]byte(n.String()))
	}
	return fmt.Errorf("unknown breaker level %s", b)
}

// Breaker holds the stability thresholds. Entering is strict (<), leaving is
// strict (>), so a value exactly at a threshold never changes the level.
type Breaker struct {
	WarnEnter     float64 // enter WARNING when stability < WarnEnter (0.5)
	WarnLeave     float64 // leave WARNING when stability > WarnLeave (0.6)
	CriticalEnter float64 // enter CRITICAL when stability < CriticalEnter (0.3)
	CriticalLeave float64 // leave CRITICAL when stability > CriticalLeave (0.45) …
	CooldownTurns int     // … and at least CooldownTurns turns were spent in CRITICAL (3)
}

// DefaultBreaker returns the SPEC §6.2 thresholds.
func DefaultBreaker() Breaker {
	return Breaker{WarnEnter: 0.5, WarnLeave: 0.6, CriticalEnter: 0.3, CriticalLeave: 0.45, CooldownTurns: 3}
}

// Validate checks 0 ≤ CriticalEnter ≤ CriticalLeave, CriticalEnter ≤ WarnEnter
// ≤ WarnLeave ≤ 1 and CooldownTurns ≥ 0. A leave threshold below its enter
// threshold would flap.
func (b Breaker) Validate() error {
	ok := 0 <= b.CriticalEnter && b.CriticalEnter <= b.CriticalLeave &&
		b.CriticalEnter <= b.WarnEnter && b.WarnEnter <= b.WarnLeave && b.WarnLeave <= 1 &&
		b.CriticalLeave <= b.WarnLeave && b.CooldownTurns >= 0
	if !ok {
		return fmt.Errorf("breaker thresholds inconsistent: want 0 ≤ criticalEnter(%v) ≤ criticalLeave(%v) ≤ warnLeave(%v) ≤ 1, criticalEnter ≤ warnEnter(%v) ≤ warnLeave, cooldownTurns(%d) ≥ 0",
			b.CriticalEnter, b.CriticalLeave, b.WarnLeave, b.WarnEnter, b.CooldownTurns)
	}
	return nil
}

// Next returns the level after observing stability s, given the current
// level and the number of turns already spent in CRITICAL. It is applied
// until it reaches a fixed point, so a single large move can cross two
// thresholds (NORMAL → CRITICAL, or CRITICAL → NORMAL once cooled down).
func (b Breaker) Next(cur Level, turnsInCritical int, s float64) Level {
	for i := 0; i < 3; i++ {
		n := b.step(cur, turnsInCritical, s)
		if n == cur {
			return cur
		}
		cur = n
	}
	return cur
}

func (b Breaker) step(cur Level, turnsInCritical int, s float64) Level {
	switch cur {
	case Normal:
		if s < b.CriticalEnter {
			return Critical
		}
		if s < b.WarnEnter {
			return Warning
		}
	case Warning:
		if s < b.CriticalEnter {
			return Critical
		}
		if s > b.WarnLeave {
			return Normal
		}
	case Critical:
		if s > b.CriticalLeave && turnsInCritical >= b.CooldownTurns {
			return Warning
		}
	}
	return cur
}
