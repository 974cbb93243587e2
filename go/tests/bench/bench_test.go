package main

import (
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The smoke run of `make test`: every case, floor, configuration and
// layout for a few iterations, then the report and the plot from its
// results. It checks that everything ran and was reported, never timings.

func TestMain(m *testing.M) {
	runChild() // the floors' peers re-execute this test binary
	os.Exit(m.Run())
}

// rustBin is where the Rust bench binaries are: NRI_BENCH_BIN, else the
// debug build under CARGO_TARGET_DIR or the repository's target/.
func rustBin() string {
	if d := os.Getenv("NRI_BENCH_BIN"); d != "" {
		return d
	}
	if d := os.Getenv("CARGO_TARGET_DIR"); d != "" {
		return filepath.Join(d, "debug")
	}
	return "../../../target/debug"
}

func buildGoPlugin(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "goplugin")
	cmd := exec.Command("go", "build", "-o", out, "./goplugin")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build goplugin: %v\n%s", err, b)
	}
	return out
}

func buildWasmPlugin(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plugin.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "../wasm/plugin")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the WASM plugin: %v\n%s", err, b)
	}
	return out
}

// The WASM case, a few iterations: its own test, since the race detector
// (which the rest of make test's Go run uses) makes upstream's WASM
// compiler take minutes per module.
func TestSmokeWasm(t *testing.T) {
	if underRace {
		t.Skip("upstream's WASM compiler under -race: make test runs this without it")
	}
	bin := rustBin()
	bins := binaries{goPlugin: buildGoPlugin(t), rustPlugin: filepath.Join(bin, "nri-bench-plugin"),
		core: filepath.Join(bin, "nri-bench-core"), wasmPlugin: buildWasmPlugin(t)}
	s := smokeSettings(`^(create|start)-wasm-1(-wazero)?$`, "")
	s.Wasm = true
	res, err := run(s, bins, testing.Verbose(), false, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"create-wasm-1":        {stubWasm, stubWasm},
		"create-wasm-1-wazero": {stubWasm, stubWasmLent},
		"start-wasm-1":         {stubWasm, stubWasmFirst, stubWasm},
	}
	if len(res.Cases) != len(want) {
		t.Fatalf("want the cases %v: %+v", want, res.Cases)
	}
	for _, c := range res.Cases {
		stubs := want[c.Name]
		if len(c.Configs) != len(stubs) {
			t.Fatalf("%s: %d configurations, want %d", c.Name, len(c.Configs), len(stubs))
		}
		for i, cf := range c.Configs {
			if cf.Stub != stubs[i] || len(cf.Errors) > 0 || len(cf.Rounds) != 2 || cf.P50us <= 0 {
				t.Errorf("%s %s/%s: %d rounds, p50 %v, errors %v", c.Name, cf.Impl, cf.Stub, len(cf.Rounds), cf.P50us, cf.Errors)
			}
		}
	}
	// Their rows in the target table, measured: CPU and p50 of the event
	// with the module in the cache and on the lent engine, time and memory
	// of either start; no row for the stubs.
	rows := 0
	for _, tg := range res.Targets {
		if strings.Contains(tg.What, "WASM") {
			rows++
			if tg.Missing {
				t.Errorf("target %q not measured", tg.What)
			}
		}
		if strings.Contains(tg.What, "1 WASM plugin") && strings.Contains(tg.What, "-stub") {
			t.Errorf("a stub row for the WASM case: %q", tg.What)
		}
	}
	if rows != 8 {
		t.Errorf("%d WASM target rows, want 8", rows)
	}
	// In the report's case table, nri-rs's configurations on wazero are
	// given their ratios to upstream's one WASM configuration.
	for _, line := range strings.Split(markdown(res, "r.json", ""), "\n") {
		if !strings.Contains(line, "| wasm (") {
			continue
		}
		if cells := strings.Split(line, "|"); len(cells) < 9 || !strings.HasSuffix(strings.TrimSpace(cells[3]), "×)") {
			t.Errorf("no p50 ratio: %s", line)
		}
	}
}

