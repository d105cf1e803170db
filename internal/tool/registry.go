package tool

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"

	"github.com/tendrilai/tendril/internal/model"
)

// namePattern is the tool-name rule shared by the Anthropic Messages,
// Bedrock Converse and OpenAI Chat Completions APIs.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Errors returned by Registry.Register.
var (
	ErrInvalidName = errors.New("invalid tool name")
	ErrDuplicate   = errors.New("duplicate tool name")
)

// ValidName reports whether name matches ^[a-zA-Z0-9_-]{1,64}$, the rule all
// three model providers accept.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Registry holds the tools the agent may offer to the model, keyed by name.
// It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{tools: make(map[string]Tool)} }

// Register adds t. It returns an error wrapping ErrInvalidName when the name
// does not match ^[a-zA-Z0-9_-]{1,64}$ or the class is unknown, and one
// wrapping ErrDuplicate when a tool of that name is already registered.
func (r *Registry) Register(t Tool) error {
	if t == nil {
		return fmt.Errorf("register tool: %w: nil tool", ErrInvalidName)
	}
	name := t.Name()
	if !ValidName(name) {
		return fmt.Errorf("register tool %q: %w: must match %s", name, ErrInvalidName, namePattern)
	}
	switch t.Class() {
	case ClassRead, ClassWrite, ClassExec:
	default:
		return fmt.Errorf("register tool %q: %w: unknown class %q", name, ErrInvalidName, t.Class())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[name]; ok {
		return fmt.Errorf("register tool %q: %w", name, ErrDuplicate)
	}
	r.tools[name] = t
	return nil
}

// Clone returns a new registry holding the same tools, e.g. the built-ins
// to which one turn adds the MCP tools it got from mcp.Manager.Tools.
func (r *Registry) Clone() *Registry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := &Registry{tools: make(map[string]Tool, len(r.tools))}
	for k, v := range r.tools {
		c.tools[k] = v
	}
	return c
}

// Get returns the tool registered under name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// List returns every registered tool sorted by name.
func (r *Registry) List() []Tool {
	r.mu.RLock()
	out := make([]Tool, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Defs returns the model tool definitions of the registered tools for which
// filter returns true (all of them when filter is nil), sorted by name.
func (r *Registry) Defs(filter func(Tool) bool) []model.ToolDef {
	var sel []Tool
	for _, t := range r.List() {
		if filter == nil || filter(t) {
			sel = append(sel, t)
		}
	}
	return Defs(sel)
}

// Defs converts tools to model tool definitions, keeping their order.
func Defs(tools []Tool) []model.ToolDef {
	out := make([]model.ToolDef, 0, len(tools))
	for _, t := range tools {
		out = append(out, model.ToolDef{Name: t.Name(), Description: t.Description(), InputSchema: t.Schema()})
	}
	return out
}
