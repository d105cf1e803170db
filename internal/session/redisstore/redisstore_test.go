package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/redisstore"
	"github.com/tendrilai/tendril/internal/session/sessiontest"
	"github.com/tendrilai/tendril/internal/testenv"
)

// testClient connects to the test Redis (testenv.Redis: TENDRIL_TEST_REDIS
// or 127.0.0.1:6379); without one the test is skipped, or failed under
// CI=true.
func testClient(t testing.TB) *redis.Client {
	t.Helper()
	return redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
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
