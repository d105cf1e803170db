package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitRatio is the share of the cgroup's memory limit that serve
// gives the Go runtime as its soft memory limit.
const memoryLimitRatio = 0.9

// setMemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT,
// https://pkg.go.dev/runtime/debug#SetMemoryLimit) to memoryLimitRatio of
// what provider reports, the container's cgroup limit in serve (cgroup v2
// memory.max, or v1 memory.limit_in_bytes; automemlimit's FromCgroup),
// re-read every minute until ctx ends. In a container with a memory limit
// the collector then works harder as the heap nears it, instead of the
// kernel killing the process; Go does not do this by itself. It changes
// nothing when GOMEMLIMIT is set, when AUTOMEMLIMIT=off (AUTOMEMLIMIT=0.8
// changes the ratio), or when there is no limit (outside a container, or a
// cgroup without one). It returns the limit in effect, in bytes
// (math.MaxInt64 for none); a provider error is logged and leaves it alone.
func setMemoryLimit(ctx context.Context, log *slog.Logger, provider memlimit.Provider) int64 {
	limit, err := memlimit.Set(
		memlimit.WithRatio(memoryLimitRatio),
		memlimit.WithProvider(provider),
		memlimit.WithLogger(log.With("component", "memlimit")),
		memlimit.WithRefreshInterval(ctx, time.Minute),
	)
	if err != nil {
		log.Warn("no memory limit taken from the cgroup", "err", err)
	}
	return limit
}
