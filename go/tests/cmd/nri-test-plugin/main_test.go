package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	nri "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"
)

// These tests build the plugin and run it under upstream's runtime side,
// github.com/containerd/nri/pkg/adaptation (the version pinned in go.mod),
// both as an external plugin and pre-installed in the plugin directory.

const waitTimeout = 20 * time.Second

// pluginBin is the plugin built by TestMain.
var pluginBin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	// Upstream's runtime logs through logrus; keep only its complaints.
	logrus.SetLevel(logrus.WarnLevel)
	dir, err := os.MkdirTemp("", "nri-test-plugin-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	pluginBin = filepath.Join(dir, "nri-test-plugin")
	args := []string{"build", "-o", pluginBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	// go test puts its own GOROOT/bin first in PATH.
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building nri-test-plugin: %v\n", err)
		return 1
	}
	return m.Run()
}

// testRuntime is a minimal CRI runtime around upstream's adaptation.
type testRuntime struct {
	t          *testing.T
	dir        string
	adapt      *nri.Adaptation
	pods       []*api.PodSandbox
	ctrs       []*api.Container
	updateMode updateMode
	synced     chan []*api.ContainerUpdate // what the sync callback returned
	updated    chan []*api.ContainerUpdate // what UpdateFn was asked
}

func newTestRuntime(t *testing.T, pods []*api.PodSandbox, ctrs []*api.Container) *testRuntime {
	t.Helper()
	// Unix socket paths are short; t.TempDir() may be too long.
	dir, err := os.MkdirTemp("", "nri-test-plugin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, sub := range []string{"plugins", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := &testRuntime{
		t: t, dir: dir, pods: pods, ctrs: ctrs,
		synced:  make(chan []*api.ContainerUpdate, 16),
		updated: make(chan []*api.ContainerUpdate, 16),
	}
	r.adapt, err = nri.New("test-runtime", "v0.0.1", r.sync, r.update,
		nri.WithPluginPath(filepath.Join(dir, "plugins")),
		nri.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		nri.WithSocketPath(r.socket()))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *testRuntime) socket() string { return filepath.Join(r.dir, "nri.sock") }

func (r *testRuntime) start() {
	r.t.Helper()
	if err := r.adapt.Start(); err != nil {
		r.t.Fatalf("runtime start: %v", err)
	}
	r.t.Cleanup(r.adapt.Stop)
}

func (r *testRuntime) sync(ctx context.Context, cb nri.SyncCB) error {
	updates, err := cb(ctx, r.pods, r.ctrs)
	r.synced <- updates
	return err
}

func (r *testRuntime) update(_ context.Context, u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	r.updated <- u
	switch r.updateMode {
	case updateFailed:
		return u, nil
	case updateError:
		return nil, errors.New("no such container")
	}
	return nil, nil
}

// updateMode is how the runtime answers unsolicited updates.
type updateMode int

const (
	updateOK updateMode = iota
	updateFailed
	updateError
)

// writeScript stores a script in the runtime's directory.
func (r *testRuntime) writeScript(name string, s map[string]any) string {
	r.t.Helper()
	path := filepath.Join(r.dir, name)
	data, err := json.Marshal(s)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		r.t.Fatal(err)
	}
	return path
}

// proc is a running external plugin.
type proc struct {
	cmd    *exec.Cmd
	stderr *testWriter
	exitC  chan int
}

// startExternal runs the plugin as an external plugin on the socket.
func (r *testRuntime) startExternal(name, idx, script string) *proc {
	r.t.Helper()
	return r.startProc(idx+"-"+name, pluginBin, "-socket", r.socket(), "-name", name, "-idx", idx, "-script", script)
}

// startProc runs a plugin binary with stderr in the test log.
func (r *testRuntime) startProc(name, bin string, args ...string) *proc {
	r.t.Helper()
	cmd := exec.Command(bin, args...)
	stderr := &testWriter{t: r.t, prefix: name + ": "}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: stderr, exitC: make(chan int, 1)}
	go func() {
		_ = cmd.Wait()
		p.exitC <- cmd.ProcessState.ExitCode()
	}()
	r.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exitC
	})
	return p
}

func (p *proc) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.exitC:
		p.exitC <- code
		return code
	case <-time.After(waitTimeout):
		t.Fatal("plugin did not exit")
		return -1
	}
}

