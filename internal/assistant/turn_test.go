package assistant

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/session"
)

// openTestApp wires the real stores in a temp home against a fake model.
func openTestApp(t *testing.T, fake *modeltest.Server) *Assistant {
	t.Helper()
	return openTestAppWith(t, fake, func() {})
}

// openTestAppWith is openTestApp with env set by env() after the defaults.
func openTestAppWith(t *testing.T, fake *modeltest.Server, env func()) *Assistant {
	t.Helper()
	return openConfig(t, testConfig(t, fake, env), false)
}

// testConfig points a fresh home at fake (TENDRIL_HOME, MODEL_ID and the
// OpenAI endpoint in the environment), runs env (nil: none) and loads the
// configuration, with LLM extraction off.
func testConfig(t *testing.T, fake *modeltest.Server, env func()) *config.Config {
	t.Helper()
	t.Setenv("TENDRIL_HOME", t.TempDir())
	t.Setenv("MODEL_ID", "openai/gpt-test")
	t.Setenv("OPENAI_BASE_URL", fake.BaseURL())
	t.Setenv("OPENAI_API_KEY", "k")
	if env != nil {
		env()
	}
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Memory.LLMExtraction = false
	return cfg
}

// openConfig opens an assistant on cfg, started when start is set; the
// test's cleanup closes it (closing it earlier is fine).
func openConfig(t *testing.T, cfg *config.Config, start bool) *Assistant {
	t.Helper()
	a, err := Open(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Owner: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if start {
		if err := a.Start(context.Background(), StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// A preference said once in one session is in the system prompt, tagged
// [Explicit] and before any inferred record, when the same user asks in a
// new session; another user asking the same question gets none of it.
func TestTurnRemembersExplicitPreferenceAcrossSessions(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	a := openTestApp(t, fake)
	ctx := context.Background()
	turn := func(actor, session, msg string) string {
		t.Helper()
		res, err := a.Invoke(ctx, agent.Request{Message: msg, ActorID: actor, SessionID: session, Channel: "telegram"})
		if err != nil {
			t.Fatal(err)
		}
		return res.SessionID
	}
	turn("telegram:1", "week1", "I only use organic fertiliser.")
	s1 := turn("telegram:1", "week1", "I have a fig tree in a raised bed with fast drainage.")
	s2 := turn("telegram:2", "other", "I prefer quick chemical sprays for pests.")
	// Extraction is asynchronous; Flush runs what is queued now.
	for _, as := range [][2]string{{"telegram:1", s1}, {"telegram:2", s2}} {
		if err := a.pipeline.Flush(ctx, "main", as[0], as[1]); err != nil {
			t.Fatal(err)
		}
	}

	n := len(fake.Requests())
	turn("telegram:1", "week3", "How do I treat aphids on my roses?")
	sys := fake.Requests()[n].System
	i := strings.Index(sys, "What you remember")
	if i < 0 {
		t.Fatalf("no memory block in the system prompt:\n%s", sys)
	}
	block := sys[i:]
	exp := strings.Index(block, "[Explicit]")
	if exp < 0 || !strings.Contains(strings.ToLower(block), "organic") {
		t.Fatalf("preference not in the memory block:\n%s", sys)
	}
	if inf := strings.Index(block, "[Inferred]"); inf >= 0 && inf < exp {
		t.Fatalf("an inferred record precedes the explicit one:\n%s", block)
	}

	n = len(fake.Requests())
	turn("telegram:2", "other2", "How do I treat aphids on my roses?")
	sys2 := fake.Requests()[n].System
	j := strings.Index(sys2, "What you remember")
	if j < 0 {
		t.Fatalf("user 2 has no memory block:\n%s", sys2)
	}
	{
		block2 := sys2[j:]
		if k := strings.Index(block2[1:], "\n## "); k >= 0 {
			block2 = block2[:k+1]
		}
		if strings.Contains(strings.ToLower(block2), "organic") || strings.Contains(strings.ToLower(block2), "fig") {
			t.Fatalf("user 2 sees user 1's memory:\n%s", block2)
		}
		if !strings.Contains(strings.ToLower(block2), "chemical") {
			t.Fatalf("user 2's own memory missing:\n%s", block2)
		}
	}
}

// A context past the threshold of the model's window is compacted before
// the turn: the model then sees the summary instead of the old nodes, the
// originals stay on disk, and memory extraction consumed them first.
func TestTurnAutoCompaction(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	cfg := testConfig(t, fake, nil)
	cfg.Model.ContextWindow = 200 // tokens: a few turns pass 0.8 × 200
	cfg.Session.Compaction.KeepLast = 2
	a, err := Open(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Owner: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		msg := fmt.Sprintf("turn %d: I have a %s in the garden and I water it every morning before work.", i, []string{"fig", "rose", "lemon", "olive", "apple", "pear"}[i])
		if _, err := a.Invoke(ctx, agent.Request{Message: msg, ActorID: "api:c", SessionID: "long"}); err != nil {
			t.Fatal(err)
		}
	}
	var summaryCalls int
	for _, s := range fake.Requests() {
		if strings.HasPrefix(s.System, "Summarise this conversation") {
			summaryCalls++
		}
	}
	if summaryCalls == 0 {
		t.Fatal("no compaction happened")
	}
	last := fake.Requests()[len(fake.Requests())-1]
	for _, m := range last.Messages {
		for _, b := range m.Content {
			if strings.HasPrefix(b.Text, "turn 0:") {
				t.Fatalf("the oldest turn was not compacted away:\n%s", allText(last))
			}
		}
	}
	if !strings.Contains(allText(last), "[Session summary]") {
		t.Fatalf("the summary is not in the context:\n%s", allText(last))
	}
	nodes, err := a.sessions.Nodes(ctx, session.Key{AgentID: "main", Channel: "api", ID: "c~long"})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) == 0 || !strings.Contains(nodes[0].PlainText(), "turn 0:") {
		t.Fatal("compaction rewrote history")
	}
}

// allText flattens everything the model saw (system excluded).
func allText(s modeltest.Seen) string {
	var b strings.Builder
	for _, m := range s.Messages {
		for _, c := range m.Content {
			b.WriteString(c.Text + "\n")
		}
	}
	return b.String()
}
