package assistant

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/skill"
)

// Check statuses, the values of Check.Status.
const (
	CheckOK   = "ok"   // the dependency works
	CheckWarn = "warn" // usable, but degraded or not set up yet
	CheckFail = "fail" // serve would refuse to start or the dependency is broken
	CheckSkip = "skip" // not configured, nothing to check
)

// Check is one doctor finding. Name is the dependency ("home", "model
// anthropic/claude-x", "persona", "skills", "skill NAME", "postgres",
// "redis", "telegram", "addr"); a name may repeat (one "skills" line per
// problem). Detail never contains a secret: endpoints are shown as
// scheme://host only.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // CheckOK, CheckWarn, CheckFail or CheckSkip
	Detail string `json:"detail"`
}

// DoctorReport is the result of Doctor. Its JSON form is the document
// `tendril doctor --json` prints and the dashboard serves:
//
//	{"config": {…masked tendril.json…}, "home": "/…", "configFile": "/…/tendril.json" or "",
//	 "checks": [{"name", "status", "detail"}, …], "ok": true}
type DoctorReport struct {
	// Config is the effective configuration with secrets masked
	// (config.Config.Masked: API keys and tokens as "****abcd", passwords
	// in URLs and DSNs as "****").
	Config config.Config `json:"config"`
	// Home is $TENDRIL_HOME; ConfigFile the tendril.json it was loaded
	// from, "" when there is none (defaults + environment).
	Home       string `json:"home"`
	ConfigFile string `json:"configFile"`
	// Checks are in a fixed order: home, models, persona, skills,
	// postgres, redis, telegram, addr.
	Checks []Check `json:"checks"`
	// OK is false when any check has status CheckFail (the CLI then
	// exits 1); warnings and skips do not clear it.
	OK bool `json:"ok"`
}

// DoctorOptions configure Doctor. The zero value is usable.
type DoctorOptions struct {
	// HTTPClient probes the model endpoints and the Telegram Bot API
	// (one GET each, no tokens spent); nil means http.DefaultClient.
	HTTPClient *http.Client
	// Timeout bounds all the checks together, on top of ctx's own
	// deadline; 0 means only ctx bounds them. A check still running at
	// the deadline fails with its context error.
	Timeout time.Duration
}

// Doctor checks every dependency cfg configures, without opening an
// Assistant (it runs before, or beside, a server): the home directory is
// created if needed and must be writable; each distinct model reference
// (primary, vision, fallbacks) must parse and its endpoint answer over
// HTTP (any status counts: authentication is checked on the first real
// turn); the persona must load; the skills manifest and each skill are
// loaded (problems are warnings, not failures); PostgreSQL and Redis,
// when configured, must answer a ping; Telegram, when a bot token is set,
// needs a webhook secret and a reachable Bot API; the listen address must
// be loopback unless an auth token is set.
//
// Doctor never returns an error: every problem is a Check. Its only side
// effect is creating cfg.Home (0700) and a temporary file in it, removed
// at once.
func Doctor(ctx context.Context, cfg *config.Config, opts DoctorOptions) DoctorReport {
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	d := doctor{cfg: cfg, http: hc}
	d.run(ctx)
	rep := DoctorReport{Config: cfg.Masked(), Home: cfg.Home, ConfigFile: cfg.Path, Checks: d.checks, OK: true}
	for _, c := range d.checks {
		if c.Status == CheckFail {
			rep.OK = false
		}
	}
	return rep
}

type doctor struct {
	cfg    *config.Config
	http   *http.Client
	checks []Check
}

func (d *doctor) add(name, status, detail string) {
	d.checks = append(d.checks, Check{Name: name, Status: status, Detail: detail})
}

func (d *doctor) run(ctx context.Context) {
	cfg := d.cfg
	d.home()
	if cfg.Model.ID == "" {
		d.add("model", CheckWarn, model.ErrNotConfigured.Error())
	} else {
		seen := map[string]bool{}
		for _, ref := range append([]string{cfg.Model.ID, cfg.Model.VisionID}, cfg.Model.Fallbacks...) {
			if ref == "" || seen[ref] {
				continue
			}
			seen[ref] = true
			st, detail := d.model(ctx, ref)
			d.add("model "+ref, st, detail)
		}
	}
	d.embedder(ctx)
	if per, err := LoadPersona(cfg); err != nil {
		d.add("persona", CheckFail, err.Error())
	} else {
		d.add("persona", CheckOK, fmt.Sprintf("%s (%d identity anchors) from %s", per.Name, len(per.Anchors), per.Source))
	}
	d.skills()
	d.postgres(ctx)
	d.redis(ctx)
	d.telegram(ctx)
	if loop, err := isLoopbackAddr(cfg.Addr); err != nil {
		d.add("addr", CheckFail, err.Error())
	} else if !loop && cfg.AuthToken == "" {
		d.add("addr", CheckFail, cfg.Addr+" is not loopback and TENDRIL_AUTH_TOKEN is unset; serve will refuse to start")
	} else if err := cfg.CheckAuthToken(); err != nil {
		d.add("addr", CheckFail, err.Error()+"; serve will refuse to start")
	} else {
		d.add("addr", CheckOK, cfg.Addr)
	}
}

