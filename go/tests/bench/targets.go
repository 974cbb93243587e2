package main

import (
	"fmt"
	"strings"
)

// target is one of the benchmark's targets, evaluated on a run's results.
type target struct {
	What     string  `json:"what"`
	Measured string  `json:"measured"` // the figures behind the ratio
	Ratio    float64 `json:"ratio"`
	Limit    float64 `json:"limit"` // met when ratio <= limit (AtLeast: >=)
	// The ratio is a figure where more is better (throughput).
	AtLeast bool `json:"at_least,omitempty"`
	Met     bool `json:"met"`
	Missing bool `json:"missing,omitempty"` // a figure was not measured
	// What limits the figure, as measured (PERFORMANCE.md's hand-written
	// part has more); shown when the target is missed.
	Limits string `json:"limits,omitempty"`
	// Family names the targets that share one limit over many cases (every
	// event case's CPU, say), which the report gives one row; empty for a
	// target of its own.
	Family string `json:"-"`
}

func (r *results) find(caseName, impl, stub string) *configResult {
	for i := range r.Cases {
		if r.Cases[i].Name != caseName {
			continue
		}
		for j := range r.Cases[i].Configs {
			c := &r.Cases[i].Configs[j]
			if c.Impl == impl && c.Stub == stub && len(c.Rounds) > 0 {
				return c
			}
		}
	}
	return nil
}

func ratioTarget(what string, limit float64, num, den float64, unit string, ok bool) target {
	t := target{What: what, Limit: limit}
	if !ok || den == 0 {
		t.Missing = true
		t.Measured = "not measured"
		return t
	}
	t.Ratio = num / den
	t.Met = t.Ratio <= limit
	t.Measured = fmt.Sprintf("%s / %s", fmtVal(num, unit), fmtVal(den, unit))
	return t
}

// atLeastTarget is ratioTarget for a figure where more is better: met
// when num / den >= limit.
func atLeastTarget(what string, limit float64, num, den float64, unit string, ok bool) target {
	t := ratioTarget(what, limit, num, den, unit, ok)
	t.AtLeast = true
	t.Met = !t.Missing && t.Ratio >= limit
	return t
}

func fmtVal(v float64, unit string) string {
	switch unit {
	case "pods":
		return fmt.Sprintf("%.1f pods/s", v)
	case "us":
		return fmtUs(v)
	case "kib":
		return fmtKiB(v)
	}
	return fmt.Sprintf("%.1f", v)
}

