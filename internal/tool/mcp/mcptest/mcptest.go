// Package mcptest is an in-repo MCP server, built with the official Go SDK,
// for testing Tendril's MCP client over stdio and streamable HTTP.
//
// Its tools:
//
//	echo    {text}           → text
//	add     {a, b}           → the sum, as text and structured content
//	pid     {}               → the server's process ID (to prove restarts)
//	count   {}               → how many times count ran in this process
//	fail    {message}        → an error result (isError) with message
//	sleep   {ms}             → waits ms milliseconds or until cancelled
//	get.file/v2 {path}       → "file:<path>" (a name that needs sanitising)
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvStdio, set to "1", makes RunIfStdioChild serve over stdio and exit.
const EnvStdio = "TENDRIL_MCPTEST_STDIO"

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

type failIn struct {
	Message string `json:"message"`
}

type sleepIn struct {
	Ms int `json:"ms"`
}

type pathIn struct {
	Path string `json:"path"`
}

// NewServer returns a fresh server with the tools above. Each server has
// its own count.
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tendril-mcptest", Version: "v1.0.0"}, nil)
	var count atomic.Int64
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process ID."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "Count calls in this process."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return text(strconv.FormatInt(count.Add(1), 10)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, _ *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New(in.Message)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep for ms milliseconds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
				return text("slept"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "get.file/v2", Description: "A tool name with characters models refuse."},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, any, error) {
			return text("file:" + in.Path), nil, nil
		})
	return s
}

// ServeStdio serves a new server over stdin/stdout until the client
// disconnects or ctx ends.
func ServeStdio(ctx context.Context) error {
	return NewServer().Run(ctx, &mcp.StdioTransport{})
}

// RunIfStdioChild serves over stdio and exits when EnvStdio is "1". Call it
// from TestMain so that tests can start the test binary itself as a stdio
// MCP server (Command: os.Args[0], Env: {EnvStdio: "1"}).
func RunIfStdioChild() {
	if os.Getenv(EnvStdio) != "1" {
		return
	}
	if err := ServeStdio(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// NewHTTPHandler serves one shared server over the streamable HTTP
// transport.
func NewHTTPHandler() http.Handler {
	s := NewServer()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}