// install puts the plugin into the plugin directory as idx-name.
func (r *testRuntime) install(name, idx string) string {
	r.t.Helper()
	data, err := os.ReadFile(pluginBin)
	if err != nil {
		r.t.Fatal(err)
	}
	path := filepath.Join(r.dir, "plugins", idx+"-"+name)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		r.t.Fatal(err)
	}
	return path
}

// waitSynced waits until the plugin logged its final Synchronize, then
// uses BlockPluginSync as a barrier until the runtime registered it.
func (r *testRuntime) waitSynced(log string) {
	r.t.Helper()
	waitLog(r.t, log, "Synchronize", func(e logEntry) bool { return e.Event == "Synchronize" && !e.More })
	r.adapt.BlockPluginSync().Unblock()
}

// testWriter copies a plugin's stderr into the test log and keeps it.
type testWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	all    strings.Builder
}

func (w *testWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.all.Write(p)
	w.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if strings.Contains(line, "DATA RACE") {
			w.t.Errorf("race detected in the plugin: %s", line)
		}
		w.t.Log(w.prefix + line)
	}
	return len(p), nil
}

// readLog returns the complete lines of a plugin log.
func readLog(t *testing.T, path string) []logEntry {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e logEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("bad log line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func waitLog(t *testing.T, path, what string, match func(logEntry) bool) logEntry {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		for _, e := range readLog(t, path) {
			if match(e) {
				return e
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("plugin never logged %s; log: %+v", what, readLog(t, path))
	return logEntry{}
}

// lastLogged checks, without waiting, that the plugin logged a request
// before it replied to it.
func lastLogged(t *testing.T, path, event, ctr string) {
	t.Helper()
	entries := readLog(t, path)
	if len(entries) == 0 {
		t.Fatalf("%s returned but the log is empty", event)
	}
	last := entries[len(entries)-1]
	if last.Event != event || last.Container != ctr {
		t.Fatalf("%s of %q returned but the last log line is %+v", event, ctr, last)
	}
}

// eventsAfterSync lists the logged events after the final Synchronize.
func eventsAfterSync(t *testing.T, path string) []string {
	var out []string
	synced := false
	for _, e := range readLog(t, path) {
		if synced {
			out = append(out, e.Event)
		}
		if e.Event == "Synchronize" && !e.More {
			synced = true
		}
	}
	return out
}

func makePod(i int) *api.PodSandbox {
	return &api.PodSandbox{
		Id:        fmt.Sprintf("pod-%d", i),
		Name:      fmt.Sprintf("pod%d", i),
		Uid:       fmt.Sprintf("uid-%d", i),
		Namespace: "default",
		Linux:     &api.LinuxPodSandbox{CgroupParent: fmt.Sprintf("/kubepods/pod%d", i)},
	}
}

func makeContainer(pod *api.PodSandbox, i int) *api.Container {
	return &api.Container{
		Id:           fmt.Sprintf("ctr-%d", i),
		PodSandboxId: pod.Id,
		Name:         fmt.Sprintf("ctr%d", i),
		State:        api.ContainerState_CONTAINER_RUNNING,
		Args:         []string{"/bin/sh"},
		Linux: &api.LinuxContainer{
			Resources: &api.LinuxResources{
				Cpu:    &api.LinuxCPU{Shares: api.UInt64(1024)},
				Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)},
			},
		},
	}
}

func existingState(nPods, nCtrs int) ([]*api.PodSandbox, []*api.Container) {
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for i := 0; i < nPods; i++ {
		pods = append(pods, makePod(i))
	}
	for i := 0; i < nCtrs; i++ {
		ctrs = append(ctrs, makeContainer(pods[i%nPods], i))
	}
	return pods, ctrs
}

// lifecycleEvents is the order in which lifecycle raises the events, with
// the validation upstream asks validators for during creation.
var lifecycleEvents = []string{
	"RunPodSandbox", "UpdatePodSandbox", "PostUpdatePodSandbox",
	"CreateContainer", "ValidateContainerAdjustment", "PostCreateContainer",
	"StartContainer", "PostStartContainer",
	"UpdateContainer", "PostUpdateContainer",
	"StopContainer", "RemoveContainer",
	"StopPodSandbox", "RemovePodSandbox",
}

