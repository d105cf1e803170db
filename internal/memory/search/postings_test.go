package search

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"
)

// refPosting is one (document, tf by field) of the reference postings.
type refPosting struct {
	doc int32
	tf  [NumFields]uint16
}

// TestPostingsMatchReference: random term frequencies (0 to 70,000, so
// capped at 65,535 as Add caps them; document gaps up to 300,000) appended
// to the compact lists decode, entry by entry and by find, to exactly what a
// plain list holds, also after clone with both copies appended to.
func TestPostingsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const terms = 40
	type side struct {
		p    postings
		ref  [][]refPosting
		next int32
	}
	newSide := func() *side {
		s := &side{ref: make([][]refPosting, terms)}
		for range terms {
			s.p.newTerm()
		}
		return s
	}
	addDocs := func(s *side, n int) {
		for range n {
			doc := s.next
			s.next += 1 + int32(rng.Intn(3))
			if rng.Intn(50) == 0 {
				s.next += int32(rng.Intn(300_000))
			}
			for id := range int32(terms) {
				if rng.Intn(int(id)+2) != 0 { // term id holds in 1/(id+2) of the documents
					continue
				}
				var tf [NumFields]uint16
				var mask uint8
				for f := range NumFields {
					if rng.Intn(3) != 0 {
						continue
					}
					v := 1
					switch rng.Intn(6) {
					case 0:
						v = 2 + rng.Intn(300)
					case 1:
						v = min(math.MaxUint16, 1+rng.Intn(70_000))
					}
					tf[f], mask = uint16(v), mask|1<<f
				}
				if mask == 0 {
					tf[FieldText], mask = 1, 1<<FieldText
				}
				if rng.Intn(4) == 0 {
					tf[FieldText], tf[FieldContext], mask = 1, 1, maskBoth
					tf[FieldSpeaker], tf[FieldDate] = 0, 0
				}
				s.p.add(id, doc, mask, &tf)
				s.ref[id] = append(s.ref[id], refPosting{doc, tf})
			}
		}
	}
	check := func(name string, s *side) {
		t.Helper()
		for id := range int32(terms) {
			data, doc, i := s.p.lists[id], int32(-1), 0
			for k, want := range s.ref[id] {
				if i >= len(data) {
					t.Fatalf("%s term %d: list ends after %d of %d entries", name, id, k, len(s.ref[id]))
				}
				var tf [NumFields]uint16
				var mask uint8
				doc, mask, i = entry(data, i, doc, &tf)
				if doc != want.doc || mask != maskOf(want.tf) || maskedTF(mask, tf) != want.tf {
					t.Fatalf("%s term %d entry %d: doc %d mask %b tf %v, want doc %d tf %v", name, id, k, doc, mask, maskedTF(mask, tf), want.doc, want.tf)
				}
				if m, ftf := s.p.find(id, want.doc); m != mask || maskedTF(m, ftf) != want.tf {
					t.Fatalf("%s term %d find(%d) = %b %v, want %v", name, id, want.doc, m, ftf, want.tf)
				}
				if m, _ := s.p.find(id, want.doc+1); m != 0 && (k+1 == len(s.ref[id]) || s.ref[id][k+1].doc != want.doc+1) {
					t.Fatalf("%s term %d find(%d) found an absent document", name, id, want.doc+1)
				}
			}
			if i != len(data) || int(s.p.count[id]) != len(s.ref[id]) {
				t.Fatalf("%s term %d: %d bytes left, count %d, want %d", name, id, len(data)-i, s.p.count[id], len(s.ref[id]))
			}
		}
	}
	a := newSide()
	addDocs(a, 3000)
	check("a", a)
	b := &side{p: a.p.clone(), next: a.next}
	for id := range a.ref {
		b.ref = append(b.ref, slices.Clone(a.ref[id]))
	}
	addDocs(a, 500)
	addDocs(b, 700)
	check("a after clone", a)
	check("clone", b)
}

func maskOf(tf [NumFields]uint16) uint8 {
	var m uint8
	for f := range NumFields {
		if tf[f] > 0 {
			m |= 1 << f
		}
	}
	return m
}

func maskedTF(mask uint8, tf [NumFields]uint16) [NumFields]uint16 {
	var out [NumFields]uint16
	for f := range NumFields {
		if mask&(1<<f) != 0 {
			out[f] = tf[f]
		}
	}
	return out
}

// refIndex is the reference ranking: BM25F computed from the documents'
// analysed fields by brute force over every allowed document, with the
// speaker, addressee and time boosts and the group prior (best other, or
// the sum of the GroupTopN best others), no feedback.
type refIndex struct {
	p    Params
	docs []Doc
	dead []bool
	tfs  [][NumFields]map[string]int
	lens [][NumFields]int
}

