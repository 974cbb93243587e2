// Command bench is nri-rs's benchmark harness (`make bench`). In
// one process and one run it drives upstream's Go pkg/adaptation (the
// version pinned in go.mod) and nri-rs through go/adaptation with the same
// plugin processes and the same requests, alternating the implementations
// round by round, and measures per case: p50/p99 latency, runtime-side CPU
// per operation (getrusage around the loop), Go allocations per operation,
// and the runtime process's RSS growth; beside them the physical floors
// (raw socket pair, bare Go ttrpc, Go ttrpc through NRI's multiplexer),
// the plugin processes' footprint (Go stub vs Rust stub) and the Rust
// core's runtime layouts. It writes a JSON file and regenerates
// docs/PERFORMANCE.md and its plot from it.
//
//	bench -bin target/release -goplugin build/bench/goplugin -out docs/performance.json \
//	      -doc docs/PERFORMANCE.md -png docs/performance.png
//	bench -report-only -out docs/performance.json -doc docs/PERFORMANCE.md -png docs/performance.png
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"
)

type settings struct {
	Rounds       int    `json:"rounds"`
	Ops          int    `json:"ops"`
	LifecycleOps int    `json:"lifecycle_ops"`
	SyncSizes    []int  `json:"sync_sizes"`
	Smoke        bool   `json:"smoke"`
	Cases        string `json:"cases"`
	Pinned       string `json:"pinned"`
	Configs      string `json:"configs,omitempty"`
	// Plugins of the runtime-layout experiment (-layout-plugins).
	LayoutPlugins int `json:"layout_plugins,omitempty"`
	// The WASM case runs (a module was given: -wasmplugin).
	Wasm bool `json:"wasm,omitempty"`
	// Pods per configuration and round of the pod-start storm.
	StormPods int `json:"storm_pods,omitempty"`
}

type results struct {
	Machine  machine        `json:"machine"`
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Settings settings       `json:"settings"`
	Cases    []caseResult   `json:"cases"`
	Layouts  []layoutResult `json:"layouts"`
	// The core's instructions per event (callgrind), if valgrind is here.
	Instructions []instrCount `json:"instructions,omitempty"`
	Targets      []target     `json:"targets"`
}

// rustPluginOf is the Rust bench plugin to run: the one given, else the
// one beside the core.
func rustPluginOf(given, bin string) string {
	if given != "" {
		return given
	}
	return bin + "/nri-bench-plugin"
}

