// Package interop runs nri-rs's Rust plugin stub against upstream's Go
// runtime adaptation (github.com/containerd/nri/pkg/adaptation, pinned in
// go.mod): the Rust plugin is hosted both as an external plugin on the
// socket and as a pre-installed plugin launched from the plugin directory.
package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	nri "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
)

// waitTimeout bounds every wait for the plugin to do something.
const waitTimeout = 20 * time.Second

// pluginBinary is the Rust test plugin (tests/tools/src/bin/nri-interop-plugin.rs).
func pluginBinary(t *testing.T) string {
	t.Helper()
	path := os.Getenv("NRI_RS_INTEROP_PLUGIN")
	if path == "" {
		path = "../../../target/debug/nri-interop-plugin"
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("Rust interop plugin missing (%v): run `cargo build -p nri-test-tools` or `make test`", err)
	}
	return abs
}

// testRuntime is a minimal CRI runtime around upstream's adaptation.
type testRuntime struct {
	t         *testing.T
	dir       string
	adapt     *nri.Adaptation
	mu        sync.Mutex
	pods      []*api.PodSandbox
	ctrs      []*api.Container
	updatesMu sync.Mutex
	updates   [][]*api.ContainerUpdate
	updatedC  chan struct{}
}

func newTestRuntime(t *testing.T, pods []*api.PodSandbox, ctrs []*api.Container, opts ...nri.Option) *testRuntime {
	t.Helper()
	// Unix socket paths are short; t.TempDir() may be too long.
	dir, err := os.MkdirTemp("", "nri-rs-interop-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, sub := range []string{"plugins", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := &testRuntime{t: t, dir: dir, pods: pods, ctrs: ctrs, updatedC: make(chan struct{}, 16)}
	options := append([]nri.Option{
		nri.WithPluginPath(filepath.Join(dir, "plugins")),
		nri.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		nri.WithSocketPath(filepath.Join(dir, "nri.sock")),
	}, opts...)
	r.adapt, err = nri.New("interop-runtime", "v1.2.3", r.sync, r.update, options...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *testRuntime) start() {
	r.t.Helper()
	if err := r.adapt.Start(); err != nil {
		r.t.Fatalf("runtime start: %v", err)
	}
	r.t.Cleanup(r.adapt.Stop)
}

func (r *testRuntime) socket() string { return filepath.Join(r.dir, "nri.sock") }

func (r *testRuntime) sync(ctx context.Context, cb nri.SyncCB) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := cb(ctx, r.pods, r.ctrs)
	return err
}

func (r *testRuntime) update(_ context.Context, u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	r.updatesMu.Lock()
	r.updates = append(r.updates, u)
	r.updatesMu.Unlock()
	r.updatedC <- struct{}{}
	return nil, nil
}

// startExternal runs the Rust plugin as an external plugin on the socket.
func (r *testRuntime) startExternal(name, idx string, config map[string]any) *exec.Cmd {
	r.t.Helper()
	cfg, _ := json.Marshal(config)
	cmd := exec.Command(pluginBinary(r.t), "--socket", r.socket(), "--name", name, "--idx", idx, "--config", string(cfg))
	cmd.Stderr = &testWriter{t: r.t, prefix: idx + "-" + name + ": "}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// installPlugin puts the Rust plugin into the plugin directory as
// NN-name, with its configuration in the drop-in directory.
func (r *testRuntime) installPlugin(name, idx string, config map[string]any) {
	r.t.Helper()
	data, err := os.ReadFile(pluginBinary(r.t))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "plugins", idx+"-"+name), data, 0o755); err != nil {
		r.t.Fatal(err)
	}
	cfg, _ := json.Marshal(config)
	if err := os.WriteFile(filepath.Join(r.dir, "conf.d", idx+"-"+name+".conf"), cfg, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// record is one request the plugin saw.
type record map[string]any

func (rec record) str(key string) string { s, _ := rec[key].(string); return s }
func (rec record) num(key string) int    { f, _ := rec[key].(float64); return int(f) }

// recorder reads what the plugin appended to its record file.
type recorder struct {
	t    *testing.T
	path string
}

func newRecorder(t *testing.T, dir, name string) *recorder {
	return &recorder{t: t, path: filepath.Join(dir, name+".jsonl")}
}

func (rc *recorder) all() []record {
	f, err := os.Open(rc.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			// A line being written right now; it is complete next time.
			break
		}
		out = append(out, rec)
	}
	return out
}

// waitFor polls the record file until match finds a record.
func (rc *recorder) waitFor(what string, match func(record) bool) record {
	rc.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		for _, rec := range rc.all() {
			if match(rec) {
				return rec
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	rc.t.Fatalf("plugin never recorded %s; records: %v", what, rc.all())
	return nil
}

func (rc *recorder) waitEvent(event string) record {
	rc.t.Helper()
	return rc.waitFor(event, func(r record) bool { return r.str("event") == event })
}

// events lists the recorded event names after the Synchronize record.
func (rc *recorder) eventsAfterSync() []string {
	var out []string
	synced := false
	for _, rec := range rc.all() {
		ev := rec.str("event")
		if synced {
			out = append(out, ev)
		}
		if ev == "Synchronize" {
			synced = true
		}
	}
	return out
}

type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(w.prefix + line)
	}
	return len(p), nil
}

func makePod(i int, annotationBytes int) *api.PodSandbox {
	pod := &api.PodSandbox{
		Id:        fmt.Sprintf("pod-%04d", i),
		Name:      fmt.Sprintf("pod%d", i),
		Uid:       fmt.Sprintf("uid-%d", i),
		Namespace: "default",
		Labels:    map[string]string{"app": "interop"},
		Annotations: map[string]string{
			"io.kubernetes.pod.namespace": "default",
		},
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/pod" + fmt.Sprint(i)},
	}
	if annotationBytes > 0 {
		pod.Annotations["bulk"] = strings.Repeat("p", annotationBytes)
	}
	return pod
}

func makeContainer(pod *api.PodSandbox, i int, annotationBytes int) *api.Container {
	ctr := &api.Container{
		Id:           fmt.Sprintf("ctr-%05d", i),
		PodSandboxId: pod.Id,
		Name:         fmt.Sprintf("ctr%d", i),
		State:        api.ContainerState_CONTAINER_RUNNING,
		Args:         []string{"/bin/sh", "-c", "sleep inf"},
		Env:          []string{"PATH=/usr/bin:/bin"},
		Labels:       map[string]string{"tier": "test"},
		Annotations:  map[string]string{"a": "b"},
		Linux: &api.LinuxContainer{
			Resources: &api.LinuxResources{
				Cpu:    &api.LinuxCPU{Shares: api.UInt64(1024)},
				Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)},
			},
		},
	}
	if annotationBytes > 0 {
		ctr.Annotations["bulk"] = strings.Repeat("c", annotationBytes)
	}
	return ctr
}

