package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// The soak (make soak; a short version in `make test`): a node's life in
// fast motion. Pod and container lifecycles run back to back through one
// adaptation with four typical plugins (two on each stub, every one also
// sending unsolicited updates), while one plugin at a time is restarted,
// a fifth one joins and leaves, and the adaptation itself is stopped and
// started again, its plugins reconnecting by themselves. The same run is
// made against upstream's adaptation. Every few lifecycles the runtime
// process's RSS, fds, threads and goroutines, the plugins' RSS and the
// latency are sampled; at the end every plugin process reports how many
// events it handled, which must be exactly what was sent while it was
// registered.

type soakSettings struct {
	Lifecycles int `json:"lifecycles"`
	// Lifecycles between samples, between restarts of one of the four
	// plugins (13 events each, so every few hundred events), between a
	// fifth plugin joining or leaving, and between restarts of the
	// adaptation. SampleEvery is a multiple of twice JoinLeaveEvery, so
	// samples never count the fifth plugin.
	SampleEvery, PluginRestartEvery, JoinLeaveEvery, RuntimeRestartEvery int
	// Every plugin sends an unsolicited update after this many of its
	// CreateContainer requests.
	UnsolicitedEvery int `json:"unsolicited_every"`
	// Samples before this fraction of the run are warm-up. It covers the
	// first restart of the adaptation, after which the Go process keeps
	// one goroutine and one thread more for good (measured; later restarts
	// add none).
	WarmUp float64 `json:"warm_up"`
}

// warmIndex is the first sample after warm-up.
func (s soakSettings) warmIndex(samples int) int {
	return min(int(math.Ceil(float64(samples)*s.WarmUp)), max(samples-1, 0))
}

// fullSoak is make soak's run of n lifecycles (100,000 by default): about
// a hundred samples, ten adaptation restarts (the first within warm-up).
func fullSoak(n int) soakSettings {
	const joinLeave = 50
	return soakSettings{Lifecycles: n, SampleEvery: max(n/100/(2*joinLeave), 1) * 2 * joinLeave, PluginRestartEvery: 40,
		JoinLeaveEvery: joinLeave, RuntimeRestartEvery: max(n/10, 1), UnsolicitedEvery: 50, WarmUp: 0.2}
}

// shortSoak is make test's version: enough of every kind of churn for a
// leak of fds or threads per restart to show, in a few minutes.
func shortSoak() soakSettings {
	return soakSettings{Lifecycles: 600, SampleEvery: 50, PluginRestartEvery: 20, JoinLeaveEvery: 25,
		RuntimeRestartEvery: 150, UnsolicitedEvery: 10, WarmUp: 0.3}
}

// soakSample is the state of the runtime process after some lifecycles.
type soakSample struct {
	Lifecycles int     `json:"lifecycles"`
	Seconds    float64 `json:"seconds"`
	RSSKiB     int64   `json:"rss_kib"`
	// Of which private memory (RssAnon): the heaps and stacks, not the
	// program's code and data that the page cache shares.
	AnonKiB    int64 `json:"rss_anon_kib,omitempty"`
	FDs        int   `json:"fds"`
	Threads    int   `json:"threads"`
	Goroutines int   `json:"goroutines"`
	// The four plugins' VmRSS, summed.
	PluginRSSKiB int64 `json:"plugin_rss_kib"`
	// Latency of the lifecycles since the previous sample.
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
}

// soakResult is one implementation's run.
type soakResult struct {
	Impl     string       `json:"impl"`
	Samples  []soakSample `json:"samples"`
	Seconds  float64      `json:"seconds"`
	Events   int          `json:"events"`
	Restarts struct {
		Plugin, Runtime, JoinLeave int
		// The slowest recovery: from starting a plugin (or the adaptation)
		// until every plugin was registered again.
		SlowestPluginMs, SlowestRuntimeMs float64
		// Every recovery, in order.
		PluginMs  []float64 `json:"plugin_ms,omitempty"`
		RuntimeMs []float64 `json:"runtime_ms,omitempty"`
	} `json:"restarts"`
	// Unsolicited updates the plugins say the runtime took, and the
	// runtime's update callback's count.
	UpdatesSent, UpdatesReceived int64
	// Creations whose response lacked a registered plugin's adjustment.
	CreationsMissingPlugins int `json:"creations_missing_plugins"`
	// Per plugin process: events it reported, events sent while it was
	// registered.
	Accounts []soakAccount `json:"accounts"`
	Failures []string      `json:"failures,omitempty"`
}

type soakAccount struct {
	Plugin   string `json:"plugin"`
	Handled  int    `json:"handled"`
	Expected int    `json:"expected"`
}

