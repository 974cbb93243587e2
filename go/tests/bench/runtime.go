package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	upstream "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	validator "github.com/containerd/nri/plugins/default-validator/builtin"
	nrirs "github.com/nri-rs/nri-rs/go/adaptation"
	"github.com/nri-rs/nri-rs/go/tests/internal/runtimeapi"
)

// runtimeAPI is what both adaptations export.
type runtimeAPI = runtimeapi.API

const (
	implUpstream = "upstream"
	implNriRs    = "nri-rs"
	stubGo       = "go"
	stubRust     = "rust"
	stubNone     = "none" // a case without plugins
	stubWasm     = "wasm" // a WASM module on upstream's pkg/api (go/tests/wasm/plugin)
	// The same module at a node's first start: nri-rs's compiled-module
	// cache empty (upstream keeps none, so it has no such configuration).
	stubWasmFirst = "wasm-first"
	// The same module that nri-rs's cache does not hold, run on the
	// wazero engine go/adaptation lends the core (the first start's engine).
	stubWasmLent = "wasm-lent"
	// Go-stub plugins, which nri-rs is told may take requests of
	// different pods at once (WithPodConcurrency naming each of them).
	stubGoPods = "go-pods"
)

type syncCB = func(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error)

// instance is one adaptation with its own socket and (empty) plugin dirs.
type instance struct {
	impl   string
	dir    string
	socket string
	rt     runtimeAPI

	mu      sync.Mutex
	synced  int
	syncCh  chan struct{}
	state   func() ([]*api.PodSandbox, []*api.Container)
	onSync  func() // called right after a plugin's Synchronize returned
	syncErr error
}

// benchValidator is the default validator's configuration in the cases
// that enable it: on, refusing OCI hooks, and the first bench plugin
// required (the checks a node that uses it would run for every container).
func benchValidator() *validator.DefaultValidatorConfig {
	return &validator.DefaultValidatorConfig{Enable: true, RejectOCIHookAdjustment: true, RequiredPlugins: []string{"bench0"}}
}

func newInstance(impl, dir string, withValidator bool, extra ...nrirs.Option) (*instance, error) {
	return newInstanceWith(impl, dir, withValidator, nil, extra...)
}

// newInstanceWith is newInstance whose update callback calls onUpdate
// (if not nil) for every unsolicited update request; extra options go to
// nri-rs's adaptation.
func newInstanceWith(impl, dir string, withValidator bool, onUpdate func(), extra ...nrirs.Option) (*instance, error) {
	in := &instance{impl: impl, dir: dir, socket: filepath.Join(dir, "nri.sock"), syncCh: make(chan struct{}, 64)}
	for _, sub := range []string{"plugins", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	syncFn := func(ctx context.Context, cb syncCB) error {
		var pods []*api.PodSandbox
		var ctrs []*api.Container
		in.mu.Lock()
		state, onSync := in.state, in.onSync
		in.mu.Unlock()
		if state != nil {
			pods, ctrs = state()
		}
		_, err := cb(ctx, pods, ctrs)
		if onSync != nil {
			onSync()
		}
		in.mu.Lock()
		in.synced++
		if err != nil && in.syncErr == nil {
			in.syncErr = err
		}
		in.mu.Unlock()
		in.syncCh <- struct{}{}
		return err
	}
	updateFn := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		if onUpdate != nil {
			onUpdate()
		}
		return nil, nil
	}
	var err error
	switch impl {
	case implUpstream:
		opts := []upstream.Option{upstream.WithPluginPath(filepath.Join(dir, "plugins")),
			upstream.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
			upstream.WithSocketPath(in.socket)}
		if withValidator {
			opts = append(opts, upstream.WithDefaultValidator(benchValidator()))
		}
		in.rt, err = upstream.New("nri-bench", "1.0",
			func(ctx context.Context, cb upstream.SyncCB) error { return syncFn(ctx, cb) }, updateFn, opts...)
	case implNriRs:
		opts := []nrirs.Option{nrirs.WithPluginPath(filepath.Join(dir, "plugins")),
			nrirs.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
			nrirs.WithSocketPath(in.socket)}
		if withValidator {
			opts = append(opts, nrirs.WithDefaultValidator(benchValidator()))
		}
		opts = append(opts, extra...)
		in.rt, err = nrirs.New("nri-bench", "1.0",
			func(ctx context.Context, cb nrirs.SyncCB) error { return syncFn(ctx, cb) }, updateFn, opts...)
	default:
		err = fmt.Errorf("unknown implementation %q", impl)
	}
	if err != nil {
		return nil, err
	}
	if err := in.rt.Start(); err != nil {
		return nil, fmt.Errorf("%s: start: %w", impl, err)
	}
	// Start synchronizes the (no) pre-installed plugins: count only the
	// external plugins from here on.
	in.mu.Lock()
	in.synced = 0
	in.mu.Unlock()
	for len(in.syncCh) > 0 {
		<-in.syncCh
	}
	return in, nil
}

