// Package sessionhttp is the session management API under /api/sessions,
// for the dashboard and scripts. It mounts on the runtime's mux, which
// applies auth (SPEC §1: never open on a non-loopback address without a
// token).
//
//	GET    /api/sessions                              {"ok":true,"sessions":[{"key":"telegram:1","agentId":..,"channel":..,"id":..}]}
//	GET    /api/sessions/{channel}/{id}[?tree=1]      {"ok":true,"key":..,"leaf":..,"nodes":[..],"branches":[..],"tree":{..}}
//	POST   /api/sessions/{channel}/{id}/branch        body {"from":"msg_.."} → {"ok":true,"leaf":"msg_.."}
//	POST   /api/sessions/{channel}/{id}/leaf          body {"nodeId":"msg_.."} → {"ok":true,"leaf":"msg_.."}
//	GET    /api/sessions/{channel}/{id}/export?format=json|jsonl|md
//	DELETE /api/sessions/{channel}/{id}               {"ok":true}
//
// {channel} and {id} are single path segments, URL-escaped ("%2F" for '/').
// Errors are {"ok":false,"error":CODE,"message":..} with CODE
// INVALID_REQUEST (400), NOT_FOUND (404) or INTERNAL_ERROR (500).
package sessionhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/tendrilai/tendril/internal/session"
)

// MaxBodyBytes caps POST bodies.
const MaxBodyBytes = 64 << 10

type api struct {
	st    session.Store
	agent string
}

// Handler serves the API above for the sessions of agentID.
func Handler(store session.Store, agentID string) http.Handler {
	a := &api{st: store, agent: agentID}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/sessions", a.list)
	mux.HandleFunc("GET /api/sessions/{$}", a.list)
	mux.HandleFunc("GET /api/sessions/{channel}/{id}", a.show)
	mux.HandleFunc("POST /api/sessions/{channel}/{id}/branch", a.branch)
	mux.HandleFunc("POST /api/sessions/{channel}/{id}/leaf", a.leaf)
	mux.HandleFunc("GET /api/sessions/{channel}/{id}/export", a.export)
	mux.HandleFunc("DELETE /api/sessions/{channel}/{id}", a.clear)
	mux.HandleFunc("/api/sessions/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, http.StatusNotFound, "NOT_FOUND", "no such session endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// KeyJSON is a session key in listings.
type KeyJSON struct {
	Key     string `json:"key"` // "<channel>:<id>"
	AgentID string `json:"agentId"`
	Channel string `json:"channel"`
	ID      string `json:"id"`
}

// Tree is the ?tree=1 shape: flat, so deep sessions do not nest deeply.
type Tree struct {
	Roots      []string            `json:"roots"`
	Children   map[string][]string `json:"children"`   // node id → child ids in append order
	ActivePath []string            `json:"activePath"` // root … active leaf
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"ok": false, "error": code, "message": msg})
}

func (a *api) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, session.ErrNotFound):
		writeErr(w, http.StatusNotFound, "NOT_FOUND", err.Error())
	case errors.Is(err, session.ErrInvalidKey), errors.Is(err, session.ErrInvalidNode):
		writeErr(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
	default:
		slog.Error("session api", "err", err)
		writeErr(w, http.StatusInternalServerError, "INTERNAL_ERROR", "session store error")
	}
}

func (a *api) key(w http.ResponseWriter, r *http.Request) (session.Key, bool) {
	k := session.Key{AgentID: a.agent, Channel: r.PathValue("channel"), ID: r.PathValue("id")}
	if err := k.Validate(); err != nil {
		writeErr(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		return k, false
	}
	return k, true
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	keys, err := a.st.List(r.Context(), a.agent)
	if err != nil {
		a.fail(w, err)
		return
	}
	out := make([]KeyJSON, len(keys))
	for i, k := range keys {
		out[i] = KeyJSON{Key: k.String(), AgentID: k.AgentID, Channel: k.Channel, ID: k.ID}
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "sessions": out})
}

