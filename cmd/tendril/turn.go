package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/mgmt"
)

// turn runs one turn (POST /invocations) and returns its body, as
// Client.Invoke does, but calls waiting once for each approval request the
// turn waits behind before it runs: a paused turn owns its session until
// its tool call is decided, and a message sent meanwhile waits (up to the
// approval's expiry) with nothing else to show. A server streams those
// waits as "approval_wait" frames; in-process the assistant reports them
// directly. waiting runs on the caller's goroutine.
func (c *conn) turn(ctx context.Context, req any, waiting func(agent.PendingApproval)) (map[string]any, error) {
	if c.sock == "" {
		if c.local != nil && waiting != nil {
			ctx = c.local.WithApprovalWait(ctx, waiting)
		}
		body, _, err := c.Invoke(ctx, req)
		return body, err
	}
	return streamTurn(ctx, c.sock, req, waiting)
}

// streamTurn posts req to the server on the socket sock asking for
// Server-Sent Events, reports approval_wait frames to waiting and returns
// the final frame's body (the /invocations body). A request refused
// before the turn runs is answered with the plain JSON envelope.
func streamTurn(ctx context.Context, sock string, req any, waiting func(agent.PendingApproval)) (map[string]any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, mgmt.TurnTimeout)
		defer cancel()
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://tendril/invocations", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Transport: tr}).Do(hr)
	if err != nil {
		return nil, fmt.Errorf("POST /invocations: %w", err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return nil, fmt.Errorf("POST /invocations: decode: %w", err)
		}
		return body, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var frame map[string]any
		if err := json.Unmarshal([]byte(data), &frame); err != nil {
			return nil, fmt.Errorf("POST /invocations: bad frame: %w", err)
		}
		switch frame["type"] {
		case "approval_wait", "approval_decided":
			var f struct {
				Approval agent.PendingApproval `json:"approval"`
			}
			if json.Unmarshal([]byte(data), &f) == nil && f.Approval.RequestID != "" && waiting != nil {
				waiting(f.Approval)
			}
		case "final":
			delete(frame, "type")
			return frame, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("POST /invocations: %w", err)
	}
	return nil, errors.New("POST /invocations: the server closed the stream before the turn finished")
}

// approvalWaitLine is the line invoke and chat print on stderr while a
// turn waits behind the paused tool call p of its session, and once that
// call's request is decided (p.Status set).
func approvalWaitLine(p agent.PendingApproval) string {
	id := clip(oneLine(p.RequestID), 64)
	tool := clip(oneLine(p.ToolName), 64)
	switch p.Status {
	case "":
		return fmt.Sprintf("waiting for approval %s: %s %s — approve with: tendril approvals approve %s (or deny)",
			id, tool, clip(oneLine(p.Args), 100), id)
	case "approved", "executed":
		return fmt.Sprintf("approval %s approved: the paused %s call runs, then this message", id, tool)
	}
	return fmt.Sprintf("approval %s %s: the paused %s call did not run; this message runs next", id, clip(oneLine(p.Status), 32), tool)
}