// soakPlugin is one plugin process and what it should have seen.
type soakPlugin struct {
	*plugin
	slot     int
	expected int
}

type soakRun struct {
	h        *harness
	s        soakSettings
	impl     string
	dir      string
	in       *instance
	updates  atomic.Int64
	plugins  [5]*soakPlugin // slots 0-3 stay, slot 4 joins and leaves
	res      *soakResult
	regTimer time.Duration
}

// soakStub is the stub of a slot: two of each.
func soakStub(slot int) string {
	if slot%2 == 0 {
		return stubGo
	}
	return stubRust
}

func (h *harness) soak(s soakSettings, impl string) *soakResult {
	// Both adaptations log through logrus: keep per-plugin lines out.
	logrus.SetLevel(logrus.WarnLevel)
	r := &soakRun{h: h, s: s, impl: impl, res: &soakResult{Impl: impl}, regTimer: 5 * time.Second}
	if err := r.run(); err != nil {
		r.res.Failures = append(r.res.Failures, err.Error())
	}
	return r.res
}

func (r *soakRun) fail(format string, args ...any) {
	r.res.Failures = append(r.res.Failures, fmt.Sprintf(format, args...))
}

// startRuntime starts an adaptation on the run's socket, counting the
// unsolicited updates it is given.
func (r *soakRun) startRuntime() error {
	in, err := newInstanceWith(r.impl, r.dir, false, func() { r.updates.Add(1) })
	if err != nil {
		return err
	}
	r.in = in
	return nil
}

// registered counts plugins that are up.
func (r *soakRun) registered() int {
	n := 0
	for _, p := range r.plugins {
		if p != nil {
			n++
		}
	}
	return n
}

func (r *soakRun) startPlugin(slot int) error {
	mode, extra := "typical", []string{"-reconnect", "-unsolicited", fmt.Sprint(r.s.UnsolicitedEvery)}
	if slot == 4 {
		mode, extra = "noop", []string{"-reconnect"}
	}
	synced := r.in.syncedCount()
	p, err := startPluginArgs(r.h.bins, soakStub(slot), r.in.socket, mode, slot, false, extra...)
	if err != nil {
		return err
	}
	r.plugins[slot] = &soakPlugin{plugin: p, slot: slot}
	return r.in.waitSynced(synced+1, r.regTimer, p)
}

// stopPlugin lets a plugin exit, taking its account.
func (r *soakRun) stopPlugin(slot int) {
	p := r.plugins[slot]
	r.plugins[slot] = nil
	n, err := p.finish(10 * time.Second)
	if err != nil {
		r.fail("plugin %d: %v", slot, err)
	}
	r.res.UpdatesSent += int64(p.updates)
	r.res.Accounts = append(r.res.Accounts, soakAccount{Plugin: fmt.Sprintf("slot %d (%s stub, pid %d)", slot,
		soakStub(slot), p.pid()), Handled: n, Expected: p.expected})
}

