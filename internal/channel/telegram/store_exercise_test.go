package telegram

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/testenv"
)

// The store conformance suite. It is in-package because the channel's store
// API is internal to the channel; every backend (SQLite, PostgreSQL) runs
// all of it. exerciseStore takes one store; exerciseShared takes two stores
// on one database, as two `tendril serve` instances would have.

// backend opens stores of one kind: fresh returns a store on a new empty
// database; pair returns two stores (distinct lease owners) on one.
type backend struct {
	name  string
	fresh func(t *testing.T) *Store
	pair  func(t *testing.T) (*Store, *Store)
}

func backends() []backend {
	sqliteOpen := func(t *testing.T, dir string) *Store {
		t.Helper()
		st, err := OpenStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	return []backend{
		{
			name:  "sqlite",
			fresh: func(t *testing.T) *Store { return sqliteOpen(t, t.TempDir()) },
			pair: func(t *testing.T) (*Store, *Store) {
				dir := t.TempDir()
				a, b := sqliteOpen(t, dir), sqliteOpen(t, dir)
				// A home has one server, so SQLite stores share one owner;
				// distinct owners here exercise the same lease SQL.
				a.owner, b.owner = "instance-a", "instance-b"
				return a, b
			},
		},
		{
			name:  "postgres",
			fresh: func(t *testing.T) *Store { return openPostgres(t, testenv.PostgresSchema(t)) },
			pair: func(t *testing.T) (*Store, *Store) {
				url := testenv.PostgresSchema(t)
				return openPostgres(t, url), openPostgres(t, url) // two pools
			},
		},
	}
}

func TestStoreConformance(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			exerciseStore(t, b.fresh)
			exerciseShared(t, b.pair)
		})
	}
}

func pendingUpdate(id, chat int64, group string, receivedMS int64) storedUpdate {
	return storedUpdate{UpdateID: id, ChatID: chat, Kind: kindMessage, MediaGroup: group,
		Body:       []byte(textUpdate(id, chat, chat, fmt.Sprint("m", id))),
		ReceivedMS: receivedMS, State: statePending}
}

func mustInsert(t *testing.T, st *Store, u storedUpdate) bool {
	t.Helper()
	ok, err := st.insertUpdate(context.Background(), u)
	if err != nil {
		t.Fatalf("insert %d: %v", u.UpdateID, err)
	}
	return ok
}