type lifecycleResult struct {
	create *api.CreateContainerResponse
	update *api.UpdateContainerResponse
	stop   *api.StopContainerResponse
}

// lifecycle drives one pod and container through every event. After each
// request returns the plugin's log must already show it.
func (r *testRuntime) lifecycle(log string, pod *api.PodSandbox, ctr *api.Container) lifecycleResult {
	r.t.Helper()
	ctx := context.Background()
	var res lifecycleResult
	var err error
	must := func(what string, err error) {
		r.t.Helper()
		if err != nil {
			r.t.Fatalf("%s: %v", what, err)
		}
	}
	must("RunPodSandbox", r.adapt.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}))
	_, err = r.adapt.UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{Pod: pod, LinuxResources: &api.LinuxResources{}})
	must("UpdatePodSandbox", err)
	must("PostUpdatePodSandbox", r.adapt.PostUpdatePodSandbox(ctx, &api.PostUpdatePodSandboxRequest{Pod: pod}))
	res.create, err = r.adapt.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
	must("CreateContainer", err)
	if log != "" {
		// Validation is the last request of a creation.
		lastLogged(r.t, log, "ValidateContainerAdjustment", ctr.Id)
	}
	must("PostCreateContainer", r.adapt.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod, Container: ctr}))
	must("StartContainer", r.adapt.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr}))
	if log != "" {
		lastLogged(r.t, log, "StartContainer", ctr.Id)
	}
	must("PostStartContainer", r.adapt.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod, Container: ctr}))
	res.update, err = r.adapt.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod, Container: ctr, LinuxResources: ctr.Linux.Resources})
	must("UpdateContainer", err)
	must("PostUpdateContainer", r.adapt.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod, Container: ctr}))
	res.stop, err = r.adapt.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr})
	must("StopContainer", err)
	must("RemoveContainer", r.adapt.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr}))
	must("StopPodSandbox", r.adapt.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod}))
	must("RemovePodSandbox", r.adapt.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod}))
	if log != "" {
		lastLogged(r.t, log, "RemovePodSandbox", "")
	}
	return res
}

func cpuUpdate(ctr string, shares int) map[string]any {
	return map[string]any{
		"container_id": ctr,
		"linux": map[string]any{"resources": map[string]any{
			"cpu": map[string]any{"shares": map[string]any{"value": shares}},
		}},
	}
}

func findUpdate(updates []*api.ContainerUpdate, ctr string) *api.ContainerUpdate {
	for _, u := range updates {
		if u.GetContainerId() == ctr {
			return u
		}
	}
	return nil
}

func shares(u *api.ContainerUpdate) uint64 {
	return u.GetLinux().GetResources().GetCpu().GetShares().GetValue()
}

