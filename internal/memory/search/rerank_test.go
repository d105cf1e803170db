package search

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func rerankDocs() []Doc {
	return []Doc{
		{Text: "I adopted a puppy from the shelter", Speaker: "Caroline", Group: "s1"},                    // 0: both words in text
		{Text: "that sounds lovely", Context: "the shelter had a puppy", Speaker: "Melanie", Group: "s1"}, // 1: context only
		{Text: "the shelter was closed", Speaker: "Melanie", Group: "s2"},                                 // 2: one word
		{Text: "we went to the beach yesterday", Speaker: "Caroline", Group: "s2"},                        // 3: no match
		{Text: "a puppy at the shelter again", Speaker: "Melanie", Group: "s3"},                           // 4: both words
	}
}

// firstStage is DefaultParams without the re-ranker.
func firstStage() Params {
	p := DefaultParams()
	p.Rerank = RerankParams{}
	return p
}

func TestFeatures(t *testing.T) {
	for i, n := range FeatureNames {
		if n == "" || slices.Index(FeatureNames[:], n) != i {
			t.Fatalf("feature %d named %q", i, n)
		}
	}
	ix := build(firstStage(), rerankDocs()...)
	sc := ix.NewScope(nil)
	q := "Did Caroline adopt a puppy from the shelter?"
	res := ix.SearchScope(q, sc, 10)
	fs := ix.Features(q, sc, res)
	if len(fs) != len(res) || len(res) < 3 {
		t.Fatalf("%d features for %d results", len(fs), len(res))
	}
	by := map[int][NumFeatures]float64{}
	for i, r := range res {
		by[r.Doc] = fs[i]
	}
	if by[0][FeatSpeaker] != 1 || by[4][FeatSpeaker] != 0 {
		t.Errorf("speaker: doc 0 %v, doc 4 %v", by[0][FeatSpeaker], by[4][FeatSpeaker])
	}
	if by[1][FeatCoverText] != 0 || by[1][FeatCoverAll] == 0 || by[1][FeatContext] == 0 {
		t.Errorf("doc 1 (context only): cover text %v, all %v, context %v", by[1][FeatCoverText], by[1][FeatCoverAll], by[1][FeatContext])
	}
	if by[2][FeatCoverText] >= by[0][FeatCoverText] {
		t.Errorf("coverage: doc 2 %v ≥ doc 0 %v", by[2][FeatCoverText], by[0][FeatCoverText])
	}
	// s1 holds "puppy" and "shelter" in two turns each, s3 in one
	if by[0][FeatSession] != 1 || by[4][FeatSession] >= 1 || by[4][FeatSession] <= 0 {
		t.Errorf("session: s1 %v, s3 %v", by[0][FeatSession], by[4][FeatSession])
	}
	for _, f := range []int{FeatScore, FeatText, FeatSession} {
		best := 0.0
		for _, v := range fs {
			best = max(best, v[f])
		}
		if best != 1 {
			t.Errorf("%s: best of the list %v, want 1", FeatureNames[f], best)
		}
	}
	if fs[0][FeatScore] != 1 || fs[0][FeatRank] <= fs[1][FeatRank] {
		t.Errorf("first result: score %v, rank %v vs %v", fs[0][FeatScore], fs[0][FeatRank], fs[1][FeatRank])
	}
}

func TestRerankFirstStageWeightsKeepOrder(t *testing.T) {
	p := firstStage()
	plain := build(p, rerankDocs()...)
	p.Rerank = RerankParams{Weights: RerankWeights{FeatScore: 1}}
	ix := build(p, rerankDocs()...)
	for _, q := range []string{"puppy shelter", "Caroline beach", "Did Melanie visit the shelter?"} {
		a, b := plain.Search(q, nil, 3), ix.Search(q, nil, 3)
		if !reflect.DeepEqual(docsOf(a), docsOf(b)) {
			t.Errorf("%q: first stage %v, re-ranked with score alone %v", q, docsOf(a), docsOf(b))
		}
	}
}

