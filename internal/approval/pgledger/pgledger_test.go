package pgledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/approval/approvaltest"
	"github.com/tendrilai/tendril/internal/approval/pgledger"
	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/testenv"
	"github.com/tendrilai/tendril/internal/tool"
)

// pool opens a pool of its own on url (one per instance), closed at test end.
func pool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pg.Open(context.Background(), url, pg.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func openGate(t testing.TB, url string, opts approval.Options) *approval.Gate {
	t.Helper()
	g, err := pgledger.OpenGate(context.Background(), pool(t, url), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// tamper rewrites the row's line so it still parses but no longer matches
// its hash.
func tamper(t testing.TB, db *pgxpool.Pool, seq int64) {
	t.Helper()
	tag, err := db.Exec(context.Background(),
		`UPDATE approval_ledger SET line = replace(line, '"type":"', '"type":"x') WHERE seq = $1`, seq)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("tamper seq %d: %v (%d rows)", seq, err, tag.RowsAffected())
	}
}

func TestPostgresLedgerConformance(t *testing.T) {
	approvaltest.Exercise(t, func(t *testing.T) approvaltest.Ledger {
		url := testenv.PostgresSchema(t)
		admin := pool(t, url)
		return approvaltest.Ledger{
			Open:   func(t *testing.T, opts approval.Options) *approval.Gate { return openGate(t, url, opts) },
			Tamper: func(t *testing.T, seq int64) { tamper(t, admin, seq) },
		}
	})
}

var benchWrite = approval.Call{AgentID: "main", ActorID: "telegram:12345", SessionID: "telegram:12345:main", Channel: "telegram",
	Tool: "notes_write", Class: tool.ClassWrite, Args: json.RawMessage(`{"title":"basil","body":"water daily","tags":["herbs"]}`),
	Resume: json.RawMessage(`{"turn":"t1","messages":[{"role":"user","text":"note that basil needs water daily"}]}`)}

// round is one approved tool call end to end: Check (ask, paused turn
// stored), Decide (approve), Authorize, RecordResult: four ledger appends
// plus one paused-turn write.
func round(b *testing.B, g *approval.Gate, i int) {
	ctx := b.Context()
	c := benchWrite
	c.Args = json.RawMessage(fmt.Sprintf(`{"title":"basil","body":"water daily","n":%d}`, i))
	d, err := g.Check(ctx, c, state.Normal)
	if err != nil || d.Verdict != approval.Ask {
		b.Fatal(d, err)
	}
	if err := g.Decide(ctx, d.Request.ID, true, "cli"); err != nil {
		b.Fatal(err)
	}
	ex, err := g.Authorize(ctx, d.Request.ID, c, state.Normal)
	if err != nil {
		b.Fatal(err)
	}
	if err := g.RecordResult(ctx, ex, "saved", nil); err != nil {
		b.Fatal(err)
	}
}

// benchDir is on the repository's disk unless TENDRIL_BENCH_DIR says
// otherwise (a temp dir may be tmpfs, where fsync is free).
func benchDir(b *testing.B) string {
	base := os.Getenv("TENDRIL_BENCH_DIR")
	if base == "" {
		base = filepath.Join("testdata", "bench-tmp")
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		b.Fatal(err)
	}
	d, err := os.MkdirTemp(base, "b")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d); os.Remove(base); os.Remove(filepath.Dir(base)) })
	return d
}

