package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/nri/pkg/api"

	nrirs "github.com/nri-rs/nri-rs/go/adaptation"
)

// Results, as written to the JSON file.

type roundResult struct {
	Round        int                `json:"round"`
	Ops          int                `json:"ops"`
	P50us        float64            `json:"p50_us"`
	P99us        float64            `json:"p99_us"`
	MeanUs       float64            `json:"mean_us"`
	CPUusPerOp   float64            `json:"cpu_us_per_op"`
	AllocsPerOp  float64            `json:"go_allocs_per_op"`
	RSSGrowthKiB int64              `json:"rss_growth_kib"`
	Plugins      []pluginSample     `json:"plugins,omitempty"`
	Extra        map[string]float64 `json:"extra,omitempty"`
}

// pluginSample is one plugin process's footprint in one round.
type pluginSample struct {
	IdleRSSKiB    int64   `json:"idle_rss_kib"`
	IdleAnonKiB   int64   `json:"idle_rss_anon_kib"` // private: not the executable's shared pages
	BusyRSSKiB    int64   `json:"busy_rss_kib"`
	PeakRSSKiB    int64   `json:"peak_rss_kib"`
	CPUusPerEvent float64 `json:"cpu_us_per_event"`
	IdleCPUusPerS float64 `json:"idle_cpu_us_per_s"`
	EventsHandled int     `json:"events"`
}

type configResult struct {
	Impl string `json:"impl"` // upstream, nri-rs, floor
	Stub string `json:"stub"` // go, rust, or the floor's kind
	// Medians over rounds of the per-round figures.
	P50us        float64 `json:"p50_us"`
	P99us        float64 `json:"p99_us"`
	CPUusPerOp   float64 `json:"cpu_us_per_op"`
	AllocsPerOp  float64 `json:"go_allocs_per_op"`
	RSSGrowthKiB float64 `json:"rss_growth_kib"`
	// Plugin footprint (medians over plugins and rounds), if any.
	PluginIdleRSSKiB    float64 `json:"plugin_idle_rss_kib,omitempty"`
	PluginIdleAnonKiB   float64 `json:"plugin_idle_rss_anon_kib,omitempty"`
	PluginBusyRSSKiB    float64 `json:"plugin_busy_rss_kib,omitempty"`
	PluginPeakRSSKiB    float64 `json:"plugin_peak_rss_kib,omitempty"`
	PluginCPUusPerEvent float64 `json:"plugin_cpu_us_per_event,omitempty"`
	// The storm's: pods started per second, and each plugin's CPU per pod
	// (medians over rounds); P50us, P99us and CPUusPerOp are then per pod.
	PodsPerS          float64       `json:"pods_per_s,omitempty"`
	PluginCPUusPerPod float64       `json:"plugin_cpu_us_per_pod,omitempty"`
	Rounds            []roundResult `json:"rounds"`
	Errors            []string      `json:"errors,omitempty"`
}

type caseResult struct {
	Name       string `json:"name"`
	Title      string `json:"title"`
	Kind       string `json:"kind"` // floor, create, update, lifecycle, sync
	Plugins    int    `json:"plugins"`
	Containers int    `json:"containers,omitempty"` // sync cases
	Mode       string `json:"mode,omitempty"`       // typical, noop, large
	// The default validator runs as a builtin plugin (benchValidator).
	Validator bool `json:"default_validator,omitempty"`
	// The runtime launches the plugins from its plugin directory (they
	// are pre-installed) instead of their connecting to its socket.
	Launched    bool `json:"launched,omitempty"`
	EventsPerOp int  `json:"events_per_op"`
	// RoundTrips per op: plugins x events, for the distance from the floor.
	RoundTrips   int  `json:"round_trips_per_op"`
	RequestBytes int  `json:"request_bytes"`
	Pinned       bool `json:"pinned"`
	// The configurations ran side by side in one process, their measured
	// operations in alternating batches (runPaired); the process's RSS
	// growth is then no one configuration's, and is not given.
	Paired bool `json:"paired,omitempty"`
	// The load average (1/5/15 min) when the case started and ended: other
	// work on the machine shows here.
	LoadStart []float64 `json:"load_start,omitempty"`
	LoadEnd   []float64 `json:"load_end,omitempty"`
	// The storm's pods are started by this many callers at once, and each
	// plugin waits (or computes) this long in every CreateContainer.
	Callers      int     `json:"callers,omitempty"`
	CreateWaitUs float64 `json:"plugin_create_wait_us,omitempty"`
	CreateCPUUs  float64 `json:"plugin_create_cpu_us,omitempty"`
	// Why a case's figures are not those of the run itself (a re-run).
	Note    string         `json:"note,omitempty"`
	Configs []configResult `json:"configs"`
}