func main() {
	runChild()

	var (
		bin        = flag.String("bin", "target/release", "directory with nri-bench-core (and nri-bench-plugin, unless -rustplugin)")
		rustPlugin = flag.String("rustplugin", "", "the Rust stub bench plugin, built as plugins ship (default: -bin's nri-bench-plugin)")
		goPlugin   = flag.String("goplugin", "", "the Go stub bench plugin (go/tests/bench/goplugin), built")
		wasmPlugin = flag.String("wasmplugin", "", "the WASM plugin (go/tests/wasm/plugin) built for wasip1; without it no WASM case")
		out        = flag.String("out", "performance.json", "results file (JSON)")
		doc        = flag.String("doc", "", "regenerate this Markdown report from the results")
		png        = flag.String("png", "", "write the latency plot here (PNG)")
		reportOnly = flag.Bool("report-only", false, "only regenerate -doc and -png from -out")
		rounds     = flag.Int("rounds", 4, "rounds per case; implementations alternate within each")
		ops        = flag.Int("ops", 2000, "operations per round for single-event cases")
		smoke      = flag.Bool("smoke", false, "a few iterations of everything (for make test); numbers are meaningless")
		cases      = flag.String("cases", "", "only cases whose name matches this regexp")
		pinned     = flag.String("pinned", `^(floor-raw|floor-ttrpc|create-typical-4)$`, "cases to run again with everything pinned to CPU 0 ('' for none)")
		noLayouts  = flag.Bool("no-layouts", false, "skip the runtime-layout experiment")
		noInstr    = flag.Bool("no-instructions", false, "skip counting the core's instructions (callgrind)")
		layoutPlug = flag.Int("layout-plugins", 4, "plugins in the runtime-layout experiment (1 profiles a single hop)")
		configs    = flag.String("configs", "", "only configurations (impl/stub, e.g. nri-rs/rust) matching this regexp")
		stormPods  = flag.Int("storm-pods", 200, "pods each configuration of the pod-start storm starts per round")
		merge      = flag.Bool("merge", false, "put the cases run into the existing -out file in place of those of the same names, keeping the others' figures, then regenerate -doc and -png")
		verbose    = flag.Bool("v", false, "progress on stderr")
		soakMode   = flag.String("soak", "", "run the soak instead (full or short; see soak.go)")
		soakImpls  = flag.String("soak-impls", implNriRs+","+implUpstream, "implementations the soak runs, in order")
		soakLC     = flag.Int("soak-lifecycles", 0, "lifecycles per implementation of the full soak (0: 100,000)")
		soakOut    = flag.String("soak-out", "soak.json", "the soak's results file")
		soakDoc    = flag.String("soak-doc", "", "regenerate the soak section of this Markdown file")
		soakPNG    = flag.String("soak-png", "", "write the soak's plot here (PNG)")
		soakMerge  = flag.String("soak-merge", "", "instead of soaking, combine these results files (comma-separated, written at the same time) into -soak-out")
	)
	flag.Parse()

	if *soakMerge != "" {
		r, err := mergeSoaks(strings.Split(*soakMerge, ","))
		if err == nil {
			err = writeSoak(r, *soakOut, *soakDoc, *soakPNG)
		}
		if err != nil {
			fatal(err)
		}
		return
	}

	if *soakMode != "" {
		var s soakSettings
		switch *soakMode {
		case "full":
			s = fullSoak(100000)
			if *soakLC > 0 {
				s = fullSoak(*soakLC)
			}
		case "short":
			s = shortSoak()
		default:
			fatal(fmt.Errorf("-soak: want full or short, not %q", *soakMode))
		}
		logrus.SetLevel(logrus.WarnLevel)
		tmp, err := os.MkdirTemp("", "nri-soak-")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(tmp)
		req := newRequests()
		h := &harness{bins: binaries{goPlugin: *goPlugin, rustPlugin: rustPluginOf(*rustPlugin, *bin), core: *bin + "/nri-bench-core"},
			req: req, tmp: tmp, verbose: *verbose}
		r := runSoak(h, s, strings.Split(*soakImpls, ","))
		if err := writeSoak(r, *soakOut, *soakDoc, *soakPNG); err != nil {
			fatal(err)
		}
		failed := false
		for _, v := range r.Verdicts {
			for _, p := range v.Problems {
				fmt.Fprintf(os.Stderr, "soak %s: %s\n", v.Impl, p)
			}
			failed = failed || (v.Impl == implNriRs && len(v.Problems) > 0)
		}
		if failed {
			os.RemoveAll(tmp)
			os.Exit(1)
		}
		return
	}

	if *reportOnly {
		if err := regenerate(*out, *doc, *png); err != nil {
			fatal(err)
		}
		return
	}
	s := settings{Rounds: *rounds, Ops: *ops, LifecycleOps: max(*ops/10, 5), SyncSizes: []int{100, 1000, 10000},
		Cases: *cases, Pinned: *pinned}
	if *smoke {
		s = smokeSettings(*cases, *pinned)
	}
	s.Configs = *configs
	if !*smoke {
		s.StormPods = *stormPods
	}
	s.LayoutPlugins = *layoutPlug
	s.Wasm = *wasmPlugin != ""
	res, err := run(s, binaries{goPlugin: *goPlugin, rustPlugin: rustPluginOf(*rustPlugin, *bin), core: *bin + "/nri-bench-core",
		wasmPlugin: *wasmPlugin},
		*verbose, !*noLayouts, !*noInstr && !*smoke)
	if err != nil {
		fatal(err)
	}
	if *merge {
		if res, err = mergeInto(*out, res); err != nil {
			fatal(err)
		}
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		fatal(err)
	}
	if err := os.WriteFile(*out, append(data, '\n'), 0o644); err != nil {
		fatal(err)
	}
	fmt.Fprintf(os.Stderr, "results: %s\n", *out)
	if err := regenerate(*out, *doc, *png); err != nil {
		fatal(err)
	}
}

