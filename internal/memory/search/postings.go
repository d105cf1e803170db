package search

import (
	"encoding/binary"
	"slices"
	"sort"
)

// Compact postings. Each term has one list for all fields: the documents
// holding it in any indexed field, in increasing document order (Add only
// appends), each entry
//
//	uvarint(delta<<3 | code)
//
// where delta is the document number minus the previous entry's (the first
// entry's previous is -1) and code says which fields hold the term how
// often:
//
//	0–3  once, in field code alone (the common case)
//	4    once in FieldText and once in FieldContext, nowhere else
//	7    a byte, the mask of fields (bit f = field f), then uvarint tf for
//	     each field of the mask in field order
//
// A frequent term's entry takes one or two bytes, against eight per field
// for the former []struct{doc int32; tf uint16}. Every skipEvery entries a
// term records a skip (the previous document and the byte offset), so
// that one document's term frequencies (explanations) are found without
// decoding the whole list.
type postings struct {
	lists [][]byte         // per term id
	last  []int32          // per term id, the last document appended (-1: none)
	count []uint32         // per term id, entries
	skips map[int32][]skip // per term id with more than skipEvery entries
}

type skip struct {
	prev int32  // document of the entry before off
	off  uint32 // byte offset in the list of entry k·skipEvery (k ≥ 1)
}

const (
	skipEvery = 64
	codeBoth  = 4 // once in text and once in context
	codeMask  = 7 // mask byte and tfs follow
	maskBoth  = 1<<FieldText | 1<<FieldContext
)

// newTerm adds an empty list.
func (p *postings) newTerm() {
	p.lists = append(p.lists, nil)
	p.last = append(p.last, -1)
	p.count = append(p.count, 0)
}

// add appends doc to term id's list with the term frequencies tf of the
// fields in mask (tf of fields outside mask is ignored). doc must exceed
// every document already in the list.
func (p *postings) add(id, doc int32, mask uint8, tf *[NumFields]uint16) {
	if n := p.count[id]; n > 0 && n%skipEvery == 0 {
		if p.skips == nil {
			p.skips = map[int32][]skip{}
		}
		p.skips[id] = append(p.skips[id], skip{p.last[id], uint32(len(p.lists[id]))})
	}
	code := uint64(codeMask)
	switch {
	case mask == maskBoth && tf[FieldText] == 1 && tf[FieldContext] == 1:
		code = codeBoth
	case mask&(mask-1) == 0:
		for f := range NumFields {
			if mask == 1<<f && tf[f] == 1 {
				code = uint64(f)
			}
		}
	}
	var buf [2 + (NumFields+1)*binary.MaxVarintLen32]byte
	b := binary.AppendUvarint(buf[:0], uint64(doc-p.last[id])<<3|code)
	if code == codeMask {
		b = append(b, mask)
		for f := range NumFields {
			if mask&(1<<f) != 0 {
				b = binary.AppendUvarint(b, uint64(tf[f]))
			}
		}
	}
	p.lists[id] = appendTight(p.lists[id], b)
	p.last[id] = doc
	p.count[id]++
}

// appendTight appends b to s, growing s by an eighth (not the doubling of
// append) so that a list's spare capacity stays small.
func appendTight(s, b []byte) []byte {
	if len(s)+len(b) > cap(s) {
		want := len(s) + len(b)
		ns := make([]byte, len(s), want+want/8+4)
		copy(ns, s)
		s = ns
	}
	return append(s, b...)
}

// clone returns a copy of p sharing the lists' bytes: each shared slice's
// capacity is clipped, so an append to either copy reallocates.
func (p *postings) clone() postings {
	// last and count change in place: copied, not shared
	c := postings{lists: make([][]byte, len(p.lists)), last: slices.Clone(p.last), count: slices.Clone(p.count)}
	for id, l := range p.lists {
		c.lists[id] = clip(l)
	}
	if p.skips != nil {
		c.skips = make(map[int32][]skip, len(p.skips))
		for id, s := range p.skips {
			c.skips[id] = clip(s)
		}
	}
	return c
}

// uvarint decodes the rest of a uvarint whose first byte, v ≥ 0x80, came
// before data[i]; it returns the value and the offset after it.
func uvarint(data []byte, i int, v uint64) (uint64, int) {
	v &= 0x7f
	for s := uint(7); i < len(data); s += 7 {
		c := data[i]
		i++
		if c < 0x80 {
			return v | uint64(c)<<s, i
		}
		v |= uint64(c&0x7f) << s
	}
	return v, i
}

// entry decodes the entry at data[i] whose previous document is doc: it
// returns the entry's document, field mask, term frequencies (of the
// mask's fields) and the offset of the next entry.
func entry(data []byte, i int, doc int32, tf *[NumFields]uint16) (int32, uint8, int) {
	v := uint64(data[i])
	i++
	if v >= 0x80 {
		v, i = uvarint(data, i, v)
	}
	doc += int32(v >> 3)
	switch code := v & 7; code {
	case codeBoth:
		tf[FieldText], tf[FieldContext] = 1, 1
		return doc, maskBoth, i
	case codeMask:
		mask := data[i]
		i++
		for f := range NumFields {
			if mask&(1<<f) == 0 {
				continue
			}
			t := uint64(data[i])
			i++
			if t >= 0x80 {
				t, i = uvarint(data, i, t)
			}
			tf[f] = uint16(t)
		}
		return doc, mask, i
	default:
		tf[code] = 1
		return doc, 1 << code, i
	}
}

// find returns the field mask and term frequencies of term id in doc (mask
// 0: absent).
func (p *postings) find(id, doc int32) (uint8, [NumFields]uint16) {
	var tf [NumFields]uint16
	data, prev, i := p.lists[id], int32(-1), 0
	if sk := p.skips[id]; len(sk) > 0 {
		// the last skip whose previous document is before doc
		if j := sort.Search(len(sk), func(j int) bool { return sk[j].prev >= doc }); j > 0 {
			prev, i = sk[j-1].prev, int(sk[j-1].off)
		}
	}
	for i < len(data) {
		var d int32
		var mask uint8
		var t [NumFields]uint16
		d, mask, i = entry(data, i, prev, &t)
		if d == doc {
			return mask, t
		}
		if d > doc {
			break
		}
		prev = d
	}
	return 0, tf
}

// termLists is the text-field terms of every document (pseudo-relevance
// feedback): for document d, the ascending term ids of its text, delta
// coded as uvarints in data[start[d]:start[d+1]] (data[start[d]:] for the
// last).
type termLists struct {
	data  []byte
	start []uint32
}

// add appends the next document's terms; ids must be ascending.
func (tl *termLists) add(ids []int32) {
	tl.start = append(tl.start, uint32(len(tl.data)))
	prev := int32(-1)
	for _, id := range ids {
		tl.data = binary.AppendUvarint(tl.data, uint64(id-prev))
		prev = id
	}
}

// terms appends the term ids of doc to buf.
func (tl *termLists) terms(doc int32, buf []int32) []int32 {
	end := uint32(len(tl.data))
	if int(doc)+1 < len(tl.start) {
		end = tl.start[doc+1]
	}
	data := tl.data[tl.start[doc]:end]
	id := int32(-1)
	for i := 0; i < len(data); {
		v := uint64(data[i])
		i++
		if v >= 0x80 {
			v, i = uvarint(data, i, v)
		}
		id += int32(v)
		buf = append(buf, id)
	}
	return buf
}

func (tl *termLists) clone() termLists {
	return termLists{data: clip(tl.data), start: clip(tl.start)}
}
