package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// eventCommit is one actor's new events waiting for a group commit
// (commitEvents): the rows to insert, and the outcome once the
// transaction holding them has ended (done closed).
type eventCommit struct {
	actor string
	fresh []memory.Event
	eager bool // write the full-text rows too (EngineFTS5)

	taken bool // in a batch being committed; guarded by Store.commitMu
	err   error
	done  chan struct{}
}

// eventCommitTimeout bounds one group commit of event rows. The batch
// runs under no caller's context (a caller that gives up must not fail
// the others' turns), so this is its deadline.
const eventCommitTimeout = 30 * time.Second

// commitEvents writes c's rows to the index with group commit: the index
// has one writer connection, and with many actors' turns in flight one
// transaction per turn queued each behind all the others (16 concurrent
// actors spent a fifth of their turns' time waiting to begin one). Every
// commit joins a pending list; whoever takes the commit slot writes the
// whole list in one transaction, each actor's rows in their own savepoint,
// so one actor's failure fails only that actor's write. A caller that
// waited for the slot finds its rows committed by the previous holder or
// commits them with those that joined meanwhile: it waits for at most
// one other commit before its own. Durability is unchanged: commitEvents
// returns after the commit holding c (synchronous=NORMAL in WAL mode, as
// before). A caller whose ctx ends before its rows are taken into a batch
// withdraws them and returns ctx's error; once taken, it waits for the
// batch's outcome, so an error always means the rows were not written.
func (s *Store) commitEvents(ctx context.Context, c *eventCommit) error {
	c.done = make(chan struct{})
	s.commitMu.Lock()
	s.commitPending = append(s.commitPending, c)
	s.commitMu.Unlock()
	select {
	case s.commitSlot <- struct{}{}:
		s.commitMu.Lock()
		batch := s.commitPending
		s.commitPending = nil
		for _, b := range batch {
			b.taken = true
		}
		s.commitMu.Unlock()
		if len(batch) > 0 {
			s.writeBatch(batch)
		}
		<-s.commitSlot
		// c was in this batch or in the one before it, which ended
		// before the slot came free.
		<-c.done
		return c.err
	case <-c.done:
		return c.err
	case <-ctx.Done():
		s.commitMu.Lock()
		if !c.taken {
			s.commitPending = slices.DeleteFunc(s.commitPending, func(b *eventCommit) bool { return b == c })
			s.commitMu.Unlock()
			return ctx.Err()
		}
		s.commitMu.Unlock()
		<-c.done
		return c.err
	}
}

// writeBatch writes batch in one transaction on the writer connection and
// closes each commit's done.
func (s *Store) writeBatch(batch []*eventCommit) {
	ctx, cancel := context.WithTimeout(context.Background(), eventCommitTimeout)
	defer cancel()
	err := s.writeBatchTx(ctx, batch)
	for _, b := range batch {
		if b.err == nil && err != nil {
			b.err = err
		}
		close(b.done)
	}
}

func (s *Store) writeBatchTx(ctx context.Context, batch []*eventCommit) error {
	ins, err := s.stmt(ctx, insertEventSQL)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer tx.Rollback()
	stmt := tx.StmtContext(ctx, ins)
	if len(batch) == 1 {
		if err := s.insertEvents(ctx, tx, stmt, batch[0]); err != nil {
			return err
		}
	} else {
		for _, b := range batch {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT events`); err != nil {
				return fmt.Errorf("memory index: %w", err)
			}
			if b.err = s.insertEvents(ctx, tx, stmt, b); b.err != nil {
				if _, err := tx.ExecContext(ctx, `ROLLBACK TO events`); err != nil {
					return fmt.Errorf("memory index: %w", err)
				}
			}
			if _, err := tx.ExecContext(ctx, `RELEASE events`); err != nil {
				return fmt.Errorf("memory index: %w", err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return nil
}

// insertEvents writes b's rows (and, when eager, their full-text rows)
// inside tx.
func (s *Store) insertEvents(ctx context.Context, tx *sql.Tx, stmt *sql.Stmt, b *eventCommit) error {
	if testCommitFault != nil {
		if err := testCommitFault(b.actor); err != nil {
			return err
		}
	}
	var fts ftsBatch
	for _, e := range b.fresh {
		if err := insertEvent(ctx, stmt, b.actor, e); err != nil {
			return err
		}
		if b.eager {
			s.ftsEvent(&fts, b.actor, e)
		}
	}
	return fts.write(ctx, s, tx)
}

// testCommitFault, set by tests only, fails the event rows of the actors
// it returns an error for.
var testCommitFault func(actor string) error
