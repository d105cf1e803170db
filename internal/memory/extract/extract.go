// Package extract turns short-term events into candidate long-term records
// (SPEC §4.3) for the four strategies: USER_PREFERENCE, SEMANTIC,
// SUMMARIZATION and PROCEDURAL.
//
// Rules is the default, model-free extractor; it covers English and Korean
// with regular expressions over each user clause. LLM asks a model for
// structured JSON, validates it strictly and falls back to Rules on garbage.
//
// Content: a candidate keeps the user's own wording — the clause that
// matched, with white space collapsed and trailing punctuation removed
// ("I only use organic fertiliser", "저는 유기농 비료만 써요"). The user's
// words are what a later search is most likely to match, and they read
// naturally under the "[Explicit]" tag in the system prompt. Summaries are
// the one exception: they are composed ("Session summary (…): …").
//
// Topic: every preference, fact and instruction carries a topic key
// (metadata "topic") such as "fertiliser", "name", "language",
// "answer_length", "location", "has:fig" or "likes:roses". Two active
// records on the same topic with different content contradict each other;
// the pipeline lets the newer supersede the older.
package extract

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/gate"
	"github.com/tendrilai/tendril/internal/memory/search"
)

// Metadata keys written on candidates. "type", "section" and "plants" are
// the default indexed keys (SPEC §4.6).
const (
	KeyType    = "type"    // preference | fact | instruction | summary | note
	KeySection = "section" // profile | garden | style | session | general
	KeyPlants  = "plants"  // []string of canonical English plant names
	KeyTopic   = "topic"   // contradiction key, see the package comment
	// KeyDate is the ISO date (YYYY-MM-DD) of the first relative time
	// expression of the clause ("yesterday", "지난주") resolved against the
	// event's timestamp; KeyDateWords renders it ("7 May 2023", "week of 1
	// May 2023", "April 2023", "2022"), and Content ends with it in
	// parentheses so that both the model and a search see the date.
	KeyDate      = "date"
	KeyDateWords = "dateWords"
	// KeySpeaker names who said it, when the event carries a "speaker".
	KeySpeaker = "speaker"
)

// Candidate is a proposed long-term record before the gate and
// consolidation.
type Candidate struct {
	Strategy memory.Strategy `json:"strategy"`
	Content  string          `json:"content"`
	Topic    string          `json:"topic,omitempty"`
	// Metadata holds type, section, plants (when detected) and topic.
	Metadata map[string]any `json:"metadata,omitempty"`
	// Sources are the event IDs the candidate came from (provenance).
	Sources []string `json:"sources,omitempty"`
	// Evidence is the text the gate scores: the user's words.
	Evidence string `json:"evidence,omitempty"`
	Role     string `json:"role,omitempty"`
	// Direct is true when a first-person statement pattern matched.
	Direct bool `json:"direct,omitempty"`
	// Entities are plants, places, names and domain terms found.
	Entities []string `json:"entities,omitempty"`
	// Time is the timestamp of the latest source event.
	Time time.Time `json:"time"`
}

// GateInput describes c to the importance gate, with existing record
// contents for novelty.
func (c Candidate) GateInput(existing []string) gate.Input {
	text := c.Evidence
	if text == "" {
		text = c.Content
	}
	return gate.Input{Text: text, Strategy: c.Strategy, Role: c.Role, Direct: c.Direct, Entities: c.Entities, Existing: existing}
}

// Extractor proposes candidates from a batch of events (oldest first).
// Candidates come back in event order, so a later one is newer.
type Extractor interface {
	Extract(ctx context.Context, events []memory.Event) ([]Candidate, error)
}

// Rules is the rule-based extractor for English and Korean. Its zero value
// is ready to use. It reads user events only, plus "user …" statements in
// third person (as an agent writes them with memory_write), and never
// fails.
type Rules struct{}

// Extract implements Extractor.
func (Rules) Extract(ctx context.Context, events []memory.Event) ([]Candidate, error) {
	var out []Candidate
	for _, ev := range events {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		cs := ExtractText(ev.ID, ev.Role, ev.Text, ev.Timestamp)
		// In a conversation with several people (metadata "speaker", as in
		// a group chat or a replayed dialogue) the record says who said it.
		if sp, ok := ev.Metadata["speaker"].(string); ok && strings.TrimSpace(sp) != "" {
			for i := range cs {
				cs[i].Content = strings.TrimSpace(sp) + ": " + cs[i].Content
				cs[i].Metadata[KeySpeaker] = strings.TrimSpace(sp)
			}
		}
		out = append(out, cs...)
	}
	return out, nil
}

