package assistant

import (
	"context"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/session"
)

// warmActors is how many of the most recently active actors (memory) and
// sessions a started assistant warms in the background.
const warmActors = 8

// recentSessions is implemented by session stores that can tell their
// most recently written sessions (jsonl.Store.Recent).
type recentSessions interface {
	Recent(ctx context.Context, n int) ([]session.Key, error)
}

// warmSessions reads, in the background after a start, what the first
// turn of the n sessions written last would otherwise read on its path:
// the session's index and the decoded tail of its active path
// (session.BuildContext with the default history limits; nothing is
// compacted or written), the breaker state of the actor of its last user
// node and, once every session is read, that actor's memory as a turn
// with an empty message recalls it (the fallback query, through a
// Retriever of its own so the retrieval metrics count turns only; it
// waits for the memory warm-up's index of the actor rather than building
// one). A turn that arrives meanwhile does not wait for the warm-up
// beyond a load of its own session, or a build of its actor's index,
// already under way, which it would otherwise do itself. Stores without
// Recent (PostgreSQL, Redis) are not warmed. Failures are logged at debug
// level and skip that session; it stops when ctx ends.
func (a *Assistant) warmSessions(ctx context.Context, n int) {
	r, ok := a.sessions.(recentSessions)
	if !ok {
		return
	}
	keys, err := r.Recent(ctx, n)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Debug("session warm-up: listing sessions failed", "err", err)
		}
		return
	}
	limits := a.historyLimits("")
	var actors []string
	seen := map[string]bool{}
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		nodes, err := session.BuildContext(ctx, a.sessions, k, limits)
		if err != nil {
			a.log.Debug("session warm-up failed", "session", k.String(), "err", err)
			continue
		}
		actor := lastActor(nodes)
		if actor == "" || seen[actor] {
			continue
		}
		seen[actor] = true
		actors = append(actors, actor)
		if a.state != nil {
			if _, err := a.state.Level(ctx, actor); err != nil {
				a.log.Debug("state warm-up failed", "actor", actor, "err", err)
			}
		}
	}
	if a.memory == nil || len(actors) == 0 {
		return
	}
	cfg := a.cfg
	rv := memory.NewRetriever(a.memory, memory.RetrieveOptions{TopK: cfg.Memory.TopK, Timeout: cfg.Memory.RetrieveTimeout.D(), Logger: a.log})
	for _, actor := range actors {
		if ctx.Err() != nil {
			return
		}
		rv.Recall(ctx, cfg.AgentID, actor, "")
	}
}

// lastActor is the actorId of the last node that names one ("" for none).
func lastActor(nodes []session.Node) string {
	for i := len(nodes) - 1; i >= 0; i-- {
		if actor, ok := nodes[i].Metadata["actorId"].(string); ok && actor != "" {
			return actor
		}
	}
	return ""
}
