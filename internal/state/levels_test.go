package state

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// driveTo applies strong threat stimuli to actor until its level is want.
func driveTo(t *testing.T, e *Engine, actor string, want Level) {
	t.Helper()
	ev, err := e.Apply(ctx, actor, 0, Stimulus{Category: Joy, Intensity: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ev.Level != want; i++ {
		if i > 100 || ev.Level > want {
			t.Fatalf("%s: could not stop at %s (at %s after %d turns)", actor, want, ev.Level, i)
		}
		if ev, err = e.Apply(ctx, actor, 0, Stimulus{Category: Threat, Intensity: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

func wantCounts(t *testing.T, e *Engine, n, w, c int) {
	t.Helper()
	got, err := e.LevelCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[Level]int{Normal: n, Warning: w, Critical: c}
	if len(got) != 3 || got[Normal] != n || got[Warning] != w || got[Critical] != c {
		t.Fatalf("LevelCounts = %v, want %v", got, want)
	}
	// Consistent with Level for every actor with a file.
	acts, err := e.Actors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byLevel := map[Level]int{Normal: 0, Warning: 0, Critical: 0}
	for _, a := range acts {
		lv, err := e.Level(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		byLevel[lv]++
	}
	if fmt.Sprint(byLevel) != fmt.Sprint(got) {
		t.Fatalf("LevelCounts %v disagrees with Level over Actors %v", got, byLevel)
	}
}

func TestLevelCounts(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	e := openTest(t, dir, c, nil)
	wantCounts(t, e, 0, 0, 0) // empty directory: every key present, all 0

	driveTo(t, e, "n1", Normal)
	driveTo(t, e, "n2/../x", Normal) // escaped file name
	driveTo(t, e, "w1", Warning)
	driveTo(t, e, "w2", Warning)
	driveTo(t, e, "c1", Critical)
	if _, err := e.Snapshot(ctx, "never-observed"); err != nil { // no file: not counted
		t.Fatal(err)
	}
	wantCounts(t, e, 2, 2, 1)

	if err := e.Forget(ctx, "w2"); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, e, 2, 1, 1)
	if err := e.Forget(ctx, "not-there"); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, e, 2, 1, 1)

	// A fresh engine on the same directory rebuilds the map with one scan;
	// a corrupt file and a foreign one are left out.
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	e2 := openTest(t, dir, c, nil)
	got, err := e2.LevelCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got[Normal] != 2 || got[Warning] != 1 || got[Critical] != 1 {
		t.Fatalf("after reopen: %v", got)
	}
	os.Remove(filepath.Join(dir, "broken.json"))
	wantCounts(t, e2, 2, 1, 1)

	// The map follows later turns and forgets without re-reading files.
	driveTo(t, e2, "w3", Warning)
	if err := e2.Forget(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, e2, 2, 2, 0)

	// Decay alone: a day later WARNING actors read as NORMAL, as in Level,
	// although their stored level is still WARNING until their next turn.
	driveTo(t, e2, "c2", Critical)
	c.Add(24 * time.Hour)
	wantCounts(t, e2, 4, 0, 1) // CRITICAL needs cooldown turns, not time
}

func TestLevelCountsContext(t *testing.T) {
	e := openTest(t, t.TempDir(), newClock(), nil)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.LevelCounts(cctx); err != context.Canceled {
		t.Fatalf("cancelled ctx: err = %v", err)
	}
	if _, err := e.LevelCounts(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLevelCountsConcurrent races the first scan against turns and
// forgets; the final counts must match Level over Actors.
func TestLevelCountsConcurrent(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	seed := openTest(t, dir, c, nil)
	for i := range 40 {
		driveTo(t, seed, fmt.Sprintf("a%d", i), Level(i%3))
	}
	e := openTest(t, dir, c, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < 40; i += 4 {
				a := fmt.Sprintf("a%d", i)
				var err error
				switch i % 4 {
				case 0:
					err = e.Forget(ctx, a)
				default:
					_, err = e.Apply(ctx, a, 0, Stimulus{Category: Threat, Intensity: 1})
				}
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if _, err := e.LevelCounts(ctx); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	got, err := e.LevelCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum := got[Normal] + got[Warning] + got[Critical]; sum != 30 {
		t.Fatalf("counts %v sum to %d, want 30 actors", got, sum)
	}
	acts, _ := e.Actors(ctx)
	want := map[Level]int{Normal: 0, Warning: 0, Critical: 0}
	for _, a := range acts {
		lv, _ := e.Level(ctx, a)
		want[lv]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("LevelCounts %v, Level over Actors %v", got, want)
	}
}

func TestLevelJSON(t *testing.T) {
	for _, lv := range []Level{Normal, Warning, Critical} {
		b, err := json.Marshal(lv)
		if err != nil {
			t.Fatal(err)
		}
		if want := `"` + lv.String() + `"`; string(b) != want {
			t.Fatalf("Marshal(%d) = %s, want %s", lv, b, want)
		}
		var back Level = 99
		if err := json.Unmarshal(b, &back); err != nil || back != lv {
			t.Fatalf("round trip %s: got %v, %v", b, back, err)
		}
		// The old integer form, bare and inside a struct.
		var old Level
		if err := json.Unmarshal([]byte(fmt.Sprint(int(lv))), &old); err != nil || old != lv {
			t.Fatalf("integer %d: got %v, %v", lv, old, err)
		}
		var ev Event
		if err := json.Unmarshal(fmt.Appendf(nil, `{"prev_level":%d,"level":%q}`, lv, lv.String()), &ev); err != nil ||
			ev.PrevLevel != lv || ev.Level != lv {
			t.Fatalf("mixed forms: %+v, %v", ev, err)
		}
	}
	for in, want := range map[string]Level{`"warning"`: Warning, `" Critical "`: Critical, `"2"`: Critical, `null`: Warning} {
		got := Warning
		if err := json.Unmarshal([]byte(in), &got); err != nil || got != want {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{`3`, `-1`, `1.0`, `1e0`, `true`, `"BOGUS"`, `""`, `{}`, `[1]`} {
		got := Warning
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("Unmarshal(%s) accepted as %v", bad, got)
		} else if got != Warning {
			t.Errorf("Unmarshal(%s) failed but changed the level to %v", bad, got)
		}
	}
	// A whole snapshot round-trips through JSON with string levels.
	e := openTest(t, t.TempDir(), newClock(), nil)
	driveTo(t, e, "a", Critical)
	snap, err := e.Snapshot(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Level != Critical || back.History[len(back.History)-1].Level != Critical {
		t.Fatalf("snapshot round trip lost the level: %s", b)
	}
}
