// Package wasm runs WASM plugins (./plugin, built at test time on upstream's
// pkg/api) under upstream's runtime adaptation and under nri-rs's
// go/adaptation, and requires the two to agree: the same events seen by the
// plugin, the same adjustments and updates, and the same outcome of every
// request when a plugin errs, panics, traps, loops or exhausts its memory.
package wasm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	upstream "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	nrirs "github.com/nri-rs/nri-rs/go/adaptation"
	"github.com/nri-rs/nri-rs/go/tests/internal/runtimeapi"
)

type runtimeAPI = runtimeapi.API

const (
	implUpstream = "upstream"
	implNriRs    = "nri-rs"
)

var impls = []string{implUpstream, implNriRs}

// requestTimeout bounds every plugin request in these tests, so that the
// looping plugin costs a second, not upstream's default of two.
const requestTimeout = time.Second

func TestMain(m *testing.M) {
	if underRace {
		fmt.Println("go/tests/wasm: skipped under -race (make test runs it without)")
		os.Exit(0)
	}
	upstream.SetPluginRequestTimeout(requestTimeout)
	nrirs.SetPluginRequestTimeout(requestTimeout)
	nrilog.Set(recorder)
	var err error
	if scratch, err = os.MkdirTemp("", "nri-wasm-test-"); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(scratch)
	os.Exit(code)
}

// scratch holds what the test binary makes: the plugin module, and
// nri-rs's compiled modules (so that its nodes compile the module once,
// as a node's runtime would, and nothing is written outside the test).
var scratch string

var (
	buildOnce sync.Once
	module    string
	buildErr  error
)

