package memory

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/session"
)

func pref(id, content string) Hit {
	return Hit{Record: Record{ID: id, Strategy: StrategyUserPreference, Content: content}}
}

func fact(id, content string) Hit {
	return Hit{Record: Record{ID: id, Strategy: StrategySemantic, Content: content}}
}

func event(id, role, text string) Hit {
	return Hit{Record: Record{ID: id, Strategy: StrategyEpisodic, Content: "(2026-03-01) " + role + ": " + text,
		Metadata: map[string]any{"kind": "event", "role": role}}}
}

func keptIDs(hits []Hit) string {
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.Record.ID)
	}
	return strings.Join(ids, ",")
}

func reasons(dropped []Dropped) map[string]string {
	out := map[string]string{}
	for _, d := range dropped {
		out[d.Hit.Record.ID] = d.Reason
	}
	return out
}

func TestFilterDropsDuplicates(t *testing.T) {
	hits := []Hit{
		event("ev1", "user", "I only use organic fertiliser."), // the explicit record, said once
		pref("p1", "I only use organic fertiliser"),
		pref("p2", "i only use ORGANIC   fertiliser!"),              // normalised duplicate
		fact("f1", "My fig tree has aphids on the new leaves"),      // kept
		fact("f2", "my fig tree has aphids on the new leaves, too"), // near-duplicate (token overlap)
		fact("f3", "The fig tree is by the south wall"),             // shares words, not a duplicate
		fact("f1", "My fig tree has aphids on the new leaves"),      // same ID again
	}
	kept, dropped := FilterHits(hits)
	if got := keptIDs(kept); got != "p1,f1,f3" {
		t.Fatalf("kept %s, dropped %+v", got, dropped)
	}
	r := reasons(dropped)
	for _, id := range []string{"ev1", "p2", "f2"} {
		if r[id] != DropDuplicate {
			t.Errorf("%s: reason %q, want duplicate", id, r[id])
		}
	}
	if len(dropped) != 4 {
		t.Errorf("dropped %d, want 4 (ev1, p2, f2 and the repeated f1)", len(dropped))
	}
}

func TestFilterDropsAssistantEchoes(t *testing.T) {
	noRole := Hit{Record: Record{ID: "ev3", Strategy: StrategyEpisodic, Content: "(2026-03-01) assistant: Noted — organic only, and I'll keep answers short."}}
	hits := []Hit{
		event("ev1", "user", "my basil keeps wilting in the afternoon sun"),
		event("ev2", "assistant", "Your basil keeps wilting in the afternoon sun, so move it to morning light."), // restates the user
		noRole, // an assistant event known only by its speaker prefix
		event("ev4", "assistant", "The forecast for Busan says rain on Thursday."), // no user line restated: still the assistant's
	}
	kept, dropped := FilterHits(hits)
	if got := keptIDs(kept); got != "ev1" {
		t.Fatalf("kept %s, dropped %+v", got, dropped)
	}
	for id, why := range reasons(dropped) {
		if why != DropEcho {
			t.Errorf("%s: reason %q, want echo", id, why)
		}
	}
	// A user event whose speaker name is not a role is not an echo.
	named := Hit{Record: Record{ID: "lc", Strategy: StrategyEpisodic, Content: "(2023-05-08) Caroline: I went to the LGBTQ support group", Metadata: map[string]any{"kind": "event", "role": "user", "speaker": "Caroline"}}}
	if IsAssistantRecord(named.Record) || !IsAssistantRecord(noRole.Record) {
		t.Fatal("IsAssistantRecord")
	}
}

func TestFilterDropsContentlessLines(t *testing.T) {
	var hits []Hit
	for i, s := range []string{"ok", "Thanks!", "hi", "ㅇㅋ", "감사합니다", "ok, got it", "thank you so much!!", "네 알겠습니다", "ㅋㅋㅋ", "   "} {
		hits = append(hits, event(fmt.Sprintf("c%d", i), "user", s))
	}
	hits = append(hits, fact("x1", "ok"), pref("k1", "call me Jin"), event("k2", "user", "비료는 유기농만 써요"), event("k3", "user", "I have 3 fig trees"), fact("k4", "hi-fi speakers in the greenhouse"))
	kept, dropped := FilterHits(hits)
	if got := keptIDs(kept); got != "k1,k2,k3,k4" {
		t.Fatalf("kept %s, dropped %+v", got, dropped)
	}
	for id, why := range reasons(dropped) {
		if why != DropContentless {
			t.Errorf("%s: reason %q, want contentless", id, why)
		}
	}
	if !IsContentless("Okay, thanks, bye!") || IsContentless("okay, water the figs") {
		t.Fatal("IsContentless")
	}
}