func TestContextFeatures(t *testing.T) {
	ix := build(firstStage(), rerankDocs()...)
	sc := ix.NewScope(nil)
	q := "Did Caroline adopt a puppy from the Shelter?"
	res := ix.SearchScope(q, sc, 10)
	fs := ix.Features(q, sc, res)
	by, score := map[int][NumFeatures]float64{}, map[int]float64{}
	for i, r := range res {
		by[r.Doc], score[r.Doc] = fs[i], r.Score/res[0].Score
	}
	// doc 0 and 1 share session s1
	if by[1][FeatSessBest] != score[0] || by[0][FeatSessBest] != score[1] {
		t.Errorf("s1: doc 1 session best %v, doc 0 %v; scores %v", by[1][FeatSessBest], by[0][FeatSessBest], score)
	}
	if by[4][FeatSessBest] != 0 {
		t.Errorf("doc 4 alone in s3: %v", by[4][FeatSessBest])
	}
	if by[0][FeatSessRank] != -1 || by[4][FeatSessRank] >= by[0][FeatSessRank] {
		t.Errorf("session rank: s1 %v, s3 %v", by[0][FeatSessRank], by[4][FeatSessRank])
	}
	// "Shelter" is an entity word of the query (Caroline is a speaker)
	if by[0][FeatEntity] != 1 || by[1][FeatEntity] != 1 {
		t.Errorf("entity: %v %v", by[0][FeatEntity], by[1][FeatEntity])
	}
}

// TestRerankEventsOnly: records (no Doc.Group) keep their places and
// scores; an index without sessions is the first stage exactly.
func TestRerankEventsOnly(t *testing.T) {
	docs := append(rerankDocs(),
		Doc{Text: "Melanie adopted a puppy in 2022"},          // 5: a record
		Doc{Text: "the shelter needs volunteers for puppies"}, // 6: a record
	)
	q := "Did Melanie see a puppy at the shelter?"
	plain := build(firstStage(), docs...)
	p := firstStage()
	p.Rerank = RerankParams{Weights: RerankWeights{FeatScore: 1, FeatSpeaker: -5}} // the other speaker's turns first
	ix := build(p, docs...)
	a, b := plain.Search(q, nil, 10), ix.Search(q, nil, 10)
	if len(a) != len(b) || len(a) < 5 {
		t.Fatalf("first stage %v, re-ranked %v", docsOf(a), docsOf(b))
	}
	moved := false
	for i := range a {
		if a[i].Doc >= 5 || b[i].Doc >= 5 {
			if a[i] != b[i] {
				t.Errorf("place %d: first stage %+v, re-ranked %+v", i, a[i], b[i])
			}
			continue
		}
		moved = moved || a[i].Doc != b[i].Doc
		if b[i].Score != a[i].Score {
			t.Errorf("place %d: score %v, want the place's first-stage %v", i, b[i].Score, a[i].Score)
		}
	}
	if !moved {
		t.Errorf("no turn moved: %v", docsOf(b))
	}
	var recs []Doc
	for _, d := range docs {
		d.Group = ""
		recs = append(recs, d)
	}
	plain, ix = build(firstStage(), recs...), build(p, recs...)
	if a, b := plain.Search(q, nil, 10), ix.Search(q, nil, 10); !reflect.DeepEqual(a, b) {
		t.Errorf("no sessions: first stage %v, re-ranked %v", docsOf(a), docsOf(b))
	}
}

func TestRerankWeightsReorder(t *testing.T) {
	p := firstStage()
	p.Rerank = RerankParams{Weights: RerankWeights{FeatScore: 1, FeatSpeaker: 5}}
	ix := build(p, rerankDocs()...)
	got := ix.Search("Did Melanie see a puppy?", nil, 2)
	if len(got) != 2 {
		t.Fatalf("got %v", docsOf(got))
	}
	for _, r := range got {
		if r.Doc != 1 && r.Doc != 4 {
			t.Errorf("doc %d of another speaker in the top 2: %v", r.Doc, docsOf(got))
		}
		if !strings.Contains(r.Explain, "rerank ") || !strings.Contains(r.Explain, " = [") || !strings.Contains(r.Explain, "speaker 5×1.000") || !strings.Contains(r.Explain, "of first stage ") {
			t.Errorf("explain %q", r.Explain)
		}
	}
	if LearnedRerank().Weights[FeatScore] != 1 || LearnedRerank().Depth != 100 {
		t.Errorf("LearnedRerank %+v", LearnedRerank())
	}
}