// pluginModule builds ./plugin for wasip1 once per test binary.
func pluginModule(t *testing.T) []byte {
	t.Helper()
	buildOnce.Do(func() {
		module = filepath.Join(scratch, "plugin.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", module, "./plugin")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building the WASM plugin: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	data, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// logRecorder keeps the lines the plugins log through the host's log
// function; both adaptations log through upstream's pkg/log.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

var recorder = &logRecorder{}

func (r *logRecorder) add(level, format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.HasPrefix(msg, "wasm-test ") {
		r.lines = append(r.lines, msg)
	}
	if os.Getenv("NRI_WASM_TEST_LOG") != "" {
		fmt.Fprintf(os.Stderr, "%s: %s\n", level, msg)
	}
}

func (r *logRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
	return out
}

func (r *logRecorder) Debugf(_ context.Context, f string, a ...interface{}) { r.add("debug", f, a...) }
func (r *logRecorder) Infof(_ context.Context, f string, a ...interface{})  { r.add("info", f, a...) }
func (r *logRecorder) Warnf(_ context.Context, f string, a ...interface{})  { r.add("warn", f, a...) }
func (r *logRecorder) Errorf(_ context.Context, f string, a ...interface{}) { r.add("error", f, a...) }

// installed is one plugin in the plugin directory.
type installed struct {
	file   string // NN-name
	module []byte
	config string // its drop-in, NN-name.conf, when not empty
}

// node is one adaptation with its plugin directories and a store of what
// the runtime created, which its sync function hands to the plugins.
type node struct {
	rt   runtimeAPI
	dir  string
	pods []*api.PodSandbox
	ctrs []*api.Container
}

// startNode starts a node of impl with plugins installed; extra options
// go to nri-rs's adaptation (by default its compiled modules are kept in
// scratch).
func startNode(t *testing.T, impl string, plugins []installed, extra ...nrirs.Option) (*node, error) {
	t.Helper()
	n := &node{dir: t.TempDir()}
	for _, sub := range []string{"plugins", "conf.d"} {
		if err := os.Mkdir(filepath.Join(n.dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range plugins {
		if err := os.WriteFile(filepath.Join(n.dir, "plugins", p.file), p.module, 0o755); err != nil {
			t.Fatal(err)
		}
		if p.config != "" {
			if err := os.WriteFile(filepath.Join(n.dir, "conf.d", p.file+".conf"), []byte(p.config), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	socket := filepath.Join(n.dir, "nri.sock")
	update := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	var err error
	switch impl {
	case implUpstream:
		n.rt, err = upstream.New("wasm-test", "1.0",
			func(ctx context.Context, cb upstream.SyncCB) error { _, err := cb(ctx, n.pods, n.ctrs); return err },
			update, upstream.WithPluginPath(filepath.Join(n.dir, "plugins")),
			upstream.WithPluginConfigPath(filepath.Join(n.dir, "conf.d")), upstream.WithSocketPath(socket))
	case implNriRs:
		opts := append([]nrirs.Option{nrirs.WithPluginPath(filepath.Join(n.dir, "plugins")),
			nrirs.WithPluginConfigPath(filepath.Join(n.dir, "conf.d")), nrirs.WithSocketPath(socket),
			nrirs.WithWasmCacheDir(filepath.Join(scratch, "wasm-cache"))}, extra...)
		n.rt, err = nrirs.New("wasm-test", "1.0",
			func(ctx context.Context, cb nrirs.SyncCB) error { _, err := cb(ctx, n.pods, n.ctrs); return err },
			update, opts...)
	}
	if err != nil {
		return nil, err
	}
	if err := n.rt.Start(); err != nil {
		return nil, err
	}
	t.Cleanup(n.rt.Stop)
	return n, nil
}

func pod(i int) *api.PodSandbox {
	return &api.PodSandbox{Id: fmt.Sprintf("pod-%d", i), Name: fmt.Sprintf("pod%d", i), Uid: fmt.Sprintf("uid-%d", i),
		Namespace: "default", Labels: map[string]string{"app": "wasm"}}
}

func container(p *api.PodSandbox, i int) *api.Container {
	return &api.Container{Id: fmt.Sprintf("ctr-%d", i), PodSandboxId: p.Id, Name: fmt.Sprintf("ctr%d", i),
		State: api.ContainerState_CONTAINER_CREATED, Args: []string{"sleep", "inf"}, Env: []string{"A=1"},
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(1024)}}}}
}

// step is the outcome of one request: its response (CreateContainer,
// UpdateContainer, StopContainer) or whether it failed. Error texts are
// not compared: the plugin's own text is, where both carry it.
type step struct {
	Name     string
	Failed   bool
	Err      string // not compared
	Response *api.CreateContainerResponse
}

func outcome(name string, err error) step {
	s := step{Name: name, Failed: err != nil}
	if err != nil {
		s.Err = err.Error()
	}
	return s
}

// lifecycle drives one pod with two containers through every event, the
// second container created while the first exists (so plugins may update
// it), and returns each request's outcome.
func (n *node) lifecycle() []step {
	ctx := context.Background()
	p := pod(1)
	c1, c2 := container(p, 1), container(p, 2)
	var steps []step
	steps = append(steps, outcome("RunPodSandbox", n.rt.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: p})))
	n.pods = append(n.pods, p)
	_, err := n.rt.UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{Pod: p})
	steps = append(steps, outcome("UpdatePodSandbox", err))
	steps = append(steps, outcome("PostUpdatePodSandbox", n.rt.PostUpdatePodSandbox(ctx, &api.PostUpdatePodSandboxRequest{Pod: p})))
	for _, c := range []*api.Container{c1, c2} {
		rsp, err := n.rt.CreateContainer(ctx, &api.CreateContainerRequest{Pod: p, Container: c})
		s := outcome("CreateContainer "+c.Name, err)
		s.Response = rsp
		steps = append(steps, s)
		if err != nil {
			continue
		}
		n.ctrs = append(n.ctrs, c)
		steps = append(steps, outcome("PostCreateContainer", n.rt.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: p, Container: c})))
		steps = append(steps, outcome("StartContainer", n.rt.StartContainer(ctx, &api.StartContainerRequest{Pod: p, Container: c})))
		steps = append(steps, outcome("PostStartContainer", n.rt.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: p, Container: c})))
	}
	_, err = n.rt.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: p, Container: c1,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2048)}}})
	steps = append(steps, outcome("UpdateContainer", err))
	steps = append(steps, outcome("PostUpdateContainer", n.rt.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: p, Container: c1})))
	for _, c := range []*api.Container{c1, c2} {
		_, err := n.rt.StopContainer(ctx, &api.StopContainerRequest{Pod: p, Container: c})
		steps = append(steps, outcome("StopContainer", err))
		steps = append(steps, outcome("RemoveContainer", n.rt.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: p, Container: c})))
	}
	steps = append(steps, outcome("StopPodSandbox", n.rt.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: p})))
	steps = append(steps, outcome("RemovePodSandbox", n.rt.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: p})))
	return steps
}

