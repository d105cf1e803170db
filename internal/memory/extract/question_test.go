package extract

import (
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// TestQuestionForms: a question yields no record, however it is
// phrased; a statement beside a question, or carried by a request, still
// does (each "kept" line gave a record before the question filter, and
// each "dropped" line gave a false fact, some superseding a true one).
func TestQuestionForms(t *testing.T) {
	ref := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	kept := []string{
		"I'm allergic to bees, is lavender safe?",
		"I live in Seattle, do you know any good nurseries?",
		"My dog is called Rex, what should I feed him?",
		"I just moved to Seattle, any tips for figs?",
		"Could you remember that my dog is called Rex",
		"Can you remember that I live in Seattle?",
		"Would you please note that I'm allergic to bees",
		"Can you keep in mind I only use organic fertiliser",
		"Will you always answer in Korean from now on",
		"Should you need it, I live in Seattle",
		"Do you know what, I live in Seattle now",
		"Did you know I'm allergic to bees",
		"Did I mention I live in Seattle",
		"Have I told you my dog is called Rex",
		"When I was a kid I lived in Busan",
		"Do not use chemical fertiliser",
		"I live in Seattle. Do you know any good nurseries?",
		"내 강아지 이름은 렉스야, 기억해 줄래?",
		"내 강아지 이름은 렉스야 기억해 줄래?",
	}
	dropped := []string{
		"Do I live in Portland?", "Do I live in Portland", "is my dog called Max?", "Is my sister named Alice",
		"What is my dog called", "Whats my dog called", "What kind of dog do I have", "How many kids do I have?",
		"Which of my dogs is called Max", "Sprout, do I live in Portland", "So do I live in Portland",
		"Btw do I live in Portland or Seattle", "Um, do I live in Portland", "Quick question: do I live in Portland",
		"Wait is my dog called Max", "And do I live in Portland", "Hey, is my dog called Max", "Remind me: is my dog called Max",
		"I wonder if my dog is called Max", "Tell me whether I live in Portland", "Please tell me if my dog is called Max",
		"I forgot if my dog is called Max", "Not sure if I live in Portland", "I live in Portland right",
		"Can you remind me what my cat eats", "My dog is called Max??", "My dog is called Max？",
		"제가 포틀랜드에 살아요?", "제 강아지 이름이 뭐였나요", "우리 강아지 이름이 맥스인가요", "제 강아지 이름이 뭔가요",
		"우리 강아지 이름이 뭐더라", "혹시 제가 부산에 사는 거예요", "우리 강아지 이름이 맥스였던가", "내 동생 이름이 뭐였지?",
	}
	for _, s := range kept {
		if cs := ExtractText("e", "user", s, ref); len(cs) == 0 {
			t.Errorf("statement dropped: %q", s)
		}
	}
	for _, s := range dropped {
		if cs := ExtractText("e", "user", s, ref); len(cs) != 0 {
			t.Errorf("question recorded: %q → %q", s, cs[0].Content)
		}
	}
}

// A model that copies the user's question as a memory does not get it
// recorded; its subject-less third-person memories are not questions.
func TestLLMDropsQuestions(t *testing.T) {
	evs := []memory.Event{
		{ID: "e1", Role: "user", Text: "I live in Seattle", Timestamp: t0},
		{ID: "e2", Role: "user", Text: "Do I live in Portland?", Timestamp: t0.Add(time.Minute)},
	}
	reply := `{"memories":[
		{"strategy":"semantic","content":"I live in Seattle","topic":"location","sources":["e1"]},
		{"strategy":"semantic","content":"Do I live in Portland?","topic":"location","sources":["e2"]},
		{"strategy":"semantic","content":"Do I live in Portland","topic":"location","sources":["e2"]},
		{"strategy":"semantic","content":"Is the owner of a bakery","sources":["e1"]},
		{"strategy":"semantic","content":"Has a fig tree","sources":["e1"]}]}`
	got, err := ParseLLMReply(reply, evs)
	if err != nil {
		t.Fatal(err)
	}
	var contents []string
	for _, c := range got {
		contents = append(contents, c.Content)
	}
	if len(got) != 3 || contents[0] != "I live in Seattle" || contents[1] != "Is the owner of a bakery" || contents[2] != "Has a fig tree" {
		t.Fatalf("kept %q", contents)
	}
	if !strings.Contains(llmSystem, "A question is not a memory") {
		t.Fatal("the extraction prompt does not say that questions are not memories")
	}
}
