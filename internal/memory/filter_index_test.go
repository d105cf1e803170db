package memory

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// filterPairwise is FilterHits as it was before word hashes
// (commonWords): shared words counted by merging the strings. It is the
// reference the hashed filter must match exactly.
func filterPairwise(hits []Hit) (kept []Hit, dropped []Dropped) {
	ordered := make([]Hit, 0, len(hits))
	for _, h := range hits {
		if h.Record.Explicit() {
			ordered = append(ordered, h)
		}
	}
	for _, h := range hits {
		if !h.Record.Explicit() {
			ordered = append(ordered, h)
		}
	}
	var info []analysis
	ids := map[string]bool{}
	for _, h := range ordered {
		if IsAssistantRecord(h.Record) {
			dropped = append(dropped, Dropped{Hit: h, Reason: DropEcho})
			continue
		}
		an := analyse(h.Record)
		if len(an.words) == 0 {
			dropped = append(dropped, Dropped{Hit: h, Reason: DropContentless})
			continue
		}
		by := ""
		if h.Record.ID != "" && ids[h.Record.ID] {
			by = h.Record.ID
		}
		for i := 0; by == "" && i < len(info); i++ {
			if info[i].hash == an.hash || nearDuplicate(info[i].words, an.words) {
				by = nameOf(kept[i])
			}
		}
		if by != "" {
			dropped = append(dropped, Dropped{Hit: h, Reason: DropDuplicate, By: by})
			continue
		}
		if !h.Record.Explicit() {
			for i, k := range kept {
				if k.Record.Explicit() && sameTopic(k.Record, h.Record, &info[i], &an) {
					by = nameOf(k)
					break
				}
			}
			if by != "" {
				dropped = append(dropped, Dropped{Hit: h, Reason: DropConflict, By: by})
				continue
			}
		}
		kept = append(kept, h)
		info = append(info, an)
		if h.Record.ID != "" {
			ids[h.Record.ID] = true
		}
	}
	return kept, dropped
}

// TestFilterIndexMatchesPairwise draws random hit lists from a small
// vocabulary (so that duplicates, near-duplicates at the Jaccard
// threshold, shared topics and preference subjects are common) and
// checks that FilterHits keeps and drops exactly what the string-merging
// filter does, with the same reasons and the same "by" record, and that
// Assemble (which stops at its limit) keeps the same first records.
func TestFilterIndexMatchesPairwise(t *testing.T) {
	vocab := strings.Fields("organic fertiliser fertilizers roses tomatoes hiking mountains kids Melanie painting sunset lake " +
		"figtree raised yellow leaves Seoul partner trip 2023 비료는 비료만 화학 한국어로 짧게 garden compost aphids answers")
	strategies := []Strategy{StrategyUserPreference, StrategyProcedural, StrategySemantic, StrategyEpisodic, StrategySummary}
	topics := []string{"", "", "", "fertiliser", "FERTILISER ", "  ", "garden", "Garden", "K", "\u212a"} // U+212A KELVIN SIGN folds to k
	rng := rand.New(rand.NewPCG(1, 2))
	var drops, conflicts, dups int
	for iter := range 3000 {
		n := 1 + rng.IntN(60)
		hits := make([]Hit, n)
		base := make([]string, 1+rng.IntN(14))
		for i := range base {
			base[i] = vocab[rng.IntN(len(vocab))]
		}
		for i := range hits {
			words := slicesCloneShuffle(rng, base)
			switch rng.IntN(4) { // perturb: near-duplicates and unrelated lines
			case 0:
				words = append(words, vocab[rng.IntN(len(vocab))])
			case 1:
				if len(words) > 1 {
					words = words[:len(words)-1]
				}
			case 2:
				words = []string{vocab[rng.IntN(len(vocab))], vocab[rng.IntN(len(vocab))], vocab[rng.IntN(len(vocab))]}
			}
			r := Record{ID: fmt.Sprint("r", rng.IntN(n+5)), Strategy: strategies[rng.IntN(len(strategies))], Content: strings.Join(words, " ")}
			if rng.IntN(8) == 0 {
				r.ID = ""
			}
			if tp := topics[rng.IntN(len(topics))]; tp != "" || rng.IntN(2) == 0 {
				r.Metadata = map[string]any{"topic": tp}
			}
			if rng.IntN(10) == 0 {
				r.Content = "(2023-05-08) assistant: " + r.Content
				r.Strategy = StrategyEpisodic
			}
			hits[i] = Hit{Record: r}
		}
		gk, gd := FilterHits(hits)
		wk, wd := filterPairwise(hits)
		if !reflect.DeepEqual(gk, wk) || !reflect.DeepEqual(gd, wd) {
			t.Fatalf("iteration %d: hashed filter differs from the string-merging one\nkept %v\nwant %v\ndropped %v\nwant %v", iter, gk, wk, gd, wd)
		}
		// the turn's call stops at its limit: the same first records
		if limit := 1 + rng.IntN(n); true {
			want := wk
			if len(want) > limit {
				want = want[:limit]
			}
			if got := Assemble(hits, limit); !reflect.DeepEqual(got, want) {
				t.Fatalf("iteration %d: Assemble(hits, %d) = %v, want the filter's first %d: %v", iter, limit, got, limit, want)
			}
		}
		drops += len(wd)
		for _, d := range wd {
			switch d.Reason {
			case DropConflict:
				conflicts++
			case DropDuplicate:
				dups++
			}
		}
	}
	// the draw must exercise the rules it compares
	if conflicts < 100 || dups < 1000 {
		t.Fatalf("weak draw: %d drops, %d conflicts, %d duplicates", drops, conflicts, dups)
	}
	t.Logf("%d drops: %d conflicts, %d duplicates", drops, conflicts, dups)
}

func slicesCloneShuffle(rng *rand.Rand, s []string) []string {
	c := append([]string(nil), s...)
	rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c
}

// TestCommonWordsCollision gives commonWords two analyses whose words
// share a hash without being equal (forced: real FNV-1a collisions among
// short words are not known), and checks it counts by the strings.
func TestCommonWordsCollision(t *testing.T) {
	a := analysis{words: []string{"apple", "pear"}, hs: []string{"apple", "pear"}, hw: []uint64{7, 9}, sig: [2]uint64{^uint64(0), ^uint64(0)}}
	b := analysis{words: []string{"pear", "plum"}, hs: []string{"plum", "pear"}, hw: []uint64{7, 9}, sig: [2]uint64{^uint64(0), ^uint64(0)}}
	if got := commonWords(&a, &b); got != 1 {
		t.Fatalf("commonWords with a collision = %d, want 1 (pear)", got)
	}
	x, y := analyseBody(Record{Content: "organic fertiliser roses"}), analyseBody(Record{Content: "roses tomatoes organic"})
	if got, want := commonWords(&x, &y), intersection(x.words, y.words); got != want || want != 2 {
		t.Fatalf("commonWords = %d, intersection = %d, want 2", got, want)
	}
}
