package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/gate"
)

// stagingFixture stores nothing directly: Store 0.9 sends the ordinary
// rule candidates (≈0.7–0.85) to staging.
func stagingFixture(t *testing.T, kind string) *fixture {
	clk := newClock()
	store := openStore(t, kind, clk)
	f := &fixture{t: t, store: store, clk: clk, path: filepath.Join(t.TempDir(), "jobs.db")}
	if onPG(kind) {
		f.pool = pgPool(t)
	}
	o := f.options()
	o.Thresholds = gate.Thresholds{Stage: 0.4, Store: 0.9}
	p, err := New(store, o)
	if err != nil {
		t.Fatal(err)
	}
	f.p = p
	t.Cleanup(func() { p.Close() })
	return f
}

func TestStagingApproveRejectNeverProposedAgain(t *testing.T) {
	// "mem" keeps rejections in the pipeline's own table; the others in
	// the store's memory.RejectionStore.
	for _, variant := range []string{"mem", "mem+rejections", "sqlite"} {
		t.Run(variant, func(t *testing.T) {
			f := stagingFixture(t, variant)
			rs, _ := f.store.(*rejectingStore)
			f.turn("u1", "s1", "I like jazz")
			f.turn("u1", "s1", "I like rock music")
			f.drain()
			st, err := f.p.Staged(ctx, "u1")
			if err != nil || len(st) != 2 {
				t.Fatalf("staged %q, err %v", contents(st), err)
			}
			if len(f.active("u1")) != 0 {
				t.Fatalf("staged items are active: %q", contents(f.active("u1")))
			}
			jazz, rock := st[0], st[1]
			if jazz.Content != "I like jazz" || rock.Content != "I like rock music" {
				t.Fatalf("order %q", contents(st))
			}
			// Approve → active.
			got, err := f.p.Approve(ctx, jazz.ID)
			if err != nil || got.Status != memory.StatusActive {
				t.Fatalf("approve: %+v %v", got, err)
			}
			// Reject → rejected, remembered.
			if err := f.p.Reject(ctx, rock.ID); err != nil {
				t.Fatal(err)
			}
			if r, _ := f.store.Get(ctx, rock.ID); r.Status != memory.StatusRejected {
				t.Fatalf("rejected record status %s", r.Status)
			}
			if rs != nil && len(rs.rej) != 1 {
				t.Fatalf("store rejection hashes: %v", rs.rej)
			}
			if st, _ := f.p.Staged(ctx, "u1"); len(st) != 0 {
				t.Fatalf("still staged: %q", contents(st))
			}
			// Saying it again, in any spelling that normalises alike, is never
			// proposed again.
			f.clk.Add(48 * time.Hour)
			f.turn("u1", "s2", "I like ROCK music!!")
			f.turn("u1", "s2", "i like rock   music")
			f.drain()
			if err := f.p.Flush(ctx, "main", "u1", "s2"); err != nil {
				t.Fatal(err)
			}
			for _, r := range f.all("u1") {
				if strings.EqualFold(strings.Trim(r.Content, "!"), "I like rock music") && r.ID != rock.ID {
					t.Fatalf("rejected content proposed again: %+v", r)
				}
			}
			if res, err := f.p.WriteEpisodic(ctx, "main", "u1", "s2", "I like rock music"); err != nil || res.Outcome != OutcomeRejected {
				t.Fatalf("memory_write of rejected content: %+v %v", res, err)
			}
			// Rejections are per actor: another actor can still say it.
			f.turn("u2", "s1", "I like rock music")
			f.turn("u2", "s1", "ok")
			f.drain()
			if st, _ := f.p.Staged(ctx, "u2"); len(st) != 1 {
				t.Fatalf("u2 staged %q", contents(st))
			}
			all, _ := f.p.Staged(ctx, "")
			if len(all) != 1 {
				t.Fatalf("staged for every actor: %q", contents(all))
			}
		})
	}
}

func TestApproveSupersedesAndErrors(t *testing.T) {
	forStores(t, func(t *testing.T, _ *fixture) {
		f := stagingFixture(t, t.Name()[strings.LastIndex(t.Name(), "/")+1:])
		f.turn("u1", "s1", "I only use organic fertiliser")
		f.turn("u1", "s1", "I only use chemical fertiliser")
		f.drain()
		st, _ := f.p.Staged(ctx, "u1")
		if len(st) != 2 {
			t.Fatalf("staged %q", contents(st))
		}
		if _, err := f.p.Approve(ctx, st[0].ID); err != nil {
			t.Fatal(err)
		}
		second, err := f.p.Approve(ctx, st[1].ID)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := f.store.Get(ctx, st[0].ID)
		if first.Status != memory.StatusSuperseded || first.Metadata[keySupersededBy] != second.ID {
			t.Fatalf("approved contradiction did not supersede: %+v", first)
		}
		if _, err := f.p.Approve(ctx, st[0].ID); !errors.Is(err, ErrNotStaged) {
			t.Errorf("approve superseded: %v", err)
		}
		if err := f.p.Reject(ctx, second.ID); !errors.Is(err, ErrNotStaged) {
			t.Errorf("reject active: %v", err)
		}
		if err := f.p.Reject(ctx, "nope"); !errors.Is(err, memory.ErrNotFound) || strings.Count(err.Error(), "get ") > 1 {
			t.Errorf("reject unknown: %v (want not found, the ID named once)", err)
		}
		if _, err := f.p.Approve(ctx, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("approve empty id: %v", err)
		}
	})
}

