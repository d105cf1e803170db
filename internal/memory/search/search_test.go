package search

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestAnalyzer(t *testing.T) {
	cases := []struct {
		an   Analyzer
		in   string
		want []string
	}{
		{Analyzer{}, "Caroline's running shoes!", []string{"caroline", "running", "shoes"}},
		{Analyzer{Stem: true}, "Caroline's running shoes!", []string{"carolin", "run", "shoe"}},
		{Analyzer{Stem: true}, "The fertilisers were organic", []string{"fertil", "organ"}},
		{Analyzer{Stem: true}, "fertilizer fertiliser organisation organization", []string{"fertil", "fertil", "organ", "organ"}},
		{Analyzer{KeepStopWords: true}, "the fig", []string{"the", "fig"}},
		{Analyzer{}, "비료를 샀다", []string{"비료를", "#비료", "#료를", "샀다", "#샀다"}},
		{Analyzer{NoBigrams: true}, "비료를", []string{"비료를"}},
	}
	for _, c := range cases {
		if got := c.an.Terms(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v.Terms(%q) = %q, want %q", c.an, c.in, got, c.want)
		}
	}
}

func TestWhenAndTime(t *testing.T) {
	for q, want := range map[string]bool{
		"When did Caroline go to the support group?": true,
		"What year did she move?":                    true,
		"언제 이사했어?":                                   true,
		"What did Caroline research?":                false,
		"Whenever is not when":                       true,
	} {
		if got := IsWhenQuestion(q); got != want {
			t.Errorf("IsWhenQuestion(%q) = %v", q, got)
		}
	}
	if !HasTimeExpression("I went there yesterday") || HasTimeExpression("I like figs") {
		t.Error("HasTimeExpression")
	}
}

func build(p Params, docs ...Doc) *Index {
	ix := NewIndex(p)
	for _, d := range docs {
		ix.Add(d)
	}
	return ix
}

func TestSearchRanksAndExplains(t *testing.T) {
	docs := []Doc{
		{Text: "I painted a sunrise over the lake", Speaker: "Melanie", Date: "8 May 2023"},
		{Text: "The support group was powerful", Speaker: "Caroline", Context: "I went yesterday", Date: "8 May 2023"},
		{Text: "I went to a support group yesterday", Speaker: "Caroline", Date: "8 May 2023"},
		{Text: "my kids love painting", Speaker: "Melanie", Date: "9 May 2023"},
	}
	ix := build(DefaultParams(), docs...)
	res := ix.Search("When did Caroline go to the support group?", nil, 3)
	if len(res) < 2 || res[0].Doc != 2 {
		t.Fatalf("results %+v, want doc 2 first", res)
	}
	if !strings.Contains(res[0].Explain, "support") || !strings.Contains(res[0].Explain, "speaker named") || !strings.Contains(res[0].Explain, "time cue") {
		t.Fatalf("explain lacks terms or boosts: %s", res[0].Explain)
	}
	// The allow mask restricts results and statistics.
	allow := []bool{true, false, false, true}
	res = ix.Search("support group painting", allow, 10)
	for _, r := range res {
		if !allow[r.Doc] {
			t.Fatalf("disallowed doc %d returned", r.Doc)
		}
	}
	if ix.Search("", nil, 5) != nil || ix.Search("zzz", nil, 5) != nil {
		t.Fatal("empty or unknown query returned results")
	}
	// Stemming: "painted" finds "painting" only with the default analyzer.
	if r := build(PlainBM25(), docs...).Search("paints", nil, 5); len(r) != 0 {
		t.Fatalf("plain BM25 stemmed: %+v", r)
	}
	if r := ix.Search("paints", nil, 5); len(r) != 2 {
		t.Fatalf("stemmed search = %+v, want the two painting docs", r)
	}
}

func TestPRFAddsTerms(t *testing.T) {
	p := DefaultParams()
	p.PRFDocs, p.PRFTerms, p.PRFWeight = 2, 3, 0.5
	ix := build(p,
		Doc{Text: "fig tree rust leaves copper"},
		Doc{Text: "fig tree rust copper spray"},
		Doc{Text: "copper spray works on leaves"},
		Doc{Text: "unrelated tomato"})
	res := ix.Search("fig rust", nil, 5)
	found := false
	for _, r := range res {
		found = found || r.Doc == 2
	}
	if !found || !strings.Contains(res[0].Explain, "query weight") {
		t.Fatalf("feedback did not expand: %+v", res)
	}
}

