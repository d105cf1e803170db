package mcp_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/tendrilai/tendril/internal/tool"
	"github.com/tendrilai/tendril/internal/tool/mcp"
	"github.com/tendrilai/tendril/internal/tool/mcp/mcptest"
)

// BenchmarkCall measures one MCP tool call (echo) through the manager,
// over stdio (a child process) and streamable HTTP (loopback).
func BenchmarkCall(b *testing.B) {
	srv := httptest.NewServer(mcptest.NewHTTPHandler())
	defer srv.Close()
	for _, tc := range []struct {
		name string
		cfg  mcp.ServerConfig
	}{
		{"stdio", stdioConfig()},
		{"http", mcp.ServerConfig{URL: srv.URL}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := mcp.NewManager(map[string]mcp.ServerConfig{"s": tc.cfg}, nil)
			defer m.Close()
			tools, err := m.Tools(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			var echo tool.Tool
			for _, t := range tools {
				if t.Name() == "s__echo" {
					echo = t
				}
			}
			call := tool.Call{Args: json.RawMessage(`{"text":"hi"}`)}
			for b.Loop() {
				if _, err := echo.Run(context.Background(), call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("tools-cached", func(b *testing.B) {
		m := mcp.NewManager(map[string]mcp.ServerConfig{"s": stdioConfig()}, nil)
		defer m.Close()
		for b.Loop() {
			if _, err := m.Tools(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
