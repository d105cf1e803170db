package extract

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/gate"
)

var t0 = time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)

type want struct {
	strategy memory.Strategy
	topic    string
	content  string   // "" = do not check
	plants   []string // nil = do not check
	section  string   // "" = do not check
}

func TestRulesExtraction(t *testing.T) {
	tests := []struct {
		lang, text string
		want       []want
	}{
		// preferences
		{"en", "I only use organic fertiliser", []want{{memory.StrategyUserPreference, "fertiliser", "I only use organic fertiliser", nil, "garden"}}},
		{"en", "call me Jin", []want{{memory.StrategyUserPreference, "name", "Call me Jin", nil, "profile"}}},
		{"en", "Please call me Jin.", []want{{memory.StrategyUserPreference, "name", "", nil, ""}}},
		{"en", "I really love roses!", []want{{memory.StrategyUserPreference, "likes:rose", "I really love roses", []string{"rose"}, "garden"}}},
		{"en", "I don't use pesticides", []want{{memory.StrategyUserPreference, "pest_control", "", nil, "garden"}}},
		{"en", "My favourite flower is the tulip", []want{{memory.StrategyUserPreference, "favourite:flower", "", []string{"tulip"}, ""}}},
		{"ko", "저는 유기농 비료만 써요", []want{{memory.StrategyUserPreference, "fertiliser", "저는 유기농 비료만 써요", nil, "garden"}}},
		{"ko", "진이라고 불러줘", []want{{memory.StrategyUserPreference, "name", "진이라고 불러줘", nil, "profile"}}},
		{"ko", "저는 장미를 정말 좋아해요", []want{{memory.StrategyUserPreference, "likes:rose", "", []string{"rose"}, ""}}},
		{"ko", "농약은 절대 안 써요", []want{{memory.StrategyUserPreference, "pest_control", "", nil, "garden"}}},
		// facts
		{"en", "I have raised beds with fast drainage", []want{{memory.StrategySemantic, "has:raised beds", "I have raised beds with fast drainage", nil, "garden"}}},
		{"en", "I live in Busan", []want{{memory.StrategySemantic, "location", "I live in Busan", nil, "profile"}}},
		{"en", "I have a fig tree", []want{{memory.StrategySemantic, "has:fig", "I have a fig tree", []string{"fig"}, "garden"}}},
		{"en", "My garden faces south", []want{{memory.StrategySemantic, "my:garden", "", nil, "garden"}}},
		{"en", "I'm allergic to bees", []want{{memory.StrategySemantic, "allergy:bees", "", nil, "profile"}}},
		{"en", "I work as a nurse", []want{{memory.StrategySemantic, "occupation", "", nil, "profile"}}},
		{"en", "We have a greenhouse", []want{{memory.StrategySemantic, "has:greenhouse", "", nil, "garden"}}},
		{"en", "We live in Seoul", []want{{memory.StrategySemantic, "location", "", nil, "profile"}}},
		{"en", "Our garden faces north", []want{{memory.StrategySemantic, "my:garden", "", nil, "garden"}}},
		{"en", "My name is Mina", []want{{memory.StrategySemantic, "name", "", nil, "profile"}}},
		{"ko", "부산에 살아요", []want{{memory.StrategySemantic, "location", "부산에 살아요", nil, "profile"}}},
		{"ko", "무화과나무가 있어요", []want{{memory.StrategySemantic, "has:fig", "무화과나무가 있어요", []string{"fig"}, "garden"}}},
		{"ko", "베란다에서 토마토를 키우고 있어요", []want{{memory.StrategySemantic, "has:tomato", "", []string{"tomato"}, "garden"}}},
		{"ko", "제 정원은 남향이에요", []want{{memory.StrategySemantic, "my:정원", "", nil, "garden"}}},
		{"ko", "서울로 이사했어요", []want{{memory.StrategySemantic, "location", "", nil, "profile"}}},
		// instructions
		{"en", "always answer in Korean", []want{{memory.StrategyProcedural, "language", "Always answer in Korean", nil, "style"}}},
		{"en", "keep answers short", []want{{memory.StrategyProcedural, "answer_length", "Keep answers short", nil, "style"}}},
		{"en", "Please reply in English from now on", []want{{memory.StrategyProcedural, "language", "", nil, "style"}}},
		{"en", "Never use emojis", []want{{memory.StrategyProcedural, "emoji", "", nil, "style"}}},
		{"en", "Use metric units please", []want{{memory.StrategyProcedural, "units", "", nil, "style"}}},
		{"ko", "항상 한국어로 답해줘", []want{{memory.StrategyProcedural, "language", "항상 한국어로 답해줘", nil, "style"}}},
		{"ko", "짧게 답해줘", []want{{memory.StrategyProcedural, "answer_length", "", nil, "style"}}},
		{"ko", "답변은 자세하게 해 주세요", []want{{memory.StrategyProcedural, "answer_length", "", nil, "style"}}},
		// several clauses
		{"en", "I love roses, and I live in Seoul.", []want{{memory.StrategyUserPreference, "likes:rose", "", nil, ""}, {memory.StrategySemantic, "location", "I live in Seoul", nil, ""}}},
		{"ko", "부산에 살아요. 무화과나무가 있어요!", []want{{memory.StrategySemantic, "location", "", nil, ""}, {memory.StrategySemantic, "has:fig", "", nil, ""}}},
		// third person (memory_write notes, harvest)
		{"en", "The user has a lemon tree", []want{{memory.StrategySemantic, "has:lemon", "", []string{"lemon"}, ""}}},
		{"en", "User prefers organic fertiliser", []want{{memory.StrategyUserPreference, "fertiliser", "", nil, ""}}},
		// not memories
		{"en", "I have a question about roses", nil},
		{"en", "Never mind", nil},
		{"en", "I like it", nil},
		{"en", "I'm a bit worried", nil},
		{"en", "how do I treat aphids?", nil},
		{"en", "What should I plant in March?", nil},
		{"ko", "좋아요!", nil},
		{"ko", "시간이 있어요", nil},
		{"ko", "진딧물은 어떻게 없애요?", nil},
	}
	for _, tt := range tests {
		t.Run(tt.lang+"/"+tt.text, func(t *testing.T) {
			got := ExtractText("ev1", "user", tt.text, t0)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d candidates %s, want %d", len(got), dump(got), len(tt.want))
			}
			for i, w := range tt.want {
				c := got[i]
				if c.Strategy != w.strategy || c.Topic != w.topic {
					t.Errorf("[%d] strategy/topic = %s/%q, want %s/%q", i, c.Strategy, c.Topic, w.strategy, w.topic)
				}
				if w.content != "" && c.Content != w.content {
					t.Errorf("[%d] content = %q, want %q", i, c.Content, w.content)
				}
				if w.plants != nil && !reflect.DeepEqual(c.Metadata[KeyPlants], w.plants) {
					t.Errorf("[%d] plants = %v, want %v", i, c.Metadata[KeyPlants], w.plants)
				}
				if w.section != "" && c.Metadata[KeySection] != w.section {
					t.Errorf("[%d] section = %v, want %s", i, c.Metadata[KeySection], w.section)
				}
				if c.Topic != "" && c.Metadata[KeyTopic] != c.Topic {
					t.Errorf("[%d] metadata topic = %v, want %q", i, c.Metadata[KeyTopic], c.Topic)
				}
				if !reflect.DeepEqual(c.Sources, []string{"ev1"}) || !c.Time.Equal(t0) {
					t.Errorf("[%d] sources/time = %v/%v", i, c.Sources, c.Time)
				}
				// Every rule candidate from the table must clear the store
				// threshold on its own: these are the statements SPEC §4.3
				// names as what memory is for.
				if s := gate.Score(gate.Assess(c.GateInput(nil))); gate.Decide(s) != gate.Stored {
					t.Errorf("[%d] %q scored %.3f, want ≥ 0.7", i, c.Content, s)
				}
			}
		})
	}
}

