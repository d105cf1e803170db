package locomo

import (
	"os"
	"testing"

	"github.com/tendrilai/tendril/internal/memory/search"
)

// TestRerankDev cross-validates the learned re-ranker on the dev split
// when LOCOMO_DATA and LOCOMO_RERANK are set.
func TestRerankDev(t *testing.T) {
	path := os.Getenv("LOCOMO_DATA")
	if path == "" || os.Getenv("LOCOMO_RERANK") == "" {
		t.Skip("set LOCOMO_DATA and LOCOMO_RERANK=1 to cross-validate the learned re-ranker on the dev split")
	}
	convs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	qs := RerankData(convs, search.DefaultParams(), 100)
	cv := CrossValidateRerank(qs, 100, 6, 0.0005)
	cv.WriteText(os.Stdout)
}
