package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
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
	if got, want := setMemoryLimit(ctx, log, memlimit.Limit(cgroup)), int64(float64(cgroup)*ratio); got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("limit = %d (runtime %d), want %d", got, debug.SetMemoryLimit(-1), want)
	}
	// No limit in the cgroup: no soft limit either.
	if got := setMemoryLimit(ctx, log, func() (uint64, error) { return 0, memlimit.ErrNoLimit }); got != math.MaxInt64 {
		t.Errorf("no cgroup limit: limit = %d", got)
	}
	// A failing provider leaves the limit alone.
	debug.SetMemoryLimit(300 << 20)
	if got := setMemoryLimit(ctx, log, func() (uint64, error) { return 0, errors.New("no cgroup") }); got != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Errorf("failing provider: limit = %d", got)
	}
	// The operator's GOMEMLIMIT wins.
	t.Setenv("GOMEMLIMIT", "200MiB")
	debug.SetMemoryLimit(200 << 20)
	if got := setMemoryLimit(ctx, log, memlimit.Limit(cgroup)); got != 200<<20 {
		t.Errorf("with GOMEMLIMIT set: limit = %d", got)
	}
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AUTOMEMLIMIT", "off")
	if got := setMemoryLimit(ctx, log, memlimit.Limit(cgroup)); got != 200<<20 {
		t.Errorf("with AUTOMEMLIMIT=off: limit = %d", got)
	}
}
