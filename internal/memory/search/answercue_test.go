package search

import "testing"

func TestAnswerType(t *testing.T) {
	for _, c := range []struct {
		q    string
		want uint8
	}{
		{"How many children does Melanie have?", CueNumber},
		{"how long has she been painting", CueNumber},
		{"Who gave Caroline the necklace?", CuePerson},
		{"Where did Melanie go camping?", CuePlace},
		{"Which city did they move to?", CuePlace},
		{"Why did Caroline start counseling?", CueReason},
		{"What inspired her painting?", CueReason},
		{"What did Melanie paint?", 0},
		{"When did Melanie go camping?", 0},
		{"엄마가 몇 살이에요?", CueNumber},
		{"누구랑 갔어요?", CuePerson},
		{"어디에 살아요?", CuePlace},
		{"왜 그만뒀어요?", CueReason},
	} {
		if got := AnswerType(c.q); got != c.want {
			t.Errorf("AnswerType(%q) = %04b, want %04b", c.q, got, c.want)
		}
	}
}

func TestAnswerCues(t *testing.T) {
	for _, c := range []struct {
		text      string
		has, lack uint8
	}{
		{"I have 3 kids.", CueNumber | CuePerson, CuePlace | CueReason},
		{"We went twice last year", CueNumber, CuePerson | CuePlace | CueReason},
		{"Yesterday I saw the sunset. It was lovely", 0, CuePerson | CuePlace | CueNumber},
		{"I met up with Jon for coffee", CuePerson | CuePlace, CueNumber},
		{"we moved to Sweden", CuePlace | CuePerson, CueNumber | CueReason},
		{"I started because I wanted to help people", CueReason, CueNumber | CuePlace},
		{"Hiking is fun", 0, CuePerson | CuePlace | CueNumber | CueReason},
		{"I'm happy, I think", 0, CuePerson},
		{"엄마가 학교에서 기다렸어요", CuePerson | CuePlace, CueNumber},
		{"비 때문에 못 갔어요", CueReason, CuePerson},
		{"", 0, CueNumber | CuePerson | CuePlace | CueReason},
	} {
		got := answerCues(c.text)
		if got&c.has != c.has || got&c.lack != 0 {
			t.Errorf("answerCues(%q) = %04b, want %04b set and %04b clear", c.text, got, c.has, c.lack)
		}
	}
}

// A question's answer type and a candidate's cue meet in the answer_cue
// feature; a question of no type gives every candidate 0.
func TestAnswerCueFeature(t *testing.T) {
	ix := NewIndex(DefaultParams())
	ix.Add(Doc{Key: "a", Text: "we adopted two dogs", Group: "s1"})
	ix.Add(Doc{Key: "b", Text: "we adopted dogs", Group: "s1"})
	sc := ix.NewScope(nil)
	for _, c := range []struct {
		q    string
		want map[string]float64
	}{
		{"how many dogs did they adopt", map[string]float64{"a": 1, "b": 0}},
		{"what did they adopt", map[string]float64{"a": 0, "b": 0}},
	} {
		res := ix.SearchScopeQuiet(c.q, sc, 10)
		fs := ix.Features(c.q, sc, res)
		if len(fs) != 2 {
			t.Fatalf("%q: %d feature vectors", c.q, len(fs))
		}
		for i, r := range res {
			k := ix.keys[r.Doc]
			if got := fs[i][FeatAnswerCue]; got != c.want[k] {
				t.Errorf("%q: answer_cue of %s = %v, want %v", c.q, k, got, c.want[k])
			}
		}
	}
}
