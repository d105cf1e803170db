package sqlitestore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/eval/locomo"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

// BenchmarkColdSearchActors searches one actor whose older events are
// cold (in SQLite and FTS5 only: a window of 128 events, as 100 actors
// sharing the default byte budget get), in a store of 1 or 100 actors
// with the same history each (1,000 turns, written round robin as the
// turns of many actors are, and the same texts, as the soak cycles the
// same LoCoMo turns through every actor). Each search's text is a later
// turn of the same stream, as a turn's retrieval query is the user's
// message. The cold search's cost should not grow with the other actors'
// history. Turn texts are LoCoMo's with LOCOMO_DATA set (the soak's
// workload), synthetic Zipf-distributed words otherwise.
func BenchmarkColdSearchActors(b *testing.B) {
	texts := benchTexts(b, 2000+64)
	for _, actors := range []int{1, 100} {
		b.Run(fmt.Sprintf("actors=%d", actors), func(b *testing.B) {
			s, err := sqlitestore.Open(b.TempDir(), sqlitestore.Options{NoFsync: true, EventWindow: 128})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			const turns, chunk = 1000, 10
			t0 := time.Now().Add(-24 * time.Hour)
			for start := 0; start < turns; start += chunk {
				for a := 0; a < actors; a++ {
					evs := make([]memory.Event, 0, 2*chunk)
					for t := start; t < start+chunk; t++ {
						ts := t0.Add(time.Duration(t*actors+a) * time.Millisecond)
						evs = append(evs,
							memory.Event{ActorID: "a" + strconv.Itoa(a), SessionID: "s", Role: "user", Text: texts[2*t], Timestamp: ts},
							memory.Event{ActorID: "a" + strconv.Itoa(a), SessionID: "s", Role: "assistant", Text: texts[2*t+1], Timestamp: ts.Add(time.Microsecond)})
					}
					if err := s.AppendEvents(ctx, evs); err != nil {
						b.Fatal(err)
					}
				}
			}
			queries := texts[2*turns:]
			for _, q := range queries { // warm the page cache and the actor
				if _, err := s.Search(ctx, memory.Query{Text: q, NamespacePath: "/main/a0/", TopK: 10}); err != nil {
					b.Fatal(err)
				}
			}
			i := 0
			for b.Loop() {
				if _, err := s.Search(ctx, memory.Query{Text: queries[i%len(queries)], NamespacePath: "/main/a0/", TopK: 10, NoExplain: true}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// benchTexts returns n turn texts: LoCoMo's turns in order, cycled, with
// LOCOMO_DATA set; synthetic ones otherwise.
func benchTexts(b *testing.B, n int) []string {
	var all []string
	if path := os.Getenv("LOCOMO_DATA"); path != "" {
		convs, err := locomo.Load(path)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range convs {
			for _, s := range c.Sessions {
				for _, t := range s.Turns {
					all = append(all, t.Text)
				}
			}
		}
	}
	out := make([]string, n)
	gen := sentences(coldVocab())
	for i := range out {
		if len(all) > 0 {
			out[i] = all[i%len(all)]
		} else {
			out[i] = gen()
		}
	}
	return out
}

// coldVocab is a fixed vocabulary for synthetic turns, drawn by sentences
// with Zipf weights, so a few words are in most turns and most are rare,
// as in conversation.
func coldVocab() []string {
	base := strings.Fields(`the and you that was for with have this are but not they what all were
		when there can about would will out one time them some into just like know people year good
		take work back after use two how our first well way even new want because any these give day
		most painting lake sunset kids charity race mental health support group adoption agency pottery
		camping swimming guitar concert festival museum hiking mountain beach garden roses tomatoes
		fertilizer organic recipe dinner birthday wedding anniversary daughter son husband wife sister
		brother grandmother cousin neighbour friend colleague manager interview promotion salary office
		project deadline meeting conference travel flight hotel passport visa Busan Seoul Tokyo Paris
		Berlin Lisbon Toronto Chicago library novel poetry sculpture violin piano drums choir
		marathon yoga climbing cycling soccer basketball tennis chess puzzle podcast documentary film`)
	v := append([]string(nil), base...)
	for i := 0; len(v) < 3000; i++ {
		v = append(v, fmt.Sprintf("w%dx%s", i, base[i%len(base)]))
	}
	return v
}

// sentences returns a generator of synthetic turns over vocab, the same
// sequence from every generator.
func sentences(vocab []string) func() string {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))
	return func() string {
		w := make([]string, 8+r.IntN(12))
		for i := range w {
			w[i] = vocab[z.Uint64()]
		}
		return strings.Join(w, " ")
	}
}

// BenchmarkColdSearchOneActor is the one-actor soak's step at the event
// window (issue 14): one actor with 4,000 turns (8,000 events) searched
// with every event warm (window=-1) and with the default window of 4,096
// events, so that about half the history is cold. The difference is what
// the cold search adds to a turn once an actor's history passes the window.
func BenchmarkColdSearchOneActor(b *testing.B) {
	const turns = 4000
	texts := benchTexts(b, 2*turns+64)
	for _, window := range []int{-1, sqlitestore.DefaultEventWindow} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			s, err := sqlitestore.Open(b.TempDir(), sqlitestore.Options{NoFsync: true, EventWindow: window})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			t0 := time.Now().Add(-24 * time.Hour)
			for start := 0; start < turns; start += 10 {
				evs := make([]memory.Event, 0, 20)
				for t := start; t < start+10; t++ {
					ts := t0.Add(time.Duration(t) * time.Millisecond)
					evs = append(evs,
						memory.Event{ActorID: "a0", SessionID: "s", Role: "user", Text: texts[2*t], Timestamp: ts},
						memory.Event{ActorID: "a0", SessionID: "s", Role: "assistant", Text: texts[2*t+1], Timestamp: ts.Add(time.Microsecond)})
				}
				if err := s.AppendEvents(ctx, evs); err != nil {
					b.Fatal(err)
				}
			}
			queries := texts[2*turns:]
			for _, q := range queries {
				if _, err := s.Search(ctx, memory.Query{Text: q, NamespacePath: "/main/a0/", TopK: memory.DefaultTopK}); err != nil {
					b.Fatal(err)
				}
			}
			i := 0
			for b.Loop() {
				if _, err := s.Search(ctx, memory.Query{Text: queries[i%len(queries)], NamespacePath: "/main/a0/", TopK: memory.DefaultTopK, NoExplain: true}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
