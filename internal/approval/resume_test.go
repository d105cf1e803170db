package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func callOf(actor, args, resume string) Call {
	c := writeCall(args)
	c.ActorID = actor
	if resume != "" {
		c.Resume = json.RawMessage(resume)
	}
	return c
}

func ledgerBytes(t *testing.T, g *Gate) []byte {
	t.Helper()
	b, err := os.ReadFile(g.Path())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAskStoresPausedTurnBesideTheLedger(t *testing.T) {
	const secret = "my neighbour's name is Ottoline"
	for _, tc := range []struct {
		name    string
		payload string
	}{
		{"object", `{"turn":"t1","messages":[{"role":"user","text":"` + secret + `"}]}`},
		{"non-canonical spacing kept byte for byte", `{ "turn" : "t2",  "note":"` + secret + `" }`},
		{"unicode", `{"turn":"t3","text":"` + secret + ` – ünïcødé 🌱"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			g := open(t, dir, newClocks(), nil)
			var mu sync.Mutex
			var events []string
			g.trace = func(ev string) {
				mu.Lock()
				events = append(events, ev)
				mu.Unlock()
			}
			d, err := g.Check(ctx, callOf("telegram:1", `{"title":"x"}`, tc.payload), state.Normal)
			if err != nil || d.Verdict != Ask {
				t.Fatalf("Check: %+v %v", d, err)
			}
			// Durable before referenced: fsync, rename, directory fsync,
			// and only then the ledger line.
			want := []string{"resume:fsync", "resume:rename", "resume:dirsync", "ledger:append"}
			if !slices.Equal(events, want) {
				t.Fatalf("durability steps %v, want %v", events, want)
			}
			ref := sha([]byte(tc.payload))
			if got := string(d.Request.Resume); got != `{"ref":"`+ref+`"}` {
				t.Fatalf("Decision.Request.Resume = %s, want the reference", got)
			}
			fi, err := os.Stat(filepath.Join(dir, ResumeDir, ref+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("resume file mode %v, want 0600", fi.Mode().Perm())
			}
			if b := ledgerBytes(t, g); bytes.Contains(b, []byte("Ottoline")) || !bytes.Contains(b, []byte(ref)) {
				t.Fatalf("ledger holds the payload or lacks the ref:\n%s", b)
			}
			got, err := g.LoadResume(*d.Request)
			if err != nil || string(got) != tc.payload {
				t.Fatalf("LoadResume = %s, %v; want %s", got, err, tc.payload)
			}
			// No temp files are left behind.
			ents, _ := os.ReadDir(filepath.Join(dir, ResumeDir))
			if len(ents) != 1 {
				t.Fatalf("resume dir holds %d entries, want 1", len(ents))
			}

			// A restarted process reads the request from the ledger and
			// the payload from the file; so does an OnDecision callback.
			g.Close()
			g2 := open(t, dir, newClocks(), nil)
			var loaded json.RawMessage
			var loadErr error
			g2.OnDecision(func(r Request, _ bool) { loaded, loadErr = g2.LoadResume(r) })
			if err := g2.Decide(ctx, d.Request.ID, true, "cli"); err != nil {
				t.Fatal(err)
			}
			if loadErr != nil || string(loaded) != tc.payload {
				t.Fatalf("OnDecision LoadResume = %s, %v", loaded, loadErr)
			}
			r, _ := g2.Get(ctx, d.Request.ID)
			g2.DropResume(r)
			if _, err := g2.LoadResume(r); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("after DropResume: %v, want os.ErrNotExist", err)
			}
			if rep, err := g2.Verify(ctx); err != nil || !rep.OK {
				t.Fatalf("verify: %+v %v", rep, err)
			}
		})
	}
}

func TestResumeOnlyStoredForAsk(t *testing.T) {
	dir := t.TempDir()
	g := open(t, dir, newClocks(), func(o *Options) {
		o.Rules, o.SyncRules = map[string]Rule{"notes_read": RuleAlways, "notes_never": RuleNever}, true
	})
	for _, tc := range []struct {
		name, tool string
		class      tool.Class
		resume     string
		want       Verdict
		wantErr    error
	}{
		{"allow ignores the payload", "notes_read", tool.ClassRead, `{"turn":"a"}`, Allow, nil},
		{"allow ignores invalid JSON", "notes_read", tool.ClassRead, `{not json`, Allow, nil},
		{"deny ignores the payload", "notes_never", tool.ClassWrite, `{"turn":"d"}`, Deny, nil},
		{"ask without payload", "notes_write", tool.ClassWrite, ``, Ask, nil},
		{"ask with invalid JSON", "notes_write", tool.ClassWrite, `{"turn":`, "", ErrInvalidCall},
		{"ask over MaxResumeBytes", "notes_write", tool.ClassWrite, `"` + strings.Repeat("x", 2<<20) + `"`, "", ErrInvalidCall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g.opts.MaxResumeBytes = 1 << 20
			before := len(ledgerBytes(t, g))
			c := callOf("telegram:1", `{"n":1}`, tc.resume)
			c.Tool, c.Class = tc.tool, tc.class
			d, err := g.Check(ctx, c, state.Normal)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				if len(ledgerBytes(t, g)) != before {
					t.Fatal("a refused Check appended to the ledger")
				}
			} else if err != nil || d.Verdict != tc.want {
				t.Fatalf("verdict %s (%v), want %s", d.Verdict, err, tc.want)
			}
			if d.Request != nil && len(d.Request.Resume) != 0 {
				t.Fatalf("request without payload has resume %s", d.Request.Resume)
			}
			if ents, _ := os.ReadDir(filepath.Join(dir, ResumeDir)); len(ents) != 0 {
				t.Fatalf("resume files written: %v", ents)
			}
		})
	}
}

func TestLoadResumeRejectsHostileRefs(t *testing.T) {
	dir := t.TempDir()
	g := open(t, dir, newClocks(), nil)
	// Files a traversal would reach.
	os.WriteFile(filepath.Join(dir, "secret.json"), []byte(`{"secret":1}`), 0o600)
	good := strings.Repeat("ab", 32)
	corrupt := sha([]byte(`{"turn":"original"}`))
	os.MkdirAll(filepath.Join(dir, ResumeDir), 0o700)
	os.WriteFile(filepath.Join(dir, ResumeDir, corrupt+".json"), []byte(`{"turn":"tampered"}`), 0o600)
	for _, tc := range []struct {
		name   string
		resume string
		want   error
	}{
		{"empty", ``, ErrResumeRef},
		{"traversal", `{"ref":"../../etc/passwd"}`, ErrResumeRef},
		{"traversal to a sibling", `{"ref":"../secret"}`, ErrResumeRef},
		{"absolute path", `{"ref":"/etc/passwd"}`, ErrResumeRef},
		{"short", `{"ref":"abcdef"}`, ErrResumeRef},
		{"long", `{"ref":"` + good + `0"}`, ErrResumeRef},
		{"63 hex and a slash", `{"ref":"` + good[:63] + `/"}`, ErrResumeRef},
		{"upper-case hex", `{"ref":"` + strings.ToUpper(good) + `"}`, ErrResumeRef},
		{"non-hex of the right length", `{"ref":"` + strings.Repeat("zz", 32) + `"}`, ErrResumeRef},
		{"NUL inside", `{"ref":"` + good[:60] + `\u0000abc"}`, ErrResumeRef},
		{"not JSON", `../../etc/passwd`, ErrResumeRef},
		{"an inline payload, not a ref", `{"turn":"t1"}`, ErrResumeRef},
		{"ref of the wrong type", `{"ref":42}`, ErrResumeRef},
		{"valid but missing", `{"ref":"` + good + `"}`, os.ErrNotExist},
		{"content does not match the ref", `{"ref":"` + corrupt + `"}`, ErrResumeCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := g.LoadResume(Request{ID: "01J00000000000000000000000", Resume: json.RawMessage(tc.resume)})
			if !errors.Is(err, tc.want) || b != nil {
				t.Fatalf("LoadResume(%s) = %q, %v; want %v", tc.resume, b, err, tc.want)
			}
			// DropResume of a hostile ref deletes nothing.
			g.DropResume(Request{Resume: json.RawMessage(tc.resume)})
			if _, err := os.Stat(filepath.Join(dir, "secret.json")); err != nil {
				t.Fatal("DropResume reached outside the resume directory")
			}
		})
	}
}

func TestLegacyRefEntriesStillLoad(t *testing.T) {
	// Before the gate stored paused turns itself, cmd/tendril wrote
	// resume/<sha>.json (without fsync) and passed {"ref":sha} as the
	// call's resume payload. Those ledgers keep working.
	dir := t.TempDir()
	c := newClocks()
	payload := []byte(`{"turn":"legacy"}`)
	ref := sha(payload)
	os.MkdirAll(filepath.Join(dir, ResumeDir), 0o700)
	os.WriteFile(filepath.Join(dir, ResumeDir, ref+".json"), payload, 0o600)
	g := open(t, dir, c, nil)
	now := c.Now()
	canon, _ := Canonical(json.RawMessage(`{"n":1}`))
	h, _ := ArgsHash(canon)
	rec := &reqRecord{ID: "01J00000000000000000000000", AgentID: "main", ActorID: "telegram:1", SessionID: "s1", Tool: "notes_write",
		Class: tool.ClassWrite, ArgsHash: h, Args: canon, CreatedAt: now, ExpiresAt: now.Add(time.Minute),
		Resume: json.RawMessage(`{"ref":"` + ref + `"}`)}
	if err := g.withLock(func() error { return g.appendLocked(&entry{At: now, Type: EntryRequest, Request: rec}) }); err != nil {
		t.Fatal(err)
	}
	g.Close()
	g = open(t, dir, c, nil)
	p, err := g.Pending(ctx)
	if err != nil || len(p) != 1 {
		t.Fatalf("pending %+v %v", p, err)
	}
	if b, err := g.LoadResume(p[0]); err != nil || !bytes.Equal(b, payload) {
		t.Fatalf("legacy LoadResume = %s, %v", b, err)
	}
	if n, err := g.ForgetActor(ctx, "telegram:1", "forget"); err != nil || n != 1 {
		t.Fatalf("ForgetActor = %d, %v", n, err)
	}
	if _, err := g.LoadResume(p[0]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("legacy file survived ForgetActor: %v", err)
	}
}

func TestForgetActor(t *testing.T) {
	dir := t.TempDir()
	c := newClocks()
	g := open(t, dir, c, nil)
	type made struct {
		actor   string
		resume  string
		approve bool
		req     Request
	}
	reqs := []*made{
		{actor: "telegram:1", resume: `{"turn":"a1"}`},
		{actor: "telegram:1", resume: `{"turn":"a2"}`},
		{actor: "telegram:1", resume: `{"turn":"a3"}`, approve: true}, // approved, not yet resumed
		{actor: "telegram:1"},                                         // pending, no paused turn
		{actor: "telegram:2", resume: `{"turn":"b1"}`},
		{actor: "telegram:2", resume: `{"turn":"b2"}`, approve: true},
	}
	for i, m := range reqs {
		d, err := g.Check(ctx, callOf(m.actor, `{"i":`+string(rune('0'+i))+`}`, m.resume), state.Normal)
		if err != nil || d.Verdict != Ask {
			t.Fatal(d, err)
		}
		if m.approve {
			if err := g.Decide(ctx, d.Request.ID, true, "cli"); err != nil {
				t.Fatal(err)
			}
		}
		m.req, _ = g.Get(ctx, d.Request.ID)
	}
	var mu sync.Mutex
	fired := map[string]error{}
	g.OnDecision(func(r Request, approved bool) {
		_, err := g.LoadResume(r)
		mu.Lock()
		fired[r.ID] = err
		mu.Unlock()
		if approved {
			t.Errorf("ForgetActor approved %s", r.ID)
		}
	})

	n, err := g.ForgetActor(ctx, "telegram:1", "forget")
	if err != nil || n != 3 {
		t.Fatalf("ForgetActor = %d, %v; want 3 denied", n, err)
	}
	for _, m := range reqs {
		r, _ := g.Get(ctx, m.req.ID)
		_, loadErr := g.LoadResume(m.req)
		mine := m.actor == "telegram:1"
		switch {
		case mine && m.approve && r.Status != StatusApproved:
			t.Errorf("%s: approved request became %s", m.resume, r.Status)
		case mine && !m.approve && (r.Status != StatusDenied || r.DecidedBy != "forget"):
			t.Errorf("%s: status %s by %q, want denied by forget", m.resume, r.Status, r.DecidedBy)
		case !mine && r.Status != m.req.Status:
			t.Errorf("other actor's request changed: %s → %s", m.req.Status, r.Status)
		}
		switch {
		case m.resume == "":
		case mine && !errors.Is(loadErr, os.ErrNotExist):
			t.Errorf("%s: file survived: %v", m.resume, loadErr)
		case !mine && loadErr != nil:
			t.Errorf("%s: other actor's file lost: %v", m.resume, loadErr)
		}
	}
	// Callbacks fired for the denials and found no payload to resume.
	mu.Lock()
	if len(fired) != 3 {
		t.Errorf("OnDecision fired %d times, want 3", len(fired))
	}
	for id, err := range fired {
		if id == reqs[3].req.ID {
			if !errors.Is(err, ErrResumeRef) {
				t.Errorf("request without payload: %v", err)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: callback could load the forgotten turn: %v", id, err)
		}
	}
	mu.Unlock()
	if ents, _ := os.ReadDir(filepath.Join(dir, ResumeDir)); len(ents) != 2 {
		t.Errorf("resume dir holds %d files, want the other actor's 2", len(ents))
	}
	if b := ledgerBytes(t, g); bytes.Contains(b, []byte(`"turn"`)) {
		t.Error("ledger holds a payload")
	}
	if rep, err := g.Verify(ctx); err != nil || !rep.OK {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	// Idempotent; an actor with nothing is fine.
	if n, err := g.ForgetActor(ctx, "telegram:1", "forget"); err != nil || n != 0 {
		t.Fatalf("second ForgetActor = %d, %v", n, err)
	}
	if n, err := g.ForgetActor(ctx, "nobody", "forget"); err != nil || n != 0 {
		t.Fatalf("ForgetActor(nobody) = %d, %v", n, err)
	}
	for _, bad := range [][2]string{{"", "forget"}, {"a\x00", "forget"}, {"telegram:2", ""}} {
		if _, err := g.ForgetActor(ctx, bad[0], bad[1]); err == nil {
			t.Errorf("ForgetActor(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestForgetActorOnBrokenLedgerStillDeletesFiles(t *testing.T) {
	dir := t.TempDir()
	g := open(t, dir, newClocks(), nil)
	d, err := g.Check(ctx, callOf("telegram:1", `{"n":1}`, `{"turn":"x"}`), state.Normal)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(g.Path(), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("garbage\n")
	f.Close()
	n, err := g.ForgetActor(ctx, "telegram:1", "forget")
	if err != nil || n != 0 {
		t.Fatalf("ForgetActor on a broken ledger = %d, %v", n, err)
	}
	if g.Broken() == nil {
		t.Fatal("gate not closed")
	}
	if _, err := g.LoadResume(*d.Request); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file survived: %v", err)
	}
}

func TestDropResumeKeepsSharedPayloadOfOpenRequest(t *testing.T) {
	g := open(t, t.TempDir(), newClocks(), nil)
	payload := `{"turn":"same"}`
	d1, _ := g.Check(ctx, callOf("telegram:1", `{"n":1}`, payload), state.Normal)
	d2, _ := g.Check(ctx, callOf("telegram:1", `{"n":2}`, payload), state.Normal)
	if string(d1.Request.Resume) != string(d2.Request.Resume) {
		t.Fatal("identical payloads got different refs")
	}
	g.DropResume(*d1.Request) // d2 still pending and needs it
	if _, err := g.LoadResume(*d2.Request); err != nil {
		t.Fatalf("shared payload dropped: %v", err)
	}
	g.Decide(ctx, d2.Request.ID, false, "cli")
	g.DropResume(*d2.Request) // d1 pending too
	if _, err := g.LoadResume(*d1.Request); err != nil {
		t.Fatalf("shared payload dropped: %v", err)
	}
	g.Decide(ctx, d1.Request.ID, false, "cli")
	g.DropResume(*d1.Request)
	if _, err := g.LoadResume(*d1.Request); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("closed requests' payload kept: %v", err)
	}
}

func TestRecordResultZeroExecIsHarmless(t *testing.T) {
	g := open(t, t.TempDir(), newClocks(), nil)
	before := ledgerBytes(t, g)
	if err := g.RecordResult(ctx, Exec{}, "out", errors.New("x")); err != nil {
		t.Fatalf("zero Exec: %v", err)
	}
	if !bytes.Equal(before, ledgerBytes(t, g)) || g.Broken() != nil {
		t.Fatal("zero Exec changed the ledger")
	}
	// A real one still records.
	d, _ := g.Check(ctx, Call{AgentID: "main", ActorID: "a", Tool: "lookup", Class: tool.ClassRead}, state.Normal)
	if err := g.RecordResult(ctx, *d.Exec, "ok", nil); err != nil {
		t.Fatal(err)
	}
	if err := g.RecordResult(ctx, *d.Exec, "ok", nil); err == nil {
		t.Fatal("second result for one execution accepted")
	}
}
