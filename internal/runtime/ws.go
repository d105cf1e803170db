package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/coder/websocket"
)

// handleWS serves /ws, the AgentCore Runtime contract's WebSocket endpoint.
// Every text frame the client sends is one invocation: the JSON body of
// POST /invocations (aliases included), or plain text taken as "message"
// (anything but a JSON object is plain text).
// The session header of the upgrade request applies to every frame. Each
// turn answers with the SSE frames as text frames ({"type":"start"},
// {"type":"approval_wait"} while it waits behind a paused turn and
// {"type":"approval_decided"} when that turn's request is decided,
// {"type":"delta"}..., {"type":"final",...}); a frame that is not a turn
// (webhook update, cron tick) or fails validation answers one frame with
// "type":"final". Turns on one connection run one at a time, in order.
// Binary frames close the connection with 1003 (unsupported data).
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	// Auth (or the platform, in AgentCore mode) has already admitted the
	// caller, and no cookie authenticates it, so any Origin may connect.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered the failed handshake
	}
	defer c.CloseNow()
	c.SetReadLimit(s.opt.MaxBodyBytes)
	hdr := r.Header.Clone()
	// The connection lives until the client leaves or the server shuts
	// down; a turn detaches from it like /invocations' turns do.
	ctx := r.Context()
	var wmu sync.Mutex
	send := func(v any) {
		b, _ := json.Marshal(v)
		wmu.Lock()
		defer wmu.Unlock()
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opt.ShutdownGrace)
		defer cancel()
		_ = c.Write(wctx, websocket.MessageText, b)
	}
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) || errors.Is(err, context.Canceled) {
				return
			}
			s.opt.Logger.Debug("ws read", "err", err)
			return
		}
		if typ != websocket.MessageText {
			c.Close(websocket.StatusUnsupportedData, "text frames only")
			return
		}
		if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
			// Anything but a JSON object is the message itself.
			data, _ = json.Marshal(map[string]string{"message": string(data)})
		}
		cl, _, code, msg := s.parseInvocation(data, hdr)
		if code != "" {
			s.countError(code)
			send(map[string]any{"type": "final", "ok": false, "error": code, "message": msg})
			continue
		}
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opt.TurnTimeout)
		switch cl.kind {
		case callUpdate:
			_, body := s.serveUpdate(tctx, cl.update)
			body["type"] = "final"
			send(body)
		case callTick:
			_, body := s.serveTick(tctx)
			body["type"] = "final"
			send(body)
		default:
			s.runFrames(tctx, cl.req, send)
		}
		cancel()
	}
}
