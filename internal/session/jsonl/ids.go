package jsonl

import (
	"slices"

	"github.com/oklog/ulid/v2"
)

// nodeIDs maps a loaded session's node IDs to their indexes in sess.recs.
//
// The index of every loaded session holds one entry per node, so its size
// grows with history. IDs that session.NewNodeID makes ("msg_" and a
// canonical 26-character ULID, https://github.com/ulid/spec) are keyed by
// the ULID's 16 bytes. ULIDs sort by time and the process makes them
// monotonically (ulid.Make), so a session's nodes almost always arrive in
// increasing ULID order: those are appended to seq, a sorted slice
// searched by bisection (20 bytes an entry, against about 35 in a map and
// about 60 for the 30-byte string key), and only a ULID that arrives out
// of order (clock skew, concurrent writers, an imported file) goes to the
// ulids map. Any other ID (written by hand, imported, a lower-case ULID)
// is keyed by its string, so every ID a node may have still maps to
// exactly one entry.
//
// The zero value is empty and ready for get; put allocates on first use.
type nodeIDs struct {
	seq   []seqID
	ulids map[ulid.ULID]int32
	other map[string]int32
	hint  int // expected entries: the size of seq or other, whichever put makes first
}

// seqID is one entry of nodeIDs.seq.
type seqID struct {
	u ulid.ULID
	i int32
}

// newNodeIDs returns an index sized for about n nodes.
func newNodeIDs(n int) nodeIDs { return nodeIDs{hint: n} }

// nodeIDPrefix is what session.NewNodeID puts before the ULID.
const nodeIDPrefix = "msg_"

// ulidKey returns the 16 bytes of an ID session.NewNodeID could have made:
// the prefix and a ULID in its canonical spelling (upper case; one ULID
// has one such spelling, so two IDs share a key only when they are equal).
func ulidKey(id string) (ulid.ULID, bool) {
	if len(id) != len(nodeIDPrefix)+ulid.EncodedSize || id[:len(nodeIDPrefix)] != nodeIDPrefix {
		return ulid.ULID{}, false
	}
	s := id[len(nodeIDPrefix):]
	u, err := ulid.ParseStrict(s)
	if err != nil {
		return ulid.ULID{}, false
	}
	var buf [ulid.EncodedSize]byte
	if u.MarshalTextTo(buf[:]) != nil || string(buf[:]) != s {
		return ulid.ULID{}, false
	}
	return u, true
}

// get returns the index of node id.
func (x *nodeIDs) get(id string) (int32, bool) {
	if k, ok := ulidKey(id); ok {
		if j, found := x.find(k); found {
			return x.seq[j].i, true
		}
		i, ok := x.ulids[k]
		return i, ok
	}
	i, ok := x.other[id]
	return i, ok
}

// find bisects seq for k; a key past the last entry (a new node, in
// order) or equal to it is answered without the search.
func (x *nodeIDs) find(k ulid.ULID) (int, bool) {
	n := len(x.seq)
	if n == 0 {
		return 0, false
	}
	switch x.seq[n-1].u.Compare(k) {
	case -1:
		return n, false
	case 0: // the newest node: a new node's parent, most often
		return n - 1, true
	}
	return slices.BinarySearchFunc(x.seq, k, func(e seqID, k ulid.ULID) int { return e.u.Compare(k) })
}

// has reports whether node id is in the index.
func (x *nodeIDs) has(id string) bool {
	_, ok := x.get(id)
	return ok
}

// put records that node id is at index i (a new ID: sess checks for
// duplicates before it puts one).
func (x *nodeIDs) put(id string, i int32) {
	if k, ok := ulidKey(id); ok {
		if n := len(x.seq); n == 0 || x.seq[n-1].u.Compare(k) < 0 {
			if x.seq == nil && x.hint > 0 {
				x.seq = make([]seqID, 0, x.hint)
				x.hint = 0
			}
			x.seq = append(x.seq, seqID{k, i})
			return
		}
		if j, found := x.find(k); found {
			x.seq[j].i = i // the same ID again: the last put wins, as in a map
			return
		}
		if x.ulids == nil {
			x.ulids = map[ulid.ULID]int32{}
		}
		x.ulids[k] = i
		return
	}
	if x.other == nil {
		x.other = make(map[string]int32, x.hint)
		x.hint = 0
	}
	x.other[id] = i
}

// len returns the number of IDs in the index.
func (x *nodeIDs) len() int { return len(x.seq) + len(x.ulids) + len(x.other) }
