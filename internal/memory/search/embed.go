package search

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Embedder turns texts into vectors. Implementations must return one
// vector per text, in order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// HTTPEmbedder calls an OpenAI-compatible POST {BaseURL}/embeddings
// (OpenAI, vLLM, LM Studio, llama.cpp; request {"model","input":[…]},
// response {"data":[{"index","embedding"}]}) or, with Ollama set, Ollama's
// POST {BaseURL}/api/embed ({"model","input"} → {"embeddings":[[…]]}).
type HTTPEmbedder struct {
	BaseURL string // e.g. https://api.openai.com/v1 or http://127.0.0.1:11434
	Model   string
	APIKey  string // sent as "Authorization: Bearer"; optional
	Ollama  bool
	Client  *http.Client // default: DefaultEmbedClient
}

// DefaultEmbedClient is the HTTP client an HTTPEmbedder without its own
// uses: a 30 s timeout per call and up to 64 idle keep-alive connections
// per host (net/http's default of 2 would redial for every concurrent
// embedding call past the second).
var DefaultEmbedClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Timeout: 30 * time.Second, Transport: t}
}()

// Embed implements Embedder.
func (e *HTTPEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	url := strings.TrimRight(e.BaseURL, "/") + "/embeddings"
	if e.Ollama {
		url = strings.TrimRight(strings.TrimSuffix(strings.TrimRight(e.BaseURL, "/"), "/v1"), "/") + "/api/embed"
	}
	body, _ := json.Marshal(map[string]any{"model": e.Model, "input": texts})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	c := e.Client
	if c == nil {
		c = DefaultEmbedClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("embed: %s: %s", resp.Status, strings.TrimSpace(string(data[:min(len(data), 300)])))
	}
	var out [][]float32
	if e.Ollama {
		var r struct {
			Embeddings [][]float32 `json:"embeddings"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("embed: bad response: %w", err)
		}
		out = r.Embeddings
	} else {
		var r struct {
			Data []struct {
				Index     int       `json:"index"`
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("embed: bad response: %w", err)
		}
		out = make([][]float32, len(texts))
		for _, d := range r.Data {
			if d.Index < 0 || d.Index >= len(out) {
				return nil, fmt.Errorf("embed: response index %d out of range", d.Index)
			}
			out[d.Index] = d.Embedding
		}
	}
	if len(out) != len(texts) {
		return nil, fmt.Errorf("embed: %d vectors for %d texts", len(out), len(texts))
	}
	for i, v := range out {
		if len(v) == 0 {
			return nil, fmt.Errorf("embed: empty vector for input %d", i)
		}
	}
	return out, nil
}

// Cosine is the cosine similarity of a and b (0 when lengths differ or a
// vector is zero).
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// RRFK is the reciprocal rank fusion constant (Cormack et al., 2009).
const RRFK = 60

// Fused is one fused result.
type Fused struct {
	Doc     int
	Score   float64
	Explain string
}

// FuseRRF fuses ranked lists of documents (best first) by reciprocal rank
// fusion: score = Σ 1/(RRFK + rank). names label the lists in Explain. Ties
// keep the lower document number first.
func FuseRRF(names []string, lists ...[]int) []Fused {
	score := map[int]float64{}
	why := map[int][]string{}
	for li, l := range lists {
		for r, d := range l {
			score[d] += 1 / float64(RRFK+r+1)
			why[d] = append(why[d], fmt.Sprintf("%s rank %d", names[li], r+1))
		}
	}
	out := make([]Fused, 0, len(score))
	for d, s := range score {
		out = append(out, Fused{Doc: d, Score: s, Explain: fmt.Sprintf("rrf(k=%d) %.5f = %s", RRFK, s, strings.Join(why[d], " + "))})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Doc < out[j].Doc
	})
	return out
}