// smokeSettings: a few iterations of everything, for make test.
func smokeSettings(cases, pinned string) settings {
	floorWarmups = 10
	return settings{Rounds: 2, Ops: 10, LifecycleOps: 3, SyncSizes: []int{100}, Smoke: true, Cases: cases, Pinned: pinned, LayoutPlugins: 4,
		StormPods: 12}
}

// mergeInto reads the results file and puts the cases of res into it, in
// place of those of the same names (or after the others), each with a
// note saying when and how it was measured; the rest of the file, its
// other cases' figures and the machine's description, stays as it was.
func mergeInto(file string, res *results) (*results, error) {
	old, err := readResults(file)
	if err != nil {
		return nil, err
	}
	for _, c := range res.Cases {
		c.Note = fmt.Sprintf("measured on %s (%d × %s, load %s → %s) by a later run of only the cases matching `%s`, merged into this file",
			res.Started.UTC().Format("2006-01-02 15:04 MST"), res.Machine.CPUs, res.Machine.Model, loadStr(c.LoadStart), loadStr(c.LoadEnd), res.Settings.Cases)
		replaced := false
		for i := range old.Cases {
			if old.Cases[i].Name == c.Name {
				old.Cases[i], replaced = c, true
			}
		}
		if !replaced {
			old.Cases = append(old.Cases, c)
		}
	}
	if res.Settings.StormPods > 0 {
		old.Settings.StormPods = res.Settings.StormPods
	}
	old.Targets = evaluateTargets(old)
	return old, nil
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "bench: %v\n", err)
	os.Exit(1)
}

