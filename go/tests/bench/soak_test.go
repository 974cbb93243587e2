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
// timeout, and no fd or thread left behind by the restarts.
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
		if strings.HasPrefix(p, "rss_kib") || strings.HasPrefix(p, "plugin_rss_kib") || strings.HasPrefix(p, "p99_us") {
			t.Logf("not judged in the short soak: %s", p)
			continue
		}
		t.Error(p)
	}
	if n := len(res.Samples); n > 2 {
		warm := res.Samples[s.warmIndex(n)]
		last := res.Samples[n-1]
		if last.FDs > warm.FDs || last.Threads > warm.Threads {
			t.Errorf("fds %d -> %d, threads %d -> %d after warm-up", warm.FDs, last.FDs, warm.Threads, last.Threads)
		}
	}
	for _, smp := range res.Samples {
		t.Logf("%5d lifecycles: rss %d KiB, fds %d, threads %d, goroutines %d", smp.Lifecycles, smp.RSSKiB, smp.FDs, smp.Threads, smp.Goroutines)
	}
	t.Logf("%d events, %d plugin restarts, %d joins and leaves, %d adaptation restarts in %.0fs; %d unsolicited updates",
		res.Events, res.Restarts.Plugin, res.Restarts.JoinLeave, res.Restarts.Runtime, res.Seconds, res.UpdatesReceived)
}
