// Package redisstore is the Redis session backend (SPEC §3 scale-out, named
// by the OpenClaw seed for multi-machine use). Several Tendril instances can
// share sessions through it.
//
// Layout, for a session with base B = <prefix>:{<agent>/<channel>/<id>}
// (each part session.EncodeID-encoded; the braces are a cluster hash tag):
//
//	B:nodes   hash  node id → node JSON (session.Node's JSON)
//	B:parent  hash  node id → parent id ("" for a root)
//	B:order   list  node ids in append order
//	B:leaf    string the active leaf id
//	<prefix>:sessions  set of session.Key JSON, for List
//
// Append, SetLeaf and Path are Lua scripts, so a turn's nodes are applied
// atomically (all or none, never interleaved with another writer) and Path
// walks parentId server-side in one round trip, O(max). The sessions set
// sits in another hash slot, so the store targets standalone or
// Sentinel-managed Redis, not Redis Cluster.
//
// Durability is Redis's: an acknowledged Append survives power loss only
// with appendonly yes and appendfsync always; with the Redis default
// (everysec) up to a second of turns can be lost.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tendrilai/tendril/internal/session"
)

// Store is the Redis session store; it implements session.Store and is safe
// for concurrent use.
type Store struct {
	rdb    *redis.Client
	prefix string
	now    func() time.Time
}

var _ session.Store = (*Store)(nil)

// New returns a Store using client (owned by the caller: Close does not
// close it) with every key under prefix ("tendril" when empty).
func New(client *redis.Client, prefix string) *Store {
	if prefix == "" {
		prefix = "tendril"
	}
	return &Store{rdb: client, prefix: prefix, now: time.Now}
}

func (s *Store) base(k session.Key) string {
	return s.prefix + ":{" + session.EncodeID(k.AgentID) + "/" + session.EncodeID(k.Channel) + "/" + session.EncodeID(k.ID) + "}"
}

func (s *Store) keys(k session.Key) []string {
	b := s.base(k)
	return []string{b + ":nodes", b + ":parent", b + ":order", b + ":leaf", s.prefix + ":sessions"}
}

var appendScript = redis.NewScript(`
local n = tonumber(ARGV[1])
local batch = {}
for i = 0, n - 1 do
  local id, p = ARGV[3 + i*3], ARGV[4 + i*3]
  if batch[id] or redis.call('HEXISTS', KEYS[1], id) == 1 then
    return redis.error_reply('DUPLICATE ' .. id)
  end
  if p ~= '' and not batch[p] and redis.call('HEXISTS', KEYS[1], p) == 0 then
    return redis.error_reply('NOPARENT ' .. p)
  end
  batch[id] = true
end
local leaf = redis.call('GET', KEYS[4]) or ''
if ARGV[4] ~= leaf then
  return {'moved', leaf}
end
for i = 0, n - 1 do
  local id = ARGV[3 + i*3]
  redis.call('HSET', KEYS[1], id, ARGV[5 + i*3])
  redis.call('HSET', KEYS[2], id, ARGV[4 + i*3])
  redis.call('RPUSH', KEYS[3], id)
end
redis.call('SET', KEYS[4], ARGV[3 + (n-1)*3])
redis.call('SADD', KEYS[5], ARGV[2])
return {'ok'}
`)

var setLeafScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return redis.error_reply('NOTFOUND')
end
redis.call('SET', KEYS[4], ARGV[1])
return 1
`)

var pathScript = redis.NewScript(`
local id, max = ARGV[1], tonumber(ARGV[2])
if redis.call('HEXISTS', KEYS[1], id) == 0 then
  return redis.error_reply('NOTFOUND')
