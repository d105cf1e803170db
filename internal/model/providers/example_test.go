package providers_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/model/providers"
)

// Wiring config.Config onto a Router: cfg.Model → RouterOptions,
// cfg.Providers → Options. Here an OpenAI-compatible fake stands in for
// OPENAI_BASE_URL.
func ExampleNewRouter() {
	fake := modeltest.NewFake(modeltest.OpenAI)
	srv := httptest.NewServer(fake)
	defer srv.Close()

	r, err := providers.NewRouter(context.Background(), model.RouterOptions{
		TextRef:    "openai/gpt-4o-mini", // MODEL_ID
		VisionRef:  "openai/gpt-4o",      // VISION_MODEL_ID
		Fallbacks:  []string{"ollama/llama3.2"},
		Timeout:    60 * time.Second,
		MaxRetries: 3,
		MaxTokens:  4096,
	}, providers.Options{OpenAIAPIKey: "sk-test", OpenAIBaseURL: srv.URL + "/v1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := r.Generate(context.Background(), &model.Request{
		System:   "You are Sprout, a gardening helper.",
		Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("hello")}}},
	}, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.TextContent(), resp.StopReason, fake.Requests()[0].Model)
	// Output: echo: hello end_turn gpt-4o-mini
}