// run is one implementation's run of a scenario.
type run struct {
	StartFailed bool
	Steps       []step
	Logged      []string // the plugins' lines, sorted by plugin (a plugin's own lines keep their order)
	Elapsed     time.Duration
}

func runScenario(t *testing.T, impl string, plugins []installed) run {
	t.Helper()
	recorder.take()
	started := time.Now()
	var r run
	n, err := startNode(t, impl, plugins)
	if err != nil {
		t.Logf("%s: start: %v", impl, err)
		r.StartFailed = true
	} else {
		r.Steps = n.lifecycle()
		n.rt.Stop()
	}
	r.Elapsed = time.Since(started)
	r.Logged = byPlugin(recorder.take())
	return r
}

// byPlugin orders log lines by plugin name, stably: plugins run in turn,
// but the order between two plugins' lines is not part of the contract.
func byPlugin(lines []string) []string {
	sort.SliceStable(lines, func(i, j int) bool {
		return strings.Fields(lines[i])[1] < strings.Fields(lines[j])[1]
	})
	return lines
}

// agree runs the scenario under both implementations and requires the
// same runs.
func agree(t *testing.T, plugins []installed) (up, rs run) {
	t.Helper()
	up = runScenario(t, implUpstream, plugins)
	rs = runScenario(t, implNriRs, plugins)
	if d := cmp.Diff(up, rs, protocmp.Transform(), protocmp.IgnoreEmptyMessages(), cmpIgnoreElapsed); d != "" {
		t.Errorf("nri-rs differs from upstream (-upstream +nri-rs):\n%s", d)
	}
	return up, rs
}

var cmpIgnoreElapsed = cmp.FilterPath(func(p cmp.Path) bool {
	last := p.Last().String()
	return last == ".Elapsed" || last == ".Err"
}, cmp.Ignore())

func withConfig(module []byte, file, config string) installed {
	return installed{file: file, module: module, config: config}
}

// A well-behaved WASM plugin sees every event and adjusts and updates
// containers identically under both runtimes.
func TestWasmPluginAgrees(t *testing.T) {
	m := pluginModule(t)
	up, _ := agree(t, []installed{withConfig(m, "10-alpha", "name=alpha resources"), withConfig(m, "20-beta", "name=beta")})
	if len(up.Logged) == 0 || up.StartFailed {
		t.Fatalf("the plugins logged nothing under upstream: %+v", up)
	}
	for _, s := range up.Steps {
		if s.Failed {
			t.Errorf("%s failed under upstream: %s", s.Name, s.Err)
		}
	}
	t.Logf("upstream: %d lines logged, %s", len(up.Logged), up.Elapsed)
}

// A plugin that fails a request with an error, or loops until its request
// timeout, is treated exactly as upstream treats it: the error fails the
// request and the plugin stays; the timeout drops the plugin and the
// request goes on without it.
func TestFailingWasmPluginsAgree(t *testing.T) {
	m := pluginModule(t)
	for _, mode := range []string{"error", "loop"} {
		t.Run(mode, func(t *testing.T) {
			up, rs := agree(t, []installed{withConfig(m, "10-good", "name=good resources"),
				withConfig(m, "20-bad", "name=bad mode="+mode)})
			if !failedAt(up, "CreateContainer ctr1") && mode == "error" {
				t.Errorf("upstream did not fail CreateContainer for the error: %+v", up.Steps)
			}
			t.Logf("%s: upstream %s, nri-rs %s", mode, up.Elapsed, rs.Elapsed)
		})
	}
}