// lifecycle drives one pod and one container through all 13 events and
// returns the CreateContainer response.
func (r *testRuntime) lifecycle(pod *api.PodSandbox, ctr *api.Container) *api.CreateContainerResponse {
	r.t.Helper()
	ctx := context.Background()
	must := func(what string, err error) {
		if err != nil {
			r.t.Fatalf("%s: %v", what, err)
		}
	}
	must("RunPodSandbox", r.adapt.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}))
	_, err := r.adapt.UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{Pod: pod, LinuxResources: &api.LinuxResources{}})
	must("UpdatePodSandbox", err)
	must("PostUpdatePodSandbox", r.adapt.PostUpdatePodSandbox(ctx, &api.PostUpdatePodSandboxRequest{Pod: pod}))
	created, err := r.adapt.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
	must("CreateContainer", err)
	must("PostCreateContainer", r.adapt.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod, Container: ctr}))
	must("StartContainer", r.adapt.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr}))
	must("PostStartContainer", r.adapt.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod, Container: ctr}))
	_, err = r.adapt.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod, Container: ctr, LinuxResources: ctr.Linux.Resources})
	must("UpdateContainer", err)
	must("PostUpdateContainer", r.adapt.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod, Container: ctr}))
	_, err = r.adapt.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr})
	must("StopContainer", err)
	must("RemoveContainer", r.adapt.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr}))
	must("StopPodSandbox", r.adapt.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod}))
	must("RemovePodSandbox", r.adapt.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod}))
	return created
}
