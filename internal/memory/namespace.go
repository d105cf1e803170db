package memory

import (
	"errors"
	"fmt"
	"strings"
)

// Default namespace templates (SPEC §4.2), mirroring Sprout.
const (
	// DefaultLongTermTemplate holds preferences, facts and instructions.
	DefaultLongTermTemplate = "/{agentId}/{actorId}/long_term/"
	// DefaultEpisodicTemplate holds session summaries and past exchanges.
	DefaultEpisodicTemplate = "/{agentId}/{actorId}/episodic/{sessionId}/"
	// EpisodicRootTemplate is the episodic layer across all sessions.
	EpisodicRootTemplate = "/{agentId}/{actorId}/episodic/"
)

// NamespaceVars fills a namespace template.
type NamespaceVars struct {
	AgentID    string
	ActorID    string
	SessionID  string
	StrategyID string
}

// ErrInvalidNamespace is returned for templates with unknown placeholders or
// values that would change the path structure.
var ErrInvalidNamespace = errors.New("memory: invalid namespace")

// Namespace expands template's {agentId}, {actorId}, {sessionId} and
// {strategyId} placeholders. Each value becomes exactly one path segment:
// "/" and "%" in a value are percent-encoded, so actor "a/b" can never
// address actor "a"'s subtree. An empty value, or a placeholder left
// unexpanded, is ErrInvalidNamespace. The result always begins and ends
// with "/".
func Namespace(template string, v NamespaceVars) (string, error) {
	repl := map[string]string{
		"{agentId}":    v.AgentID,
		"{actorId}":    v.ActorID,
		"{sessionId}":  v.SessionID,
		"{strategyId}": v.StrategyID,
	}
	out := template
	for ph, val := range repl {
		if !strings.Contains(out, ph) {
			continue
		}
		if val == "" {
			return "", fmt.Errorf("%w: %s is empty in %q", ErrInvalidNamespace, ph, template)
		}
		out = strings.ReplaceAll(out, ph, EscapeSegment(val))
	}
	if strings.ContainsAny(out, "{}") {
		return "", fmt.Errorf("%w: unknown placeholder in %q", ErrInvalidNamespace, template)
	}
	return CleanNamespace(out), nil
}

// MustNamespace is Namespace for templates and values known to be valid; it
// returns "" on error rather than panicking.
func MustNamespace(template string, v NamespaceVars) string {
	ns, err := Namespace(template, v)
	if err != nil {
		return ""
	}
	return ns
}

// EscapeSegment makes s safe as one namespace segment: "%" and "/" are
// percent-encoded and "." or ".." alone become "%2E" forms.
func EscapeSegment(s string) string {
	s = strings.ReplaceAll(s, "%", "%25")
	s = strings.ReplaceAll(s, "/", "%2F")
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return s
}

// UnescapeSegment reverses EscapeSegment.
func UnescapeSegment(s string) string {
	switch s {
	case "%2E":
		return "."
	case "%2E%2E":
		return ".."
	}
	s = strings.ReplaceAll(s, "%2F", "/")
	return strings.ReplaceAll(s, "%25", "%")
}

// CleanNamespace normalises ns to "/seg/seg/" form: a leading and trailing
// "/", no empty segments.
func CleanNamespace(ns string) string {
	segs := Segments(ns)
	if len(segs) == 0 {
		return "/"
	}
	return "/" + strings.Join(segs, "/") + "/"
}

// Segments splits a namespace into its non-empty "/" segments.
func Segments(ns string) []string {
	parts := strings.Split(ns, "/")
	out := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// NamespaceUnder reports whether ns lies in the subtree of path, matching
// whole segments: "/a/12/" is under "/a/12" and "/a/", never under "/a/1".
func NamespaceUnder(ns, path string) bool {
	if isClean(ns) && isClean(path) {
		return strings.HasPrefix(ns, path) // both "/seg/…/": whole segments
	}
	p := Segments(path)
	n := Segments(ns)
	if len(p) > len(n) {
		return false
	}
	for i := range p {
		if p[i] != n[i] {
			return false
		}
	}
	return true
}

// NamespaceEqual reports whether a and b name the same namespace, ignoring
// redundant slashes.
func NamespaceEqual(a, b string) bool {
	if isClean(a) && isClean(b) {
		return a == b
	}
	return CleanNamespace(a) == CleanNamespace(b)
}

// isClean reports whether ns is already in CleanNamespace form.
func isClean(ns string) bool {
	return len(ns) > 0 && ns[0] == '/' && ns[len(ns)-1] == '/' && !strings.Contains(ns, "//")
}

// NamespaceActor returns the unescaped actor segment (the second) of a
// namespace built from the default templates, and the agent (the first).
// ok is false when ns has fewer than two segments.
func NamespaceActor(ns string) (agentID, actorID string, ok bool) {
	s := Segments(ns)
	if len(s) < 2 {
		return "", "", false
	}
	return UnescapeSegment(s[0]), UnescapeSegment(s[1]), true
}
