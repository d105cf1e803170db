package pg_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/testenv"
)

func TestMigrate(t *testing.T) {
	ctx := context.Background()
	db, err := pg.Open(ctx, testenv.PostgresSchema(t), pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fsys := fstest.MapFS{
		"m/002_b.sql": {Data: []byte(`ALTER TABLE a ADD COLUMN y INT`)},
		"m/001_a.sql": {Data: []byte(`CREATE TABLE a (x INT)`)},
		"m/README":    {Data: []byte(`not sql`)},
	}
	ms := pg.FromFS("demo", fsys, "m")
	if len(ms) != 2 || ms[0].Name != "demo/001_a.sql" || ms[1].Name != "demo/002_b.sql" {
		t.Fatalf("FromFS: %+v", ms)
	}
	_, pending, err := pg.Status(ctx, db, ms)
	if err != nil || len(pending) != 2 {
		t.Fatalf("status before: pending %v, %v", pending, err)
	}
	applied, err := pg.Migrate(ctx, db, ms)
	if err != nil || len(applied) != 2 {
		t.Fatalf("first run applied %v, %v", applied, err)
	}
	applied, err = pg.Migrate(ctx, db, ms)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second run applied %v, %v", applied, err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO a (x, y) VALUES (1, 2)`); err != nil {
		t.Fatal(err)
	}
	// A failing script rolls back the whole run and is named.
	bad := append(ms, pg.Migration{Name: "demo/003_ok.sql", SQL: `CREATE TABLE c (x INT)`},
		pg.Migration{Name: "demo/004_bad.sql", SQL: `CREATE TABLE nope (`})
	if _, err := pg.Migrate(ctx, db, bad); err == nil || !strings.Contains(err.Error(), "demo/004_bad.sql") {
		t.Fatalf("bad migration: %v", err)
	}
	applied2, pending, err := pg.Status(ctx, db, bad)
	if err != nil || len(applied2) != 2 || len(pending) != 2 {
		t.Fatalf("after failure: applied %v pending %v, %v", applied2, pending, err)
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'c' AND schemaname = current_schema()`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("table c of a failed run exists (%d, %v)", n, err)
	}
}

func TestConcurrentMigrate(t *testing.T) {
	ctx := context.Background()
	url := testenv.PostgresSchema(t)
	ms := []pg.Migration{{Name: "demo/001.sql", SQL: `CREATE TABLE once (x INT)`}}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			db, err := pg.Open(ctx, url, pg.Options{})
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			_, err = pg.Migrate(ctx, db, ms)
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
}

func TestOpenBadURL(t *testing.T) {
	if _, err := pg.Open(context.Background(), "postgres://%zz", pg.Options{}); err == nil {
		t.Fatal("bad url accepted")
	}
	for _, u := range []string{"postgress://u@h/db", "mysql://u@h/db"} {
		if _, err := pg.Open(context.Background(), u, pg.Options{}); err == nil || !strings.Contains(err.Error(), "want postgres://") {
			t.Fatalf("%s: %v", u, err)
		}
	}
}
