package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/mgmt"
	"github.com/tendrilai/tendril/internal/runtime"
	"github.com/tendrilai/tendril/internal/web/dashboard"
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
		Long: `Serve starts one Tendril process on 127.0.0.1:8080 (--addr or TENDRIL_ADDR):

  GET  /ping               health: Healthy or HealthyBusy
  POST /invocations        one turn (JSON, or SSE with Accept: text/event-stream)
  GET  /metrics            Prometheus metrics
  /api/v1/...              management API (bearer token when TENDRIL_AUTH_TOKEN is set)
  POST /telegram/webhook   Telegram updates, when TELEGRAM_BOT_TOKEN is set

It also listens on $TENDRIL_HOME/tendril.sock, through which every other tendril
command on this home reaches it. With no model configured every turn answers
MODEL_NOT_CONFIGURED. A non-loopback address requires TENDRIL_AUTH_TOKEN.
SIGTERM or SIGINT lets in-flight turns finish within shutdownGrace (30s).`,
		Example: "  MODEL_ID=ollama/llama3.2 tendril serve",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			if addr != "" {
				if err := config.CheckAddr("--addr", addr); err != nil {
					return usageError{err}
				}
				cfg.Addr = addr
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return serve(ctx, cfg, newLogger(os.Stderr, slog.LevelInfo))
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "listen address host:port (default 127.0.0.1:8080, env TENDRIL_ADDR)")
	return cmd
}