// ExtractText runs the rules over one utterance. Only role "user" and
// role "" (raw notes) are read; third-person "the user …" clauses are read
// for any role.
func ExtractText(sourceID, role, text string, ts time.Time) []Candidate {
	if len(text) > maxUtterance {
		text = text[:maxUtterance]
	}
	var out []Candidate
	for _, cl := range clauses(text) {
		// A question states nothing ("Do I live in Portland?"): read as a
		// statement it would become a fact, and supersede the true one.
		// Only its question part is dropped ("I'm allergic to bees, is
		// lavender safe?" keeps the allergy).
		clause := statementOf(cl)
		if clause == "" {
			continue
		}
		c, ok := matchClause(clause, role)
		if !ok {
			continue
		}
		if sourceID != "" {
			c.Sources = []string{sourceID}
		}
		c.Role = role
		c.Time = ts
		if rs := search.ResolveRelative(clause, ts); len(rs) > 0 {
			c.Metadata[KeyDate] = rs[0].Start.Format("2006-01-02")
			c.Metadata[KeyDateWords] = rs[0].Words()
			c.Content += " (" + rs[0].Words() + ")"
		}
		// Clauses of one utterance on the same topic state one standing
		// choice ("저는 유기농 비료만 사용해요. 화학 비료는 절대 안 써요."):
		// they become one record, so that consolidation does not let the
		// second supersede the first.
		if n := len(out); n > 0 && c.Topic != "" && out[n-1].Topic == c.Topic && out[n-1].Strategy == c.Strategy {
			p := &out[n-1]
			p.Content += ". " + c.Content
			p.Evidence += " " + c.Evidence
			for _, e := range c.Entities {
				if !slices.Contains(p.Entities, e) {
					p.Entities = append(p.Entities, e)
				}
			}
			continue
		}
		out = append(out, c)
	}
	return out
}

// maxUtterance bounds the bytes of one utterance the rules read.
const maxUtterance = 8 << 10

var (
	reSentence = regexp.MustCompile(`[.!?;\n。？！]+\s*|\s+(?:그리고|그런데|근데)\s+`)
	reConjEN   = regexp.MustCompile(`(?i),?\s+(?:and|but|so|also)\s+(?:i|my)\b`)
)

// Clauses splits an utterance into sentences, and English sentences further
// at ", and I"/" but my"-style joins so each clause states one thing.
func Clauses(text string) []string {
	var out []string
	for _, c := range clauses(text) {
		out = append(out, c.text)
	}
	return out
}

// clause is one clause of an utterance; question is set when its sentence
// ended with a question mark.
type clause struct {
	text     string
	question bool
}

func clauses(text string) []clause {
	var out []clause
	seps := reSentence.FindAllStringIndex(text, -1)
	start := 0
	for i := 0; i <= len(seps); i++ {
		end, q := len(text), false
		if i < len(seps) {
			end = seps[i][0]
			q = strings.ContainsAny(text[seps[i][0]:seps[i][1]], "?？")
		}
		s := strings.TrimSpace(text[start:end])
		if i < len(seps) {
			start = seps[i][1]
		}
		if s == "" {
			continue
		}
		idx := reConjEN.FindAllStringIndex(s, -1)
		prev := 0
		for _, ix := range idx {
			// cut before the pronoun: the last word of the match
			cut := ix[1]
			for cut > ix[0] && s[cut-1] != ' ' {
				cut--
			}
			if p := strings.TrimSpace(s[prev:ix[0]]); p != "" {
				out = append(out, clause{p, q})
			}
			prev = cut
		}
		if p := strings.TrimSpace(s[prev:]); p != "" {
			out = append(out, clause{p, q})
		}
	}
	return out
}

// cleanContent collapses white space and trims punctuation at both ends.
func cleanContent(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsPunct(r) && r != '\'' && r != '"' && r != ')' || unicode.IsSpace(r)
	})
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// Annotate returns the metadata (type "note", section, plants) and the
// named entities the lexicons find in free text, for records that do not
// come from a rule, such as memory_write notes.
func Annotate(text string) (md map[string]any, entities []string) {
	lower := strings.ToLower(text)
	c := newCandidate(memory.StrategyEpisodic, "note", text, lower, "", nil)
	delete(c.Metadata, KeyTopic)
	return c.Metadata, c.Entities
}
