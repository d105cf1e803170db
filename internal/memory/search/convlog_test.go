package search

import (
	"reflect"
	"strings"
	"testing"
)

func docsOf(rs []Result) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.Doc
	}
	return out
}

func TestConvOffKeepsNoState(t *testing.T) {
	docs := []Doc{
		{Text: "I went hiking in the mountains", Speaker: "Mel", Group: "s1"},
		{Text: "Hiking is fun", Speaker: "Caro", Group: "s1"},
		{Text: "We painted a mural last week", Speaker: "Mel", Group: "s2"},
	}
	p := firstStage()
	ix := build(p, docs...)
	got := ix.Search("hiking mountains", nil, 3)
	if len(got) != 2 || got[0].Doc != 0 {
		t.Fatalf("got %+v", got)
	}
	if ix.conv != nil {
		t.Error("conversation state kept although every technique is off")
	}
}

func TestSessionDocuments(t *testing.T) {
	// Session s1 matches both query words in different turns, session s2
	// only "pottery" (twice in turn 2). Plain BM25F ranks turn 2 above
	// turn 0 (both hold "pottery" only); the session documents lift turn 0,
	// whose session also holds "museum".
	docs := []Doc{
		{Text: "I signed up for a pottery class", Speaker: "Mel", Group: "s1"},
		{Text: "the kids loved the museum trip", Speaker: "Mel", Group: "s1"},
		{Text: "pottery pottery everywhere today", Speaker: "Caro", Group: "s2"},
		{Text: "museum of pottery", Speaker: "Caro", Group: "s2b"},
		{Text: "nothing here", Speaker: "Caro", Group: "s2"},
		{Text: "nothing there either", Speaker: "Caro", Group: "s2"},
	}
	base := firstStage()
	base.GroupWeight = 0
	plain := build(base, docs...).Search("pottery museum", nil, 4)
	p := base
	p.Conv.SessionWeight = 0.5
	ix := build(p, docs...)
	fused := ix.Search("pottery museum", nil, 4)
	if len(fused) != len(plain) {
		t.Fatalf("fusion changed the candidates: %v vs %v", docsOf(fused), docsOf(plain))
	}
	pos := func(rs []Result, d int) int {
		for i, r := range rs {
			if r.Doc == d {
				return i
			}
		}
		return -1
	}
	if !(pos(fused, 0) < pos(fused, 2)) || !(pos(plain, 2) < pos(plain, 0)) {
		t.Errorf("session documents should lift turn 0 (s1) above turn 2 (s2): plain %v fused %v", docsOf(plain), docsOf(fused))
	}
	if !strings.Contains(fused[0].Explain, "session BM25") {
		t.Errorf("explain %q does not name the session score", fused[0].Explain)
	}
	// Removing s1's museum turn takes the word out of the session document.
	s := ix.conv.sessionScores([]string{"museum"})
	g := ix.conv.groupIDs["s1"]
	if s[g] == 0 {
		t.Fatal("s1 should match museum")
	}
	ix.Remove(1)
	if s := ix.conv.sessionScores([]string{"museum"}); s[g] != 0 {
		t.Errorf("removed turn still counts in its session: %v", s[g])
	}
	c := ix.Clone()
	c.Add(Doc{Text: "museum again", Group: "s1"})
	if s := ix.conv.sessionScores([]string{"museum"}); s[g] != 0 {
		t.Error("adding to a clone changed the original's sessions")
	}
}

func TestEntityWords(t *testing.T) {
	got := EntityWords(`Yesterday I took Oliver to Sweden's biggest LGBTQ parade. It was "Amazing" and Mel came too!`)
	want := []string{"oliver", "sweden", "lgbtq", "mel"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EntityWords = %q, want %q", got, want)
	}
}

func TestMultiHopRound(t *testing.T) {
	docs := []Doc{
		{Text: "My dog Oliver loves the beach", Speaker: "Mel", Group: "s1"},
		{Text: "We adopted Oliver from a shelter in Boston", Speaker: "Mel", Group: "s2"},
		{Text: "Shelters are great", Speaker: "Caro", Group: "s3"},
		{Text: "the beach was sunny", Speaker: "Caro", Group: "s4"},
	}
	base := firstStage()
	base.GroupWeight = 0
	q := "What does the dog love?"
	plain := build(base, docs...).Search(q, nil, 4)
	for _, r := range plain {
		if r.Doc == 1 {
			t.Fatalf("turn 1 holds no query word but plain ranking found it: %v", docsOf(plain))
		}
	}
	p := base
	p.Conv.MultiHopSeeds, p.Conv.MultiHopWeight = 1, 0.5
	got := build(p, docs...).Search(q, nil, 4)
	if len(got) < 2 || got[0].Doc != 0 || got[1].Doc != 1 {
		t.Fatalf("second round seeded by Oliver should bring turn 1 second: %v", docsOf(got))
	}
	if !strings.Contains(got[1].Explain, "second round (oliver)") {
		t.Errorf("explain %q", got[1].Explain)
	}
	// The speaker's own name never seeds a round.
	if w := EntityWords("Thanks Mel, see you"); len(w) != 1 || w[0] != "mel" {
		t.Fatalf("EntityWords = %q", w)
	}
	ix := build(p, Doc{Text: "Thanks Mel for the beach day", Speaker: "Caro"}, Doc{Text: "I am Mel", Speaker: "Mel"})
	if r := ix.Search("beach", nil, 5); len(r) != 1 {
		t.Errorf("a speaker's name seeded a second round: %v", docsOf(r))
	}
}

