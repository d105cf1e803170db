package assistant

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/testenv"
)

// Forget is one operation: after it, every store is searched and holds
// nothing of the actor — events, records of every status, Markdown,
// state, paused turns and pending approvals, jobs, Telegram updates and
// pairing, sessions — while another actor keeps everything.
func TestForgetRemovesEveryItem(t *testing.T) {
	t.Run("embedded", func(t *testing.T) { testForgetRemovesEveryItem(t) })
	t.Run("postgres", func(t *testing.T) {
		t.Setenv("TENDRIL_DATABASE_URL", testenv.PostgresSchema(t))
		home := testForgetRemovesEveryItem(t)
		if files := userDataInHome(t, home); len(files) > 0 {
			t.Fatalf("with a database, user data was written to the home: %v", files)
		}
	})
}

func testForgetRemovesEveryItem(t *testing.T) (home string) {
	fake := modeltest.NewOpenAI(t)
	bot := telegramtest.New(t)
	t.Setenv("TELEGRAM_BOT_TOKEN", telegramtest.Token)
	t.Setenv("TELEGRAM_WEBHOOK_SECRET", "forget-secret")
	t.Setenv("TELEGRAM_API_URL", bot.URL)
	a := openTestApp(t, fake)
	home = a.Config().Home
	ctx := context.Background()
	if err := a.Start(ctx, StartOptions{Telegram: true}); err != nil {
		t.Fatal(err)
	}
	const actor, other = "telegram:555", "telegram:777"
	for _, ac := range []string{actor, other} {
		// A turn (session, events, state), then a paused turn.
		if _, err := a.Invoke(ctx, agent.Request{Message: "I only use organic fertiliser", ActorID: ac, Channel: "telegram"}); err != nil {
			t.Fatal(err)
		}
		fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"fig pruned"}`}}})
		res, err := a.Invoke(ctx, agent.Request{Message: "note: fig pruned", ActorID: ac, Channel: "telegram", SessionID: "notes"})
		if err != nil || res.PendingApproval == nil {
			t.Fatalf("no paused turn: %v %+v", err, res)
		}
		ns, _ := memory.Namespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: ac})
		for _, st := range []memory.Status{memory.StatusActive, memory.StatusStaged} {
			if _, err := a.memory.Put(ctx, memory.Record{Namespace: ns, Strategy: memory.StrategySemantic, Status: st, Content: "has a fig tree " + string(st)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.AddJob(ctx, schedule.JobSpec{Name: "water", Every: "24h", Task: "water the figs", ActorID: ac}); err != nil {
			t.Fatal(err)
		}
	}
	// An unknown Telegram chat writes: its update is stored and a pairing
	// code is issued.
	body := `{"update_id": 9001, "message": {"message_id": 1, "date": 1700000000, "chat": {"id": 555, "type": "private"}, "from": {"id": 555, "is_bot": false, "first_name": "Ana"}, "text": "hello"}}`
	req := httptest.NewRequest(http.MethodPost, telegram.WebhookPath, strings.NewReader(body))
	req.Header.Set(telegram.SecretHeader, "forget-secret")
	rec := httptest.NewRecorder()
	a.Telegram().Handler().ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("webhook: %d %s", rec.Code, rec.Body)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if p, _ := a.Pairings(ctx); len(p) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no pairing code issued")
		}
	}

	rep, err := a.Forget(ctx, ForgetRequest{ActorID: actor, Sessions: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Remaining != 0 || rep.JobsRemoved != 1 || rep.ApprovalsDenied != 1 || len(rep.SessionsRemoved) != 2 || rep.TelegramRows == 0 {
		t.Fatalf("report %+v", rep)
	}
	if recs, _ := a.Records(ctx, RecordsQuery{ActorID: actor, Statuses: []string{"active", "staged", "superseded", "rejected"}}); len(recs) != 0 {
		t.Fatalf("records left: %v", recs)
	}
	if evs, _ := a.memory.Events(ctx, actor, ""); len(evs) != 0 {
		t.Fatalf("events left: %v", evs)
	}
	if sq, ok := a.memory.(*sqlitestore.Store); ok {
		if _, err := os.Stat(filepath.Join(sq.MemoryDir(), "telegram%3A555")); !os.IsNotExist(err) {
			t.Fatalf("Markdown directory left: %v", err)
		}
	}
	if actors, _ := a.StateActors(ctx); strings.Contains(strings.Join(actors, ","), actor) {
		t.Fatalf("state left: %v", actors)
	}
	if jobs, _ := a.Jobs(ctx, actor); len(jobs) != 0 {
		t.Fatalf("jobs left: %v", jobs)
	}
	if p, _ := a.Pairings(ctx); len(p) != 0 {
		t.Fatalf("pairing left: %v", p)
	}
	if n, _ := a.tgStore.Pending(ctx); n != 0 {
		t.Fatalf("%d Telegram updates left", n)
	}
	reqs, _ := a.gate.List(ctx)
	for _, r := range reqs {
		if _, err := a.gate.LoadResume(r); r.ActorID == actor && err == nil {
			t.Fatalf("paused turn of %s left: %s", actor, r.ID)
		}
		if r.ActorID == actor && (r.Status == "pending" || r.Status == "approved") {
			t.Fatalf("open approval of %s left: %s", actor, r.ID)
		}
	}
	rows, _ := a.ListSessions(ctx, "")
	for _, r := range rows {
		if r.ID == "555" || strings.HasPrefix(r.ID, "555~") {
			t.Fatalf("session left: %v", r)
		}
	}
	// The other actor keeps everything.
	if recs, _ := a.Records(ctx, RecordsQuery{ActorID: other, Statuses: []string{"active", "staged"}}); len(recs) < 2 {
		t.Fatalf("the other actor lost records: %v", recs)
	}
	if jobs, _ := a.Jobs(ctx, other); len(jobs) != 1 {
		t.Fatalf("the other actor lost jobs: %v", jobs)
	}
	if rows, _ := a.ListSessions(ctx, ""); len(rows) != 2 {
		t.Fatalf("the other actor's sessions: %v", rows)
	}
	return home
}

// userDataInHome lists the files under home other than configuration,
// persona, skills and the management socket: with a database there must
// be none (SPEC §9).
func userDataInHome(t *testing.T, home string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(home, p)
		top := strings.Split(rel, string(filepath.Separator))[0]
		switch {
		case rel == "tendril.json", rel == "tendril.sock", rel == "serve.lock", rel == "persona.md", rel == "skills.json", top == "persona", top == "skills":
		default:
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// An actor stored before IDs refused invisible characters (here written
// straight to the memory store) can still be searched and forgotten.
func TestForgetLegacyInvisibleActor(t *testing.T) {
	a := openTestApp(t, modeltest.NewOpenAI(t))
	ctx := context.Background()
	actor := "api:\u202eeve"
	if err := a.memory.AppendEvents(ctx, []memory.Event{{ID: "legacy-1", ActorID: actor, SessionID: "s", Role: "user", Text: "my parrot is Zanzibar", Timestamp: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Invoke(ctx, agent.Request{Message: "hi", ActorID: actor, Channel: "api"}); !errors.Is(err, agent.ErrInvalidActorID) {
		t.Fatalf("a turn of the invisible actor: %v, want ErrInvalidActorID", err)
	}
	rep, err := a.Forget(ctx, ForgetRequest{ActorID: actor})
	if err != nil || rep.EventsRemoved != 1 || rep.Remaining != 0 {
		t.Fatalf("forget %q: %+v %v", actor, rep, err)
	}
}
