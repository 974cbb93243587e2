package main

import "fmt"

// target is one of the benchmark's targets, evaluated on a run's results.
type target struct {
	What     string  `json:"what"`
	Measured string  `json:"measured"` // the figures behind the ratio
	Ratio    float64 `json:"ratio"`
	Limit    float64 `json:"limit"` // met when ratio <= limit
	Met      bool    `json:"met"`
	Missing  bool    `json:"missing,omitempty"` // a figure was not measured
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

func fmtVal(v float64, unit string) string {
	switch unit {
	case "us":
		return fmtUs(v)
	case "kib":
		return fmtKiB(v)
	}
	return fmt.Sprintf("%.1f", v)
}

func evaluateTargets(r *results) []target {
	var out []target
	up, rs := r.find("create-typical-4", implUpstream, stubGo), r.find("create-typical-4", implNriRs, stubGo)
	out = append(out,
		ratioTarget("CreateContainer, 4 typical Go-stub plugins: runtime CPU per event, nri-rs / upstream", 0.2,
			val(rs, cpuOf), val(up, cpuOf), "us", rs != nil && up != nil),
		ratioTarget("CreateContainer, 4 typical Go-stub plugins: p50 latency, nri-rs / upstream", 0.6,
			val(rs, p50Of), val(up, p50Of), "us", rs != nil && up != nil))
	rr := r.find("create-typical-4", implNriRs, stubRust)
	out = append(out, ratioTarget("CreateContainer, 4 typical plugins: p50 of nri-rs with Rust-stub plugins / upstream with Go-stub plugins", 0.15,
		val(rr, p50Of), val(up, p50Of), "us", rr != nil && up != nil))
	noop, floor := r.find("create-noop-4", implNriRs, stubRust), r.find("floor-raw", "floor", "raw")
	out = append(out, ratioTarget("CreateContainer, 4 no-op Rust-stub plugins on nri-rs: p50 / (4 × raw socket-pair round trip)", 5,
		val(noop, p50Of), 4*val(floor, p50Of), "us", noop != nil && floor != nil))
	su, sr := r.find("sync-10000", implUpstream, stubGo), r.find("sync-10000", implNriRs, stubGo)
	out = append(out,
		ratioTarget("Synchronize 10,000 containers (Go-stub plugin): time, nri-rs / upstream", 0.5,
			val(sr, p50Of), val(su, p50Of), "us", sr != nil && su != nil),
		ratioTarget("Synchronize 10,000 containers (Go-stub plugin): runtime RSS growth, nri-rs / upstream", 0.2,
			val(sr, rssOf), val(su, rssOf), "kib", sr != nil && su != nil))
	gp, rp := r.find("create-typical-4", implNriRs, stubGo), r.find("create-typical-4", implNriRs, stubRust)
	out = append(out,
		ratioTarget("Plugin idle RSS (after registration), Rust stub / Go stub", 0.25,
			val(rp, idleOf), val(gp, idleOf), "kib", rp != nil && gp != nil),
		ratioTarget("(same, private memory only: RssAnon, without the shared pages of libc and the executable; not the target's measure)", 0.25,
			val(rp, anonOf), val(gp, anonOf), "kib", rp != nil && gp != nil && val(gp, anonOf) > 0),
		ratioTarget("Plugin CPU per event (CreateContainer, typical), Rust stub / Go stub", 0.2,
			val(rp, pcpuOf), val(gp, pcpuOf), "us", rp != nil && gp != nil))
	return out
}

func val(c *configResult, f func(*configResult) float64) float64 {
	if c == nil {
		return 0
	}
	return f(c)
}

func cpuOf(c *configResult) float64  { return c.CPUusPerOp }
func p50Of(c *configResult) float64  { return c.P50us }
func rssOf(c *configResult) float64  { return c.RSSGrowthKiB }
func idleOf(c *configResult) float64 { return c.PluginIdleRSSKiB }
func anonOf(c *configResult) float64 { return c.PluginIdleAnonKiB }
func pcpuOf(c *configResult) float64 { return c.PluginCPUusPerEvent }
