// Package config loads tendril.json (JSON with comments, HuJSON) from
// $TENDRIL_HOME (default ~/.tendril) or an explicit path, then applies the
// environment overrides of SPEC §1.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Duration is a time.Duration that reads "30s", "10m", "30d" or a number of
// seconds from JSON.
type Duration time.Duration

// UnmarshalJSON reads a string ParseDuration accepts ("30s", "10m", "30d",
// "1d12h") or a number of seconds (30, 0.5); null leaves d unchanged. Any
// other string is an error `bad duration "…": want …`, and any other
// JSON value an error saying what is wanted.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case nil:
	case float64:
		*d = Duration(time.Duration(x * float64(time.Second)))
	case string:
		dd, err := ParseDuration(x)
		if err != nil {
			return fmt.Errorf("bad duration %q: want e.g. \"30s\", \"10m\", \"1d12h\" or a number of seconds", x)
		}
		*d = Duration(dd)
	default:
		return fmt.Errorf("want a string like \"30s\" or a number of seconds")
	}
	return nil
}

// MarshalJSON writes d as a time.Duration string: "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// ParseDuration accepts Go durations plus a "d" (24h) suffix: "30d", "1d12h".
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "d") {
		var n float64
		if _, err := fmt.Sscanf(strings.TrimSuffix(s, "d"), "%g", &n); err != nil {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		return time.Duration(n * 24 * float64(time.Hour)), nil
	}
	return time.ParseDuration(s)
}

// Config is the whole of tendril.json. Every field has a default (Default).
type Config struct {
	Home    string `json:"-"`
	Path    string `json:"-"` // the file it was loaded from, "" if none
	Addr    string `json:"addr"`
	AgentID string `json:"agentId"`

	// Runtime is "" for a self-hosted server or RuntimeAgentCore for
	// Amazon Bedrock AgentCore Runtime (TENDRIL_RUNTIME); see docs/deploy.md.
	Runtime string `json:"runtime,omitempty"`
	// Ephemeral lets AgentCore mode start without a database: state lives
	// in the microVM and is lost with it (TENDRIL_EPHEMERAL=1).
	Ephemeral bool `json:"ephemeral,omitempty"`

	AuthToken   string `json:"authToken,omitempty"`
	DatabaseURL string `json:"databaseUrl,omitempty"`
	RedisURL    string `json:"redisUrl,omitempty"`

	Model     ModelConfig          `json:"model"`
	Providers ProvidersConfig      `json:"providers"`
	Agent     AgentConfig          `json:"agent"`
	Session   SessionConfig        `json:"session"`
	Memory    MemoryConfig         `json:"memory"`
	State     StateConfig          `json:"state"`
	Approval  ApprovalConfig       `json:"approval"`
	Telegram  TelegramConfig       `json:"telegram"`
	Schedule  ScheduleConfig       `json:"schedule"`
	Tools     ToolsConfig          `json:"tools"`
	MCP       map[string]MCPServer `json:"mcpServers,omitempty"`

	// ShutdownGrace bounds how long in-flight turns may run after SIGTERM.
	ShutdownGrace Duration `json:"shutdownGrace"`
	// ShutdownDelay is how long serve keeps serving after SIGTERM with
	// GET /readyz answering 503, before it stops accepting connections
	// (0, the default: at once). Behind a load balancer or a Kubernetes
	// Service, set it to a little more than the readiness probe's period
	// times its failureThreshold, so the instance leaves the rotation
	// before its listener closes and no client sees a refused connection
	// (TENDRIL_SHUTDOWN_DELAY, e.g. "10s").
	ShutdownDelay Duration `json:"shutdownDelay,omitempty"`
	// MaxBodyBytes caps /invocations request bodies (413 above it).
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// MemoryLimitMB is the Go runtime's soft memory limit for tendril
	// serve, in MiB (https://pkg.go.dev/runtime/debug#SetMemoryLimit):
	// the collector runs early enough to keep the process's Go memory
	// near it, instead of letting the heap grow to twice what is live.
	// 0 (the default) means DefaultMemoryLimitMB(memory.cacheMB); a
	// negative value sets none. A cgroup limit below it (90 % of a
	// container's memory limit) and GOMEMLIMIT take precedence. Env
	// TENDRIL_MEMORY_LIMIT_MB.
	MemoryLimitMB int `json:"memoryLimitMB,omitempty"`
}

// DefaultMemoryLimitMB is the soft memory limit serve sets when
// memoryLimitMB is 0: a backstop that leaves the collector's own pacing
// (serve's GOGC, 50 unless set: a heap of up to 1.5 × what is live)
// alone at the loads Tendril is sized for and makes the collector work
// harder only past them, 4 × cacheMB + 128 (256 MiB at the defaults).
// At 100 actors × 1,000 turns about 110 MB are live, so it does not
// bind there; a limit within about 1.5 × of the live heap would, at a
// high price (issue 14, docs/bench/soak.md stop 13: 128 MiB over 87 MB
// live gave the collector 45 % of the CPU, 96 MiB over 71 MB 38 %).
// 0 when cacheMB is negative (no bound on the cache, so none on the
// process either).
func DefaultMemoryLimitMB(cacheMB int) int {
	if cacheMB < 0 {
		return 0
	}
	return 4*cacheMB + memoryLimitBaseMB
}