// An external plugin logs every request with its details before replying,
// and its scripted replies to CreateContainer, UpdateContainer,
// StopContainer and Synchronize reach the runtime.
func TestExternalLogAndReplies(t *testing.T) {
	pods, ctrs := existingState(2, 3)
	r := newTestRuntime(t, pods, ctrs)
	r.start()
	log := filepath.Join(r.dir, "events.jsonl")
	script := r.writeScript("script.json", map[string]any{
		"events": "all",
		"log":    log,
		"replies": map[string]any{
			"CreateContainer": map[string]any{
				"adjust": map[string]any{
					"annotations": map[string]string{"test.nri-rs/scripted": "yes"},
					"env":         []map[string]string{{"key": "SCRIPTED", "value": "1"}},
				},
				"update": []any{cpuUpdate("ctr-0", 11)},
			},
			"UpdateContainer": map[string]any{"update": []any{cpuUpdate("ctr-1", 22)}},
			"StopContainer":   map[string]any{"update": []any{cpuUpdate("ctr-2", 33)}},
			"Synchronize":     map[string]any{"update": []any{cpuUpdate("ctr-0", 44)}},
		},
	})
	r.startExternal("ext", "10", script)
	r.waitSynced(log)

	entries := readLog(t, log)
	if len(entries) != 2 {
		t.Fatalf("want Configure and Synchronize logged, got %+v", entries)
	}
	if e := entries[0]; e.Event != "Configure" || e.Method != "Configure" || e.Plugin != "10-ext" || e.Config != "" {
		t.Errorf("bad Configure line %+v", e)
	}
	// Upstream sends its name, version, the module's NRI version and the
	// default timeouts in milliseconds.
	if e := entries[0]; e.RuntimeName != "test-runtime" || e.RuntimeVersion != "v0.0.1" ||
		e.NRIVersion != "v0.12.5" || e.RegistrationTimeoutMs != 5000 || e.RequestTimeoutMs != 2000 {
		t.Errorf("bad Configure fields %+v", e)
	}
	if e := entries[1]; e.Event != "Synchronize" || e.Pods != 2 || e.Containers != 3 || e.More {
		t.Errorf("bad Synchronize line %+v", e)
	}
	// The first sync is the runtime's start-up sync of (no) pre-installed
	// plugins; the plugin's is the second.
	for i := 0; i < 2; i++ {
		select {
		case ups := <-r.synced:
			if u := findUpdate(ups, "ctr-0"); i == 1 && shares(u) != 44 {
				t.Errorf("scripted Synchronize update missing: %v", ups)
			}
		case <-time.After(waitTimeout):
			t.Fatal("sync callback never returned")
		}
	}

	pod := makePod(100)
	ctr := makeContainer(pod, 100)
	res := r.lifecycle(log, pod, ctr)

	adj := res.create.GetAdjust()
	if adj.GetAnnotations()["test.nri-rs/scripted"] != "yes" {
		t.Errorf("scripted annotation missing from %v", adj)
	}
	envOK := false
	for _, kv := range adj.GetEnv() {
		envOK = envOK || (kv.Key == "SCRIPTED" && kv.Value == "1")
	}
	if !envOK {
		t.Errorf("scripted env missing from %v", adj.GetEnv())
	}
	if u := findUpdate(res.create.GetUpdate(), "ctr-0"); shares(u) != 11 {
		t.Errorf("scripted CreateContainer update missing: %v", res.create.GetUpdate())
	}
	if u := findUpdate(res.update.GetUpdate(), "ctr-1"); shares(u) != 22 {
		t.Errorf("scripted UpdateContainer update missing: %v", res.update.GetUpdate())
	}
	if u := findUpdate(res.stop.GetUpdate(), "ctr-2"); shares(u) != 33 {
		t.Errorf("scripted StopContainer update missing: %v", res.stop.GetUpdate())
	}

	if got := eventsAfterSync(t, log); !reflect.DeepEqual(got, lifecycleEvents) {
		t.Errorf("events after sync:\n got %v\nwant %v", got, lifecycleEvents)
	}
	for _, e := range readLog(t, log)[2:] {
		if e.Pod != pod.Id {
			t.Errorf("%s logged pod %q, want %q", e.Event, e.Pod, pod.Id)
		}
		wantCtr := ctr.Id
		if strings.Contains(e.Event, "PodSandbox") {
			wantCtr = ""
		}
		if e.Container != wantCtr {
			t.Errorf("%s logged container %q, want %q", e.Event, e.Container, wantCtr)
		}
		// Upstream v0.12 uses a dedicated RPC per event, not StateChange.
		if e.Method != e.Event {
			t.Errorf("%s arrived as %q", e.Event, e.Method)
		}
	}
}

// Upstream splits a Synchronize over the 4 MiB ttrpc limit into chunks:
// each chunk is logged as it arrives, all but the last with more set.
func TestChunkedSyncLogged(t *testing.T) {
	pods, ctrs := existingState(500, 1000)
	bulk := strings.Repeat("x", 8<<10)
	for _, c := range ctrs {
		c.Annotations = map[string]string{"bulk": bulk}
	}
	if size := proto.Size(&api.SynchronizeRequest{Pods: pods, Containers: ctrs}); size <= 4<<20 {
		t.Fatalf("state is only %d bytes; it must exceed the 4 MiB ttrpc limit", size)
	}
	r := newTestRuntime(t, pods, ctrs)
	r.start()
	log := filepath.Join(r.dir, "chunks.jsonl")
	r.startExternal("chunks", "10", r.writeScript("chunks.json", map[string]any{"log": log}))
	r.waitSynced(log)

	var syncs []logEntry
	for _, e := range readLog(t, log) {
		if e.Event == "Synchronize" {
			syncs = append(syncs, e)
		}
	}
	if len(syncs) < 2 {
		t.Fatalf("want several Synchronize chunks, got %+v", syncs)
	}
	nPods, nCtrs := 0, 0
	for i, e := range syncs {
		if e.More != (i < len(syncs)-1) {
			t.Errorf("chunk %d of %d has more=%v", i+1, len(syncs), e.More)
		}
		nPods += e.Pods
		nCtrs += e.Containers
	}
	if nPods != 500 || nCtrs != 1000 {
		t.Errorf("chunks carried %d pods and %d containers, want 500 and 1000", nPods, nCtrs)
	}
}