func TestFilterExplicitBeatsConflictingInferenceWithOtherTopicKey(t *testing.T) {
	organic := pref("p1", "I only use organic fertiliser")
	organic.Record.Metadata = map[string]any{"topic": "fertiliser"}
	synthetic := fact("f1", "my fertiliser is a synthetic NPK blend")
	synthetic.Record.Metadata = map[string]any{"topic": "garden-inputs"}  // a different key
	american := fact("f2", "Fertilizer: synthetic granules every spring") // other spelling, no key
	hits := []Hit{
		synthetic,
		american,
		fact("f3", "grows roses that get aphids in spring"),
		fact("f4", "aphids on the roses in spring, sprayed soapy water on roses aphids"),
		// A long exchange that merely mentions fertiliser is not a claim about it.
		event("f5", "user", "fertiliser came up when we talked about the allotment, the compost bins, the new shed, the water butt, the rota, the neighbours and the fig"),
		organic,
		{Record: Record{ID: "pr1", Strategy: StrategyProcedural, Content: "keep answers short about aphids"}},
		// Korean: the same subject with particles attached.
		pref("p2", "나는 유기농 비료만 써요"),
		fact("f6", "내 비료는 합성 NPK야"),
	}
	kept, dropped := FilterHits(hits)
	if got := keptIDs(kept); got != "p1,pr1,p2,f3,f4,f5" {
		t.Fatalf("kept %s, dropped %+v", got, dropped)
	}
	r := reasons(dropped)
	for _, id := range []string{"f1", "f2", "f6"} {
		if r[id] != DropConflict {
			t.Errorf("%s: reason %q, want conflict", id, r[id])
		}
	}
	// The rule is directional and explicit-only: two inferences never
	// conflict, and a procedural instruction does not settle facts.
	if SameTopic(synthetic.Record, american.Record) && synthetic.Record.Explicit() {
		t.Fatal("unreachable")
	}
	if SameTopic(Record{Strategy: StrategyProcedural, Content: "keep answers short about aphids"}, Record{Content: "aphids on the roses in spring"}) {
		t.Fatal("procedural instruction settled a fact by its noun")
	}
	if !SameTopic(organic.Record, Record{Content: "uses chemical fertiliser"}) {
		t.Fatal("restating variant not a conflict")
	}
}

func TestFilterIsIdempotent(t *testing.T) {
	hits := []Hit{
		fact("a", "fig tree by the south wall gets full sun"),
		fact("b", "fig tree by the south wall gets the full sun"),
		fact("c", "the south wall fig gets sun and wind"),
		pref("p", "I only use organic fertiliser"),
		fact("d", "my fertiliser is a synthetic NPK blend"),
		event("e", "assistant", "ok"),
		event("f", "user", "thanks"),
	}
	once, _ := FilterHits(hits)
	twice, dropped := FilterHits(once)
	if !reflect.DeepEqual(once, twice) || len(dropped) != 0 {
		t.Fatalf("second pass changed %s to %s (dropped %+v)", keptIDs(once), keptIDs(twice), dropped)
	}
	if got := keptIDs(Assemble(hits, 0)); got != keptIDs(once) {
		t.Fatalf("Assemble %s, FilterHits %s", got, keptIDs(once))
	}
}

var (
	plants   = []string{"fig", "basil", "tomato", "rose", "petunia", "chilli", "mint", "lavender"}
	troubles = []string{"wilting badly", "yellow leaves", "aphid colonies", "powdery mildew", "slug damage"}
	months   = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
)

func TestBudgetKeepsExplicitFirst(t *testing.T) {
	var hits []Hit
	for i := 0; i < 40; i++ {
		hits = append(hits, fact(fmt.Sprintf("i%02d", i), fmt.Sprintf("%s in plot %d %s since %s", plants[i%8], i, troubles[(i/8)%5], months[i%12])))
	}
	hits = append(hits, pref("e1", "I only use organic fertiliser"), Hit{Record: Record{ID: "e2", Strategy: StrategyProcedural, Content: "always answer in Korean"}})
	full := RenderBlockWith(hits, BlockOptions{})
	if len(full.Hits) != 42 || full.Cut != 0 || full.Tokens != session.EstimateText(full.Text) {
		t.Fatalf("unbudgeted block: %d hits, cut %d", len(full.Hits), full.Cut)
	}
	for _, budget := range []int{20, 40, 60, 100, 250, 400} {
		b := RenderBlockWith(hits, BlockOptions{MaxTokens: budget})
		if b.Tokens > budget || session.EstimateText(b.Text) > budget {
			t.Fatalf("budget %d: block of %d tokens", budget, b.Tokens)
		}
		if len(b.Hits) >= 2 && keptIDs(b.Hits[:2]) != "e1,e2" {
			t.Fatalf("budget %d: explicit records not first: %s", budget, keptIDs(b.Hits))
		}
		if len(b.Hits) == 1 && b.Hits[0].Record.ID != "e1" {
			t.Fatalf("budget %d: kept %s instead of the top explicit record", budget, keptIDs(b.Hits))
		}
		// A prefix of the ranked list, and as long as fits.
		if keptIDs(b.Hits) != keptIDs(full.Hits[:len(b.Hits)]) {
			t.Fatalf("budget %d: not a prefix: %s", budget, keptIDs(b.Hits))
		}
		if len(b.Hits) < len(full.Hits) {
			next := RenderBlock(full.Hits[:len(b.Hits)+1])
			if session.EstimateText(next) <= budget {
				t.Fatalf("budget %d: one more record would have fitted", budget)
			}
		}
		if b.Cut != 42-len(b.Hits) {
			t.Fatalf("budget %d: cut %d", budget, b.Cut)
		}
		t.Logf("budget %d: %d records, %d tokens", budget, len(b.Hits), b.Tokens)
	}
	if b := RenderBlockWith(hits, BlockOptions{MaxTokens: 5}); b.Text != "" || len(b.Hits) != 0 {
		t.Fatalf("a budget below one line rendered %q", b.Text)
	}
	if b := RenderBlockWith(hits, BlockOptions{Limit: 3}); keptIDs(b.Hits) != "e1,e2,i00" || b.Cut != 39 {
		t.Fatalf("limit 3: %s cut %d", keptIDs(b.Hits), b.Cut)
	}
	// FitBlock works around any renderer, e.g. the agent's RenderMemory.
	fit, text := FitBlock(full.Hits, 60, RenderBlock)
	if session.EstimateText(text) > 60 || text != RenderBlock(fit) || keptIDs(fit[:2]) != "e1,e2" {
		t.Fatalf("FitBlock: %s\n%s", keptIDs(fit), text)
	}
}