// memoryLimitBaseMB is DefaultMemoryLimitMB's share for what is not the
// memory store's cache (sessions' decoded nodes, the consolidation
// candidate indexes, request buffers, SQLite's page caches), with Go's
// headroom.
const memoryLimitBaseMB = 128

// ModelConfig selects models by reference "provider/model".
type ModelConfig struct {
	ID         string   `json:"id"`        // MODEL_ID
	VisionID   string   `json:"visionId"`  // VISION_MODEL_ID; defaults to ID
	Fallbacks  []string `json:"fallbacks"` // tried in order when the primary fails
	Timeout    Duration `json:"timeout"`   // per attempt
	MaxRetries int      `json:"maxRetries"`
	MaxTokens  int      `json:"maxTokens"`
	// ContextWindow in tokens, used for the compaction threshold and as
	// the bound every model request is fitted to (with room for the reply,
	// maxTokens capped at a quarter of the window; memory.blockShare of it
	// for the memory block).
	ContextWindow int `json:"contextWindow"`
}

// ProvidersConfig holds provider credentials and endpoints.
type ProvidersConfig struct {
	AnthropicAPIKey  string `json:"anthropicApiKey,omitempty"`
	AnthropicBaseURL string `json:"anthropicBaseUrl,omitempty"`
	OpenAIAPIKey     string `json:"openaiApiKey,omitempty"`
	OpenAIBaseURL    string `json:"openaiBaseUrl,omitempty"`
	OllamaBaseURL    string `json:"ollamaBaseUrl,omitempty"` // default http://127.0.0.1:11434/v1
	AWSRegion        string `json:"awsRegion,omitempty"`
	BedrockEndpoint  string `json:"bedrockEndpoint,omitempty"` // AWS_ENDPOINT_URL_BEDROCK_RUNTIME
}

// AgentConfig configures the turn.
type AgentConfig struct {
	PersonaFile       string   `json:"personaFile"` // relative to Home; default persona.md
	IdentityAnchors   []string `json:"identityAnchors"`
	SkillsDir         string   `json:"skillsDir"`      // default <Home>/skills
	SkillsManifest    string   `json:"skillsManifest"` // default <Home>/skills.json
	MaxToolIterations int      `json:"maxToolIterations"`
	ToolTimeout       Duration `json:"toolTimeout"`

	// PersonaFileFrom, SkillsDirFrom and SkillsManifestFrom name where the
	// field above was set explicitly: the environment variable
	// (TENDRIL_PERSONA_FILE, …) or the file key (agent.personaFile, …);
	// "" means the default. An explicit persona file or skills directory
	// that is missing, or a manifest that does not parse, stops the start
	// instead of silently running on the built-in persona or no skills.
	PersonaFileFrom    string `json:"-"`
	SkillsDirFrom      string `json:"-"`
	SkillsManifestFrom string `json:"-"`
}

// ChannelLimit bounds context by messages and estimated tokens.
type ChannelLimit struct {
	MaxHistoryMessages int `json:"maxHistoryMessages"`
	MaxHistoryTokens   int `json:"maxHistoryTokens"`
}

// SessionConfig is SPEC §3.
type SessionConfig struct {
	MaxHistoryMessages int                     `json:"maxHistoryMessages"`
	MaxHistoryTokens   int                     `json:"maxHistoryTokens"`
	ChannelOverrides   map[string]ChannelLimit `json:"channelOverrides"`
	Fsync              string                  `json:"fsync"` // "always" (default), "batch", "never"
	Compaction         CompactionConfig        `json:"compaction"`
	Retention          RetentionConfig         `json:"retention"`
}

// CompactionConfig picks the strategy and trigger.
type CompactionConfig struct {
	Strategy  string  `json:"strategy"`  // "summary" (default) or "truncate"
	Threshold float64 `json:"threshold"` // fraction of the context window, default 0.8
	KeepLast  int     `json:"keepLast"`  // nodes kept verbatim, default 10
}

// RetentionConfig archives old session files at start-up.
type RetentionConfig struct {
	MaxAge  string `json:"maxAge"`  // "30d" (ParseAge)
	MaxSize string `json:"maxSize"` // "100mb" (ParseSize)
	Delete  bool   `json:"delete"`
}

// Limits parses MaxAge (ParseAge) and MaxSize (ParseSize, bytes); ""
// leaves that limit off (0). An error names the key at fault
// (session.retention.maxAge or session.retention.maxSize).
func (r RetentionConfig) Limits() (maxAge time.Duration, maxSize int64, err error) {
	if r.MaxAge != "" {
		if maxAge, err = ParseAge(r.MaxAge); err != nil {
			return 0, 0, fmt.Errorf("session.retention.maxAge: %w", err)
		}
	}
	if r.MaxSize != "" {
		if maxSize, err = ParseSize(r.MaxSize); err != nil {
			return 0, 0, fmt.Errorf("session.retention.maxSize: %w", err)
		}
	}
	return maxAge, maxSize, nil
}