func TestProximity(t *testing.T) {
	docs := []Doc{
		{Text: "the group offered support after the move"},
		{Text: "I joined a support group"},
	}
	base := PlainBM25()
	q := "support group"
	p := base
	p.Conv.Proximity = 0.5
	got := build(p, docs...).Search(q, nil, 2)
	if len(got) != 2 || got[0].Doc != 1 {
		t.Fatalf("adjacent pair should rank first: %v", docsOf(got))
	}
	plain := build(base, docs...).Search(q, nil, 2)
	if got[0].Score <= plain[0].Score*1.49 || !strings.Contains(got[0].Explain, "1 of 1 query word pairs adjacent") {
		t.Errorf("bonus: %v vs %v, %q", got[0].Score, plain[0].Score, got[0].Explain)
	}
	if got[1].Score != plain[1].Score {
		t.Errorf("a document without the pair changed score: %v vs %v", got[1].Score, plain[1].Score)
	}
}

func TestRelTimeDateWords(t *testing.T) {
	p := firstStage()
	p.Conv.RelTime = true
	d := p.convDoc(Doc{Text: "I went to the support group yesterday", Speaker: "Caroline", Date: "8 May 2023 Monday"})
	if d.Date != "8 May 2023 Monday 7 May 2023" {
		t.Errorf("date = %q", d.Date)
	}
	ix := build(p, Doc{Text: "I went to the support group yesterday", Speaker: "Caroline", Date: "8 May 2023 Monday"}, Doc{Text: "painting", Speaker: "Caroline", Date: "10 June 2024 Monday"})
	if r := ix.Search("7 May 2023", nil, 2); len(r) != 1 || r[0].Doc != 0 {
		t.Errorf("resolved date not searchable: %+v", r)
	}
	offp := firstStage()
	offp.Conv.RelTime = false
	off := offp.convDoc(Doc{Text: "yesterday", Speaker: "Mel", Date: "8 May 2023 Monday"})
	if off.Date != "8 May 2023 Monday" {
		t.Errorf("RelTime off changed the date: %q", off.Date)
	}
	if rec := p.convDoc(Doc{Text: "Went to the support group yesterday (7 May 2023)", Speaker: "Caroline", Date: "8 May 2023 Monday"}); rec.Date != "8 May 2023 Monday" {
		t.Errorf("a date the text writes out was added again: %q", rec.Date)
	}
	if rec := p.convDoc(Doc{Text: "Caroline went to the support group yesterday", Date: "1 December 2026 Tuesday"}); rec.Date != "1 December 2026 Tuesday" {
		t.Errorf("a record (no speaker) got a date resolved against its creation: %q", rec.Date)
	}
	if bad := p.convDoc(Doc{Text: "yesterday", Speaker: "Mel", Date: "someday"}); bad.Date != "someday" {
		t.Errorf("unparsable date changed: %q", bad.Date)
	}
}

func TestSessionDiversity(t *testing.T) {
	docs := []Doc{
		{Text: "camping camping trip", Group: "s1"},
		{Text: "camping trip again", Group: "s1"},
		{Text: "camping trip planned", Group: "s1"},
		{Text: "camping with kids", Group: "s2"},
	}
	base := PlainBM25()
	plain := build(base, docs...).Search("camping trip", nil, 4)
	if plain[3].Doc != 3 {
		t.Fatalf("plain ranking puts s2's turn last: %v", docsOf(plain))
	}
	p := base
	p.Conv.Diversity = 0.2
	got := build(p, docs...).Search("camping trip", nil, 4)
	if len(got) != 4 || got[0].Doc != plain[0].Doc || got[1].Doc != 3 {
		t.Fatalf("the other session's turn should come second: plain %v diverse %v", docsOf(plain), docsOf(got))
	}
	if !strings.Contains(got[2].Explain, "turn 2 of its session") {
		t.Errorf("explain %q", got[2].Explain)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Score > got[i-1].Score {
			t.Errorf("scores not descending: %v", got)
		}
	}
}

func TestAggregateRouting(t *testing.T) {
	for q, want := range map[string]bool{
		"What activities has Melanie done with her family?": true,
		"How many times has Caroline been to Sweden?":       true,
		"What are Caroline's hobbies?":                      true,
		"When did Melanie paint a sunrise?":                 false,
		"What did Caroline research?":                       false,
	} {
		if got := IsAggregateQuestion(q); got != want {
			t.Errorf("IsAggregateQuestion(%q) = %v", q, got)
		}
	}
	docs := []Doc{
		{Text: "camping camping trip", Group: "s1"},
		{Text: "camping trip again", Group: "s1"},
		{Text: "camping trip planned", Group: "s1"},
		{Text: "camping with kids", Group: "s2"},
	}
	p := PlainBM25()
	p.Conv.Diversity, p.Conv.DiversityAggregate = 0.2, true
	ix := build(p, docs...)
	if got := ix.Search("camping trip", nil, 4); got[3].Doc != 3 {
		t.Errorf("diversity applied to a plain question: %v", docsOf(got))
	}
	if got := ix.Search("how many camping trips", nil, 4); got[1].Doc != 3 {
		t.Errorf("diversity not applied to an aggregate question: %v", docsOf(got))
	}
}
