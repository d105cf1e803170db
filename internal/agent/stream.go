package agent

import (
	"context"

	"github.com/tendrilai/tendril/internal/model"
)

// StreamModels is implemented by model routers that can stream text
// deltas (*model.Router does). onDelta gets text only, in order.
type StreamModels interface {
	GenerateStream(ctx context.Context, req *model.Request, vision bool, onDelta func(text string)) (*model.Response, error)
}

type deltaKey struct{}

// WithDeltas returns a context whose turns stream the model's text deltas
// to f as they arrive (used for Server-Sent Events). f is called from the
// turn's goroutine.
func WithDeltas(ctx context.Context, f func(text string)) context.Context {
	return context.WithValue(ctx, deltaKey{}, f)
}

func deltasFrom(ctx context.Context) func(string) {
	f, _ := ctx.Value(deltaKey{}).(func(string))
	return f
}

// call makes one model call, streaming when the caller asked for deltas
// and the models support it.
func (a *Agent) call(ctx context.Context, req *model.Request, vision bool) (*model.Response, error) {
	if f := deltasFrom(ctx); f != nil {
		if sm, ok := a.deps.Models.(StreamModels); ok {
			return sm.GenerateStream(ctx, req, vision, f)
		}
	}
	return a.deps.Models.Generate(ctx, req, vision)
}