// Launched by the runtime with no arguments, the plugin finds its script
// through the sidecar file next to it and subscribes to the events in it.
func TestPreinstalledSidecar(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	log := filepath.Join(r.dir, "side.jsonl")
	script := r.writeScript("side-script.json", map[string]any{
		"events": "CreateContainer,RemovePodSandbox",
		"log":    log,
		"replies": map[string]any{"CreateContainer": map[string]any{
			"adjust": map[string]any{"annotations": map[string]string{"test.nri-rs/side": "car"}},
		}},
	})
	bin := r.install("side", "20")
	// Not executable, so the runtime does not take it for a plugin.
	if err := os.WriteFile(bin+".json", []byte(script+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.start()

	entries := readLog(t, log)
	if len(entries) != 2 || entries[0].Event != "Configure" || entries[0].Plugin != "20-side" || entries[1].Event != "Synchronize" {
		t.Fatalf("want Configure and Synchronize of 20-side logged, got %+v", entries)
	}
	pod := makePod(1)
	ctr := makeContainer(pod, 1)
	res := r.lifecycle("", pod, ctr)
	if v := res.create.GetAdjust().GetAnnotations()["test.nri-rs/side"]; v != "car" {
		t.Errorf("scripted annotation missing: %v", res.create.GetAdjust())
	}
	want := []string{"CreateContainer", "RemovePodSandbox"}
	if got := eventsAfterSync(t, log); !reflect.DeepEqual(got, want) {
		t.Errorf("events after sync: got %v, want %v", got, want)
	}
}

// A JSON object in the plugin's drop-in configuration is its script.
func TestPreinstalledConfigScript(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	log := filepath.Join(r.dir, "conf.jsonl")
	cfg, _ := json.Marshal(map[string]any{"events": "StartContainer", "log": log})
	if err := os.WriteFile(filepath.Join(r.dir, "conf.d", "30-conf.conf"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	r.install("conf", "30")
	r.start()

	entries := readLog(t, log)
	if len(entries) != 2 || entries[0].Event != "Configure" || entries[0].Config != string(cfg) || entries[0].Plugin != "30-conf" {
		t.Fatalf("want Configure with the drop-in config logged, got %+v", entries)
	}
	pod := makePod(1)
	r.lifecycle("", pod, makeContainer(pod, 1))
	if got, want := eventsAfterSync(t, log), []string{"StartContainer"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events after sync: got %v, want %v", got, want)
	}
}

// A scripted failure fails the event in the runtime; the plugin keeps
// serving.
func TestScriptedFailure(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	r.start()
	log := filepath.Join(r.dir, "fail.jsonl")
	script := r.writeScript("fail.json", map[string]any{
		"log": log,
		"fail": map[string]string{
			"CreateContainer": "scripted create failure",
			"StartContainer":  "scripted start failure",
		},
	})
	r.startExternal("fail", "10", script)
	r.waitSynced(log)

	ctx := context.Background()
	pod := makePod(1)
	ctr := makeContainer(pod, 1)
	_, err := r.adapt.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err == nil || !strings.Contains(err.Error(), "scripted create failure") {
		t.Errorf("CreateContainer error = %v, want the scripted failure", err)
	}
	err = r.adapt.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr})
	if err == nil || !strings.Contains(err.Error(), "scripted start failure") {
		t.Errorf("StartContainer error = %v, want the scripted failure", err)
	}
	if err := r.adapt.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr}); err != nil {
		t.Errorf("RemoveContainer: %v", err)
	}
	lastLogged(t, log, "RemoveContainer", ctr.Id)
}

