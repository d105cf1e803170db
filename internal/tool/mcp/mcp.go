// Package mcp is Tendril's MCP client (https://modelcontextprotocol.io),
// built on the official Go SDK (github.com/modelcontextprotocol/go-sdk).
// Servers configured in tendril.json ("mcpServers") over stdio (Command) or
// streamable HTTP (URL) contribute their tools as tool.Tool values named
// "<server>__<tool>", which the agent offers to the model and sends through
// the same approval gate as built-in tools.
//
// Connections are lazy and self-healing (SPEC §1 "Readiness"): a server is
// started or connected on first use, and one that died (process exited,
// HTTP session gone) is restarted on the next Tools or tool call.
package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tendrilai/tendril/internal/tool"
)

// ServerConfig is one MCP server: Command (stdio) or URL (streamable HTTP),
// exactly one of them.
type ServerConfig struct {
	Command string            // executable for stdio servers
	Args    []string          // its arguments
	Env     map[string]string // extra environment for the command (see below)
	URL     string            // streamable HTTP endpoint, e.g. http://127.0.0.1:8931/mcp
	Headers map[string]string // extra HTTP headers, e.g. Authorization
	// Class is the tool class of every tool of this server; default
	// tool.ClassWrite, so the gate asks before any of them runs. Set
	// tool.ClassRead only for servers you trust to have no side effects;
	// the servers' own readOnlyHint annotations are not trusted.
	Class tool.Class
}

// Manager owns the connections to the configured MCP servers. It is safe
// for concurrent use.
type Manager struct {
	logger  *slog.Logger
	servers []*server // sorted by name
}

// SafeEnv lists the variables a stdio server inherits from Tendril's
// environment; everything else (API keys, tokens) stays out unless set in
// ServerConfig.Env.
var SafeEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TZ", "TMPDIR", "GOCOVERDIR"}

// ConnectTimeout bounds starting or connecting to one server.
const ConnectTimeout = 15 * time.Second

// After a failed connect, the next attempt waits RetryBackoff, doubling
// per consecutive failure up to MaxRetryBackoff, so an unreachable server
// does not slow every turn. Calls in the window fail at once with the last
// error (wrapping ErrBackoff).
const (
	RetryBackoff    = time.Second
	MaxRetryBackoff = time.Minute
)

// ErrBackoff is wrapped by errors returned while a server that failed to
// connect waits before the next attempt.
var ErrBackoff = errors.New("waiting before reconnecting")

// MaxDescriptionRunes caps a server-provided tool description in the
// prompt; servers are not trusted to keep them short.
const MaxDescriptionRunes = 1024

// Separator joins the server prefix and the tool name.
const Separator = "__"

// MaxResultBytes caps the text returned by one MCP tool call (64 KiB).
const MaxResultBytes = 64 << 10

// NewManager returns a manager for servers, keyed by server name. Nothing
// is started until Tools or a tool call needs it. logger may be nil.
func NewManager(servers map[string]ServerConfig, logger *slog.Logger) *Manager {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := &Manager{logger: logger}
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	prefixes := make(map[string]bool)
	for _, name := range names {
		cfg := servers[name]
		if cfg.Class == "" {
			cfg.Class = tool.ClassWrite
		}
		// Distinct server names stay distinct prefixes after sanitising
		// ("a b" and "a_b" both sanitise to "a_b").
		prefix := sanitize(name)
		if len(prefix) > 40 || prefixes[prefix] {
			sum := sha256.Sum256([]byte(name))
			if len(prefix) > 31 {
				prefix = prefix[:31]
			}
			prefix += "_" + hex.EncodeToString(sum[:4])
		}
		prefixes[prefix] = true
		m.servers = append(m.servers, &server{name: name, prefix: prefix, cfg: cfg, logger: logger.With("mcp_server", name), now: time.Now})
	}
	return m
}

