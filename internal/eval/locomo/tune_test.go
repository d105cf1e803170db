package locomo

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/tendrilai/tendril/internal/memory/search"
)

// TestTune prints a small parameter sweep when LOCOMO_TUNE is set.
func TestTune(t *testing.T) {
	path := os.Getenv("LOCOMO_DATA")
	if path == "" || os.Getenv("LOCOMO_TUNE") == "" {
		t.Skip("set LOCOMO_DATA and LOCOMO_TUNE to run the sweep")
	}
	convs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	type v struct {
		name string
		mod  func(p *search.Params)
	}
	for _, c := range []v{
		{"default", func(p *search.Params) {}},
		{"g0.1", func(p *search.Params) { p.GroupWeight = 0.1 }},
		{"g0.2", func(p *search.Params) { p.GroupWeight = 0.2 }},
		{"g0.4", func(p *search.Params) { p.GroupWeight = 0.4 }},
	} {
		p := search.DefaultParams()
		c.mod(&p)
		rep, err := Run(context.Background(), convs, Options{Ranking: &p})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%-10s r@5 %.3f r@10 %.3f r@50 %.3f all@10 %.3f  p99 %.2fms\n", c.name, rep.Overall.Recall[5], rep.Overall.Recall[10], rep.Overall.Recall[50], rep.Overall.All[10], rep.LatencyMS.P99)
	}
}