func TestWriteEpisodicGoesThroughTheGate(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		tests := []struct {
			text string
			want Outcome
		}{
			{"ok", OutcomeDropped},
			{"ㅋㅋ", OutcomeDropped},
			{"The user's fig tree has leaf rust since 2026-06-03", OutcomeStaged},
			{"Remember that the user is allergic to bees", OutcomeStored},
			{"Remember that the user is allergic to bees!", OutcomeMerged},
		}
		for _, tt := range tests {
			res, err := f.p.WriteEpisodic(ctx, "main", "u1", "s1", tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.want {
				t.Errorf("%q: %s (score %.3f), want %s", tt.text, res.Outcome, res.Score, tt.want)
			}
			if tt.want == OutcomeStored || tt.want == OutcomeStaged {
				r := res.Record
				if r.Strategy != memory.StrategyEpisodic || r.Namespace != "/main/u1/episodic/s1/" || r.ID == "" {
					t.Errorf("%q: record %+v", tt.text, r)
				}
			}
		}
		// memory_write never touches the long-term layers.
		for _, r := range f.all("u1") {
			if r.Strategy != memory.StrategyEpisodic {
				t.Errorf("memory_write wrote %s record %q", r.Strategy, r.Content)
			}
		}
		for _, bad := range []string{"", "   ", strings.Repeat("x", MaxWriteBytes+1), "\xff\xfe"} {
			if _, err := f.p.WriteEpisodic(ctx, "main", "u1", "s1", bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("WriteEpisodic(%.10q): %v, want ErrInvalid", bad, err)
			}
		}
	})
}

func TestHarvestDistilsEpisodicIntoSemantic(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		f.turn("u1", "s1", "I have a fig tree")
		f.turn("u1", "s1", "ok")
		f.drain()
		res, err := f.p.WriteEpisodic(ctx, "main", "u1", "s1", "Remember that the user has a lemon tree in the garden")
		if err != nil || res.Outcome != OutcomeStored {
			t.Fatalf("note: %+v %v", res, err)
		}
		n, err := f.p.Harvest(ctx, "main", "u1")
		if err != nil || n != 1 {
			t.Fatalf("harvest = %d, %v; want 1 (the fig tree merges)", n, err)
		}
		var lemon memory.Record
		for _, r := range f.active("u1", memory.StrategySemantic) {
			if strings.Contains(r.Content, "lemon") {
				lemon = r
			}
		}
		if lemon.ID == "" || lemon.Namespace != "/main/u1/long_term/" || len(lemon.Sources) != 1 || lemon.Sources[0] != res.Record.ID {
			t.Fatalf("harvested record %+v (note %s)", lemon, res.Record.ID)
		}
		if n, err := f.p.Harvest(ctx, "main", "u1"); err != nil || n != 0 {
			t.Fatalf("second harvest = %d, %v", n, err)
		}
		if n, err := f.p.Harvest(ctx, "main", "nobody"); err != nil || n != 0 {
			t.Fatalf("harvest of an unknown actor = %d, %v", n, err)
		}
	})
}

func TestHarvestWithLLM(t *testing.T) {
	m := newMemStore()
	clk := &clock{t: time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)}
	var asked string
	llm := extract.NewLLM(func(_ context.Context, _, user string) (string, error) {
		asked = user
		id := strings.TrimPrefix(strings.SplitN(user, "]", 2)[0], "[")
		return `{"memories":[{"strategy":"semantic","content":"Grows basil on the balcony","topic":"has:basil","plants":["basil"],"sources":["` + id + `"]}]}`, nil
	})
	p, err := New(m, Options{JobsPath: filepath.Join(t.TempDir(), "jobs.db"), Now: clk.Now, HarvestExtractor: llm})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.RecordTurn(ctx, "main", "u1", "s1", []memory.Event{{Role: "user", Text: "basil on the balcony is doing great"}}); err != nil {
		t.Fatal(err)
	}
	n, err := p.Harvest(ctx, "main", "u1")
	if err != nil || n != 1 || !strings.Contains(asked, "basil on the balcony") {
		t.Fatalf("harvest = %d, %v (asked %q)", n, err, asked)
	}
	recs := m.all("u1")
	if len(recs) != 1 || recs[0].Content != "Grows basil on the balcony" || recs[0].Strategy != memory.StrategySemantic {
		t.Fatalf("records %+v", recs)
	}
}

func TestForgetDropsPipelineState(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		f.turn("u1", "s1", "I like jazz")
		f.turn("u1", "s1", "ok")
		f.turn("u2", "s1", "I like jazz")
		f.turn("u2", "s1", "ok")
		if n, _ := f.p.Lag(); n != 2 {
			t.Fatalf("lag %d", n)
		}
		if err := f.p.Forget(ctx, "u1"); err != nil {
			t.Fatal(err)
		}
		if n, _ := f.p.Lag(); n != 1 {
			t.Fatalf("lag after forget %d, want u2's job only", n)
		}
		if err := f.p.Forget(ctx, ""); !errors.Is(err, ErrInvalid) {
			t.Fatalf("forget empty actor: %v", err)
		}
	})
}

func TestHarvestReadsNotesAsTheAssistant(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		// The assistant's "I" is not the user: this note is no user fact.
		if res, err := f.p.WriteEpisodic(ctx, "main", "u1", "s1", "Remember: I have a fig tree in the garden, said the assistant"); err != nil || res.Outcome != OutcomeStored {
			t.Fatalf("note: %+v %v", res, err)
		}
		if n, err := f.p.Harvest(ctx, "main", "u1"); err != nil || n != 0 {
			t.Fatalf("harvest = %d, %v; want 0", n, err)
		}
	})
}