// Tools connects to every server that is not connected (restarting dead
// ones), lists their tools (cached per connection, refreshed when a server
// announces a change) and returns them wrapped as tool.Tool, sorted by
// server then tool. A server that fails is logged and left out; its error
// is returned joined with the others, alongside the tools of the healthy
// servers, so the caller can use what it got and report err.
func (m *Manager) Tools(ctx context.Context) ([]tool.Tool, error) {
	var out []tool.Tool
	var errs []error
	for _, s := range m.servers {
		ts, err := s.listTools(ctx)
		if err != nil {
			s.logger.Warn("mcp server unavailable", "err", err)
			errs = append(errs, fmt.Errorf("mcp server %s: %w", s.name, err))
			continue
		}
		out = append(out, ts...)
	}
	return out, errors.Join(errs...)
}

// Check connects to every server and reports each one's error (nil when
// healthy), for `tendril doctor`.
func (m *Manager) Check(ctx context.Context) map[string]error {
	out := make(map[string]error, len(m.servers))
	for _, s := range m.servers {
		_, err := s.listTools(ctx)
		out[s.name] = err
	}
	return out
}

// Close disconnects every server and stops stdio processes (closing stdin,
// then SIGTERM, then SIGKILL after a few seconds each).
func (m *Manager) Close() error {
	var errs []error
	for _, s := range m.servers {
		if err := s.close(); err != nil {
			errs = append(errs, fmt.Errorf("mcp server %s: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}

// server is one configured server and its current connection.
type server struct {
	name, prefix string
	cfg          ServerConfig
	logger       *slog.Logger

	mu    sync.Mutex
	conn  *conn
	tools []tool.Tool // wrapped tools cached for conn; nil = list again
	// Connect failures: count, time of the last one and its error.
	failures int
	failedAt time.Time
	lastErr  error
	now      func() time.Time
}

// conn is one live session; dead is closed when it ends.
type conn struct {
	cs   *sdk.ClientSession
	dead chan struct{}
}

func (c *conn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// session returns a live session, (re)connecting when there is none or the
// last one died.
func (s *server) session(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.alive() {
		return s.conn, nil
	}
	if s.conn != nil {
		s.logger.Info("mcp server connection lost; restarting")
		go s.conn.cs.Close() // reap the old process without holding the lock
		s.conn, s.tools = nil, nil
	}
	if s.failures > 0 {
		wait := RetryBackoff << min(s.failures-1, 6)
		if wait > MaxRetryBackoff {
			wait = MaxRetryBackoff
		}
		if left := wait - s.now().Sub(s.failedAt); left > 0 {
			return nil, fmt.Errorf("%w (%s left, %d failures): %w", ErrBackoff, left.Round(time.Millisecond), s.failures, s.lastErr)
		}
	}
	c, err := s.connect(ctx)
	if err != nil {
		if ctx.Err() == nil { // our own cancellation is not the server's fault
			s.failures++
			s.failedAt, s.lastErr = s.now(), err
		}
		return nil, err
	}
	s.failures, s.lastErr = 0, nil
	s.conn = c
	return c, nil
}

func (s *server) connect(ctx context.Context) (*conn, error) {
	var transport sdk.Transport
	switch {
	case s.cfg.Command != "" && s.cfg.URL != "":
		return nil, errors.New("set either command or url, not both")
	case s.cfg.Command != "":
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Env = environ(s.cfg.Env)
		cmd.Stderr = &logWriter{logger: s.logger}
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	case s.cfg.URL != "":
		hc := &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: s.cfg.Headers}}
		transport = &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}
	default:
		return nil, errors.New("set command (stdio) or url (streamable HTTP)")
	}
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	c := &conn{dead: make(chan struct{})}
	client := sdk.NewClient(&sdk.Implementation{Name: "tendril", Version: "v1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			s.mu.Lock()
			if s.conn == c {
				s.tools = nil
			}
			s.mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	c.cs = cs
	go func() {
		_ = cs.Wait()
		close(c.dead)
	}()
	s.logger.Info("mcp server connected")
	return c, nil
}

// listTools returns the server's tools wrapped as tool.Tool, listing them
// once per connection (again after a tools/list_changed notification).
func (s *server) listTools(ctx context.Context) ([]tool.Tool, error) {
	for attempt := 0; ; attempt++ {
		c, err := s.session(ctx)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		cached := s.tools
		current := s.conn == c
		s.mu.Unlock()
		if current && cached != nil {
			return cached, nil
		}
		var list []*sdk.Tool
		broken := false
		for t, err := range c.cs.Tools(ctx, nil) {
			if err != nil {
				if attempt == 0 && ctx.Err() == nil && s.dropIfBroken(c, err) {
					broken = true
					break
				}
				return nil, fmt.Errorf("list tools: %w", err)
			}
			list = append(list, t)
		}
		if broken {
			continue // the connection broke: reconnect once
		}
		wrapped := make([]tool.Tool, 0, len(list))
		used := make(map[string]bool)
		for _, d := range list {
			if d == nil {
				continue
			}
			name := toolName(s.prefix, d.Name, used)
			used[name] = true
			wrapped = append(wrapped, &mcpTool{srv: s, name: name, remote: d.Name, desc: describe(s.name, d), schema: inputSchema(d), class: s.cfg.Class})
		}
		s.mu.Lock()
		if s.conn == c {
			s.tools = wrapped
		}
		s.mu.Unlock()
		return wrapped, nil
	}
}

// call runs one tool, restarting a dead server first. When the call fails
// because the connection is gone (the request could not be delivered, or
// the server lost the session), it reconnects and retries exactly once.
func (s *server) call(ctx context.Context, name string, args json.RawMessage) (*sdk.CallToolResult, error) {
	for attempt := 0; ; attempt++ {
		c, err := s.session(ctx)
		if err != nil {
			return nil, fmt.Errorf("mcp server %s unavailable: %w", s.name, err)
		}
		res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err == nil {
			return res, nil
		}
		if attempt == 0 && ctx.Err() == nil && s.dropIfBroken(c, err) {
			s.logger.Info("mcp call hit a dead connection; reconnecting and retrying once", "tool", name, "err", err)
			continue
		}
		return nil, fmt.Errorf("mcp %s %s: %w", s.name, name, err)
	}
}

// dropIfBroken forgets c when err shows the connection (not the tool) has
// failed, so the next use reconnects. It reports whether err is a
// connection failure.
func (s *server) dropIfBroken(c *conn, err error) bool {
	if !connectionError(c, err) {
		return false
	}
	s.mu.Lock()
	if s.conn == c {
		s.conn, s.tools = nil, nil
		go c.cs.Close()
	}
	s.mu.Unlock()
	return true
}

// connectionError reports whether err means the connection is unusable:
// the SDK said it is closed or the session is missing, or the session has
// ended. JSON-RPC errors from a live server (unknown tool, bad params) are
// not connection errors.
func connectionError(c *conn, err error) bool {
	if errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, sdk.ErrSessionMissing) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, os.ErrClosed) {
		return true
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		return false
	}
	if !c.alive() {
		return true
	}
	// The process may be exiting right now: give Wait a moment to notice.
	select {
	case <-c.dead:
		return true
	case <-time.After(100 * time.Millisecond):
		return false
	}
}

func (s *server) close() error {
	s.mu.Lock()
	c := s.conn
	s.conn, s.tools = nil, nil
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	err := c.cs.Close()
	var ee *exec.ExitError
	if errors.As(err, &ee) || errors.Is(err, sdk.ErrConnectionClosed) {
		return nil // the process exited on its own or was already gone
	}
	return err
}

// mcpTool is one server tool as a tool.Tool.
type mcpTool struct {
	srv    *server
	name   string // "<server>__<tool>", sanitised
	remote string // the server's own tool name
	desc   string
	schema json.RawMessage
	class  tool.Class
}

func (t *mcpTool) Name() string            { return t.name }
func (t *mcpTool) Description() string     { return t.desc }
func (t *mcpTool) Schema() json.RawMessage { return t.schema }
func (t *mcpTool) Class() tool.Class       { return t.class }

// Run calls the tool on its server. A result flagged isError is returned as
// an error carrying the server's text.
func (t *mcpTool) Run(ctx context.Context, call tool.Call) (string, error) {
	args := call.Args
	if len(strings.TrimSpace(string(args))) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return "", errors.New("arguments are not valid JSON")
	}
	res, err := t.srv.call(ctx, t.remote, args)
	if err != nil {
		return "", err
	}
	text := resultText(res)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error"
		}
		return "", errors.New(text)
	}
	return text, nil
}