// What limits the targets that a run misses, from the profiles in
// PERFORMANCE.md's hand-written part ("What is still missed, and why").
const (
	limitsBoundary = "with more than one plugin, an external validator or the audit log, the core decodes the request's " +
		"container (rust-protobuf: ~130,000 instructions, frees included; the pod stays encoded unless a validator, the " +
		"audit log or a builtin plugin reads it), encodes it again for each later plugin and encodes the answer, work " +
		"upstream does not have, besides the Go side's own marshalling, which is upstream's. What would close it: " +
		"patching the container's bytes between plugins instead of encoding it again, and a decoder that borrows the " +
		"request's strings"
	limitsOneHop = "the boundary: the request leaves from the Go caller's thread, but the plugin's answer wakes the " +
		"core's thread, which reads it and hands the result to the caller's: one thread wake-up upstream does not " +
		"have, dear on these VMs when the woken thread's CPU is idle (perf sched; the raw floor unpinned against " +
		"pinned). Go marshals the request and unmarshals the answer as upstream does; the core's own part is ~100,000 " +
		"instructions, over a third of them the check of the request's bytes, the rest the reply decoded and merged " +
		"and the answer encoded. What would close it: the caller reading the reply itself, and a cheaper check"
	limitsValidator = "the boundary, as for one plugin alone, and the default validator's share: ~36,000 instructions " +
		"(the pod and the container as the validator reads them taken from the request's bytes, the checks), where " +
		"upstream's builtin validator reads its Go objects"
	limitsWasm = "the module runs as Cranelift compiled it, with every bound checked by its code (no signal " +
		"handlers), where wazero's code relies on guard pages; the core's part is as for " +
		"one ttrpc plugin, plus a hop to tokio's blocking pool and back"
	limitsWasmFirstStart = "the module runs on wazero, which go/adaptation lends the core, compiled as upstream compiles " +
		"it at every start; the core's part is reading the file and asking the cache"
	limitsWasmLent = "the module runs on wazero, with the same calls, as under upstream; nri-rs adds the core's part " +
		"of the event on the caller's thread (the request checked, the reply decoded and merged, the answer encoded: " +
		"the lent row of the instruction counts, over 40 % of it the check) and a cgo callback into the engine"
	limitsLarge = "the 3.3 MB reply is decoded by the core and the merged reply encoded again and decoded by " +
		"go/adaptation, where upstream decodes once; decoding it into rust-protobuf's owned strings and maps is most " +
		"of the core's part"
	limitsHop = "rust-protobuf decoding, encoding again and freeing the container (the pod stays encoded), malloc/free " +
		"(over a quarter), the copies of each request and reply between the mux and the ttrpc client, and tokio's " +
		"wake-ups. What would close it: patching the container's bytes between plugins instead of encoding it again, " +
		"and a decoder that borrows the request's strings"
	limitsPluginCPU = "about 40 % of the Rust plugin's CPU is the kernel's (one wake-up, one read and one write per " +
		"event); of its ~214,000 instructions per event three quarters are rust-protobuf decoding the request into " +
		"owned strings, maps and boxes and freeing them, glibc's malloc and free a third of all. What would close it: " +
		"a decoder that borrows the request's strings, which the stub's handler API (owned messages) does not allow"
	limitsRSS = "VmRSS of the static plugin is mostly its own machine code (the kernel faults in 64 KiB around each " +
		"page touched, so nearly all of .text is resident); private memory (RssAnon) is below the limit"
	limitsStormOn = "each pod's events still run one after another, so a pod takes at least its plugins' waits in " +
		"its two CreateContainers (16 ms); with 8 callers the storm can at best overlap 8 pods"
	limitsStormOff = "with pod concurrency off, every event of every pod runs alone, as under upstream: the two " +
		"differ only by the runtime's own part of each event, small beside the plugins' waits"
	limitsSync = "the plugin decoding the state (57 MiB, in series; the same work under both) is most of the time: go/adaptation encodes each message while the plugin reads the one before, so of the runtime's own encoding only the first message's and the objects' sizes are not overlapped"
)

