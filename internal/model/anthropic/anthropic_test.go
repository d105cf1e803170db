package anthropic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/anthropic"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		name      string
		reply     modeltest.Reply
		status    int
		retryable bool
		after     time.Duration
		overflow  bool
	}{
		{"overloaded 529", modeltest.Reply{Status: 529}, 529, true, 0, false},
		{"rate limit ms", modeltest.Reply{Status: 429, Header: map[string]string{"Retry-After-Ms": "1500"}}, 429, true, 1500 * time.Millisecond, false},
		{"should not retry", modeltest.Reply{Status: 500, Header: map[string]string{"X-Should-Retry": "false"}}, 500, false, 0, false},
		{"auth", modeltest.Reply{Status: 401}, 401, false, 0, false},
		{"prompt too long", modeltest.Reply{Overflow: true}, 400, false, 0, true},
		{"request too large", modeltest.Reply{Status: 413}, 413, false, 0, true},
	}
	srv := modeltest.NewAnthropic(t)
	p := anthropic.New(anthropic.Options{APIKey: "k", BaseURL: srv.BaseURL()})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv.Push(c.reply)
			_, err := p.Generate(context.Background(), &model.Request{Model: "m", MaxTokens: 10,
				Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("x")}}}})
			var apiErr *model.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v", err)
			}
			if apiErr.StatusCode != c.status || apiErr.Retryable != c.retryable || apiErr.RetryAfter != c.after ||
				errors.Is(err, model.ErrContextOverflow) != c.overflow || apiErr.Provider != "anthropic" {
				t.Errorf("err = %v: %+v", err, apiErr)
			}
		})
	}
}
