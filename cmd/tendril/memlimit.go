package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitRatio is the share of the cgroup's memory limit that serve
// gives the Go runtime as its soft memory limit.
const memoryLimitRatio = 0.9

// withCeiling returns provider with memoryLimitMB (ceilingMB) as an upper
// bound: the soft limit becomes the smaller of the cgroup's share and
// ceilingMB MiB, and ceilingMB alone when there is no cgroup limit or it
// cannot be read (logged). The ceiling is divided by memoryLimitRatio
// here because memlimit multiplies whatever the provider returns by the
// ratio. ceilingMB <= 0: provider unchanged.
func withCeiling(provider memlimit.Provider, ceilingMB int, log *slog.Logger) memlimit.Provider {
	if ceilingMB <= 0 {
		return provider
	}
	ceiling := uint64(math.Ceil(float64(uint64(ceilingMB)<<20) / memoryLimitRatio))
	return func() (uint64, error) {
		limit, err := provider()
		if err != nil {
			if !errors.Is(err, memlimit.ErrNoLimit) {
				log.Debug("no cgroup memory limit read; memoryLimitMB alone applies", "err", err)
			}
			return ceiling, nil
		}
		return min(limit, ceiling), nil
	}
}

// setMemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT,
// https://pkg.go.dev/runtime/debug#SetMemoryLimit) to the smaller of
// memoryLimitRatio of what provider reports (the container's cgroup limit
// in serve: cgroup v2 memory.max, or v1 memory.limit_in_bytes;
// automemlimit's FromCgroup) and ceilingMB MiB (memoryLimitMB; <= 0: no
// ceiling), re-read every minute until ctx ends. The collector then works
// harder as the heap nears the limit, instead of letting it grow to twice
// what is live (Go's default, GOGC=100) or the kernel killing the process.
// It changes nothing when GOMEMLIMIT is set or AUTOMEMLIMIT=off
// (AUTOMEMLIMIT=0.8 changes the ratio, and scales the ceiling with it);
// without a ceiling it changes nothing when there is no cgroup limit and
// leaves the limit alone when the provider fails (logged). It returns the
// limit in effect, in bytes (math.MaxInt64 for none).
func setMemoryLimit(ctx context.Context, log *slog.Logger, provider memlimit.Provider, ceilingMB int) int64 {
	limit, err := memlimit.Set(
		memlimit.WithRatio(memoryLimitRatio),
		memlimit.WithProvider(withCeiling(provider, ceilingMB, log)),
		memlimit.WithLogger(log.With("component", "memlimit")),
		memlimit.WithRefreshInterval(ctx, time.Minute),
	)
	if err != nil {
		log.Warn("no memory limit taken from the cgroup", "err", err)
	}
	return limit
}

// defaultGCPercent is the collector's GOGC in tendril serve when the
// environment sets none: the heap may grow to 1.5 × what is live between
// collections instead of Go's default 2 ×. At 100 actors × 1,000 turns it
// took RSS from 282.8 to 233.2 MiB (and at 100 × 600 from 270 to 205
// MiB) for −1 to +15 % CPU per turn across five side-by-side pairs
// (docs/bench/soak.md stop 24): the collector's work per turn doubles,
// and it was about a tenth of a turn's CPU at 50. One actor's heap is
// small, so there it saves little (0–3 MiB). Unlike a soft memory limit
// near the live heap (stop 13), it never makes the collector run
// continuously.
const defaultGCPercent = 50

// setGCPercent sets the collector's target percentage (GOGC,
// https://pkg.go.dev/runtime/debug#SetGCPercent) to defaultGCPercent,
// unless GOGC is set in the environment, which the runtime has already
// applied and which wins. It returns the percentage in effect (-1: off).
// The caller checks GOGC first (checkGOGC).
func setGCPercent() int {
	if os.Getenv("GOGC") != "" {
		cur := debug.SetGCPercent(100)
		debug.SetGCPercent(cur)
		return cur
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}

// checkGOGC rejects a GOGC that the Go runtime would silently replace by
// 100 (anything but "off" or a whole number) and a negative one, which
// it reads as off: want "off" or a whole number ≥ 0; unset or empty is
// fine (serve then uses defaultGCPercent).
func checkGOGC(v string) error {
	if v == "" || v == "off" {
		return nil
	}
	if n, err := strconv.ParseInt(v, 10, 32); err != nil || n < 0 {
		return fmt.Errorf("GOGC=%q: want off or a whole number ≥ 0 (the collector's target in percent; unset: %d)", v, defaultGCPercent)
	}
	return nil
}

// checkAutoMemLimit rejects an AUTOMEMLIMIT that automemlimit would refuse
// (it then sets no limit at all, memoryLimitMB's backstop included): want
// "off" or a ratio in (0, 1]; unset or empty is fine.
func checkAutoMemLimit(v string) error {
	v = strings.TrimSpace(v)
	if v == "" || v == "off" {
		return nil
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || !(r > 0 && r <= 1) {
		return fmt.Errorf("AUTOMEMLIMIT=%q: want off or a ratio in (0, 1] of the container's memory, e.g. 0.9", v)
	}
	return nil
}
