// Package reaping checks that a Go daemon hosting nri-rs (go/adaptation)
// survives launching and reaping pre-installed plugins where pidfd_open
// is refused, as on kernels before 5.3 or under a seccomp profile that
// denies the call.
//
// Without a pidfd, a library that waits for its children asynchronously is
// tempted to install a SIGCHLD handler. Behind a Go runtime's back, and
// without SA_ONSTACK, such a handler makes Go abort at the next SIGCHLD
// ("non-Go code set up signal handler without SA_ONSTACK flag"): the
// daemon dies the next time it runs a command. So the test runs a host,
// this test binary again, under testdata/nopidfd.c (pidfd_open answers
// ENOSYS): the host starts an adaptation whose plugin directory holds a
// plugin that exits at once and one that runs until Stop kills it, runs
// commands before and after Stop, and checks that no child of its own is
// left, running or unreaped. Upstream's adaptation runs the same host as
// the control: it launches plugins with os/exec and survives.
package reaping

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	upstream "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrirs "github.com/nri-rs/nri-rs/go/adaptation"
	"golang.org/x/sys/unix"
)

// hostDirEnv, when set, makes this binary the host (see TestMain): the
// directory with the plugins, where the host also puts its socket.
const hostDirEnv = "NRI_REAPING_HOST_DIR"

// hostImplEnv names the adaptation the host runs: "nri-rs" or "upstream".
const hostImplEnv = "NRI_REAPING_HOST_IMPL"

// abortText is what the Go runtime prints when it finds a foreign handler.
const abortText = "non-Go code set up signal handler"

// Exit statuses of testdata/nopidfd.c.
const (
	helperNoSeccomp = 77
	helperNoEffect  = 78
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(hostDirEnv); dir != "" {
		os.Exit(host(dir, os.Getenv(hostImplEnv)))
	}
	os.Exit(m.Run())
}

func TestLaunchedPluginsAreReapedWithoutPidfdOrSignalHandler(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("the pidfd_open filter is written for linux/amd64 and linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	helper := buildHelper(t)
	logger := loggerPlugin(t)
	for _, impl := range []string{"upstream", "nri-rs"} {
		t.Run(impl, func(t *testing.T) {
			dir := pluginDir(t, logger)
			out, code := runHost(t, helper, dir, impl)
			if code == helperNoSeccomp {
				t.Skipf("seccomp filters are unavailable here, so pidfd_open cannot be refused: %s", out)
			}
			if code == helperNoEffect {
				t.Fatalf("the seccomp filter was installed but did not refuse pidfd_open: %s", out)
			}
			if strings.Contains(out, abortText) {
				t.Fatalf("the Go host aborted on SIGCHLD (a signal handler was installed in it):\n%s", out)
			}
			if code != 0 {
				t.Fatalf("host exited with status %d:\n%s", code, out)
			}
			if !strings.Contains(out, "host: ok") {
				t.Fatalf("host did not finish its checks:\n%s", out)
			}
			for _, p := range []string{"10-exits", "20-logger"} {
				if _, err := os.Stat(filepath.Join(dir, p+".pid")); err != nil {
					t.Errorf("plugin %s was not launched: %v\nhost:\n%s", p, err, out)
				}
			}
			t.Logf("host output:\n%s", out)
		})
	}
}

// buildHelper compiles testdata/nopidfd.c with the C compiler cgo uses.
func buildHelper(t *testing.T) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	bin := filepath.Join(t.TempDir(), "nopidfd")
	out, err := exec.Command(cc, "-O2", "-Wall", "-Werror", "-o", bin, filepath.Join("testdata", "nopidfd.c")).CombinedOutput()
	if err != nil {
		t.Fatalf("building testdata/nopidfd.c with %s: %v\n%s", cc, err, out)
	}
	return bin
}

// loggerPlugin is the Rust sample logger, a plugin that registers and
// then runs until it is killed.
func loggerPlugin(t *testing.T) string {
	t.Helper()
	path := os.Getenv("NRI_RS_LOGGER_PLUGIN")
	if path == "" {
		path = "../../../target/debug/nri-logger"
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("nri-logger missing (%v): run `cargo build --workspace` or `make test-go`", err)
	}
	return abs
}

