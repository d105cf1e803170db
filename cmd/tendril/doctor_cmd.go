package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/persona"
	"github.com/tendrilai/tendril/internal/skill"
)

func init() { register(newDoctorCmd) }

// check is one doctor finding.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok | warn | fail | skip
	Detail string `json:"detail"`
}

func newDoctorCmd(g *globals) *cobra.Command {
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Show the effective configuration (secrets masked) and check every dependency",
		Long: `Doctor loads tendril.json and the environment exactly as "serve" does, prints
the effective configuration with secrets masked, and checks each configured
dependency: the home directory, the model references and their endpoints, the
persona, every skill (malformed skills are reported, not fatal), PostgreSQL,
Redis and Telegram. It exits 1 when a check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			checks := runChecks(ctx, cfg)
			out := cmd.OutOrStdout()
			failed := false
			for _, c := range checks {
				failed = failed || c.Status == "fail"
			}
			if asJSON {
				b, _ := json.MarshalIndent(map[string]any{"config": cfg.Masked(), "home": cfg.Home, "configFile": cfg.Path, "checks": checks}, "", "  ")
				fmt.Fprintln(out, string(b))
			} else {
				src := cfg.Path
				if src == "" {
					src = "(no tendril.json; defaults + environment)"
				}
				fmt.Fprintf(out, "Home:   %s\nConfig: %s\n\nEffective configuration (secrets masked):\n", cfg.Home, src)
				b, _ := json.MarshalIndent(cfg.Masked(), "", "  ")
				fmt.Fprintln(out, string(b))
				fmt.Fprintln(out, "\nChecks:")
				for _, c := range checks {
					fmt.Fprintf(out, "  [%-4s] %-18s %s\n", c.Status, c.Name, c.Detail)
				}
			}
			if failed {
				return silentErr{fmt.Errorf("doctor: a check failed")}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "overall time limit for the dependency checks")
	return cmd
}

func runChecks(ctx context.Context, cfg *config.Config) []check {
	var cs []check
	add := func(name, status, detail string) { cs = append(cs, check{name, status, detail}) }

	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		add("home", "fail", err.Error())
	} else if f, err := os.CreateTemp(cfg.Home, ".doctor-*"); err != nil {
		add("home", "fail", "not writable: "+err.Error())
	} else {
		f.Close()
		os.Remove(f.Name())
		add("home", "ok", cfg.Home+" is writable")
	}

	if cfg.Model.ID == "" {
		add("model", "warn", model.ErrNotConfigured.Error())
	} else {
		seen := map[string]bool{}
		for _, ref := range append([]string{cfg.Model.ID, cfg.Model.VisionID}, cfg.Model.Fallbacks...) {
			if ref == "" || seen[ref] {
				continue
			}
			seen[ref] = true
			st, d := modelCheck(ctx, cfg, ref)
			add("model "+ref, st, d)
		}
	}

	per, err := persona.Load(cfg.Home, cfg.Agent.PersonaFile)
	if err != nil {
		add("persona", "fail", err.Error())
	} else {
		add("persona", "ok", fmt.Sprintf("%s (%d identity anchors) from %s", per.Name, len(per.Anchors), per.Source))
	}

	dir, manifest := assistant.SkillPaths(cfg)
	active, problems, err := skill.Load(dir, manifest)
	if err != nil {
		add("skills", "warn", "manifest unreadable, no skills active: "+err.Error())
	} else {
		var names []string
		for _, s := range active {
			names = append(names, s.Name)
		}
		add("skills", "ok", fmt.Sprintf("%d active: %s", len(active), strings.Join(names, ", ")))
	}
	for _, p := range problems {
		if p.Skill == "" {
			add("skills", "warn", fmt.Sprintf("no manifest at %s; `tendril serve` installs the default skills on first run", manifest))
			continue
		}
		add("skill "+p.Skill, "warn", "skipped: "+p.Error())
	}

	if cfg.DatabaseURL != "" {
		conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
		if err != nil {
			add("postgres", "fail", err.Error())
		} else {
			err = conn.Ping(ctx)
			conn.Close(context.Background())
			if err != nil {
				add("postgres", "fail", err.Error())
			} else {
				add("postgres", "ok", "reachable")
			}
		}
	} else {
		add("postgres", "skip", "TENDRIL_DATABASE_URL unset: embedded files + SQLite")
	}
	if cfg.RedisURL != "" {
		opt, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			add("redis", "fail", err.Error())
		} else {
			c := redis.NewClient(opt)
			err := c.Ping(ctx).Err()
			c.Close()
			if err != nil {
				add("redis", "fail", err.Error())
			} else {
				add("redis", "ok", "reachable")
			}
		}
	} else {
		add("redis", "skip", "TENDRIL_REDIS_URL unset")
	}
	if cfg.Telegram.BotToken != "" {
		if cfg.Telegram.WebhookSecret == "" {
			add("telegram", "fail", "TELEGRAM_BOT_TOKEN is set but TELEGRAM_WEBHOOK_SECRET is not; the webhook refuses to start without a secret")
		} else {
			st, d := httpCheck(ctx, strings.TrimRight(cfg.Telegram.APIURL, "/")+"/bot"+cfg.Telegram.BotToken+"/getMe", "Bot API")
			add("telegram", st, d)
		}
	} else {
		add("telegram", "skip", "TELEGRAM_BOT_TOKEN unset")
	}
	if loop, err := isLoopbackAddr(cfg.Addr); err != nil {
		add("addr", "fail", err.Error())
	} else if !loop && cfg.AuthToken == "" {
		add("addr", "fail", cfg.Addr+" is not loopback and TENDRIL_AUTH_TOKEN is unset; serve will refuse to start")
	} else {
		add("addr", "ok", cfg.Addr)
	}
	return cs
}

func isLoopbackAddr(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// modelCheck validates a reference and probes its endpoint without
// spending tokens.
func modelCheck(ctx context.Context, cfg *config.Config, ref string) (string, string) {
	prov, name, err := model.ParseRef(ref)
	if err != nil {
		return "fail", err.Error()
	}
	p := cfg.Providers
	switch prov {
	case "anthropic":
		if p.AnthropicAPIKey == "" {
			return "fail", "ANTHROPIC_API_KEY is not set"
		}
		base := p.AnthropicBaseURL
		if base == "" {
			base = "https://api.anthropic.com"
		}
		return httpCheck(ctx, base, "Anthropic "+name)
	case "openai":
		base := p.OpenAIBaseURL
		if base == "" {
			base = "https://api.openai.com/v1"
		}
		if p.OpenAIAPIKey == "" && strings.Contains(base, "api.openai.com") {
			return "fail", "OPENAI_API_KEY is not set"
		}
		return httpCheck(ctx, strings.TrimRight(base, "/")+"/models", "OpenAI-compatible "+name)
	case "ollama":
		return httpCheck(ctx, strings.TrimRight(p.OllamaBaseURL, "/")+"/models", "Ollama "+name)
	case "bedrock":
		if p.BedrockEndpoint != "" {
			return httpCheck(ctx, p.BedrockEndpoint, "Bedrock "+name)
		}
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
			if _, err := os.Stat(filepath.Join(os.Getenv("HOME"), ".aws", "credentials")); err != nil {
				return "warn", "no AWS credentials found in the environment or ~/.aws; the SDK may still find role credentials"
			}
		}
		return "ok", "Bedrock " + name + " (credentials from the AWS default chain)"
	}
	return "fail", fmt.Sprintf("unknown provider %q (want anthropic, bedrock, openai or ollama)", prov)
}

// httpCheck reports whether an endpoint answers at all; any HTTP status
// means reachable (auth is checked on the first real turn).
func httpCheck(ctx context.Context, rawURL, what string) (string, string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "fail", err.Error()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	// Only scheme and host are shown: Bot API paths carry the token.
	shown := u.Scheme + "://" + u.Host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "fail", fmt.Sprintf("%s unreachable at %s", what, shown)
	}
	resp.Body.Close()
	return "ok", fmt.Sprintf("%s reachable at %s (HTTP %d)", what, shown, resp.StatusCode)
}