// BenchmarkRerankSearch times SearchScope (top 50) over the 100,000
// synthetic records of BenchmarkSearch with the first stage alone and
// with LearnedRerank (its 100 candidates and their features).
func BenchmarkRerankSearch(b *testing.B) {
	ix := syntheticIndex(100_000)
	sc := ix.NewScope(nil)
	qs := []string{"organic fertiliser for the fig tree", "When did Caroline water the basil?", "토마토 비료", "compost drainage"}
	for _, on := range []bool{false, true} {
		name := "first-stage"
		if on {
			name = "rerank"
		}
		b.Run(name, func(b *testing.B) {
			ix.p.Rerank = RerankParams{}
			if on {
				ix.p.Rerank = LearnedRerank()
			}
			defer func() { ix.p.Rerank = RerankParams{} }()
			cpu0 := cpuTime()
			lat, min3 := timeSearches(b, func(i int) { ix.SearchScope(qs[i%len(qs)], sc, 50) })
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e6/float64(3*b.N), "cpu-ms/search")
			reportLatency(b, lat, min3)
		})
	}
}

// BenchmarkRerankEvents100k times SearchScope (top 10) over at least
// 100,000 LoCoMo turns (the dev conversations copied, each copy its own
// sessions) with their questions: the first stage alone and
// DefaultParams (with its re-ranker, which applies to turns), and
// DefaultParams without explanations (SearchScopeQuiet, the turn's
// retrieval), and DefaultParams with the second round (Round2Params, off
// by default) of depth 50 for list questions. Latency as BenchmarkSearch (first of 3,
// fastest of 3, CPU per search).
func BenchmarkRerankEvents100k(b *testing.B) {
	convs := loadLocomo(b)
	n := 0
	eachLocomoDoc(convs, 1, func(Doc) { n++ })
	docs := locomoDocs(convs, (100_000+n-1)/n)
	var qs []string
	for _, c := range convs {
		qs = append(qs, c.Qs...)
	}
	for _, name := range []string{"first-stage", "default", "default-quiet", "round2"} {
		b.Run(name, func(b *testing.B) {
			p := DefaultParams()
			switch name {
			case "first-stage":
				p.Rerank = RerankParams{}
			case "round2":
				p.Rerank.Round2 = Round2Params{Depth: 50}
			}
			ix := NewIndex(p)
			for _, d := range docs {
				ix.Add(d)
			}
			sc := ix.NewScope(nil)
			cpu0 := cpuTime()
			search := ix.SearchScope
			if name == "default-quiet" {
				search = ix.SearchScopeQuiet
			}
			lat, min3 := timeSearches(b, func(i int) { search(qs[i%len(qs)], sc, 10) })
			b.ReportMetric(float64(len(docs)), "docs")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e6/float64(3*b.N), "cpu-ms/search")
			reportLatency(b, lat, min3)
		})
	}
}

// TestNeighbourByKey: a turn's neighbours are the previous and next live
// turns of its session in Doc.Key order, whatever order the turns were
// added in, after Remove and re-Add, and in a clone; the features are
// those of an index built fresh in key order.
func TestNeighbourByKey(t *testing.T) {
	turns := []Doc{
		{Text: "we adopted a puppy", Speaker: "Caroline", Group: "s1", Key: "k1"},
		{Text: "what is its name", Speaker: "Melanie", Group: "s1", Key: "k2"},
		{Text: "the puppy is called Oscar", Speaker: "Caroline", Group: "s1", Key: "k3"},
		{Text: "Oscar loves the shelter dogs", Speaker: "Melanie", Group: "s1", Key: "k4"},
		{Text: "a puppy at the beach", Speaker: "Melanie", Group: "s2", Key: "k5"},
		{Text: "the beach was cold", Speaker: "Caroline", Group: "s2", Key: "k6"},
	}
	q := "What is the name of Caroline's puppy?"
	feats := func(ix *Index) map[string][NumFeatures]float64 {
		sc := ix.NewScope(nil)
		res := ix.SearchScope(q, sc, 10)
		out := map[string][NumFeatures]float64{}
		for i, f := range ix.Features(q, sc, res) {
			out[ix.Key(res[i].Doc)] = f
		}
		return out
	}
	fresh := build(firstStage(), turns...)
	want := feats(fresh)
	// k2 sits between k1 and k3, both candidates: its neighbour feature is
	// the better of their scores
	sc := fresh.NewScope(nil)
	res := fresh.SearchScope(q, sc, 10)
	score := map[string]float64{}
	for _, r := range res {
		score[fresh.Key(r.Doc)] = r.Score / res[0].Score
	}
	if score["k1"] == 0 || score["k3"] == 0 || want["k2"][FeatNeighbour] != max(score["k1"], score["k3"]) {
		t.Fatalf("k2 neighbour %v, scores %v", want["k2"][FeatNeighbour], score)
	}
	if want["k5"][FeatNeighbour] != score["k6"] || want["k1"][FeatNeighbour] != score["k2"] || score["k2"] == 0 {
		t.Errorf("k5 neighbour %v (k6 %v), k1 %v (k2 %v)", want["k5"][FeatNeighbour], score["k6"], want["k1"][FeatNeighbour], score["k2"])
	}
	// added backwards, with a removed turn re-added and a removed stray
	inc := NewIndex(firstStage())
	docOf := map[string]int{}
	for i := len(turns) - 1; i >= 0; i-- {
		docOf[turns[i].Key] = inc.Add(turns[i])
	}
	stray := inc.Add(Doc{Text: "puppy name puppy", Speaker: "Caroline", Group: "s1", Key: "k25"})
	inc.Remove(docOf["k3"])
	cl := inc.Clone()
	inc.Remove(stray)
	inc.Add(turns[2])
	if got := feats(inc); !reflect.DeepEqual(got, want) {
		t.Errorf("incremental:\n%v\nfresh:\n%v", got, want)
	}
	// the clone still has the stray and not k3; updating it to the same
	// documents gives the same features, and leaves inc unchanged
	cl.Remove(stray)
	cl.Add(turns[2])
	if got := feats(cl); !reflect.DeepEqual(got, want) {
		t.Errorf("clone:\n%v\nfresh:\n%v", got, want)
	}
	if got := feats(inc); !reflect.DeepEqual(got, want) {
		t.Errorf("incremental after the clone's update:\n%v\nfresh:\n%v", got, want)
	}
}

