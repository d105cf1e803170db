package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/tool"
)

const (
	defaultMemoryTop = 10
	maxMemoryTop     = 50
	maxFilters       = 5
	MaxEpisodicRunes = 2000
)

type memorySearchTool struct {
	staticTool
	store memory.Store
}

// NewMemorySearch returns the read-class memory_search tool. It searches
// the calling actor's whole subtree, NamespacePath "/{agentId}/{actorId}/"
// (long-term records, episodic summaries, notes), with optional metadata
// filters (SPEC §4.6 operators; keys must be indexed keys, createdAt or
// updatedAt) and strategies, and prints one line per hit with its score.
func NewMemorySearch(store memory.Store) tool.Tool {
	return &memorySearchTool{store: store, staticTool: staticTool{
		name:  NameMemorySearch,
		class: tool.ClassRead,
		desc: "Search what you remember about this user (preferences, facts, past sessions, notes). " +
			"query is required. Optional filters on indexed metadata keys (type, section, plants, createdAt, updatedAt) " +
			"and strategies narrow the search before ranking.",
		schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 500},
    "filters": {
      "type": "array", "maxItems": 5,
      "items": {
        "type": "object",
        "properties": {
          "key": {"type": "string"},
          "op": {"type": "string", "enum": ["EQUALS_TO","CONTAINS","EXISTS","NOT_EXISTS","BEFORE","AFTER","GREATER_THAN","GREATER_THAN_OR_EQUALS","LESS_THAN","LESS_THAN_OR_EQUALS"]},
          "value": {"description": "string, number, list of strings, or an RFC 3339 time for BEFORE/AFTER"}
        },
        "required": ["key", "op"],
        "additionalProperties": false
      }
    },
    "strategies": {"type": "array", "items": {"type": "string", "enum": ["user_preference","semantic","summary","procedural","episodic"]}},
    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 10"}
  },
  "required": ["query"],
  "additionalProperties": false
}`),
	}}
}

type filterArg struct {
	Key   string          `json:"key"`
	Op    string          `json:"op"`
	Value json.RawMessage `json:"value"`
}

type memorySearchArgs struct {
	Query      string      `json:"query"`
	Filters    []filterArg `json:"filters"`
	Strategies []string    `json:"strategies"`
	Limit      int         `json:"limit"`
}

func (m *memorySearchTool) Run(ctx context.Context, call tool.Call) (string, error) {
	path, err := ActorPath(call.AgentID, call.ActorID)
	if err != nil {
		return "", err
	}
	var a memorySearchArgs
	if err := decodeArgs(call.Args, &a); err != nil {
		return "", err
	}
	a.Query = strings.TrimSpace(a.Query)
	if a.Query == "" {
		return "", errors.New("query is required")
	}
	if a.Limit == 0 {
		a.Limit = defaultMemoryTop
	}
	if a.Limit < 1 || a.Limit > maxMemoryTop {
		return "", fmt.Errorf("limit must be between 1 and %d", maxMemoryTop)
	}
	if len(a.Filters) > maxFilters {
		return "", fmt.Errorf("at most %d filters", maxFilters)
	}
	q := memory.Query{NamespacePath: path, Text: clip(a.Query, 500), TopK: a.Limit}
	for _, f := range a.Filters {
		mf, err := toFilter(f)
		if err != nil {
			return "", err
		}
		q.Filters = append(q.Filters, mf)
	}
	for _, s := range a.Strategies {
		switch st := memory.Strategy(s); st {
		case memory.StrategyUserPreference, memory.StrategySemantic, memory.StrategySummary,
			memory.StrategyProcedural, memory.StrategyEpisodic:
			q.Strategies = append(q.Strategies, st)
		default:
			return "", fmt.Errorf("unknown strategy %q", clip(s, 40))
		}
	}
	hits, err := m.store.Search(ctx, q)
	if err != nil {
		return "", fmt.Errorf("memory search: %w", err)
	}
	var b strings.Builder
	n := 0
	for _, h := range hits {
		r := h.Record
		if !memory.NamespaceUnder(r.Namespace, path) {
			continue // never show anything outside the actor's subtree
		}
		n++
		tag := "Inferred"
		if r.Explicit() {
			tag = "Explicit"
		}
		fmt.Fprintf(&b, "%d. [%.3f] [%s] %s (%s, %s, id %s)\n", n, h.Score, tag, oneLine(clip(r.Content, 1000)),
			r.Strategy, strings.Trim(strings.TrimPrefix(memory.CleanNamespace(r.Namespace), path), "/"), r.ID)
	}
	if n == 0 {
		return "Nothing found in memory for that query.", nil
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// toFilter converts a JSON filter into a memory.Filter: strings stay
// strings (RFC 3339 or YYYY-MM-DD strings become time.Time for BEFORE and
// AFTER and for createdAt/updatedAt), numbers become float64, arrays of
// strings []string. The store validates keys and operators.
func toFilter(f filterArg) (memory.Filter, error) {
	out := memory.Filter{Key: strings.TrimSpace(f.Key), Op: strings.ToUpper(strings.TrimSpace(f.Op))}
	if out.Key == "" || out.Op == "" {
		return out, errors.New("each filter needs key and op")
	}
	switch out.Op {
	case memory.OpEquals, memory.OpContains, memory.OpExists, memory.OpNotExists, memory.OpBefore, memory.OpAfter,
		memory.OpGreater, memory.OpGreaterEq, memory.OpLess, memory.OpLessEq:
	default:
		return out, fmt.Errorf("unknown filter op %q", clip(out.Op, 40))
	}
	if out.Op == memory.OpExists || out.Op == memory.OpNotExists {
		return out, nil
	}
	if len(f.Value) == 0 || string(f.Value) == "null" {
		return out, fmt.Errorf("filter %s %s needs a value", out.Key, out.Op)
	}
	var v any
	if err := json.Unmarshal(f.Value, &v); err != nil {
		return out, fmt.Errorf("filter %s: %w", out.Key, err)
	}
	timeKey := out.Key == "createdAt" || out.Key == "updatedAt" || out.Op == memory.OpBefore || out.Op == memory.OpAfter
	switch x := v.(type) {
	case string:
		if timeKey {
			t, err := parseTime(x)
			if err != nil {
				return out, fmt.Errorf("filter %s %s: %w", out.Key, out.Op, err)
			}
			out.Value = t
		} else {
			out.Value = x
		}
	case float64:
		out.Value = x
	case []any:
		list := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return out, fmt.Errorf("filter %s: list values must be strings", out.Key)
			}
			list = append(list, s)
		}
		out.Value = list
	default:
		return out, fmt.Errorf("filter %s: value must be a string, number or list of strings", out.Key)
	}
	return out, nil
}

func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q is not RFC 3339 or YYYY-MM-DD", clip(s, 40))
}

type memoryWriteTool struct {
	staticTool
	w EpisodicWriter
}

// NewMemoryWrite returns the write-class memory_write tool. It writes only
// to the calling actor's episodic layer, through the importance gate, via
// w; it reports the gate's outcome (stored, staged or dropped).
func NewMemoryWrite(w EpisodicWriter) tool.Tool {
	return &memoryWriteTool{w: w, staticTool: staticTool{
		name:  NameMemoryWrite,
		class: tool.ClassWrite,
		desc: "Write a short memory about this user or this conversation to your episodic log " +
			"(e.g. \"Planted garlic in bed 2 on 3 March\"). It passes an importance check: it may be stored, " +
			"sent for review or dropped. Use it for things worth remembering later.",
		schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "minLength": 1, "maxLength": 2000}
  },
  "required": ["text"],
  "additionalProperties": false
}`),
	}}
}

func (m *memoryWriteTool) Run(ctx context.Context, call tool.Call) (string, error) {
	if _, err := ActorPath(call.AgentID, call.ActorID); err != nil {
		return "", err
	}
	var a struct {
		Text string `json:"text"`
	}
	if err := decodeArgs(call.Args, &a); err != nil {
		return "", err
	}
	text := strings.TrimSpace(a.Text)
	if text == "" {
		return "", errors.New("text is required")
	}
	if len([]rune(text)) > MaxEpisodicRunes {
		return "", fmt.Errorf("text is over %d characters", MaxEpisodicRunes)
	}
	outcome, err := m.w.WriteEpisodic(ctx, call.AgentID, call.ActorID, call.SessionID, text)
	if err != nil {
		return "", fmt.Errorf("memory_write: %w", err)
	}
	return "memory_write: " + outcome, nil
}
