// Command nri-demo runs one pod and one container through an NRI runtime
// hosting nri-rs's Rust plugins, and shows what the plugins changed.
//
// The runtime side here is upstream's Go pkg/adaptation (the version pinned
// in go.mod); the plugins are the Rust nri-logger sample and the Rust
// interop test plugin, launched from the plugin directory exactly as
// containerd and CRI-O launch pre-installed plugins.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	nri "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/sirupsen/logrus"
)

func main() {
	bin := flag.String("bin", "target/debug", "directory with the nri-logger and nri-interop-plugin binaries")
	flag.Parse()
	if err := run(*bin); err != nil {
		fmt.Fprintf(os.Stderr, "nri-demo: %v\n", err)
		os.Exit(1)
	}
}

func install(dir, bin, name, as, config string) error {
	data, err := os.ReadFile(filepath.Join(bin, name))
	if err != nil {
		return fmt.Errorf("plugin binary missing (run `cargo build --workspace`): %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugins", as), data, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "conf.d", as+".conf"), []byte(config), 0o644)
}

func run(bin string) error {
	if os.Getenv("NRI_DEMO_DEBUG") != "" {
		logrus.SetLevel(logrus.DebugLevel)
	}
	if os.Getenv("NRI_DEMO_DEBUG") == "" {
		nrilog.Set(&quietLogger{})
	}

	dir, err := os.MkdirTemp("", "nri-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, sub := range []string{"plugins", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	logFile := filepath.Join(dir, "logger.log")
	if err := install(dir, bin, "nri-logger", "10-logger", fmt.Sprintf(
		"logFile: %s\nevents: [all]\naddAnnotation: demo.nri-rs.io/logger\nsetEnv: LOGGER_PID\n", logFile)); err != nil {
		return err
	}
	if err := install(dir, bin, "nri-interop-plugin", "20-tagger", `{"adjust": true}`); err != nil {
		return err
	}

	syncFn := func(ctx context.Context, cb nri.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	updateFn := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	r, err := nri.New("nri-demo", "0.1.0", syncFn, updateFn,
		nri.WithPluginPath(filepath.Join(dir, "plugins")),
		nri.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		nri.WithDisabledExternalConnections(),
	)
	if err != nil {
		return err
	}
	fmt.Println("== runtime: upstream Go pkg/adaptation; plugins: Rust (nri-rs stub)")
	if err := r.Start(); err != nil {
		return err
	}
	defer r.Stop()
	// Start returns once the pre-installed plugins are registered and
	// synchronized.
	fmt.Println("== plugins registered and synchronized: 10-logger, 20-tagger")

	ctx := context.Background()
	pod := &api.PodSandbox{Id: "pod-1", Name: "demo", Uid: "uid-1", Namespace: "default",
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/demo"}}
	ctr := &api.Container{Id: "ctr-1", PodSandboxId: pod.Id, Name: "app",
		Args: []string{"/bin/sh", "-c", "echo hello"}, Env: []string{"PATH=/bin"},
		Annotations: map[string]string{}}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"RunPodSandbox", func() error { return r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}) }},
		{"CreateContainer", func() error {
			rsp, err := r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
			if err == nil {
				printAdjustment(rsp.GetAdjust())
			}
			return err
		}},
		{"StartContainer", func() error { return r.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr}) }},
		{"UpdateContainer", func() error {
			_, err := r.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod, Container: ctr,
				LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(512)}}})
			return err
		}},
		{"StopContainer", func() error {
			_, err := r.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr})
			return err
		}},
		{"RemoveContainer", func() error { return r.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr}) }},
		{"StopPodSandbox", func() error { return r.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod}) }},
		{"RemovePodSandbox", func() error { return r.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod}) }},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Printf("-> %s ok\n", s.name)
	}

	fmt.Println("== events the Rust logger plugin logged:")
	seen := loggedEvents(logFile, len(steps))
	for _, ev := range seen {
		fmt.Printf("   %s\n", ev)
	}
	if len(seen) < len(steps) {
		return fmt.Errorf("logger logged %d of %d events", len(seen), len(steps))
	}
	return nil
}

func printAdjustment(adj *api.ContainerAdjustment) {
	fmt.Println("== adjustment the runtime got for ctr-1 (merged from both plugins):")
	keys := make([]string, 0, len(adj.GetAnnotations()))
	for k := range adj.GetAnnotations() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("   annotation %s=%s\n", k, adj.GetAnnotations()[k])
	}
	for _, kv := range adj.GetEnv() {
		fmt.Printf("   env        %s=%s\n", kv.Key, kv.Value)
	}
}

// loggedEvents waits for the logger's log file to show the events, then
// lists the distinct event names in the order logged.
func loggedEvents(path string, want int) []string {
	var out []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		out = out[:0]
		data, _ := os.ReadFile(path)
		seen := map[string]bool{}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || !strings.HasSuffix(f[1], ":") {
				continue
			}
			ev := strings.TrimSuffix(f[1], ":")
			if ev != "Synchronize" && !seen[ev] && len(f) >= 3 && strings.HasSuffix(f[2], ":") {
				seen[ev] = true
				out = append(out, ev)
			}
		}
		if len(out) >= want || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quietLogger keeps upstream's informational logs out of the demo output.
type quietLogger struct{}

func (quietLogger) Debugf(context.Context, string, ...interface{}) {}
func (quietLogger) Infof(context.Context, string, ...interface{})  {}
func (quietLogger) Warnf(_ context.Context, f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "runtime warning: "+f+"\n", a...)
}
func (quietLogger) Errorf(_ context.Context, f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "runtime error: "+f+"\n", a...)
}
