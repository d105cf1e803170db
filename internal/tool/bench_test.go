package tool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/tool"
)

// BenchmarkRun measures tool.Run's overhead (goroutine, timer, recover)
// against calling Tool.Run directly.
func BenchmarkRun(b *testing.B) {
	t := fakeTool{name: "t", class: tool.ClassRead}
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if _, err := t.Run(ctx, tool.Call{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tool.Run", func(b *testing.B) {
		for b.Loop() {
			if _, err := tool.Run(ctx, t, tool.Call{}, 30*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDefs measures building the model tool list of 20 tools, done
// once per turn.
func BenchmarkDefs(b *testing.B) {
	r := tool.NewRegistry()
	for i := range 20 {
		_ = r.Register(fakeTool{name: fmt.Sprintf("tool_%02d", i), class: tool.ClassRead})
	}
	for b.Loop() {
		if len(r.Defs(nil)) != 20 {
			b.Fatal("defs")
		}
	}
}