// BenchmarkRound compares one approved call's round (Check + Decide +
// Authorize + RecordResult) on the file ledger (fsynced, flock) and on
// PostgreSQL (advisory-locked transactions, NOTIFY), side by side in one
// run. With -cpu or parallel sub-benchmarks the PostgreSQL numbers also
// show two instances contending on one ledger.
func BenchmarkRound(b *testing.B) {
	b.Run("file", func(b *testing.B) {
		g, err := approval.Open(benchDir(b), approval.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer g.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			round(b, g, i)
		}
	})
	b.Run("postgres", func(b *testing.B) {
		g := openGate(b, testenv.PostgresSchema(b), approval.Options{})
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			round(b, g, i)
		}
	})
	b.Run("postgres-2-instances", func(b *testing.B) {
		url := testenv.PostgresSchema(b)
		gs := []*approval.Gate{openGate(b, url, approval.Options{}), openGate(b, url, approval.Options{})}
		var n atomic.Int64
		b.ResetTimer()
		var wg sync.WaitGroup
		for _, g := range gs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := n.Add(1)
					if i > int64(b.N) {
						return
					}
					round(b, g, int(i))
				}
			}()
		}
		wg.Wait()
	})
}

// BenchmarkBareCommits is the PostgreSQL baseline of a round: four
// one-row INSERT transactions of a ledger line's size on the same pool,
// without the gate (its lock, reads, verification or NOTIFY).
func BenchmarkBareCommits(b *testing.B) {
	db := pool(b, testenv.PostgresSchema(b))
	ctx := b.Context()
	if _, err := db.Exec(ctx, `CREATE TABLE bare (seq BIGINT PRIMARY KEY, line TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	line := strings.Repeat("x", 700)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 4; j++ {
			if _, err := db.Exec(ctx, `INSERT INTO bare (seq, line) VALUES ($1, $2)`, i*4+j, line); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func writeCall(args string) approval.Call {
	return approval.Call{AgentID: "main", ActorID: "telegram:1", SessionID: "s1", Channel: "telegram",
		Tool: "notes_write", Class: tool.ClassWrite, Args: json.RawMessage(args)}
}

func ask(t *testing.T, g *approval.Gate, c approval.Call) approval.Request {
	t.Helper()
	d, err := g.Check(t.Context(), c, state.Normal)
	if err != nil || d.Verdict != approval.Ask {
		t.Fatalf("Check = %+v, %v", d, err)
	}
	return *d.Request
}

// A row changed by UPDATE is caught: the last one by the very next
// operation of a running gate, an earlier one by Verify and by the
// periodic full verification of Refresh; the gate then fails closed.
func TestTamperedRowFailsClosed(t *testing.T) {
	ctx := t.Context()
	url := testenv.PostgresSchema(t)
	admin := pool(t, url)

	t.Run("last row", func(t *testing.T) {
		g := openGate(t, url, approval.Options{})
		ask(t, g, writeCall(`{"a":0}`))
		req := ask(t, g, writeCall(`{"a":1}`))
		var seq int64
		admin.QueryRow(ctx, `SELECT max(seq) FROM approval_ledger`).Scan(&seq)
		tamper(t, admin, seq)
		if err := g.Decide(ctx, req.ID, true, "cli"); !errors.Is(err, approval.ErrLedgerBroken) {
			t.Fatalf("Decide after the last row was changed: %v", err)
		}
		if b := g.Broken(); b == nil || !strings.Contains(b.FirstBad.Reason, "changed after it was written") {
			t.Fatalf("Broken = %+v", b)
		}
		if err := g.Reset(ctx, "operator", "drill"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("earlier row", func(t *testing.T) {
		g := openGate(t, url, approval.Options{})
		req := ask(t, g, writeCall(`{"a":1}`))
		for i := range 3 {
			ask(t, g, writeCall(fmt.Sprintf(`{"b":%d}`, i)))
		}
		var seq int64
		admin.QueryRow(ctx, `SELECT seq FROM approval_ledger WHERE request_id IS NULL AND line LIKE '%'||$1||'%'`, req.ID).Scan(&seq)
		if seq == 0 {
			t.Fatal("request row not found")
		}
		tamper(t, admin, seq)
		for range approval.RefreshVerifyEvery {
			if err := g.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if g.Broken() == nil {
			t.Fatal("a running gate did not notice the changed row")
		}
		if d, _ := g.Check(ctx, writeCall(`{"c":1}`), state.Normal); d.Verdict != approval.Deny {
			t.Fatalf("closed gate verdict %s", d.Verdict)
		}
		rep, err := g.Verify(ctx)
		if err != nil || rep.OK || rep.FirstBad.Seq != seq || !strings.Contains(rep.FirstBad.Reason, "hash mismatch") {
			t.Fatalf("Verify = %+v, %v", rep, err)
		}
		if err := g.Reset(ctx, "operator", "drill"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("rows deleted", func(t *testing.T) {
		g := openGate(t, url, approval.Options{})
		ask(t, g, writeCall(`{"a":1}`))
		if _, err := admin.Exec(ctx, `DELETE FROM approval_ledger`); err != nil {
			t.Fatal(err)
		}
		if d, _ := g.Check(ctx, writeCall(`{}`), state.Normal); d.Verdict != approval.Deny || g.Broken() == nil {
			t.Fatalf("rows deleted: verdict %s, broken %v", d.Verdict, g.Broken())
		}
		if err := g.Reset(ctx, "operator", "rows deleted"); err != nil {
			t.Fatal(err)
		}
		if d, _ := g.Check(ctx, writeCall(`{}`), state.Normal); d.Verdict != approval.Ask {
			t.Fatalf("after reset: %s", d.Verdict)
		}
	})
	// Nothing was deleted by the resets: the broken ledgers are archived.
	var archives, rows int
	admin.QueryRow(ctx, `SELECT count(DISTINCT archive), count(*) FROM approval_ledger_archive`).Scan(&archives, &rows)
	if archives != 2 || rows == 0 {
		t.Fatalf("archive holds %d ledgers, %d rows; want the 2 non-empty broken ones", archives, rows)
	}
}

// The database itself refuses a second execution of one request, even
// from a writer that skipped the gate.
func TestSecondExecuteRowRefusedByDatabase(t *testing.T) {
	ctx := t.Context()
	url := testenv.PostgresSchema(t)
	g := openGate(t, url, approval.Options{})
	c := writeCall(`{"a":1}`)
	req := ask(t, g, c)
	g.Decide(ctx, req.ID, true, "cli")
	if _, err := g.Authorize(ctx, req.ID, c, state.Normal); err != nil {
		t.Fatal(err)
	}
	_, err := pool(t, url).Exec(ctx, `INSERT INTO approval_ledger (seq, type, request_id, hash, line)
		SELECT max(seq) + 1, 'execute', $1, repeat('0', 64), '{}' FROM approval_ledger`, req.ID)
	if !pg.IsUnique(err) {
		t.Fatalf("second execute row: %v, want a unique violation", err)
	}
}

// A unit whose append fails is rolled back whole (the paused turn too),
// the gate re-reads the ledger, and a decision another instance made in
// the meantime is still delivered.
func TestFailedAppendRollsBackAndRecovers(t *testing.T) {
	ctx := t.Context()
	url := testenv.PostgresSchema(t)
	a, b := openGate(t, url, approval.Options{}), openGate(t, url, approval.Options{})
	var seen []string
	a.OnDecision(func(r approval.Request, ok bool) { seen = append(seen, r.ID) })
	req := ask(t, a, writeCall(`{"a":1}`))
	admin := pool(t, url)
	if _, err := admin.Exec(ctx, `
		CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by test'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON approval_ledger FOR EACH ROW WHEN (NEW.type = 'request') EXECUTE FUNCTION refuse();`); err != nil {
		t.Fatal(err)
	}
	if err := b.Decide(ctx, req.ID, true, "cli"); err != nil {
		t.Fatal(err)
	}
	c := writeCall(`{"a":2}`)
	c.Resume = json.RawMessage(`{"turn":"lost"}`)
	if _, err := a.Check(ctx, c, state.Normal); err == nil || !strings.Contains(err.Error(), "refused by test") {
		t.Fatalf("Check with a failing append: %v", err)
	}
	var payloads int
	admin.QueryRow(ctx, `SELECT count(*) FROM approval_resume`).Scan(&payloads)
	if payloads != 0 {
		t.Fatalf("%d paused turns kept from a rolled-back request", payloads)
	}
	if _, err := admin.Exec(ctx, `DROP TRIGGER refuse ON approval_ledger`); err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != req.ID {
		t.Fatalf("OnDecision saw %v, want the other instance's decision on %s", seen, req.ID)
	}
	ask(t, a, writeCall(`{"a":3}`))
	if rep, err := a.Verify(ctx); err != nil || !rep.OK || rep.Entries != 3 {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	if p, _ := a.Pending(ctx); len(p) != 2 {
		t.Fatalf("pending %+v", p)
	}
}

// Watch delivers another instance's decision by NOTIFY (the poll here is
// an hour), and listens again after its connection is killed.
func TestWatchByNotify(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	// Its own application_name: the listener to kill is this test's, not
	// another test binary's LISTEN on the same channel.
	app := "pgledger-watch-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	url := testenv.WithApplicationName(testenv.PostgresSchema(t), app)
	a, b := openGate(t, url, approval.Options{}), openGate(t, url, approval.Options{})
	decided := make(chan string, 4)
	a.OnDecision(func(r approval.Request, ok bool) { decided <- r.ID })
	listening := make(chan struct{}, 4)
	errs := make(chan error, 4)
	done := make(chan error, 1)
	go func() {
		done <- a.Watch(ctx, approval.WatchOptions{Poll: time.Hour, Retry: time.Millisecond,
			Listening: func() { listening <- struct{}{} },
			OnError:   func(err error) { errs <- err }})
	}()
	<-listening
	for i := range 2 {
		req := ask(t, a, writeCall(fmt.Sprintf(`{"i":%d}`, i)))
		if err := b.Decide(t.Context(), req.ID, true, "cli"); err != nil {
			t.Fatal(err)
		}
		if got := <-decided; got != req.ID {
			t.Fatalf("OnDecision saw %s, want %s", got, req.ID)
		}
		if i == 0 {
			// Kill the listener's connection; Watch reports it and listens again.
			admin := pool(t, url)
			var n int
			if err := admin.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE query = 'LISTEN `+pgledger.Channel+`' AND application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&n); err != nil || n == 0 {
				t.Fatalf("terminate listener: %d, %v", n, err)
			}
			if err := <-errs; err == nil {
				t.Fatal("nil error")
			}
			<-listening
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch returned %v", err)
	}
}

// BenchmarkRoundVsBareCommits interleaves one PostgreSQL round with its
// baseline (four bare one-row INSERT commits, the same number of WAL
// flushes) in every iteration, so disk noise hits both alike; it reports
// each mean and their ratio.
func BenchmarkRoundVsBareCommits(b *testing.B) {
	url := testenv.PostgresSchema(b)
	g := openGate(b, url, approval.Options{})
	db := pool(b, url)
	ctx := b.Context()
	if _, err := db.Exec(ctx, `CREATE TABLE bare (seq BIGINT PRIMARY KEY, line TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	line := strings.Repeat("x", 700)
	var roundT, bareT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		round(b, g, i)
		t1 := time.Now()
		for j := 0; j < 4; j++ {
			if _, err := db.Exec(ctx, `INSERT INTO bare (seq, line) VALUES ($1, $2)`, i*4+j, line); err != nil {
				b.Fatal(err)
			}
		}
		bareT += time.Since(t1)
		roundT += t1.Sub(t0)
	}
	b.ReportMetric(float64(roundT.Nanoseconds())/float64(b.N), "round-ns")
	b.ReportMetric(float64(bareT.Nanoseconds())/float64(b.N), "bare4-ns")
	b.ReportMetric(float64(roundT)/float64(bareT), "ratio")
}