// caseList is every case, floors first.
func caseList(s settings, req *requests) []*caseDef {
	reqBytes := proto.Size(req.create)
	floorOps := s.Ops * 2
	floors := []struct{ name, kind, title string }{
		{"floor-raw", "raw", "raw socket pair round trip (C), CreateContainer-sized request and response"},
		{"floor-raw-4MiB", "raw-4MiB", "raw socket pair round trip (C), 4 MiB request (a Synchronize chunk)"},
		{"floor-ttrpc", "ttrpc", "bare Go ttrpc round trip, CreateContainer request and response"},
		{"floor-ttrpc-mux", "ttrpc-mux", "Go ttrpc through upstream's NRI multiplexer, same payload"},
	}
	var out []*caseDef
	for _, f := range floors {
		c := &caseDef{ops: floorOps, configs: [][2]string{{"floor", f.kind}}, run: runFloor}
		c.Name, c.Title, c.Kind, c.RequestBytes, c.EventsPerOp, c.RoundTrips = f.name, f.title, "floor", reqBytes, 1, 1
		if f.kind == "raw-4MiB" {
			c.RequestBytes, c.ops = 4<<20, max(s.Ops/10, 5)
		}
		out = append(out, c)
	}
	event := func(name, title, kind, mode string, plugins, events, ops int, mk func(*caseDef) op) {
		c := &caseDef{ops: ops, warmup: max(ops/10, 3), configs: allConfigs, run: runEvents(mk), mk: mk}
		if plugins == 0 {
			c.configs = [][2]string{{implUpstream, stubNone}, {implNriRs, stubNone}}
		}
		c.Name, c.Title, c.Kind, c.Mode, c.Plugins = name, title, kind, mode, plugins
		c.EventsPerOp, c.RoundTrips, c.RequestBytes = events, events*plugins, reqBytes
		out = append(out, c)
	}
	for _, n := range []int{1, 4, 8} {
		event(fmt.Sprintf("create-typical-%d", n), fmt.Sprintf("CreateContainer, %d typical plugin(s)", n),
			"create", "typical", n, 1, s.Ops, createOp)
	}
	// The default validator as a builtin, behind one typical plugin.
	event("create-typical-1-validator", "CreateContainer, 1 typical plugin and the default validator",
		"create", "typical", 1, 1, s.Ops, createOp)
	out[len(out)-1].Validator = true
	// A pre-installed plugin, launched by the runtime over a socket pair.
	event("create-typical-1-launched", "CreateContainer, 1 typical plugin launched by the runtime",
		"create", "typical", 1, 1, s.Ops, createOp)
	out[len(out)-1].Launched = true
	// One plugin on a node, the commonest case, where the two runtimes
	// differ by less than this machine drifts between rounds run one after
	// the other (create-typical-1's p50 ratio, Rust stub: 0.86× in one full
	// run, 1.03× in the next, while the same event launched by the runtime
	// gave 0.84×). So it is also measured side by side (runPaired).
	event("create-typical-1-paired", "CreateContainer, 1 typical plugin, side by side",
		"create", "typical", 1, 1, s.Ops, createOp)
	out[len(out)-1].Paired = true
	// A WASM plugin, run by the runtime itself (upstream: wazero; nri-rs:
	// wasmtime), when its module was built.
	if s.Wasm {
		event("create-wasm-1", "CreateContainer, 1 WASM plugin (Go on upstream's pkg/api)", "create", "typical", 1, 1,
			s.Ops, createOp)
		out[len(out)-1].Launched = true
		out[len(out)-1].configs = [][2]string{{implUpstream, stubWasm}, {implNriRs, stubWasm}}
		// A module nri-rs's cache lacks runs on the wazero go/adaptation
		// lends the core: the same engine and module as upstream's, so
		// the two are measured side by side (runPaired).
		event("create-wasm-1-wazero", "CreateContainer, 1 WASM plugin on wazero in both (nri-rs: a module not in its cache), side by side",
			"create", "typical", 1, 1, s.Ops, createOp)
		out[len(out)-1].Launched = true
		out[len(out)-1].Paired = true
		out[len(out)-1].configs = [][2]string{{implUpstream, stubWasm}, {implNriRs, stubWasmLent}}
		// Starting with that plugin: upstream compiles its module at every
		// start; nri-rs at a node's first (wasm-first: its cache empty),
		// then loads what it kept.
		c := &caseDef{ops: 3, warmup: 1, run: runStart,
			configs: [][2]string{{implUpstream, stubWasm}, {implNriRs, stubWasmFirst}, {implNriRs, stubWasm}}}
		if s.Smoke {
			c.ops, c.warmup = 1, 0
		}
		c.Name, c.Title, c.Kind, c.Mode, c.Plugins = "start-wasm-1", "New and Start with 1 WASM plugin installed", "start", "typical", 1
		c.Launched, c.EventsPerOp = true, 1
		out = append(out, c)
	}
	// The largest reply a plugin may send (about 3.3 MB): the merge's cost.
	event("create-large-1", "CreateContainer, 1 plugin with a 3.3 MB reply", "create", "large", 1, 1,
		max(s.Ops/100, 5), createOp)
	// No plugin at all: what the runtime side itself costs per event.
	event("create-none", "CreateContainer, no plugin", "create", "noop", 0, 1, s.Ops, createOp)
	for _, n := range []int{1, 4, 8} {
		event(fmt.Sprintf("create-noop-%d", n), fmt.Sprintf("CreateContainer, %d no-op plugin(s)", n),
			"create", "noop", n, 1, s.Ops, createOp)
	}
	event("update-typical-4", "UpdateContainer, 4 plugins with solicited updates", "update", "typical", 4, 1, s.Ops, updateOp)
	event("lifecycle-typical-4", "pod + container lifecycle (13 events), 4 typical plugins", "lifecycle", "typical", 4, 13,
		s.LifecycleOps, lifecycleOp)
	// The pod-start storm (storm.go), with plugins that wait in each
	// CreateContainer and with plugins that compute as long instead.
	for _, v := range []struct {
		name, title, flag string
		wait, cpu         float64
	}{
		{"storm-wait-4", "pod-start storm, 4 typical Go-stub plugins each waiting 2 ms per CreateContainer", "-create-wait=2ms", 2000, 0},
		{"storm-cpu-4", "pod-start storm, 4 typical Go-stub plugins each computing 2 ms per CreateContainer", "-create-burn=2ms", 0, 2000},
	} {
		c := &caseDef{ops: max(s.StormPods, 1), warmup: stormCallers, pluginArgs: []string{v.flag},
			configs: [][2]string{{implUpstream, stubGo}, {implNriRs, stubGo}, {implNriRs, stubGoPods}}}
		if s.Smoke {
			c.warmup = 2
		}
		c.Name, c.Title, c.Kind, c.Mode, c.Plugins = v.name, v.title, "storm", "typical", 4
		c.EventsPerOp, c.RoundTrips, c.RequestBytes = stormEventsPerPod, stormEventsPerPod*4, reqBytes
		c.Callers, c.CreateWaitUs, c.CreateCPUUs = stormCallers, v.wait, v.cpu
		out = append(out, c)
	}
	for _, n := range s.SyncSizes {
		ops, warm := 10, 1
		switch {
		case n >= 10000:
			ops, warm = 2, 0
		case n >= 1000:
			ops = 5
		}
		if s.Smoke {
			ops = 2
		}
		c := &caseDef{ops: ops, warmup: warm, configs: allConfigs, run: runSync}
		c.Name = fmt.Sprintf("sync-%d", n)
		c.Title = fmt.Sprintf("registration + Synchronize of %d containers in %d pods", n, n/2)
		c.Kind, c.Plugins, c.Containers, c.EventsPerOp, c.RoundTrips = "sync", 1, n, 1, 1
		pods, ctrs := req.syncState(n)
		size := 0
		for _, p := range pods {
			size += proto.Size(p)
		}
		for _, ct := range ctrs {
			size += proto.Size(ct)
		}
		c.RequestBytes = size
		out = append(out, c)
	}
	return out
}

