package search

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// explainReference is the fmt-based explanation the strconv version
// replaced; the test pins the text to it.
func (ix *Index) explainReference(doc int32, qs []qterm, st stats, boostWhy func(int32) (float64, []string), total, prior float64) string {
	mult, why := boostWhy(doc)
	var b strings.Builder
	if mult != 1 || prior != 0 {
		fmt.Fprintf(&b, "%.4f = (", total)
	} else {
		fmt.Fprintf(&b, "%.4f = ", total)
	}
	fmt.Fprintf(&b, "bm25f(k1=%.2g)[", ix.p.K1)
	first := true
	for _, q := range qs {
		t := 0.0
		var parts []string
		for f := Field(0); f < NumFields; f++ {
			fp := ix.p.Fields[f]
			if fp.Weight == 0 {
				continue
			}
			tf := ix.tf(f, q.id, doc)
			if tf == 0 {
				continue
			}
			norm := 1 - fp.B + fp.B*float64(ix.lens[doc][f])/st.avg[f]
			t += fp.Weight * float64(tf) / norm
			parts = append(parts, fmt.Sprintf("%s tf=%d w=%.2g", f, tf, fp.Weight))
		}
		if t == 0 {
			continue
		}
		if !first {
			b.WriteString(" + ")
		}
		first = false
		c := q.weight * q.idf * t / (ix.p.K1 + t)
		fmt.Fprintf(&b, "%q %.3f (idf %.2f, %s", q.text, c, q.idf, strings.Join(parts, ", "))
		if q.weight != 1 {
			fmt.Fprintf(&b, ", query weight %.2g", q.weight)
		}
		b.WriteString(")")
	}
	b.WriteString("]")
	if prior != 0 {
		fmt.Fprintf(&b, " + session prior %.3f (%.2g × best other turn of the session)", prior, ix.p.GroupWeight)
	}
	if mult != 1 || prior != 0 {
		b.WriteString(")")
	}
	if mult != 1 {
		fmt.Fprintf(&b, " × %.3g (%s)", mult, strings.Join(why, ", "))
	}
	fmt.Fprintf(&b, "; N=%d", st.n)
	return b.String()
}

// TestExplainText: the explanation text matches the reference for
// documents with and without boosts, priors, feedback terms and
// several fields.
func TestExplainText(t *testing.T) {
	p := DefaultParams()
	p.PRFDocs, p.PRFTerms, p.PRFWeight = 2, 2, 0.5
	rng := rand.New(rand.NewSource(3))
	words := strings.Fields("fig tree water rust Caroline support group yesterday May painted lake 2023")
	ix := NewIndex(p)
	for i := 0; i < 60; i++ {
		var w []string
		for j := 0; j < 6; j++ {
			w = append(w, words[rng.Intn(len(words))])
		}
		ix.Add(Doc{Text: strings.Join(w, " "), Context: words[rng.Intn(len(words))], Speaker: []string{"Caroline", "Melanie"}[i%2],
			Date: "8 May 2023", Group: fmt.Sprintf("s%d", i%5), Key: fmt.Sprintf("%03d", i)})
	}
	sc := ix.NewScope(nil)
	checked := 0
	for _, q := range []string{"When did Caroline water the fig?", "rust tree", "support group yesterday lake", "May 2023 painted"} {
		res := ix.SearchScope(q, sc, 10)
		for _, r := range res {
			if !strings.Contains(r.Explain, "N=60") {
				t.Fatalf("explain lacks N: %s", r.Explain)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no results")
	}
	// Direct comparison on every document for one query, boosts on.
	st := sc.stats()
	q := "When did Caroline water the fig tree?"
	qs := ix.queryTerms(ix.scratch(), q, st, sc.allow)
	qs[0].weight = 0.5 // a feedback-like weight
	spk := ix.namedSpeakers(q)
	boostWhy := func(d int32) (float64, []string) {
		if len(spk) > 0 && ix.speaker[d] >= 0 && spk[ix.speaker[d]] {
			return 1.4, []string{"speaker named in query ×1.4"}
		}
		return 1, nil
	}
	for d := int32(0); d < int32(ix.Len()); d++ {
		for _, prior := range []float64{0, 0.123456} {
			got := ix.explain(d, qs, st, boostWhy, 1.23456789, prior)
			want := ix.explainReference(d, qs, st, boostWhy, 1.23456789, prior)
			if got != want {
				t.Fatalf("doc %d prior %v:\n got  %s\n want %s", d, prior, got, want)
			}
		}
	}
}

// TestRemoveAndScopeSetMatchFreshIndex: an index updated by Remove and Add
// with its scope kept by Set ranks (scores, order by key, explanations)
// exactly like an index built from the surviving documents.
func TestRemoveAndScopeSetMatchFreshIndex(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	words := strings.Fields("fig tree water rust aphid compost basil frost mulch same")
	mk := func(i int) Doc {
		var w []string
		for j := 0; j < 5; j++ {
			w = append(w, words[rng.Intn(len(words))])
		}
		if i%3 == 0 {
			w = []string{"same", "fig"} // ties, ordered by key
		}
		return Doc{Text: strings.Join(w, " "), Context: words[rng.Intn(len(words))], Group: fmt.Sprintf("g%d", i%4), Key: fmt.Sprintf("k%03d", i)}
	}
	live := map[int]Doc{}
	inc := NewIndex(DefaultParams())
	docOf := map[int]int{}
	allowed := func(i int) bool { return i%5 != 1 } // the scope's filter
	sc := inc.NewScope(make([]bool, 0))
	for i := 0; i < 80; i++ {
		d := mk(i)
		live[i] = d
		docOf[i] = inc.Add(d)
		sc.Set(inc, docOf[i], allowed(i))
	}
	for round := 0; round < 40; round++ {
		i := rng.Intn(80)
		inc.Remove(docOf[i])
		sc.Set(inc, docOf[i], false)
		if round%3 == 0 {
			delete(live, i)
			continue
		}
		d := mk(i)
		live[i] = d
		docOf[i] = inc.Add(d)
		sc.Set(inc, docOf[i], allowed(i))
	}
	fresh := NewIndex(DefaultParams())
	var allow []bool
	for i := 0; i < 80; i++ {
		if d, ok := live[i]; ok {
			fresh.Add(d)
			allow = append(allow, allowed(i))
		}
	}
	fsc := fresh.NewScope(allow)
	if sc.N() != fsc.N() || inc.Dead() == 0 {
		t.Fatalf("scope N %d, fresh %d, dead %d", sc.N(), fsc.N(), inc.Dead())
	}
	for _, q := range []string{"fig", "same fig", "water rust compost", "frost mulch basil aphid"} {
		a, b := inc.SearchScope(q, sc, 15), fresh.SearchScope(q, fsc, 15)
		if len(a) != len(b) {
			t.Fatalf("%q: %d vs %d results", q, len(a), len(b))
		}
		for i := range a {
			if inc.Key(a[i].Doc) != fresh.Key(b[i].Doc) || a[i].Score != b[i].Score || a[i].Explain != b[i].Explain {
				t.Fatalf("%q rank %d: %s %v %s\nvs %s %v %s", q, i, inc.Key(a[i].Doc), a[i].Score, a[i].Explain, fresh.Key(b[i].Doc), b[i].Score, b[i].Explain)
			}
		}
	}
}
