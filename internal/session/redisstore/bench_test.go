package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	"github.com/tendrilai/tendril/internal/session/redisstore"
)

func benchTurn(i int, parent string) []session.Node {
	u := fmt.Sprintf("u%08d", i)
	return []session.Node{
		{ID: u, ParentID: parent, Role: "user", Text: strings.Repeat("how should I water the fig tree? ", 3), Timestamp: 1710000000},
		{ID: fmt.Sprintf("a%08d", i), ParentID: u, Role: "assistant", Text: strings.Repeat("Water deeply once a week and let the top soil dry. ", 10), Timestamp: 1710000001},
	}
}

// BenchmarkBackends compares Redis with the JSONL store in the same run:
// appending a turn, and building a 50-message context from a 10,000-node
// session.
func BenchmarkBackends(b *testing.B) {
	ctx := context.Background()
	c := testClient(b)
	defer c.Close()
	prefix := fmt.Sprintf("tendrilbench:%d", time.Now().UnixNano())
	defer cleanup(b, c, prefix)
	stores := []struct {
		name string
		open func(b *testing.B) session.Store
	}{
		{"redis", func(b *testing.B) session.Store { return redisstore.New(c, prefix+":"+b.Name()) }},
		{"jsonl-always", func(b *testing.B) session.Store {
			st, _ := jsonl.Open(b.TempDir(), jsonl.Options{})
			return st
		}},
		{"jsonl-never", func(b *testing.B) session.Store {
			st, _ := jsonl.Open(b.TempDir(), jsonl.Options{Fsync: jsonl.FsyncNever})
			return st
		}},
	}
	k := session.Key{AgentID: "main", Channel: "telegram", ID: "bench"}
	for _, s := range stores {
		b.Run("op=append-turn/store="+s.name, func(b *testing.B) {
			st := s.open(b)
			defer st.Close()
			parent, i := "", 0
			for b.Loop() {
				nodes := benchTurn(i, parent)
				if err := st.Append(ctx, k, nodes...); err != nil {
					b.Fatal(err)
				}
				parent = nodes[1].ID
				i++
			}
		})
	}
	for _, s := range stores {
		b.Run("op=context50-of-10k/store="+s.name, func(b *testing.B) {
			st := s.open(b)
			defer st.Close()
			parent := ""
			for i := 0; i < 5000; i += 100 {
				var batch []session.Node
				for j := i; j < i+100; j++ {
					nodes := benchTurn(j, parent)
					parent = nodes[1].ID
					batch = append(batch, nodes...)
				}
				if err := st.Append(ctx, k, batch...); err != nil {
					b.Fatal(err)
				}
			}
			lim := session.Limits{MaxHistoryMessages: 50}
			for b.Loop() {
				got, err := session.BuildContext(ctx, st, k, lim)
				if err != nil || len(got) != 50 {
					b.Fatalf("%d, %v", len(got), err)
				}
			}
		})
	}
}
