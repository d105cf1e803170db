package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

func TestSetMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AUTOMEMLIMIT", "unset below") // restored after the test
	os.Unsetenv("AUTOMEMLIMIT")

	const cgroup = 512 << 20
	ratio := memoryLimitRatio
	if got, want := setMemoryLimit(ctx, log, memlimit.Limit(cgroup), 0), int64(float64(cgroup)*ratio); got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("limit = %d (runtime %d), want %d", got, debug.SetMemoryLimit(-1), want)
	}
	// No limit in the cgroup: no soft limit either.
	if got := setMemoryLimit(ctx, log, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, 0); got != math.MaxInt64 {
		t.Errorf("no cgroup limit: limit = %d", got)
	}
	// A failing provider leaves the limit alone.
	debug.SetMemoryLimit(300 << 20)
	if got := setMemoryLimit(ctx, log, func() (uint64, error) { return 0, errors.New("no cgroup") }, 0); got != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Errorf("failing provider: limit = %d", got)
	}
	// memoryLimitMB caps the cgroup's share, and applies alone without a
	// cgroup limit or when the cgroup cannot be read.
	near := func(got int64, mb int) bool { return got >= int64(mb)<<20 && got < int64(mb)<<20+4096 }
	if got := setMemoryLimit(ctx, log, memlimit.Limit(cgroup), 104); !near(got, 104) || debug.SetMemoryLimit(-1) != got {
		t.Errorf("ceiling 104 MiB under a 512 MiB cgroup: limit = %d", got)
	}
	if got := setMemoryLimit(ctx, log, memlimit.Limit(64<<20), 104); got != int64(float64(64<<20)*ratio) {
		t.Errorf("ceiling 104 MiB under a 64 MiB cgroup: limit = %d, want the cgroup's share", got)
	}
	if got := setMemoryLimit(ctx, log, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, 104); !near(got, 104) {
		t.Errorf("ceiling 104 MiB without a cgroup limit: limit = %d", got)
	}
	if got := setMemoryLimit(ctx, log, func() (uint64, error) { return 0, errors.New("no cgroup") }, 96); !near(got, 96) {
		t.Errorf("ceiling 96 MiB with a failing provider: limit = %d", got)
	}
	// The operator's GOMEMLIMIT wins.
	t.Setenv("GOMEMLIMIT", "200MiB")
	debug.SetMemoryLimit(200 << 20)
	if got := setMemoryLimit(ctx, log, memlimit.Limit(cgroup), 104); got != 200<<20 {
		t.Errorf("with GOMEMLIMIT set: limit = %d", got)
	}
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AUTOMEMLIMIT", "off")
	if got := setMemoryLimit(ctx, log, memlimit.Limit(cgroup), 0); got != 200<<20 {
		t.Errorf("with AUTOMEMLIMIT=off: limit = %d", got)
	}
}

// An AUTOMEMLIMIT automemlimit refuses makes it set no limit, the
// memoryLimitMB backstop included: serve refuses it instead.
func TestCheckAutoMemLimit(t *testing.T) {
	for _, ok := range []string{"", "off", "0.9", "1", " 0.5 "} {
		if err := checkAutoMemLimit(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"bogus", "2", "0", "-0.5", "NaN"} {
		if err := checkAutoMemLimit(bad); err == nil || !strings.Contains(err.Error(), "want off or a ratio") {
			t.Errorf("%q: %v, want an error", bad, err)
		}
	}
}

func TestSetGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv("GOGC", "")
	// Any live heap is past a headroom of 1 byte ×2, so the floor applies.
	if got := setGCPercent(ctx, 1); got != minGCPercent || debug.SetGCPercent(minGCPercent) != minGCPercent {
		t.Errorf("without GOGC, headroom 1 byte: %d, want %d", got, minGCPercent)
	}
	if got := setGCPercent(ctx, 1<<40); got != 100 || debug.SetGCPercent(100) != 100 {
		t.Errorf("without GOGC, headroom 1 TiB: %d, want 100", got)
	}
	// GOGC is applied by the runtime at start; setGCPercent leaves it.
	t.Setenv("GOGC", "80")
	debug.SetGCPercent(80)
	if got := setGCPercent(ctx, 1); got != 80 || debug.SetGCPercent(80) != 80 {
		t.Errorf("with GOGC=80: %d, want 80 kept", got)
	}
	t.Setenv("GOGC", "off")
	debug.SetGCPercent(-1)
	if got := setGCPercent(ctx, 1); got != -1 || debug.SetGCPercent(-1) != -1 {
		t.Errorf("with GOGC=off: %d, want -1 kept", got)
	}
}

