// Package pgstore is the PostgreSQL session backend (SPEC §3 and §9): with
// TENDRIL_DATABASE_URL set, several Tendril instances share sessions
// through it.
//
// # Tables
//
//	session_leaves  one row per non-empty session: the key, the active leaf,
//	                a version (+1 on every leaf move) and the node count
//	session_nodes   every node: session, seq (1-based append order), node id,
//	                parent id, role, timestamp and the node's JSON
//
// Rows are found by session_key, the SHA-256 of the length-prefixed agent,
// channel and session ID, because an ID may hold NUL and be up to
// session.MaxIDLen bytes. See migrations/001_init.sql.
//
// # Compare-and-set
//
// Append moves the active leaf by compare-and-set in the statement that
// inserts the nodes: an UPDATE of the session's leaf row WHERE leaf_id is
// the first node's parent (or, for an empty session, an INSERT of the row
// that loses to any concurrent one). PostgreSQL's row lock serialises
// writers of one session across pools and processes, and the loser of each
// race gets *session.LeafMovedError with nothing written, so two instances
// can never fork a session by accident.
//
// # Cost
//
// Leaf is one primary-key lookup; Path walks parent_id with a recursive
// CTE that stops after max nodes, one index probe per node whatever the
// session size; Append is one round trip (three pipelined statements) and
// one commit.
package pgstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/session"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Migrations returns the store's schema scripts, named "session/NNN_*.sql",
// for pg.Migrate and `tendril doctor`.
func Migrations() []pg.Migration { return pg.FromFS("session", migrationsFS, "migrations") }

// ErrClosed is returned after Close.
var ErrClosed = errors.New("pgstore: store closed")

// Store is the PostgreSQL session store. It implements session.Store and is
// safe for concurrent use, also by several processes on one database.
type Store struct {
	pool   *pgxpool.Pool
	now    func() time.Time
	closed atomic.Bool
}

var _ session.Store = (*Store)(nil)

// New applies Migrations to the database of pool (pg.Migrate) and returns
// a Store on it. The pool is the caller's: Close does not close it.
func New(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	if pool == nil {
		return nil, errors.New("session store: nil pool")
	}
	if _, err := pg.Migrate(ctx, pool, Migrations()); err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	return &Store{pool: pool, now: time.Now}, nil
}

// keyDigest is session_key: SHA-256 over each of agent, channel and ID
// preceded by its length as a uvarint, so distinct keys never meet.
func keyDigest(k session.Key) []byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, f := range []string{k.AgentID, k.Channel, k.ID} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

// open checks the store and the key before any I/O.
func (s *Store) open(ctx context.Context, k session.Key) ([]byte, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := k.Validate(); err != nil {
		return nil, err
	}
	return keyDigest(k), nil
}

// The append statements are one statement each, so the compare-and-set,
// the parent check and the node insert commit together or not at all.
// They return the seq base on success and no row when the leaf moved or a
// parent is missing; a duplicate ID fails on the unique index. $5 holds
// the parents that are not in the batch.
const (
	appendNodes = `, ins AS (
    INSERT INTO session_nodes (session_key, seq, node_id, parent_id, role, ts, node)
    SELECT $1, leaf.base + u.o, u.i, u.p, u.r, u.t, u.d::json
    FROM leaf, unnest($6::bytea[], $7::bytea[], $8::text[], $9::bigint[], $10::text[]) WITH ORDINALITY AS u(i, p, r, t, d, o)
)
SELECT base FROM leaf`

	sqlAppendMove = `WITH leaf AS (
    UPDATE session_leaves
    SET leaf_id = $2, version = version + 1, nodes = nodes + $3, updated_at = now()
    WHERE session_key = $1 AND leaf_id = $4
      AND NOT EXISTS (SELECT 1 FROM unnest($5::bytea[]) e(id) WHERE NOT EXISTS (
          SELECT 1 FROM session_nodes s WHERE s.session_key = $1 AND s.node_id = e.id))
    RETURNING nodes - $3 AS base
)` + appendNodes

	// An empty session has no node a parent could name, so any $5 fails.
	// $4 (always NULL here) is referenced only so both statements take
	// the same parameters.
	sqlAppendFirst = `WITH leaf AS (
    INSERT INTO session_leaves (session_key, agent, channel, session_id, leaf_id, version, nodes)
    SELECT $1, $11, $12, $13, $2, 1, $3 WHERE $4::bytea IS NULL AND cardinality($5::bytea[]) = 0
    ON CONFLICT (session_key) DO NOTHING
    RETURNING 0::bigint AS base
)` + appendNodes

	sqlLeaf = `SELECT leaf_id FROM session_leaves WHERE session_key = $1`

	sqlKnown = `SELECT node_id FROM session_nodes WHERE session_key = $1 AND node_id = ANY($2::bytea[])`
)