func TestIsListQuestion(t *testing.T) {
	for q, want := range map[string]bool{
		"What LGBTQ+ events has Caroline participated in?": true,
		"What European countries has Maria been to?":       true,
		"Where has Melanie camped?":                        true,
		"What types of yoga has Maria practiced?":          true,
		"How many times did John go hiking?":               true,
		"What activities has Melanie done?":                true, // IsAggregateQuestion too
		"What did Caroline research?":                      false,
		"When did Melanie paint a sunrise?":                false,
		"What is Caroline's identity?":                     false,
	} {
		if got := IsListQuestion(q); got != want {
			t.Errorf("IsListQuestion(%q) = %v", q, got)
		}
		if IsAggregateQuestion(q) && !IsListQuestion(q) {
			t.Errorf("%q: aggregate but not a list question", q)
		}
	}
}

// TestRound2BringsNewCandidates: for a list question the second round,
// seeded by the first stage's best turn, brings a turn that holds no
// query word (so is not among the first stage's results) into the
// candidates, marked and scored; a question of another kind gets none;
// the stores' SearchScope ranks the same candidates.
func TestRound2BringsNewCandidates(t *testing.T) {
	docs := []Doc{
		{Text: "my favourite activities are pottery and hiking", Speaker: "Caroline", Group: "s1", Key: "a"}, // 0: the seed
		{Text: "activities at the shelter", Speaker: "Melanie", Group: "s1", Key: "b"},                       // 1
		{Text: "we made a pottery bowl at the studio", Speaker: "Melanie", Group: "s2", Key: "c"},            // 2: no query word
		{Text: "the beach was cold", Speaker: "Melanie", Group: "s2", Key: "d"},                              // 3: unrelated
	}
	ix := build(firstStage(), docs...)
	sc := ix.NewScope(nil)
	q := "What activities has Caroline done?"
	if !IsListQuestion(q) {
		t.Fatalf("%q is not a list question", q)
	}
	first := ix.SearchScope(q, sc, 10)
	for _, r := range first {
		if r.Doc == 2 {
			t.Fatalf("doc 2 in the first stage: %v", docsOf(first))
		}
	}
	rp := RerankParams{Depth: 100, Round2: Round2Params{Depth: 10}}
	res, fs := ix.RerankCandidates(q, sc, rp)
	if len(res) != len(fs) || len(res) <= len(first) {
		t.Fatalf("candidates %v (%d features), first stage %v", docsOf(res), len(fs), docsOf(first))
	}
	for i, r := range res {
		from := i >= len(first)
		if from != (fs[i][FeatFromRound2] == 1) {
			t.Errorf("candidate %d (doc %d): from_round2 %v", i, r.Doc, fs[i][FeatFromRound2])
		}
		if i < len(first) && r.Doc != first[i].Doc {
			t.Errorf("candidate %d: doc %d, first stage %d", i, r.Doc, first[i].Doc)
		}
	}
	at := slices.IndexFunc(res, func(r Result) bool { return r.Doc == 2 })
	if at < len(first) || fs[at][FeatRound2] <= 0 {
		t.Fatalf("doc 2 at %d of %v, round2 %v", at, docsOf(res), fs[max(at, 0)])
	}
	if slices.ContainsFunc(res, func(r Result) bool { return r.Doc == 3 }) {
		t.Errorf("unrelated doc 3 among the candidates %v", docsOf(res))
	}
	// not a list question: no second round
	q2 := "Did Caroline do activities?"
	if IsListQuestion(q2) {
		t.Fatalf("%q is a list question", q2)
	}
	res2, fs2 := ix.RerankCandidates(q2, sc, rp)
	if len(res2) != len(ix.SearchScope(q2, sc, 10)) {
		t.Errorf("%q: candidates %v", q2, docsOf(res2))
	}
	for _, f := range fs2 {
		if f[FeatRound2] != 0 || f[FeatFromRound2] != 0 {
			t.Errorf("%q: round 2 features %v", q2, f)
		}
	}
	// SearchScope with these candidates: weights that put the second
	// round first return doc 2 first, after the first stage's last score
	p := firstStage()
	p.Rerank = rp
	p.Rerank.Weights = RerankWeights{FeatScore: 1, FeatFromRound2: 5}
	got := build(p, docs...).Search(q, nil, 10)
	if len(got) != len(res) || got[0].Doc != 2 || !strings.Contains(got[0].Explain, "of the second round") {
		t.Fatalf("re-ranked %v, explain %q", docsOf(got), got[0].Explain)
	}
	if got[0].Score != first[0].Score || got[len(got)-1].Score != first[len(first)-1].Score {
		t.Errorf("scores %v, first stage %v", got, first)
	}
	// an index built backwards, with a stray turn added and removed,
	// ranks the same keys with the same scores and explanations
	inc := NewIndex(p)
	for i := len(docs) - 1; i >= 0; i-- {
		inc.Add(docs[i])
		if i == 2 {
			inc.Remove(inc.Add(Doc{Text: "pottery pottery hiking", Speaker: "Melanie", Group: "s1", Key: "a2"}))
		}
	}
	again := inc.Search(q, nil, 10)
	if len(again) != len(got) {
		t.Fatalf("incremental %v, fresh %v", again, got)
	}
	for i := range got {
		if inc.Key(again[i].Doc) != docs[got[i].Doc].Key || again[i].Score != got[i].Score || again[i].Explain != got[i].Explain {
			t.Errorf("place %d: incremental %+v, fresh %+v", i, again[i], got[i])
		}
	}
}

