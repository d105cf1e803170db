package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/tool"
)

// Note limits.
const (
	MaxNoteRunes    = 4000
	MaxSectionRunes = 64
	MaxPlants       = 20
	MaxPlantRunes   = 64
	noteType        = "note"
	defaultNotesTop = 20
	maxNotesTop     = 50
)

// A note is a memory.Record in the exact namespace
// "/{agentId}/{actorId}/notes/" with strategy semantic and metadata
// {"type": "note", "section": <string>, "plants": <[]string>} (the default
// indexed keys of SPEC §4.6), so the indexed-key filters apply to it and
// memory_search finds it too. Notes are explicit user content: they go in
// active with importance 1, not through the importance gate; the write
// class of the notes tool puts them behind the approval gate instead.
//
// Deleting a note marks it superseded (memory.Store has no delete): it
// disappears from default searches, which return active records only, and
// keeps its history.

type notesTool struct {
	staticTool
	store memory.Store
}

// NewNotes returns the write-class notes tool: action "add" (text, optional
// section and plants) and action "delete" (id) on the calling actor's
// notes.
func NewNotes(store memory.Store) tool.Tool {
	return &notesTool{store: store, staticTool: staticTool{
		name:  NameNotes,
		class: tool.ClassWrite,
		desc: "Add or delete one of this user's notes (e.g. plant notes: what was planted, fed, pruned or observed). " +
			"action \"add\" needs text, with optional section (where, e.g. \"raised-bed-1\") and plants (names); " +
			"action \"delete\" needs the note id. Use notes_search to read notes.",
		schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["add", "delete"]},
    "text": {"type": "string", "maxLength": 4000, "description": "The note, for add"},
    "section": {"type": "string", "maxLength": 64, "description": "Where, e.g. raised-bed-1, balcony, greenhouse"},
    "plants": {"type": "array", "items": {"type": "string", "maxLength": 64}, "maxItems": 20, "description": "Plant names, lower case"},
    "id": {"type": "string", "description": "The note id, for delete"}
  },
  "required": ["action"],
  "additionalProperties": false
}`),
	}}
}

type notesArgs struct {
	Action  string   `json:"action"`
	Text    string   `json:"text"`
	Section string   `json:"section"`
	Plants  []string `json:"plants"`
	ID      string   `json:"id"`
}

func (n *notesTool) Run(ctx context.Context, call tool.Call) (string, error) {
	ns, err := NotesNamespace(call.AgentID, call.ActorID)
	if err != nil {
		return "", err
	}
	var a notesArgs
	if err := decodeArgs(call.Args, &a); err != nil {
		return "", err
	}
	switch a.Action {
	case "add":
		return n.add(ctx, ns, call, a)
	case "delete":
		return n.delete(ctx, ns, a.ID)
	default:
		return "", fmt.Errorf("action must be \"add\" or \"delete\", got %q", a.Action)
	}
}

func (n *notesTool) add(ctx context.Context, ns string, call tool.Call, a notesArgs) (string, error) {
	text := strings.TrimSpace(a.Text)
	if text == "" {
		return "", errors.New("add needs a non-empty text")
	}
	if len([]rune(text)) > MaxNoteRunes {
		return "", fmt.Errorf("text is over %d characters; split it into several notes", MaxNoteRunes)
	}
	section, err := normSection(a.Section)
	if err != nil {
		return "", err
	}
	plants, err := normPlants(a.Plants)
	if err != nil {
		return "", err
	}
	// Notes are memory records: credentials never enter them.
	text, _ = memory.Redact(text)
	meta := map[string]any{"type": noteType}
	if section != "" {
		meta["section"] = section
	}
	if len(plants) > 0 {
		meta["plants"] = plants
	}
	rec := memory.Record{
		Namespace:  ns,
		Strategy:   memory.StrategySemantic,
		Content:    text,
		Metadata:   meta,
		Importance: 1,
		Status:     memory.StatusActive,
	}
	if call.SessionID != "" {
		rec.Sources = []string{call.SessionID}
	}
	saved, err := n.store.Put(ctx, rec)
	if err != nil {
		return "", fmt.Errorf("save note: %w", err)
	}
	return "Saved note " + saved.ID + describeMeta(section, plants), nil
}

func (n *notesTool) delete(ctx context.Context, ns, id string) (string, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return "", errors.New("delete needs the note id (from notes_search)")
	}
	rec, err := n.store.Get(ctx, id)
	// Another actor's record, a non-note and a missing ID look the same, so
	// the tool never confirms that someone else's record exists.
	if err != nil || !memory.NamespaceEqual(rec.Namespace, ns) || !isNote(rec) {
		return "", fmt.Errorf("no note %q for this user", clip(id, 80))
	}
	if rec.Status == memory.StatusSuperseded {
		return "Note " + id + " was already deleted.", nil
	}
	rec.Status = memory.StatusSuperseded
	if _, err := n.store.Put(ctx, rec); err != nil {
		return "", fmt.Errorf("delete note: %w", err)
	}
	return "Deleted note " + id + ".", nil
}

func isNote(r memory.Record) bool {
	t, _ := r.Metadata["type"].(string)
	return t == noteType
}

func normSection(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if len([]rune(s)) > MaxSectionRunes {
		return "", fmt.Errorf("section is over %d characters", MaxSectionRunes)
	}
	return s, nil
}

func normPlants(in []string) ([]string, error) {
	if len(in) > MaxPlants {
		return nil, fmt.Errorf("at most %d plants per note", MaxPlants)
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range in {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" || seen[p] {
			continue
		}
		if len([]rune(p)) > MaxPlantRunes {
			return nil, fmt.Errorf("plant name %q is over %d characters", clip(p, 20), MaxPlantRunes)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

func describeMeta(section string, plants []string) string {
	var parts []string
	if section != "" {
		parts = append(parts, "section: "+section)
	}
	if len(plants) > 0 {
		parts = append(parts, "plants: "+strings.Join(plants, ", "))
	}
	if len(parts) == 0 {
		return "."
	}
	return " (" + strings.Join(parts, "; ") + ")."
}

type notesSearchTool struct {
	staticTool
	store memory.Store
}

// NewNotesSearch returns the read-class notes_search tool: the calling
// actor's notes, ranked by query (or listed newest-first by the store
// when query is empty), filtered by section and plant through the indexed
// keys before ranking.
func NewNotesSearch(store memory.Store) tool.Tool {
	return &notesSearchTool{store: store, staticTool: staticTool{
		name:  NameNotesSearch,
		class: tool.ClassRead,
		desc: "Search or list this user's notes. Optional query (words to look for), section and plant narrow the result. " +
			"Each line gives the note id, date, section, plants and text.",
		schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "maxLength": 500},
    "section": {"type": "string", "maxLength": 64},
    "plant": {"type": "string", "maxLength": 64, "description": "One plant name"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 20"}
  },
  "additionalProperties": false
}`),
	}}
}

