package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkServeStartup measures exec → first Healthy /ping of the real
// binary, and the idle RSS one second after start. Run with
//
//	go test -run '^$' -bench ServeStartup -benchtime 20x ./cmd/tendril
func BenchmarkServeStartup(b *testing.B) {
	bin := tendrilBinary(b)
	var startups []time.Duration
	var rssKB []int
	for i := 0; i < b.N; i++ {
		home := b.TempDir()
		addr := freeAddr(b)
		cmd := exec.Command(bin, "serve", "--addr", addr)
		cmd.Env = baseEnv(home)
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		client := &http.Client{Timeout: time.Second}
		for {
			resp, err := client.Get("http://" + addr + "/ping")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Since(t0) > 20*time.Second {
				b.Fatal("not healthy")
			}
			time.Sleep(200 * time.Microsecond)
		}
		startups = append(startups, time.Since(t0))
		time.Sleep(time.Second)
		rssKB = append(rssKB, vmRSS(cmd.Process.Pid))
		cmd.Process.Kill()
		cmd.Wait()
	}
	sort.Slice(startups, func(i, j int) bool { return startups[i] < startups[j] })
	sort.Ints(rssKB)
	b.ReportMetric(float64(startups[len(startups)/2].Microseconds())/1000, "ms-to-healthy-p50")
	b.ReportMetric(float64(rssKB[len(rssKB)/2])/1024, "MB-idle-rss-p50")
}

func vmRSS(pid int) int {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(sc.Text())[1])
			return n
		}
	}
	return 0
}