// A validating plugin's scripted rejection fails the creation.
func TestValidateReject(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	r.start()
	log := filepath.Join(r.dir, "validate.jsonl")
	script := r.writeScript("validate.json", map[string]any{
		"events":   "ValidateContainerAdjustment",
		"log":      log,
		"validate": map[string]any{"reject": true, "reason": "scripted veto"},
	})
	r.startExternal("validator", "10", script)
	r.waitSynced(log)

	pod := makePod(1)
	ctr := makeContainer(pod, 1)
	_, err := r.adapt.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err == nil || !strings.Contains(err.Error(), "scripted veto") {
		t.Errorf("CreateContainer error = %v, want the scripted rejection", err)
	}
	lastLogged(t, log, "ValidateContainerAdjustment", ctr.Id)
}

// exit_on kills the plugin mid-request: the request is logged, the
// process exits with status 3, and the runtime completes the event
// without it and stops calling it.
func TestExitOn(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	r.start()
	log := filepath.Join(r.dir, "exit.jsonl")
	script := r.writeScript("exit.json", map[string]any{
		// Not a validator: upstream still asks the validators it had when
		// the creation began and fails it if one of them is gone.
		"events":  "CreateContainer,StartContainer",
		"log":     log,
		"exit_on": "CreateContainer",
		"replies": map[string]any{"CreateContainer": map[string]any{
			"adjust": map[string]any{"annotations": map[string]string{"test.nri-rs/never": "sent"}},
		}},
	})
	p := r.startExternal("crash", "10", script)
	r.waitSynced(log)

	ctx := context.Background()
	pod := makePod(1)
	ctr := makeContainer(pod, 1)
	rsp, err := r.adapt.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		t.Fatalf("CreateContainer failed although the crashed plugin should be dropped: %v", err)
	}
	if _, ok := rsp.GetAdjust().GetAnnotations()["test.nri-rs/never"]; ok {
		t.Errorf("adjustment of the crashed plugin applied: %v", rsp.GetAdjust())
	}
	lastLogged(t, log, "CreateContainer", ctr.Id)
	if code := p.waitExit(t); code != exitOnStatus {
		t.Errorf("plugin exit status %d, want %d", code, exitOnStatus)
	}
	if err := r.adapt.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr}); err != nil {
		t.Errorf("StartContainer after the crash: %v", err)
	}
	lastLogged(t, log, "CreateContainer", ctr.Id)
}