// caseDef is one case to run.
type caseDef struct {
	caseResult
	ops     int
	warmup  int
	configs [][2]string // impl, stub
	run     func(h *harness, c *caseDef, impl, stub string, round int) (roundResult, error)
	// mk makes an event case's operation (runPaired's, as run's).
	mk func(*caseDef) op
	// More flags for the case's plugin processes (the storm's).
	pluginArgs []string
}

var allConfigs = [][2]string{
	{implUpstream, stubGo}, {implNriRs, stubGo}, {implUpstream, stubRust}, {implNriRs, stubRust},
}

// harness holds what every case needs.
type harness struct {
	bins    binaries
	req     *requests
	tmp     string
	verbose bool
	seq     int
}

func (h *harness) newDir() (string, error) {
	h.seq++
	d := filepath.Join(h.tmp, fmt.Sprintf("r%d", h.seq))
	return d, os.MkdirAll(d, 0o755)
}

// freshInstance starts an adaptation of impl in a directory of its own,
// with c's plugins of stub pre-installed if c launches them.
func (h *harness) freshInstance(impl, stub string, c *caseDef) (*instance, error) {
	dir, err := h.newDir()
	if err != nil {
		return nil, err
	}
	if c.Launched {
		if err := h.preinstall(dir, stub, c); err != nil {
			return nil, err
		}
	}
	if stub == stubWasmLent {
		// No cache: the module runs on the lent wazero engine.
		return newInstance(impl, dir, c.Validator, nrirs.WithWasmCacheDir(""))
	}
	return newInstance(impl, dir, c.Validator, nrirs.WithWasmCacheDir(h.wasmCache()), nrirs.WithWasmCompiledAtStart())
}

// wasmCache is where nri-rs keeps compiled WASM modules during the run:
// the first instance with a module compiles it, the later ones load it.
func (h *harness) wasmCache() string { return filepath.Join(h.tmp, "wasm-cache") }

