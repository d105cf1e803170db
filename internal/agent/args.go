package agent

import (
	"encoding/json"
	"fmt"
	"slices"
)

// checkArgs validates a tool call's arguments against the top level of the
// tool's JSON Schema: required properties, declared types and enums. It is
// deliberately shallow (nested objects are the tool's own business); its
// job is to send obviously wrong calls back to the model before they reach
// the approval gate or an operator's queue.
func checkArgs(schema json.RawMessage, args map[string]any) error {
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type any   `json:"type"`
			Enum []any `json:"enum"`
		} `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil // no usable schema: nothing to check
	}
	for _, name := range s.Required {
		if _, ok := args[name]; !ok {
			return fmt.Errorf("missing required argument %q", name)
		}
	}
	for name, v := range args {
		p, ok := s.Properties[name]
		if !ok {
			continue
		}
		if len(p.Enum) > 0 && !slices.ContainsFunc(p.Enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
			return fmt.Errorf("argument %q must be one of %v, got %v", name, p.Enum, v)
		}
		if !typeMatches(p.Type, v) {
			return fmt.Errorf("argument %q must be of type %v", name, p.Type)
		}
	}
	return nil
}

// typeMatches checks a decoded JSON value against a JSON Schema "type"
// (a string or a list of strings); an absent type matches anything.
func typeMatches(t any, v any) bool {
	var types []string
	switch x := t.(type) {
	case string:
		types = []string{x}
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok {
				types = append(types, s)
			}
		}
	default:
		return true
	}
	for _, ty := range types {
		switch ty {
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "number":
			if _, ok := v.(float64); ok {
				return true
			}
		case "integer":
			if f, ok := v.(float64); ok && f == float64(int64(f)) {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "null":
			if v == nil {
				return true
			}
		default:
			return true
		}
	}
	return len(types) == 0
}
