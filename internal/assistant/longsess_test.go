package assistant

import (
	"context"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// The longest valid actor and session IDs are recorded in memory too (the
// pipeline once refused the combined session key).
func TestLongSessionIDRecorded(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	a := openTestApp(t, fake)
	ctx := context.Background()
	sid := strings.Repeat("a", 256)
	actor := "api:" + strings.Repeat("b", 250)
	fake.Push(modeltest.Reply{Text: "ok"})
	if _, err := a.Invoke(ctx, agent.Request{Message: "I only use organic fertiliser", ActorID: actor, Channel: "api", SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	evs, err := a.memory.Events(ctx, actor, "")
	if err != nil || len(evs) == 0 {
		t.Fatalf("events %d %v", len(evs), err)
	}
}
