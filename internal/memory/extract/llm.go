package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tendrilai/tendril/internal/memory"
)

// Completer sends one system and one user message to a model and returns
// the text of its reply. The integrator adapts model.Provider to it.
type Completer func(ctx context.Context, system, user string) (string, error)

// Limits on a model's extraction reply (LLMSchema).
const (
	MaxLLMReplyBytes   = 256 << 10
	MaxLLMMemories     = 50
	MaxLLMContentRunes = 500
	MaxLLMTopicRunes   = 64
	MaxLLMPlants       = 10
	// LLMBatchEvents and LLMBatchBytes bound one model request: longer
	// inputs (a harvest over weeks) are sent in consecutive batches.
	LLMBatchEvents = 40
	LLMBatchBytes  = 16 << 10
)

// LLMSchema documents the JSON object the model must return, and is sent
// in the system prompt:
//
//	{"memories": [
//	  {"strategy": "user_preference" | "semantic" | "procedural",
//	   "content":  "the memory in the user's words, ≤ 500 characters",
//	   "topic":    "short key for contradiction detection, e.g. fertiliser, name, language, location",
//	   "type":     "preference" | "fact" | "instruction",
//	   "section":  "profile" | "garden" | "style" | "general",
//	   "plants":   ["canonical english plant names"],   // optional, ≤ 10
//	   "sources":  ["event ids it came from"]}           // ≥ 1, from the input only
//	]}
//
// Unknown fields, other strategies, empty content, control characters,
// sources not in the input, more than MaxLLMMemories memories or trailing
// data make the whole reply invalid. A reply may be wrapped in a ```json
// fence. {"memories": []} is valid and means nothing to remember.
const LLMSchema = `{"memories":[{"strategy":"user_preference|semantic|procedural","content":"...","topic":"...","type":"preference|fact|instruction","section":"profile|garden|style|general","plants":["..."],"sources":["<event id>"]}]}`

const llmSystem = `You extract long-term memories about the user from a conversation.
Return ONLY one JSON object, no prose, exactly in this schema:
` + LLMSchema + `
Strategies: user_preference = explicit choices and likes ("I only use organic fertiliser", "call me Jin");
semantic = facts about the user and their world ("lives in Busan", "has a fig tree");
procedural = standing instructions to the assistant ("always answer in Korean", "keep answers short").
Keep the user's own wording and language in "content". Every memory must cite the ids of the events it
came from in "sources". Ignore small talk ("ok", "thanks", "ㅋㅋ"). A question is not a memory: never record what
the user asks ("Do I live in Portland?", "제 강아지 이름이 뭐였죠?") as a fact. If there is nothing, return {"memories":[]}.`

// reAskSelfEN is a question about the speaker by its form ("Do I live in
// Portland", "Is my dog called Max"). A model's memory in the third-person
// style without a subject ("Is the owner of a bakery", "Has a fig tree")
// is not one, so Interrogative's wider reAskEN is not used on them.
var reAskSelfEN = regexp.MustCompile(`(?i)^(?:do|does|did|is|are|am|was|were|have|has|had|can|could|will|would|should)(?:n't)?\s+(?:i|my|we|our)\b`)

// LLM is the model-backed extractor. On a completer error or a reply that
// fails validation it returns Fallback's candidates (Rules when nil) and
// reports the reason to OnFallback.
type LLM struct {
	Complete   Completer
	Fallback   Extractor
	OnFallback func(err error)
}

// NewLLM returns an LLM extractor over complete with Rules as fallback.
func NewLLM(complete Completer) *LLM { return &LLM{Complete: complete, Fallback: Rules{}} }

// ErrInvalidReply wraps every validation failure of a model reply.
var ErrInvalidReply = errors.New("invalid extraction reply")

// Extract implements Extractor. Events are sent in batches of at most
// LLMBatchEvents events and LLMBatchBytes bytes; each batch falls back to
// the rules on its own.
func (l *LLM) Extract(ctx context.Context, events []memory.Event) ([]Candidate, error) {
	var out []Candidate
	for start := 0; start < len(events); {
		end, size := start, 0
		for end < len(events) && end-start < LLMBatchEvents {
			n := len(events[end].Text) + len(events[end].ID) + 16
			if end > start && size+n > LLMBatchBytes {
				break
			}
			size += n
			end++
		}
		cs, err := l.extractBatch(ctx, events[start:end])
		if err != nil {
			return out, err
		}
		out = append(out, cs...)
		start = end
	}
	return out, nil
}

