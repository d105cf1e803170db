package state

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// levelEntry is what LevelCounts needs of one actor: enough to evaluate the
// breaker exactly as Snapshot does, without the history.
type levelEntry struct {
	level           Level
	turnsInCritical int
	values          Vector
	updatedAt       time.Time
}

func entryOf(st *actorState) levelEntry {
	return levelEntry{level: st.Level, turnsInCritical: st.TurnsInCritical, values: st.Values, updatedAt: st.UpdatedAt}
}

// levelIndex is the in-memory per-actor level map behind LevelCounts. All
// fields are guarded by Engine.mu.
type levelIndex struct {
	// entries holds every actor with a state file: filled by one directory
	// scan (at the first LevelCounts) and kept current by load, save and
	// Forget, which also write it before the scan has run.
	entries map[string]levelEntry
	ready   bool       // the scan has been merged
	scan    *levelScan // the scan in progress, if any
	// touched records the actors written by load, save or Forget while a
	// scan runs; the scan's (possibly older) reading of them is discarded.
	touched map[string]struct{}
}

type levelScan struct {
	done chan struct{} // closed when the scan ended
	err  error         // set before done is closed
}

// noteLevel records st as the actor's current state. Caller holds e.mu.
func (e *Engine) noteLevel(st *actorState) {
	e.levels.entries[st.ActorID] = entryOf(st)
	if e.levels.touched != nil {
		e.levels.touched[st.ActorID] = struct{}{}
	}
}

// dropLevel forgets the actor. Caller holds e.mu.
func (e *Engine) dropLevel(actor string) {
	delete(e.levels.entries, actor)
	if e.levels.touched != nil {
		e.levels.touched[actor] = struct{}{}
	}
}

// LevelCounts returns how many actors are at each breaker level now. The
// map always has the keys Normal, Warning and Critical (0 when no actor is
// at that level); the counts sum to the number of actors with a state file,
// as listed by Actors. An actor that was only read (Snapshot, Level) and
// never observed has no file and is not counted.
//
// Each actor's level is the one Level would return at this moment: the
// stored level re-evaluated by the breaker on the decayed stability, without
// persisting. So decay alone can move an actor from WARNING to NORMAL here
// (and in Level) although its stored level only changes on its next turn;
// CRITICAL is left only through turns (the cooldown), never by decay alone.
//
// Cost: the first call scans the directory once, decoding each state file
// (files that cannot be read, decoded or that hold another actor are left
// out, as Snapshot would fail on them). The scan runs in the background and
// outlives ctx: if ctx ends first, LevelCounts returns ctx.Err() and a
// later call picks up the finished scan. From then on the counts come from
// an in-memory per-actor map that load, Apply and Forget keep current, at
// O(actors) arithmetic per call and no file I/O. Like the engine's cache,
// the map assumes this process is the directory's only writer: state files
// written or removed by another process are not seen.
//
// Errors: ctx.Err(), or a "state: ..." error wrapping the directory read
// failure of the scan (the next call retries the scan).
func (e *Engine) LevelCounts(ctx context.Context) (map[Level]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	if !e.levels.ready {
		sc := e.levels.scan
		if sc == nil {
			sc = &levelScan{done: make(chan struct{})}
			e.levels.scan = sc
			e.levels.touched = map[string]struct{}{}
			go e.scanLevels(sc)
		}
		e.mu.Unlock()
		select {
		case <-sc.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if sc.err != nil {
			return nil, sc.err
		}
		e.mu.Lock()
	}
	defer e.mu.Unlock()
	counts := map[Level]int{Normal: 0, Warning: 0, Critical: 0}
	now := e.opts.Now()
	for _, en := range e.levels.entries {
		t := now
		if t.Before(en.updatedAt) {
			t = en.updatedAt // as in Snapshot: a clock that went backwards does not un-decay
		}
		s := en.values[Stability]
		if !en.updatedAt.IsZero() {
			s = Decay(en.values, e.opts.Persona.Baseline, t.Sub(en.updatedAt), e.opts.HalfLife)[Stability]
		}
		counts[e.opts.Breaker.Next(en.level, en.turnsInCritical, s)]++
	}
	return counts, nil
}

// scanLevels reads every state file once and merges the result into the
// index, skipping actors touched meanwhile. It runs without e.mu held while
// reading, so turns are not blocked by the scan.
func (e *Engine) scanLevels(sc *levelScan) {
	found, err := e.readLevels()
	e.mu.Lock()
	if err != nil {
		sc.err = err
	} else {
		for a, en := range found {
			if _, ok := e.levels.touched[a]; !ok {
				e.levels.entries[a] = en
			}
		}
		e.levels.ready = true
	}
	e.levels.scan = nil
	e.levels.touched = nil
	e.mu.Unlock()
	close(sc.done)
}

func (e *Engine) readLevels() (map[string]levelEntry, error) {
	ents, err := os.ReadDir(e.dir)
	if err != nil {
		return nil, fmt.Errorf("state: level scan: %w", err)
	}
	found := make(map[string]levelEntry, len(ents))
	for _, de := range ents {
		if de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		a, ok := actorFromFile(de.Name())
		if !ok || validActor(a) != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(e.dir, de.Name()))
		if err != nil {
			continue
		}
		// Only the fields the breaker needs; the history is skipped.
		var st struct {
			ActorID         string    `json:"actor_id"`
			Values          Vector    `json:"values"`
			UpdatedAt       time.Time `json:"updated_at"`
			Level           Level     `json:"level"`
			TurnsInCritical int       `json:"turns_in_critical"`
		}
		if json.Unmarshal(b, &st) != nil || st.ActorID != a {
			continue
		}
		for i := range st.Values {
			st.Values[i] = clamp01(st.Values[i])
		}
		found[a] = levelEntry{level: st.Level, turnsInCritical: st.TurnsInCritical, values: st.Values, updatedAt: st.UpdatedAt}
	}
	return found, nil
}
