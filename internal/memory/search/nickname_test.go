package search

import "testing"

// TestNicknamesNameSpeakersNotRoles: with the default ranking a capitalised
// query word, not opening a sentence, that begins a speaker's name names
// that speaker ("Mel" → Melanie); a word too short, not a prefix, in lower
// case ("car") or opening the query ("Car insurance") names nobody; a word
// that begins a role ("use" → user) or shares its stem ("assistance")
// does not name the role, which only the role's own word does.
func TestNicknamesNameSpeakersNotRoles(t *testing.T) {
	p := DefaultParams()
	if !p.Nicknames {
		t.Fatal("DefaultParams: Nicknames off")
	}
	ix := NewIndex(p)
	for i, spk := range []string{"Melanie", "Caroline", "user", "assistant"} {
		ix.Add(Doc{Text: "a turn about the garden", Speaker: spk, Key: string(rune('a' + i))})
	}
	name := func(q string) []string {
		var out []string
		for id := range ix.namedSpeakers(q) {
			for n, nid := range ix.spkIDs {
				if nid == id {
					out = append(out, n)
				}
			}
		}
		return out
	}
	for _, c := range []struct {
		q    string
		want string // "" for nobody
	}{
		{"How long have Mel and her husband been married?", "melanie"},
		{"What did Caro paint?", "caroline"},
		{"What did Me say?", ""},
		{"who bought a car", ""},
		{"Car insurance renewal?", ""},
		{"Where did we go? Then Mel said the lake.", "melanie"},
		{"Where did we go? Mel said the lake.", ""},
		{"What fertiliser do I use?", ""},
		{"Is the Assi working?", ""},
		{"I need assistance with the roses", ""},
		{"What do users say about roses?", "user"},
		{"What did the user say about roses?", "user"},
		{"What did the assistant suggest?", "assistant"},
	} {
		got := name(c.q)
		if (c.want == "" && len(got) != 0) || (c.want != "" && (len(got) != 1 || got[0] != c.want)) {
			t.Errorf("%q names %v, want %q", c.q, got, c.want)
		}
	}
}
