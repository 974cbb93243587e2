package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The short soak of `make test`: nri-rs alone, through every kind of
// churn the full soak has. It asserts only what cannot be noise: no event
// lost or handled twice, no creation without a registered plugin, every
// unsolicited update taken, every restart recovered within a registration
// timeout, no fd more at the end than after warm-up, and threads and
// goroutines within two of the most seen until then (what a leak per
// restart, 33 restarts here, would exceed; the count at a sample depends on
// the callbacks of the last seconds, see soakVerdict).
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the short soak takes a few minutes")
	}
	bin := rustBin()
	if _, err := os.Stat(filepath.Join(bin, "nri-bench-plugin")); err != nil {
		t.Fatalf("%v (build the workspace first: cargo build --workspace, or set NRI_BENCH_BIN)", err)
	}
	h := &harness{bins: binaries{goPlugin: buildGoPlugin(t), rustPlugin: filepath.Join(bin, "nri-bench-plugin")},
		req: newRequests(), tmp: t.TempDir(), verbose: testing.Verbose()}
	s := shortSoak()
	res := h.soak(s, implNriRs)
	for _, f := range res.Failures {
		t.Error(f)
	}
	if res.Restarts.Plugin == 0 || res.Restarts.Runtime == 0 || res.Restarts.JoinLeave == 0 {
		t.Errorf("not every kind of churn happened: %+v", res.Restarts)
	}
	_, problems := soakVerdict(s, res, 5*time.Second)
	for _, p := range problems {
		// Memory and latency trends over a few minutes are noise; the
		// full soak judges them.
		// So are slopes over a dozen samples of counts that move by one or
		// two: threads and goroutines are bounded below instead.
		if strings.HasPrefix(p, "rss_kib") || strings.HasPrefix(p, "plugin_rss_kib") || strings.HasPrefix(p, "p99_us") ||
			strings.HasPrefix(p, "threads") || strings.HasPrefix(p, "goroutines") {
			t.Logf("not judged in the short soak: %s", p)
			continue
		}
		t.Error(p)
	}
	if n := len(res.Samples); n > 2 {
		w := s.warmIndex(n)
		warm, last := res.Samples[w], res.Samples[n-1]
		var threads, goroutines int
		for _, smp := range res.Samples[:w+1] {
			threads, goroutines = max(threads, smp.Threads), max(goroutines, smp.Goroutines)
		}
		for _, smp := range res.Samples[w:] {
			if smp.Threads > threads+2 || smp.Goroutines > goroutines+2 {
				t.Errorf("after %d lifecycles: %d threads and %d goroutines, at most %d and %d until warm-up ended",
					smp.Lifecycles, smp.Threads, smp.Goroutines, threads, goroutines)
			}
		}
		if last.FDs > warm.FDs {
			t.Errorf("fds %d after warm-up, %d at the end", warm.FDs, last.FDs)
		}
	}
	for _, smp := range res.Samples {
		t.Logf("%5d lifecycles: rss %d KiB, fds %d, threads %d, goroutines %d", smp.Lifecycles, smp.RSSKiB, smp.FDs, smp.Threads, smp.Goroutines)
	}
	t.Logf("%d events, %d plugin restarts, %d joins and leaves, %d adaptation restarts in %.0fs; %d unsolicited updates",
		res.Events, res.Restarts.Plugin, res.Restarts.JoinLeave, res.Restarts.Runtime, res.Seconds, res.UpdatesReceived)
}
