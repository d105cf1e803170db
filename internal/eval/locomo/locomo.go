// Package locomo replays LoCoMo conversations (snap-research/LoCoMo,
// CC BY-NC 4.0; see shared/data/locomo/README.md) into the embedded memory
// store and measures retrieval (SPEC §4.8): turn-level recall@k, all@k and
// any@k per category, session-level recall@k, query latency and ingest
// throughput. No model or network is needed.
package locomo

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Turn is one dialogue turn.
type Turn struct {
	Speaker     string `json:"speaker"`
	DiaID       string `json:"dia_id"`
	Text        string `json:"text"`
	BlipCaption string `json:"blip_caption,omitempty"`
}

// Session is one dated session of a conversation.
type Session struct {
	Num   int
	Key   string // "session_3"
	Date  time.Time
	Raw   string // "1:56 pm on 8 May, 2023"
	Turns []Turn
}

// QA is one question with its normalised evidence turn IDs.
type QA struct {
	Question string
	Category int
	Evidence []string
}

// Conversation is one LoCoMo sample.
type Conversation struct {
	SampleID string
	SpeakerA string
	SpeakerB string
	Sessions []Session
	QA       []QA
	Skipped  int // questions dropped for having no known evidence
}

var sessionKey = regexp.MustCompile(`^session_(\d+)$`)

// evidenceID matches "D3:7", "D:11:26" (→ D11:26) and "D30:05" (→ D30:5).
var evidenceID = regexp.MustCompile(`D:?(\d+):(\d+)`)

// ParseDate parses LoCoMo session dates such as "1:56 pm on 8 May, 2023".
func ParseDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{"3:04 pm on 2 January, 2006", "3:04 pm on 2 Jan, 2006", "3:04 PM on 2 January, 2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("unrecognised session date %q", s)
}

// NormalizeEvidence splits one evidence string into canonical turn IDs:
// "D8:6; D9:17" → [D8:6 D9:17], "D:11:26" → [D11:26], "D30:05" → [D30:5].
func NormalizeEvidence(s string) []string {
	var out []string
	for _, m := range evidenceID.FindAllStringSubmatch(s, -1) {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		out = append(out, fmt.Sprintf("D%d:%d", a, b))
	}
	return out
}

// Load reads a LoCoMo JSON file (a list of conversations). Only
// session_N keys holding a list are sessions; unknown evidence IDs are
// dropped and questions left without evidence are skipped.
func Load(path string) ([]Conversation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load locomo: %w", err)
	}
	return Parse(data)
}

// Parse is Load on bytes.
func Parse(data []byte) ([]Conversation, error) {
	var raw []struct {
		SampleID     string                     `json:"sample_id"`
		Conversation map[string]json.RawMessage `json:"conversation"`
		QA           []struct {
			Question string `json:"question"`
			Evidence []any  `json:"evidence"`
			Category int    `json:"category"`
		} `json:"qa"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// not the Go type of raw, which means nothing to a user
			at := ""
			if te.Field != "" {
				at = " at " + te.Field
			}
			return nil, fmt.Errorf("parse locomo: want a JSON list of conversations (objects with sample_id, conversation and qa); found a JSON %s%s", te.Value, at)
		}
		return nil, fmt.Errorf("parse locomo: %w", err)
	}
	if len(raw) == 0 {
		return nil, errors.New("parse locomo: no conversations")
	}
	var out []Conversation
	ids := map[string]bool{}
	for i, r := range raw {
		// each conversation is its own actor: two with one ID would merge
		if strings.TrimSpace(r.SampleID) == "" {
			return nil, fmt.Errorf("parse locomo: conversation %d has no sample_id", i+1)
		}
		if ids[r.SampleID] {
			return nil, fmt.Errorf("parse locomo: sample_id %q appears twice", r.SampleID)
		}
		ids[r.SampleID] = true
		c := Conversation{SampleID: r.SampleID}
		json.Unmarshal(r.Conversation["speaker_a"], &c.SpeakerA)
		json.Unmarshal(r.Conversation["speaker_b"], &c.SpeakerB)
		turns := map[string]bool{}
		for k, v := range r.Conversation {
			m := sessionKey.FindStringSubmatch(k)
			if m == nil {
				continue
			}
			var ts []Turn
			if err := json.Unmarshal(v, &ts); err != nil {
				continue // not a list: a date key for a missing session, or junk
			}
			n, _ := strconv.Atoi(m[1])
			var raw string
			json.Unmarshal(r.Conversation[k+"_date_time"], &raw)
			date, err := ParseDate(raw)
			if err != nil {
				date = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n)
			}
			for i := range ts {
				if ids := NormalizeEvidence(ts[i].DiaID); len(ids) == 1 {
					ts[i].DiaID = ids[0]
				}
				turns[ts[i].DiaID] = true
			}
			c.Sessions = append(c.Sessions, Session{Num: n, Key: k, Date: date, Raw: raw, Turns: ts})
		}
		sort.Slice(c.Sessions, func(i, j int) bool { return c.Sessions[i].Num < c.Sessions[j].Num })
		for _, q := range r.QA {
			var ev []string
			seen := map[string]bool{}
			for _, e := range q.Evidence {
				s, ok := e.(string)
				if !ok {
					continue
				}
				for _, id := range NormalizeEvidence(s) {
					if turns[id] && !seen[id] {
						seen[id] = true
						ev = append(ev, id)
					}
				}
			}
			if len(ev) == 0 {
				c.Skipped++
				continue
			}
			c.QA = append(c.QA, QA{Question: q.Question, Category: q.Category, Evidence: ev})
		}
		out = append(out, c)
	}
	return out, nil
}

// SessionOf returns the session number of a turn ID ("D3:7" → 3).
func SessionOf(diaID string) int {
	m := evidenceID.FindStringSubmatch(diaID)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
