package providers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/tendrilai/tendril/internal/model"
)

// BenchmarkGenerate measures one text turn through Router + SDK provider
// against the wire fake ("sdk"), next to a raw net/http POST of the same
// request body to the same fake, decoded into map[string]any ("raw"). The
// difference is the provider marshalling, SDK and Router overhead (for
// Bedrock also SigV4 signing).
//
//	go test -run XXX -bench Generate -benchmem ./internal/model/providers/
func BenchmarkGenerate(b *testing.B) {
	req := &model.Request{
		System:   system,
		Messages: userText("My tomato leaves have yellow spots with brown rings. What should I do?"),
		Tools: []model.ToolDef{{Name: "watering_schedule", Description: "Look up how often to water a plant.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"plant":{"type":"string"}},"required":["plant"]}`)}},
	}
	for _, k := range kits(b) {
		if k.name == "ollama" {
			continue
		}
		r, _ := router(b, k, model.RouterOptions{})
		if _, err := r.Generate(context.Background(), req, false); err != nil {
			b.Fatal(err)
		}
		seen := k.srv.Requests()[0]
		url := k.srv.URL + seen.Path
		body := []byte(seen.Body)
		client := &http.Client{}
		b.Run(k.name+"/sdk", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Generate(context.Background(), req, false); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(k.name+"/raw", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				out, err := io.ReadAll(res.Body)
				res.Body.Close()
				var v map[string]any
				if err != nil || res.StatusCode != 200 || json.Unmarshal(out, &v) != nil {
					b.Fatalf("status %d: %s %v", res.StatusCode, out, err)
				}
			}
		})
	}
}
