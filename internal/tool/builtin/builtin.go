// Package builtin holds Tendril's built-in tools (SPEC §5): weather,
// notes and notes_search, memory_search, memory_write, and the exec-class
// shell tool that exists only when exec tools are enabled.
//
// Every tool scopes its data to tool.Call.AgentID and tool.Call.ActorID:
// namespaces are built from them and nothing else, and IDs that could
// escape their namespace segment are refused. No argument the model sends
// can reach another actor's records.
package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/tool"
)

// Tool names.
const (
	NameWeather      = "weather"
	NameNotes        = "notes"
	NameNotesSearch  = "notes_search"
	NameMemorySearch = "memory_search"
	NameMemoryWrite  = "memory_write"
	NameShell        = "shell"
)

// EpisodicWriter writes one episodic memory for an actor through the
// importance gate (SPEC §4.4–4.5). outcome is a short human word or phrase
// such as "stored", "staged for review" or "dropped (importance 0.21)"; it
// is shown to the model as is. internal/memory/pipeline implements it.
type EpisodicWriter interface {
	WriteEpisodic(ctx context.Context, agentID, actorID, sessionID, text string) (outcome string, err error)
}

// EpisodicFunc adapts a function to EpisodicWriter, e.g. to wrap the
// memory pipeline's WriteEpisodic, which returns a structured result.
type EpisodicFunc func(ctx context.Context, agentID, actorID, sessionID, text string) (string, error)

// WriteEpisodic calls f.
func (f EpisodicFunc) WriteEpisodic(ctx context.Context, agentID, actorID, sessionID, text string) (string, error) {
	return f(ctx, agentID, actorID, sessionID, text)
}

// Deps are what the built-in tools need. Nil dependencies leave their
// tools out.
type Deps struct {
	// Memory backs notes, notes_search and memory_search; nil omits them.
	Memory memory.Store
	// Episodic backs memory_write; nil omits it.
	Episodic EpisodicWriter
	// Weather configures the weather tool, which is always registered.
	Weather WeatherOptions
	// EnableExec registers the exec-class shell tool
	// (TENDRIL_ENABLE_EXEC_TOOLS=1 / tools.enableExec). Off by default.
	EnableExec bool
	Shell      ShellOptions
	// Reminders is the reminders tool built by internal/schedule; nil omits it.
	Reminders tool.Tool
}

// Register adds the built-in tools that d provides for to reg: weather
// always; notes, notes_search and memory_search with d.Memory;
// memory_write with d.Episodic; reminders with d.Reminders; shell only
// with d.EnableExec. It returns every registration error, joined.
func Register(reg *tool.Registry, d Deps) error {
	tools := []tool.Tool{NewWeather(d.Weather)}
	if d.Memory != nil {
		tools = append(tools, NewNotes(d.Memory), NewNotesSearch(d.Memory), NewMemorySearch(d.Memory))
	}
	if d.Episodic != nil {
		tools = append(tools, NewMemoryWrite(d.Episodic))
	}
	if d.Reminders != nil {
		tools = append(tools, d.Reminders)
	}
	if d.EnableExec {
		tools = append(tools, NewShell(d.Shell))
	}
	var errs []error
	for _, t := range tools {
		if err := reg.Register(t); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MaxIDBytes bounds agent and actor IDs used in namespaces.
const MaxIDBytes = 256

// ErrBadScope is returned when a call's agent or actor ID cannot be used as
// a namespace segment.
var ErrBadScope = errors.New("invalid agent or actor ID for memory scope")

// ActorPath returns the namespace path prefix "/{agentId}/{actorId}/" that
// holds everything of one actor (SPEC §4.2), built with memory.Namespace so
// it matches the namespaces the memory pipeline writes: each ID is one
// escaped segment ("a/b" becomes "a%2Fb"), so no ID can reach another
// actor's subtree. Empty IDs, IDs over MaxIDBytes and IDs with control
// characters or invalid UTF-8 are refused with ErrBadScope.
func ActorPath(agentID, actorID string) (string, error) {
	return scoped("/{agentId}/{actorId}/", agentID, actorID)
}

// NotesNamespace is the exact namespace of an actor's notes:
// "/{agentId}/{actorId}/notes/".
func NotesNamespace(agentID, actorID string) (string, error) {
	return scoped("/{agentId}/{actorId}/notes/", agentID, actorID)
}

func scoped(template, agentID, actorID string) (string, error) {
	for _, id := range []string{agentID, actorID} {
		if id == "" || len(id) > MaxIDBytes || !utf8.ValidString(id) {
			return "", fmt.Errorf("%w: %q", ErrBadScope, clip(id, 40))
		}
		for _, r := range id {
			if unicode.IsControl(r) {
				return "", fmt.Errorf("%w: %q", ErrBadScope, clip(id, 40))
			}
		}
	}
	ns, err := memory.Namespace(template, memory.NamespaceVars{AgentID: agentID, ActorID: actorID})
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadScope, err)
	}
	return ns, nil
}

// decodeArgs unmarshals the model's JSON arguments into v, refusing
// unknown fields so a typo is reported instead of silently ignored.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// staticTool carries the fixed parts of a Tool.
type staticTool struct {
	name, desc string
	schema     json.RawMessage
	class      tool.Class
}

func (s staticTool) Name() string            { return s.name }
func (s staticTool) Description() string     { return s.desc }
func (s staticTool) Schema() json.RawMessage { return s.schema }
func (s staticTool) Class() tool.Class       { return s.class }