func (d *doctor) home() {
	home := d.cfg.Home
	if err := os.MkdirAll(home, 0o700); err != nil {
		d.add("home", CheckFail, err.Error())
	} else if f, err := os.CreateTemp(home, ".doctor-*"); err != nil {
		d.add("home", CheckFail, "not writable: "+err.Error())
	} else {
		f.Close()
		os.Remove(f.Name())
		d.add("home", CheckOK, home+" is writable")
	}
}

func (d *doctor) skills() {
	if err := CheckSkillPaths(d.cfg); err != nil {
		d.add("skills", CheckFail, err.Error())
		return
	}
	dir, manifest := SkillPaths(d.cfg)
	active, problems, err := skill.Load(dir, manifest)
	if err != nil {
		d.add("skills", CheckWarn, "manifest unreadable, no skills active: "+err.Error())
	} else {
		var names []string
		for _, s := range active {
			names = append(names, s.Name)
		}
		d.add("skills", CheckOK, fmt.Sprintf("%d active: %s", len(active), strings.Join(names, ", ")))
	}
	for _, p := range problems {
		if p.Skill == "" {
			d.add("skills", CheckWarn, fmt.Sprintf("no manifest at %s; `tendril serve` installs the default skills on first run", manifest))
			continue
		}
		d.add("skill "+p.Skill, CheckWarn, "skipped: "+p.Error())
	}
}

func (d *doctor) postgres(ctx context.Context) {
	if d.cfg.DatabaseURL == "" {
		d.add("postgres", CheckSkip, "TENDRIL_DATABASE_URL unset: embedded files + SQLite")
		return
	}
	if err := CheckPoolMaxConns(d.cfg.DatabaseURL); err != nil {
		d.add("postgres", CheckFail, err.Error())
		return
	}
	db, err := pg.Open(ctx, d.cfg.DatabaseURL, pg.Options{MaxConns: 2, ConnectTimeout: 5 * time.Second})
	if err != nil {
		d.add("postgres", CheckFail, err.Error())
		return
	}
	defer db.Close()
	var version string
	if err := db.QueryRow(ctx, `SHOW server_version`).Scan(&version); err != nil {
		d.add("postgres", CheckFail, err.Error())
		return
	}
	d.add("postgres", CheckOK, "reachable, PostgreSQL "+version)
	applied, pending, err := pg.Status(ctx, db, Migrations())
	switch {
	case err != nil:
		d.add("migrations", CheckFail, err.Error())
	case len(pending) > 0:
		d.add("migrations", CheckWarn, fmt.Sprintf("%d applied, %d pending (applied at the next start): %s", len(applied), len(pending), strings.Join(pending, ", ")))
	default:
		d.add("migrations", CheckOK, fmt.Sprintf("all %d applied", len(applied)))
	}
	d.river(ctx, db)
}

func (d *doctor) redis(ctx context.Context) {
	if d.cfg.RedisURL == "" {
		d.add("redis", CheckSkip, "TENDRIL_REDIS_URL unset")
		return
	}
	opt, err := redis.ParseURL(d.cfg.RedisURL)
	if err != nil {
		err = fmt.Errorf("TENDRIL_REDIS_URL (redisUrl): %w", err)
	} else {
		c := redis.NewClient(opt)
		err = c.Ping(ctx).Err()
		c.Close()
	}
	if err != nil {
		d.add("redis", CheckFail, err.Error())
		return
	}
	d.add("redis", CheckOK, "reachable")
}

func (d *doctor) telegram(ctx context.Context) {
	tg := d.cfg.Telegram
	switch {
	case tg.BotToken == "":
		d.add("telegram", CheckSkip, "TELEGRAM_BOT_TOKEN unset")
	case tg.WebhookSecret == "":
		d.add("telegram", CheckFail, "TELEGRAM_BOT_TOKEN is set but TELEGRAM_WEBHOOK_SECRET is not; the webhook refuses to start without a secret")
	default:
		st, detail := d.probe(ctx, strings.TrimRight(tg.APIURL, "/")+"/bot"+tg.BotToken+"/getMe", "Bot API")
		d.add("telegram", st, detail)
	}
}