// ParseAge parses a positive age: "30d", "2w", "12h", "1d12h" or any
// time.ParseDuration form; d is 24h and w is 7d.
func ParseAge(s string) (time.Duration, error) {
	orig := s
	s = strings.ToLower(strings.TrimSpace(s))
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && (s[i] == '.' || unicode.IsDigit(rune(s[i]))) {
			i++
		}
		j := i
		for j < len(s) && unicode.IsLetter(rune(s[j])) {
			j++
		}
		if i == 0 || j == i {
			return 0, fmt.Errorf("bad age %q: want e.g. 30d, 2w, 12h", orig)
		}
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("bad age %q: %w", orig, err)
		}
		var unit time.Duration
		switch s[i:j] {
		case "w":
			unit = 7 * 24 * time.Hour
		case "d":
			unit = 24 * time.Hour
		default:
			d, err := time.ParseDuration(s[:j])
			if err != nil {
				return 0, fmt.Errorf("bad age %q: %w", orig, err)
			}
			total += d
			s = s[j:]
			continue
		}
		total += time.Duration(n * float64(unit))
		s = s[j:]
	}
	if total <= 0 {
		return 0, fmt.Errorf("bad age %q: must be positive", orig)
	}
	return total, nil
}

// ParseSize parses a positive byte size: "100mb", "1.5GB", "512kb", "2
// MiB" or a plain number of bytes. Multiples are binary: 1kb = 1024
// bytes, 1mb = 1024 kb, 1gb = 1024 mb.
func ParseSize(s string) (int64, error) {
	orig := s
	s = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	i := 0
	for i < len(s) && (s[i] == '.' || unicode.IsDigit(rune(s[i]))) {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("bad size %q: want e.g. 100mb", orig)
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q: %w", orig, err)
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
		"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
		"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}[s[i:]]
	if mult == 0 || n <= 0 {
		return 0, fmt.Errorf("bad size %q: want e.g. 100mb", orig)
	}
	return int64(n * mult), nil
}

// IndexedKey declares a filterable metadata key.
type IndexedKey struct {
	Name string `json:"name"`
	Type string `json:"type"` // STRING, STRINGLIST, NUMBER
}

// MemoryConfig is SPEC §4.
type MemoryConfig struct {
	EventExpiryDays   int          `json:"eventExpiryDays"`
	ExtractEveryTurns int          `json:"extractEveryTurns"`
	IdleAfter         Duration     `json:"idleAfter"`
	TopK              int          `json:"topK"`
	RetrieveTimeout   Duration     `json:"retrieveTimeout"`
	IndexedKeys       []IndexedKey `json:"indexedKeys"`
	StageThreshold    float64      `json:"stageThreshold"` // 0.4
	StoreThreshold    float64      `json:"storeThreshold"` // 0.7
	LLMExtraction     bool         `json:"llmExtraction"`
	// BlockShare is the memory block's token budget as a fraction of
	// model.contextWindow (unit: share of the window, 0 < x ≤ 1; default
	// 0.15, i.e. 600 tokens of a 4,000-token window). The block never
	// takes more; lowest-ranked records are cut first, explicit ones last.
	// 0 or absent means the default; a negative value or one above 1 is
	// an error.
	BlockShare float64 `json:"blockShare"`
	// Embedder turns on hybrid search (BM25F fused with vector
	// similarity): "<provider>/<model>" with provider openai (any
	// OpenAI-compatible /v1/embeddings; providers.openaiBaseURL), ollama
	// (/api/embed; providers.ollamaBaseURL) or bedrock (Titan InvokeModel),
	// e.g. "openai/text-embedding-3-small", "ollama/nomic-embed-text",
	// "bedrock/amazon.titan-embed-text-v2:0". Env EMBEDDING_MODEL_ID.
	// Empty (the default): BM25F only.
	Embedder string `json:"embedder,omitempty"`
	// CacheMB bounds, in MiB, the estimated heap of the actors whose
	// records, events and ranking index the memory store keeps in memory
	// (default 32); past it the least recently used idle actor is dropped
	// and rebuilt from the index (SQLite or PostgreSQL) on its next turn.
	// Actors used in the last 5 s stay up to twice the bound. 0 means the
	// default, a negative value removes the bound, at most 1,048,576.
	// Env TENDRIL_MEMORY_CACHE_MB.
	CacheMB int `json:"cacheMB"`
	// EventWindow is how many of each actor's newest events the embedded
	// memory store keeps in memory and in its BM25F index (default 4096,
	// about 2,000 turns); older events stay in SQLite and its FTS5 index,
	// are searched there and merged by score, so an actor's memory and
	// search cost stop growing with its history. 0 means the default, a
	// negative value keeps every event in memory. Env
	// TENDRIL_MEMORY_EVENT_WINDOW.
	EventWindow int `json:"eventWindow"`
	// RecordWindow is how many of each actor's records the embedded
	// memory store keeps in memory and in its BM25F index (default 8192;
	// fewer when many actors share memory.cacheMB, down to 64 each once
	// their events are down to 128); the rest stay in SQLite and its FTS5
	// index and are searched and read there. 0 means the default, a
	// negative value keeps every record in memory. Env
	// TENDRIL_MEMORY_RECORD_WINDOW.
	RecordWindow int `json:"recordWindow"`
}

// DefaultEventWindow is memory.eventWindow when unset or 0 (the embedded
// store's sqlitestore.DefaultEventWindow).
const DefaultEventWindow = 4096

// DefaultRecordWindow is memory.recordWindow when unset or 0 (the
// embedded store's sqlitestore.DefaultRecordWindow).
const DefaultRecordWindow = 8192

// maxCacheMB bounds Memory.CacheMB: 1 TiB, far past any machine, and its
// byte count fits an int64.
const maxCacheMB = 1 << 20

// StateConfig is SPEC §6.1–6.2.
type StateConfig struct {
	Baseline map[string]float64 `json:"baseline,omitempty"`
	HalfLife Duration           `json:"halfLife"`
	Breaker  BreakerConfig      `json:"breaker"`
}

// BreakerConfig holds the stability thresholds.
type BreakerConfig struct {
	WarnEnter     float64 `json:"warnEnter"`     // 0.5
	WarnLeave     float64 `json:"warnLeave"`     // 0.6
	CriticalEnter float64 `json:"criticalEnter"` // 0.3
	CriticalLeave float64 `json:"criticalLeave"` // 0.45
	CooldownTurns int     `json:"cooldownTurns"` // 3
}

// ApprovalConfig is SPEC §6.3.
type ApprovalConfig struct {
	Rules  map[string]string `json:"rules,omitempty"` // tool → always|ask|never
	Expiry Duration          `json:"expiry"`          // 120s
}

// TelegramConfig is SPEC §7.1.
type TelegramConfig struct {
	BotToken       string   `json:"botToken,omitempty"`
	WebhookSecret  string   `json:"webhookSecret,omitempty"`
	APIURL         string   `json:"apiUrl,omitempty"`
	AllowedChatIDs []int64  `json:"allowedChatIds,omitempty"`
	BotUsername    string   `json:"botUsername,omitempty"`
	GroupReplyAll  bool     `json:"groupReplyAll"`
	AlbumDebounce  Duration `json:"albumDebounce"`
}

// Job is a scheduled job from the config file.
type Job struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"` // at | every | cron
	At      string `json:"at,omitempty"`
	Every   string `json:"every,omitempty"`
	Cron    string `json:"cron,omitempty"`
	TZ      string `json:"tz,omitempty"`
	Task    string `json:"task"`
	ActorID string `json:"actorId"`
	Channel string `json:"channel"`
	ChatID  string `json:"chatId,omitempty"`
}

