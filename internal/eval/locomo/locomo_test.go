package locomo

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sample exercises the README's quirks: a date key without a session, a
// multi-id evidence string, malformed ids and an unknown id.
const sample = `[{"sample_id":"conv-x","conversation":{"speaker_a":"Ann","speaker_b":"Bob",
 "session_1_date_time":"1:56 pm on 8 May, 2023",
 "session_1":[{"speaker":"Ann","dia_id":"D1:1","text":"I adopted a puppy named Rex yesterday"},
              {"speaker":"Bob","dia_id":"D1:2","text":"Congrats! What breed is Rex?","blip_caption":"a photo of a beagle"}],
 "session_2_date_time":"10:00 am on 9 June, 2023",
 "session_2":[{"speaker":"Ann","dia_id":"D2:1","text":"We hiked Mount Tam with Rex"},
              {"speaker":"Bob","dia_id":"D2:5","text":"Sounds lovely, I prefer the beach"}],
 "session_3_date_time":"1:00 pm on 1 July, 2023"},
 "qa":[{"question":"When did Ann adopt Rex?","answer":"7 May 2023","evidence":["D1:1"],"category":2},
       {"question":"Where did Ann hike with her puppy?","answer":"Mount Tam","evidence":["D1:1; D:2:1"],"category":1},
       {"question":"What does Bob prefer?","answer":"beach","evidence":["D2:05","D9:9"],"category":4},
       {"question":"Unknown","answer":"x","evidence":["D7:7"],"category":4},
       {"question":"Adversarial","answer":"x","evidence":["D1:2"],"category":5}]}]`

func TestParseQuirks(t *testing.T) {
	convs, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	c := convs[0]
	if len(c.Sessions) != 2 || c.Sessions[1].Date.Month() != 6 {
		t.Fatalf("sessions %+v", c.Sessions)
	}
	if c.Skipped != 1 || len(c.QA) != 4 {
		t.Fatalf("skipped %d, qa %d", c.Skipped, len(c.QA))
	}
	if !reflect.DeepEqual(c.QA[1].Evidence, []string{"D1:1", "D2:1"}) || !reflect.DeepEqual(c.QA[2].Evidence, []string{"D2:5"}) {
		t.Fatalf("evidence %v %v", c.QA[1].Evidence, c.QA[2].Evidence)
	}
	if _, err := Parse([]byte(`{"not":"a list"}`)); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

func TestRunSmall(t *testing.T) {
	convs, _ := Parse([]byte(sample))
	for _, b := range []string{"", "bm25"} {
		rep, err := Run(context.Background(), convs, Options{Baseline: b, Ks: []int{1, 10}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Questions != 3 || rep.Turns != 4 {
			t.Fatalf("questions %d turns %d", rep.Questions, rep.Turns)
		}
		if rep.Overall.Recall[10] != 1 || rep.Overall.All[10] != 1 {
			t.Fatalf("baseline %q: every evidence turn is among 4 turns, recall@10 must be 1: %+v", b, rep.Overall)
		}
		js := rep.JSON()
		for _, k := range []string{"level", "questions", "overall", "categories", "session", "latency_ms", "ingest_turns_per_s"} {
			if _, ok := js[k]; !ok {
				t.Fatalf("JSON lacks %q", k)
			}
		}
	}
	// The "when" question's evidence mentions "yesterday": the time cue and
	// the speaker name put it first for Tendril's ranking.
	rep, _ := Run(context.Background(), convs, Options{Ks: []int{1}})
	if rep.Categories[2].Recall[1] != 1 {
		t.Fatalf("temporal recall@1 = %v", rep.Categories[2].Recall[1])
	}
	if _, err := Run(context.Background(), convs, Options{Level: LevelRecords}); !errors.Is(err, ErrRecordsUnavailable) {
		t.Fatalf("records without extractor: %v", err)
	}
}

// TestBadInputs: a repeated cut-off is counted once (it gave recall 2.0),
// JSON keys name the k they were measured at (with --k 3 "recall@10" held
// recall@3), data with nothing to score is an error rather than a table
// of zeros, and a wrong shape is reported in the user's terms.
func TestBadInputs(t *testing.T) {
	ks, err := ParseKs("5, 3,5")
	if err != nil || !reflect.DeepEqual(ks, []int{3, 5}) {
		t.Fatalf("ParseKs = %v, %v; want [3 5]", ks, err)
	}
	convs, _ := Parse([]byte(sample))
	rep, err := Run(context.Background(), convs, Options{Ks: []int{3, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Overall.Recall[3]; r < 0 || r > 1 {
		t.Fatalf("recall@3 %v out of [0, 1]", r)
	}
	js := rep.JSON()
	overall := js["overall"].(map[string]float64)
	if _, ok := overall["recall@3"]; !ok || len(overall) != 2 {
		t.Fatalf("overall keys %v, want recall@3 and all@3 only", overall)
	}
	if _, ok := overall["all@10"]; ok {
		t.Fatal("all@10 reported without k 10")
	}
	for c, m := range js["categories"].(map[string]any) {
		if _, ok := m.(map[string]any)["recall@10"]; ok {
			t.Fatalf("category %s reports recall@10 without k 10", c)
		}
	}
	for _, data := range []string{`[{"sample_id":"a"}]`, `[{"sample_id":"a","conversation":{},"qa":[]}]`} {
		cs, err := Parse([]byte(data))
		if err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if _, err := Run(context.Background(), cs, Options{}); !errors.Is(err, ErrNoQuestions) {
			t.Fatalf("%s: err %v, want ErrNoQuestions", data, err)
		}
	}
	for data, want := range map[string]string{`[{}]`: "conversation 1 has no sample_id",
		`[{"sample_id":"a"},{"sample_id":"a"}]`: `sample_id "a" appears twice`} {
		if _, err := Parse([]byte(data)); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %v, want %q", data, err, want)
		}
	}
	for _, data := range []string{`{}`, `[1,2]`} {
		_, err := Parse([]byte(data))
		if err == nil || !strings.Contains(err.Error(), "want a JSON list of conversations") || strings.Contains(err.Error(), "struct") {
			t.Fatalf("%s: error %v", data, err)
		}
	}
}
