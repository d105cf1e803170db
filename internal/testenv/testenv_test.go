package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "true": true, "1": true, "TRUE": true, "false": false, "no": false, " true ": true} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("CI=%q: InCI() = %v, want %v", v, got, want)
		}
	}
}

// fakeTB records how a helper stopped the test. SkipNow and FailNow end the
// goroutine like the real ones, so run it in its own goroutine.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, sprintf(format, args...)
	runtime.Goexit()
}

// call runs fn(f) in a goroutine, as the testing package runs a test, and
// waits for it to return or stop.
func call(f *fakeTB, fn func(testing.TB) string) {
	done := make(chan struct{})
	go func() { defer close(done); fn(f) }()
	<-done
}

func TestReachable(t *testing.T) {
	// With the services running (as in CI) both helpers return an address.
	if u := Postgres(t); u == "" {
		t.Fatal("empty postgres URL")
	}
	if a := Redis(t); a == "" {
		t.Fatal("empty redis address")
	}
}

func TestUnavailableSkipsOrFails(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		t.Setenv(PostgresEnv, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
		t.Setenv(RedisEnv, "127.0.0.1:1")
		for name, fn := range map[string]func(testing.TB) string{"postgres": Postgres, "redis": Redis} {
			f := &fakeTB{TB: t}
			call(f, fn)
			if ci == "true" && (!f.failed || f.skipped) || ci == "" && (!f.skipped || f.failed) {
				t.Errorf("%s with CI=%q: skipped=%v failed=%v", name, ci, f.skipped, f.failed)
			}
			if !strings.Contains(f.msg, name+" unreachable at") || !strings.Contains(f.msg, "127.0.0.1:1") {
				t.Errorf("%s message %q", name, f.msg)
			}
		}
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
