package plugincompat

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	nri "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
)

// startDiffer runs a differ at indices 5 and 15 against the socket, logging
// to logFile, and returns once both instances logged that they started
// (they are configured; the runtime may still be synchronizing them).
func startDiffer(t *testing.T, bin, socket, logFile string, extra ...string) {
	t.Helper()
	args := append([]string{"-indices", "5,15", "-socket-path", socket, "-log-file", logFile}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "NRI_PLUGIN_SOCKET=", "NRI_PLUGIN_IDX=", "NRI_PLUGIN_NAME=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	started := regexp.MustCompile(`(?i)started plugin .*15-`)
	waitFor(t, "differ started", func() bool {
		data, _ := os.ReadFile(logFile)
		return started.Match(data) && regexp.MustCompile(`(?i)started plugin .*05-`).Match(data)
	})
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var logMsg = regexp.MustCompile(`msg="(.*)"`)

// differLines are the messages the instance at 15 logged for
// CreateContainer, sorted (upstream orders them by Go struct field, nri-rs
// by name).
func differLines(t *testing.T, logFile string) string {
	t.Helper()
	var out []string
	waitFor(t, "differ logged CreateContainer", func() bool {
		data, _ := os.ReadFile(logFile)
		out = out[:0]
		for _, l := range strings.Split(string(data), "\n") {
			if m := logMsg.FindStringSubmatch(l); m != nil && strings.Contains(m[1], "[15] CreateContainer: container:") {
				out = append(out, m[1])
			}
		}
		return len(out) > 0
	})
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestDiffer runs the differ around the device injector (index 10) and
// checks that the instance at 15 reports the mount the injector added,
// under both runtimes (and upstream's differ under upstream's runtime).
func TestDiffer(t *testing.T) {
	c := mkCase(0, "mount injected", map[string]string{
		"mounts.noderesource.dev": "- {source: /home, destination: /host-home, type: bind, options: [bind, ro]}",
	}, "c")
	injector := plugin{name: "device-injector", idx: "10", bin: rustBinary(t, "nri-device-injector")}
	const want = "[15] CreateContainer: container: create: [Mounts 0 Destination]: From: <nil> -> To: /host-home"

	goRuntime := func(t *testing.T, differ string) string {
		quiet()
		dir := tempDir(t)
		install(t, dir, injector)
		socket := filepath.Join(dir, "nri.sock")
		var synced atomic.Int32
		syncFn := func(ctx context.Context, cb nri.SyncCB) error {
			_, err := cb(ctx, nil, nil)
			synced.Add(1)
			return err
		}
		updateFn := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
		r, err := nri.New("nri-compat", "v0.0.0", syncFn, updateFn,
			nri.WithPluginPath(filepath.Join(dir, "plugins")),
			nri.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
			nri.WithSocketPath(socket))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		defer r.Stop()
		logFile := filepath.Join(dir, "differ.log")
		startDiffer(t, differ, socket, logFile)
		// The differ logs "started" once configured, before the runtime
		// has synchronized and registered it: an event sent then would
		// miss an instance. Two syncs done, and a sync block taken once
		// the second's registration is over, mean both are registered.
		waitFor(t, "differ synchronized", func() bool { return synced.Load() >= 2 })
		r.BlockPluginSync().Unblock()
		ctx := context.Background()
		if err := r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: c.pod}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.CreateContainer(ctx, c.request()); err != nil {
			t.Fatal(err)
		}
		return differLines(t, logFile)
	}

	var goRust string
	t.Run("go/rust", func(t *testing.T) {
		goRust = goRuntime(t, rustBinary(t, "nri-differ"))
		if !strings.Contains(goRust, want) {
			t.Errorf("differ logged:\n%s\nwant a line with %q", goRust, want)
		}
	})

	t.Run("rust/rust", func(t *testing.T) {
		dir := tempDir(t)
		install(t, dir, injector)
		writeCases(t, dir, []testCase{c})
		socket := filepath.Join(dir, "nri.sock")
		driver := exec.Command(rustBinary(t, "nri-compat-driver"), dir)
		driver.Env = append(os.Environ(), "NRI_COMPAT_SOCKET="+socket, "NRI_COMPAT_WAIT=3")
		out := &strings.Builder{}
		driver.Stdout, driver.Stderr = out, out
		if err := driver.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "driver socket", func() bool { _, err := os.Stat(socket); return err == nil })
		logFile := filepath.Join(dir, "differ.log")
		startDiffer(t, rustBinary(t, "nri-differ"), socket, logFile)
		if err := driver.Wait(); err != nil {
			t.Fatalf("driver: %v\n%s", err, out)
		}
		if got := differLines(t, logFile); !strings.Contains(got, want) {
			t.Errorf("differ logged:\n%s\nwant a line with %q", got, want)
		}
	})

	t.Run("go/upstream", func(t *testing.T) {
		bin := upstreamPlugin(t, "differ")
		if bin == "" {
			t.Skip("no upstream checkout")
		}
		// Upstream's differ (r3labs/diff on the Go structs) must report
		// the same changes.
		got := goRuntime(t, bin)
		if got != goRust {
			t.Errorf("upstream's differ logged:\n%s\nnri-rs's:\n%s", got, goRust)
		}
	})
}