func exerciseStore(t *testing.T, fresh func(t *testing.T) *Store) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

	t.Run("UpdateIDDeduplication", func(t *testing.T) {
		st := fresh(t)
		if !mustInsert(t, st, pendingUpdate(10, 1, "", now.UnixMilli())) {
			t.Fatal("first insert reported as duplicate")
		}
		dup := pendingUpdate(10, 2, "", now.UnixMilli())
		dup.Body = []byte(`{"update_id":10}`)
		if mustInsert(t, st, dup) {
			t.Fatal("second insert of update_id 10 was stored")
		}
		u, err := st.nextPending(ctx, 1)
		if err != nil || u == nil || u.ChatID != 1 || !strings.Contains(string(u.Body), "m10") {
			t.Fatalf("stored update = %+v, %v; want the first delivery", u, err)
		}
		if n, _ := st.countUpdates(ctx); n != 1 {
			t.Fatalf("%d updates stored, want 1", n)
		}
	})

	t.Run("PendingOrderPerChat", func(t *testing.T) {
		st := fresh(t)
		for _, u := range []storedUpdate{
			pendingUpdate(30, 1, "", 1), pendingUpdate(10, 1, "", 2), pendingUpdate(20, 2, "", 3), pendingUpdate(15, 1, "", 4),
		} {
			mustInsert(t, st, u)
		}
		ignored := pendingUpdate(5, 1, "", 5)
		ignored.State, ignored.Note = stateIgnored, "unsupported"
		mustInsert(t, st, ignored)
		var got []int64
		for {
			u, err := st.nextPending(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if u == nil {
				break
			}
			got = append(got, u.UpdateID)
			if err := st.finish(ctx, []int64{u.UpdateID}, stateDone, "replied", now); err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprint(got) != "[10 15 30]" {
			t.Fatalf("chat 1 processed in order %v, want [10 15 30]", got)
		}
		if s, note, err := st.updateState(ctx, 15); err != nil || s != stateDone || note != "replied" {
			t.Fatalf("update 15: %q %q %v", s, note, err)
		}
		if s, _, _ := st.updateState(ctx, 999); s != "" {
			t.Fatalf("unknown update state %q, want empty", s)
		}
		if n, err := st.Pending(ctx); err != nil || n != 1 {
			t.Fatalf("Pending = %d, %v; want 1 (chat 2)", n, err)
		}
		chats, err := st.pendingChats(ctx)
		if err != nil || fmt.Sprint(chats) != "[2]" {
			t.Fatalf("pendingChats = %v, %v", chats, err)
		}
		more, err := st.hasPending(ctx, 1)
		if err != nil || more {
			t.Fatalf("hasPending(1) = %v, %v; want false", more, err)
		}
		if more, _ := st.hasPending(ctx, 2); !more {
			t.Fatal("hasPending(2) = false")
		}
	})

	t.Run("AlbumParts", func(t *testing.T) {
		st := fresh(t)
		mustInsert(t, st, pendingUpdate(3, 1, "g1", 1))
		mustInsert(t, st, pendingUpdate(1, 1, "g1", 2))
		mustInsert(t, st, pendingUpdate(2, 1, "g2", 3))
		mustInsert(t, st, pendingUpdate(4, 7, "g1", 4)) // same group id, other chat
		parts, err := st.pendingGroup(ctx, 1, "g1")
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, p := range parts {
			ids = append(ids, p.UpdateID)
		}
		if fmt.Sprint(ids) != "[1 3]" {
			t.Fatalf("album g1 of chat 1 = %v, want [1 3]", ids)
		}
	})

	t.Run("Purge", func(t *testing.T) {
		st := fresh(t)
		old, fresh2 := now.Add(-25*time.Hour).UnixMilli(), now.UnixMilli()
		mustInsert(t, st, pendingUpdate(1, 1, "", old)) // old but pending: kept
		mustInsert(t, st, pendingUpdate(2, 1, "", old))
		mustInsert(t, st, pendingUpdate(3, 1, "", fresh2))
		if err := st.finish(ctx, []int64{2, 3}, stateDone, "", now); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.RequestPairing(ctx, 50, 50, "old", now.Add(-2*time.Hour), time.Hour, 3); err != nil {
			t.Fatal(err)
		}
		if err := st.saveForget(ctx, "n1", 1, "telegram:1", now.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := st.purge(ctx, now.Add(-DefaultDedupTTL), now); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[int64]bool{1: true, 2: false, 3: true} {
			s, _, _ := st.updateState(ctx, id)
			if (s != "") != want {
				t.Errorf("update %d kept = %v, want %v", id, s != "", want)
			}
		}
		if _, ok, _ := st.takeForget(ctx, "n1", 100, "telegram:100"); ok {
			t.Error("expired forget request survived purge")
		}
		if list, _ := st.ListPairings(ctx, now.Add(-3*time.Hour)); len(list) != 0 {
			t.Errorf("expired pairing survived purge: %v", list)
		}
		// A purged update_id is no longer de-duplicated (TTL).
		if !mustInsert(t, st, pendingUpdate(2, 1, "", fresh2)) {
			t.Error("update_id 2 still de-duplicated after its TTL")
		}
	})

	t.Run("Pairing", func(t *testing.T) {
		st := fresh(t)
		p, fresh1, err := st.RequestPairing(ctx, 100, 100, "Ana", now, time.Hour, 3)
		if err != nil || !fresh1 {
			t.Fatalf("RequestPairing: %v fresh=%v", err, fresh1)
		}
		if len(p.Code) != 8 || strings.ContainsAny(p.Code, "0O1I") {
			t.Fatalf("code %q: want 8 characters without 0/O/1/I", p.Code)
		}
		again, fresh2, err := st.RequestPairing(ctx, 100, 100, "Ana", now.Add(time.Minute), time.Hour, 3)
		if err != nil || fresh2 || again.Code != p.Code {
			t.Fatalf("repeat request: %q fresh=%v %v; want the same code", again.Code, fresh2, err)
		}
		for _, chat := range []int64{101, 102} {
			if _, _, err := st.RequestPairing(ctx, chat, chat, "x", now, time.Hour, 3); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := st.RequestPairing(ctx, 103, 103, "x", now, time.Hour, 3); !errors.Is(err, ErrTooManyPending) {
			t.Fatalf("fourth pending code: %v, want ErrTooManyPending", err)
		}
		list, err := st.ListPairings(ctx, now)
		if err != nil || len(list) != 3 || list[0].Code != p.Code || list[0].Name != "Ana" {
			t.Fatalf("ListPairings = %+v, %v", list, err)
		}
		if ok, _ := st.isAllowed(ctx, 100); ok {
			t.Fatal("chat allowed before approval")
		}
		got, err := st.ApprovePairing(ctx, " "+strings.ToLower(p.Code)+" ", now)
		if err != nil || got.ChatID != 100 {
			t.Fatalf("ApprovePairing = %+v, %v", got, err)
		}
		if ok, err := st.isAllowed(ctx, 100); err != nil || !ok {
			t.Fatalf("isAllowed after approval = %v, %v", ok, err)
		}
		if _, err := st.ApprovePairing(ctx, p.Code, now); !errors.Is(err, ErrPairingNotFound) {
			t.Fatalf("second approval: %v, want ErrPairingNotFound", err)
		}
		if _, err := st.ApprovePairing(ctx, list[1].Code, now.Add(2*time.Hour)); !errors.Is(err, ErrPairingExpired) {
			t.Fatalf("late approval: %v, want ErrPairingExpired", err)
		}
		if ok, _ := st.isAllowed(ctx, list[1].ChatID); ok {
			t.Fatal("expired code let its chat in")
		}
	})

	t.Run("SessionsApprovalsForget", func(t *testing.T) {
		st := fresh(t)
		if id, err := st.sessionID(ctx, "100"); err != nil || id != "" {
			t.Fatalf("unknown session key = %q, %v", id, err)
		}
		for _, id := range []string{"tg-100-a", "tg-100-b"} {
			if err := st.setSessionID(ctx, "100", id); err != nil {
				t.Fatal(err)
			}
		}
		if id, _ := st.sessionID(ctx, "100"); id != "tg-100-b" {
			t.Fatalf("session = %q, want the latest", id)
		}
		if m, err := st.approvalMessage(ctx, "r1"); err != nil || m != nil {
			t.Fatalf("unknown approval message = %+v, %v", m, err)
		}
		if err := st.saveApprovalMessage(ctx, approvalMessage{RequestID: "r1", ChatID: 100, MessageID: 7, ActorID: "telegram:100"}); err != nil {
			t.Fatal(err)
		}
		if err := st.markApprovalDecided(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
		m, err := st.approvalMessage(ctx, "r1")
		if err != nil || m == nil || m.MessageID != 7 || m.ActorID != "telegram:100" || !m.Decided {
			t.Fatalf("approval message = %+v, %v", m, err)
		}
		exp := now.Add(10 * time.Minute)
		if err := st.saveForget(ctx, "n1", 100, "telegram:100", exp); err != nil {
			t.Fatal(err)
		}
		// A press from another chat or user neither takes it nor uses it up.
		for _, f := range []struct {
			chat  int64
			actor string
		}{{101, "telegram:100"}, {100, "telegram:101"}} {
			if _, ok, err := st.takeForget(ctx, "n1", f.chat, f.actor); ok || err != nil {
				t.Fatalf("takeForget from chat %d, %s = %v %v; want none", f.chat, f.actor, ok, err)
			}
		}
		e, ok, err := st.takeForget(ctx, "n1", 100, "telegram:100")
		if err != nil || !ok || !e.Equal(exp) {
			t.Fatalf("takeForget = %v %v %v", e, ok, err)
		}
		if _, ok, _ := st.takeForget(ctx, "n1", 100, "telegram:100"); ok {
			t.Fatal("a forget confirmation was taken twice")
		}
	})

	t.Run("ForgetActor", func(t *testing.T) {
		st := fresh(t)
		const user, group = 4242, -100777
		mustInsert(t, st, pendingUpdate(1, user, "", 1))
		inGroup := storedUpdate{UpdateID: 2, ChatID: group, Kind: kindMessage, Body: []byte(textUpdate(2, group, user, "hi all")), ReceivedMS: 1, State: statePending}
		mustInsert(t, st, inGroup)
		other := storedUpdate{UpdateID: 3, ChatID: group, Kind: kindMessage, Body: []byte(textUpdate(3, group, 5555, "mentions 4242")), ReceivedMS: 1, State: statePending}
		mustInsert(t, st, other)
		if _, _, err := st.RequestPairing(ctx, user, user, "u", now, time.Hour, 3); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"4242": "a", fmt.Sprintf("%d:4242", group): "b", fmt.Sprintf("%d:5555", group): "c", "14242": "d"} {
			if err := st.setSessionID(ctx, k, v); err != nil {
				t.Fatal(err)
			}
		}
		n, err := st.ForgetActor(ctx, "telegram:4242")
		if err != nil {
			t.Fatal(err)
		}
		if n != 5 { // 2 updates, 1 pairing, 2 sessions
			t.Errorf("ForgetActor removed %d rows, want 5", n)
		}
		for id, kept := range map[int64]bool{1: false, 2: false, 3: true} {
			if s, _, _ := st.updateState(ctx, id); (s != "") != kept {
				t.Errorf("update %d kept = %v, want %v", id, s != "", kept)
			}
		}
		for k, kept := range map[string]bool{"4242": false, fmt.Sprintf("%d:4242", group): false, fmt.Sprintf("%d:5555", group): true, "14242": true} {
			if id, _ := st.sessionID(ctx, k); (id != "") != kept {
				t.Errorf("session %q kept = %v, want %v", k, id != "", kept)
			}
		}
		if _, err := st.ForgetActor(ctx, " "); !errors.Is(err, ErrBadActor) {
			t.Errorf("ForgetActor(blank) = %v, want ErrBadActor", err)
		}
	})

	t.Run("Leases", func(t *testing.T) {
		st := fresh(t)
		mustInsert(t, st, pendingUpdate(1, 9, "", 1))
		chats, err := st.claimableChats(ctx)
		if err != nil || fmt.Sprint(chats) != "[9]" {
			t.Fatalf("claimableChats = %v, %v", chats, err)
		}
		for i := 0; i < 2; i++ { // re-entrant for its owner
			if ok, err := st.claimChat(ctx, 9, time.Hour); err != nil || !ok {
				t.Fatalf("claim %d = %v, %v", i, ok, err)
			}
		}
		if ok, err := st.renewChat(ctx, 9, time.Hour); err != nil || !ok {
			t.Fatalf("renew = %v, %v", ok, err)
		}
		if chats, _ := st.claimableChats(ctx); fmt.Sprint(chats) != "[9]" {
			t.Fatalf("own leased chat not claimable by its owner: %v", chats)
		}
		if err := st.releaseChat(ctx, 9); err != nil {
			t.Fatal(err)
		}
		if ok, _ := st.renewChat(ctx, 9, time.Hour); ok {
			t.Fatal("renewed a released lease")
		}
	})
}

func exerciseShared(t *testing.T, pair func(t *testing.T) (*Store, *Store)) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

	t.Run("ConcurrentDuplicateDelivery", func(t *testing.T) {
		a, b := pair(t)
		const n = 40
		var mu sync.Mutex
		winners := map[int64]int{}
		var wg sync.WaitGroup
		for _, st := range []*Store{a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := int64(1); id <= n; id++ {
					ok, err := st.insertUpdate(ctx, pendingUpdate(id, id%3, "", 1))
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						mu.Lock()
						winners[id]++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		for id := int64(1); id <= n; id++ {
			if winners[id] != 1 {
				t.Errorf("update_id %d stored by %d deliveries, want exactly 1", id, winners[id])
			}
		}
	})

	t.Run("LeaseExclusive", func(t *testing.T) {
		a, b := pair(t)
		mustInsert(t, a, pendingUpdate(1, 9, "", 1))
		var wins sync.Map
		var wg sync.WaitGroup
		for i, st := range []*Store{a, b, a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := st.claimChat(ctx, 9, time.Hour)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Store(st.owner, i)
				}
			}()
		}
		wg.Wait()
		owners := 0
		wins.Range(func(any, any) bool { owners++; return true })
		if owners != 1 {
			t.Fatalf("%d owners hold chat 9 at once, want 1", owners)
		}
		holder, other := a, b
		if _, ok := wins.Load(b.owner); ok {
			holder, other = b, a
		}
		if chats, _ := other.claimableChats(ctx); len(chats) != 0 {
			t.Fatalf("chat held by a live lease is claimable by another instance: %v", chats)
		}
		if ok, _ := other.renewChat(ctx, 9, time.Hour); ok {
			t.Fatal("renewed another owner's lease")
		}
		if err := other.releaseChat(ctx, 9); err != nil {
			t.Fatal(err)
		}
		if ok, _ := other.claimChat(ctx, 9, time.Hour); ok {
			t.Fatal("release by a non-owner freed the lease")
		}
		// The holder "dies": on SQLite its lease is made to have expired;
		// on PostgreSQL its lock connection ends, as a killed process's does.
		if holder.locks != nil {
			holder.locks.close()
		} else if ok, err := holder.claimChat(ctx, 9, -time.Second); err != nil || !ok {
			t.Fatalf("re-claim with expiry in the past = %v, %v", ok, err)
		}
		// A closed client socket ends its PostgreSQL backend, and with it
		// the advisory lock, a moment later, not at once: wait for it
		// (bounded) as the poll loop does, rather than racing the server.
		chats := awaitClaimable(t, other, 9)
		if fmt.Sprint(chats) != "[9]" {
			t.Fatalf("expired lease not claimable: %v", chats)
		}
		if ok, err := other.claimChat(ctx, 9, time.Hour); err != nil || !ok {
			t.Fatalf("take over expired lease = %v, %v", ok, err)
		}
		if ok, _ := holder.renewChat(ctx, 9, time.Hour); ok {
			t.Fatal("the old holder renewed a lease taken over by another instance")
		}
		// The pending update survived the takeover.
		if u, err := other.nextPending(ctx, 9); err != nil || u == nil || u.UpdateID != 1 {
			t.Fatalf("pending update after takeover = %+v, %v", u, err)
		}
	})

	t.Run("PairingEverywhere", func(t *testing.T) {
		a, b := pair(t)
		p, _, err := a.RequestPairing(ctx, 300, 300, "Ana", now, time.Hour, 3)
		if err != nil {
			t.Fatal(err)
		}
		if list, _ := b.ListPairings(ctx, now); len(list) != 1 || list[0].Code != p.Code {
			t.Fatalf("other instance lists %+v", list)
		}
		// Both instances approve the same code at once: exactly one wins.
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, st := range []*Store{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); _, errs[i] = st.ApprovePairing(ctx, p.Code, now) }()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, ErrPairingNotFound):
				t.Fatalf("approval: %v", err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d approvals of one code succeeded, want 1 (%v)", ok, errs)
		}
		for _, st := range []*Store{a, b} {
			if allowed, err := st.isAllowed(ctx, 300); err != nil || !allowed {
				t.Fatalf("chat 300 allowed = %v, %v on one instance", allowed, err)
			}
		}
	})

	t.Run("PendingPairingCapAcrossInstances", func(t *testing.T) {
		a, b := pair(t)
		var mu sync.Mutex
		issued, refused := 0, 0
		var wg sync.WaitGroup
		for i := range 8 {
			st := []*Store{a, b}[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := st.RequestPairing(ctx, int64(400+i), int64(400+i), "x", now, time.Hour, 3)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					issued++
				case errors.Is(err, ErrTooManyPending):
					refused++
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if issued != 3 || refused != 5 {
			t.Fatalf("issued %d, refused %d pairing codes; want 3 and 5", issued, refused)
		}
	})

	t.Run("SessionMapShared", func(t *testing.T) {
		a, b := pair(t)
		if err := a.setSessionID(ctx, "100", "tg-100-x"); err != nil {
			t.Fatal(err)
		}
		if id, err := b.sessionID(ctx, "100"); err != nil || id != "tg-100-x" {
			t.Fatalf("session on the other instance = %q, %v", id, err)
		}
		if err := b.setSessionID(ctx, "100", "tg-100-y"); err != nil {
			t.Fatal(err)
		}
		if id, _ := a.sessionID(ctx, "100"); id != "tg-100-y" {
			t.Fatalf("session after /new elsewhere = %q", id)
		}
	})
}

// TestSQLiteLegacyTablesRenamed: a store written before the telegram_
// prefix keeps its rows.
func TestSQLiteLegacyTablesRenamed(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	legacy := strings.NewReplacer("telegram_", "").Replace(sqliteSchema)
	legacy = legacy[:strings.Index(legacy, "CREATE TABLE IF NOT EXISTS chat_leases")]
	if _, err := db.Exec(legacy + `INSERT INTO allowed(chat_id, added_ms) VALUES(77, 1);
		INSERT INTO sessions(key, session_id) VALUES('77', 'tg-77-old');
		INSERT INTO updates(update_id, chat_id, kind, body, received_ms, state) VALUES(5, 77, 'message', x'7b7d', 1, 'pending');`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if ok, err := st.isAllowed(ctx, 77); err != nil || !ok {
		t.Fatalf("paired chat lost in upgrade: %v %v", ok, err)
	}
	if id, _ := st.sessionID(ctx, "77"); id != "tg-77-old" {
		t.Fatalf("session lost in upgrade: %q", id)
	}
	if u, err := st.nextPending(ctx, 77); err != nil || u == nil || u.UpdateID != 5 {
		t.Fatalf("pending update lost in upgrade: %+v %v", u, err)
	}
	var legacyLeft int
	if err := st.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name IN ('updates', 'pairing', 'allowed', 'sessions', 'updates_pending')`).Scan(&legacyLeft); err != nil || legacyLeft != 0 {
		t.Fatalf("%d legacy objects left (%v)", legacyLeft, err)
	}
}

// awaitClaimable polls st.claimableChats until it lists chatID or 10 s
// pass, and returns the last list. It is not a timing assertion: a lease
// freed by a dying connection is released by the server asynchronously.
func awaitClaimable(t *testing.T, st *Store, chatID int64) []int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		chats, err := st.claimableChats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(chats, chatID) || time.Now().After(deadline) {
			return chats
		}
		time.Sleep(20 * time.Millisecond)
	}
}