// A module that dies (a trap, a Go panic, growing past its memory limit)
// is a plugin that crashed. The request it died in fails, as upstream fails
// it; then nri-rs drops the plugin, as it drops a plugin whose process
// crashed, and the runtime goes on without it. Upstream keeps the dead
// module: after a trap it fails that request each time, after a panic
// every request to it, for as long as the runtime runs. Upstream has no
// memory limit (a module may take 4 GiB); nri-rs's default is 512 MiB.
func TestCrashingWasmPluginsAreDropped(t *testing.T) {
	m := pluginModule(t)
	for _, mode := range []string{"trap", "panic", "alloc"} {
		t.Run(mode, func(t *testing.T) {
			plugins := []installed{withConfig(m, "10-good", "name=good resources"),
				withConfig(m, "20-bad", "name=bad mode="+mode)}
			up, upPeak := measured(t, implUpstream, plugins)
			rs, rsPeak := measured(t, implNriRs, plugins)
			t.Logf("%s: upstream %s, peak RSS +%d MiB; nri-rs %s, peak RSS +%d MiB",
				mode, up.Elapsed, upPeak>>20, rs.Elapsed, rsPeak>>20)
			for _, s := range up.Steps {
				t.Logf("upstream: %s failed=%v %.80s", s.Name, s.Failed, s.Err)
			}
			if rs.StartFailed {
				t.Fatal("nri-rs failed to start")
			}
			// The request the module died in fails; none other does.
			for _, s := range rs.Steps {
				if s.Failed != (s.Name == "CreateContainer ctr1") {
					t.Errorf("nri-rs: %s failed=%v (%s)", s.Name, s.Failed, s.Err)
				}
			}
			// Up to that request both runtimes did the same.
			crash := indexOf(rs.Steps, "CreateContainer ctr1")
			if crash < 0 || indexOf(up.Steps, "CreateContainer ctr1") != crash {
				t.Fatalf("no CreateContainer ctr1 at the same step: %+v", rs.Steps)
			}
			if mode != "alloc" {
				if d := cmp.Diff(up.Steps[:crash+1], rs.Steps[:crash+1], protocmp.Transform(), protocmp.IgnoreEmptyMessages(), cmpIgnoreElapsed); d != "" {
					t.Errorf("up to the crash, nri-rs differs from upstream (-upstream +nri-rs):\n%s", d)
				}
			}
			// Afterwards only the good plugin adjusts, and the dead one
			// hears of nothing.
			for _, s := range rs.Steps[crash+1:] {
				if a := s.Response.GetAdjust(); a != nil {
					if _, ok := a.GetAnnotations()["wasm-test/bad"]; ok || a.GetAnnotations()["wasm-test/good"] == "" {
						t.Errorf("nri-rs %s adjusted by %v", s.Name, a.GetAnnotations())
					}
				}
			}
			if last := rs.Logged[len(rs.Logged)-1]; !strings.HasPrefix(last, "wasm-test good ") {
				t.Errorf("lines logged after the bad plugin's crash: the last is %q", last)
			}
			for _, line := range rs.Logged {
				if strings.HasPrefix(line, "wasm-test bad ") && strings.Contains(line, "ctr2") {
					t.Errorf("the dead plugin was called again: %q", line)
				}
			}
			// The runtime's memory is bounded by the module's limit.
			if rsPeak > 512<<20+128<<20 {
				t.Errorf("nri-rs's peak RSS grew by %d MiB, past the 512 MiB limit", rsPeak>>20)
			}
		})
	}
}

func failedAt(r run, name string) bool {
	i := indexOf(r.Steps, name)
	return i >= 0 && r.Steps[i].Failed
}