func run(s settings, bins binaries, verbose, withLayouts, withInstr bool) (*results, error) {
	// Both implementations log through upstream's pkg/log (logrus): keep
	// per-plugin info lines out of the measurement.
	logrus.SetLevel(logrus.WarnLevel)
	for _, b := range []string{bins.goPlugin, bins.rustPlugin} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("plugin binary: %w", err)
		}
	}
	tmp, err := os.MkdirTemp("", "nri-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	req := newRequests()
	req.createRspLen = proto.Size(echoResponse())
	h := &harness{bins: bins, req: req, tmp: tmp, verbose: verbose}
	res := &results{Machine: describeMachine(), Started: time.Now(), Settings: s}

	var filter, pinFilter *regexp.Regexp
	if s.Cases != "" {
		if filter, err = regexp.Compile(s.Cases); err != nil {
			return nil, err
		}
	}
	if s.Pinned != "" {
		if pinFilter, err = regexp.Compile(s.Pinned); err != nil {
			return nil, err
		}
	}
	defs := caseList(s, req)
	if s.Configs != "" {
		re, err := regexp.Compile(s.Configs)
		if err != nil {
			return nil, err
		}
		for _, c := range defs {
			var keep [][2]string
			for _, cf := range c.configs {
				if cf[0] == "floor" || re.MatchString(cf[0]+"/"+cf[1]) {
					keep = append(keep, cf)
				}
			}
			c.configs = keep
		}
	}
	for _, c := range defs {
		if filter != nil && !filter.MatchString(c.Name) {
			continue
		}
		res.Cases = append(res.Cases, h.runAny(c, s.Rounds))
	}
	if withLayouts && (filter == nil || filter.MatchString("layout")) {
		if _, err := os.Stat(bins.core); err == nil {
			res.Layouts = h.runLayouts(s)
		} else {
			fmt.Fprintf(os.Stderr, "bench: skipping the layout experiment: %v\n", err)
		}
	}
	if withInstr && (filter == nil || filter.MatchString("instructions")) {
		res.Instructions = h.runInstructions()
	}
	if pinFilter != nil {
		if err := pin([]int{0}); err != nil {
			return nil, err
		}
		for _, c := range defs {
			if pinFilter.MatchString(c.Name) && (filter == nil || filter.MatchString(c.Name)) {
				c.Pinned = true
				c.Name += "@pinned"
				c.Title += ", all processes pinned to CPU 0"
				res.Cases = append(res.Cases, h.runAny(c, s.Rounds))
			}
		}
		if err := pin(nil); err != nil {
			return nil, err
		}
	}
	res.Finished = time.Now()
	res.Machine.LoadEnd = loadAverage()
	res.Targets = evaluateTargets(res)
	return res, nil
}