// The lent layout, which make bench's instruction counts run: the core
// with a WASM plugin on a stand-in lent engine, its part of each event
// timed on both sides of the module's call.
func TestLentLayout(t *testing.T) {
	core := filepath.Join(rustBin(), "nri-bench-core")
	if _, err := os.Stat(core); err != nil {
		t.Fatalf("%v (build the workspace first: cargo build --workspace, or set NRI_BENCH_BIN)", err)
	}
	h := &harness{bins: binaries{core: core}, req: newRequests(), tmp: t.TempDir(), verbose: testing.Verbose()}
	for _, thrash := range []string{"0", "64"} {
		lr, err := h.runCore(coreRun{layout: "lent", ops: 50, warmup: 5, extra: []string{"-thrash", thrash}})
		if err != nil {
			t.Fatalf("thrash %s: %v", thrash, err)
		}
		if lr.Ops != 50 || lr.P50us <= 0 || lr.CoreBeforeP50 <= 0 || lr.CoreAfterP50 <= 0 ||
			lr.CoreBeforeP50+lr.CoreAfterP50 > lr.P99us {
			t.Errorf("thrash %s: %+v", thrash, lr)
		}
		// Walking memory is the stand-in module's time, not the core's.
		if thrash != "0" && lr.ModuleUsPerOp <= 0 {
			t.Errorf("thrash %s: no time in the module: %+v", thrash, lr)
		}
	}
}

