package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/runtime"
)

func init() {
	register(newServeCmd)
	register(newInvokeCmd)
	register(newChatCmd)
}

func newServeCmd(g *globals) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the assistant: HTTP API, Telegram webhook, scheduler and background workers",
		Long: `Serve starts one Tendril process. It listens on 127.0.0.1:8080 by default
(--addr or TENDRIL_ADDR) and serves:

  GET  /ping               health: Healthy or HealthyBusy
  POST /invocations        one turn (JSON, or SSE with Accept: text/event-stream)
  GET  /metrics            Prometheus metrics
  /api/...                 management API (bearer token when TENDRIL_AUTH_TOKEN is set)
  POST /telegram/webhook   Telegram updates, when TELEGRAM_BOT_TOKEN and
                           TELEGRAM_WEBHOOK_SECRET are set

With no model configured the server still starts, and every turn answers
MODEL_NOT_CONFIGURED naming the variables to set. Binding a non-loopback
address requires TENDRIL_AUTH_TOKEN. SIGTERM or SIGINT stops accepting new
work and lets in-flight turns finish within shutdownGrace (30s).

Example:
  MODEL_ID=ollama/llama3.2 tendril serve
  ANTHROPIC_API_KEY=... MODEL_ID=anthropic/claude-haiku-4-5 tendril serve --addr 127.0.0.1:9000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			if addr != "" {
				cfg.Addr = addr
			}
			log := newLogger(os.Stderr, slog.LevelInfo)
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return serve(ctx, cfg, log)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "listen address host:port (default 127.0.0.1:8080, env TENDRIL_ADDR)")
	return cmd
}

func newInvokeCmd(g *globals) *cobra.Command {
	var actor, session, channel string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   `invoke message...`,
		Short: "Run one turn in-process and print the reply (script-friendly)",
		Long: `Invoke runs a single turn without starting the server, using the same stores
as "tendril serve", and prints the reply on stdout. With --json it prints the
same JSON body as POST /invocations. Exit status is 1 when the turn fails
(for example MODEL_NOT_CONFIGURED).

Example:
  tendril invoke "what should I plant in March?" --actor cli:me --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := g.openQuietApp(cmd.Context())
			if err != nil {
				return err
			}
			defer a.Close()
			res, err := a.agent.Invoke(cmd.Context(), agent.Request{Message: strings.Join(args, " "), ActorID: actor, SessionID: session, Channel: channel, InvocationType: "api"})
			out := cmd.OutOrStdout()
			if asJSON {
				body := runtime.ResponseBody(res, err)
				b, _ := json.Marshal(body)
				fmt.Fprintln(out, string(b))
				if err != nil {
					return silentErr{err}
				}
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", agent.ErrorCode(err), err)
			}
			fmt.Fprintln(out, res.Text)
			if res.PendingApproval != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "approval pending: tendril approvals approve %s\n", res.PendingApproval.RequestID)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "cli:local", "actor ID the turn belongs to")
	cmd.Flags().StringVar(&session, "session", "", "session ID (default: derived from the actor)")
	cmd.Flags().StringVar(&channel, "channel", "cli", "channel name recorded on the session")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the /invocations JSON body")
	return cmd
}

// silentErr fails the command (exit 1) without printing again.
type silentErr struct{ err error }

func (e silentErr) Error() string { return e.err.Error() }

func newChatCmd(g *globals) *cobra.Command {
	var actor, session string
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Chat with the assistant in the terminal",
		Long: `Chat opens an interactive conversation in the terminal, in-process, with the
same memory, sessions and tools as the server. Type a message and press Enter.
Commands: /help, /quit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := g.openQuietApp(cmd.Context())
			if err != nil {
				return err
			}
			defer a.Close()
			in := bufio.NewScanner(cmd.InOrStdin())
			in.Buffer(make([]byte, 64<<10), 1<<20)
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "Tendril chat. /help for commands, /quit to leave.")
			for {
				fmt.Fprint(out, "> ")
				if !in.Scan() {
					fmt.Fprintln(out)
					return in.Err()
				}
				line := strings.TrimSpace(in.Text())
				if line == "" {
					continue
				}
				if line == "/quit" || line == "/exit" {
					return nil
				}
				if line == "/help" {
					fmt.Fprintln(out, "Type a message and press Enter. /quit leaves. Memory, sessions and approvals are the server's: see `tendril --help`.")
					continue
				}
				res, err := a.agent.Invoke(cmd.Context(), agent.Request{Message: line, ActorID: actor, SessionID: session, Channel: "cli"})
				if err != nil {
					fmt.Fprintf(out, "[%s] %v\n", agent.ErrorCode(err), err)
					continue
				}
				fmt.Fprintln(out, res.Text)
			}
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "cli:local", "actor ID")
	cmd.Flags().StringVar(&session, "session", "", "session ID (default: derived from the actor)")
	return cmd
}

// openQuietApp wires the app for in-process commands (invoke, chat),
// logging warnings and errors only.
func (g *globals) openQuietApp(ctx context.Context) (*app, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	// Turns need the home to themselves, like serve: two writers would
	// fork conversations and diverge the memory index.
	release, err := lockHome(cfg.Home)
	if err != nil {
		return nil, fmt.Errorf("%w; talk to the running server instead: POST /invocations", err)
	}
	a, err := openApp(ctx, cfg, newLogger(os.Stderr, slog.LevelWarn))
	if err != nil {
		release()
		return nil, err
	}
	a.closers = append([]func() error{func() error { release(); return nil }}, a.closers...)
	return a, nil
}

// serve runs the server until ctx ends (SIGTERM/SIGINT), then shuts down
// gracefully.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	release, err := lockHome(cfg.Home)
	if err != nil {
		return err
	}
	defer release()
	a, err := openApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	srv, err := runtime.New(runtime.Options{
		Addr: cfg.Addr, AuthToken: cfg.AuthToken, MaxBodyBytes: cfg.MaxBodyBytes,
		ShutdownGrace: cfg.ShutdownGrace.D(), Invoker: a.agent, Tracker: a.tracker,
		Metrics: a.metrics, Logger: log, Ready: a.ready,
	})
	if err != nil {
		return err
	}
	if err := a.mount(srv); err != nil {
		return err
	}
	l, err := srv.Listen()
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	var stops []func()
	bg, cancelBG := context.WithCancel(context.Background())
	defer cancelBG()
	for _, start := range a.starters {
		stop, err := start(bg)
		if err != nil {
			l.Close()
			return err
		}
		stops = append(stops, stop)
	}
	if a.modelErr != nil {
		log.Warn("no model configured: turns will answer MODEL_NOT_CONFIGURED", "hint", a.modelErr.Error())
	}
	log.Info("tendril serving", "addr", l.Addr().String(), "home", cfg.Home, "model", cfg.Model.ID, "vision_model", cfg.Model.VisionID)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: no new work accepted, waiting for in-flight turns", "grace", cfg.ShutdownGrace.D().String())
	shutErr := srv.Shutdown(context.Background())
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if shutErr != nil {
		return fmt.Errorf("shutdown: %w", shutErr)
	}
	log.Info("stopped")
	return nil
}
