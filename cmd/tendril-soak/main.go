// Command tendril-soak is the soak benchmark of issue 14 (constant cost per
// turn). It builds the real `tendril serve` binary from one or more source
// trees, runs each against an in-process OpenAI-compatible fake model that
// echoes the user, drives turns through POST /invocations and reads the
// server's costs from /proc:
//
//   - RSS: VmRSS of /proc/PID/status, at every checkpoint (KiB, shown MiB), and RssAnon (the
//     process's own memory, without its binary's file pages);
//   - added latency: the client's turn time minus the time the fake model
//     spent answering that turn's model calls (ms, p50/p99 per window);
//   - CPU time per turn: utime+stime of /proc/PID/stat over a window
//     (clock ticks, shown ms), divided by the window's turns;
//   - bytes reaching storage per turn: write_bytes of /proc/PID/io over a
//     window (shown KiB per turn);
//   - the first turn after a restart, for the actor of the single-actor run.
//
// Turn texts are the LoCoMo conversations (../shared/data/locomo), cycled, so
// rule-based extraction and consolidation do real work; LLM extraction is
// off because the echo model returns no JSON.
//
// Usage (one run, before and after side by side, writes Markdown):
//
//	go run ./cmd/tendril-soak -src before=/tmp/before -src after=. \
//	    -turns 10000 -actors 100 -actor-turns 1000 -concurrent 16 -concurrent-turns 200 \
//	    -out docs/bench/soak-run.md
//
// Scenarios are chosen with -scenarios single,restart,multi,concurrent
// (restart reuses the home of single). The restart runs -restart-reps times
// per variant, each on a fresh copy of that home, so every repetition and
// variant starts from the same files; each repetition also restarts once
// more to time the first memory search (GET /api/v1/memory/search) against
// warm ones. -home DIR restarts from a home kept by an earlier run (-keep;
// its home-single-NAME) instead of running single, which takes minutes:
//
//	go run ./cmd/tendril-soak -src before=/tmp/before -src after=. \
//	    -scenarios restart -home /tmp/soak/home-single-after -restart-reps 5
//
// Each server's log is kept in the work directory (log-HOME.txt). Each source tree is built once with
// `go build` (and `-ldflags=-s -w` for the stripped size). The fake model
// answers after -model-delay (0); its own time is subtracted either way.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

type srcFlag []string

func (s *srcFlag) String() string     { return strings.Join(*s, ",") }
func (s *srcFlag) Set(v string) error { *s = append(*s, v); return nil }

type config struct {
	turns, window      int
	actors, actorTurns int
	multiClients       int
	concurrent, concT  int
	restartWarm        int
	restartReps        int
	restartWait        time.Duration
	home               string // restart from this kept home instead of running single
	modelDelay         time.Duration
	data               string
	keep               bool
	workDir            string
	scenarios          map[string]bool
	llmExtraction      bool
	pause              time.Duration
	quiesceMax         time.Duration
	pprof              bool
	env                map[string][]string // variant name ("*": every variant) → extra server environment
}