// syncedCount is how many plugins have synchronized so far.
func (in *instance) syncedCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.synced
}

// waitSynced waits until n plugins in all have synchronized, failing early
// if one of the given plugins exits.
func (in *instance) waitSynced(n int, timeout time.Duration, plugins ...*plugin) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		in.mu.Lock()
		synced, err := in.synced, in.syncErr
		in.mu.Unlock()
		if err != nil {
			return fmt.Errorf("%s: synchronize: %w", in.impl, err)
		}
		if synced >= n {
			return nil
		}
		for _, p := range plugins {
			if gone, how := p.exited(); gone {
				return fmt.Errorf("%s: plugin exited before it synchronized: %s", in.impl, how)
			}
		}
		select {
		case <-in.syncCh:
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("%s: %d of %d plugins synchronized after %v", in.impl, synced, n, timeout)
		}
	}
}

// plugin is one plugin process.
type plugin struct {
	stub   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // its stdout, line by line
	stderr *strings.Builder
	done   chan struct{} // closed when it has exited
	// Unsolicited updates it reported at exit (-unsolicited).
	updates int
}

type binaries struct {
	goPlugin   string // go/tests/bench/goplugin
	rustPlugin string // nri-bench-plugin
	core       string // nri-bench-core
	wasmPlugin string // go/tests/wasm/plugin, built for wasip1
}

func (b binaries) plugin(stub string) string {
	if stub == stubGo || stub == stubGoPods {
		return b.goPlugin
	}
	return b.rustPlugin
}

// startPlugin starts plugin number slot (index 10+slot) against socket.
func startPlugin(bins binaries, stub, socket, mode string, slot int, waitStdin bool) (*plugin, error) {
	return startPluginArgs(bins, stub, socket, mode, slot, waitStdin)
}

// startPluginArgs is startPlugin with more flags for the plugin.
func startPluginArgs(bins binaries, stub, socket, mode string, slot int, waitStdin bool, extra ...string) (*plugin, error) {
	args := []string{"-socket", socket, "-name", fmt.Sprintf("bench%d", slot), "-idx", fmt.Sprintf("%02d", 10+slot),
		"-mode", mode, "-slot", strconv.Itoa(slot)}
	if waitStdin {
		args = append(args, "-wait-stdin")
	}
	args = append(args, extra...)
	cmd := exec.Command(bins.plugin(stub), args...)
	p := &plugin{stub: stub, cmd: cmd, stderr: &strings.Builder{}, done: make(chan struct{}), lines: make(chan string, 16)}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s plugin: %w", stub, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *plugin) pid() int { return p.cmd.Process.Pid }

// exited says whether the plugin has exited, and how.
func (p *plugin) exited() (bool, string) {
	select {
	case <-p.done:
		return true, fmt.Sprintf("%v; stderr: %s", p.cmd.ProcessState, p.stderr)
	default:
		return false, ""
	}
}

// waiting waits for the plugin's "waiting" line (with -wait-stdin).
func (p *plugin) waiting() error {
	select {
	case l := <-p.lines:
		if l == "waiting" {
			return nil
		}
		return fmt.Errorf("%s plugin: expected 'waiting', got %q: %s", p.stub, l, p.stderr)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s plugin: not waiting after 30s: %s", p.stub, p.stderr)
	}
}

// release lets a -wait-stdin plugin connect.
func (p *plugin) release() error {
	_, err := io.WriteString(p.stdin, "go\n")
	return err
}

// finish closes the plugin's stdin, which makes it report the number of
// events it handled and exit, and returns that number.
func (p *plugin) finish(timeout time.Duration) (int, error) {
	_ = p.stdin.Close()
	count := -1
	deadline := time.After(timeout)
	for count < 0 {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return 0, fmt.Errorf("%s plugin reported no event count: %s", p.stub, p.stderr)
			}
			if v, ok := strings.CutPrefix(l, "updates="); ok {
				p.updates, _ = strconv.Atoi(v)
			}
			if v, ok := strings.CutPrefix(l, "events="); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					return 0, err
				}
				count = n
			}
		case <-deadline:
			p.kill()
			return 0, fmt.Errorf("%s plugin did not exit when told to", p.stub)
		}
	}
	select {
	case <-p.done:
	case <-deadline:
		p.kill()
	}
	return count, nil
}

// kill ends the plugin at once and waits for it.
func (p *plugin) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	for range p.lines {
	}
	<-p.done
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() < 64<<10 {
		l.w.Write(b)
	}
	return len(b), nil
}