// ScheduleConfig is SPEC §7.2.
type ScheduleConfig struct {
	Jobs []Job `json:"jobs,omitempty"`
}

// ToolsConfig configures built-in tools.
type ToolsConfig struct {
	WeatherBaseURL   string `json:"weatherBaseUrl"`   // https://api.open-meteo.com
	GeocodingBaseURL string `json:"geocodingBaseUrl"` // https://geocoding-api.open-meteo.com
	EnableExec       bool   `json:"enableExec"`
}

// MCPServer is one MCP server: stdio (Command) or streamable HTTP (URL).
type MCPServer struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	// Headers are sent to a streamable HTTP server (e.g. Authorization).
	Headers map[string]string `json:"headers,omitempty"`
	// Class is the tool class of the server's tools: read, write (default)
	// or exec.
	Class string `json:"class,omitempty"`
}

// Default returns the configuration with every default filled in.
func Default() Config {
	return Config{
		Addr:    "127.0.0.1:8080",
		AgentID: "main",
		Model: ModelConfig{
			Timeout: Duration(60 * time.Second), MaxRetries: 3, MaxTokens: 4096, ContextWindow: 200000,
		},
		Providers: ProvidersConfig{OllamaBaseURL: "http://127.0.0.1:11434/v1"},
		Agent: AgentConfig{
			PersonaFile: "persona.md", MaxToolIterations: 20, ToolTimeout: Duration(30 * time.Second),
		},
		Session: SessionConfig{
			MaxHistoryMessages: 50, MaxHistoryTokens: 8000,
			ChannelOverrides: map[string]ChannelLimit{
				"dm":    {MaxHistoryMessages: 100, MaxHistoryTokens: 16000},
				"group": {MaxHistoryMessages: 20, MaxHistoryTokens: 4000},
			},
			Fsync:      "always",
			Compaction: CompactionConfig{Strategy: "summary", Threshold: 0.8, KeepLast: 10},
			Retention:  RetentionConfig{MaxAge: "30d", MaxSize: "100mb"},
		},
		Memory: MemoryConfig{
			EventExpiryDays: 30, ExtractEveryTurns: 2, IdleAfter: Duration(10 * time.Minute), TopK: 50,
			RetrieveTimeout: Duration(3 * time.Second),
			IndexedKeys:     []IndexedKey{{"type", "STRING"}, {"section", "STRING"}, {"plants", "STRINGLIST"}},
			StageThreshold:  0.4, StoreThreshold: 0.7, LLMExtraction: true, BlockShare: 0.15,
			CacheMB: 32,
		},
		State: StateConfig{
			HalfLife: Duration(30 * time.Minute),
			Breaker:  BreakerConfig{WarnEnter: 0.5, WarnLeave: 0.6, CriticalEnter: 0.3, CriticalLeave: 0.45, CooldownTurns: 3},
		},
		Approval: ApprovalConfig{Expiry: Duration(120 * time.Second)},
		Telegram: TelegramConfig{APIURL: "https://api.telegram.org", AlbumDebounce: Duration(2 * time.Second)},
		Tools: ToolsConfig{
			WeatherBaseURL: "https://api.open-meteo.com", GeocodingBaseURL: "https://geocoding-api.open-meteo.com",
		},
		ShutdownGrace: Duration(30 * time.Second),
		MaxBodyBytes:  8 << 20,
	}
}

