package embed

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Each provider against a fake server speaking its wire format.
func TestProvidersWireFormats(t *testing.T) {
	var gotPath, gotAuth string
	var gotBody map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAuth = r.URL.Path, r.Header.Get("Authorization")
		gotBody = nil
		json.NewDecoder(r.Body).Decode(&gotBody)
		switch {
		case r.URL.Path == "/v1/embeddings": // OpenAI
			json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": "m", "data": []any{
				map[string]any{"object": "embedding", "index": 1, "embedding": []float32{0, 1}},
				map[string]any{"object": "embedding", "index": 0, "embedding": []float32{1, 0}}}})
		case r.URL.Path == "/api/embed": // Ollama
			json.NewEncoder(w).Encode(map[string]any{"model": "nomic-embed-text", "embeddings": [][]float32{{1, 0}, {0, 1}}})
		case strings.HasPrefix(r.URL.Path, "/model/"): // Bedrock InvokeModel
			if gotBody["inputText"] == "b" {
				json.NewEncoder(w).Encode(map[string]any{"embedding": []float32{0, 1}, "inputTextTokenCount": 1})
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"embedding": []float32{1, 0}, "inputTextTokenCount": 1})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	o := Options{OpenAIBaseURL: srv.URL + "/v1", OpenAIAPIKey: "sk-test", OllamaBaseURL: srv.URL, AWSRegion: "us-east-1",
		BedrockEndpoint: srv.URL, AWSCredentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
	for _, tc := range []struct{ ref, path, auth string }{
		{"openai/text-embedding-3-small", "/v1/embeddings", "Bearer sk-test"},
		{"ollama/nomic-embed-text", "/api/embed", ""},
		{"bedrock/amazon.titan-embed-text-v2:0", "/model/amazon.titan-embed-text-v2:0/invoke", "AWS4-HMAC-SHA256"},
	} {
		e, err := New(context.Background(), tc.ref, o)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := e.Embed(context.Background(), []string{"a", "b"})
		if err != nil {
			t.Fatalf("%s: %v", tc.ref, err)
		}
		if len(vs) != 2 || vs[0][0] != 1 || vs[1][1] != 1 {
			t.Fatalf("%s: vectors %v (want in input order)", tc.ref, vs)
		}
		if gotPath != tc.path || !strings.HasPrefix(gotAuth, tc.auth) {
			t.Fatalf("%s: path %q auth %q", tc.ref, gotPath, gotAuth)
		}
		if strings.HasPrefix(tc.ref, "bedrock") && gotBody["normalize"] != true {
			t.Fatalf("titan v2 body %v", gotBody)
		}
	}
}

func TestNewRejectsBadReferences(t *testing.T) {
	if e, err := New(context.Background(), "", Options{}); e != nil || err != nil {
		t.Fatalf("empty ref: %v %v", e, err)
	}
	if _, err := New(context.Background(), "cohere/embed", Options{}); !errors.Is(err, ErrUnknownProvider) {
		t.Fatalf("unknown provider: %v", err)
	}
	if _, err := New(context.Background(), "openai", Options{}); err == nil {
		t.Fatal("reference without a model accepted")
	}
}

// A failing server is an error, not a panic or a zero vector.
func TestFailingServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"ThrottlingException"}`, http.StatusTooManyRequests)
	}))
	defer srv.Close()
	o := Options{OpenAIBaseURL: srv.URL, OllamaBaseURL: srv.URL, AWSRegion: "us-east-1", BedrockEndpoint: srv.URL,
		AWSCredentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
	for _, ref := range []string{"openai/m", "ollama/m", "bedrock/amazon.titan-embed-text-v2:0"} {
		e, err := New(context.Background(), ref, o)
		if err != nil {
			t.Fatal(err)
		}
		if vs, err := e.Embed(context.Background(), []string{"x"}); err == nil {
			t.Fatalf("%s: no error, vectors %v", ref, vs)
		}
	}
}

// New names its embedder by the reference, the tag the memory stores keep
// with every vector.
func TestNewNamesTheModel(t *testing.T) {
	o := Options{AWSRegion: "us-east-1", AWSCredentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
	for _, ref := range []string{"openai/text-embedding-3-small", "ollama/nomic-embed-text", "bedrock/amazon.titan-embed-text-v2:0"} {
		e, err := New(context.Background(), " "+ref+" ", o)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := e.(interface{ ModelID() string })
		if !ok || m.ModelID() != ref {
			t.Fatalf("%s: embedder %T does not name its model (%v)", ref, e, ok)
		}
	}
}
