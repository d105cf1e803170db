package assistant

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	"github.com/tendrilai/tendril/internal/testenv"
)

func quietOpen(cfg *config.Config) (*Assistant, error) {
	return Open(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Owner: true})
}

// TestExplicitPersonaAndSkillsMustLoad: a persona file, skills directory
// or skills manifest named explicitly (env or file key) that is missing,
// empty or broken stops Open with an error naming the variable and the
// path, and doctor fails; the defaults keep working without them.
func TestExplicitPersonaAndSkillsMustLoad(t *testing.T) {
	for _, k := range []string{"TENDRIL_PERSONA_FILE", "TENDRIL_SKILLS_DIR", "TENDRIL_SKILLS_MANIFEST", "MODEL_ID", "TENDRIL_DATABASE_URL", "TENDRIL_REDIS_URL"} {
		t.Setenv(k, "")
	}
	ext := t.TempDir()
	empty := filepath.Join(ext, "empty.md")
	os.WriteFile(empty, nil, 0o600)
	badManifest := filepath.Join(ext, "skills.json")
	os.WriteFile(badManifest, []byte(`{"skills": "weather"`), 0o600)
	for _, tc := range []struct {
		name, env, value, check string
	}{
		{"missing persona", "TENDRIL_PERSONA_FILE", filepath.Join(ext, "nope.md"), "persona"},
		{"empty persona", "TENDRIL_PERSONA_FILE", empty, "persona"},
		{"missing skills dir", "TENDRIL_SKILLS_DIR", filepath.Join(ext, "noskills"), "skills"},
		{"skills dir is a file", "TENDRIL_SKILLS_DIR", empty, "skills"},
		{"broken manifest", "TENDRIL_SKILLS_MANIFEST", badManifest, "skills"},
		{"missing manifest", "TENDRIL_SKILLS_MANIFEST", filepath.Join(ext, "none.json"), "skills"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TENDRIL_HOME", t.TempDir())
			t.Setenv(tc.env, tc.value)
			cfg, err := config.Load("")
			if err != nil {
				t.Fatal(err)
			}
			a, err := quietOpen(cfg)
			if err == nil {
				a.Close()
				t.Fatalf("Open with %s=%s succeeded", tc.env, tc.value)
			}
			if !strings.Contains(err.Error(), tc.env) || !strings.Contains(err.Error(), tc.value) {
				t.Fatalf("error %q does not name %s and %s", err, tc.env, tc.value)
			}
			rep := Doctor(context.Background(), cfg, DoctorOptions{})
			if c := one(t, rep, tc.check); c.Status != CheckFail || rep.OK || !strings.Contains(c.Detail, tc.env) {
				t.Fatalf("doctor %s: %+v ok=%v", tc.check, c, rep.OK)
			}
		})
	}
	// The file key is named the same way.
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"agent": {"personaFile": "mine.md"}}`), 0o600)
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := quietOpen(cfg); err == nil || !strings.Contains(err.Error(), "agent.personaFile "+filepath.Join(home, "mine.md")) {
		t.Fatalf("agent.personaFile missing: %v", err)
	}
	// Defaults: a fresh home opens, and an existing explicit file loads.
	os.WriteFile(filepath.Join(home, "mine.md"), []byte("# Mine\nYou are Mine."), 0o600)
	a, err := quietOpen(cfg)
	if err != nil {
		t.Fatalf("explicit persona that exists: %v", err)
	}
	a.Close()
	t.Setenv("TENDRIL_HOME", t.TempDir())
	if cfg, err = config.Load(""); err != nil {
		t.Fatal(err)
	}
	if a, err = quietOpen(cfg); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	a.Close()
}

// TestPoolMaxConnsMinimum: pool_max_conns=1 made the start wait forever
// on River's migrations; it is now an error stating the minimum, and 2
// (the minimum) starts.
func TestPoolMaxConnsMinimum(t *testing.T) {
	for _, k := range []string{"TENDRIL_PERSONA_FILE", "TENDRIL_SKILLS_DIR", "TENDRIL_SKILLS_MANIFEST", "MODEL_ID", "TENDRIL_REDIS_URL"} {
		t.Setenv(k, "")
	}
	if err := CheckPoolMaxConns("postgres://h/db?pool_max_conns=1"); err == nil || !strings.Contains(err.Error(), "minimum of 2") || !strings.Contains(err.Error(), "TENDRIL_DATABASE_URL") {
		t.Fatalf("pool_max_conns=1: %v", err)
	}
	for _, ok := range []string{"postgres://h/db", "postgres://h/db?pool_max_conns=2", "host=h pool_max_conns=3"} {
		if err := CheckPoolMaxConns(ok); err != nil {
			t.Fatalf("%s: %v", ok, err)
		}
	}
	base := testenv.PostgresSchema(t)
	for _, n := range []string{"1", "2"} {
		t.Setenv("TENDRIL_HOME", t.TempDir())
		t.Setenv("TENDRIL_DATABASE_URL", base+"&pool_max_conns="+n)
		cfg, err := config.Load("")
		if err != nil {
			t.Fatal(err)
		}
		rep := Doctor(context.Background(), cfg, DoctorOptions{Timeout: 5 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		a, err := Open(ctx, cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Owner: true})
		if err == nil {
			err = a.Start(ctx, StartOptions{Scheduler: true})
		}
		cancel()
		if a != nil {
			a.Close()
		}
		switch n {
		case "1":
			if err == nil || !strings.Contains(err.Error(), "pool_max_conns=1 is below the minimum of 2") {
				t.Fatalf("pool_max_conns=1: %v", err)
			}
			if c := one(t, rep, "postgres"); c.Status != CheckFail {
				t.Fatalf("doctor with pool_max_conns=1: %+v", c)
			}
		case "2":
			if err != nil {
				t.Fatalf("pool_max_conns=2: %v", err)
			}
		}
	}
}

func TestRedisURLNamed(t *testing.T) {
	cfg := config.Default()
	cfg.Home, cfg.RedisURL = t.TempDir(), "notaurl"
	if _, err := OpenSessionStore(&cfg, jsonl.Options{}); err == nil || !strings.Contains(err.Error(), "TENDRIL_REDIS_URL") {
		t.Fatalf("err %v", err)
	}
	rep := Doctor(context.Background(), &cfg, DoctorOptions{})
	if c := one(t, rep, "redis"); c.Status != CheckFail || !strings.Contains(c.Detail, "TENDRIL_REDIS_URL") {
		t.Fatalf("doctor redis %+v", c)
	}
}