// resultText flattens a CallToolResult: text blocks joined by newlines,
// other content summarised, structured content as JSON when there is no
// text, capped at MaxResultBytes.
func resultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch x := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, x.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", x.MIMEType, len(x.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", x.MIMEType, len(x.Data)))
		case *sdk.EmbeddedResource:
			if x.Resource != nil && x.Resource.Text != "" {
				parts = append(parts, x.Resource.Text)
			} else if x.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", x.Resource.URI))
			}
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s]", x.URI))
		default:
			if b, err := json.Marshal(c); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	s := strings.Join(parts, "\n")
	if len(s) > MaxResultBytes {
		s = strings.ToValidUTF8(s[:MaxResultBytes], "") + fmt.Sprintf("\n[truncated: %d bytes]", len(s))
	}
	return s
}

func describe(server string, d *sdk.Tool) string {
	desc := strings.TrimSpace(d.Description)
	if desc == "" {
		desc = d.Title
	}
	if desc == "" {
		desc = d.Name
	}
	if r := []rune(desc); len(r) > MaxDescriptionRunes {
		desc = string(r[:MaxDescriptionRunes]) + "…"
	}
	return fmt.Sprintf("[MCP server %s, tool %s] %s", server, d.Name, desc)
}

// inputSchema returns the tool's JSON Schema, forcing "type": "object" as
// the model APIs require.
func inputSchema(d *sdk.Tool) json.RawMessage {
	var m map[string]any
	if b, err := json.Marshal(d.InputSchema); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	if m == nil {
		m = map[string]any{}
	}
	m["type"] = "object"
	if _, ok := m["properties"]; !ok {
		m["properties"] = map[string]any{}
	}
	b, _ := json.Marshal(m)
	return b
}