func fakeEmbedServer(t *testing.T, ollama bool) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
			http.Error(w, "bad request", 400)
			return
		}
		vec := func(s string) []float32 {
			v := make([]float32, 3)
			for _, w := range strings.Fields(strings.ToLower(s)) {
				switch {
				case strings.HasPrefix(w, "aphid"), strings.HasPrefix(w, "insect"), strings.HasPrefix(w, "bug"):
					v[0]++
				case strings.HasPrefix(w, "water"):
					v[1]++
				default:
					v[2] += 0.1
				}
			}
			return v
		}
		if ollama {
			if r.URL.Path != "/api/embed" {
				http.NotFound(w, r)
				return
			}
			var out [][]float32
			for _, s := range req.Input {
				out = append(out, vec(s))
			}
			json.NewEncoder(w).Encode(map[string]any{"embeddings": out})
			return
		}
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "unauthorized", 401)
			return
		}
		var data []map[string]any
		for i := len(req.Input) - 1; i >= 0; i-- { // out of order on purpose
			data = append(data, map[string]any{"index": i, "embedding": vec(req.Input[i])})
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
}

func TestHTTPEmbedder(t *testing.T) {
	for _, ollama := range []bool{false, true} {
		srv := fakeEmbedServer(t, ollama)
		e := &HTTPEmbedder{BaseURL: srv.URL + "/v1", Model: "m", APIKey: "k", Ollama: ollama}
		got, err := e.Embed(context.Background(), []string{"aphids", "water"})
		if err != nil || len(got) != 2 || got[0][0] != 1 || got[1][1] != 1 {
			t.Fatalf("ollama=%v: %v, %v", ollama, got, err)
		}
		srv.Close()
	}
	srv := fakeEmbedServer(t, false)
	defer srv.Close()
	if _, err := (&HTTPEmbedder{BaseURL: srv.URL + "/v1", Model: "m"}).Embed(context.Background(), []string{"x"}); err == nil {
		t.Fatal("401 not reported")
	}
}

func TestFuseRRF(t *testing.T) {
	got := FuseRRF([]string{"a", "b"}, []int{1, 2, 3}, []int{3, 1})
	if got[0].Doc != 1 || got[1].Doc != 3 || got[2].Doc != 2 || !strings.Contains(got[0].Explain, "a rank 1 + b rank 2") {
		t.Fatalf("%+v", got)
	}
	if Cosine([]float32{1, 0}, []float32{1, 0}) != 1 || Cosine([]float32{1}, []float32{1, 2}) != 0 {
		t.Fatal("cosine")
	}
}

func TestGroupPrior(t *testing.T) {
	ix := build(DefaultParams(),
		Doc{Text: "we adopted a puppy", Group: "s1"},
		Doc{Text: "the puppy is a beagle named Rex", Group: "s1"},
		Doc{Text: "a beagle at the park", Group: "s2"})
	res := ix.Search("puppy beagle", nil, 3)
	if len(res) != 3 || res[0].Doc != 1 || !strings.Contains(res[0].Explain, "session prior") {
		t.Fatalf("%+v", res)
	}
	if strings.Contains(res[2].Explain, "session prior") {
		t.Fatalf("a lone document got a session prior: %s", res[2].Explain)
	}
}

// TestHasTimeExpressionSameAsTokens: HasTimeExpression, which scans the
// tokens without keeping them, answers as the rule over Tokenize's slice.
func TestHasTimeExpressionSameAsTokens(t *testing.T) {
	ref := func(text string) bool {
		toks := Tokenize(text)
		for i, tok := range toks {
			if timeWords[tok] || (tok == "last" || tok == "next" || tok == "this") && i+1 < len(toks) && timeUnits[toks[i+1]] ||
				len(tok) == 4 && (strings.HasPrefix(tok, "19") || strings.HasPrefix(tok, "20")) && tok[2] >= '0' && tok[2] <= '9' && tok[3] >= '0' && tok[3] <= '9' {
				return true
			}
		}
		return koreanTime.MatchString(text)
	}
	texts := []string{"", "I went there yesterday", "I like figs", "Last WEEK we met", "this, month", "next... year!",
		"last", "the last one", "in 2023", "in 20x3", "2150 people", "1999", "19999", "THIS Year", "지난주에", "2023년",
		"Ünïcode this week", "thisweek", "last\nmonth", "a this b month"}
	for _, text := range texts {
		if got, want := HasTimeExpression(text), ref(text); got != want {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
	}
}