func TestSmoke(t *testing.T) {
	bin := rustBin()
	for _, b := range []string{"nri-bench-plugin", "nri-bench-core"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%v (build the workspace first: cargo build --workspace, or set NRI_BENCH_BIN)", err)
		}
	}
	bins := binaries{goPlugin: buildGoPlugin(t), rustPlugin: filepath.Join(bin, "nri-bench-plugin"), core: filepath.Join(bin, "nri-bench-core")}
	res, err := run(smokeSettings("", `^(floor-raw|create-typical-1)$`), bins, testing.Verbose(), true, false)
	if err != nil {
		t.Fatal(err)
	}

	want := map[string]int{"floor-raw": 1, "floor-raw-4MiB": 1, "floor-ttrpc": 1, "floor-ttrpc-mux": 1,
		"create-none": 2, "create-typical-1": 4, "create-typical-4": 4, "create-typical-8": 4, "create-noop-1": 4, "create-noop-4": 4,
		"create-noop-8": 4, "update-typical-4": 4, "lifecycle-typical-4": 4, "sync-100": 4,
		"create-typical-1-validator": 4, "create-large-1": 4, "create-typical-1-launched": 4, "create-typical-1-paired": 4,
		"floor-raw@pinned": 1, "create-typical-1@pinned": 4, "storm-wait-4": 3, "storm-cpu-4": 3}
	for _, c := range res.Cases {
		n, ok := want[c.Name]
		if !ok {
			t.Errorf("unexpected case %s", c.Name)
			continue
		}
		delete(want, c.Name)
		if len(c.Configs) != n {
			t.Errorf("%s: %d configurations, want %d", c.Name, len(c.Configs), n)
		}
		for _, cf := range c.Configs {
			if len(cf.Errors) > 0 || len(cf.Rounds) != 2 {
				t.Errorf("%s %s/%s: %d rounds, errors %v", c.Name, cf.Impl, cf.Stub, len(cf.Rounds), cf.Errors)
			}
			if cf.P50us <= 0 || cf.P99us < cf.P50us {
				t.Errorf("%s %s/%s: p50 %v p99 %v", c.Name, cf.Impl, cf.Stub, cf.P50us, cf.P99us)
			}
			if c.Kind != "floor" && c.Kind != "sync" && c.Kind != "storm" && c.Plugins > 0 && !c.Launched && (cf.PluginIdleRSSKiB <= 0 || cf.PluginCPUusPerEvent <= 0) {
				t.Errorf("%s %s/%s: no plugin footprint", c.Name, cf.Impl, cf.Stub)
			}
			// The storm's: every round started its pods, each plugin
			// spending its CPU in them (the CPU-bound ones 2 ms per
			// CreateContainer, two per pod).
			if c.Kind == "storm" {
				if cf.PodsPerS <= 0 || cf.PluginCPUusPerPod <= 0 || cf.Rounds[0].Ops != 12 {
					t.Errorf("%s %s/%s: %v pods/s, plugin CPU %v µs/pod, %d pods", c.Name, cf.Impl, cf.Stub,
						cf.PodsPerS, cf.PluginCPUusPerPod, cf.Rounds[0].Ops)
				}
				if c.Name == "storm-cpu-4" && cf.PluginCPUusPerPod < 4000 {
					t.Errorf("%s %s/%s: plugin CPU %v µs/pod, want at least 2 × 2 ms", c.Name, cf.Impl, cf.Stub, cf.PluginCPUusPerPod)
				}
			}
		}
	}
	for name := range want {
		t.Errorf("case %s missing", name)
	}
	if len(res.Layouts) != 2*len(layouts) {
		t.Errorf("%d layout results, want %d", len(res.Layouts), 2*len(layouts))
	}
	for _, l := range res.Layouts {
		if len(l.Errors) > 0 || len(l.Rounds) != 2 || l.P50us <= 0 {
			t.Errorf("layout %s/%s: %d rounds, errors %v", l.Layout, l.Stub, len(l.Rounds), l.Errors)
		}
	}
	measured := 0
	for _, tg := range res.Targets {
		if !tg.Missing {
			measured++
		}
	}
	// The smoke run has no 10,000-container sync and counts no instructions.
	if measured != len(res.Targets)-3 {
		t.Errorf("targets evaluated: %d of %d: %+v", measured, len(res.Targets), res.Targets)
	}

	// The one-plugin event side by side has a row of its own per stub and
	// measure.
	side := 0
	for _, tg := range res.Targets {
		if strings.HasPrefix(tg.What, "CreateContainer, 1 typical") && strings.Contains(tg.What, "side by side") && !tg.Missing {
			side++
		}
	}
	if side != 4 {
		t.Errorf("%d measured target rows for one plugin side by side, want 4", side)
	}
	// The storm's rows: pods per second and p99, concurrency on and off.
	storm := 0
	for _, tg := range res.Targets {
		if strings.HasPrefix(tg.What, "Pod-start storm") && !tg.Missing {
			storm++
		}
	}
	if storm != 4 {
		t.Errorf("%d measured target rows for the pod-start storm, want 4", storm)
	}

	// The report and the plot, regenerated from the results file, keeping
	// hand-written text below the end marker.
	dir := t.TempDir()
	resultsFile, doc, pngFile := filepath.Join(dir, "r.json"), filepath.Join(dir, "PERF.md"), filepath.Join(dir, "p.png")
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(resultsFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(doc, []byte("old\n"+endMarker+"\nhand-written analysis\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := regenerate(resultsFile, doc, pngFile); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(doc)
	for _, s := range []string{"## Targets", "CreateContainer, 4 typical plugin(s)", "## Plugin footprint", "## Runtime layout",
		"## Pod-start storm", "| storm-wait-4 | nri-rs, pod concurrency on |", "≥ 3×",
		"Smoke run", "p.png", endMarker + "\nhand-written analysis\n"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("report lacks %q", s)
		}
	}
	// A case run side by side gives no RSS growth of its own.
	for _, line := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(line, "| CreateContainer, 1 typical plugin, side by side |") && strings.Contains(line, "KiB") {
			t.Errorf("an RSS growth for a side-by-side configuration: %s", line)
		}
	}
	if strings.Contains(string(md), "old\n") {
		t.Error("report kept the old generated part")
	}
	f, err := os.Open(pngFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("plot: %v", err)
	}
}

// -merge: the cases of a partial run replace those of the same names in
// the results file, the others' figures stay, and the new ones say so.
func TestMergeInto(t *testing.T) {
	file := filepath.Join(t.TempDir(), "r.json")
	old := results{Settings: settings{Rounds: 4}, Cases: []caseResult{{Name: "a", Title: "old a"}, {Name: "b", Title: "old b"}}}
	data, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	part := &results{Settings: settings{Cases: "^[bc]$", StormPods: 7}, Cases: []caseResult{{Name: "b", Title: "new b"}, {Name: "c", Title: "new c"}}}
	got, err := mergeInto(file, part)
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, c := range got.Cases {
		titles = append(titles, c.Title)
		if (c.Name == "a") == (c.Note != "") {
			t.Errorf("case %s: note %q", c.Name, c.Note)
		}
	}
	if strings.Join(titles, ",") != "old a,new b,new c" || got.Settings.Rounds != 4 || got.Settings.StormPods != 7 {
		t.Errorf("merged: %v, settings %+v", titles, got.Settings)
	}
}