func indexOf(steps []step, name string) int {
	for i, s := range steps {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// measured runs a scenario and returns how far the process's peak RSS rose
// above what it was when the run began.
func measured(t *testing.T, impl string, plugins []installed) (run, int64) {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	// "5" resets the peak (VmHWM) to the current RSS.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("cannot reset the peak RSS: %v", err)
	}
	before := statusBytes(t, "VmRSS")
	r := runScenario(t, impl, plugins)
	return r, statusBytes(t, "VmHWM") - before
}

func statusBytes(t *testing.T, field string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kib int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kib)
			return kib << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestPrecompiledModulesAreLoaded compiles the plugin directory with
// nri-wasm-compile, as a node's setup would, and requires the runtime's
// start to load that file instead of compiling: same file, same inode.
func TestPrecompiledModulesAreLoaded(t *testing.T) {
	if !nrirs.CompilesWasm() {
		t.Skip("the library compiles no WASM (built without its compiled-wasm feature); make test-rust tests compiled modules")
	}
	dir := os.Getenv("NRI_RS_BIN_DIR")
	if dir == "" {
		dir = "../../../target/debug"
	}
	tool, err := filepath.Abs(filepath.Join(dir, "nri-wasm-compile"))
	if err != nil {
		t.Fatal(err)
	}
	plugins := t.TempDir()
	if err := os.WriteFile(filepath.Join(plugins, "10-good"), pluginModule(t), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	started := time.Now()
	out, err := exec.Command(tool, "--cache-dir", cache, plugins).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, out)
	}
	compiled := time.Since(started)
	files, err := filepath.Glob(filepath.Join(cache, "*.cwasm"))
	if err != nil || len(files) != 1 {
		t.Fatalf("%s left %v (%v), want one compiled module:\n%s", tool, files, err, out)
	}
	before, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(files[0], old, old); err != nil {
		t.Fatal(err)
	}

	started = time.Now()
	n, err := startNode(t, implNriRs, []installed{withConfig(pluginModule(t), "10-good", "name=good")},
		nrirs.WithWasmCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	loaded := time.Since(started)
	n.rt.Stop()
	after, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().After(old.Add(time.Hour)) {
		t.Fatalf("the start did not load %s as nri-wasm-compile wrote it", files[0])
	}
	t.Logf("one WASM plugin: nri-wasm-compile %s, then the runtime's start %s",
		compiled.Round(time.Millisecond), loaded.Round(time.Millisecond))
}

// nri-rs keeps a module's compiled form in its cache directory and loads
// it from there at the next start (upstream compiles at every start);
// WithWasmCacheDir("") keeps none.
// TestModulesTheCacheLacksRunOnWazero: by default a module the cache does
// not hold is not compiled at start but run on the wazero engine
// go/adaptation lends the core, as upstream runs it; the cache stays empty.
func TestModulesTheCacheLacksRunOnWazero(t *testing.T) {
	plugins := []installed{withConfig(pluginModule(t), "10-good", "name=good")}
	cache := t.TempDir()
	n, err := startNode(t, implNriRs, plugins, nrirs.WithWasmCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	steps := n.lifecycle()
	if i := indexOf(steps, "CreateContainer ctr1"); i < 0 || steps[i].Failed ||
		steps[i].Response.GetAdjust().GetAnnotations()["wasm-test/good"] == "" {
		t.Fatalf("the plugin did not adjust: %+v", steps)
	}
	n.rt.Stop()
	if files, _ := filepath.Glob(filepath.Join(cache, "*")); len(files) != 0 {
		t.Fatalf("compiled at start: %v", files)
	}
}

func TestCompiledModulesAreKept(t *testing.T) {
	if !nrirs.CompilesWasm() {
		t.Skip("the library compiles no WASM (built without its compiled-wasm feature); make test-rust tests compiled modules")
	}
	plugins := []installed{withConfig(pluginModule(t), "10-good", "name=good")}
	cache := t.TempDir()
	kept := func() []string {
		files, err := filepath.Glob(filepath.Join(cache, "*.cwasm"))
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	// Without WithWasmCompiledAtStart a module the cache lacks runs on
	// wazero and nothing is compiled (TestModulesTheCacheLacksRunOnWazero).
	startAndStop := func(dir string) time.Duration {
		started := time.Now()
		n, err := startNode(t, implNriRs, plugins, nrirs.WithWasmCacheDir(dir), nrirs.WithWasmCompiledAtStart())
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(started)
		n.rt.Stop()
		return took
	}
	compiled := startAndStop(cache)
	files := kept()
	if len(files) != 1 {
		t.Fatalf("kept %v, want one compiled module", files)
	}
	// A load moves the file's modification time: set it back, and see it
	// move again.
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(files[0], old, old); err != nil {
		t.Fatal(err)
	}
	loaded := startAndStop(cache)
	if info, err := os.Stat(files[0]); err != nil || !info.ModTime().After(old.Add(time.Hour)) {
		t.Fatalf("the second start did not load %s (%v, %v)", files[0], info.ModTime(), err)
	}
	none := startAndStop("")
	if len(kept()) != 1 {
		t.Fatalf("kept %v after a start without a cache", kept())
	}
	t.Logf("start with one WASM plugin: compiling %s, from the cache %s, without a cache %s",
		compiled.Round(time.Millisecond), loaded.Round(time.Millisecond), none.Round(time.Millisecond))
}
