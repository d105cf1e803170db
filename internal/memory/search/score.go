package search

// hit is a document holding a query term, with the term's BM25F
// pseudo-frequency t = Σ_f Weight_f·tf_f/norm_f.
type hit struct {
	doc int32
	t   float64
}

// accumulate adds the BM25F scores of qs into sc.score, appending the
// documents it scores first to touched. It returns qs without the terms
// no allowed document holds, each with its idf in the scope, and touched.
// Term at a time: each term's list is decoded once into sc.hits, whose
// length is the term's document frequency.
func (ix *Index) accumulate(sc *scratch, qs []qterm, st stats, allow []bool, touched []int32) ([]qterm, []int32) {
	ix.normTables(sc, st)
	out := qs[:0]
	for _, q := range qs {
		hits := ix.termHits(sc, q.id, allow)
		if len(hits) == 0 {
			continue
		}
		q.idf = idf(st.n, len(hits))
		c, k1 := q.weight*q.idf, ix.p.K1
		score := sc.score
		for _, h := range hits {
			if score[h.doc] == 0 {
				touched = append(touched, h.doc)
			}
			score[h.doc] += c * h.t / (k1 + h.t)
		}
		out = append(out, q)
	}
	return out, touched
}

// termHits decodes term id's list into sc.hits: the allowed documents
// holding it in a scored field, each with t = Σ_f Weight_f·tf_f/norm_f
// summed in field order (as BM25F defines it, and bit for bit as a sum
// over per-field lists would give it). sc's norm tables must be filled.
func (ix *Index) termHits(sc *scratch, id int32, allow []bool) []hit {
	var w [NumFields]float64
	for f := range NumFields {
		w[f] = ix.p.Fields[f].Weight
	}
	hits, data, lens, doc := sc.hits[:0], ix.post.lists[id], ix.lens, int32(-1)
	for i := 0; i < len(data); {
		v := uint64(data[i])
		i++
		if v >= 0x80 {
			v, i = uvarint(data, i, v)
		}
		doc += int32(v >> 3)
		var t float64
		switch code := v & 7; {
		case code < uint64(NumFields):
			if w[code] == 0 || !allow[doc] {
				continue
			}
			t = sc.wnorm(ix, Field(code), lens[doc][code])
		case code == codeBoth:
			if !allow[doc] || (w[FieldText] == 0 && w[FieldContext] == 0) {
				continue
			}
			if w[FieldText] != 0 {
				t += sc.wnorm(ix, FieldText, lens[doc][FieldText])
			}
			if w[FieldContext] != 0 {
				t += sc.wnorm(ix, FieldContext, lens[doc][FieldContext])
			}
		default:
			mask := data[i]
			i++
			scored := false
			for f := range NumFields {
				if mask&(1<<f) == 0 {
					continue
				}
				tf := uint64(data[i])
				i++
				if tf >= 0x80 {
					tf, i = uvarint(data, i, tf)
				}
				if w[f] == 0 {
					continue
				}
				scored = true
				l := lens[doc][f]
				if tf == 1 {
					t += sc.wnorm(ix, f, l)
					continue
				}
				var norm float64
				if l < normTab {
					norm = sc.norm[f][l]
				} else {
					fp := ix.p.Fields[f]
					norm = 1 - fp.B + fp.B*float64(l)/sc.avg[f]
				}
				t += w[f] * float64(tf) / norm
			}
			if !scored || !allow[doc] {
				continue
			}
		}
		hits = append(hits, hit{doc, t})
	}
	sc.hits = hits
	return hits
}

// wnorm is Weight/norm of field f at length l (tf 1).
func (sc *scratch) wnorm(ix *Index, f Field, l uint32) float64 {
	if l < normTab {
		return sc.wn[f][l]
	}
	fp := ix.p.Fields[f]
	norm := 1 - fp.B + fp.B*float64(l)/sc.avg[f]
	return fp.Weight * float64(1) / norm
}
