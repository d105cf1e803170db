package openai_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/model/openai"
)

// TestConcurrentCallsReuseConnections: 16 turns in flight against one
// provider host, round after round, reuse their keep-alive connections
// instead of dialling a new one per request (net/http's default keeps 2
// idle connections per host, so 14 of every 16 were redialled).
func TestConcurrentCallsReuseConnections(t *testing.T) {
	f := modeltest.NewFake(modeltest.OpenAI)
	f.Otherwise(func(modeltest.Seen) modeltest.Reply { return modeltest.Reply{Text: "ok"} })
	var dialled atomic.Int64
	srv := httptest.NewUnstartedServer(f)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	p := openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "k"})
	const inFlight, rounds = 16, 8
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		errs := make(chan error, inFlight)
		for i := 0; i < inFlight; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := p.Generate(context.Background(), &model.Request{Model: "m",
					Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("x")}}}})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		f.Reset()
	}
	// At most one connection per request in flight; with the default
	// transport this was about inFlight + (rounds-1)*(inFlight-2) = 114.
	if n := dialled.Load(); n > inFlight {
		t.Fatalf("%d connections dialled for %d rounds of %d concurrent calls; want at most %d", n, rounds, inFlight, inFlight)
	}
}