// RuntimeAgentCore is the Runtime value of AgentCore mode.
const RuntimeAgentCore = "agentcore"

// AgentCoreAddr is the listen address of AgentCore mode unless addr or
// TENDRIL_ADDR names another.
const AgentCoreAddr = "0.0.0.0:8080"

// AgentCore reports whether the process runs in AgentCore mode.
func (c *Config) AgentCore() bool { return c.Runtime == RuntimeAgentCore }

// DefaultHome returns $TENDRIL_HOME or ~/.tendril.
func DefaultHome() string {
	if h := os.Getenv("TENDRIL_HOME"); h != "" {
		return h
	}
	if u, err := os.UserHomeDir(); err == nil {
		return filepath.Join(u, ".tendril")
	}
	return ".tendril"
}

// Load reads the config file (path, or <home>/tendril.json when path is
// ""), which may be absent, then applies environment overrides.
//
// An error in the file names the file, the line and column, and the key
// path: "<path>:<line>:<column>: <key>: <what is wrong>", e.g.
// "/root/.tendril/tendril.json:3:16: model.timeout: bad duration
// \"banana\": …". That covers syntax errors (without a key), unknown
// keys, keys set twice in one object (naming the first one's line and
// column), values of the wrong type, and values that Load checks after
// decoding (negative counts, addresses, fractions). A bad value from an
// environment variable names it instead: "addr (from TENDRIL_ADDR)
// \"x\": …", or the variable alone where it cannot be parsed at all. A
// file that cannot be read is "config <path>: <error>".
func Load(path string) (*Config, error) {
	c := Default()
	c.Home = DefaultHome()
	src := sources{getenv: os.Getenv}
	explicit := path != ""
	if !explicit {
		path = filepath.Join(c.Home, "tendril.json")
	}
	b, err := os.ReadFile(path)
	switch {
	case err != nil && explicit:
		// --config names a file that must exist: a typo must not silently
		// run on defaults.
		return nil, fmt.Errorf("config %s: %w", path, err)
	case err == nil:
		f, std, err := parseFile(path, b)
		if err != nil {
			return nil, err
		}
		src.file = f
		dec := json.NewDecoder(bytes.NewReader(std))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			// parseFile has checked every key and value against Config.
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		// Which agent paths the file sets, even to their default value.
		var set struct {
			Agent struct {
				PersonaFile, SkillsDir, SkillsManifest *string
			} `json:"agent"`
		}
		if json.Unmarshal(std, &set) == nil {
			from := func(dst *string, v *string, key string) {
				if v != nil && *v != "" {
					*dst = key
				}
			}
			from(&c.Agent.PersonaFileFrom, set.Agent.PersonaFile, "agent.personaFile")
			from(&c.Agent.SkillsDirFrom, set.Agent.SkillsDir, "agent.skillsDir")
			from(&c.Agent.SkillsManifestFrom, set.Agent.SkillsManifest, "agent.skillsManifest")
		}
		c.Path = path
	case errors.Is(err, os.ErrNotExist):
	default:
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.applyEnv(os.Getenv); err != nil {
		return nil, err
	}
	if v := strings.TrimSpace(os.Getenv("TENDRIL_SHUTDOWN_DELAY")); v != "" {
		d, err := ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("TENDRIL_SHUTDOWN_DELAY %q: want a duration such as 10s", v)
		}
		if d < 0 {
			return nil, fmt.Errorf("TENDRIL_SHUTDOWN_DELAY %q: want 0 or more", v)
		}
		c.ShutdownDelay = Duration(d)
	}
	if v := os.Getenv("TENDRIL_MEMORY_CACHE_MB"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("TENDRIL_MEMORY_CACHE_MB %q: want a whole number of MiB (negative: no bound)", v)
		}
		c.Memory.CacheMB = n
	}
	if v := os.Getenv("TENDRIL_MEMORY_LIMIT_MB"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("TENDRIL_MEMORY_LIMIT_MB %q: want a whole number of MiB (negative: no limit)", v)
		}
		c.MemoryLimitMB = n
	}
	if v := os.Getenv("TENDRIL_MEMORY_EVENT_WINDOW"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("TENDRIL_MEMORY_EVENT_WINDOW %q: want a whole number of events (negative: every event in memory)", v)
		}
		c.Memory.EventWindow = n
	}
	if v := os.Getenv("TENDRIL_MEMORY_RECORD_WINDOW"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("TENDRIL_MEMORY_RECORD_WINDOW %q: want a whole number of records (negative: every record in memory)", v)
		}
		c.Memory.RecordWindow = n
	}
	if c.MemoryLimitMB > maxCacheMB {
		return nil, fmt.Errorf("%s %d: at most %d MiB (negative: no limit)", src.name("memoryLimitMB", "TENDRIL_MEMORY_LIMIT_MB"), c.MemoryLimitMB, maxCacheMB)
	}
	if c.Memory.CacheMB > maxCacheMB {
		// MiB << 20 must fit the stores' int64 byte budget
		return nil, fmt.Errorf("%s %d: at most %d MiB (negative: no bound)", src.name("memory.cacheMB", "TENDRIL_MEMORY_CACHE_MB"), c.Memory.CacheMB, maxCacheMB)
	}
	if err := c.validate(src); err != nil {
		return nil, err
	}
	// "0 means the default": store the value in effect, so what doctor
	// shows is what runs.
	if c.Memory.CacheMB == 0 {
		c.Memory.CacheMB = Default().Memory.CacheMB
	}
	if c.MemoryLimitMB == 0 {
		c.MemoryLimitMB = DefaultMemoryLimitMB(c.Memory.CacheMB)
		if c.MemoryLimitMB == 0 {
			c.MemoryLimitMB = -1
		}
	}
	if c.Memory.BlockShare == 0 {
		c.Memory.BlockShare = Default().Memory.BlockShare
	}
	if c.Memory.TopK == 0 {
		c.Memory.TopK = Default().Memory.TopK
	}
	if c.Memory.RetrieveTimeout == 0 {
		c.Memory.RetrieveTimeout = Default().Memory.RetrieveTimeout
	}
	if c.Memory.EventWindow == 0 {
		c.Memory.EventWindow = DefaultEventWindow
	}
	if c.Memory.RecordWindow == 0 {
		c.Memory.RecordWindow = DefaultRecordWindow
	}
	if c.Runtime != "" && c.Runtime != RuntimeAgentCore {
		return nil, fmt.Errorf("%s %q is unknown: use %q, or leave it unset for a self-hosted server", src.name("runtime", "TENDRIL_RUNTIME"), c.Runtime, RuntimeAgentCore)
	}
	if c.AgentCore() && c.Addr == Default().Addr {
		// The AgentCore Runtime contract: 0.0.0.0:8080.
		c.Addr = AgentCoreAddr
	}
	if c.Model.VisionID == "" {
		c.Model.VisionID = c.Model.ID
	}
	return &c, nil
}

