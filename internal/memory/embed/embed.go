// Package embed builds the memory embedders of hybrid search (SPEC §4.6)
// from a model reference "<provider>/<model>":
//
//   - openai/<model>: an OpenAI-compatible POST {base}/embeddings
//     (search.HTTPEmbedder; OpenAI, vLLM, LM Studio, llama.cpp);
//   - ollama/<model>: Ollama's POST {base}/api/embed;
//   - bedrock/<model>: Amazon Titan Text Embeddings through Bedrock
//     InvokeModel (amazon.titan-embed-text-v2:0, v1 too), one call per text
//     (Titan embeds one inputText per request).
//
// Every embedder satisfies search.Embedder, which is what the memory
// stores (sqlitestore.Options.Embedder, pgstore) take.
package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/tendrilai/tendril/internal/awsbody"
	"github.com/tendrilai/tendril/internal/memory/search"
)

// Options are the provider endpoints and credentials of New. Empty fields
// take the providers' defaults.
type Options struct {
	OpenAIBaseURL string // https://api.openai.com/v1
	OpenAIAPIKey  string
	OllamaBaseURL string // http://127.0.0.1:11434
	// Bedrock: region and endpoint override (e.g. a test fake); credentials
	// otherwise come from the AWS standard chain.
	AWSRegion       string
	BedrockEndpoint string
	AWSCredentials  aws.CredentialsProvider
	HTTPClient      *http.Client // default: 30 s timeout
}

// ErrUnknownProvider is returned by New for a reference whose provider is
// not openai, ollama or bedrock.
var ErrUnknownProvider = errors.New("embed: unknown embedding provider")

// Model is an embedder built by New with the reference it was built
// from. The memory stores tag every stored vector with ModelID, so a
// changed model re-embeds instead of mixing vectors of two models.
type Model struct {
	search.Embedder
	Ref string // "<provider>/<model>", as given to New
}

// ModelID returns m.Ref.
func (m Model) ModelID() string { return m.Ref }

// New returns the embedder named by ref ("openai/text-embedding-3-small",
// "ollama/nomic-embed-text", "bedrock/amazon.titan-embed-text-v2:0") as a
// Model, or nil and no error when ref is empty (no embedder: BM25F only).
//
// Errors: a reference without "/" or with an empty model, ErrUnknownProvider,
// and for bedrock an AWS configuration that cannot be loaded.
func New(ctx context.Context, ref string, o Options) (search.Embedder, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return nil, nil
	}
	e, err := newEmbedder(ctx, ref, o)
	if err != nil {
		return nil, err
	}
	return Model{Embedder: e, Ref: ref}, nil
}

func newEmbedder(ctx context.Context, ref string, o Options) (search.Embedder, error) {
	provider, model, ok := strings.Cut(ref, "/")
	if !ok || model == "" {
		return nil, fmt.Errorf("embed: model reference %q: want <provider>/<model>", ref)
	}
	client := o.HTTPClient
	if client == nil {
		client = search.DefaultEmbedClient
	}
	switch provider {
	case "openai":
		base := o.OpenAIBaseURL
		if base == "" {
			base = "https://api.openai.com/v1"
		}
		return &search.HTTPEmbedder{BaseURL: base, Model: model, APIKey: o.OpenAIAPIKey, Client: client}, nil
	case "ollama":
		base := o.OllamaBaseURL
		if base == "" {
			base = "http://127.0.0.1:11434"
		}
		return &search.HTTPEmbedder{BaseURL: base, Model: model, Ollama: true, Client: client}, nil
	case "bedrock":
		t, err := NewTitan(ctx, model, o)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	return nil, fmt.Errorf("%w %q in %q (want openai, ollama or bedrock)", ErrUnknownProvider, provider, ref)
}

// Titan embeds with Amazon Titan Text Embeddings on Bedrock: InvokeModel
// with body {"inputText": …} (v2 adds "normalize": true) and response
// {"embedding": [float…], "inputTextTokenCount": n}.
type Titan struct {
	client *bedrockruntime.Client
	model  string
}

// NewTitan returns a Titan embedder for model (e.g.
// amazon.titan-embed-text-v2:0). The AWS configuration is loaded from the
// environment and local files only (no network).
func NewTitan(ctx context.Context, model string, o Options) (*Titan, error) {
	load := []func(*awsconfig.LoadOptions) error{}
	if o.AWSRegion != "" {
		load = append(load, awsconfig.WithRegion(o.AWSRegion))
	}
	if o.AWSCredentials != nil {
		load = append(load, awsconfig.WithCredentialsProvider(o.AWSCredentials))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("embed: load AWS config: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := bedrockruntime.NewFromConfig(cfg, func(bo *bedrockruntime.Options) {
		if o.HTTPClient != nil {
			bo.HTTPClient = o.HTTPClient
		}
		// See package awsbody: without it a response can die mid-read.
		bo.HTTPClient = awsbody.Guard(bo.HTTPClient)
		if o.BedrockEndpoint != "" {
			bo.BaseEndpoint = aws.String(o.BedrockEndpoint)
		}
	})
	return &Titan{client: client, model: model}, nil
}

// Embed implements search.Embedder: one InvokeModel per text, in order.
// Errors: the SDK's (HTTP status, throttling), a response without an
// embedding, ctx's.
func (t *Titan) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for i, text := range texts {
		req := map[string]any{"inputText": text}
		if strings.Contains(t.model, "-v2") {
			req["normalize"] = true
		}
		body, _ := json.Marshal(req)
		resp, err := t.client.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{
			ModelId: aws.String(t.model), Body: body,
			ContentType: aws.String("application/json"), Accept: aws.String("application/json"),
		})
		if err != nil {
			return nil, fmt.Errorf("embed: bedrock %s: %w", t.model, err)
		}
		var r struct {
			Embedding []float32 `json:"embedding"`
		}
		if err := json.Unmarshal(resp.Body, &r); err != nil {
			return nil, fmt.Errorf("embed: bedrock %s: bad response: %w", t.model, err)
		}
		if len(r.Embedding) == 0 {
			return nil, fmt.Errorf("embed: bedrock %s: empty embedding for input %d", t.model, i)
		}
		out = append(out, r.Embedding)
	}
	return out, nil
}
