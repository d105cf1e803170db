package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// PprofEnv names the environment variable that opts in to the profiling
// listener: a loopback host:port (e.g. 127.0.0.1:6060). Unset, nothing
// listens.
const PprofEnv = "TENDRIL_PPROF_ADDR"

// ErrPprofAddr is returned by ServePprof for an address that is not
// loopback: profiles show prompts and memory in stacks and heap, so they
// are never served to the network.
var ErrPprofAddr = errors.New(PprofEnv + " must be a loopback host:port (e.g. 127.0.0.1:6060)")

// ServePprof serves Go's profiles (net/http/pprof: /debug/pprof/, profile,
// heap, goroutine, trace, …) without auth on addr, which must bind only
// loopback (else ErrPprofAddr). It returns once the listener is open; the
// returned stop closes it. It is off unless serve is started with
// TENDRIL_PPROF_ADDR, for profiling (cmd/tendril-soak -pprof).
func ServePprof(addr string, log *slog.Logger) (stop func() error, err error) {
	if log == nil {
		log = slog.Default()
	}
	loop, err := IsLoopback(addr)
	if err != nil {
		return nil, err
	}
	if !loop {
		return nil, fmt.Errorf("%w: %q", ErrPprofAddr, addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof listener stopped", "addr", addr, "err", err)
		}
	}()
	log.Info("pprof listening", "addr", l.Addr().String())
	return srv.Close, nil
}