func main() {
	var srcs, envs srcFlag
	var cfg config
	var out, scen string
	flag.Var(&envs, "env", "VARIANT:K=V extra environment of that variant's server, or *:K=V of every variant's (repeatable), e.g. -env after:TENDRIL_MEMORY_LIMIT_MB=-1")
	flag.Var(&srcs, "src", "NAME=DIR of a source tree to build and measure (repeatable; default after=.)")
	flag.IntVar(&cfg.turns, "turns", 10000, "turns of the single actor")
	flag.IntVar(&cfg.window, "window", 1000, "turns per reporting window of the single actor")
	flag.IntVar(&cfg.actors, "actors", 100, "actors of the multi-actor run")
	flag.IntVar(&cfg.actorTurns, "actor-turns", 1000, "turns per actor of the multi-actor run")
	flag.IntVar(&cfg.multiClients, "multi-clients", 2, "concurrent clients of the multi-actor run (each owns a share of the actors)")
	flag.IntVar(&cfg.concurrent, "concurrent", 16, "actors driven concurrently, back to back")
	flag.IntVar(&cfg.concT, "concurrent-turns", 200, "turns per concurrent actor")
	flag.IntVar(&cfg.restartWarm, "restart-warm", 50, "warm turns after the first turn after restart")
	flag.IntVar(&cfg.restartReps, "restart-reps", 1, "restarts per variant, each on a fresh copy of the single actor's home (variants interleaved with -home)")
	flag.DurationVar(&cfg.restartWait, "restart-wait", time.Second, "wait after a restarted server's healthy /ping before its first turn or search")
	flag.StringVar(&cfg.home, "home", "", "restart from this home kept by an earlier run (its home-single-NAME) instead of running single")
	flag.DurationVar(&cfg.modelDelay, "model-delay", 0, "time the fake model waits before answering")
	flag.DurationVar(&cfg.pause, "pause", 0, "pause between turns of the single actor")
	flag.DurationVar(&cfg.quiesceMax, "quiesce", 3*time.Minute, "longest wait for background work to finish at the end of a run")
	flag.StringVar(&cfg.data, "data", "", "LoCoMo JSON (default ../shared/data/locomo/locomo-dev.json, or /work/shared/data/locomo/locomo-dev.json)")
	flag.StringVar(&scen, "scenarios", "single,restart,multi,concurrent", "comma-separated scenarios")
	flag.StringVar(&out, "out", "", "write the Markdown report here too (default stdout only)")
	flag.StringVar(&cfg.workDir, "work", "", "directory for binaries and homes (default a temp dir on the same disk as /tmp)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep homes and binaries")
	flag.BoolVar(&cfg.pprof, "pprof", false, "start each server with TENDRIL_PPROF_ADDR on a free loopback port (logged) to profile it while it runs")
	flag.BoolVar(&cfg.llmExtraction, "llm-extraction", false, "leave LLM extraction on (the echo model returns no JSON)")
	flag.Parse()
	cfg.env = map[string][]string{}
	for _, e := range envs {
		name, kv, ok := strings.Cut(e, ":")
		if !ok || !strings.Contains(kv, "=") {
			log.Fatalf("-env %q: want VARIANT:K=V", e)
		}
		cfg.env[name] = append(cfg.env[name], kv)
	}
	if len(srcs) == 0 {
		srcs = srcFlag{"after=."}
	}
	cfg.scenarios = map[string]bool{}
	for _, s := range strings.Split(scen, ",") {
		switch s = strings.TrimSpace(s); s {
		case "single", "restart", "multi", "concurrent":
			cfg.scenarios[s] = true
		case "":
		default:
			log.Fatalf("unknown scenario %q (want single, restart, multi, concurrent)", s)
		}
	}
	switch {
	case cfg.home != "" && (!cfg.scenarios["restart"] || cfg.scenarios["single"]):
		log.Fatal("-home is for -scenarios restart without single (it replaces the single-actor run)")
	case cfg.scenarios["restart"] && !cfg.scenarios["single"] && cfg.home == "":
		log.Fatal("scenario restart needs single (it restarts the single actor's server) or -home")
	}
	if cfg.restartReps < 1 {
		cfg.restartReps = 1
	}
	if cfg.home != "" {
		if _, err := os.Stat(filepath.Join(cfg.home, "tendril.json")); err != nil {
			log.Fatalf("-home %s: not a kept soak home: %v", cfg.home, err)
		}
	}
	texts, err := loadTexts(cfg.data)
	if err != nil {
		log.Fatal(err)
	}
	if cfg.workDir == "" {
		cfg.workDir, err = os.MkdirTemp("", "tendril-soak-*")
		if err != nil {
			log.Fatal(err)
		}
	}
	if !cfg.keep {
		defer os.RemoveAll(cfg.workDir)
	}
	fake := newTimedFake(cfg.modelDelay)
	defer fake.srv.Close()

	var vs []*variant
	for _, s := range srcs {
		name, dir, ok := strings.Cut(s, "=")
		if !ok {
			name, dir = filepath.Base(s), s
		}
		v := &variant{name: name, src: dir}
		if err := v.build(cfg.workDir); err != nil {
			log.Fatal(err)
		}
		vs = append(vs, v)
	}
	r := &runner{cfg: cfg, texts: texts, fake: fake}
	if cfg.home != "" {
		// Repetition after repetition, variant after variant within each,
		// so that every pair shares the machine's load of that moment.
		for rep := 0; rep < cfg.restartReps; rep++ {
			for _, v := range vs {
				log.Printf("%s: restart %d/%d from %s", v.name, rep+1, cfg.restartReps, cfg.home)
				if err := r.restartFrom(v, cfg.home, rep); err != nil {
					log.Fatalf("%s restart: %v", v.name, err)
				}
			}
		}
	}
	// Scenarios run variant after variant so that each pair shares the
	// machine's load of that moment.
	for _, sc := range []string{"single", "multi", "concurrent"} {
		if !cfg.scenarios[sc] {
			continue
		}
		for _, v := range vs {
			log.Printf("%s: %s", v.name, sc)
			var err error
			switch sc {
			case "single":
				err = r.single(v)
			case "multi":
				err = r.multi(v)
			case "concurrent":
				err = r.concurrentRun(v)
			}
			if err != nil {
				log.Fatalf("%s %s: %v", v.name, sc, err)
			}
		}
	}
	md := report(cfg, vs)
	fmt.Print(md)
	if out != "" {
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// ---- turn texts ----

func loadTexts(path string) ([]string, error) {
	if path == "" {
		for _, p := range []string{"../shared/data/locomo/locomo-dev.json", "/work/shared/data/locomo/locomo-dev.json"} {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
		if path == "" {
			return nil, errors.New("LoCoMo data not found; pass -data FILE")
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var convs []struct {
		Conversation map[string]json.RawMessage `json:"conversation"`
	}
	if err := json.Unmarshal(b, &convs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var texts []string
	for _, c := range convs {
		for i := 1; ; i++ {
			raw, ok := c.Conversation["session_"+strconv.Itoa(i)]
			if !ok {
				break
			}
			var turns []struct{ Text string }
			if json.Unmarshal(raw, &turns) != nil {
				continue
			}
			for _, t := range turns {
				if t := strings.TrimSpace(t.Text); t != "" {
					texts = append(texts, t)
				}
			}
		}
	}
	if len(texts) == 0 {
		return nil, fmt.Errorf("%s: no turns", path)
	}
	return texts, nil
}

// ---- fake model with timing ----

// timedFake wraps the echo fake and records how long each answer took, by
// the request's last user text, so a turn's model time can be subtracted.
type timedFake struct {
	f     *modeltest.Fake
	srv   *httptest.Server
	delay time.Duration
	mu    sync.Mutex
	spent map[string]time.Duration
	n     int
}

func newTimedFake(delay time.Duration) *timedFake {
	t := &timedFake{f: modeltest.NewFake(modeltest.OpenAI), delay: delay, spent: map[string]time.Duration{}}
	t.f.Otherwise(func(s modeltest.Seen) modeltest.Reply {
		return modeltest.Reply{Text: "echo: " + s.LastUserText()}
	})
	t.srv = httptest.NewServer(t)
	return t
}

func (t *timedFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	key := lastUser(body)
	if t.delay > 0 {
		time.Sleep(t.delay)
	}
	t.f.ServeHTTP(w, r)
	d := time.Since(start)
	t.mu.Lock()
	t.spent[key] += d
	t.n++
	if t.n%256 == 0 {
		t.f.Reset() // the fake keeps every request; drop them
	}
	t.mu.Unlock()
}

// take returns and forgets the model time spent on turns whose user text
// is text.
func (t *timedFake) take(text string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.spent[text]
	delete(t.spent, text)
	return d
}

func lastUser(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s
		}
		var parts []struct {
			Type, Text string
		}
		if json.Unmarshal(m.Content, &parts) == nil {
			var b strings.Builder
			for _, p := range parts {
				b.WriteString(p.Text)
			}
			return b.String()
		}
		return ""
	}
	return ""
}

// ---- variants (source trees) ----

type variant struct {
	name, src      string
	bin            string
	size, stripped int64
	single         *singleResult
	restarts       []*restartResult
	multi          *multiResult
	conc           *concResult
}

// recopy replaces file path by a copy of itself written with write(2).
func recopy(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".copy", data, 0o755); err != nil {
		return err
	}
	return os.Rename(path+".copy", path)
}

func (v *variant) build(work string) error {
	dir := filepath.Join(work, "bin-"+v.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	v.bin = filepath.Join(dir, "tendril")
	for _, b := range []struct {
		out   string
		flags []string
		size  *int64
	}{{v.bin, nil, &v.size}, {v.bin + "-stripped", []string{"-ldflags=-s -w"}, &v.stripped}} {
		args := append([]string{"build", "-o", b.out}, b.flags...)
		args = append(args, "./cmd/tendril")
		cmd := exec.Command("go", args...)
		cmd.Dir = v.src
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", v.src, err, out)
		}
		fi, err := os.Stat(b.out)
		if err != nil {
			return err
		}
		*b.size = fi.Size()
	}
	// A binary the linker has just written is mapped in larger page-cache
	// folios than a copied one (the go command copies an unchanged build
	// from its cache): the same binary then shows about 24 MiB more RSS
	// (`tendril version`: 65 vs 42 MiB). Every variant runs a plain copy so
	// that RSS compares code, not how its file was written.
	if err := recopy(v.bin); err != nil {
		return err
	}
	log.Printf("%s: built %s (%.1f MB, stripped %.1f MB)", v.name, v.src, mb(v.size), mb(v.stripped))
	return nil
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// ---- the server process ----

type server struct {
	cmd  *exec.Cmd
	url  string
	home string
	logs *bytes.Buffer
	// logFile keeps the whole log (log-HOME.txt in the work directory).
	logFile *os.File
	mu      sync.Mutex
	done    chan error

	stopOnce sync.Once
	stopErr  error
}

func (r *runner) start(v *variant, home string) (*server, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(home, "tendril.json")
	if _, err := os.Stat(cfgPath); err != nil {
		c := fmt.Sprintf(`{"memory": {"llmExtraction": %v}}`, r.cfg.llmExtraction)
		if err := os.WriteFile(cfgPath, []byte(c), 0o600); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(v.bin, "serve", "--addr", addr)
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "TENDRIL_"), strings.HasPrefix(k, "TELEGRAM_"), strings.HasPrefix(k, "ANTHROPIC_"),
			strings.HasPrefix(k, "OPENAI_"), strings.HasPrefix(k, "AWS_"), k == "MODEL_ID", k == "VISION_MODEL_ID",
			k == "EMBEDDING_MODEL_ID", k == "DATABASE_URL":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "TENDRIL_HOME="+home, "MODEL_ID=openai/gpt-soak",
		"OPENAI_BASE_URL="+r.fake.srv.URL+"/v1", "OPENAI_API_KEY=soak")
	cmd.Env = append(append(cmd.Env, r.cfg.env["*"]...), r.cfg.env[v.name]...)
	if extra := append(r.cfg.env["*"], r.cfg.env[v.name]...); len(extra) > 0 {
		log.Printf("%s: server environment %s", v.name, strings.Join(extra, " "))
	}
	if r.cfg.pprof {
		pl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		paddr := pl.Addr().String()
		pl.Close()
		cmd.Env = append(cmd.Env, "TENDRIL_PPROF_ADDR="+paddr)
		log.Printf("%s: pprof at http://%s/debug/pprof/ (home %s)", v.name, paddr, home)
	}
	s := &server{cmd: cmd, url: "http://" + addr, home: home, logs: &bytes.Buffer{}, done: make(chan error, 1)}
	logf, err := os.OpenFile(filepath.Join(r.cfg.workDir, "log-"+filepath.Base(home)+".txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	s.logFile = logf
	cmd.Stdout, cmd.Stderr = lockedWriter{s}, lockedWriter{s}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("serve exited: %v\n%s", err, s.logText())
		default:
		}
		resp, err := http.Get(s.url + "/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.cmd.Process.Kill()
	return nil, fmt.Errorf("serve not healthy in 60s\n%s", s.logText())
}

type lockedWriter struct{ s *server }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.logs.Len() > 1<<20 { // keep the tail only
		w.s.logs.Reset()
	}
	w.s.logFile.Write(p)
	return w.s.logs.Write(p)
}

func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop sends SIGTERM and waits (60 s, then SIGKILL). Later calls return
// the first call's result.
func (s *server) stop() error {
	s.stopOnce.Do(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case s.stopErr = <-s.done:
		case <-time.After(60 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
			s.stopErr = errors.New("serve did not stop in 60s after SIGTERM")
		}
		s.mu.Lock()
		s.logFile.Close()
		s.mu.Unlock()
	})
	return s.stopErr
}

// ---- /proc ----

type sample struct {
	rssKiB int64
	// anonKiB is RssAnon: the process's own memory (heap, stacks), without
	// the file pages of its binary (RssFile), which are clean, shared and
	// dropped first under memory pressure, and whose resident share
	// depends on the page cache (about 45–75 MiB of this binary at idle).
	anonKiB int64
	cpu     int64 // clock ticks, utime+stime
	wbytes  int64
}

const clkTck = 100 // USER_HZ on Linux

func readSample(pid int) (sample, error) {
	var s sample
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			s.rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
		if strings.HasPrefix(l, "RssAnon:") {
			f := strings.Fields(l)
			s.anonKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	// after ")": state(0) ... utime is field 14 overall = index 11 here.
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stm, _ := strconv.ParseInt(f[12], 10, 64)
	s.cpu = ut + stm
	iob, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return s, err
	}
	sc := bufio.NewScanner(bytes.NewReader(iob))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			s.wbytes, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return s, nil
}

func mustSample(pid int) sample {
	s, err := readSample(pid)
	if err != nil {
		log.Fatalf("read /proc/%d: %v", pid, err)
	}
	return s
}

// quiesce waits until the server has used at most 30 ms of CPU in a whole
// second (background extraction and consolidation finished; the job
// queue's pollers keep a trickle), at most max.
func quiesce(pid int, max time.Duration) time.Duration {
	start := time.Now()
	last := mustSample(pid).cpu
	for time.Since(start) < max {
		time.Sleep(time.Second)
		c := mustSample(pid).cpu
		if c-last <= 3 {
			return time.Since(start)
		}
		last = c
	}
	return time.Since(start)
}

// metric returns the value of one sample on the server's /metrics (the
// line that starts with name and a space), "" when it is not there.
func metric(s *server, name string) (string, error) {
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v), err
		}
	}
	return "", err
}

