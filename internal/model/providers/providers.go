// Package providers builds the concrete model.Provider for each provider
// prefix and the model.Router over them. It is the only package that
// imports all three SDKs; package model stays free of them.
package providers

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/anthropic"
	"github.com/tendrilai/tendril/internal/model/bedrock"
	"github.com/tendrilai/tendril/internal/model/openai"
)

// Known lists the provider prefixes Open understands.
var Known = []string{anthropic.Name, bedrock.Name, openai.Name, openai.OllamaName}

// Options carries provider credentials and endpoints (config.ProvidersConfig
// after environment overrides). Empty fields take each provider's default;
// Bedrock also reads the AWS standard chain.
type Options struct {
	AnthropicAPIKey  string // ANTHROPIC_API_KEY
	AnthropicBaseURL string // ANTHROPIC_BASE_URL; default https://api.anthropic.com/
	OpenAIAPIKey     string // OPENAI_API_KEY
	OpenAIBaseURL    string // OPENAI_BASE_URL; default https://api.openai.com/v1
	OllamaBaseURL    string // OLLAMA_BASE_URL; default http://127.0.0.1:11434/v1
	AWSRegion        string // AWS_REGION; default from the AWS chain, else us-east-1
	BedrockEndpoint  string // AWS_ENDPOINT_URL_BEDROCK_RUNTIME
	HTTPClient       *http.Client
}

// Open returns the Provider for a prefix ("anthropic", "bedrock", "openai",
// "ollama"). It makes no network call. Errors: an unknown prefix, or a
// provider whose public endpoint needs a key that is not set (a custom base
// URL may go without one: gateways, vLLM, fakes).
func Open(ctx context.Context, name string, o Options) (model.Provider, error) {
	switch name {
	case anthropic.Name:
		if o.AnthropicAPIKey == "" && o.AnthropicBaseURL == "" {
			return nil, fmt.Errorf("provider anthropic: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a gateway)")
		}
		return anthropic.New(anthropic.Options{APIKey: o.AnthropicAPIKey, BaseURL: o.AnthropicBaseURL, HTTPClient: o.HTTPClient}), nil
	case openai.Name:
		if o.OpenAIAPIKey == "" && o.OpenAIBaseURL == "" {
			return nil, fmt.Errorf("provider openai: set OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible server)")
		}
		return openai.New(openai.Options{Name: openai.Name, APIKey: o.OpenAIAPIKey, BaseURL: o.OpenAIBaseURL, HTTPClient: o.HTTPClient}), nil
	case openai.OllamaName:
		return openai.New(openai.Options{Name: openai.OllamaName, BaseURL: o.OllamaBaseURL, HTTPClient: o.HTTPClient}), nil
	case bedrock.Name:
		return bedrock.New(ctx, bedrock.Options{Region: o.AWSRegion, Endpoint: o.BedrockEndpoint, HTTPClient: o.HTTPClient})
	}
	return nil, fmt.Errorf("unknown model provider %q (known: anthropic, bedrock, openai, ollama)", name)
}

// NewRouter opens the providers named by ro.TextRef, ro.VisionRef and
// ro.Fallbacks (each once) into ro.Providers and returns model.NewRouter(ro).
// Providers already in ro.Providers are kept, so tests can inject one. An
// empty TextRef gives an unconfigured Router (every turn ErrNotConfigured),
// not an error.
func NewRouter(ctx context.Context, ro model.RouterOptions, o Options) (*model.Router, error) {
	provs := make(map[string]model.Provider, len(ro.Providers)+1)
	for k, v := range ro.Providers {
		provs[k] = v
	}
	if ro.TextRef != "" {
		refs := append([]string{ro.TextRef, ro.VisionRef}, ro.Fallbacks...)
		for _, ref := range refs {
			if ref == "" {
				continue
			}
			name, _, err := model.ParseRef(ref)
			if err != nil {
				return nil, err
			}
			if _, ok := provs[name]; ok {
				continue
			}
			p, err := Open(ctx, name, o)
			if err != nil {
				return nil, fmt.Errorf("model %s: %w", ref, err)
			}
			provs[name] = p
		}
	}
	ro.Providers = provs
	return model.NewRouter(ro)
}
