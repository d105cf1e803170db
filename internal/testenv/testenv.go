// Package testenv finds the external services some tests need —
// PostgreSQL and Redis — and decides what happens when one is missing.
//
// On a developer machine a missing service skips the test with a message
// that says what to start or which variable to set. Under CI (environment
// CI=true, as GitHub Actions and most CI systems set it) the same message
// fails the test instead, so a broken service container can never turn
// the suite green by skipping.
package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables and defaults.
const (
	// PostgresEnv overrides DefaultPostgresURL.
	PostgresEnv = "TENDRIL_TEST_DATABASE_URL"
	// DefaultPostgresURL is the local trust-auth server with database test.
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	// RedisEnv overrides DefaultRedisAddr ("host:port").
	RedisEnv = "TENDRIL_TEST_REDIS"
	// DefaultRedisAddr is the local Redis.
	DefaultRedisAddr = "127.0.0.1:6379"
	// PingTimeout bounds each reachability check.
	PingTimeout = 3 * time.Second
)

// InCI reports whether the environment variable CI is true (as parsed by
// strconv.ParseBool: "true", "1", "TRUE", …).
func InCI() bool {
	v, err := strconv.ParseBool(strings.TrimSpace(os.Getenv("CI")))
	return err == nil && v
}

// Unavailable stops the test because a service it needs is missing: t.Skipf
// with the message normally, t.Fatalf with the same message when InCI.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (CI=true: a missing test service is a failure, not a skip)", msg)
	}
	t.Skipf("%s; skipping", msg)
}

// Postgres returns the URL of the test PostgreSQL server
// ($TENDRIL_TEST_DATABASE_URL, else DefaultPostgresURL) after connecting
// to it and pinging it within PingTimeout. When it does
// not, the test is skipped, or failed under CI (see Unavailable).
func Postgres(t testing.TB) string {
	t.Helper()
	u := os.Getenv(PostgresEnv)
	if u == "" {
		u = DefaultPostgresURL
	}
	if err := pingPostgres(u); err != nil {
		Unavailable(t, "postgres unreachable at %s (start it, or set %s): %v", redactURL(u), PostgresEnv, err)
	}
	return u
}

// Redis returns the "host:port" of the test Redis ($TENDRIL_TEST_REDIS,
// else DefaultRedisAddr) after checking that it answers PING within
// PingTimeout. When it does not, the test is skipped, or failed under CI
// (see Unavailable).
func Redis(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(RedisEnv)
	if addr == "" {
		addr = DefaultRedisAddr
	}
	if err := pingRedis(addr); err != nil {
		Unavailable(t, "redis unreachable at %s (start it, or set %s): %v", addr, RedisEnv, err)
	}
	return addr
}

// pingRedis sends PING over a plain connection and expects +PONG, or an
// authentication error, which still proves a Redis is listening (the
// test's own client then reports the credentials problem). A raw RESP
// exchange keeps go-redis from logging its redial attempts when nothing
// listens.
func pingRedis(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, PingTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(PingTimeout))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH") || strings.HasPrefix(line, "-WRONGPASS") {
		return nil
	}
	return fmt.Errorf("unexpected reply to PING: %q", strings.TrimSpace(line))
}

// pingPostgres connects to the URL (so host, credentials and database are
// all checked) and pings the server.
func pingPostgres(raw string) error {
	ctx, cancel := context.WithTimeout(context.Background(), PingTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// redactURL hides a password in u for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// PostgresSchema returns a URL of the test PostgreSQL server whose
// search_path is a fresh schema of its own, dropped (with everything in
// it) when the test ends, so every test runs isolated on one server. It
// skips or fails like Postgres when the server is unreachable.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	base := Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer conn.Close(context.Background())
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := "t_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("postgres: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("postgres: drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Logf("postgres: drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(base, schema)
}

// WithApplicationName returns raw (a postgres:// URL) with its
// application_name run-time parameter set to name, so a test can find
// (and end) its own connections in pg_stat_activity without touching
// those of other test binaries on the same server.
func WithApplicationName(raw, name string) string { return withParam(raw, "application_name", name) }

// WithSearchPath returns raw (a postgres:// URL) with its search_path
// run-time parameter set to schema.
func WithSearchPath(raw, schema string) string { return withParam(raw, "search_path", schema) }

// withParam returns raw with its query parameter key set to value (raw
// unchanged when it does not parse).
func withParam(raw, key, value string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}
