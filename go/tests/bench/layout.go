package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// The runtime-layout experiment: nri-bench-core (tests/tools) runs the Rust
// core's CreateContainer through 4 typical plugins with its plugin I/O on
// each tokio layout in turn; see that file for the layouts.

var layouts = []string{"dedicated", "wire", "caller", "multi1", "multi2"}

type layoutRound struct {
	Layout     string  `json:"layout"`
	Ops        int     `json:"ops"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	MeanUs     float64 `json:"mean_us"`
	CPUusPerOp float64 `json:"cpu_us_per_op"`
	// The lent layout's: the stand-in module's time per event, and the
	// core's p50 before the module's call and after it.
	ModuleUsPerOp float64 `json:"module_us_per_op,omitempty"`
	CoreBeforeP50 float64 `json:"core_before_p50_us,omitempty"`
	CoreAfterP50  float64 `json:"core_after_p50_us,omitempty"`
}

type layoutResult struct {
	Layout     string        `json:"layout"`
	Stub       string        `json:"stub"`
	Plugins    int           `json:"plugins"`
	P50us      float64       `json:"p50_us"`
	P99us      float64       `json:"p99_us"`
	CPUusPerOp float64       `json:"cpu_us_per_op"`
	Rounds     []layoutRound `json:"rounds"`
	Errors     []string      `json:"errors,omitempty"`
}

// coreRun is one run of nri-bench-core: a layout, its plugins, and
// optionally the default validator and a command wrapping the process (a
// profiler).
type coreRun struct {
	layout, stub         string
	plugins, ops, warmup int
	validator            bool
	// Whether the core keeps an audit log (a file in the run's directory).
	audit   bool
	wrapper []string
	// More flags for nri-bench-core.
	extra []string
}

func (h *harness) runLayout(layout, stub string, plugins, ops, warmup int) (layoutRound, error) {
	// For profiling the core alone, e.g.
	// NRI_BENCH_CORE_WRAPPER="valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p".
	return h.runCore(coreRun{layout: layout, stub: stub, plugins: plugins, ops: ops, warmup: warmup,
		wrapper: strings.Fields(os.Getenv("NRI_BENCH_CORE_WRAPPER"))})
}

func (h *harness) runCore(run coreRun) (layoutRound, error) {
	layout, stub, plugins, ops, warmup := run.layout, run.stub, run.plugins, run.ops, run.warmup
	dir, err := h.newDir()
	if err != nil {
		return layoutRound{}, err
	}
	reqFile := filepath.Join(dir, "create.pb")
	data, err := proto.Marshal(h.req.create)
	if err != nil {
		return layoutRound{}, err
	}
	if err := os.WriteFile(reqFile, data, 0o644); err != nil {
		return layoutRound{}, err
	}
	socket := filepath.Join(dir, "nri.sock")
	args := []string{h.bins.core, "-layout", layout, "-socket", socket, "-plugins", strconv.Itoa(plugins),
		"-request", reqFile, "-ops", strconv.Itoa(ops), "-warmup", strconv.Itoa(warmup)}
	if run.validator {
		args = append(args, "-validator", "1")
	}
	if run.audit {
		args = append(args, "-audit", filepath.Join(dir, "audit.jsonl"))
	}
	args = append(args, run.extra...)
	if len(run.wrapper) > 0 {
		args = append(append([]string{}, run.wrapper...), args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	stderr := &strings.Builder{}
	cmd.Stderr = &lockedWriter{w: stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return layoutRound{}, err
	}
	if err := cmd.Start(); err != nil {
		return layoutRound{}, fmt.Errorf("start nri-bench-core: %w", err)
	}
	lines := bufio.NewReader(out)
	exited := make(chan struct{})
	var readDone sync.Once
	startDrain := func() {
		readDone.Do(func() {
			go func() {
				_, _ = io.Copy(io.Discard, lines)
				_ = cmd.Wait()
				close(exited)
			}()
		})
	}
	defer func() {
		startDrain()
		// It exits by itself after its result line (a profiler wrapping it
		// writes its output then); kill it only if it does not.
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	expect := func(want string) error {
		l, err := lines.ReadString('\n')
		if strings.TrimSpace(l) != want {
			return fmt.Errorf("nri-bench-core: want %q, got %q (%v): %s", want, l, err, stderr)
		}
		return nil
	}
	if err := expect("listening"); err != nil {
		return layoutRound{}, err
	}
	var ps []*plugin
	defer func() {
		for _, p := range ps {
			p.kill()
		}
	}()
	for k := 0; k < plugins; k++ {
		p, err := startPlugin(h.bins, stub, socket, "typical", k, false)
		if err != nil {
			return layoutRound{}, err
		}
		ps = append(ps, p)
	}
	if err := expect("ready"); err != nil {
		return layoutRound{}, err
	}
	type result struct {
		l   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := lines.ReadString('\n')
		done <- result{l, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Minute):
		_ = cmd.Process.Kill()
		<-done // the reader is done with lines before they are drained
		return layoutRound{}, fmt.Errorf("nri-bench-core: no result")
	}
	var lr layoutRound
	if err := json.Unmarshal([]byte(r.l), &lr); err != nil {
		return layoutRound{}, fmt.Errorf("nri-bench-core: %q: %v: %s", r.l, err, stderr)
	}
	return lr, nil
}

// instrCount is the core's instructions per CreateContainer (callgrind),
// through the C ABI's path (nri-bench-core's wire layout): decoding the
// request, the plugin hops, merging, encoding the response. Counts do not
// depend on the machine's load, unlike every time in this report.
type instrCount struct {
	Plugins   int  `json:"plugins"`
	Validator bool `json:"default_validator,omitempty"`
	Audit     bool `json:"audit_log,omitempty"`
	// The one plugin is a WASM module on an engine lent to the core
	// (nri-bench-core's lent layout, its stand-in engine): the count is the
	// core's part of the event alone.
	Lent     bool    `json:"lent_wasm,omitempty"`
	PerEvent float64 `json:"instructions_per_event"`
	PerHop   float64 `json:"instructions_per_hop"`
	Error    string  `json:"error,omitempty"`
}

// countInstructions runs nri-bench-core under callgrind twice, with n and
// 2n events, so that start-up and shutdown cancel out of the difference.
// With lent, the one plugin is a module on a lent engine (plugins is 1).
func (h *harness) countInstructions(plugins int, validator, audit, lent bool, n int) instrCount {
	out := instrCount{Plugins: plugins, Validator: validator, Audit: audit, Lent: lent}
	layout, socketPlugins := "wire", plugins
	if lent {
		layout, socketPlugins = "lent", 0
	}
	total := func(ops int) (float64, error) {
		dir, err := h.newDir()
		if err != nil {
			return 0, err
		}
		file := filepath.Join(dir, "callgrind.out")
		wrapper := []string{"valgrind", "--tool=callgrind", "--callgrind-out-file=" + file}
		if _, err := h.runCore(coreRun{layout: layout, stub: stubRust, plugins: socketPlugins, ops: ops, warmup: 0,
			validator: validator, audit: audit, wrapper: wrapper}); err != nil {
			return 0, err
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return 0, err
		}
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "summary: "); ok {
				return strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
		return 0, fmt.Errorf("%s: no summary line", file)
	}
	small, err := total(n)
	if err == nil {
		var large float64
		if large, err = total(2 * n); err == nil {
			out.PerEvent = (large - small) / float64(n)
			out.PerHop = out.PerEvent / float64(plugins)
			return out
		}
	}
	out.Error = err.Error()
	return out
}