func dump(cs []Candidate) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "{%s %q %q}", c.Strategy, c.Topic, c.Content)
	}
	return b.String()
}

func TestNoiseIsNotExtractedAndScoresBelowStage(t *testing.T) {
	for _, s := range []string{"ok", "haha", "thanks!", "ㅋㅋ", "네", "ㅎㅎ 감사해요", "lol", "okay cool", "응", "좋아요"} {
		if got := ExtractText("e", "user", s, t0); len(got) != 0 {
			t.Errorf("%q extracted %s", s, dump(got))
		}
		if sc := gate.Score(gate.Assess(gate.Input{Text: s, Role: "user"})); sc >= 0.4 {
			t.Errorf("%q scored %.3f, want < 0.4", s, sc)
		}
	}
}

func TestAssistantTurnsAreNotExtracted(t *testing.T) {
	evs := []memory.Event{
		{ID: "a1", Role: "assistant", Text: "I only use organic fertiliser in my examples.", Timestamp: t0},
		{ID: "t1", Role: "tool", Text: "I live in Busan", Timestamp: t0},
		{ID: "u1", Role: "user", Text: "I live in Busan", Timestamp: t0},
	}
	got, err := Rules{}.Extract(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Sources[0] != "u1" {
		t.Fatalf("got %s, want only the user's fact", dump(got))
	}
	// Third-person notes about the user are read from any role.
	got = ExtractText("n1", "assistant", "Remember that the user has a lemon tree", t0)
	if len(got) != 1 || got[0].Topic != "has:lemon" {
		t.Fatalf("note: %s", dump(got))
	}
}

func TestContradictionsShareTopic(t *testing.T) {
	pairs := [][2]string{
		{"I only use organic fertiliser", "I only use chemical fertiliser now"},
		{"저는 유기농 비료만 써요", "이제 화학 비료만 써요"},
		{"I only use organic fertiliser", "저는 화학 비료만 써요"},
		{"call me Jin", "Call me Jinny"},
		{"진이라고 불러줘", "민지라고 불러줘"},
		{"always answer in Korean", "please answer in English"},
		{"항상 한국어로 답해줘", "always answer in English"},
		{"I live in Busan", "서울로 이사했어요"},
		{"keep answers short", "자세하게 설명해 주세요"},
	}
	for _, p := range pairs {
		a := ExtractText("a", "user", p[0], t0)
		b := ExtractText("b", "user", p[1], t0.Add(time.Hour))
		if len(a) != 1 || len(b) != 1 {
			t.Errorf("%q / %q: got %s / %s", p[0], p[1], dump(a), dump(b))
			continue
		}
		if a[0].Topic == "" || a[0].Topic != b[0].Topic {
			t.Errorf("%q / %q: topics %q / %q, want the same", p[0], p[1], a[0].Topic, b[0].Topic)
		}
		if memory.ContentHash(a[0].Content) == memory.ContentHash(b[0].Content) {
			t.Errorf("%q / %q: same hash", p[0], p[1])
		}
	}
}

func TestClauses(t *testing.T) {
	tests := map[string][]string{
		"I love roses, and I live in Seoul.": {"I love roses", "I live in Seoul"},
		"Hi! I have a fig tree. Thanks":      {"Hi", "I have a fig tree", "Thanks"},
		"부산에 살아요 그리고 무화과나무가 있어요":             {"부산에 살아요", "무화과나무가 있어요"},
		"":                 nil,
		"roses and tulips": {"roses and tulips"},
	}
	for in, want := range tests {
		if got := Clauses(in); !reflect.DeepEqual(got, want) {
			t.Errorf("Clauses(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSummarize(t *testing.T) {
	evs := []memory.Event{
		{ID: "u1", Role: "user", Text: "hi", Timestamp: t0},
		{ID: "a1", Role: "assistant", Text: "Hello! How can I help?", Timestamp: t0.Add(time.Second)},
		{ID: "u2", Role: "user", Text: "My tomatoes have yellow leaves since Monday", Timestamp: t0.Add(time.Minute)},
		{ID: "u3", Role: "user", Text: "I only use organic fertiliser", Timestamp: t0.Add(2 * time.Minute)},
		{ID: "u4", Role: "user", Text: "ok", Timestamp: t0.Add(3 * time.Minute)},
	}
	c, ok := Summarize("s1", evs)
	if !ok {
		t.Fatal("no summary")
	}
	if c.Strategy != memory.StrategySummary {
		t.Fatalf("strategy %s", c.Strategy)
	}
	for _, s := range []string{"2026-06-01", "4 user turns", "tomato", "fertiliser", "yellow leaves", "organic fertiliser"} {
		if !strings.Contains(c.Content, s) {
			t.Errorf("summary %q lacks %q", c.Content, s)
		}
	}
	// quotes are in event order and sources are exactly the quoted events
	if i, j := strings.Index(c.Content, "yellow"), strings.Index(c.Content, "organic"); i < 0 || j < i {
		t.Errorf("quotes out of order: %q", c.Content)
	}
	for _, id := range c.Sources {
		if id == "a1" {
			t.Errorf("assistant event quoted: %v", c.Sources)
		}
	}
	if !reflect.DeepEqual(c.Metadata[KeyPlants], []string{"tomato"}) || c.Metadata["sessionId"] != "s1" {
		t.Errorf("metadata %v", c.Metadata)
	}
	if _, ok := Summarize("s2", []memory.Event{{Role: "assistant", Text: "hello"}}); ok {
		t.Error("summary of a session without user text")
	}
	// A chit-chat session has nothing worth a summary.
	if cc, ok := Summarize("s3", []memory.Event{{ID: "x", Role: "user", Text: "ok", Timestamp: t0}, {ID: "y", Role: "user", Text: "ㅋㅋ", Timestamp: t0}}); ok {
		t.Errorf("chit-chat summary %q", cc.Content)
	}
}

func TestAnnotate(t *testing.T) {
	md, ents := Annotate("User's fig tree and tomatoes got blight in Busan")
	if md[KeyType] != "note" || md[KeySection] != "garden" || !reflect.DeepEqual(md[KeyPlants], []string{"tomato", "fig"}) {
		t.Fatalf("metadata %v", md)
	}
	if len(ents) < 3 {
		t.Fatalf("entities %v", ents)
	}
}

// ---- LLM extractor

func events() []memory.Event {
	return []memory.Event{
		{ID: "e1", Role: "user", Text: "I only use organic fertiliser", Timestamp: t0},
		{ID: "e2", Role: "assistant", Text: "Noted!", Timestamp: t0.Add(time.Second)},
		{ID: "e3", Role: "user", Text: "부산에 살아요", Timestamp: t0.Add(time.Minute)},
	}
}

func TestLLMValidReply(t *testing.T) {
	var gotSystem, gotUser string
	l := NewLLM(func(_ context.Context, system, user string) (string, error) {
		gotSystem, gotUser = system, user
		return "```json\n" + `{"memories":[
			{"strategy":"user_preference","content":"Only uses organic fertiliser","topic":"Fertiliser","type":"preference","section":"garden","sources":["e1"]},
			{"strategy":"semantic","content":"Lives in Busan","topic":"location","plants":[],"sources":["e3","e2"]}]}` + "\n```", nil
	})
	var fell error
	l.OnFallback = func(err error) { fell = err }
	got, err := l.Extract(context.Background(), events())
	if err != nil || fell != nil {
		t.Fatalf("err %v, fallback %v", err, fell)
	}
	if !strings.Contains(gotSystem, `"memories"`) || !strings.Contains(gotUser, "[e3] user: 부산에 살아요") {
		t.Fatalf("prompt: %q / %q", gotSystem, gotUser)
	}
	if len(got) != 2 {
		t.Fatalf("got %s", dump(got))
	}
	if got[0].Topic != "fertiliser" || got[0].Metadata[KeySection] != "garden" || !got[0].Direct {
		t.Errorf("first: %+v", got[0])
	}
	if got[1].Metadata[KeyType] != "fact" || got[1].Direct || !got[1].Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("second: %+v (a source is an assistant event, so not direct)", got[1])
	}
}

func TestLLMGarbageFallsBackToRules(t *testing.T) {
	replies := map[string]string{
		"prose":           "Sure! The user likes organic fertiliser.",
		"truncated":       `{"memories":[{"strategy":"semantic","content":"x"`,
		"unknown field":   `{"memories":[{"strategy":"semantic","content":"x","sources":["e1"],"confidence":0.9}]}`,
		"bad strategy":    `{"memories":[{"strategy":"episodic","content":"x","sources":["e1"]}]}`,
		"empty content":   `{"memories":[{"strategy":"semantic","content":"  ","sources":["e1"]}]}`,
		"foreign source":  `{"memories":[{"strategy":"semantic","content":"x","sources":["e99"]}]}`,
		"no sources":      `{"memories":[{"strategy":"semantic","content":"x"}]}`,
		"missing key":     `{"items":[]}`,
		"null memories":   `{"memories":null}`,
		"trailing":        `{"memories":[]} {"memories":[]}`,
		"array":           `[]`,
		"bad section":     `{"memories":[{"strategy":"semantic","content":"x","section":"secret","sources":["e1"]}]}`,
		"control chars":   `{"memories":[{"strategy":"semantic","content":"x\u0000y","sources":["e1"]}]}`,
		"too long":        `{"memories":[{"strategy":"semantic","content":"` + strings.Repeat("가", MaxLLMContentRunes+1) + `","sources":["e1"]}]}`,
		"too many plants": `{"memories":[{"strategy":"semantic","content":"x","plants":["a","b","c","d","e","f","g","h","i","j","k"],"sources":["e1"]}]}`,
	}
	rules, _ := Rules{}.Extract(context.Background(), events())
	for name, reply := range replies {
		t.Run(name, func(t *testing.T) {
			var fell error
			l := NewLLM(func(context.Context, string, string) (string, error) { return reply, nil })
			l.OnFallback = func(err error) { fell = err }
			got, err := l.Extract(context.Background(), events())
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(fell, ErrInvalidReply) {
				t.Fatalf("fallback reason %v, want ErrInvalidReply", fell)
			}
			if !reflect.DeepEqual(got, rules) {
				t.Fatalf("got %s, want the rules' %s", dump(got), dump(rules))
			}
		})
	}
}

func TestLLMCompleterErrorFallsBack(t *testing.T) {
	boom := errors.New("model down")
	var fell error
	l := NewLLM(func(context.Context, string, string) (string, error) { return "", boom })
	l.OnFallback = func(err error) { fell = err }
	got, err := l.Extract(context.Background(), events())
	if err != nil || !errors.Is(fell, boom) || len(got) != 2 {
		t.Fatalf("got %s, err %v, fallback %v", dump(got), err, fell)
	}
	// An empty list is a valid answer, not garbage.
	l2 := NewLLM(func(context.Context, string, string) (string, error) { return `{"memories":[]}`, nil })
	got, err = l2.Extract(context.Background(), events())
	if err != nil || len(got) != 0 {
		t.Fatalf("empty reply: got %s, err %v", dump(got), err)
	}
}

func TestLLMBatchesLongInput(t *testing.T) {
	var evs []memory.Event
	for i := 0; i < 100; i++ {
		evs = append(evs, memory.Event{ID: fmt.Sprint("e", i), Role: "user", Text: "I have a fig tree", Timestamp: t0})
	}
	calls := 0
	l := NewLLM(func(_ context.Context, _, user string) (string, error) {
		calls++
		if n := strings.Count(user, "\n"); n > LLMBatchEvents {
			t.Errorf("batch of %d events", n)
		}
		if calls == 2 {
			return "garbage", nil // this batch falls back to rules alone
		}
		id := strings.TrimPrefix(strings.SplitN(user, "]", 2)[0], "[")
		return `{"memories":[{"strategy":"semantic","content":"Has a fig tree","sources":["` + id + `"]}]}`, nil
	})
	got, err := l.Extract(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Fatalf("%d model calls for 100 events, want 3", calls)
	}
	// batches 1 and 3: one model memory each; batch 2: 40 rule candidates
	if len(got) != 2+LLMBatchEvents {
		t.Fatalf("%d candidates", len(got))
	}
}

func FuzzParseLLMReply(f *testing.F) {
	f.Add(`{"memories":[{"strategy":"semantic","content":"x","sources":["e1"]}]}`)
	f.Add("```json\n{\"memories\":[]}\n```")
	f.Add(`{"memories":[{"strategy":"user_preference","content":"가","topic":"t","plants":["fig"],"sources":["e1","e3"]}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseLLMReply(s, events())
		if err != nil {
			if !errors.Is(err, ErrInvalidReply) {
				t.Fatalf("error %v does not wrap ErrInvalidReply", err)
			}
			return
		}
		for _, c := range cs {
			if strings.TrimSpace(c.Content) == "" || len(c.Sources) == 0 {
				t.Fatalf("invalid candidate accepted: %+v", c)
			}
		}
	})
}

func FuzzExtractText(f *testing.F) {
	for _, s := range []string{"I only use organic fertiliser", "진이라고 불러줘", "I have 3 fig trees and I live in Busan", "my  is ", "라고 불러", "만 써요"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range ExtractText("e", "user", s, t0) {
			if c.Content == "" || c.Strategy == "" {
				t.Fatalf("empty candidate from %q: %+v", s, c)
			}
		}
	})
}

func BenchmarkRulesExtract(b *testing.B) {
	turns := []string{
		"I only use organic fertiliser", "What should I do about aphids on my roses?", "call me Jin",
		"저는 유기농 비료만 써요", "무화과나무가 있어요", "ok thanks", "I have raised beds with fast drainage",
		"Yesterday I went to the market and bought some seedlings for the balcony", "항상 한국어로 답해줘", "ㅋㅋ",
	}
	evs := make([]memory.Event, len(turns))
	for i, s := range turns {
		evs[i] = memory.Event{ID: fmt.Sprint(i), Role: "user", Text: s, Timestamp: t0}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := (Rules{}).Extract(context.Background(), evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(evs))/b.Elapsed().Seconds(), "turns/s")
}
