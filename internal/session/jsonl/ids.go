package jsonl

import "github.com/oklog/ulid/v2"

// nodeIDs maps a loaded session's node IDs to their indexes in sess.recs.
//
// The index of every loaded session holds one entry per node, so its size
// grows with history. IDs that session.NewNodeID makes ("msg_" and a
// canonical 26-character ULID, https://github.com/ulid/spec) are keyed by
// the ULID's 16 bytes: about 24 bytes an entry instead of about 60 for the
// 30-byte string, its 16-byte header and its own allocation. Any other ID
// (written by hand, imported, a lower-case ULID) is keyed by its string,
// so every ID a node may have still maps to exactly one entry.
//
// The zero value is empty and ready for get; put allocates on first use.
type nodeIDs struct {
	ulids map[ulid.ULID]int32
	other map[string]int32
	hint  int // expected entries: the size of whichever map put makes first
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
		i, ok := x.ulids[k]
		return i, ok
	}
	i, ok := x.other[id]
	return i, ok
}

// has reports whether node id is in the index.
func (x *nodeIDs) has(id string) bool {
	_, ok := x.get(id)
	return ok
}

// put records that node id is at index i.
func (x *nodeIDs) put(id string, i int32) {
	if k, ok := ulidKey(id); ok {
		if x.ulids == nil {
			x.ulids = make(map[ulid.ULID]int32, x.hint)
			x.hint = 0
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
func (x *nodeIDs) len() int { return len(x.ulids) + len(x.other) }