// The 25 KB block of the bug report: long assistant replies, thanks and
// repeats make up most of it; filtered and budgeted, it fits its share.
func TestRealisticBlockShrinks(t *testing.T) {
	hits := realisticHits()
	raw := 0
	for _, h := range hits {
		raw += len(h.Record.Content) + 16
	}
	if raw < 20000 {
		t.Fatalf("fixture too small: %d bytes", raw)
	}
	unbudgeted := RenderBlockWith(hits, BlockOptions{})
	b := RenderBlockWith(hits, BlockOptions{MaxTokens: 600})
	if b.Tokens > 600 || !strings.Contains(b.Text, "[Explicit] I only use organic fertiliser") || strings.Contains(b.Text, "synthetic NPK") ||
		strings.Contains(b.Text, "assistant:") || strings.Contains(b.Text, ": thanks") {
		t.Fatalf("block (%d tokens):\n%s", b.Tokens, b.Text)
	}
	t.Logf("raw %d bytes → filtered %d bytes (%d tokens) → budget 600: %d bytes, %d records", raw, len(unbudgeted.Text), unbudgeted.Tokens, len(b.Text), len(b.Hits))
}

// realisticHits is a retrieval result of about 25 KB: standing explicit
// records, a conflicting inference, and many past exchanges of which half
// are the assistant's replies and many are acknowledgements or repeats.
func realisticHits() []Hit {
	hits := []Hit{
		pref("p1", "I only use organic fertiliser"),
		{Record: Record{ID: "p2", Strategy: StrategyProcedural, Content: "keep answers short"}},
		pref("p3", "call me Jin"),
		fact("s1", "my fertiliser is a synthetic NPK blend"),
		fact("s2", "lives in Busan, has raised beds with fast drainage"),
		fact("s3", "has a fig tree by the south wall"),
	}
	for i := 0; i < 60; i++ {
		p := plants[i%len(plants)]
		hits = append(hits,
			event(fmt.Sprintf("u%d", i), "user", fmt.Sprintf("the %s in bed %d has yellow leaves after the rain on day %d, should I worry about it?", p, i%5, i)),
			event(fmt.Sprintf("a%d", i), "assistant", fmt.Sprintf("Yellow leaves on a %s after rain usually mean waterlogged roots. Since your beds drain fast, check the bottom of bed %d first, let the top few centimetres dry out, and feed lightly with an organic fertiliser once new growth shows. Remove the worst leaves so fungus cannot take hold, and keep an eye on the lower stems for soft spots over the next week.", p, i%5)))
		if i%3 == 0 {
			hits = append(hits, event(fmt.Sprintf("t%d", i), "user", []string{"thanks", "ok", "ㅇㅋ", "감사합니다"}[i%4]))
		}
		if i%4 == 0 {
			hits = append(hits, event(fmt.Sprintf("r%d", i), "user", fmt.Sprintf("The %s in bed %d has yellow leaves after the rain on day %d — should I worry about it", p, i%5, i)))
		}
	}
	return hits
}

// A word (stem) is a noun of an analysis when some occurrence of it is
// not a listed preference verb: "favourite" in "my favourite organic
// fertiliser" is not; with "favourites" (not listed, the same stem)
// beside it, it is.
func TestAnalysisNouns(t *testing.T) {
	verb := analyseBody(Record{Content: "my favourite organic fertiliser"})
	both := analyseBody(Record{Content: "my favourite organic fertiliser, among my favourites"})
	use, fert := stem("favourite"), stem("fertiliser")
	if use != stem("favourites") {
		t.Fatalf("stems %q and %q differ", use, stem("favourites"))
	}
	if !slices.Contains(verb.words, use) || verb.isNoun(use) || !verb.isNoun(fert) {
		t.Fatalf("verb favourite: words %v verbOnly %v", verb.words, verb.verbOnly)
	}
	if !both.isNoun(use) || !both.isNoun(fert) || both.isNoun("absent") {
		t.Fatalf("noun favourite: words %v verbOnly %v", both.words, both.verbOnly)
	}
}
