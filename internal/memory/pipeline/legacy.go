package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tendrilai/tendril/internal/sqlitewal"
)

// importLegacy carries the state of the hand-written extraction queue
// (<home>/memory/jobs.db, before River) into the job database once:
// session cursors and counters, harvest cursors, forget epochs and
// rejection hashes (so a rejected item is still never proposed again), and
// its live jobs become memory.extract jobs. The old file is then renamed
// to jobs.db.imported. Rows already present win.
func (p *Pipeline) importLegacy(ctx context.Context, path string) error {
	db := p.q.jobs.DB()
	if db == nil {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if _, err := db.ExecContext(ctx, `ATTACH DATABASE ? AS legacy`, sqlitewal.FileURI(path)+"?mode=ro"); err != nil {
		return fmt.Errorf("attach %s: %w", path, err)
	}
	err := p.q.tx(ctx, "", func(tx txn) error {
		for _, s := range []string{
			`INSERT OR IGNORE INTO memory_pipeline_sessions(agent_id, actor_id, session_id, pending_turns, last_turn_at, idle_done, cursor_id, cursor_ts)
				SELECT agent_id, actor_id, session_id, pending_turns, last_turn_at, idle_done, cursor_id, cursor_ts FROM legacy.sessions`,
			`INSERT OR IGNORE INTO memory_pipeline_harvest(agent_id, actor_id, cursor_ts) SELECT agent_id, actor_id, cursor_ts FROM legacy.harvest`,
			`INSERT OR IGNORE INTO memory_pipeline_forgotten(actor_id, epoch) SELECT actor_id, epoch FROM legacy.forgotten`,
			`INSERT OR IGNORE INTO memory_pipeline_rejections(actor_id, hash, created_at) SELECT actor_id, hash, created_at FROM legacy.rejections`,
		} {
			if err := tx.exec(ctx, s); err != nil {
				return err
			}
		}
		var live []ExtractArgs
		if err := tx.each(ctx, `SELECT j.agent_id, j.actor_id, j.session_id, j.reason, j.created_at, COALESCE(s.gen, 0) FROM legacy.jobs j
			LEFT JOIN memory_pipeline_sessions s ON s.agent_id = j.agent_id AND s.actor_id = j.actor_id AND s.session_id = j.session_id
			WHERE j.dead = 0 ORDER BY j.id`, nil, func(r row) error {
			var a ExtractArgs
			err := r.Scan(&a.AgentID, &a.ActorID, &a.SessionID, &a.Reason, &a.QueuedAt, &a.Gen)
			live = append(live, a)
			return err
		}); err != nil {
			return err
		}
		for _, a := range live {
			if _, err := p.q.jobs.InsertTx(ctx, tx.raw(), a, p.q.extractOpts(p.opts.MaxAttempts)); err != nil {
				return err
			}
		}
		return nil
	})
	if _, derr := db.ExecContext(context.WithoutCancel(ctx), `DETACH DATABASE legacy`); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("import %s: %w", path, err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(path+suffix, path+".imported"+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("import %s: %w", path, err)
		}
	}
	p.opts.Logger.Info("memory pipeline: imported the old extraction queue", "from", path)
	return nil
}