// Append implements session.Store. Validation is session.PrepareAppend's
// plus session.EncodeNode's size bound; parents must be in the session or
// earlier in nodes, IDs must be new (ErrNotFound, ErrDuplicateNode); then
// the first node's ParentID must be the active leaf ("" on an empty
// session), else *session.LeafMovedError. The write is one statement: on
// any error nothing is written. It costs one round trip (three pipelined
// statements: the known IDs for precise errors, the append, the leaf) and
// is durable on return as PostgreSQL's commit is (synchronous_commit).
func (s *Store) Append(ctx context.Context, k session.Key, nodes ...session.Node) error {
	if len(nodes) == 0 {
		if s.closed.Load() {
			return ErrClosed
		}
		return ctx.Err()
	}
	dk, err := s.open(ctx, k)
	if err != nil {
		return err
	}
	nodes, err = session.PrepareAppend(k, nodes, s.now())
	if err != nil {
		return err
	}
	n := len(nodes)
	ids := make([][]byte, n)
	parents := make([][]byte, n)
	roles := make([]string, n)
	ts := make([]int64, n)
	docs := make([]string, n)
	probe := make([][]byte, 0, 2*n)
	external := [][]byte{}
	inBatch := make(map[string]bool, n)
	for i, nd := range nodes {
		b, err := session.EncodeNode(nd)
		if err != nil {
			return fmt.Errorf("append %s: %w", k, err)
		}
		ids[i], roles[i], ts[i], docs[i] = []byte(nd.ID), nd.Role, nd.Timestamp, string(b)
		probe = append(probe, ids[i])
		if nd.ParentID != "" {
			parents[i] = []byte(nd.ParentID)
			if !inBatch[nd.ParentID] {
				probe = append(probe, parents[i])
				external = append(external, parents[i])
			}
		}
		inBatch[nd.ID] = true
	}
	expected, last := nodes[0].ParentID, nodes[n-1].ID

	var batch pgx.Batch
	var known []string
	batch.Queue(sqlKnown, dk, probe).Query(func(rows pgx.Rows) error {
		var err error
		known, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var b []byte
			err := r.Scan(&b)
			return string(b), err
		})
		return err
	})
	sqlAppend, exp := sqlAppendMove, []byte(expected)
	args := []any{dk, []byte(last), n, exp, external, ids, parents, roles, ts, docs}
	if expected == "" {
		sqlAppend, args[3] = sqlAppendFirst, []byte(nil)
		args = append(args, []byte(k.AgentID), []byte(k.Channel), []byte(k.ID))
	}
	wrote := false
	var appendErr error
	batch.Queue(sqlAppend, args...).Query(func(rows pgx.Rows) error {
		wrote = rows.Next()
		rows.Close()
		appendErr = rows.Err()
		return nil
	})
	var actual []byte
	batch.Queue(sqlLeaf, dk).QueryRow(func(r pgx.Row) error {
		if err := r.Scan(&actual); err != nil && !errors.Is(err, pgx.ErrNoRows) && appendErr == nil {
			return err
		}
		return nil
	})
	if err := s.pool.SendBatch(ctx, &batch).Close(); err != nil && appendErr == nil {
		return fmt.Errorf("append %s: %w", k, err)
	}
	if wrote && appendErr == nil {
		return nil
	}
	if appendErr != nil && !pg.IsUnique(appendErr) {
		return fmt.Errorf("append %s: %w", k, appendErr)
	}

	// Not written: name the node at fault, else the leaf moved. Node
	// errors come first because they do not go away on retry.
	have := make(map[string]bool, len(known))
	for _, id := range known {
		have[id] = true
	}
	seen := make(map[string]bool, n)
	for _, nd := range nodes {
		if have[nd.ID] || seen[nd.ID] {
			return fmt.Errorf("append %s: %w: %s", k, session.ErrDuplicateNode, nd.ID)
		}
		if nd.ParentID != "" && !have[nd.ParentID] && !seen[nd.ParentID] {
			return fmt.Errorf("append %s: parent %s of %s: %w", k, nd.ParentID, nd.ID, session.ErrNotFound)
		}
		seen[nd.ID] = true
	}
	if appendErr != nil { // a duplicate committed between the probe and the append
		return fmt.Errorf("append %s: %w: %v", k, session.ErrDuplicateNode, appendErr)
	}
	return &session.LeafMovedError{Key: k, Expected: expected, Actual: string(actual)}
}

// Leaf implements session.Store with one primary-key lookup: "" for an
// empty or unknown session.
func (s *Store) Leaf(ctx context.Context, k session.Key) (string, error) {
	dk, err := s.open(ctx, k)
	if err != nil {
		return "", err
	}
	var leaf []byte
	err = s.pool.QueryRow(ctx, sqlLeaf, dk).Scan(&leaf)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("leaf %s: %w", k, err)
	}
	return string(leaf), nil
}