// runAny runs c as its kind wants: paired (runPaired) or not (runCase).
func (h *harness) runAny(c *caseDef, rounds int) caseResult {
	if c.Kind == "storm" {
		return h.runStorm(c, rounds)
	}
	if c.Paired {
		return h.runPaired(c, rounds)
	}
	return h.runCase(c, rounds)
}

// emptyResults is a result without rounds for each of c's configurations.
func (c *caseDef) emptyResults() []configResult {
	configs := make([]configResult, len(c.configs))
	for i, cfg := range c.configs {
		configs[i] = configResult{Impl: cfg[0], Stub: cfg[1]}
	}
	return configs
}

// runCase runs every configuration of c for the given rounds, rotating
// which configuration goes first from round to round.
func (h *harness) runCase(c *caseDef, rounds int) caseResult {
	loadStart := loadAverage()
	configs := c.emptyResults()
	for r := 0; r < rounds; r++ {
		for j := range c.configs {
			i := (j + r) % len(c.configs)
			impl, stub := c.configs[i][0], c.configs[i][1]
			t0 := time.Now()
			rr, err := c.run(h, c, impl, stub, r)
			if err != nil {
				msg := fmt.Sprintf("round %d: %v", r, err)
				configs[i].Errors = append(configs[i].Errors, msg)
				fmt.Fprintf(os.Stderr, "bench: %s %s/%s: %s\n", c.Name, impl, stub, msg)
				continue
			}
			h.logf("%-22s %-8s %-9s round %d: p50 %9.1f µs  p99 %9.1f µs  cpu %8.1f µs/op  allocs %8.0f/op (%v)",
				c.Name, impl, stub, r, rr.P50us, rr.P99us, rr.CPUusPerOp, rr.AllocsPerOp, time.Since(t0).Round(time.Millisecond))
			configs[i].Rounds = append(configs[i].Rounds, rr)
		}
	}
	for i := range configs {
		summarize(&configs[i])
	}
	out := c.caseResult
	out.Configs = configs
	out.LoadStart, out.LoadEnd = loadStart, loadAverage()
	return out
}