func (r *soakRun) run() error {
	dir, err := r.h.newDir()
	if err != nil {
		return err
	}
	r.dir = dir
	if err := r.startRuntime(); err != nil {
		return err
	}
	t0 := time.Now()
	defer func() {
		for slot := range r.plugins {
			if r.plugins[slot] != nil {
				r.stopPlugin(slot)
			}
		}
		r.in.rt.Stop()
		r.res.Seconds = time.Since(t0).Seconds()
		r.res.UpdatesReceived = r.updates.Load()
	}()
	for slot := 0; slot < 4; slot++ {
		if err := r.startPlugin(slot); err != nil {
			return fmt.Errorf("start plugin %d: %w", slot, err)
		}
	}
	// Upstream adds a plugin to its list right after its sync returns.
	time.Sleep(20 * time.Millisecond)

	var lat []float64
	sample := func(i int) {
		sort.Float64s(lat)
		var pluginRSS int64
		for _, p := range r.plugins[:4] {
			if p != nil {
				pluginRSS += statusKiB(fmt.Sprint(p.pid()), "VmRSS")
			}
		}
		s := soakSample{Lifecycles: i, Seconds: time.Since(t0).Seconds(), RSSKiB: statusKiB("self", "VmRSS"),
			AnonKiB: statusKiB("self", "RssAnon"),
			FDs:     countFDs(), Threads: int(statusKiB("self", "Threads")), Goroutines: runtime.NumGoroutine(),
			PluginRSSKiB: pluginRSS, P50us: percentile(lat, 0.5), P99us: percentile(lat, 0.99)}
		r.res.Samples = append(r.res.Samples, s)
		r.h.logf("soak %-8s %6d lifecycles %6.0fs: rss %6d KiB fds %3d threads %3d goroutines %4d plugins %6d KiB p99 %7.0f µs",
			r.impl, i, s.Seconds, s.RSSKiB, s.FDs, s.Threads, s.Goroutines, s.PluginRSSKiB, s.P99us)
		lat = lat[:0]
	}
	sample(0)
	for i := 1; i <= r.s.Lifecycles; i++ {
		q := r.h.req.copyFor("lifecycle")
		ctx, cancel := opContext()
		started := time.Now()
		rsp, err := runLifecycle(ctx, r.in.rt, q, nil)
		cancel()
		if err != nil {
			return fmt.Errorf("lifecycle %d: %w", i, err)
		}
		lat = append(lat, float64(time.Since(started).Microseconds()))
		r.res.Events += 13
		typical := 0
		for _, p := range r.plugins {
			if p != nil {
				p.expected += 13
				if p.slot < 4 {
					typical++
				}
			}
		}
		if got := len(rsp.GetAdjust().GetEnv()); got != typical {
			r.res.CreationsMissingPlugins++
			if len(r.res.Failures) < 10 {
				r.fail("lifecycle %d: %d of %d plugins adjusted the container", i, got, typical)
			}
		}

		// Each kind of churn on its own schedule; the fifth plugin joins at
		// odd multiples of its period and leaves at even ones, so that it
		// is gone whenever a sample is taken (see soakSettings).
		if i%r.s.RuntimeRestartEvery == 0 && i < r.s.Lifecycles {
			if err := r.restartRuntime(); err != nil {
				return fmt.Errorf("restart the adaptation after %d lifecycles: %w", i, err)
			}
		}
		if i%r.s.PluginRestartEvery == 0 {
			slot := (i / r.s.PluginRestartEvery) % 4
			r.stopPlugin(slot)
			started := time.Now()
			if err := r.startPlugin(slot); err != nil {
				return fmt.Errorf("restart plugin %d after %d lifecycles: %w", slot, i, err)
			}
			r.res.Restarts.Plugin++
			took := ms(time.Since(started))
			r.res.Restarts.SlowestPluginMs = math.Max(r.res.Restarts.SlowestPluginMs, took)
			r.res.Restarts.PluginMs = append(r.res.Restarts.PluginMs, took)
			time.Sleep(20 * time.Millisecond)
		}
		if i%r.s.JoinLeaveEvery == 0 {
			if (i/r.s.JoinLeaveEvery)%2 == 1 {
				if err := r.startPlugin(4); err != nil {
					return fmt.Errorf("join after %d lifecycles: %w", i, err)
				}
				time.Sleep(20 * time.Millisecond)
			} else if r.plugins[4] != nil {
				r.stopPlugin(4)
			}
			r.res.Restarts.JoinLeave++
		}
		if i%r.s.SampleEvery == 0 {
			// Connections the restarts closed are let go of in the
			// background: sample once that is done.
			time.Sleep(100 * time.Millisecond)
			sample(i)
		}
	}
	// Unsolicited updates still on their way are in by now; the plugins
	// are told to exit by the deferred clean-up.
	time.Sleep(200 * time.Millisecond)
	return nil
}

