package extract

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/gate"
)

// SummaryQuotes is how many user utterances a session summary quotes.
const SummaryQuotes = 5

// summaryQuoteRunes bounds each quoted utterance.
const summaryQuoteRunes = 160

// Summarize builds the SUMMARIZATION candidate of one session from its
// events (oldest first): the date span, the number of user turns, the
// plants and topics mentioned, and up to SummaryQuotes user utterances,
// chosen by gate score (ties: earlier first) and quoted in event order.
// Utterances the gate would drop on their own ("ok", "ㅋㅋ") are counted but
// never quoted. Sources are the quoted events only, so provenance points at
// what the summary actually says. ok is false when nothing is worth quoting.
func Summarize(sessionID string, events []memory.Event) (c Candidate, ok bool) {
	type quote struct {
		i     int
		score float64
		ev    memory.Event
	}
	var qs []quote
	turns := 0
	var plantsSeen []string
	seenP := map[string]bool{}
	topicsSeen := map[string]bool{}
	var topicList []string
	for i, ev := range events {
		if ev.Role != "user" || strings.TrimSpace(ev.Text) == "" {
			continue
		}
		turns++
		lower := strings.ToLower(ev.Text)
		for _, p := range findTerms(lower, plants) {
			if !seenP[p.canon] {
				seenP[p.canon] = true
				plantsSeen = append(plantsSeen, p.canon)
			}
		}
		if t, _ := topicOf(lower); t != "" && !topicsSeen[t] {
			topicsSeen[t] = true
			topicList = append(topicList, t)
		}
		s := gate.Score(gate.Assess(gate.Input{Text: ev.Text, Role: "user"}))
		if gate.Decide(s) == gate.Dropped {
			continue // small talk is counted, never quoted
		}
		qs = append(qs, quote{i, s, ev})
	}
	if len(qs) == 0 {
		return Candidate{}, false
	}
	sort.SliceStable(qs, func(a, b int) bool { return qs[a].score > qs[b].score })
	if len(qs) > SummaryQuotes {
		qs = qs[:SummaryQuotes]
	}
	sort.Slice(qs, func(a, b int) bool { return qs[a].i < qs[b].i })

	var first, last = events[0].Timestamp, events[len(events)-1].Timestamp
	var b strings.Builder
	date := first.UTC().Format("2006-01-02")
	if d2 := last.UTC().Format("2006-01-02"); d2 != date {
		date += " to " + d2
	}
	fmt.Fprintf(&b, "Session summary (%s, %d user turns)", date, turns)
	if len(plantsSeen) > 0 {
		fmt.Fprintf(&b, "; plants: %s", strings.Join(plantsSeen, ", "))
	}
	if len(topicList) > 0 {
		fmt.Fprintf(&b, "; topics: %s", strings.Join(topicList, ", "))
	}
	b.WriteString(". User said:")
	var sources []string
	var evidence []string
	for _, q := range qs {
		t := strings.Join(strings.Fields(q.ev.Text), " ")
		if utf8.RuneCountInString(t) > summaryQuoteRunes {
			t = string([]rune(t)[:summaryQuoteRunes]) + "…"
		}
		fmt.Fprintf(&b, " “%s”", t)
		evidence = append(evidence, t)
		if q.ev.ID != "" {
			sources = append(sources, q.ev.ID)
		}
	}
	md := map[string]any{KeyType: "summary", KeySection: "session", "sessionId": sessionID}
	if len(plantsSeen) > 0 {
		md[KeyPlants] = plantsSeen
	}
	return Candidate{
		Strategy: memory.StrategySummary,
		Content:  b.String(),
		Metadata: md,
		Sources:  sources,
		Evidence: strings.Join(evidence, "\n"),
		Role:     "user",
		Entities: plantsSeen,
		Time:     last,
	}, true
}