// TestGCPercentFor: the heap's goal, live × (1 + GOGC/100), rises with
// the live heap and never falls as it grows: 2 × live up to the
// headroom, then live + headroom, then 1.5 × live.
func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{{0, 100}, {10 * mib, 100}, {32 * mib, 100}, {40 * mib, 80}, {48 * mib, 67}, {63 * mib, 51}, {64 * mib, 50}, {200 * mib, 50}} {
		if got := gcPercentFor(c.live, gcHeadroomBytes); got != c.want {
			t.Errorf("live %d MiB: GOGC %d, want %d", c.live/mib, got, c.want)
		}
	}
	// The goal follows the continuous curve max(1.5 × live, min(2 × live,
	// live + headroom)), never under it, and over it by at most a point.
	for live := uint64(mib); live < 400*mib; live += mib / 3 {
		goal := float64(live) * (1 + float64(gcPercentFor(live, gcHeadroomBytes))/100)
		curve := max(1.5*float64(live), min(2*float64(live), float64(live+gcHeadroomBytes)))
		if goal < curve || goal > curve+float64(live)/100 {
			t.Fatalf("live %.1f MiB: heap goal %.2f MiB, want %.2f MiB (at most 1 %% of live over)", float64(live)/mib, goal/mib, curve/mib)
		}
	}
}

func TestGCHeadroom(t *testing.T) {
	if h, err := gcHeadroom(""); err != nil || h != gcHeadroomBytes {
		t.Errorf("unset: %d, %v", h, err)
	}
	if h, err := gcHeadroom("16"); err != nil || h != 16<<20 {
		t.Errorf("16: %d, %v", h, err)
	}
	for _, bad := range []string{"0", "-1", "abc", " 16", "1.5", "1048577"} {
		if _, err := gcHeadroom(bad); err == nil || !strings.Contains(err.Error(), gcHeadroomEnv) {
			t.Errorf("%q: %v, want an error naming %s", bad, err, gcHeadroomEnv)
		}
	}
}

// gogcNow reads the collector's target without changing it
// (runtime/metrics /gc/gogc:percent).
func gogcNow() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestTuneGC: the adaptive target follows the live heap, is left alone
// for a change under 5 points, and always reaches either end.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	ctx, cancel := context.WithCancel(context.Background())
	var target atomic.Int64
	target.Store(60)
	done := make(chan struct{})
	go func() { tuneGC(ctx, time.Millisecond, func() int { return int(target.Load()) }, 100); close(done) }()
	waitGC := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if gogcNow() == want {
				return
			}
		}
		t.Fatalf("GOGC never became %d", want)
	}
	waitGC(60)
	target.Store(58) // under 5 points: kept at 60
	time.Sleep(50 * time.Millisecond)
	if cur := gogcNow(); cur != 60 {
		t.Errorf("a 2-point change was applied: %d", cur)
	}
	target.Store(minGCPercent + 3)
	waitGC(minGCPercent + 3)
	target.Store(minGCPercent) // 3 points, but the floor is always reached
	waitGC(minGCPercent)
	target.Store(100)
	waitGC(100)
	cancel()
	<-done
}

func TestCheckGOGC(t *testing.T) {
	for _, v := range []string{"", "off", "0", "50", "100", "400"} {
		if err := checkGOGC(v); err != nil {
			t.Errorf("GOGC=%q: %v", v, err)
		}
	}
	for _, v := range []string{"abc", " 80", "1e2", "-5", "2147483648", "50%", "OFF"} {
		if err := checkGOGC(v); err == nil || !strings.Contains(err.Error(), "want off or a whole number") {
			t.Errorf("GOGC=%q: err = %v, want a clear refusal", v, err)
		}
	}
}