// SearchScopeQuiet returns SearchScope's results (documents, order and
// scores) with every explanation empty: with the shipped re-ranker, with
// round 2, and on an index without sessions.
func TestSearchScopeQuiet(t *testing.T) {
	docs := append(rerankDocs(),
		Doc{Text: "Melanie adopted a puppy in 2022"},
		Doc{Text: "the shelter needs volunteers for puppies"},
	)
	var recs []Doc
	for _, d := range docs {
		d.Group = ""
		recs = append(recs, d)
	}
	shipped := DefaultParams()
	round2 := DefaultParams()
	round2.Rerank.Round2 = Round2Params{Depth: 50, All: true}
	for name, ix := range map[string]*Index{
		"shipped":     build(shipped, docs...),
		"round 2":     build(round2, docs...),
		"no sessions": build(shipped, recs...),
		"first stage": build(firstStage(), docs...),
	} {
		for _, q := range []string{"Did Melanie see a puppy at the shelter?", "what activities does Melanie do", "volunteers"} {
			sc := ix.NewScope(nil)
			loud, quiet := ix.SearchScope(q, sc, 5), ix.SearchScopeQuiet(q, sc, 5)
			if len(loud) == 0 || len(loud) != len(quiet) {
				t.Fatalf("%s %q: %d results, quiet %d", name, q, len(loud), len(quiet))
			}
			for i := range loud {
				if loud[i].Explain == "" {
					t.Errorf("%s %q: result %d has no explanation", name, q, i)
				}
				if quiet[i].Doc != loud[i].Doc || quiet[i].Score != loud[i].Score || quiet[i].Explain != "" {
					t.Errorf("%s %q: quiet result %d = %+v, want doc %d score %v without explanation", name, q, i, quiet[i], loud[i].Doc, loud[i].Score)
				}
			}
		}
	}
}