// serve runs the server until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	if err := checkRuntime(cfg); err != nil {
		return err
	}
	if err := cfg.CheckAuthToken(); err != nil {
		return err
	}
	pprofAddr := os.Getenv(runtime.PprofEnv)
	if pprofAddr != "" {
		if err := config.CheckAddr(runtime.PprofEnv, pprofAddr); err != nil {
			return err
		}
		if samePort(pprofAddr, cfg.Addr) {
			return fmt.Errorf("%s %q is the server's own address (TENDRIL_ADDR %q): give the profiles a port of their own, e.g. 127.0.0.1:6060", runtime.PprofEnv, pprofAddr, cfg.Addr)
		}
	}
	sock := filepath.Join(cfg.Home, mgmt.SocketName)
	release, err := lockHome(cfg.Home)
	// With a database every instance shares all state through it, so
	// several may share one home: the first holds the home's lock and its
	// management socket, the others serve HTTP only.
	shared := cfg.DatabaseURL != "" && errors.Is(err, errHomeBusy)
	for i := 0; errors.Is(err, errHomeBusy) && !shared; i++ {
		if cl, derr := mgmt.DialSocket(ctx, sock); derr == nil && cl.Remote {
			return fmt.Errorf("another tendril process is already running on %s and serving it (`tendril serve`, or `tendril chat` without a server): stop it, or give this one its own TENDRIL_HOME", cfg.Home)
		}
		if i == 0 {
			log.Info("waiting for a tendril command running without a server to release the home", "home", cfg.Home)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		release, err = lockHome(cfg.Home)
	}
	if shared {
		log.Info("another instance holds this home's management socket; serving HTTP only (state is shared through the database)", "home", cfg.Home)
		release = func() {}
	} else if err != nil {
		return err
	}
	defer release()
	// The dashboard's settings page tails the last 500 log lines.
	logs := dashboard.NewLogBuffer(500)
	log = slog.New(logs.Handler(log.Handler()))
	headroom, err := checkRuntimeEnv()
	if err != nil {
		return err
	}
	setGCPercent(ctx, headroom)
	setMemoryLimit(ctx, log, memlimit.FromCgroup, cfg.MemoryLimitMB)
	tr := runtime.NewTracker(nil)
	a, err := assistant.Open(ctx, cfg, assistant.Options{Logger: log, Owner: true, Busy: tr})
	if err != nil {
		return err
	}
	defer a.Close()
	if pprofAddr != "" {
		stopPprof, err := runtime.ServePprof(pprofAddr, log)
		if err != nil {
			if !errors.Is(err, runtime.ErrPprofAddr) {
				err = fmt.Errorf("%s: %w", runtime.PprofEnv, err)
			}
			return err
		}
		defer stopPprof()
	}
	srv, err := newServer(a, tr, cfg.Addr, log, logs)
	if err != nil {
		return err
	}
	l, err := srv.Listen()
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	var ls net.Listener
	if !shared {
		if ls, err = listenSocket(sock); err != nil {
			l.Close()
			return err
		}
		defer os.Remove(sock)
	}
	if err := a.Start(ctx, assistant.StartOptions{Scheduler: true, Telegram: true}); err != nil {
		l.Close()
		if ls != nil {
			ls.Close()
		}
		return err
	}
	if cfg.AgentCore() && cfg.DatabaseURL == "" && cfg.Ephemeral {
		log.Warn("TENDRIL_EPHEMERAL=1 without a database: sessions, memory, approvals and jobs live in this microVM and are lost with it")
	}
	if !a.ModelConfigured() {
		log.Warn("no model configured: turns will answer MODEL_NOT_CONFIGURED; set MODEL_ID (e.g. ollama/llama3.2)")
	}
	socket := sock
	if ls == nil {
		socket = "none (another instance holds this home's)"
	}
	log.Info("tendril serving", "addr", l.Addr().String(), "socket", socket, "home", cfg.Home, "model", cfg.Model.ID, "vision_model", cfg.Model.VisionID)
	errc := make(chan error, 2)
	servers := 1
	go func() { errc <- srv.Serve(l) }()
	if ls != nil {
		servers++
		go func() { errc <- srv.ServeLocal(ls) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if d := cfg.ShutdownDelay.D(); d > 0 {
		// Leave the load balancer's rotation first: /readyz says 503
		// while turns are still served, then the listener closes. A
		// second signal skips the rest of the wait.
		srv.Drain()
		log.Info("draining: /readyz answers 503 while requests are still served", "delay", d.String())
		again := make(chan os.Signal, 1)
		signal.Notify(again, syscall.SIGTERM, syscall.SIGINT)
		select {
		case <-time.After(d):
		case <-again:
			log.Info("second signal: not waiting out the drain delay")
		case err := <-errc:
			signal.Stop(again)
			return err
		}
		signal.Stop(again)
	}
	log.Info("shutting down: no new work accepted, waiting for in-flight turns", "grace", cfg.ShutdownGrace.D().String())
	a.BeginShutdown()
	shutErr := srv.Shutdown(context.Background())
	if err := a.Close(); err != nil {
		log.Warn("closing stores", "err", err)
	}
	for range servers {
		if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	if shutErr != nil {
		return fmt.Errorf("shutdown: %w", shutErr)
	}
	log.Info("stopped")
	return nil
}

// turnFlags are the flags invoke and chat share.
type turnFlags struct{ actor, session, channel string }

func (f *turnFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.actor, "actor", "cli:local", "actor ID the turn belongs to")
	c.Flags().StringVar(&f.session, "session", "", "session ID (default: derived from the actor)")
	c.Flags().StringVar(&f.channel, "channel", "cli", "channel name recorded on the session")
}

func (f *turnFlags) request(msg string) map[string]any {
	return map[string]any{"message": msg, "actor_id": f.actor, "session_id": f.session, "channel": f.channel, "invocation_type": "api"}
}

// turnError turns an ok:false envelope into an error naming its code.
func turnError(body map[string]any) error {
	if ok, _ := body["ok"].(bool); ok {
		return nil
	}
	if ap, _ := body["approval"].(map[string]any); body["error"] == "APPROVAL_PENDING" && ap != nil {
		if id, _ := ap["request_id"].(string); id != "" {
			id = clip(oneLine(id), 64)
			return fmt.Errorf("%v: %v — approve with: tendril approvals approve %s (or deny)", body["error"], body["message"], id)
		}
	}
	return fmt.Errorf("%v: %v", body["error"], body["message"])
}

func newInvokeCmd(g *globals) *cobra.Command {
	var f turnFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   `invoke message...`,
		Short: "Run one turn and print the reply (script-friendly)",
		Long: `Invoke runs one turn through the running server on this home (or in-process
when none runs) and prints the reply. --json prints the POST /invocations body.
Exit status is 1 when the turn fails (for example MODEL_NOT_CONFIGURED) or
pauses for approval (APPROVAL_PENDING). A message to a session whose earlier
turn is paused waits behind it; stderr then names the approval it waits for.`,
		Example: `  tendril invoke "what should I plant in March?" --actor cli:me --json`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := g.with(cmd, func(ctx context.Context, cn *conn) error {
				body, err := cn.turn(ctx, f.request(strings.Join(args, " ")), func(p agent.PendingApproval) {
					fmt.Fprintln(cmd.ErrOrStderr(), approvalWaitLine(p))
				})
				if err != nil {
					return err
				}
				terr := turnError(body)
				if code, _ := body["error"].(string); code == "INVALID_REQUEST" || code == "INVALID_ACTOR_ID" {
					terr = usageError{terr}
				}
				if asJSON {
					b, _ := json.Marshal(body)
					fmt.Fprintln(cmd.OutOrStdout(), string(b))
					if _, usage := terr.(usageError); usage {
						return silentErr{terr, 2}
					}
					if terr != nil {
						return silentErr{terr, 1}
					}
					return nil
				}
				if terr != nil {
					return terr
				}
				fmt.Fprintln(cmd.OutOrStdout(), body["text"])
				if meta, _ := body["metadata"].(map[string]any); meta != nil {
					if p, _ := meta["pending_approval"].(map[string]any); p != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "approval pending: tendril approvals approve %v\n", p["request_id"])
					}
				}
				return nil
			})
			return err
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the /invocations JSON body")
	return cmd
}