func (a *api) show(w http.ResponseWriter, r *http.Request) {
	k, ok := a.key(w, r)
	if !ok {
		return
	}
	nodes, err := a.st.Nodes(r.Context(), k)
	if err != nil {
		a.fail(w, err)
		return
	}
	if len(nodes) == 0 {
		writeErr(w, http.StatusNotFound, "NOT_FOUND", "no session "+k.String())
		return
	}
	leaf, err := a.st.Leaf(r.Context(), k)
	if err != nil {
		a.fail(w, err)
		return
	}
	br, err := session.Branches(r.Context(), a.st, k)
	if err != nil {
		a.fail(w, err)
		return
	}
	resp := map[string]any{"ok": true, "key": KeyJSON{k.String(), k.AgentID, k.Channel, k.ID}, "leaf": leaf, "nodes": nodes, "branches": br}
	if r.URL.Query().Get("tree") == "1" {
		resp["tree"] = buildTree(nodes, leaf)
	}
	writeJSON(w, http.StatusOK, resp)
}

func buildTree(nodes []session.Node, leaf string) Tree {
	t := Tree{Roots: []string{}, Children: map[string][]string{}, ActivePath: []string{}}
	parent := make(map[string]string, len(nodes))
	for _, n := range nodes {
		parent[n.ID] = n.ParentID
	}
	for _, n := range nodes {
		if _, ok := parent[n.ParentID]; n.ParentID == "" || !ok {
			t.Roots = append(t.Roots, n.ID)
		} else {
			t.Children[n.ParentID] = append(t.Children[n.ParentID], n.ID)
		}
	}
	for id := leaf; id != "" && len(t.ActivePath) <= len(nodes); id = parent[id] {
		t.ActivePath = append(t.ActivePath, id)
	}
	for i, j := 0, len(t.ActivePath)-1; i < j; i, j = i+1, j-1 {
		t.ActivePath[i], t.ActivePath[j] = t.ActivePath[j], t.ActivePath[i]
	}
	return t
}

// decode reads a JSON object body into v, with a size cap and no unknown
// fields.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, http.StatusBadRequest, "INVALID_REQUEST", "bad JSON body: "+err.Error())
		return false
	}
	if dec.More() {
		writeErr(w, http.StatusBadRequest, "INVALID_REQUEST", "bad JSON body: trailing data")
		return false
	}
	return true
}

func (a *api) branch(w http.ResponseWriter, r *http.Request) {
	k, ok := a.key(w, r)
	if !ok {
		return
	}
	var body struct {
		From string `json:"from"`
	}
	if !decode(w, r, &body) {
		return
	}
	if body.From == "" {
		writeErr(w, http.StatusBadRequest, "INVALID_REQUEST", `"from" (a node id) is required`)
		return
	}
	if err := session.BranchFrom(r.Context(), a.st, k, body.From); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "leaf": body.From})
}

func (a *api) leaf(w http.ResponseWriter, r *http.Request) {
	k, ok := a.key(w, r)
	if !ok {
		return
	}
	var body struct {
		NodeID string `json:"nodeId"`
	}
	if !decode(w, r, &body) {
		return
	}
	if body.NodeID == "" {
		writeErr(w, http.StatusBadRequest, "INVALID_REQUEST", `"nodeId" is required`)
		return
	}
	if err := a.st.SetLeaf(r.Context(), k, body.NodeID); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "leaf": body.NodeID})
}

var contentTypes = map[string]string{
	session.FormatJSON:  "application/json",
	session.FormatJSONL: "application/x-ndjson",
	session.FormatMD:    "text/markdown; charset=utf-8",
}

func (a *api) export(w http.ResponseWriter, r *http.Request) {
	k, ok := a.key(w, r)
	if !ok {
		return
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = session.FormatJSON
	}
	ct, ok := contentTypes[format]
	if !ok {
		writeErr(w, http.StatusBadRequest, "INVALID_REQUEST", "format must be json, jsonl or md")
		return
	}
	nodes, err := a.st.Nodes(r.Context(), k)
	if err != nil {
		a.fail(w, err)
		return
	}
	if len(nodes) == 0 {
		writeErr(w, http.StatusNotFound, "NOT_FOUND", "no session "+k.String())
		return
	}
	var buf bytes.Buffer
	if err := session.Export(r.Context(), a.st, k, format, &buf); err != nil {
		a.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", ct)
	_, _ = io.Copy(w, &buf)
}

func (a *api) clear(w http.ResponseWriter, r *http.Request) {
	k, ok := a.key(w, r)
	if !ok {
		return
	}
	if err := a.st.Clear(r.Context(), k); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}
