package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

// benchSession is one session of a benchmark conversation.
type benchSession struct {
	id     string
	events []memory.Event
}

// locomoSessions reads the LoCoMo development split (../shared/data/locomo,
// or $TENDRIL_LOCOMO) as sessions of user events; nil when it is absent.
func locomoSessions(tb testing.TB) []benchSession {
	path := os.Getenv("TENDRIL_LOCOMO")
	if path == "" {
		path = filepath.Join("..", "..", "..", "..", "shared", "data", "locomo", "locomo-dev.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var convs []struct {
		Conversation map[string]json.RawMessage `json:"conversation"`
	}
	if err := json.Unmarshal(b, &convs); err != nil {
		tb.Fatal(err)
	}
	var out []benchSession
	for ci, c := range convs {
		var keys []int
		for k, v := range c.Conversation {
			n, err := strconv.Atoi(strings.TrimPrefix(k, "session_"))
			if err != nil || !strings.HasPrefix(k, "session_") || len(v) == 0 || v[0] != '[' {
				continue
			}
			keys = append(keys, n)
		}
		sort.Ints(keys)
		base := time.Date(2023, 5, 1, 0, 0, 0, 0, time.UTC)
		for _, n := range keys {
			var turns []struct{ Speaker, Text, Dia_id string }
			if err := json.Unmarshal(c.Conversation[fmt.Sprintf("session_%d", n)], &turns); err != nil {
				tb.Fatal(err)
			}
			s := benchSession{id: fmt.Sprintf("c%d-s%d", ci, n)}
			for i, t := range turns {
				s.events = append(s.events, memory.Event{ID: fmt.Sprintf("c%d-%s", ci, t.Dia_id), Role: "user", Text: t.Text,
					Timestamp: base.Add(time.Duration(n)*24*time.Hour + time.Duration(i)*time.Minute),
					Metadata:  map[string]any{"speaker": t.Speaker}})
			}
			out = append(out, s)
		}
	}
	return out
}

// syntheticSessions is a fixed English/Korean corpus: a third statements
// the rules extract, the rest questions and small talk.
func syntheticSessions() []benchSession {
	lines := []string{
		"I only use organic fertiliser", "How do I treat aphids on roses?", "ok thanks", "I have a fig tree",
		"What's the weather like tomorrow in Busan?", "저는 유기농 비료만 써요", "ㅋㅋ 네", "무화과나무가 있어요",
		"Yesterday I went to the market and bought some seedlings for the balcony", "항상 한국어로 답해줘",
		"should I water the tomatoes twice a day in this heat?", "call me Jin", "haha", "I live in Busan",
		"토마토 잎이 노랗게 변했어요 왜 그럴까요?", "keep answers short",
	}
	var out []benchSession
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for s := 0; s < 40; s++ {
		bs := benchSession{id: fmt.Sprint("s", s)}
		for i := 0; i < 20; i++ {
			bs.events = append(bs.events, memory.Event{ID: fmt.Sprintf("e%d-%d", s, i), Role: "user",
				Text: lines[(s*7+i)%len(lines)], Timestamp: base.Add(time.Duration(s*20+i) * time.Minute)})
		}
		out = append(out, bs)
	}
	return out
}

func countTurns(ss []benchSession) int {
	n := 0
	for _, s := range ss {
		n += len(s.events)
	}
	return n
}

// BenchmarkIngest measures turns/s of one actor's sessions replayed in
// order on sqlitestore: "append" only appends the events (the baseline: no
// extraction), "pipeline" records each session as one RecordTurn and then
// Flushes it — extraction, gate, consolidation and the session summary, as
// the records level of tendril eval locomo does — and "pipeline-fakestore"
// does the same on the in-memory fake store, isolating the pipeline's own
// cost. The LoCoMo corpus on sqlitestore's pipeline takes minutes (the
// store rebuilds its index after every write), so it runs only with
// TENDRIL_BENCH_LONG=1.
func BenchmarkIngest(b *testing.B) {
	corpora := map[string][]benchSession{"synthetic": syntheticSessions()}
	if l := locomoSessions(b); l != nil {
		corpora["locomo"] = l
	}
	for _, corpus := range []string{"synthetic", "locomo"} {
		sessions, ok := corpora[corpus]
		if !ok {
			continue
		}
		for _, mode := range []string{"append", "pipeline", "pipeline-fakestore"} {
			if corpus == "locomo" && mode == "pipeline" && os.Getenv("TENDRIL_BENCH_LONG") == "" {
				continue
			}
			b.Run(corpus+"/"+mode, func(b *testing.B) {
				turns := 0
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					dir := b.TempDir()
					var st memory.Store = newMemStore()
					if mode != "pipeline-fakestore" {
						s, err := sqlitestore.Open(dir, sqlitestore.Options{NoFsync: true, EventExpiryDays: -1})
						if err != nil {
							b.Fatal(err)
						}
						st = s
					}
					p, err := New(st, Options{JobsPath: filepath.Join(dir, "jobs.db")})
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					for _, s := range sessions {
						evs := append([]memory.Event(nil), s.events...)
						for i := range evs {
							evs[i].ActorID, evs[i].SessionID = "bench", s.id
						}
						if mode == "append" {
							err = st.AppendEvents(ctx, evs)
						} else {
							if err = p.RecordTurn(ctx, "main", "bench", s.id, evs); err == nil {
								err = p.Flush(ctx, "main", "bench", s.id)
							}
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					turns += countTurns(sessions)
					b.StopTimer()
					p.Close()
					st.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(turns)/b.Elapsed().Seconds(), "turns/s")
			})
		}
	}
}