// applyEnv applies the environment overrides. A boolean variable takes
// strconv.ParseBool's forms (1, t, true, 0, f, false, any case), and
// TELEGRAM_ALLOWED_CHAT_IDS comma-separated integer chat IDs; any other
// value is an error naming the variable, never silently ignored.
func (c *Config) applyEnv(get func(string) string) error {
	set := func(dst *string, name string) {
		if v := get(name); v != "" {
			*dst = v
		}
	}
	set(&c.Addr, "TENDRIL_ADDR")
	set(&c.Runtime, "TENDRIL_RUNTIME")
	setFrom := func(dst, from *string, name string) {
		if v := get(name); v != "" {
			*dst, *from = v, name
		}
	}
	setFrom(&c.Agent.PersonaFile, &c.Agent.PersonaFileFrom, "TENDRIL_PERSONA_FILE")
	setFrom(&c.Agent.SkillsDir, &c.Agent.SkillsDirFrom, "TENDRIL_SKILLS_DIR")
	setFrom(&c.Agent.SkillsManifest, &c.Agent.SkillsManifestFrom, "TENDRIL_SKILLS_MANIFEST")
	boolean := func(dst *bool, name string) error {
		v := strings.TrimSpace(get(name))
		if v == "" {
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s %q: want 1 or 0 (true or false)", name, v)
		}
		*dst = b
		return nil
	}
	if err := boolean(&c.Ephemeral, "TENDRIL_EPHEMERAL"); err != nil {
		return err
	}
	if v := get("TENDRIL_AUTH_TOKEN"); v != "" {
		// HTTP strips a header value's surrounding blanks, so a token
		// with them could never match a bearer header: trim here, and
		// refuse one that is all blanks (a quoting accident, not a secret).
		if c.AuthToken = strings.TrimSpace(v); c.AuthToken == "" {
			return fmt.Errorf("TENDRIL_AUTH_TOKEN is set but blank: %s, or unset it to serve loopback only", makeToken)
		}
	}
	set(&c.Session.Fsync, "TENDRIL_SESSION_FSYNC")
	set(&c.DatabaseURL, "TENDRIL_DATABASE_URL")
	set(&c.RedisURL, "TENDRIL_REDIS_URL")
	set(&c.Model.ID, "MODEL_ID")
	set(&c.Model.VisionID, "VISION_MODEL_ID")
	set(&c.Memory.Embedder, "EMBEDDING_MODEL_ID")
	set(&c.Providers.AnthropicAPIKey, "ANTHROPIC_API_KEY")
	set(&c.Providers.AnthropicBaseURL, "ANTHROPIC_BASE_URL")
	set(&c.Providers.OpenAIAPIKey, "OPENAI_API_KEY")
	set(&c.Providers.OpenAIBaseURL, "OPENAI_BASE_URL")
	set(&c.Providers.OllamaBaseURL, "OLLAMA_BASE_URL")
	set(&c.Providers.BedrockEndpoint, "AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
	set(&c.Providers.AWSRegion, "AWS_REGION")
	set(&c.Telegram.BotToken, "TELEGRAM_BOT_TOKEN")
	set(&c.Telegram.WebhookSecret, "TELEGRAM_WEBHOOK_SECRET")
	set(&c.Telegram.APIURL, "TELEGRAM_API_URL")
	if v := get("TELEGRAM_ALLOWED_CHAT_IDS"); strings.TrimSpace(v) != "" {
		var ids []int64
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue // "1,2," and "1, ,2": empty entries are separators
			}
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return fmt.Errorf("TELEGRAM_ALLOWED_CHAT_IDS: %q is not a chat ID (want comma-separated integers, e.g. 123456789,-1001234567890)", f)
			}
			ids = append(ids, id)
		}
		c.Telegram.AllowedChatIDs = append(c.Telegram.AllowedChatIDs, ids...) // merged with the file's (SPEC)
	}
	return boolean(&c.Tools.EnableExec, "TENDRIL_ENABLE_EXEC_TOOLS")
}