// cacheLoads returns tendril_memory_cache_loads_total and
// tendril_memory_cache_evictions_total, -1 each when not exposed (a variant
// built before they were).
func cacheLoads(s *server) (loads, evictions float64) {
	get := func(name string) float64 {
		v, err := metric(s, name)
		f, perr := strconv.ParseFloat(v, 64)
		if err != nil || perr != nil {
			return -1
		}
		return f
	}
	return get("tendril_memory_cache_loads_total"), get("tendril_memory_cache_evictions_total")
}

// waitExtraction waits (up to max) until the server's extraction queue is
// empty: tendril_queue_depth{queue="extraction"} on /metrics, which counts
// the memory.extract jobs waiting, running or retrying.
func waitExtraction(s *server, max time.Duration) error {
	deadline := time.Now().Add(max)
	for {
		depth, err := metric(s, `tendril_queue_depth{queue="extraction"}`)
		if err == nil && depth == "0" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("extraction queue depth %q after %v (err %v)", depth, max, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ---- turns ----

type runner struct {
	cfg   config
	texts []string
	fake  *timedFake

	// smu guards server: the added latency each turn's Server-Timing
	// header reported ("tendril" = the handler's time less the model
	// calls'), for the scenario running; servers without the header add
	// nothing.
	smu    sync.Mutex
	server []time.Duration
}

// takeServer returns and forgets the server-side added latencies noted
// since the last call.
func (r *runner) takeServer() []time.Duration {
	r.smu.Lock()
	defer r.smu.Unlock()
	out := r.server
	r.server = nil
	return out
}

// serverAdded is the "tendril" duration of a Server-Timing header value
// (W3C Server Timing: "name;dur=ms;desc=..., ..."); ok is false without one.
func serverAdded(h string) (time.Duration, bool) {
	for _, m := range strings.Split(h, ",") {
		parts := strings.Split(strings.TrimSpace(m), ";")
		if parts[0] != "tendril" {
			continue
		}
		for _, p := range parts[1:] {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "dur="); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 {
					return time.Duration(f * float64(time.Millisecond)), true
				}
			}
		}
	}
	return 0, false
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 5 * time.Minute}

// turn runs one turn and returns its added latency (turn minus model time).
func (r *runner) turn(s *server, actor, session, text string) (time.Duration, error) {
	body, _ := json.Marshal(map[string]string{"message": text, "actor_id": actor, "session_id": session, "channel": "api"})
	start := time.Now()
	resp, err := client.Post(s.url+"/invocations", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	total := time.Since(start)
	model := r.fake.take(text)
	if d, ok := serverAdded(resp.Header.Get("Server-Timing")); ok && resp.StatusCode == 200 {
		r.smu.Lock()
		r.server = append(r.server, d)
		r.smu.Unlock()
	}
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("/invocations: %d %s", resp.StatusCode, raw)
	}
	var out struct {
		OK bool `json:"ok"`
	}
	if json.Unmarshal(raw, &out) != nil || !out.OK {
		return 0, fmt.Errorf("/invocations: %s", raw)
	}
	return total - model, nil
}

// text returns the i-th turn text of actor a (actors start at different
// places of the corpus so concurrent turns rarely share a text).
func (r *runner) text(a, i int) string {
	return r.texts[(a*997+i)%len(r.texts)]
}

type window struct {
	from, to int
	p50, p99 time.Duration
	// sp50, sp99: the same turns' added latency as the server measured it
	// (Server-Timing "tendril"; 0 for a server without the header).
	sp50, sp99 time.Duration
	cpuPerTurn time.Duration
	wPerTurn   float64 // bytes
	rssKiB     int64
	anonKiB    int64
}

type singleResult struct {
	idleRSS   int64
	windows   []window
	final     sample // after quiesce
	quiesce   time.Duration
	tailBytes int64 // bytes written while quiescing
	tailCPU   int64
	records   int
	home      string
	elapsed   time.Duration
}

// serverCell shows server-side percentiles, or a dash for a server that
// sent no Server-Timing.
func serverCell(p50, p99 time.Duration) string {
	if p50 == 0 && p99 == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f / %.2f", ms(p50), ms(p99))
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

func (r *runner) single(v *variant) error {
	home := filepath.Join(r.cfg.workDir, "home-single-"+v.name)
	s, err := r.start(v, home)
	if err != nil {
		return err
	}
	defer s.stop()
	res := &singleResult{home: home}
	time.Sleep(time.Second)
	res.idleRSS = mustSample(s.pid()).rssKiB
	actor, session := "soak:one", "soak-one"
	prev := mustSample(s.pid())
	var lat []time.Duration
	r.takeServer()
	begin := time.Now()
	for i := 0; i < r.cfg.turns; i++ {
		d, err := r.turn(s, actor, session, r.text(0, i))
		if err != nil {
			return fmt.Errorf("turn %d: %w\n%s", i, err, tail(s.logText()))
		}
		lat = append(lat, d)
		if r.cfg.pause > 0 {
			time.Sleep(r.cfg.pause)
		}
		if (i+1)%r.cfg.window == 0 || i+1 == r.cfg.turns {
			cur := mustSample(s.pid())
			n := len(lat)
			slat := r.takeServer()
			res.windows = append(res.windows, window{
				from: i + 1 - n, to: i + 1, p50: pct(lat, .5), p99: pct(lat, .99), sp50: pct(slat, .5), sp99: pct(slat, .99),
				cpuPerTurn: time.Duration(cur.cpu-prev.cpu) * (time.Second / clkTck) / time.Duration(n),
				wPerTurn:   float64(cur.wbytes-prev.wbytes) / float64(n), rssKiB: cur.rssKiB, anonKiB: cur.anonKiB,
			})
			w := res.windows[len(res.windows)-1]
			log.Printf("%s single %d–%d: p50 %.2f p99 %.2f ms (server %s), cpu %.2f ms/turn, %.1f KiB/turn, RSS %.1f MiB",
				v.name, w.from+1, w.to, ms(w.p50), ms(w.p99), serverCell(w.sp50, w.sp99), ms(w.cpuPerTurn), w.wPerTurn/1024, float64(w.rssKiB)/1024)
			prev, lat = cur, lat[:0]
		}
	}
	res.elapsed = time.Since(begin)
	res.quiesce = quiesce(s.pid(), r.cfg.quiesceMax)
	// A quiet second is not the end of background work: under back-to-back
	// turns the session's last extraction job is scheduled up to the
	// pipeline's ExtractMinInterval (2 s) after the previous one, and the
	// server idles while it waits. Count only once no extraction job is
	// left, or the count misses the last turns.
	if err := waitExtraction(s, r.cfg.quiesceMax-res.quiesce); err != nil {
		log.Printf("%s single: %v; counting records anyway", v.name, err)
	}
	res.quiesce = time.Since(begin) - res.elapsed
	res.final = mustSample(s.pid())
	res.tailBytes = res.final.wbytes - prev.wbytes
	res.tailCPU = res.final.cpu - prev.cpu
	res.records = countRecords(s, actor)
	v.single = res
	if err := s.stop(); err != nil {
		return err
	}
	if r.cfg.scenarios["restart"] {
		for rep := 0; rep < r.cfg.restartReps; rep++ {
			if err := r.restartFrom(v, home, rep); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyHome copies the regular files and directories of src into dst
// (which must not exist), keeping their modes and modification times,
// and fsyncs each file;
// sockets and other special files (a stale tendril.sock) are skipped.
func copyHome(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, info.Mode().Perm())
		case !info.Mode().IsRegular():
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
		if err != nil {
			return err
		}
		// Synced, as a cleanly stopped server leaves its files: otherwise
		// the restarted server's first fsync of each file (its first turn)
		// would write back the whole copy.
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Sync(); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		// The stores compare modification times (the memory index with
		// its Markdown files): the copy keeps them.
		return os.Chtimes(to, info.ModTime(), info.ModTime())
	})
}

// restartFrom restarts variant v on a fresh copy of the single actor's
// home src (repetition rep, from 0), times its first turn and, on a
// second restart of the same copy, its first memory search; the copy is
// removed afterwards.
func (r *runner) restartFrom(v *variant, src string, rep int) error {
	home := filepath.Join(r.cfg.workDir, fmt.Sprintf("home-restart-%s-%d", v.name, rep+1))
	if err := os.RemoveAll(home); err != nil {
		return err
	}
	if err := copyHome(src, home); err != nil {
		return fmt.Errorf("copy home: %w", err)
	}
	defer os.RemoveAll(home)
	if err := r.restart(v, home, "soak:one", "soak-one"); err != nil {
		return err
	}
	return r.restartSearch(v, home, "soak:one")
}

// countRecords counts the actor's active records with `tendril memory
// list`, which talks to the running server over its socket (-1: failed).
func countRecords(s *server, actor string) int {
	cmd := exec.Command(s.cmd.Path, "memory", "list", "--actor", actor)
	cmd.Env = s.cmd.Env
	out, err := cmd.Output()
	if err != nil {
		return -1
	}
	n := strings.Count(string(out), "\n") - 1 // header line
	if n < 0 {
		n = 0
	}
	return n
}

type restartResult struct {
	startup  time.Duration
	idleRSS  int64
	first    time.Duration
	warmP50  time.Duration
	warmP99  time.Duration
	rssAfter int64
	// The second restart of the same home: its first memory search and
	// the p50 of the warm ones after it (client time of GET
	// /api/v1/memory/search).
	firstSearch, warmSearch time.Duration
}

func (r *runner) restart(v *variant, home, actor, session string) error {
	t0 := time.Now()
	s, err := r.start(v, home)
	if err != nil {
		return err
	}
	defer s.stop()
	res := &restartResult{startup: time.Since(t0)}
	time.Sleep(r.cfg.restartWait)
	res.idleRSS = mustSample(s.pid()).rssKiB
	first, err := r.turn(s, actor, session, r.text(0, r.cfg.turns))
	if err != nil {
		return err
	}
	res.first = first
	var lat []time.Duration
	for i := 1; i <= r.cfg.restartWarm; i++ {
		d, err := r.turn(s, actor, session, r.text(0, r.cfg.turns+i))
		if err != nil {
			return err
		}
		lat = append(lat, d)
	}
	res.warmP50, res.warmP99 = pct(lat, .5), pct(lat, .99)
	res.rssAfter = mustSample(s.pid()).rssKiB
	log.Printf("%s restart: first turn %.2f ms added, warm p50 %.2f p99 %.2f, RSS %.1f → %.1f MiB",
		v.name, ms(res.first), ms(res.warmP50), ms(res.warmP99), float64(res.idleRSS)/1024, float64(res.rssAfter)/1024)
	v.restarts = append(v.restarts, res)
	return nil
}

// searchWarm is how many searches follow the first one after a restart.
const searchWarm = 20

// restartSearch restarts v's server on home once more and times its first
// memory search for actor, -restart-wait (1 s) after a healthy /ping like
// the first turn, then searchWarm more with other texts; it fills the last
// restartResult.
func (r *runner) restartSearch(v *variant, home, actor string) error {
	s, err := r.start(v, home)
	if err != nil {
		return err
	}
	defer s.stop()
	time.Sleep(r.cfg.restartWait)
	search := func(q string) (time.Duration, error) {
		u := s.url + "/api/v1/memory/search?actor=" + url.QueryEscape(actor) + "&q=" + url.QueryEscape(q)
		start := time.Now()
		resp, err := client.Get(u)
		if err != nil {
			return 0, err
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("memory search: %d %s", resp.StatusCode, raw)
		}
		return d, nil
	}
	res := v.restarts[len(v.restarts)-1]
	if res.firstSearch, err = search(r.text(0, r.cfg.turns+r.cfg.restartWarm+1)); err != nil {
		return err
	}
	var lat []time.Duration
	for i := 0; i < searchWarm; i++ {
		d, err := search(r.text(0, r.cfg.turns+r.cfg.restartWarm+2+i))
		if err != nil {
			return err
		}
		lat = append(lat, d)
	}
	res.warmSearch = pct(lat, .5)
	log.Printf("%s restart: first search %.2f ms, warm p50 %.2f ms", v.name, ms(res.firstSearch), ms(res.warmSearch))
	return s.stop()
}

type multiResult struct {
	actors, turns    int
	p50, p99         time.Duration
	sp50, sp99       time.Duration // from Server-Timing (0: not reported)
	rssEnd, rssQuiet int64
	anonEnd          int64
	cpuPerTurn       time.Duration
	wPerTurn         float64 // during the turns
	wPerTurnAll      float64 // including the background tail
	quiesce, elapsed time.Duration
	loads, evictions float64 // memory cache actor loads and evictions during the run; -1: not exposed
}

// multi drives actors × actor-turns, round robin, with multiClients
// clients each owning every multiClients-th actor.
func (r *runner) multi(v *variant) error {
	home := filepath.Join(r.cfg.workDir, "home-multi-"+v.name)
	s, err := r.start(v, home)
	if err != nil {
		return err
	}
	defer s.stop()
	before := mustSample(s.pid())
	loads0, ev0 := cacheLoads(s)
	r.takeServer()
	lats, elapsed, err := r.drive(s, "soak:m", r.cfg.actors, r.cfg.actorTurns, r.cfg.multiClients)
	if err != nil {
		return err
	}
	slats := r.takeServer()
	end := mustSample(s.pid())
	q := quiesce(s.pid(), r.cfg.quiesceMax)
	quiet := mustSample(s.pid())
	loads1, ev1 := cacheLoads(s)
	n := len(lats)
	res := &multiResult{actors: r.cfg.actors, turns: n, p50: pct(lats, .5), p99: pct(lats, .99), sp50: pct(slats, .5), sp99: pct(slats, .99),
		rssEnd: end.rssKiB, rssQuiet: quiet.rssKiB, anonEnd: end.anonKiB,
		cpuPerTurn:  time.Duration(quiet.cpu-before.cpu) * (time.Second / clkTck) / time.Duration(n),
		wPerTurn:    float64(end.wbytes-before.wbytes) / float64(n),
		wPerTurnAll: float64(quiet.wbytes-before.wbytes) / float64(n), quiesce: q, elapsed: elapsed, loads: -1, evictions: -1}
	if loads0 >= 0 && loads1 >= 0 {
		res.loads, res.evictions = loads1-loads0, ev1-ev0
	}
	log.Printf("%s multi: %d turns, p50 %.2f p99 %.2f ms, RSS %.1f MiB (quiet %.1f), cpu %.2f ms/turn, %.1f KiB/turn",
		v.name, n, ms(res.p50), ms(res.p99), float64(res.rssEnd)/1024, float64(res.rssQuiet)/1024, ms(res.cpuPerTurn), res.wPerTurnAll/1024)
	v.multi = res
	return nil
}

// drive runs actors × turns with clients workers; worker w owns actors
// w, w+clients, ... and runs them round robin, one turn at a time.
func (r *runner) drive(s *server, prefix string, actors, turns, clients int) ([]time.Duration, time.Duration, error) {
	if clients > actors {
		clients = actors
	}
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	begin := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; i < turns; i++ {
				for a := w; a < actors; a += clients {
					if ctx.Err() != nil {
						return
					}
					actor := fmt.Sprintf("%s%03d", prefix, a)
					d, err := r.turn(s, actor, "sess-"+actor, r.text(a+1, i))
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = fmt.Errorf("%s turn %d: %w\n%s", actor, i, err, tail(s.logText()))
						}
						mu.Unlock()
						cancel()
						return
					}
					mine = append(mine, d)
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	return all, time.Since(begin), firstErr
}

type concResult struct {
	actors, turns int
	p50, p99      time.Duration
	sp50, sp99    time.Duration // from Server-Timing (0: not reported)
	rss           int64
	cpuPerTurn    time.Duration
	wPerTurn      float64
	elapsed       time.Duration
}

func (r *runner) concurrentRun(v *variant) error {
	home := filepath.Join(r.cfg.workDir, "home-conc-"+v.name)
	s, err := r.start(v, home)
	if err != nil {
		return err
	}
	defer s.stop()
	// a short warm-up so connection setup and first-use costs stay out
	if _, _, err := r.drive(s, "soak:c", r.cfg.concurrent, 5, r.cfg.concurrent); err != nil {
		return err
	}
	before := mustSample(s.pid())
	r.takeServer()
	lats, elapsed, err := r.drive(s, "soak:c", r.cfg.concurrent, r.cfg.concT, r.cfg.concurrent)
	if err != nil {
		return err
	}
	slats := r.takeServer()
	end := mustSample(s.pid())
	n := len(lats)
	res := &concResult{actors: r.cfg.concurrent, turns: n, p50: pct(lats, .5), p99: pct(lats, .99), sp50: pct(slats, .5), sp99: pct(slats, .99), rss: end.rssKiB,
		cpuPerTurn: time.Duration(end.cpu-before.cpu) * (time.Second / clkTck) / time.Duration(n),
		wPerTurn:   float64(end.wbytes-before.wbytes) / float64(n), elapsed: elapsed}
	log.Printf("%s concurrent: %d actors, %d turns, p50 %.2f p99 %.2f ms (server %.2f / %.2f)", v.name, res.actors, n, ms(res.p50), ms(res.p99), ms(res.sp50), ms(res.sp99))
	v.conc = res
	return nil
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ---- report ----

func report(cfg config, vs []*variant) string {
	var b strings.Builder
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.name
	}
	fmt.Fprintf(&b, "## Soak run %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "Variants: %s. Fake model delay %v; LLM extraction %v; turn texts: LoCoMo, cycled.\n\n",
		strings.Join(func() []string {
			var s []string
			for _, v := range vs {
				s = append(s, fmt.Sprintf("`%s` = %s", v.name, v.src))
			}
			return s
		}(), ", "), cfg.modelDelay, cfg.llmExtraction)
	hdr := func(cols ...string) {
		fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	}
	hdr(append([]string{"Binary"}, names...)...)
	row := func(label string, f func(v *variant) string) {
		cells := []string{label}
		for _, v := range vs {
			cells = append(cells, f(v))
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	row("size (MB)", func(v *variant) string { return fmt.Sprintf("%.1f", mb(v.size)) })
	row("stripped size (MB)", func(v *variant) string { return fmt.Sprintf("%.1f", mb(v.stripped)) })
	b.WriteString("\n")

	if cfg.scenarios["single"] {
		fmt.Fprintf(&b, "### One actor, %d turns back to back (windows of %d)\n\n", cfg.turns, cfg.window)
		cols := []string{"turns"}
		for _, n := range names {
			cols = append(cols, n+" p50 / p99 added (ms)", n+" server p50 / p99 (ms)", n+" CPU/turn (ms)", n+" written/turn (KiB)", n+" RSS / anon (MiB)")
		}
		hdr(cols...)
		nw := 0
		for _, v := range vs {
			if v.single != nil && len(v.single.windows) > nw {
				nw = len(v.single.windows)
			}
		}
		for i := 0; i < nw; i++ {
			var cells []string
			for j, v := range vs {
				if v.single == nil || i >= len(v.single.windows) {
					cells = append(cells, "", "", "", "", "")
					continue
				}
				w := v.single.windows[i]
				if j == 0 {
					cells = append([]string{fmt.Sprintf("%d–%d", w.from+1, w.to)}, cells...)
				}
				cells = append(cells, fmt.Sprintf("%.2f / %.2f", ms(w.p50), ms(w.p99)), serverCell(w.sp50, w.sp99), fmt.Sprintf("%.2f", ms(w.cpuPerTurn)),
					fmt.Sprintf("%.1f", w.wPerTurn/1024), fmt.Sprintf("%.1f / %.1f", float64(w.rssKiB)/1024, float64(w.anonKiB)/1024))
			}
			fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
		}
		b.WriteString("\n")
		hdr(append([]string{"One actor, summary"}, names...)...)
		row("idle RSS before the first turn (MiB)", func(v *variant) string { return fmt.Sprintf("%.1f", float64(v.single.idleRSS)/1024) })
		row("RSS last window / first window", func(v *variant) string {
			w := v.single.windows
			return fmt.Sprintf("%.2f×", float64(w[len(w)-1].rssKiB)/float64(w[0].rssKiB))
		})
		row("anon RSS last window / first window", func(v *variant) string {
			w := v.single.windows
			return fmt.Sprintf("%.2f× (%.1f → %.1f MiB)", float64(w[len(w)-1].anonKiB)/float64(w[0].anonKiB), float64(w[0].anonKiB)/1024, float64(w[len(w)-1].anonKiB)/1024)
		})
		row("p99 last window / second window", func(v *variant) string {
			w := v.single.windows
			if len(w) < 2 {
				return "—"
			}
			return fmt.Sprintf("%.2f×", ms(w[len(w)-1].p99)/ms(w[1].p99))
		})
		row("server-side p99 last window / second window", func(v *variant) string {
			w := v.single.windows
			if len(w) < 2 || w[1].sp99 == 0 || w[len(w)-1].sp99 == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f×", ms(w[len(w)-1].sp99)/ms(w[1].sp99))
		})
		row("CPU/turn last window / first window", func(v *variant) string {
			w := v.single.windows
			return fmt.Sprintf("%.2f×", ms(w[len(w)-1].cpuPerTurn)/ms(w[0].cpuPerTurn))
		})
		row("wall time of the turns (s)", func(v *variant) string { return fmt.Sprintf("%.1f", v.single.elapsed.Seconds()) })
		row("background work after the last turn (s, CPU s)", func(v *variant) string {
			return fmt.Sprintf("%.1f, %.2f", v.single.quiesce.Seconds(), float64(v.single.tailCPU)/clkTck)
		})
		row("written while it finished (KiB)", func(v *variant) string { return fmt.Sprintf("%.0f", float64(v.single.tailBytes)/1024) })
		row("RSS when quiet (MiB)", func(v *variant) string { return fmt.Sprintf("%.1f", float64(v.single.final.rssKiB)/1024) })
		row("active records of the actor", func(v *variant) string { return strconv.Itoa(v.single.records) })
		b.WriteString("\n")
	}
	if cfg.scenarios["restart"] {
		what := "same home as the one-actor run"
		if cfg.home != "" {
			what = "copies of " + cfg.home
		}
		hdr(append([]string{fmt.Sprintf("Restart (%s), first call %v after a healthy /ping, median of %d", what, cfg.restartWait, cfg.restartReps)}, names...)...)
		// med is the median of f over v's repetitions; all lists them.
		med := func(v *variant, f func(*restartResult) time.Duration) time.Duration {
			var ds []time.Duration
			for _, res := range v.restarts {
				ds = append(ds, f(res))
			}
			return pct(ds, .5)
		}
		all := func(v *variant, f func(*restartResult) time.Duration) string {
			var s []string
			for _, res := range v.restarts {
				s = append(s, fmt.Sprintf("%.1f", ms(f(res))))
			}
			return strings.Join(s, ", ")
		}
		row("exec → healthy /ping (ms)", func(v *variant) string {
			return fmt.Sprintf("%.0f", ms(med(v, func(r *restartResult) time.Duration { return r.startup })))
		})
		row("idle RSS after restart (MiB)", func(v *variant) string {
			return fmt.Sprintf("%.1f", float64(v.restarts[len(v.restarts)-1].idleRSS)/1024)
		})
		first := func(r *restartResult) time.Duration { return r.first }
		row("first turn, added (ms)", func(v *variant) string { return fmt.Sprintf("%.2f", ms(med(v, first))) })
		if cfg.restartReps > 1 {
			row("first turn, each repetition (ms)", func(v *variant) string { return all(v, first) })
		}
		row(fmt.Sprintf("next %d turns p50 / p99 added (ms)", cfg.restartWarm), func(v *variant) string {
			return fmt.Sprintf("%.2f / %.2f", ms(med(v, func(r *restartResult) time.Duration { return r.warmP50 })),
				ms(med(v, func(r *restartResult) time.Duration { return r.warmP99 })))
		})
		row("RSS after them (MiB)", func(v *variant) string {
			return fmt.Sprintf("%.1f", float64(v.restarts[len(v.restarts)-1].rssAfter)/1024)
		})
		fs := func(r *restartResult) time.Duration { return r.firstSearch }
		row(fmt.Sprintf("first memory search / p50 of the next %d (ms)", searchWarm), func(v *variant) string {
			return fmt.Sprintf("%.2f / %.2f", ms(med(v, fs)), ms(med(v, func(r *restartResult) time.Duration { return r.warmSearch })))
		})
		if cfg.restartReps > 1 {
			row("first memory search, each repetition (ms)", func(v *variant) string { return all(v, fs) })
		}
		b.WriteString("\n")
	}
	if cfg.scenarios["multi"] {
		hdr(append([]string{fmt.Sprintf("%d actors × %d turns, %d clients", cfg.actors, cfg.actorTurns, cfg.multiClients)}, names...)...)
		row("p50 / p99 added (ms)", func(v *variant) string { return fmt.Sprintf("%.2f / %.2f", ms(v.multi.p50), ms(v.multi.p99)) })
		row("p50 / p99 added, server's Server-Timing (ms)", func(v *variant) string { return serverCell(v.multi.sp50, v.multi.sp99) })
		row("RSS after the last turn (MiB)", func(v *variant) string { return fmt.Sprintf("%.1f", float64(v.multi.rssEnd)/1024) })
		row("anon RSS after the last turn (MiB)", func(v *variant) string { return fmt.Sprintf("%.1f", float64(v.multi.anonEnd)/1024) })
		row("RSS when quiet (MiB)", func(v *variant) string { return fmt.Sprintf("%.1f", float64(v.multi.rssQuiet)/1024) })
		row("CPU per turn incl. background (ms)", func(v *variant) string { return fmt.Sprintf("%.2f", ms(v.multi.cpuPerTurn)) })
		row("written per turn, during / incl. background (KiB)", func(v *variant) string {
			return fmt.Sprintf("%.1f / %.1f", v.multi.wPerTurn/1024, v.multi.wPerTurnAll/1024)
		})
		row("wall time (s) + background after (s)", func(v *variant) string {
			return fmt.Sprintf("%.1f + %.1f", v.multi.elapsed.Seconds(), v.multi.quiesce.Seconds())
		})
		row("memory cache: actor loads / evictions per 1,000 turns", func(v *variant) string {
			if v.multi.loads < 0 {
				return "not exposed"
			}
			k := 1000 / float64(v.multi.turns)
			return fmt.Sprintf("%.0f / %.0f", v.multi.loads*k, v.multi.evictions*k)
		})
		b.WriteString("\n")
	}
	if cfg.scenarios["concurrent"] {
		hdr(append([]string{fmt.Sprintf("%d actors concurrently, back to back, %d turns each", cfg.concurrent, cfg.concT)}, names...)...)
		row("p50 / p99 added (ms)", func(v *variant) string { return fmt.Sprintf("%.2f / %.2f", ms(v.conc.p50), ms(v.conc.p99)) })
		row("p50 / p99 added, server's Server-Timing (ms)", func(v *variant) string { return serverCell(v.conc.sp50, v.conc.sp99) })
		row("CPU per turn (ms)", func(v *variant) string { return fmt.Sprintf("%.2f", ms(v.conc.cpuPerTurn)) })
		row("written per turn (KiB)", func(v *variant) string { return fmt.Sprintf("%.1f", v.conc.wPerTurn/1024) })
		row("RSS at the end (MiB)", func(v *variant) string { return fmt.Sprintf("%.1f", float64(v.conc.rss)/1024) })
		row("turns per second", func(v *variant) string { return fmt.Sprintf("%.0f", float64(v.conc.turns)/v.conc.elapsed.Seconds()) })
		b.WriteString("\n")
	}
	return b.String()
}