// sanitize maps s onto [a-zA-Z0-9_-], replacing anything else with "_".
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

// toolName builds "<prefix>__<tool>" within 64 characters. A name that had
// to be shortened, or that collides with one already used, gets a short
// hash of the original so it stays unique and stable.
func toolName(prefix, remote string, used map[string]bool) string {
	name := prefix + Separator + sanitize(remote)
	if len(name) <= 64 && !used[name] && tool.ValidName(name) {
		return name
	}
	sum := sha256.Sum256([]byte(prefix + "\x00" + remote))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if len(name) > 64-len(suffix) {
		name = name[:64-len(suffix)]
	}
	return name + suffix
}

// environ is SafeEnv from the process plus extra.
func environ(extra map[string]string) []string {
	var env []string
	for _, k := range SafeEnv {
		if v, ok := os.LookupEnv(k); ok {
			if _, override := extra[k]; !override {
				env = append(env, k+"="+v)
			}
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// logWriter sends a stdio server's stderr to the debug log, one record
// per line, each line capped at 2000 bytes.
type logWriter struct {
	logger *slog.Logger
	mu     sync.Mutex
	buf    []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := w.buf[:i]
		if len(line) > 2000 {
			line = line[:2000]
		}
		w.logger.Debug("mcp server stderr", "line", string(line))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 8192 { // a very long line without newline: keep the tail
		w.buf = append([]byte(nil), w.buf[len(w.buf)-8192:]...)
	}
	return len(p), nil
}