// preinstall puts c's plugins into dir's plugin directory as the runtime
// launches them: an executable NN-name each, here a script that runs the
// bench plugin of stub (the runtime gives it only NRI_PLUGIN_* in its
// environment, so the path is absolute).
func (h *harness) preinstall(dir, stub string, c *caseDef) error {
	if stub == stubWasm || stub == stubWasmLent {
		return h.preinstallWasm(dir, c)
	}
	bin, err := filepath.Abs(h.bins.plugin(stub))
	if err != nil {
		return err
	}
	for k := 0; k < c.Plugins; k++ {
		script := fmt.Sprintf("#!/bin/sh\nexec %s -mode %s -slot %d\n", bin, c.Mode, k)
		path := filepath.Join(dir, "plugins", fmt.Sprintf("%02d-bench%d", 10+k, k))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// preinstallWasm puts c's plugins into dir's plugin directory as WASM
// modules, each told by its drop-in to make a typical plugin's adjustment
// (an environment variable and the rest) without logging every event.
func (h *harness) preinstallWasm(dir string, c *caseDef) error {
	module, err := os.ReadFile(h.bins.wasmPlugin)
	if err != nil {
		return err
	}
	for _, sub := range []string{"plugins", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	for k := 0; k < c.Plugins; k++ {
		name := fmt.Sprintf("%02d-bench%d", 10+k, k)
		if err := os.WriteFile(filepath.Join(dir, "plugins", name), module, 0o755); err != nil {
			return err
		}
		conf := fmt.Sprintf("name=bench%d quiet", k)
		if err := os.WriteFile(filepath.Join(dir, "conf.d", name+".conf"), []byte(conf), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (h *harness) logf(format string, args ...any) {
	if h.verbose {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

// op is one operation of an event case, sending the requests of q (a copy
// of its own: see requests.copyFor); check validates a warm-up result.
type op func(ctx context.Context, rt runtimeAPI, q *requests, check bool) error

func createOp(c *caseDef) op {
	return func(ctx context.Context, rt runtimeAPI, q *requests, check bool) error {
		rsp, err := rt.CreateContainer(ctx, q.create)
		if err != nil || !check {
			return err
		}
		env := c.Plugins
		if c.Mode == "large" {
			env *= 1 + largeEnv
		}
		if c.Mode != "noop" && len(rsp.GetAdjust().GetEnv()) != env {
			return errNotAllPlugins
		}
		return nil
	}
}

// largeEnv is how many environment variables a large-mode plugin adds
// besides its typical one (goplugin's largeEnv).
const largeEnv = 2000

func updateOp(c *caseDef) op {
	return func(ctx context.Context, rt runtimeAPI, q *requests, check bool) error {
		rsp, err := rt.UpdateContainer(ctx, q.update)
		if err != nil || !check {
			return err
		}
		if c.Mode == "typical" && len(rsp.GetUpdate()) == 0 {
			return errNotAllPlugins
		}
		return nil
	}
}

func lifecycleOp(c *caseDef) op {
	create := createOp(c)
	return func(ctx context.Context, rt runtimeAPI, q *requests, check bool) error {
		_, err := runLifecycle(ctx, rt, q, func() error { return create(ctx, rt, q, check) })
		return err
	}
}

// runLifecycle sends the 13 events of a pod and its container, the
// creation through create (nil: a plain CreateContainer, whose response
// is returned).
func runLifecycle(ctx context.Context, rt runtimeAPI, q *requests, create func() error) (*api.CreateContainerResponse, error) {
	var created *api.CreateContainerResponse
	if create == nil {
		create = func() (err error) {
			created, err = rt.CreateContainer(ctx, q.create)
			return err
		}
	}
	steps := []func() error{
		func() error { return rt.RunPodSandbox(ctx, q.runPod) },
		create,
		func() error { return rt.PostCreateContainer(ctx, q.postCreate) },
		func() error { return rt.StartContainer(ctx, q.start) },
		func() error { return rt.PostStartContainer(ctx, q.postStart) },
		func() error { _, err := rt.UpdatePodSandbox(ctx, q.updatePod); return err },
		func() error { return rt.PostUpdatePodSandbox(ctx, q.postUpdPod) },
		func() error { _, err := rt.UpdateContainer(ctx, q.update); return err },
		func() error { return rt.PostUpdateContainer(ctx, q.postUpdate) },
		func() error { _, err := rt.StopContainer(ctx, q.stop); return err },
		func() error { return rt.RemoveContainer(ctx, q.removeCtr) },
		func() error { return rt.StopPodSandbox(ctx, q.stopPod) },
		func() error { return rt.RemovePodSandbox(ctx, q.removePod) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	return created, nil
}

var errNotAllPlugins = fmt.Errorf("not every plugin has joined yet")

// runEvents measures an event case: a fresh adaptation and fresh plugin
// processes, warm-up, the measured loop, then a check that every plugin
// saw every event.
func runEvents(mk func(*caseDef) op) func(h *harness, c *caseDef, impl, stub string, round int) (roundResult, error) {
	return func(h *harness, c *caseDef, impl, stub string, round int) (res roundResult, err error) {
		res.Round = round
		e, err := startEvents(h, c, impl, stub, mk)
		if err != nil {
			return res, err
		}
		defer e.close()
		settle()
		e.before = takeSample()
		if err := e.measure(c.ops); err != nil {
			return res, err
		}
		return res, e.finish(&res)
	}
}

// eventRun is one configuration's run of an event case, in three steps:
// startEvents (the adaptation, its plugins, their joining and the
// warm-up), measure (operations, as many times as wanted) and finish (the
// figures, and the check that every plugin saw every event).
type eventRun struct {
	c       *caseDef
	stub    string
	fresh   func() *requests
	in      *instance
	do      op
	ctx     context.Context
	cancel  context.CancelFunc
	plugins []*plugin
	idle    []pluginSample
	busyCPU []time.Duration
	retries int
	// before is taken by the caller once the process has settled; the
	// measured operations' latencies, CPU and allocations add up in lat
	// and used.
	before  sample
	lat     []float64
	used    sample
	stopped bool
}

func startEvents(h *harness, c *caseDef, impl, stub string, mk func(*caseDef) op) (_ *eventRun, err error) {
	in, err := h.freshInstance(impl, stub, c)
	if err != nil {
		return nil, err
	}
	e := &eventRun{c: c, stub: stub, in: in, do: mk(c), fresh: func() *requests { return h.req.copyFor(c.Kind) },
		plugins: make([]*plugin, 0, c.Plugins), lat: make([]float64, 0, c.ops)}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	// Launched plugins were started and synchronized by Start; they
	// are the runtime's children, so they have no footprint here and
	// their events are checked by the replies alone (typical mode).
	for k := 0; k < c.Plugins && !c.Launched; k++ {
		p, err := startPlugin(h.bins, stub, in.socket, c.Mode, k, false)
		if err != nil {
			return nil, err
		}
		e.plugins = append(e.plugins, p)
	}
	if err := in.waitSynced(len(e.plugins), 30*time.Second, e.plugins...); err != nil {
		return nil, err
	}
	// Upstream adds a plugin to its list right after its sync returns.
	time.Sleep(20 * time.Millisecond)

	// Idle footprint: after registration, before any event.
	idleCPU := make([]time.Duration, len(e.plugins))
	for i, p := range e.plugins {
		idleCPU[i] = procCPU(p.pid())
	}
	idleStart := time.Now()
	time.Sleep(100 * time.Millisecond)
	e.idle = make([]pluginSample, len(e.plugins))
	for i, p := range e.plugins {
		pid := p.pid()
		e.idle[i].IdleRSSKiB = statusKiB(fmt.Sprint(pid), "VmRSS")
		e.idle[i].IdleAnonKiB = statusKiB(fmt.Sprint(pid), "RssAnon")
		e.idle[i].IdleCPUusPerS = float64((procCPU(pid) - idleCPU[i]).Microseconds()) / time.Since(idleStart).Seconds()
	}

	// containerd hands NRI each CRI request's context, which the gRPC
	// server made for that request with kubelet's deadline; so do the
	// measured operations (see opContext). The probes and the warm-up
	// share one such context.
	e.ctx, e.cancel = opContext()
	// Typical plugins show in the response that every one has joined;
	// until then calls are retried (and not counted as warm-up).
	if c.Mode != "noop" {
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := e.do(e.ctx, in.rt, e.fresh(), true)
			if err == nil {
				break
			}
			if err != errNotAllPlugins || time.Now().After(deadline) {
				return nil, fmt.Errorf("joining: %w", err)
			}
			e.retries++
			time.Sleep(5 * time.Millisecond)
		}
		e.retries++ // the successful probe
	}
	for i := 0; i < c.warmup; i++ {
		if err := e.do(e.ctx, in.rt, e.fresh(), false); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	e.busyCPU = make([]time.Duration, len(e.plugins))
	for i, p := range e.plugins {
		e.busyCPU[i] = procCPU(p.pid())
	}
	return e, nil
}

// measure runs n more measured operations. Each operation's requests are
// copied beforehand, a batch at a time; the copying is outside the timing
// and the CPU and allocation counts (and a batch keeps the live heap
// small).
func (e *eventRun) measure(n int) error {
	const batch = 100
	for n > 0 {
		qs := make([]*requests, min(batch, n))
		ctxs := make([]context.Context, len(qs))
		cancels := make([]context.CancelFunc, len(qs))
		for i := range qs {
			qs[i] = e.fresh()
			ctxs[i], cancels[i] = opContext()
		}
		s0 := takeSample()
		for i, q := range qs {
			t0 := time.Now()
			// Launched plugins report no event count: check every reply.
			err := e.do(ctxs[i], e.in.rt, q, e.c.Launched)
			e.lat = append(e.lat, float64(time.Since(t0).Nanoseconds())/1e3)
			cancels[i]()
			if err != nil {
				return fmt.Errorf("op %d: %w", len(e.lat)-1, err)
			}
		}
		s1 := takeSample()
		e.used.cpu += s1.cpu - s0.cpu
		e.used.allocs += s1.allocs - s0.allocs
		n -= len(qs)
	}
	return nil
}

// finish sets res's figures from the measured operations, checks that
// every plugin saw every event, and stops the adaptation.
func (e *eventRun) finish(res *roundResult) error {
	c := e.c
	after := sample{cpu: e.before.cpu + e.used.cpu, allocs: e.before.allocs + e.used.allocs}
	latencyStats(res, e.lat)
	counters(res, e.before, after, len(e.lat))
	for i, p := range e.plugins {
		pid := p.pid()
		e.idle[i].BusyRSSKiB = statusKiB(fmt.Sprint(pid), "VmRSS")
		e.idle[i].PeakRSSKiB = statusKiB(fmt.Sprint(pid), "VmHWM")
		e.idle[i].CPUusPerEvent = float64((procCPU(pid) - e.busyCPU[i]).Microseconds()) / float64(len(e.lat)*c.EventsPerOp)
	}

	// Every plugin saw every warm-up and measured event (and maybe
	// some of the probes).
	want := (c.warmup + len(e.lat)) * c.EventsPerOp
	for i, p := range e.plugins {
		n, err := p.finish(10 * time.Second)
		if err != nil {
			return err
		}
		e.idle[i].EventsHandled = n
		if n < want || n > want+e.retries*c.EventsPerOp {
			return fmt.Errorf("plugin %d (%s stub) handled %d events, want %d", i, e.stub, n, want)
		}
	}
	e.plugins = nil
	e.close()
	res.Plugins = e.idle
	return nil
}

// close stops the adaptation and kills the plugins left, once.
func (e *eventRun) close() {
	for _, p := range e.plugins {
		p.kill()
	}
	e.plugins = nil
	if !e.stopped {
		e.stopped = true
		if e.cancel != nil {
			e.cancel()
		}
		e.in.rt.Stop()
	}
}

// runSync measures registration + Synchronize of a new plugin against n
// containers (in n/2 pods): from letting an already started plugin process
// connect until the runtime's sync callback has the plugin's reply. One
// adaptation per round, a fresh plugin per op.
func runSync(h *harness, c *caseDef, impl, stub string, round int) (res roundResult, err error) {
	res.Round = round
	in, err := h.freshInstance(impl, stub, c)
	if err != nil {
		return res, err
	}
	defer in.rt.Stop()
	pods, ctrs := h.req.syncState(c.Containers)
	in.state = func() ([]*api.PodSandbox, []*api.Container) { return pods, ctrs }

	var lat []float64
	var cpu, growth, allocs, pluginPeak []float64
	total := c.warmup + c.ops
	for i := 0; i < total; i++ {
		p, err := startPlugin(h.bins, stub, in.socket, "noop", i%80, true)
		if err != nil {
			return res, err
		}
		if err := p.waiting(); err != nil {
			p.kill()
			return res, err
		}
		settle()
		before := takeSample()
		var t1 time.Time
		var cpu1 time.Duration
		in.mu.Lock()
		in.onSync = func() { t1, cpu1 = time.Now(), cpuTime() }
		in.mu.Unlock()
		t0 := time.Now()
		if err := p.release(); err != nil {
			p.kill()
			return res, err
		}
		if err := in.waitSynced(i+1, 120*time.Second, p); err != nil {
			p.kill()
			return res, err
		}
		after := takeSample()
		peak := statusKiB(fmt.Sprint(p.pid()), "VmHWM")
		p.kill()
		if i < c.warmup {
			continue
		}
		lat = append(lat, float64(t1.Sub(t0).Nanoseconds())/1e3)
		cpu = append(cpu, float64((cpu1 - before.cpu).Microseconds()))
		allocs = append(allocs, float64(after.allocs-before.allocs))
		g := statusKiB("self", "VmHWM") - before.rssKiB
		if g < 0 {
			g = 0
		}
		growth = append(growth, float64(g))
		pluginPeak = append(pluginPeak, float64(peak))
	}
	latencyStats(&res, lat)
	res.CPUusPerOp = median(cpu)
	res.AllocsPerOp = median(allocs)
	// The largest growth: memory the first op's allocator kept in RSS
	// would hide the growth of later ones.
	for _, g := range growth {
		res.RSSGrowthKiB = max(res.RSSGrowthKiB, int64(g))
	}
	res.Plugins = []pluginSample{{PeakRSSKiB: int64(median(pluginPeak))}}
	return res, nil
}

// runStart measures starts of an adaptation with c's WASM plugins in its
// plugin directory: New and Start, which returns once every plugin there
// runs (compiled, instantiated, configured and synchronized). One
// CreateContainer then checks that each plugin adjusts. The growth is the
// process's peak RSS above what it was before New, so it includes the
// compiler's transient memory.
func runStart(h *harness, c *caseDef, impl, stub string, round int) (res roundResult, err error) {
	res.Round = round
	var lat, cpu, growth []float64
	warmup := c.warmup
	if stub == stubWasm && impl == implNriRs {
		warmup = max(warmup, 1) // the start that fills the cache, if none did
	}
	for i := 0; i < warmup+c.ops; i++ {
		dir, err := h.newDir()
		if err != nil {
			return res, err
		}
		if err := h.preinstallWasm(dir, c); err != nil {
			return res, err
		}
		cache := h.wasmCache()
		if stub == stubWasmFirst {
			cache = filepath.Join(dir, "wasm-cache")
		}
		settle()
		before := takeSample()
		t0 := time.Now()
		opts := []nrirs.Option{nrirs.WithWasmCacheDir(cache)}
		if stub == stubWasm {
			// Later starts: the first one compiled the module and kept it.
			opts = append(opts, nrirs.WithWasmCompiledAtStart())
		}
		in, err := newInstance(impl, dir, false, opts...)
		if err != nil {
			return res, err
		}
		took, cpu1 := time.Since(t0), cpuTime()
		peak := statusKiB("self", "VmHWM")
		ctx, cancel := opContext()
		err = createOp(c)(ctx, in.rt, h.req.copyFor("create"), true)
		cancel()
		in.rt.Stop()
		if err != nil {
			return res, fmt.Errorf("CreateContainer after the start: %w", err)
		}
		if i < warmup {
			continue
		}
		lat = append(lat, float64(took.Nanoseconds())/1e3)
		cpu = append(cpu, float64((cpu1 - before.cpu).Microseconds()))
		growth = append(growth, float64(max(peak-before.rssKiB, 0)))
	}
	latencyStats(&res, lat)
	res.CPUusPerOp = median(cpu)
	res.RSSGrowthKiB = int64(median(growth))
	return res, nil
}

// runFloor measures one of the floors.
func runFloor(h *harness, c *caseDef, impl, stub string, round int) (res roundResult, err error) {
	res.Round = round
	settle()
	before := takeSample()
	var lat []float64
	switch stub {
	case "raw":
		lat, err = floorRaw(c.RequestBytes, h.req.createRspLen, c.ops)
	case "raw-4MiB":
		lat, err = floorRaw(4<<20, 64, c.ops)
	case "ttrpc":
		lat, err = floorTTRPC(h.req.create, c.ops, false)
	case "ttrpc-mux":
		lat, err = floorTTRPC(h.req.create, c.ops, true)
	default:
		err = fmt.Errorf("unknown floor %q", stub)
	}
	if err != nil {
		return res, err
	}
	after := takeSample()
	latencyStats(&res, lat)
	// The floors' counters include their warm-ups and the child's start.
	counters(&res, before, after, c.ops+floorWarmups)
	return res, nil
}

// criDeadline is kubelet's default deadline for a CRI call
// (--runtime-request-timeout), which reaches the runtime with the request.
const criDeadline = 2 * time.Minute

// opContext is an operation's context as a CRI runtime hands it to NRI: the
// gRPC server's context for one request, cancellable, with its deadline.
// Both implementations take it; with it go/adaptation takes its cancelable
// path, the one containerd's and CRI-O's calls take.
func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), criDeadline)
}