func evaluateTargets(r *results) []target {
	var out []target
	add := func(t target, limits string) {
		if !t.Met && !t.Missing {
			t.Limits = limits
		}
		out = append(out, t)
	}
	// Every event case with plugins, both stubs: CPU ≤ 0.7×, p50 ≤ 0.9×.
	for _, c := range r.Cases {
		// A paired case has rows of its own, below.
		if c.Kind == "floor" || c.Kind == "sync" || c.Kind == "start" || c.Kind == "storm" || c.Plugins == 0 || c.Pinned || c.Paired {
			continue
		}
		limits := limitsBoundary
		switch {
		case c.Mode == "large":
			limits = limitsLarge
		case strings.HasPrefix(c.Name, "create-wasm"):
			limits = limitsWasm
		case c.Plugins == 1 && !c.Validator:
			limits = limitsOneHop
		case c.Plugins == 1:
			limits = limitsValidator
		}
		for _, m := range []struct {
			what  string
			limit float64
			of    func(*configResult) float64
		}{{"runtime CPU per event", 0.7, cpuOf}, {"p50 latency", 0.9, p50Of}} {
			for _, stub := range []string{stubGo, stubRust, stubWasm} {
				up, rs := r.find(c.Name, implUpstream, stub), r.find(c.Name, implNriRs, stub)
				// A WASM case has no stub plugins, the others no WASM ones.
				if up == nil && rs == nil && (stub == stubWasm || r.find(c.Name, implUpstream, stubWasm) != nil) {
					continue
				}
				plugins := stub + "-stub plugins"
				if stub == stubWasm {
					plugins = "WASM plugins"
				}
				t := ratioTarget(fmt.Sprintf("%s, %s: %s, nri-rs / upstream", c.Title, plugins, m.what), m.limit,
					val(rs, m.of), val(up, m.of), "us", rs != nil && up != nil)
				t.Family = fmt.Sprintf("every event case with plugins, each stub: %s, nri-rs / upstream", m.what)
				add(t, limits)
			}
		}
	}
	up, rs := r.find("create-typical-4", implUpstream, stubGo), r.find("create-typical-4", implNriRs, stubGo)
	add(ratioTarget("CreateContainer, 4 typical Go-stub plugins: runtime CPU per event, nri-rs / upstream", 0.35,
		val(rs, cpuOf), val(up, cpuOf), "us", rs != nil && up != nil), limitsBoundary)
	hop := target{What: "the core's own instructions per plugin hop (callgrind, C ABI path, 4 typical Rust-stub plugins)", Limit: 60000}
	hop.Missing, hop.Measured = true, "not measured (no valgrind)"
	for _, ic := range r.Instructions {
		if ic.Plugins == 4 && !ic.Validator && ic.Error == "" {
			hop.Missing, hop.Ratio, hop.Met = false, ic.PerHop, ic.PerHop <= hop.Limit
			hop.Measured = fmt.Sprintf("%.0f per event / 4", ic.PerEvent)
		}
	}
	add(hop, limitsHop)
	gp, rp := r.find("create-typical-4", implNriRs, stubGo), r.find("create-typical-4", implNriRs, stubRust)
	add(ratioTarget("plugin CPU per event (CreateContainer, typical), Rust stub / Go stub", 0.3,
		val(rp, pcpuOf), val(gp, pcpuOf), "us", rp != nil && gp != nil), limitsPluginCPU)
	add(ratioTarget("plugin idle RSS (VmRSS, after registration), Rust stub / Go stub", 0.35,
		val(rp, idleOf), val(gp, idleOf), "kib", rp != nil && gp != nil), limitsRSS)
	add(ratioTarget("(not the target's measure: private memory only, RssAnon)", 0.35,
		val(rp, anonOf), val(gp, anonOf), "kib", rp != nil && gp != nil && val(gp, anonOf) > 0), "")
	su, sr := r.find("sync-10000", implUpstream, stubGo), r.find("sync-10000", implNriRs, stubGo)
	add(ratioTarget("Synchronize 10,000 containers (Go-stub plugin): time, nri-rs / upstream", 0.5,
		val(sr, p50Of), val(su, p50Of), "us", sr != nil && su != nil), limitsSync)
	add(ratioTarget("Synchronize 10,000 containers (Go-stub plugin): runtime RSS growth, nri-rs / upstream", 0.2,
		val(sr, rssOf), val(su, rssOf), "kib", sr != nil && su != nil), limitsSync)
	// One plugin, measured side by side: no worse than upstream.
	for _, stub := range []string{stubGo, stubRust} {
		up, rs := r.find("create-typical-1-paired", implUpstream, stub), r.find("create-typical-1-paired", implNriRs, stub)
		if up == nil && rs == nil {
			continue
		}
		for _, m := range eventMeasures {
			t := ratioTarget(fmt.Sprintf("CreateContainer, 1 typical %s-stub plugin, side by side: %s, nri-rs / upstream", stub, m.what), 1,
				val(rs, m.of), val(up, m.of), "us", rs != nil && up != nil)
			t.Family = fmt.Sprintf("CreateContainer, 1 typical plugin, side by side, each stub: %s, nri-rs / upstream", m.what)
			add(t, limitsOneHop)
		}
	}
	// A module nri-rs's cache lacks runs on the wazero engine go/adaptation
	// lends the core: no worse than upstream, which runs it on wazero too.
	if rs := r.find("create-wasm-1-wazero", implNriRs, stubWasmLent); rs != nil {
		up := r.find("create-wasm-1-wazero", implUpstream, stubWasm)
		for _, m := range eventMeasures {
			add(ratioTarget(fmt.Sprintf("CreateContainer, 1 WASM plugin not in nri-rs's cache (on wazero): %s, nri-rs / upstream", m.what), 1,
				val(rs, m.of), val(up, m.of), "us", up != nil), limitsWasmLent)
		}
	}
	// The pod-start storm with waiting plugins: with the four
	// plugins opted in to pod concurrency, three times the pods per
	// second and at most 0.4× the p99 of upstream; without it, no worse.
	if r.caseByName("storm-wait-4") != nil {
		up := r.find("storm-wait-4", implUpstream, stubGo)
		for _, cfg := range []struct {
			stub, what string
			pods, p99  float64
			limits     string
		}{
			{stubGoPods, "pod concurrency on, the 4 plugins opted in", 3, 0.4, limitsStormOn},
			{stubGo, "pod concurrency off", 1, 1, limitsStormOff},
		} {
			rs := r.find("storm-wait-4", implNriRs, cfg.stub)
			ok := rs != nil && up != nil
			what := "Pod-start storm, 4 Go-stub plugins waiting 2 ms per CreateContainer, " + cfg.what
			add(atLeastTarget(what+": pods per second, nri-rs / upstream", cfg.pods,
				val(rs, podsOf), val(up, podsOf), "pods", ok), cfg.limits)
			add(ratioTarget(what+": p99 pod-start latency, nri-rs / upstream", cfg.p99,
				val(rs, p99Of), val(up, p99Of), "us", ok), cfg.limits)
		}
	}
	if r.caseByName("start-wasm-1") != nil {
		up := r.find("start-wasm-1", implUpstream, stubWasm)
		for _, cfg := range []struct{ stub, when, limits string }{
			{stubWasmFirst, "a node's first start (nri-rs's cache empty: on wazero)", limitsWasmFirstStart},
			{stubWasm, "later starts (nri-rs loads the module compiled)", ""}} {
			rs := r.find("start-wasm-1", implNriRs, cfg.stub)
			add(ratioTarget(fmt.Sprintf("Start with 1 WASM plugin, %s: time, nri-rs / upstream", cfg.when), 1,
				val(rs, p50Of), val(up, p50Of), "us", rs != nil && up != nil), cfg.limits)
			add(ratioTarget(fmt.Sprintf("Start with 1 WASM plugin, %s: peak RSS growth, nri-rs / upstream", cfg.when), 1,
				val(rs, rssOf), val(up, rssOf), "kib", rs != nil && up != nil), cfg.limits)
		}
	}
	return out
}

// eventMeasures are the two figures of an event case that the rows "no
// worse than upstream" compare.
var eventMeasures = []struct {
	what string
	of   func(*configResult) float64
}{{"runtime CPU per event", cpuOf}, {"p50 latency", p50Of}}

func val(c *configResult, f func(*configResult) float64) float64 {
	if c == nil {
		return 0
	}
	return f(c)
}

func cpuOf(c *configResult) float64  { return c.CPUusPerOp }
func p50Of(c *configResult) float64  { return c.P50us }
func p99Of(c *configResult) float64  { return c.P99us }
func podsOf(c *configResult) float64 { return c.PodsPerS }
func rssOf(c *configResult) float64  { return c.RSSGrowthKiB }
func idleOf(c *configResult) float64 { return c.PluginIdleRSSKiB }
func anonOf(c *configResult) float64 { return c.PluginIdleAnonKiB }
func pcpuOf(c *configResult) float64 { return c.PluginCPUusPerEvent }
