package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/mgmt"
	"github.com/tendrilai/tendril/internal/runtime"
	"github.com/tendrilai/tendril/internal/web/dashboard"
)

// conn is one CLI command's way to the application: the running server's
// socket, or an in-process Assistant when no server runs. Both answer the
// same management API.
type conn struct {
	*mgmt.Client
	local *assistant.Assistant // nil when a server answers
	sock  string               // the server's socket, when one answers
	close func()
}

// connect reaches the server on this home, or opens the stores itself
// (holding the home lock so no server starts beside it). With host, an
// in-process assistant also runs its approval watcher and serves the
// socket, so other commands (approvals approve) reach it.
func (g *globals) connect(ctx context.Context, host bool) (*conn, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(cfg.Home, mgmt.SocketName)
	if cl, err := mgmt.DialSocket(ctx, sock); err == nil {
		return &conn{Client: cl, sock: sock, close: func() {}}, nil
	}
	if cfg.DatabaseURL != "" && !host {
		// Every store is in the database, shared with any running
		// instance: open it in-process beside them, no home lock needed.
		c, _, err := openLocal(ctx, cfg, false, func() {})
		return c, err
	}
	release, err := lockHome(cfg.Home)
	for i := 0; err != nil && i < 300; i++ {
		// Held, but the socket did not answer: a server is starting or
		// stopping, or another command runs without a server; wait for
		// either (up to a minute).
		if i == 10 {
			fmt.Fprintln(os.Stderr, "tendril: waiting for another tendril process to release", cfg.Home)
		}
		time.Sleep(200 * time.Millisecond)
		if cl, derr := mgmt.DialSocket(ctx, sock); derr == nil {
			return &conn{Client: cl, sock: sock, close: func() {}}, nil
		}
		release, err = lockHome(cfg.Home)
	}
	if err != nil {
		return nil, fmt.Errorf("%s is held by another tendril process that does not answer on %s: %w", cfg.Home, sock, err)
	}
	c, srv, err := openLocal(ctx, cfg, true, release)
	if err != nil {
		return nil, err
	}
	a := c.local
	if host {
		if err := a.Start(ctx, assistant.StartOptions{}); err != nil {
			c.close()
			return nil, err
		}
		l, err := listenSocket(sock)
		if err != nil {
			c.close()
			return nil, err
		}
		go srv.ServeLocal(l)
		c.close = func() { srv.Shutdown(context.Background()); a.Close(); release() }
	}
	return c, nil
}

// openLocal opens the stores in-process and answers the management API
// through them; release runs after the assistant closes (or on failure).
// Without a server the command's own errors are its output: only errors
// are logged, so a failure stays one line.
func openLocal(ctx context.Context, cfg *config.Config, owner bool, release func()) (*conn, *runtime.Server, error) {
	log := newLogger(os.Stderr, slog.LevelError)
	tr := runtime.NewTracker(nil)
	a, err := assistant.Open(ctx, cfg, assistant.Options{Logger: log, Owner: owner, Busy: tr})
	if err != nil {
		release()
		return nil, nil, err
	}
	srv, err := newServer(a, tr, "127.0.0.1:0", log, nil)
	if err != nil {
		a.Close()
		release()
		return nil, nil, err
	}
	return &conn{Client: mgmt.InProcess(srv.LocalHandler()), local: a, close: func() { a.Close(); release() }}, srv, nil
}

// noServerNote says when work handed to the background happens, for a
// command that ran in-process: with a database, any running instance
// picks it up now; without one, the next `tendril serve` on this home.
func (c *conn) noServerNote(what string) string {
	if c.local != nil && c.local.Config().DatabaseURL != "" {
		return "note: " + what + " on whichever `tendril serve` instance on this database takes it (now, if one runs)"
	}
	return "no server is running: " + what + " when `tendril serve` starts"
}

// listenSocket opens the management socket, replacing a stale file (the
// caller holds the home lock, so no live server owns it).
func listenSocket(path string) (net.Listener, error) {
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("management socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// newServer builds the HTTP runtime over a with the management API and
// the Telegram webhook mounted.
//
// logs, when set, is the recent log the dashboard's settings page tails.
func newServer(a *assistant.Assistant, tr *runtime.Tracker, addr string, log *slog.Logger, logs *dashboard.LogBuffer) (*runtime.Server, error) {
	cfg := a.Config()
	srv, err := runtime.New(withRuntimeMode(a, runtime.Options{
		Addr: addr, AuthToken: cfg.AuthToken, MaxBodyBytes: cfg.MaxBodyBytes,
		ShutdownGrace: cfg.ShutdownGrace.D(), Invoker: a, Metrics: a.Metrics(), Logger: log,
		Tracker: tr,
	}))
	if err != nil {
		return nil, err
	}
	srv.Mount(mgmt.Prefix+"/", mgmt.Handler(a), true)
	srv.MountSelfAuth("/", dashboard.Handler(a, dashboard.Options{AuthToken: cfg.AuthToken, Logger: log, Logs: logs,
		Tools: func(ctx context.Context) ([]dashboard.ToolInfo, error) {
			var out []dashboard.ToolInfo
			for _, t := range a.Tools(ctx) {
				server, _, ok := strings.Cut(t.Name(), "__")
				if !ok {
					server = ""
				}
				out = append(out, dashboard.ToolInfo{Name: t.Name(), Description: t.Description(), Class: t.Class(), Server: server})
			}
			return out, nil
		}}))
	if tg := a.Telegram(); tg != nil {
		// The webhook authenticates with its own secret header.
		srv.Mount("POST /telegram/webhook", tg.Handler(), false)
	}
	return srv, nil
}

// with runs fn with a connection and maps API errors to exit statuses:
// 400 is bad usage (2), anything else a failure (1).
func (g *globals) with(c *cobra.Command, fn func(ctx context.Context, cn *conn) error) error {
	cn, err := g.connect(c.Context(), false)
	if err != nil {
		return err
	}
	defer cn.close()
	err = fn(c.Context(), cn)
	var e *mgmt.Error
	if errors.As(err, &e) && e.Status == http.StatusBadRequest {
		return usageError{err}
	}
	return err
}

// emit prints v as JSON with --json, else runs text.
func emit(c *cobra.Command, asJSON bool, v any, text func(w io.Writer) error) error {
	if asJSON {
		return writeJSON(c.OutOrStdout(), v)
	}
	return text(c.OutOrStdout())
}

// call runs one management API call and renders its result: JSON with
// asJSON, else text. It is the whole body of most commands.
func call[T any](g *globals, c *cobra.Command, asJSON bool, method, path string, q url.Values, body any, text func(w io.Writer, v T) error) error {
	return g.with(c, func(ctx context.Context, cn *conn) error {
		var v T
		if err := cn.API(ctx, method, path, q, body, &v); err != nil {
			return err
		}
		return emit(c, asJSON, v, func(w io.Writer) error { return text(w, v) })
	})
}