// restartRuntime stops the adaptation and starts a new one on the same
// socket; the plugins reconnect by themselves. Upstream's Stop leaves
// external plugins connected (the connections only end when the runtime's
// process does), so with upstream the plugins are restarted as well, as
// they would be with the runtime's process gone.
func (r *soakRun) restartRuntime() error {
	var restart []int
	if r.impl == implUpstream {
		for slot, p := range r.plugins {
			if p != nil {
				r.stopPlugin(slot)
				restart = append(restart, slot)
			}
		}
	}
	r.in.rt.Stop()
	started := time.Now()
	if err := r.startRuntime(); err != nil {
		return err
	}
	for _, slot := range restart {
		if err := r.startPlugin(slot); err != nil {
			return err
		}
	}
	var up []*plugin
	for _, p := range r.plugins {
		if p != nil {
			up = append(up, p.plugin)
		}
	}
	if err := r.in.waitSynced(len(up), r.regTimer+time.Second, up...); err != nil {
		return err
	}
	r.res.Restarts.Runtime++
	took := ms(time.Since(started))
	r.res.Restarts.SlowestRuntimeMs = math.Max(r.res.Restarts.SlowestRuntimeMs, took)
	r.res.Restarts.RuntimeMs = append(r.res.Restarts.RuntimeMs, took)
	time.Sleep(20 * time.Millisecond)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

func countFDs() int {
	ents, err := os.ReadDir(filepath.Join("/proc/self/fd"))
	if err != nil {
		return -1
	}
	return len(ents)
}

// flatness is the test of a series after warm-up: the growth its least
// squares line predicts over that span, against the noise around it.
type flatness struct {
	Series string  `json:"series"`
	Growth float64 `json:"growth"` // slope × span, in the series' unit
	Noise  float64 `json:"noise"`  // 3 × the residuals' standard deviation
	Allow  float64 `json:"allow"`  // what growth is tolerated besides the noise
	Flat   bool    `json:"flat"`
}

// checkFlat is flat when the predicted growth is within the noise plus an
// allowance (for fds and threads 0: any trend fails).
func checkFlat(name string, xs, ys []float64, allow float64) flatness {
	f := flatness{Series: name, Allow: allow}
	n := float64(len(xs))
	if len(xs) < 3 {
		f.Flat = true
		return f
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i] / n
		my += ys[i] / n
	}
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	slope := 0.0
	if sxx > 0 {
		slope = sxy / sxx
	}
	var ss float64
	for i := range xs {
		d := ys[i] - (my + slope*(xs[i]-mx))
		ss += d * d
	}
	f.Growth = slope * (xs[len(xs)-1] - xs[0])
	f.Noise = 3 * math.Sqrt(ss/n)
	f.Flat = f.Growth <= f.Noise+allow
	return f
}

// soakVerdict checks one run: every account exact, no creation missing a
// registered plugin, the updates all taken, every restart within one
// registration timeout, and each series flat after warm-up.
func soakVerdict(s soakSettings, res *soakResult, regTimeout time.Duration) ([]flatness, []string) {
	problems := append([]string{}, res.Failures...)
	for _, a := range res.Accounts {
		if a.Handled != a.Expected {
			problems = append(problems, fmt.Sprintf("%s handled %d events, %d were sent to it", a.Plugin, a.Handled, a.Expected))
		}
	}
	if res.UpdatesSent != res.UpdatesReceived {
		problems = append(problems, fmt.Sprintf("plugins sent %d unsolicited updates, the runtime got %d", res.UpdatesSent, res.UpdatesReceived))
	}
	limit := ms(regTimeout)
	if res.Restarts.SlowestPluginMs > limit || res.Restarts.SlowestRuntimeMs > limit {
		problems = append(problems, fmt.Sprintf("a restart took longer than the registration timeout (%v): plugin %.0f ms, runtime %.0f ms",
			regTimeout, res.Restarts.SlowestPluginMs, res.Restarts.SlowestRuntimeMs))
	}
	var xs []float64
	var series = map[string][]float64{}
	for _, smp := range res.Samples[s.warmIndex(len(res.Samples)):] {
		xs = append(xs, float64(smp.Lifecycles))
		series["rss_kib"] = append(series["rss_kib"], float64(smp.RSSKiB))
		series["fds"] = append(series["fds"], float64(smp.FDs))
		series["threads"] = append(series["threads"], float64(smp.Threads))
		series["goroutines"] = append(series["goroutines"], float64(smp.Goroutines))
		series["plugin_rss_kib"] = append(series["plugin_rss_kib"], float64(smp.PluginRSSKiB))
		series["p99_us"] = append(series["p99_us"], smp.P99us)
	}
	// Allowances: none for fds; two threads and two goroutines, as the
	// count at a sample depends on the callbacks of the last seconds (the
	// core runs them on tokio's blocking pool, whose idle threads exit
	// after 10 s, and Go starts threads for them as needed); 1 MiB of RSS
	// for the allocators' and Go's GC pacing's steps; p99 10 % of its
	// median.
	allow := map[string]float64{"rss_kib": 1024, "plugin_rss_kib": 1024, "threads": 2, "goroutines": 2}
	if p := series["p99_us"]; len(p) > 0 {
		sorted := append([]float64{}, p...)
		sort.Float64s(sorted)
		allow["p99_us"] = 0.1 * percentile(sorted, 0.5)
	}
	var flat []flatness
	for _, name := range []string{"rss_kib", "fds", "threads", "goroutines", "plugin_rss_kib", "p99_us"} {
		f := checkFlat(name, xs, series[name], allow[name])
		if !f.Flat {
			problems = append(problems, fmt.Sprintf("%s grows after warm-up: %+.1f predicted over the run, noise %.1f, allowed %.1f",
				name, f.Growth, f.Noise, f.Allow))
		}
		flat = append(flat, f)
	}
	return flat, problems
}