// Masked returns a copy with secrets replaced by "****abcd" (last 4 kept).
func (c Config) Masked() Config {
	m := func(s string) string {
		if s == "" {
			return ""
		}
		if len(s) <= 8 {
			return "****"
		}
		return "****" + s[len(s)-4:]
	}
	c.AuthToken = m(c.AuthToken)
	c.Providers.AnthropicAPIKey = m(c.Providers.AnthropicAPIKey)
	c.Providers.OpenAIAPIKey = m(c.Providers.OpenAIAPIKey)
	c.Telegram.BotToken = m(c.Telegram.BotToken)
	c.Telegram.WebhookSecret = m(c.Telegram.WebhookSecret)
	c.DatabaseURL = maskURL(c.DatabaseURL)
	c.RedisURL = maskURL(c.RedisURL)
	for _, u := range []*string{&c.Providers.AnthropicBaseURL, &c.Providers.OpenAIBaseURL, &c.Providers.OllamaBaseURL,
		&c.Providers.BedrockEndpoint, &c.Telegram.APIURL, &c.Tools.WeatherBaseURL, &c.Tools.GeocodingBaseURL} {
		*u = maskURL(*u)
	}
	mcp := make(map[string]MCPServer, len(c.MCP))
	for name, s := range c.MCP {
		s.URL = maskURL(s.URL)
		if len(s.Env) > 0 {
			env := make(map[string]string, len(s.Env))
			for k, v := range s.Env {
				env[k] = m(v)
			}
			s.Env = env
		}
		if len(s.Headers) > 0 {
			h := make(map[string]string, len(s.Headers))
			for k, v := range s.Headers {
				h[k] = m(v)
			}
			s.Headers = h
		}
		mcp[name] = s
	}
	if c.MCP != nil {
		c.MCP = mcp
	}
	return c
}

func maskURL(s string) string {
	// Keyword DSNs: "host=db password=secret".
	s = dsnSecret.ReplaceAllString(s, "${1}****")
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return s
	}
	if u.User != nil {
		// The user name is not a secret and tells the operator which role
		// connects; the password is (Redacted writes "xxxxx").
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx") // a lone user part may be a token
		}
	}
	if q := u.Query(); len(q) > 0 {
		changed := false
		for k := range q {
			lk := strings.ToLower(k)
			if strings.Contains(lk, "key") || strings.Contains(lk, "token") || strings.Contains(lk, "secret") || strings.Contains(lk, "pass") || strings.Contains(lk, "sig") {
				q.Set(k, "****")
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

var dsnSecret = regexp.MustCompile(`(?i)(\b(?:password|passwd|pwd|sslpassword)\s*=\s*)('[^']*'|\S+)`)

// MinAuthTokenBytes is the shortest TENDRIL_AUTH_TOKEN accepted where a
// token is required (a non-loopback address): 16 bytes, 128 bits when
// random.
const MinAuthTokenBytes = 16

const makeToken = "make one with `openssl rand -hex 32`"

// CheckAddr reports whether addr is a host:port; name says where it came
// from ("--addr", "addr (from TENDRIL_ADDR)", "<file>:<line>:<column>:
// addr"). The error is `<name> "<addr>": <why> (want host:port, …)`.
func CheckAddr(name, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err)
		}
		return fmt.Errorf("%s %q: %v (want host:port, e.g. 127.0.0.1:8080)", name, addr, err)
	}
	return nil
}