// pluginDir makes a directory with plugins/ (two pre-installed plugins,
// each writing its pid to <dir>/<name>.pid when launched) and conf.d/.
// Its path is short: the host's socket goes there too.
func pluginDir(t *testing.T, logger string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nri-reap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, sub := range []string{"plugins", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	plugins := map[string]string{
		// Gone before it registers: the launcher reaps a process that exited.
		"10-exits": "echo $$ >" + q(filepath.Join(dir, "10-exits.pid")) + "\nexit 0\n",
		// Registers and stays until Stop kills it.
		"20-logger": "echo $$ >" + q(filepath.Join(dir, "20-logger.pid")) + "\nexec " + q(logger) +
			" 2>>" + q(filepath.Join(dir, "20-logger.log")) + "\n",
	}
	for name, body := range plugins {
		if err := os.WriteFile(filepath.Join(dir, "plugins", name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runHost runs this test binary as the host under the helper and returns
// its output and exit status.
func runHost(t *testing.T, helper, dir, impl string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helper, os.Args[0])
	cmd.Env = append(os.Environ(), hostDirEnv+"="+dir, hostImplEnv+"="+impl)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit) && exit.Exited():
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("host: %v\n%s", err, out.String())
		return "", -1
	}
}

// adaptation is what the host needs of either implementation.
type adaptation interface {
	Start() error
	Stop()
}

// host is the daemon under test; it returns its exit status.
func host(dir, impl string) int {
	fail := func(format string, args ...any) int {
		fmt.Printf("host: "+format+"\n", args...)
		return 1
	}
	if _, _, errno := unix.Syscall(unix.SYS_PIDFD_OPEN, uintptr(os.Getpid()), 0, 0); errno != unix.ENOSYS {
		return fail("pidfd_open answered %v, not ENOSYS: not running under the filter", errno)
	}

	syncFn := func(ctx context.Context, cb func(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error)) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	updateFn := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	plugins, conf, socket := filepath.Join(dir, "plugins"), filepath.Join(dir, "conf.d"), filepath.Join(dir, "nri.sock")
	var r adaptation
	var err error
	switch impl {
	case "nri-rs":
		r, err = nrirs.New("reaping-host", "v0.0.1",
			func(ctx context.Context, cb nrirs.SyncCB) error { return syncFn(ctx, cb) }, updateFn,
			nrirs.WithPluginPath(plugins), nrirs.WithPluginConfigPath(conf), nrirs.WithSocketPath(socket))
	case "upstream":
		r, err = upstream.New("reaping-host", "v0.0.1",
			func(ctx context.Context, cb upstream.SyncCB) error { return syncFn(ctx, cb) }, updateFn,
			upstream.WithPluginPath(plugins), upstream.WithPluginConfigPath(conf), upstream.WithSocketPath(socket))
	default:
		return fail("unknown adaptation %q", impl)
	}
	if err != nil {
		return fail("new: %v", err)
	}
	if err := r.Start(); err != nil {
		return fail("start: %v", err)
	}
	// Start returns once the pre-installed plugins registered or failed.
	logger, err := readPid(filepath.Join(dir, "20-logger.pid"))
	if err != nil {
		return fail("20-logger not launched: %v", err)
	}
	if state := procState(logger); state == "" || state == "Z" {
		return fail("20-logger (pid %d) is not running after Start (state %q)", logger, state)
	}
	exits, err := readPid(filepath.Join(dir, "10-exits.pid"))
	if err != nil {
		return fail("10-exits not launched: %v", err)
	}
	fmt.Printf("host: plugins launched: 10-exits pid %d, 20-logger pid %d\n", exits, logger)

	// Every command is a SIGCHLD for the host, which a foreign handler
	// without SA_ONSTACK turns into an abort.
	if err := runCommands(40, 500*time.Millisecond); err != nil {
		return fail("%v", err)
	}
	// nri-rs's fallback: a thread waits for each running plugin, here the
	// logger's (the one of 10-exits ended when it had reaped it).
	if impl == "nri-rs" && !eventually(5*time.Second, func() bool { return reaperThreads() == 1 }) {
		return fail("%d reaper threads while 20-logger runs, want 1", reaperThreads())
	}
	stopped := time.Now()
	r.Stop()

	// Both plugins are gone, and reaped: the host has no child left.
	// Upstream never waits for a plugin that failed to start (10-exits
	// stays a zombie until the daemon exits), so the control only says so.
	noChildren := func() bool { return len(children(os.Getpid())) == 0 }
	switch {
	case impl == "upstream":
		if !eventually(2*time.Second, noChildren) {
			fmt.Printf("host: upstream left children: %s\n", strings.Join(children(os.Getpid()), ", "))
		}
	case !eventually(10*time.Second, noChildren):
		return fail("children left 10s after Stop: %s", strings.Join(children(os.Getpid()), ", "))
	default:
		fmt.Printf("host: no child left %v after Stop was called\n", time.Since(stopped).Round(100*time.Microsecond))
	}

	if err := runCommands(40, 500*time.Millisecond); err != nil {
		return fail("%v", err)
	}
	if impl == "nri-rs" && reaperThreads() != 0 {
		return fail("%d reaper threads left after every plugin was reaped", reaperThreads())
	}
	fmt.Println("host: ok")
	return 0
}

// eventually polls ok until it holds or d has passed.
func eventually(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// reaperThreads counts the host's threads named as nri-rs names those
// that wait for a plugin where there is no pidfd.
func reaperThreads() int {
	tasks, _ := os.ReadDir("/proc/self/task")
	n := 0
	for _, task := range tasks {
		comm, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == "nri-reap" {
			n++
		}
	}
	return n
}

// runCommands runs `true` n times over about d.
func runCommands(n int, d time.Duration) error {
	for i := 0; i < n; i++ {
		if err := exec.Command("true").Run(); err != nil {
			return fmt.Errorf("running true: %w", err)
		}
		time.Sleep(d / time.Duration(n))
	}
	return nil
}

func readPid(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// statFields are the fields of /proc/<pid>/stat after the command name:
// state, ppid, ...; nil when the process does not exist.
func statFields(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return nil
	}
	return strings.Fields(s[end+1:])
}

// procState is the process's state letter (Z for a zombie), "" if gone.
func procState(pid int) string {
	if f := statFields(pid); len(f) > 0 {
		return f[0]
	}
	return ""
}

// children lists the processes whose parent is pid, running or zombie,
// as "pid comm state".
func children(pid int) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := statFields(child)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", child))
			out = append(out, fmt.Sprintf("%d %s %s", child, strings.TrimSpace(string(comm)), f[0]))
		}
	}
	return out
}
