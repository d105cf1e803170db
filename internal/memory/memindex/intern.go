package memindex

import "encoding/json"

// maxInternedMeta bounds a MetaInterner: metadata that differs per event
// (a message ID, say) stops being interned past it.
const maxInternedMeta = 1024

// MetaInterner shares equal small metadata maps among an actor's stored
// events: the pipeline writes {"agentId": ...} on every turn, and one map
// per event held about 350 bytes per event (a fifth of an actor's heap
// growth over 10,000 turns). A stored event's metadata is read-only
// (EventRecord and the listings copy it). The zero value is ready; it is
// not safe for concurrent use (the stores guard it like their events).
type MetaInterner struct {
	m map[string]map[string]any
}

// Intern returns the interner's copy of md when Internable(md) and an
// equal map was interned before; otherwise md itself, remembered (up to
// 1,024 distinct maps) for the next equal one.
func (in *MetaInterner) Intern(md map[string]any) map[string]any {
	if !Internable(md) {
		return md
	}
	b, err := json.Marshal(md) // sorted keys: equal maps, equal keys
	if err != nil {
		return md
	}
	if v, ok := in.m[string(b)]; ok {
		return v
	}
	if in.m == nil {
		in.m = map[string]map[string]any{}
	}
	if len(in.m) < maxInternedMeta {
		in.m[string(b)] = md
	}
	return md
}

// Internable reports whether Intern shares md: 1 to 8 keys, each value a
// string or a number (float64, as NormalizeMetadata leaves numbers).
func Internable(md map[string]any) bool {
	if len(md) == 0 || len(md) > 8 {
		return false
	}
	for _, v := range md {
		switch v.(type) {
		case string, float64:
		default:
			return false
		}
	}
	return true
}
