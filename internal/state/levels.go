package state

import "context"

// LevelCounts returns how many actors are at each breaker level now. The
// map always has the keys Normal, Warning and Critical (0 when no actor is
// at that level); the counts sum to the number of actors with stored
// state, as listed by Actors. An actor that was only read (Snapshot,
// Level) and never observed has none and is not counted.
//
// Each actor's level is the one Level would return at this moment: the
// stored level re-evaluated by the breaker on the decayed stability, without
// persisting. So decay alone can move an actor from WARNING to NORMAL here
// (and in Level) although its stored level only changes on its next turn;
// CRITICAL is left only through turns (the cooldown), never by decay alone.
//
// Cost: one Backend.Records call plus O(actors) arithmetic. The file
// backend answers from memory after one background directory scan; pgstate
// reads state_actors.
//
// Errors: ctx.Err(), or the backend's error.
func (e *Engine) LevelCounts(ctx context.Context) (map[Level]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	recs, err := e.b.Records(ctx)
	if err != nil {
		return nil, err
	}
	counts := map[Level]int{Normal: 0, Warning: 0, Critical: 0}
	now := e.opts.Now()
	for _, r := range recs {
		sane(&r)
		t := now
		if t.Before(r.UpdatedAt) {
			t = r.UpdatedAt // as in Snapshot: a clock that went backwards does not un-decay
		}
		s := e.decayed(&r, t)[Stability]
		counts[e.opts.Breaker.Next(r.Level, r.TurnsInCritical, s)]++
	}
	return counts, nil
}
