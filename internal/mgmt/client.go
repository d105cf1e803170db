package mgmt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/assistant"
)

// SocketName is the management socket's file name in $TENDRIL_HOME.
const SocketName = "tendril.sock"

// Error is a failed call: the HTTP status and the API's error code.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Client calls the management API and POST /invocations.
type Client struct {
	base  string // "http://tendril" for the socket
	token string
	http  *http.Client
	// Remote is true when a running server answers, false in-process.
	Remote bool
}

// DialSocket connects to a server's unix socket. It fails fast (no
// server, a stale socket file) so callers can fall back to in-process.
func DialSocket(ctx context.Context, path string) (*Client, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	conn.Close()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", path)
	}}
	return &Client{base: "http://tendril", http: &http.Client{Transport: tr}, Remote: true}, nil
}

// NewHTTP returns a client of a server at baseURL ("http://host:8080")
// with an optional bearer token.
func NewHTTP(baseURL, token string) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: &http.Client{}, Remote: true}
}

// InProcess returns a client that calls h directly, with no network: the
// CLI's path when no server runs.
func InProcess(h http.Handler) *Client {
	return &Client{base: "http://tendril", http: &http.Client{Transport: handlerTransport{h}}}
}

// handlerTransport runs requests through a handler. Streaming responses
// (deliveries) are not supported in-process; the CLI subscribes directly.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// Do sends method path?query with body (JSON-encoded unless nil) and
// decodes a 2xx JSON response into out (when not nil). A non-2xx
// response is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if w, ok := out.(io.Writer); ok {
		_, err := io.Copy(w, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) != nil || e.Message == "" {
		e.Message = strings.TrimSpace(string(b))
	}
	return nil, &Error{Status: resp.StatusCode, Code: e.Error, Message: e.Message}
}

// Timeouts bound a call whose context has no deadline, so a frozen server
// (SIGSTOP) cannot hang the CLI: management calls get APITimeout, turns
// TurnTimeout (the server's own turn deadline is 5 minutes).
const (
	APITimeout  = 2 * time.Minute
	TurnTimeout = 6 * time.Minute
)

func withDefault(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// API calls a management route: path is relative to Prefix.
func (c *Client) API(ctx context.Context, method, path string, query url.Values, body, out any) error {
	ctx, cancel := withDefault(ctx, APITimeout)
	defer cancel()
	return c.Do(ctx, method, Prefix+path, query, body, out)
}

// Invoke runs one turn through POST /invocations and returns the raw
// response body (the /invocations JSON envelope) and its HTTP status.
func (c *Client) Invoke(ctx context.Context, req any) (map[string]any, int, error) {
	ctx, cancel := withDefault(ctx, TurnTimeout)
	defer cancel()
	b, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/invocations", bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, 0, fmt.Errorf("POST /invocations: %w", err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, resp.StatusCode, fmt.Errorf("POST /invocations: decode: %w", err)
	}
	return body, resp.StatusCode, nil
}

// Deliveries streams replies produced outside a request for actorID (turns
// resumed after an approval) until ctx ends or the server goes away.
func (c *Client) Deliveries(ctx context.Context, actorID string) (<-chan assistant.Delivery, error) {
	resp, err := c.send(ctx, http.MethodGet, Prefix+"/deliveries", url.Values{"actor": {actorID}}, nil)
	if err != nil {
		return nil, err
	}
	ch := make(chan assistant.Delivery)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var d assistant.Delivery
			if json.Unmarshal([]byte(data), &d) != nil {
				continue
			}
			select {
			case ch <- d:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// IsStatus reports whether err is an *Error with HTTP status st.
func IsStatus(err error, st int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == st
}
