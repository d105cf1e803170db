package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
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

// The collector's target in tendril serve when the environment sets no
// GOGC (https://pkg.go.dev/runtime/debug#SetGCPercent): between two
// collections the heap may grow by live × GOGC/100 bytes. Go's default,
// 100, lets a small heap double, which is cheap in memory; at 100 actors
// the live heap is about 110 MB, and doubling it is most of the RSS. A
// fixed GOGC=50 (stop 24) took 100 actors × 1,000 turns from 282.8 to
// 233.2 MiB for −1 to +15 % CPU per turn, but one actor's heap is small
// and there it saved 0–3 MiB for +5 and +27 % CPU per turn
// (docs/bench/soak.md). So the target adapts to the live heap
// (gcPercentFor): 100 while the growth it allows stays within
// gcHeadroomBytes, then whatever keeps the growth at gcHeadroomBytes,
// down to minGCPercent. Unlike a soft memory limit near the live heap
// (stop 13), it never makes the collector run continuously.
const (
	// gcHeadroomBytes is the growth between collections the adaptive
	// target allows before it goes below 100: 32 MiB, unless
	// TENDRIL_GC_HEADROOM_MB sets another (gcHeadroom). One actor's live
	// heap stays under it (20–25 MB at 10,000 turns), 100 actors' is
	// past twice it (about 100 MB).
	gcHeadroomBytes = 32 << 20
	// minGCPercent is the adaptive target's floor, reached at a live
	// heap of twice the headroom: what stop 24 measured as the default.
	minGCPercent = 50
	// gcTuneEvery is how often the adaptive target reads the live heap.
	gcTuneEvery = 2 * time.Second
)

// gcHeadroomEnv sets gcHeadroomBytes in MiB: a smaller board may want
// the heap held closer to what is live at a smaller size.
const gcHeadroomEnv = "TENDRIL_GC_HEADROOM_MB"

// gcHeadroom reads TENDRIL_GC_HEADROOM_MB (v): the adaptive target's
// headroom in bytes, gcHeadroomBytes when v is empty; an error unless v
// is a whole number of MiB from 1 to 1,048,576.
func gcHeadroom(v string) (uint64, error) {
	if v == "" {
		return gcHeadroomBytes, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n < 1 || n > 1<<20 {
		return 0, fmt.Errorf("%s=%q: want a whole number of MiB from 1 to 1048576 (unset: %d)", gcHeadroomEnv, v, gcHeadroomBytes>>20)
	}
	return n << 20, nil
}

// gcPercentFor is the adaptive GOGC for a live heap of live bytes and a
// headroom of headroom bytes: 100 up to headroom, then 100 × headroom /
// live, at least minGCPercent. The heap's goal, live × (1 + GOGC/100),
// so rises continuously with the live heap: 2 × live, then live +
// headroom, then 1.5 × live.
func gcPercentFor(live, headroom uint64) int {
	if live <= headroom {
		return 100
	}
	return max(minGCPercent, int((100*headroom+live-1)/live)) // rounded up: the goal is at least live + headroom
}

// liveHeap reads the live heap the last collection marked, in bytes
// (runtime/metrics /gc/heap/live:bytes).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// setGCPercent sets the collector's target (GOGC) to gcPercentFor the
// live heap (with headroom, gcHeadroom) and keeps it there, re-reading the heap every gcTuneEvery
// until ctx ends, unless GOGC is set in the environment, which the
// runtime has already applied and which wins. It returns the percentage
// in effect now (-1: off). The caller checks GOGC first (checkGOGC).
func setGCPercent(ctx context.Context, headroom uint64) int {
	if os.Getenv("GOGC") != "" {
		cur := debug.SetGCPercent(100)
		debug.SetGCPercent(cur)
		return cur
	}
	cur := gcPercentFor(liveHeap(), headroom)
	debug.SetGCPercent(cur)
	go tuneGC(ctx, gcTuneEvery, func() int { return gcPercentFor(liveHeap(), headroom) }, cur)
	return cur
}

// tuneGC sets GOGC to target() every interval until ctx ends, starting
// from cur; it calls debug.SetGCPercent only on a change of at least 5
// points, or to or from either end (100, minGCPercent), so a live heap
// that wobbles does not reset the collector's pacing every interval and
// the ends are always reached.
func tuneGC(ctx context.Context, every time.Duration, target func() int, cur int) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next := target()
		if next != cur && (next == 100 || next == minGCPercent || cur == 100 || next-cur >= 5 || cur-next >= 5) {
			debug.SetGCPercent(next)
			cur = next
		}
	}
}

// checkRuntimeEnv checks the Go runtime's variables serve reads itself
// (AUTOMEMLIMIT, GOGC, TENDRIL_GC_HEADROOM_MB), so that serve refuses a
// bad one at start and doctor reports it, and returns the collector's
// headroom in bytes (gcHeadroom).
func checkRuntimeEnv() (uint64, error) {
	if err := checkAutoMemLimit(os.Getenv("AUTOMEMLIMIT")); err != nil {
		return 0, err
	}
	if err := checkGOGC(os.Getenv("GOGC")); err != nil {
		return 0, err
	}
	return gcHeadroom(os.Getenv(gcHeadroomEnv))
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
		return fmt.Errorf("GOGC=%q: want off or a whole number from 0 to 2147483647 (the collector's target in percent; unset: adapted to the live heap, %d–100)", v, minGCPercent)
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