func (r *refIndex) add(d Doc) {
	d = r.p.convDoc(d) // as Index.Add indexes it (Params.Conv.RelTime)
	r.docs = append(r.docs, d)
	r.dead = append(r.dead, false)
	texts := [NumFields]string{d.Text, d.Context, d.Speaker, d.Date}
	var tfs [NumFields]map[string]int
	var lens [NumFields]int
	for f := range NumFields {
		tfs[f] = map[string]int{}
		if r.p.Fields[f].Weight == 0 {
			continue
		}
		terms := r.p.Analyzer.Terms(texts[f])
		lens[f] = len(terms)
		for _, t := range terms {
			tfs[f][t]++
		}
	}
	r.tfs = append(r.tfs, tfs)
	r.lens = append(r.lens, lens)
}

type refHit struct {
	doc   int
	score float64
}

func (r *refIndex) search(query string, allow []bool, k int) []refHit {
	ok := func(d int) bool { return !r.dead[d] && (allow == nil || allow[d]) }
	n := 0
	var sum [NumFields]float64
	for d := range r.docs {
		if ok(d) {
			n++
			for f := range NumFields {
				sum[f] += float64(r.lens[d][f])
			}
		}
	}
	var avg [NumFields]float64
	for f := range NumFields {
		avg[f] = 1
		if n > 0 && sum[f] > 0 {
			avg[f] = sum[f] / float64(n)
		}
	}
	// query terms in order of first occurrence, weighted by occurrences
	var terms []string
	weight := map[string]float64{}
	for _, t := range r.p.Analyzer.Terms(query) {
		if r.p.QuestionWords && questionWords[t] {
			continue
		}
		if weight[t] == 0 {
			terms = append(terms, t)
		}
		weight[t]++
	}
	score := make([]float64, len(r.docs))
	has := make([]bool, len(r.docs))
	for _, t := range terms {
		df := 0
		for d := range r.docs {
			if ok(d) && r.holds(d, t) {
				df++
			}
		}
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
		for d := range r.docs {
			if !ok(d) || !r.holds(d, t) {
				continue
			}
			tw := 0.0
			for f := range NumFields {
				fp := r.p.Fields[f]
				if tf := r.tfs[d][f][t]; tf > 0 && fp.Weight > 0 {
					tw += fp.Weight * float64(min(tf, math.MaxUint16)) / (1 - fp.B + fp.B*float64(r.lens[d][f])/avg[f])
				}
			}
			score[d] += weight[t] * idf * tw / (r.p.K1 + tw)
			has[d] = true
		}
	}
	final := slices.Clone(score)
	if r.p.GroupWeight > 0 {
		for d := range r.docs {
			if !has[d] || r.docs[d].Group == "" {
				continue
			}
			var others []float64
			for o := range r.docs {
				if o != d && has[o] && r.docs[o].Group == r.docs[d].Group {
					others = append(others, score[o])
				}
			}
			sort.Sort(sort.Reverse(sort.Float64Slice(others)))
			top := max(1, r.p.GroupTopN)
			prior := 0.0
			for i := 0; i < len(others) && i < top; i++ {
				prior += others[i]
			}
			final[d] += r.p.GroupWeight * prior
		}
	}
	named := map[string]bool{} // speaker names (lowercase) the query names
	for _, t := range r.p.Analyzer.Terms(query) {
		if roleNames[t] && !namesRole(query, t) {
			continue
		}
		for _, d := range r.docs {
			name := strings.TrimSpace(strings.ToLower(d.Speaker))
			if name != "" && r.p.SpeakerBoost > 0 && slices.Contains(r.p.Analyzer.Terms(name), t) {
				named[name] = true
			}
		}
	}
	if r.p.Nicknames && r.p.SpeakerBoost > 0 {
		for _, w := range NicknameWords(query) {
			exact := false
			for _, d := range r.docs {
				name := strings.TrimSpace(strings.ToLower(d.Speaker))
				for _, t := range r.p.Analyzer.Terms(w) {
					exact = exact || (name != "" && slices.Contains(r.p.Analyzer.Terms(name), t))
				}
			}
			if exact {
				continue
			}
			// A nickname: w begins a term of the name (not a role's).
			for _, d := range r.docs {
				name := strings.TrimSpace(strings.ToLower(d.Speaker))
				for _, nt := range r.p.Analyzer.Terms(name) {
					if name != "" && len(nt) > len(w) && strings.HasPrefix(nt, w) && !roleNames[nt] {
						named[name] = true
					}
				}
			}
		}
	}
	when := r.p.TimeBoost > 0 && IsWhenQuestion(query)
	var hits []refHit
	for d := range r.docs {
		if !has[d] {
			continue
		}
		m := 1.0
		spk := strings.TrimSpace(strings.ToLower(r.docs[d].Speaker))
		if named[spk] {
			m *= 1 + r.p.SpeakerBoost
		}
		if len(named) > 0 && r.p.AddresseeBoost > 0 && secondPerson(r.docs[d].Text) && r.docs[d].Group != "" && !named[spk] {
			for _, o := range r.docs { // every document ever added counts for who speaks in a group
				if o.Group == r.docs[d].Group && named[strings.TrimSpace(strings.ToLower(o.Speaker))] {
					m *= 1 + r.p.AddresseeBoost
					break
				}
			}
		}
		if when && HasTimeExpression(r.docs[d].Text) {
			m *= 1 + r.p.TimeBoost
		}
		hits = append(hits, refHit{d, final[d] * m})
	}
	sort.Slice(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if a.score != b.score {
			return a.score > b.score
		}
		if a, b := r.docs[a.doc].Key, r.docs[b.doc].Key; a != b {
			return a < b
		}
		return a.doc < b.doc
	})
	return hits[:min(k, len(hits))]
}

