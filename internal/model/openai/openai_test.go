package openai_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/model/openai"
)

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		name      string
		reply     modeltest.Reply
		retryable bool
		overflow  bool
	}{
		{"rate limit", modeltest.Reply{Status: 429}, true, false},
		{"quota is not retried", modeltest.Reply{Status: 429, ErrorCode: "insufficient_quota", ErrorMessage: "You exceeded your current quota"}, false, false},
		{"openai overflow", modeltest.Reply{Overflow: true}, false, true},
		{"vllm overflow", modeltest.Reply{Status: 400, ErrorType: "BadRequestError", ErrorMessage: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."}, false, true},
		{"llama.cpp overflow", modeltest.Reply{Status: 400, ErrorType: "exceed_context_size_error", ErrorMessage: "the request exceeds the available context size"}, false, true},
		{"ollama not found", modeltest.Reply{Status: 404, Body: `{"error":"model \"llama9\" not found, try pulling it first"}`}, false, false},
	}
	srv := modeltest.NewOpenAI(t)
	p := openai.New(openai.Options{Name: openai.OllamaName, BaseURL: srv.BaseURL()})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv.Push(c.reply)
			_, err := p.Generate(context.Background(), &model.Request{Model: "m",
				Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("x")}}}})
			var apiErr *model.APIError
			if !errors.As(err, &apiErr) || apiErr.Retryable != c.retryable || errors.Is(err, model.ErrContextOverflow) != c.overflow || apiErr.Provider != "ollama" {
				t.Errorf("err = %v (%+v)", err, apiErr)
			}
		})
	}
}
