package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/redisstore"
	"github.com/tendrilai/tendril/internal/session/sessiontest"
)

// testClient connects to TENDRIL_TEST_REDIS (default 127.0.0.1:6379) or
// skips the test.
func testClient(t testing.TB) *redis.Client {
	addr := os.Getenv("TENDRIL_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		t.Skipf("redis not reachable at %s (set TENDRIL_TEST_REDIS): %v", addr, err)
	}
	return c
}

// cleanup deletes every key under prefix.
func cleanup(t testing.TB, c *redis.Client, prefix string) {
	ctx := context.Background()
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if len(keys) > 0 {
		c.Del(ctx, keys...)
	}
}

func TestConformance(t *testing.T) {
	c := testClient(t)
	defer c.Close()
	run := fmt.Sprintf("tendriltest:%d", time.Now().UnixNano())
	var mu sync.Mutex
	prefixes := map[*testing.T]string{}
	sessiontest.Exercise(t, func(t *testing.T) session.Store {
		mu.Lock()
		p, ok := prefixes[t]
		if !ok {
			p = fmt.Sprintf("%s:%d", run, len(prefixes))
			prefixes[t] = p
			t.Cleanup(func() { cleanup(t, c, p) })
		}
		mu.Unlock()
		return redisstore.New(c, p)
	})
}