// summarize sets a configuration's figures to the medians over its rounds.
func summarize(c *configResult) {
	var p50, p99, cpu, allocs, rss, idle, anon, busy, peak, pcpu []float64
	for _, r := range c.Rounds {
		p50 = append(p50, r.P50us)
		p99 = append(p99, r.P99us)
		cpu = append(cpu, r.CPUusPerOp)
		allocs = append(allocs, r.AllocsPerOp)
		rss = append(rss, float64(r.RSSGrowthKiB))
		for _, p := range r.Plugins {
			if p.IdleRSSKiB > 0 {
				idle = append(idle, float64(p.IdleRSSKiB))
				anon = append(anon, float64(p.IdleAnonKiB))
				busy = append(busy, float64(p.BusyRSSKiB))
				pcpu = append(pcpu, p.CPUusPerEvent)
			}
			if p.PeakRSSKiB > 0 {
				peak = append(peak, float64(p.PeakRSSKiB))
			}
		}
	}
	c.P50us, c.P99us, c.CPUusPerOp, c.AllocsPerOp, c.RSSGrowthKiB = median(p50), median(p99), median(cpu), median(allocs), median(rss)
	c.PluginIdleAnonKiB = median(anon)
	c.PluginIdleRSSKiB, c.PluginBusyRSSKiB, c.PluginPeakRSSKiB, c.PluginCPUusPerEvent = median(idle), median(busy), median(peak), median(pcpu)
}

func (h *harness) runLayouts(s settings) []layoutResult {
	ops, warm := s.Ops, max(s.Ops/10, 3)
	var out []layoutResult
	for _, stub := range []string{stubRust, stubGo} {
		res := make([]layoutResult, len(layouts))
		for i, l := range layouts {
			res[i] = layoutResult{Layout: l, Stub: stub, Plugins: s.LayoutPlugins}
		}
		for r := 0; r < s.Rounds; r++ {
			for j := range layouts {
				i := (j + r) % len(layouts)
				lr, err := h.runLayout(layouts[i], stub, s.LayoutPlugins, ops, warm)
				if err != nil {
					res[i].Errors = append(res[i].Errors, fmt.Sprintf("round %d: %v", r, err))
					fmt.Fprintf(os.Stderr, "bench: layout %s/%s: %v\n", layouts[i], stub, err)
					continue
				}
				h.logf("layout %-10s %-5s round %d: p50 %8.1f µs  p99 %8.1f µs  cpu %7.1f µs/op", lr.Layout, stub, r, lr.P50us, lr.P99us, lr.CPUusPerOp)
				res[i].Rounds = append(res[i].Rounds, lr)
			}
		}
		for i := range res {
			var p50, p99, cpu []float64
			for _, r := range res[i].Rounds {
				p50, p99, cpu = append(p50, r.P50us), append(p99, r.P99us), append(cpu, r.CPUusPerOp)
			}
			res[i].P50us, res[i].P99us, res[i].CPUusPerOp = median(p50), median(p99), median(cpu)
		}
		out = append(out, res...)
	}
	return out
}

// runInstructions counts the core's instructions per CreateContainer with
// one and four typical Rust-stub plugins, with one and the default
// validator, with one and the audit log (to a file), and with one WASM
// module on a lent engine; skipped (with a note) without valgrind.
func (h *harness) runInstructions() []instrCount {
	if _, err := exec.LookPath("valgrind"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: no valgrind, instructions not counted: %v\n", err)
		return nil
	}
	if _, err := os.Stat(h.bins.core); err != nil {
		fmt.Fprintf(os.Stderr, "bench: instructions not counted: %v\n", err)
		return nil
	}
	var out []instrCount
	for _, c := range []struct {
		plugins                int
		validator, audit, lent bool
	}{{1, false, false, false}, {4, false, false, false}, {1, true, false, false}, {1, false, true, false},
		{1, false, false, true}} {
		r := h.countInstructions(c.plugins, c.validator, c.audit, c.lent, 300)
		h.logf("instructions: %d plugin(s), validator %v, audit log %v, lent WASM %v: %.0f per event, %.0f per hop %s",
			r.Plugins, r.Validator, r.Audit, r.Lent, r.PerEvent, r.PerHop, r.Error)
		out = append(out, r)
	}
	return out
}
