package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

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
	t.Setenv("GOGC", "")
	if got := setGCPercent(); got != defaultGCPercent || debug.SetGCPercent(defaultGCPercent) != defaultGCPercent {
		t.Errorf("without GOGC: %d, want %d", got, defaultGCPercent)
	}
	// GOGC is applied by the runtime at start; setGCPercent leaves it.
	t.Setenv("GOGC", "80")
	debug.SetGCPercent(80)
	if got := setGCPercent(); got != 80 || debug.SetGCPercent(80) != 80 {
		t.Errorf("with GOGC=80: %d, want 80 kept", got)
	}
	t.Setenv("GOGC", "off")
	debug.SetGCPercent(-1)
	if got := setGCPercent(); got != -1 || debug.SetGCPercent(-1) != -1 {
		t.Errorf("with GOGC=off: %d, want -1 kept", got)
	}
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