func (r *refIndex) holds(d int, t string) bool {
	for f := range NumFields {
		if r.p.Fields[f].Weight > 0 && r.tfs[d][f][t] > 0 {
			return true
		}
	}
	return false
}

// TestSearchMatchesReference: over random documents added, removed and
// cloned in between (each clone then diverging), Search returns what the
// brute-force reference ranking returns: the same documents in the same
// order, scores within 1e-9, for several parameter sets and allow masks.
func TestSearchMatchesReference(t *testing.T) {
	vocab := strings.Fields(`fig tree water rust aphid compost basil frost mulch tomato seed pot soil sun rain
		yesterday Monday May 2023 Caroline Melanie Mel you your walk paint kids group support lake beach`)
	speakers := []string{"Caroline", "Melanie", "", "Jon"}
	params := map[string]Params{"default": firstStage(), "plain": PlainBM25()}
	p := firstStage()
	p.GroupWeight, p.GroupTopN, p.AddresseeBoost, p.QuestionWords = 0.05, 3, 0.3, true
	params["groups"] = p
	p = firstStage()
	p.Fields[FieldContext].B, p.Fields[FieldDate].Weight, p.K1 = 0.3, 0, 2
	params["fields"] = p
	names := []string{"default", "plain", "groups", "fields"}
	for _, name := range names {
		p := params[name]
		rng := rand.New(rand.NewSource(int64(len(name))))
		sentence := func(n int) string {
			w := make([]string, n)
			for i := range w {
				w[i] = vocab[int(float64(len(vocab))*rng.Float64()*rng.Float64())]
			}
			return strings.Join(w, " ")
		}
		doc := func(i int) Doc {
			d := Doc{Text: sentence(1 + rng.Intn(12)), Key: fmt.Sprintf("k%03d", rng.Intn(400))}
			if rng.Intn(3) > 0 {
				d.Context, d.Speaker = sentence(rng.Intn(30)), speakers[rng.Intn(len(speakers))]
				d.Date, d.Group = []string{"8 May 2023 Monday", "9 May 2023 Tuesday", ""}[rng.Intn(3)], fmt.Sprintf("s%d", rng.Intn(8))
			}
			if rng.Intn(40) == 0 {
				d.Text = strings.Repeat("fig ", 300+rng.Intn(200)) // beyond the norm tables
			}
			return d
		}
		type pair struct {
			ix  *Index
			ref *refIndex
		}
		pairs := []pair{{NewIndex(p), &refIndex{p: p}}}
		for step := 0; step < 600; step++ {
			i := rng.Intn(len(pairs))
			x := pairs[i]
			switch r := rng.Intn(100); {
			case r < 80:
				d := doc(step)
				x.ix.Add(d)
				x.ref.add(d)
			case r < 95:
				if x.ix.Len() > 0 {
					d := rng.Intn(x.ix.Len())
					x.ix.Remove(d)
					x.ref.dead[d] = true
				}
			case len(pairs) < 4:
				c := &refIndex{p: p, docs: slices.Clone(x.ref.docs), dead: slices.Clone(x.ref.dead), tfs: slices.Clone(x.ref.tfs), lens: slices.Clone(x.ref.lens)}
				pairs = append(pairs, pair{x.ix.Clone(), c})
			}
			if step%50 != 49 {
				continue
			}
			for pi, x := range pairs {
				var allow []bool
				if rng.Intn(2) == 0 {
					allow = make([]bool, x.ix.Len())
					for d := range allow {
						allow[d] = rng.Intn(4) > 0
					}
				}
				for range 6 {
					q := sentence(1 + rng.Intn(5))
					if rng.Intn(3) == 0 {
						q = "When did " + q + "?"
					}
					k := 1 + rng.Intn(30)
					got, want := x.ix.Search(q, allow, k), x.ref.search(q, allow, k)
					if len(got) != len(want) {
						t.Fatalf("%s step %d index %d %q: %d hits, want %d", name, step, pi, q, len(got), len(want))
					}
					for r := range got {
						if got[r].Doc != want[r].doc || math.Abs(got[r].Score-want[r].score) > 1e-9*max(1, math.Abs(want[r].score)) {
							t.Fatalf("%s step %d index %d %q rank %d: doc %d %.17g, want doc %d %.17g", name, step, pi, q, r, got[r].Doc, got[r].Score, want[r].doc, want[r].score)
						}
					}
				}
			}
		}
	}
}