func (l *LLM) extractBatch(ctx context.Context, events []memory.Event) ([]Candidate, error) {
	fallback := l.Fallback
	if fallback == nil {
		fallback = Rules{}
	}
	if l.Complete == nil {
		return fallback.Extract(ctx, events)
	}
	var user strings.Builder
	for _, ev := range events {
		text := ev.Text
		if len(text) > LLMBatchBytes {
			text = text[:LLMBatchBytes]
		}
		fmt.Fprintf(&user, "[%s] %s: %s\n", ev.ID, ev.Role, strings.ReplaceAll(text, "\n", " "))
	}
	reply, err := l.Complete(ctx, llmSystem, user.String())
	if err == nil {
		var cs []Candidate
		cs, err = ParseLLMReply(reply, events)
		if err == nil {
			return cs, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if l.OnFallback != nil {
		l.OnFallback(err)
	}
	return fallback.Extract(ctx, events)
}

type llmMemory struct {
	Strategy string   `json:"strategy"`
	Content  string   `json:"content"`
	Topic    string   `json:"topic"`
	Type     string   `json:"type"`
	Section  string   `json:"section"`
	Plants   []string `json:"plants"`
	Sources  []string `json:"sources"`
}

type llmReply struct {
	Memories *[]llmMemory `json:"memories"`
}

// ParseLLMReply validates a model reply against LLMSchema and the input
// events; every error wraps ErrInvalidReply.
func ParseLLMReply(reply string, events []memory.Event) ([]Candidate, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidReply, fmt.Sprintf(format, a...))
	}
	if len(reply) > MaxLLMReplyBytes {
		return nil, bad("reply is %d bytes, over %d", len(reply), MaxLLMReplyBytes)
	}
	body := strings.TrimSpace(reply)
	if strings.HasPrefix(body, "```") {
		body = strings.TrimPrefix(body, "```json")
		body = strings.TrimPrefix(body, "```")
		body = strings.TrimSuffix(strings.TrimSpace(body), "```")
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	var r llmReply
	if err := dec.Decode(&r); err != nil {
		return nil, bad("decode: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("trailing data after the JSON object")
	}
	if r.Memories == nil {
		return nil, bad(`missing "memories"`)
	}
	ms := *r.Memories
	if len(ms) > MaxLLMMemories {
		return nil, bad("%d memories, over %d", len(ms), MaxLLMMemories)
	}
	byID := make(map[string]memory.Event, len(events))
	for _, ev := range events {
		byID[ev.ID] = ev
	}
	out := make([]Candidate, 0, len(ms))
	for i, m := range ms {
		var s memory.Strategy
		switch m.Strategy {
		case string(memory.StrategyUserPreference), string(memory.StrategySemantic), string(memory.StrategyProcedural):
			s = memory.Strategy(m.Strategy)
		default:
			return nil, bad("memory %d: strategy %q", i, m.Strategy)
		}
		content := strings.Join(strings.Fields(m.Content), " ")
		if content == "" || utf8.RuneCountInString(content) > MaxLLMContentRunes || !utf8.ValidString(content) || hasControl(m.Content) {
			return nil, bad("memory %d: content empty, too long or not clean text", i)
		}
		if strings.HasSuffix(content, "?") || strings.HasSuffix(content, "？") || reAskSelfEN.MatchString(content) || askWh(strings.ToLower(content)) {
			// a question the model copied as a memory ("Do I live in
			// Portland?") states nothing, and would supersede the fact
			continue
		}
		topic := strings.ToLower(strings.TrimSpace(m.Topic))
		if utf8.RuneCountInString(topic) > MaxLLMTopicRunes || hasControl(topic) {
			return nil, bad("memory %d: topic", i)
		}
		switch m.Type {
		case "", "preference", "fact", "instruction":
		default:
			return nil, bad("memory %d: type %q", i, m.Type)
		}
		switch m.Section {
		case "", "profile", "garden", "style", "general":
		default:
			return nil, bad("memory %d: section %q", i, m.Section)
		}
		if len(m.Plants) > MaxLLMPlants {
			return nil, bad("memory %d: %d plants", i, len(m.Plants))
		}
		if len(m.Sources) == 0 {
			return nil, bad("memory %d: no sources", i)
		}
		var evidence []string
		allUser := true
		var latest = byID[m.Sources[0]].Timestamp
		for _, id := range m.Sources {
			ev, ok := byID[id]
			if !ok {
				return nil, bad("memory %d: source %q is not an input event", i, id)
			}
			evidence = append(evidence, ev.Text)
			if ev.Role != "user" {
				allUser = false
			}
			if ev.Timestamp.After(latest) {
				latest = ev.Timestamp
			}
		}
		md := map[string]any{}
		typ := m.Type
		if typ == "" {
			typ = map[memory.Strategy]string{memory.StrategyUserPreference: "preference", memory.StrategySemantic: "fact", memory.StrategyProcedural: "instruction"}[s]
		}
		md[KeyType] = typ
		sec := m.Section
		if sec == "" {
			sec = "general"
		}
		md[KeySection] = sec
		var ps []string
		for _, p := range m.Plants {
			p = strings.ToLower(strings.TrimSpace(p))
			if p == "" || utf8.RuneCountInString(p) > 40 || hasControl(p) {
				return nil, bad("memory %d: plant name", i)
			}
			ps = append(ps, p)
		}
		if len(ps) > 0 {
			md[KeyPlants] = ps
		}
		if topic != "" {
			md[KeyTopic] = topic
		}
		out = append(out, Candidate{
			Strategy: s, Content: content, Topic: topic, Metadata: md,
			Sources: append([]string(nil), m.Sources...), Evidence: strings.Join(evidence, "\n"),
			Role: "user", Direct: allUser, Entities: ps, Time: latest,
		})
	}
	return out, nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return true
		}
	}
	return false
}
