package telegram

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
)

// dialect holds the few SQL fragments where SQLite and PostgreSQL differ.
// Every query is written once, with ? placeholders, against the tables
// both backends share (telegram_*).
type dialect struct {
	name string
	// numbered rewrites ? placeholders as $1, $2, … (PostgreSQL).
	numbered bool
	// nowMS is the database clock in milliseconds since the Unix epoch.
	// Leases are compared against it, so instances with skewed clocks
	// still agree on when a lease expired.
	nowMS string
	// bodyContains is a condition true when the body column contains the
	// bytes of its one parameter.
	bodyContains string
	// lockPairing, when not empty, runs first in RequestPairing's
	// transaction to serialise pairing requests across connections
	// (SQLite's immediate transactions already do).
	lockPairing string
	// notify, when not empty, announces a new pending update; its one
	// parameter is the payload (see notifyPayload).
	notify string
}

var sqliteDialect = &dialect{
	name:         "sqlite",
	nowMS:        `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`,
	bodyContains: `instr(body, ?) > 0`,
}

// pairingLock is the advisory lock key of RequestPairing on PostgreSQL
// ("tgpair").
const pairingLock int64 = 0x746770616972

var postgresDialect = &dialect{
	name:         "postgres",
	numbered:     true,
	nowMS:        `CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)`,
	bodyContains: `position(CAST(? AS BYTEA) IN body) > 0`,
	lockPairing:  `SELECT pg_advisory_xact_lock(` + strconv.FormatInt(pairingLock, 10) + `)`,
	notify:       `SELECT pg_notify('` + notifyChannel + `', ?)`,
}

// rebind rewrites q's ? placeholders for the dialect. The queries of this
// package never contain ? inside string literals.
func (d *dialect) rebind(q string) string {
	if !d.numbered || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sqlDB is a *sql.DB whose queries are rebound for its dialect.
type sqlDB struct {
	*sql.DB
	d *dialect
}

func (db sqlDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return db.DB.ExecContext(ctx, db.d.rebind(q), args...)
}

func (db sqlDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return db.DB.QueryContext(ctx, db.d.rebind(q), args...)
}

func (db sqlDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return db.DB.QueryRowContext(ctx, db.d.rebind(q), args...)
}

func (db sqlDB) BeginTx(ctx context.Context, opts *sql.TxOptions) (sqlTx, error) {
	tx, err := db.DB.BeginTx(ctx, opts)
	return sqlTx{Tx: tx, d: db.d}, err
}

// sqlTx is a *sql.Tx whose queries are rebound for its dialect.
type sqlTx struct {
	*sql.Tx
	d *dialect
}

func (tx sqlTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return tx.Tx.ExecContext(ctx, tx.d.rebind(q), args...)
}

func (tx sqlTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return tx.Tx.QueryContext(ctx, tx.d.rebind(q), args...)
}

func (tx sqlTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return tx.Tx.QueryRowContext(ctx, tx.d.rebind(q), args...)
}