const sqlSetLeaf = `UPDATE session_leaves
SET leaf_id = $2, version = version + 1, updated_at = now()
WHERE session_key = $1
  AND EXISTS (SELECT 1 FROM session_nodes WHERE session_key = $1 AND node_id = $2)`

// SetLeaf implements session.Store in one statement; ErrNotFound if nodeID
// is not in the session.
func (s *Store) SetLeaf(ctx context.Context, k session.Key, nodeID string) error {
	dk, err := s.open(ctx, k)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, sqlSetLeaf, dk, []byte(nodeID))
	if err != nil {
		return fmt.Errorf("set leaf %s: %w", k, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set leaf %s: node %q: %w", k, nodeID, session.ErrNotFound)
	}
	return nil
}

// sqlPath walks parent_id from $2, at most $3 nodes ($3 <= 0: no limit);
// the session's node count bounds the walk too, so even a cycle written by
// hand into the table ends. Each step is a LATERAL lookup with LIMIT 1, so
// the planner probes the (session_key, node_id) index once per node
// instead of hash-joining the whole session at every step (which it picks
// for small sessions, 15x slower at 1,000 nodes).
const sqlPath = `WITH RECURSIVE p(parent_id, node, depth) AS (
    SELECT parent_id, node, 1 FROM session_nodes WHERE session_key = $1 AND node_id = $2
  UNION ALL
    SELECT n.parent_id, n.node, p.depth + 1
    FROM p CROSS JOIN LATERAL (
        SELECT parent_id, node FROM session_nodes
        WHERE session_key = $1 AND node_id = p.parent_id LIMIT 1) n
    WHERE p.depth < (SELECT CASE WHEN $3::bigint > 0 THEN LEAST($3::bigint, l.nodes) ELSE l.nodes END
                     FROM session_leaves l WHERE l.session_key = $1)
)
SELECT node::text FROM p ORDER BY depth DESC`

// Path implements session.Store: up to max nodes ending at leafID, oldest
// first, from one recursive query that reads only those nodes.
// ErrNotFound for an unknown node.
func (s *Store) Path(ctx context.Context, k session.Key, leafID string, max int) ([]session.Node, error) {
	dk, err := s.open(ctx, k)
	if err != nil {
		return nil, err
	}
	out, err := s.query(ctx, sqlPath, dk, []byte(leafID), int64(max))
	if err != nil {
		return nil, fmt.Errorf("path %s: %w", k, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("path %s: node %q: %w", k, leafID, session.ErrNotFound)
	}
	return out, nil
}

// Nodes implements session.Store: every node in append order; nil for an
// unknown session.
func (s *Store) Nodes(ctx context.Context, k session.Key) ([]session.Node, error) {
	dk, err := s.open(ctx, k)
	if err != nil {
		return nil, err
	}
	out, err := s.query(ctx, `SELECT node::text FROM session_nodes WHERE session_key = $1 ORDER BY seq`, dk)
	if err != nil {
		return nil, fmt.Errorf("nodes %s: %w", k, err)
	}
	return out, nil
}

// query runs a query returning node JSON, one node a row.
func (s *Store) query(ctx context.Context, sql string, args ...any) ([]session.Node, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []session.Node
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var n session.Node
		if err := n.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("decode node: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// List implements session.Store: the keys of the non-empty sessions of
// agentID ("" = all agents), sorted with session.SortKeys.
func (s *Store) List(ctx context.Context, agentID string) ([]session.Key, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	sql, args := `SELECT agent, channel, session_id FROM session_leaves`, []any(nil)
	if agentID != "" {
		sql += ` WHERE sha256(agent) = sha256($1) AND agent = $1`
		args = []any{[]byte(agentID)}
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (session.Key, error) {
		var a, c, id []byte
		err := r.Scan(&a, &c, &id)
		return session.Key{AgentID: string(a), Channel: string(c), ID: string(id)}, err
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	session.SortKeys(keys)
	return keys, nil
}

// Clear implements session.Store: it deletes the session's leaf row and,
// by cascade, its nodes, in one statement. ErrNotFound for an unknown or
// empty session.
func (s *Store) Clear(ctx context.Context, k session.Key) error {
	dk, err := s.open(ctx, k)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM session_leaves WHERE session_key = $1`, dk)
	if err != nil {
		return fmt.Errorf("clear %s: %w", k, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("clear %s: %w", k, session.ErrNotFound)
	}
	return nil
}

// Close implements session.Store. The pool stays open (it is the
// caller's); later calls on the store return ErrClosed.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}