// A broken script fails Configure, so the plugin exits with status 1.
// Without -script an external plugin reads the sidecar, which here holds
// the script itself rather than its path.
func TestBadScriptFailsConfigure(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	r.start()
	data, err := os.ReadFile(pluginBin)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(r.dir, "40-bad")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin+".json", []byte(`{"events": "all", "bogus": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := r.startProc("40-bad", bin, "-socket", r.socket())
	if code := p.waitExit(t); code != 1 {
		t.Errorf("plugin exit status %d, want 1", code)
	}
	if stderr := p.stderr.String(); !strings.Contains(stderr, "bogus") {
		t.Errorf("stderr does not name the bad field:\n%s", stderr)
	}
}

// The unsolicited update reaches the runtime's UpdateFn, and the outcome
// lands in result_log: the failed updates, or the error (ttrpc sends no
// reply body with an error, so then the failed list is empty).
func TestUnsolicitedUpdate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   updateMode
		failed int
		err    string
	}{
		{"ok", updateOK, 0, ""},
		{"failed", updateFailed, 1, ""},
		{"error", updateError, 0, "no such container"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRuntime(t, nil, nil)
			r.updateMode = tc.mode
			r.start()
			result := filepath.Join(r.dir, "result.json")
			script := r.writeScript("unsolicited.json", map[string]any{
				"unsolicited": map[string]any{
					"after_ms":   50,
					"update":     []any{cpuUpdate("ctr-7", 777)},
					"result_log": result,
				},
			})
			r.startExternal("updater", "10", script)

			select {
			case got := <-r.updated:
				if len(got) != 1 || got[0].ContainerId != "ctr-7" || shares(got[0]) != 777 {
					t.Errorf("UpdateFn got %v", got)
				}
			case <-time.After(waitTimeout):
				t.Fatal("UpdateFn was never called")
			}

			var res struct {
				Failed []json.RawMessage `json:"failed"`
				Error  *string           `json:"error"`
			}
			deadline := time.Now().Add(waitTimeout)
			for {
				data, err := os.ReadFile(result)
				if err == nil {
					if err := json.Unmarshal(data, &res); err != nil {
						t.Fatalf("result_log %q: %v", data, err)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("result_log never written")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if res.Failed == nil || res.Error == nil {
				t.Fatalf("result_log lacks failed or error: %+v", res)
			}
			if len(res.Failed) != tc.failed || (tc.failed > 0 && !strings.Contains(string(res.Failed[0]), `"ctr-7"`)) {
				t.Errorf("failed = %s, want %d update(s) of ctr-7", res.Failed, tc.failed)
			}
			if (tc.err == "") != (*res.Error == "") || !strings.Contains(*res.Error, tc.err) {
				t.Errorf("error = %q, want %q", *res.Error, tc.err)
			}
		})
	}
}

// The raw Configure mask bypasses the stub: 0 subscribes to everything
// whatever "events" says, and invalid bits make the runtime drop the
// plugin, which then exits cleanly.
func TestRawEventsMask(t *testing.T) {
	t.Run("zero", func(t *testing.T) {
		r := newTestRuntime(t, nil, nil)
		r.start()
		log := filepath.Join(r.dir, "zero.jsonl")
		script := r.writeScript("zero.json", map[string]any{
			"events":    "RemovePodSandbox",
			"log":       log,
			"configure": map[string]any{"events_mask": 0},
		})
		r.startExternal("zero", "10", script)
		r.waitSynced(log)
		pod := makePod(1)
		r.lifecycle(log, pod, makeContainer(pod, 1))
		if got := eventsAfterSync(t, log); !reflect.DeepEqual(got, lifecycleEvents) {
			t.Errorf("events after sync:\n got %v\nwant %v", got, lifecycleEvents)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		r := newTestRuntime(t, nil, nil)
		r.start()
		log := filepath.Join(r.dir, "invalid.jsonl")
		script := r.writeScript("invalid.json", map[string]any{
			"log":       log,
			"configure": map[string]any{"events_mask": 1 << 20},
		})
		p := r.startExternal("invalid", "10", script)
		if code := p.waitExit(t); code != 0 {
			t.Errorf("plugin exit status %d, want 0", code)
		}
		entries := readLog(t, log)
		if len(entries) != 1 || entries[0].Event != "Configure" {
			t.Errorf("want only Configure logged, got %+v", entries)
		}
	})
}

// delay_ms holds the reply back.
func TestDelay(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	r.start()
	log := filepath.Join(r.dir, "delay.jsonl")
	script := r.writeScript("delay.json", map[string]any{
		"log":      log,
		"delay_ms": map[string]int{"StartContainer": 300},
	})
	r.startExternal("slow", "10", script)
	r.waitSynced(log)
	pod := makePod(1)
	ctr := makeContainer(pod, 1)
	start := time.Now()
	if err := r.adapt.StartContainer(context.Background(), &api.StartContainerRequest{Pod: pod, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("StartContainer took %v, want at least 300ms", took)
	}
}

// Typos in a script are errors, not silently ignored.
func TestScriptChecks(t *testing.T) {
	for _, bad := range []string{
		`{"evnts": "all"}`,
		`{"events": "CreateContainers"}`,
		`{"fail": {"CreateContainers": "x"}}`,
		`{"fail": {"Shutdown": "x"}}`,
		`{"exit_on": "Nope"}`,
		`{"replies": {"StartContainer": {}}}`,
		`{"replies": {"CreateContainer": {"adjust": {"bogus": 1}}}}`,
		`{"replies": {"CreateContainer": {"evict": [{"container_id": "c"}]}}}`,
		`{"unsolicited": {"update": [{"container_id": 5}]}}`,
		`{} {}`,
	} {
		if _, err := parseScript([]byte(bad), "test"); err == nil {
			t.Errorf("script %s accepted", bad)
		}
	}
	s, err := parseScript([]byte(`{"events": "runpodsandbox, CreateContainer", "configure": {"events_mask": -1}}`), "test")
	if err != nil {
		t.Fatal(err)
	}
	want := api.EventMask(0)
	want.Set(api.Event_RUN_POD_SANDBOX, api.Event_CREATE_CONTAINER)
	if s.events != want || *s.Configure.EventsMask != -1 {
		t.Errorf("parsed events 0x%x mask %d", s.events, *s.Configure.EventsMask)
	}
}
