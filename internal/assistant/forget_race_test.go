package assistant

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/config"
)

// A turn in flight when its actor is forgotten cannot write the actor back:
// Forget waits for it, then removes what it stored.
func TestForgetWaitsForTurnInFlight(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Noted: bed seven."},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`)
	}))
	defer srv.Close()
	t.Setenv("TENDRIL_HOME", t.TempDir())
	t.Setenv("MODEL_ID", "openai/gpt-test")
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "k")
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Open(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Owner: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	turn := make(chan error, 1)
	go func() {
		_, err := a.Invoke(ctx, agent.Request{Message: "my secret rhubarb is in bed seven", ActorID: "api:race"})
		turn <- err
	}()
	<-arrived
	forgot := make(chan ForgetReport, 1)
	go func() {
		rep, err := a.Forget(ctx, ForgetRequest{ActorID: "api:race", Sessions: true})
		if err != nil {
			t.Error(err)
		}
		forgot <- rep
	}()
	select {
	case <-forgot:
		t.Fatal("Forget returned while the actor's turn was still running")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-turn; err != nil {
		t.Fatal(err)
	}
	if rep := <-forgot; rep.Remaining != 0 || len(rep.SessionsRemoved) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if evs, _ := a.memory.Events(ctx, "api:race", ""); len(evs) != 0 {
		t.Fatalf("the turn wrote events back after forget: %v", evs)
	}
	if rows, _ := a.ListSessions(ctx, ""); len(rows) != 0 {
		t.Fatalf("the turn wrote its session back after forget: %v", rows)
	}
	if actors, _ := a.StateActors(ctx); len(actors) != 0 {
		t.Fatalf("state written back: %v", actors)
	}
}
