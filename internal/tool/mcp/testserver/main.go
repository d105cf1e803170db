// Command testserver runs Tendril's test MCP server (package mcptest) over
// stdio, or over streamable HTTP with -http. Use it to try MCP in
// tendril.json:
//
//	"mcpServers": {"test": {"command": "go", "args": ["run", "./internal/tool/mcp/testserver"]}}
//	"mcpServers": {"test": {"url": "http://127.0.0.1:8931/mcp"}}   // with -http 127.0.0.1:8931
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"

	"github.com/tendrilai/tendril/internal/tool/mcp/mcptest"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address at /mcp instead of stdio")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	if *addr != "" {
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcptest.NewHTTPHandler())
		srv := &http.Server{Addr: *addr, Handler: mux}
		go func() { <-ctx.Done(); srv.Close() }()
		fmt.Fprintf(os.Stderr, "mcptest: streamable HTTP on http://%s/mcp\n", *addr)
		if err = srv.ListenAndServe(); err == http.ErrServerClosed {
			err = nil
		}
	} else {
		err = mcptest.ServeStdio(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
}