// IsLoopback reports whether addr ("host:port") binds only loopback:
// localhost or a loopback IP. An empty host binds every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckAuthToken reports an auth token too weak for where c.Addr binds:
// off loopback (outside AgentCore mode, where the token is optional) the
// token guards the API and the dashboard, so it must be at least
// MinAuthTokenBytes long. A missing token there is the server's own
// error (runtime.New); blanks were trimmed by Load.
func (c *Config) CheckAuthToken() error {
	if c.AuthToken == "" || c.AgentCore() || IsLoopback(c.Addr) {
		return nil
	}
	if len(c.AuthToken) < MinAuthTokenBytes {
		return fmt.Errorf("authToken (TENDRIL_AUTH_TOKEN) is %d bytes: a token guarding non-loopback address %s must be at least %d bytes; %s", len(c.AuthToken), c.Addr, MinAuthTokenBytes, makeToken)
	}
	return nil
}

// nonNegative is a count or duration that must not be negative.
type nonNegative struct {
	key string
	v   int64
}

// validate rejects values that cannot mean anything, naming the key and
// where its value came from (src.name).
func (c *Config) validate(src sources) error {
	if c.AuthToken != "" && strings.TrimSpace(c.AuthToken) == "" {
		// applyEnv has refused a blank TENDRIL_AUTH_TOKEN: this one is the file's.
		return fmt.Errorf("%s is blank: %s, or leave it unset to serve loopback only", src.name("authToken", ""), makeToken)
	}
	c.AuthToken = strings.TrimSpace(c.AuthToken)
	if err := CheckAddr(src.name("addr", "TENDRIL_ADDR"), c.Addr); err != nil {
		return err
	}
	checks := []nonNegative{
		{"model.timeout", int64(c.Model.Timeout)},
		{"model.maxRetries", int64(c.Model.MaxRetries)},
		{"model.maxTokens", int64(c.Model.MaxTokens)},
		{"model.contextWindow", int64(c.Model.ContextWindow)},
		{"agent.maxToolIterations", int64(c.Agent.MaxToolIterations)},
		{"agent.toolTimeout", int64(c.Agent.ToolTimeout)},
		{"session.maxHistoryMessages", int64(c.Session.MaxHistoryMessages)},
		{"session.maxHistoryTokens", int64(c.Session.MaxHistoryTokens)},
		{"session.compaction.keepLast", int64(c.Session.Compaction.KeepLast)},
		{"memory.eventExpiryDays", int64(c.Memory.EventExpiryDays)},
		{"memory.extractEveryTurns", int64(c.Memory.ExtractEveryTurns)},
		{"memory.idleAfter", int64(c.Memory.IdleAfter)},
		{"memory.topK", int64(c.Memory.TopK)},
		{"memory.retrieveTimeout", int64(c.Memory.RetrieveTimeout)},
		{"state.halfLife", int64(c.State.HalfLife)},
		{"state.breaker.cooldownTurns", int64(c.State.Breaker.CooldownTurns)},
		{"approval.expiry", int64(c.Approval.Expiry)},
		{"telegram.albumDebounce", int64(c.Telegram.AlbumDebounce)},
		{"shutdownGrace", int64(c.ShutdownGrace)},
		{"shutdownDelay", int64(c.ShutdownDelay)},
		{"maxBodyBytes", c.MaxBodyBytes},
	}
	for ch, l := range c.Session.ChannelOverrides {
		checks = append(checks,
			nonNegative{"session.channelOverrides." + ch + ".maxHistoryMessages", int64(l.MaxHistoryMessages)},
			nonNegative{"session.channelOverrides." + ch + ".maxHistoryTokens", int64(l.MaxHistoryTokens)})
	}
	for _, n := range checks {
		if n.v < 0 {
			return fmt.Errorf("%s is negative: want 0 or more", src.name(n.key, ""))
		}
	}
	if s := c.Memory.BlockShare; s < 0 || s > 1 {
		return fmt.Errorf("%s %v: want a share of model.contextWindow, 0 < x ≤ 1 (0: the default 0.15)", src.name("memory.blockShare", ""), s)
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"session.compaction.threshold", c.Session.Compaction.Threshold}, {"memory.stageThreshold", c.Memory.StageThreshold}, {"memory.storeThreshold", c.Memory.StoreThreshold}} {
		if f.v < 0 || f.v > 1 {
			return fmt.Errorf("%s %v: want a fraction from 0 to 1", src.name(f.key, ""), f.v)
		}
	}
	switch c.Session.Fsync {
	case "", "always", "batch", "never":
	default:
		return fmt.Errorf("%s %q: want always, batch or never", src.name("session.fsync", "TENDRIL_SESSION_FSYNC"), c.Session.Fsync)
	}
	// What Limits would refuse, with the key's place in the file.
	if r := c.Session.Retention; r.MaxAge != "" {
		if _, err := ParseAge(r.MaxAge); err != nil {
			return fmt.Errorf("%s: %w", src.name("session.retention.maxAge", ""), err)
		}
	}
	if r := c.Session.Retention; r.MaxSize != "" {
		if _, err := ParseSize(r.MaxSize); err != nil {
			return fmt.Errorf("%s: %w", src.name("session.retention.maxSize", ""), err)
		}
	}
	return nil
}