// isLoopbackAddr reports whether addr ("host:port") names localhost or a
// loopback IP; an address without a port is an error.
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

// model validates a reference and probes its endpoint without spending
// tokens.
func (d *doctor) model(ctx context.Context, ref string) (status, detail string) {
	prov, name, err := model.ParseRef(ref)
	if err != nil {
		return CheckFail, err.Error()
	}
	p := d.cfg.Providers
	switch prov {
	case "anthropic":
		if p.AnthropicAPIKey == "" {
			return CheckFail, "ANTHROPIC_API_KEY is not set"
		}
		base := p.AnthropicBaseURL
		if base == "" {
			base = "https://api.anthropic.com"
		}
		return d.probe(ctx, base, "Anthropic "+name)
	case "openai":
		base := p.OpenAIBaseURL
		if base == "" {
			base = "https://api.openai.com/v1"
		}
		if p.OpenAIAPIKey == "" && strings.Contains(base, "api.openai.com") {
			return CheckFail, "OPENAI_API_KEY is not set"
		}
		return d.probe(ctx, strings.TrimRight(base, "/")+"/models", "OpenAI-compatible "+name)
	case "ollama":
		return d.probe(ctx, strings.TrimRight(p.OllamaBaseURL, "/")+"/models", "Ollama "+name)
	case "bedrock":
		if p.BedrockEndpoint != "" {
			return d.probe(ctx, p.BedrockEndpoint, "Bedrock "+name)
		}
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
			if _, err := os.Stat(filepath.Join(os.Getenv("HOME"), ".aws", "credentials")); err != nil {
				return CheckWarn, "no AWS credentials found in the environment or ~/.aws; the SDK may still find role credentials"
			}
		}
		return CheckOK, "Bedrock " + name + " (credentials from the AWS default chain)"
	}
	return CheckFail, fmt.Sprintf("unknown provider %q (want anthropic, bedrock, openai or ollama)", prov)
}

// embedder checks memory.embedder (EMBEDDING_MODEL_ID) as serve builds it
// and probes its provider's endpoint as for a model; unset, no check.
func (d *doctor) embedder(ctx context.Context) {
	ref := strings.TrimSpace(d.cfg.Memory.Embedder) // as embed.New reads it
	if ref == "" {
		return
	}
	name := "embedder " + ref
	e, err := newEmbedder(ctx, d.cfg)
	if err != nil {
		d.add(name, CheckFail, err.Error()+"; serve will refuse to start")
		return
	}
	if c, ok := e.(interface{ Close() error }); ok {
		c.Close()
	}
	st, detail := d.model(ctx, ref)
	d.add(name, st, detail)
}

// probe reports whether an endpoint answers at all; any HTTP status means
// reachable (auth is checked on the first real turn).
func (d *doctor) probe(ctx context.Context, rawURL, what string) (status, detail string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the whole URL, and a Bot API path carries the
		// token: report only the reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return CheckFail, fmt.Sprintf("%s: invalid endpoint URL: %v", what, err)
	}
	// Only scheme and host are shown: Bot API paths carry the token.
	shown := u.Scheme + "://" + u.Host
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return CheckFail, fmt.Sprintf("%s unreachable at %s", what, shown)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return CheckFail, fmt.Sprintf("%s unreachable at %s", what, shown)
	}
	resp.Body.Close()
	return CheckOK, fmt.Sprintf("%s reachable at %s (HTTP %d)", what, shown, resp.StatusCode)
}

// river checks River's own migrations (its job tables) on the database.
func (d *doctor) river(ctx context.Context, db *pgxpool.Pool) {
	m, err := rivermigrate.New(riverpgxv5.New(db), nil)
	if err != nil {
		d.add("river", CheckFail, err.Error())
		return
	}
	have, err := m.ExistingVersions(ctx)
	if err != nil {
		d.add("river", CheckWarn, "River's tables are not there yet (created at the next start): "+oneLine(err.Error()))
		return
	}
	all := m.AllVersions()
	if len(have) < len(all) {
		d.add("river", CheckWarn, fmt.Sprintf("River schema at version %d of %d (migrated at the next start)", len(have), len(all)))
		return
	}
	d.add("river", CheckOK, fmt.Sprintf("job queue schema at version %d", len(have)))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