end
local limit = redis.call('HLEN', KEYS[1])
local out = {}
while id and id ~= '' and (max <= 0 or #out < max) and #out < limit do
  out[#out + 1] = redis.call('HGET', KEYS[1], id)
  id = redis.call('HGET', KEYS[2], id)
end
return out
`)

func keyJSON(k session.Key) string {
	b, _ := json.Marshal(k)
	return string(b)
}

// mapErr turns script error replies into session sentinels.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	switch {
	case strings.HasPrefix(msg, "DUPLICATE "):
		return fmt.Errorf("%w: %s", session.ErrDuplicateNode, strings.TrimPrefix(msg, "DUPLICATE "))
	case strings.HasPrefix(msg, "NOPARENT "):
		return fmt.Errorf("parent %s: %w", strings.TrimPrefix(msg, "NOPARENT "), session.ErrNotFound)
	case strings.HasPrefix(msg, "NOTFOUND"):
		return session.ErrNotFound
	}
	return err
}

// Append implements session.Store: validation as in session.PrepareAppend,
// parents must exist, IDs must be new, and the first ParentID must be the
// active leaf (*session.LeafMovedError), all checked and applied
// atomically in one script.
func (s *Store) Append(ctx context.Context, k session.Key, nodes ...session.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	nodes, err := session.PrepareAppend(k, nodes, s.now())
	if err != nil {
		return err
	}
	args := make([]any, 0, 2+3*len(nodes))
	args = append(args, len(nodes), keyJSON(k))
	for _, n := range nodes {
		b, err := session.EncodeNode(n)
		if err != nil {
			return fmt.Errorf("append %s: %w", k, err)
		}
		args = append(args, n.ID, n.ParentID, string(b))
	}
	// The reply is {"ok"} or {"moved", <active leaf>}: an array, because a
	// leaf ID may hold bytes an error reply cannot.
	res, err := appendScript.Run(ctx, s.rdb, s.keys(k), args...).StringSlice()
	if err != nil {
		return fmt.Errorf("append %s: %w", k, mapErr(err))
	}
	if len(res) == 2 && res[0] == "moved" {
		return &session.LeafMovedError{Key: k, Expected: nodes[0].ParentID, Actual: res[1]}
	}
	return nil
}

// Leaf implements session.Store.
func (s *Store) Leaf(ctx context.Context, k session.Key) (string, error) {
	if err := k.Validate(); err != nil {
		return "", err
	}
	v, err := s.rdb.Get(ctx, s.keys(k)[3]).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("leaf %s: %w", k, err)
	}
	return v, nil
}

// SetLeaf implements session.Store; ErrNotFound for an unknown node.
func (s *Store) SetLeaf(ctx context.Context, k session.Key, nodeID string) error {
	if err := k.Validate(); err != nil {
		return err
	}
	if err := setLeafScript.Run(ctx, s.rdb, s.keys(k), nodeID).Err(); err != nil {
		return fmt.Errorf("set leaf %s: node %q: %w", k, nodeID, mapErr(err))
	}
	return nil
}

// Path implements session.Store with one server-side walk.
func (s *Store) Path(ctx context.Context, k session.Key, leafID string, max int) ([]session.Node, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	res, err := pathScript.Run(ctx, s.rdb, s.keys(k), leafID, max).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("path %s: node %q: %w", k, leafID, mapErr(err))
	}
	out := make([]session.Node, len(res))
	for i, raw := range res {
		if err := json.Unmarshal([]byte(raw), &out[len(res)-1-i]); err != nil {
			return nil, fmt.Errorf("path %s: decode node: %w", k, err)
		}
	}
	return out, nil
}

// Nodes implements session.Store.
func (s *Store) Nodes(ctx context.Context, k session.Key) ([]session.Node, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	ks := s.keys(k)
	ids, err := s.rdb.LRange(ctx, ks[2], 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("nodes %s: %w", k, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	out := make([]session.Node, 0, len(ids))
	const chunk = 1000
	for i := 0; i < len(ids); i += chunk {
		j := min(i+chunk, len(ids))
		vals, err := s.rdb.HMGet(ctx, ks[0], ids[i:j]...).Result()
		if err != nil {
			return nil, fmt.Errorf("nodes %s: %w", k, err)
		}
		for _, v := range vals {
			str, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("nodes %s: node listed but missing", k)
			}
			var n session.Node
			if err := json.Unmarshal([]byte(str), &n); err != nil {
				return nil, fmt.Errorf("nodes %s: decode node: %w", k, err)
			}
			out = append(out, n)
		}
	}
	return out, nil
}

// List implements session.Store from the sessions set.
func (s *Store) List(ctx context.Context, agentID string) ([]session.Key, error) {
	members, err := s.rdb.SMembers(ctx, s.prefix+":sessions").Result()
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []session.Key
	for _, m := range members {
		var k session.Key
		if json.Unmarshal([]byte(m), &k) != nil {
			continue
		}
		if agentID == "" || k.AgentID == agentID {
			out = append(out, k)
		}
	}
	session.SortKeys(out)
	return out, nil
}

// Clear implements session.Store; ErrNotFound for an unknown session.
func (s *Store) Clear(ctx context.Context, k session.Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	ks := s.keys(k)
	var del *redis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.Del(ctx, ks[0], ks[1], ks[2], ks[3])
		p.SRem(ctx, ks[4], keyJSON(k))
		return nil
	})
	if err != nil {
		return fmt.Errorf("clear %s: %w", k, err)
	}
	if del.Val() == 0 {
		return fmt.Errorf("clear %s: %w", k, session.ErrNotFound)
	}
	return nil
}

// Close implements session.Store; the client stays open (it is the
// caller's).
func (s *Store) Close() error { return nil }