type notesSearchArgs struct {
	Query   string `json:"query"`
	Section string `json:"section"`
	Plant   string `json:"plant"`
	Limit   int    `json:"limit"`
}

func (n *notesSearchTool) Run(ctx context.Context, call tool.Call) (string, error) {
	ns, err := NotesNamespace(call.AgentID, call.ActorID)
	if err != nil {
		return "", err
	}
	var a notesSearchArgs
	if err := decodeArgs(call.Args, &a); err != nil {
		return "", err
	}
	if a.Limit == 0 {
		a.Limit = defaultNotesTop
	}
	if a.Limit < 1 || a.Limit > maxNotesTop {
		return "", fmt.Errorf("limit must be between 1 and %d", maxNotesTop)
	}
	q := memory.Query{
		Namespace: ns,
		Text:      strings.TrimSpace(clip(a.Query, 500)),
		Filters:   []memory.Filter{{Key: "type", Op: memory.OpEquals, Value: noteType}},
		TopK:      a.Limit,
	}
	if s, err := normSection(a.Section); err != nil {
		return "", err
	} else if s != "" {
		q.Filters = append(q.Filters, memory.Filter{Key: "section", Op: memory.OpEquals, Value: s})
	}
	if p := strings.ToLower(strings.TrimSpace(a.Plant)); p != "" {
		q.Filters = append(q.Filters, memory.Filter{Key: "plants", Op: memory.OpContains, Value: p})
	}
	hits, err := n.store.Search(ctx, q)
	if err != nil {
		return "", fmt.Errorf("search notes: %w", err)
	}
	var b strings.Builder
	count := 0
	for _, h := range hits {
		r := h.Record
		if !memory.NamespaceEqual(r.Namespace, ns) { // belt and braces: never show another scope
			continue
		}
		count++
		section, _ := r.Metadata["section"].(string)
		fmt.Fprintf(&b, "- [%s] %s", r.ID, r.CreatedAt.Format("2006-01-02"))
		if section != "" {
			fmt.Fprintf(&b, " section=%s", section)
		}
		if plants := stringList(r.Metadata["plants"]); len(plants) > 0 {
			fmt.Fprintf(&b, " plants=%s", strings.Join(plants, ","))
		}
		fmt.Fprintf(&b, ": %s\n", oneLine(r.Content))
	}
	if count == 0 {
		return "No notes found.", nil
	}
	return fmt.Sprintf("%d note(s):\n%s", count, strings.TrimRight(b.String(), "\n")), nil
}

// stringList reads a STRINGLIST metadata value, which a store may hand back
// as []string or []any.
func stringList(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