// errorEnvelope is the /invocations error body for an error that kept a
// command from running (main prints it on stdout for --json commands): NOT_READY (503's code) when a dependency could not be
// reached, INVALID_REQUEST for bad usage, else INTERNAL_ERROR.
func errorEnvelope(err error) []byte {
	code := "INTERNAL_ERROR"
	var ue usageError
	switch {
	case runtime.Unavailable(err):
		code = "NOT_READY"
	case errors.As(err, &ue) || isCobraUsage(err):
		code = "INVALID_REQUEST"
	}
	msg := strings.NewReplacer("\n\t", "; ", "\n", "; ").Replace(strings.TrimSpace(err.Error()))
	b, _ := json.Marshal(map[string]any{"ok": false, "error": code, "message": msg})
	return b
}

// silentErr fails the command with exit status code (1 or 2) without
// printing again.
type silentErr struct {
	err  error
	code int
}

func (e silentErr) Error() string { return e.err.Error() }

func newChatCmd(g *globals) *cobra.Command {
	var f turnFlags
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Chat with the assistant in the terminal",
		Long: `Chat opens a conversation in the terminal through the running server on this
home (or in-process when none runs). Replies of turns that resume after an
approval given elsewhere are shown as they arrive. Commands: /help, /quit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cn, err := g.connect(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer cn.close()
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			out := &syncWriter{w: cmd.OutOrStdout()}
			var deliveries <-chan assistant.Delivery
			if cn.local != nil {
				ch, unsub, err := cn.local.Subscribe(f.actor)
				if err != nil {
					return err
				}
				defer unsub()
				deliveries = ch
			} else if deliveries, err = cn.Deliveries(ctx, f.actor); err != nil {
				return err
			}
			go func() {
				for d := range deliveries {
					out.printf("\n[resumed] %s\n> ", d.Text)
				}
			}()
			in := bufio.NewScanner(cmd.InOrStdin())
			in.Buffer(make([]byte, 64<<10), 1<<20)
			out.printf("Tendril chat. /help for commands, /quit to leave.\n")
			for {
				out.printf("> ")
				if !in.Scan() {
					out.printf("\n")
					return in.Err()
				}
				line := strings.TrimSpace(in.Text())
				switch line {
				case "":
					continue
				case "/quit", "/exit":
					return nil
				case "/help":
					out.printf("Type a message and press Enter. /quit leaves. Approve paused tool calls with `tendril approvals approve ID`.\n")
					continue
				}
				if strings.HasPrefix(line, "/") && !strings.ContainsAny(line, " \t") {
					// a mistyped command is not sent to the model as a message
					out.printf("[error] unknown command %s (/help lists them)\n", line)
					continue
				}
				body, err := cn.turn(ctx, f.request(line), func(p agent.PendingApproval) {
					fmt.Fprintln(cmd.ErrOrStderr(), approvalWaitLine(p))
				})
				if err == nil {
					err = turnError(body)
				}
				if err != nil {
					out.printf("[error] %v\n", err)
					continue
				}
				out.printf("%v\n", body["text"])
			}
		},
	}
	f.add(cmd)
	return cmd
}

// samePort reports whether two listen addresses would collide: the same
// port, and the same host or one of them every interface ("" or 0.0.0.0
// or ::). Unparsable addresses never collide here (they fail later with
// their own error).
func samePort(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb || pa == "0" {
		return false
	}
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wildcard(ha) || wildcard(hb)
}
