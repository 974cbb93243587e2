// Package plugincompat checks that nri-rs's Rust sample plugins (plugins/*)
// adjust containers exactly as upstream's Go samples do.
//
// Every case (a pod and a container) runs through up to four set-ups and
// the CreateContainer responses must agree:
//
//   - "go/rust":     upstream's Go runtime adaptation (pkg/adaptation, the
//     version pinned in go.mod) hosting the Rust plugin;
//   - "rust/rust":   nri-rs's Rust adaptation hosting the Rust plugin (driven
//     by plugins/compat-driver);
//   - "go/expected": upstream's Go adaptation hosting a builtin plugin that
//     returns the adjustment written in the case, derived from reading
//     upstream's plugin (this keeps the tests meaningful where upstream's
//     plugin cannot be built);
//   - "go/upstream": upstream's Go adaptation hosting upstream's Go plugin,
//     built from a checkout of upstream's repository at the pinned version
//     named by NRI_UPSTREAM_SRC. Upstream's sample plugins are separate Go
//     modules that the Go module proxy does not serve, so this set-up only
//     runs when a checkout is given (see docs/plugins.md).
//
// Responses are compared after dropping empty container messages (an
// absent `linux` and an empty one mean the same to a runtime); failures are
// compared by status only, since the texts come from different YAML
// libraries.
package plugincompat

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	nri "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
)

// binDir is where cargo put the Rust binaries.
func binDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("NRI_RS_BIN_DIR")
	if dir == "" {
		dir = "../../../target/debug"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func rustBinary(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(binDir(t), name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s missing (%v): run `cargo build --workspace` or `make test`", name, err)
	}
	return path
}

// plugin is one plugin implementation to host.
type plugin struct {
	name   string // registered as idx-name
	idx    string
	bin    string   // executable
	args   []string // command line (the runtime passes none; a wrapper adds them)
	config string   // drop-in configuration, if any
	env    []string // extra environment
}

// install puts p into dir/plugins as a wrapper script that execs the
// binary with its arguments (pre-installed plugins get no arguments from
// the runtime), and its configuration into dir/conf.d.
func install(t *testing.T, dir string, p plugin) {
	t.Helper()
	for _, sub := range []string{"plugins", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var script strings.Builder
	script.WriteString("#!/bin/sh\n")
	for _, e := range p.env {
		fmt.Fprintf(&script, "export %s\n", shellQuote(e))
	}
	fmt.Fprintf(&script, "exec %s", shellQuote(p.bin))
	for _, a := range p.args {
		fmt.Fprintf(&script, " %s", shellQuote(a))
	}
	script.WriteString(" 2>>" + shellQuote(filepath.Join(dir, p.name+".log")) + "\n")
	full := p.idx + "-" + p.name
	if err := os.WriteFile(filepath.Join(dir, "plugins", full), []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	if p.config != "" {
		if err := os.WriteFile(filepath.Join(dir, "conf.d", full+".conf"), []byte(p.config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// tempDir is short: unix socket paths are limited.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nri-compat-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, log := range globLogs(dir) {
				data, _ := os.ReadFile(log)
				t.Logf("%s:\n%s", filepath.Base(log), data)
			}
		}
		if os.Getenv("NRI_COMPAT_KEEP") == "" {
			os.RemoveAll(dir)
		}
	})
	return dir
}

func globLogs(dir string) []string {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	return logs
}

// testCase is one pod and container, and what the plugin should make of
// them.
type testCase struct {
	name string
	pod  *api.PodSandbox
	ctr  *api.Container
	// want is the adjustment upstream's plugin returns (nil: none);
	// wantErr says it fails the request instead.
	want    *api.ContainerAdjustment
	wantErr bool
	// wantRunErr says RunPodSandbox fails.
	wantRunErr bool
}

// outcome is what one set-up answered for one case.
type outcome struct {
	runErr string
	rsp    *api.CreateContainerResponse
	err    string
}

func (o outcome) String() string {
	if o.err != "" {
		return "error: " + o.err
	}
	return prototext(o.rsp)
}

func prototext(m proto.Message) string {
	return fmt.Sprint(m)
}

// request builds the CreateContainerRequest of a case: a deep copy, since
// upstream's adaptation edits the request's container while merging.
func (c testCase) request() *api.CreateContainerRequest {
	return proto.Clone(&api.CreateContainerRequest{Pod: c.pod, Container: c.ctr}).(*api.CreateContainerRequest)
}

// quietOnce silences upstream's runtime logs unless asked for.
var quietOnce sync.Once

func quiet() {
	quietOnce.Do(func() {
		if os.Getenv("NRI_COMPAT_DEBUG") == "" {
			nrilog.Set(quietLogger{})
		}
	})
}

type quietLogger struct{}

func (quietLogger) Debugf(context.Context, string, ...interface{}) {}
func (quietLogger) Infof(context.Context, string, ...interface{})  {}
func (quietLogger) Warnf(context.Context, string, ...interface{})  {}
func (quietLogger) Errorf(context.Context, string, ...interface{}) {}

// runGo runs the cases through upstream's Go adaptation hosting the
// pre-installed plugin p, or the builtin plugin b when p is nil.
func runGo(t *testing.T, p *plugin, b *builtin.BuiltinPlugin, cases []testCase) []outcome {
	t.Helper()
	if p != nil {
		return runGoWith(t, []plugin{*p}, nil, cases)
	}
	return runGoWith(t, nil, []nri.Option{nri.WithBuiltinPlugins(b)}, cases)
}

// runGoWith runs the cases through upstream's Go adaptation hosting the
// pre-installed plugins ps, with extra options.
func runGoWith(t *testing.T, ps []plugin, extra []nri.Option, cases []testCase) []outcome {
	t.Helper()
	quiet()
	dir := tempDir(t)
	opts := append([]nri.Option{
		nri.WithPluginPath(filepath.Join(dir, "plugins")),
		nri.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		nri.WithDisabledExternalConnections(),
	}, extra...)
	for _, sub := range []string{"plugins", "conf.d"} {
		_ = os.MkdirAll(filepath.Join(dir, sub), 0o755)
	}
	for _, p := range ps {
		install(t, dir, p)
	}
	syncFn := func(ctx context.Context, cb nri.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	updateFn := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	r, err := nri.New("nri-compat", "v0.0.0", syncFn, updateFn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatalf("Go adaptation start: %v", err)
	}
	defer r.Stop()
	ctx := context.Background()
	var out []outcome
	for _, c := range cases {
		var o outcome
		if err := r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: c.pod}); err != nil {
			o.runErr = err.Error()
		}
		req := c.request()
		rsp, err := r.CreateContainer(ctx, req)
		if err != nil {
			o.err = err.Error()
		} else {
			o.rsp = rsp
			// The rest of the lifecycle, for plugins acting on it.
			_ = r.StartContainer(ctx, &api.StartContainerRequest{Pod: req.Pod, Container: req.Container})
			_, _ = r.StopContainer(ctx, &api.StopContainerRequest{Pod: req.Pod, Container: req.Container})
		}
		_ = r.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: c.pod})
		out = append(out, o)
	}
	return out
}

// runExpected runs the cases through upstream's Go adaptation hosting a
// builtin plugin that answers each case with its written expectation.
func runExpected(t *testing.T, cases []testCase) []outcome {
	t.Helper()
	byCtr := map[string]testCase{}
	for _, c := range cases {
		byCtr[c.ctr.Id] = c
	}
	b := &builtin.BuiltinPlugin{
		Base:  "expected",
		Index: "50",
		Handlers: builtin.BuiltinHandlers{
			RunPodSandbox: func(_ context.Context, req *api.RunPodSandboxRequest) error {
				for _, c := range cases {
					if c.pod.Id == req.Pod.Id && c.wantRunErr {
						return fmt.Errorf("expected to fail")
					}
				}
				return nil
			},
			CreateContainer: func(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
				c := byCtr[req.Container.Id]
				if c.wantErr {
					return nil, fmt.Errorf("expected to fail")
				}
				return &api.CreateContainerResponse{Adjust: proto.Clone(orEmpty(c.want)).(*api.ContainerAdjustment)}, nil
			},
		},
	}
	return runGo(t, nil, b, cases)
}

func orEmpty(a *api.ContainerAdjustment) *api.ContainerAdjustment {
	if a == nil {
		return &api.ContainerAdjustment{}
	}
	return a
}

// runRust runs the cases through nri-rs's Rust adaptation hosting ps.
func runRust(t *testing.T, cases []testCase, ps ...plugin) []outcome {
	t.Helper()
	dir := tempDir(t)
	for _, p := range ps {
		install(t, dir, p)
	}
	writeCases(t, dir, cases)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, rustBinary(t, "nri-compat-driver"), dir)
	if outText, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nri-compat-driver: %v\n%s", err, outText)
	}
	data, err := os.ReadFile(filepath.Join(dir, "results.bin"))
	if err != nil {
		t.Fatal(err)
	}
	next := func() (bool, []byte) {
		if len(data) < 5 {
			t.Fatalf("results.bin truncated")
		}
		ok, n := data[0] == 0, binary.BigEndian.Uint32(data[1:5])
		body := data[5 : 5+n]
		data = data[5+n:]
		return ok, body
	}
	var out []outcome
	for range cases {
		var o outcome
		if ok, body := next(); !ok {
			o.runErr = string(body)
		}
		ok, body := next()
		if ok {
			o.rsp = &api.CreateContainerResponse{}
			if err := proto.Unmarshal(body, o.rsp); err != nil {
				t.Fatal(err)
			}
		} else {
			o.err = string(body)
		}
		out = append(out, o)
	}
	return out
}

// writeCases writes the driver's cases.bin into dir.
func writeCases(t *testing.T, dir string, cases []testCase) {
	t.Helper()
	var buf bytes.Buffer
	for _, c := range cases {
		data, err := proto.Marshal(c.request())
		if err != nil {
			t.Fatal(err)
		}
		_ = binary.Write(&buf, binary.BigEndian, uint32(len(data)))
		buf.Write(data)
	}
	if err := os.WriteFile(filepath.Join(dir, "cases.bin"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// prunable are the container messages whose empty presence means nothing.
var prunable = map[protoreflect.FullName]bool{
	"nri.pkg.api.v1alpha1.ContainerAdjustment":      true,
	"nri.pkg.api.v1alpha1.LinuxContainerAdjustment": true,
	"nri.pkg.api.v1alpha1.LinuxResources":           true,
	"nri.pkg.api.v1alpha1.LinuxMemory":              true,
	"nri.pkg.api.v1alpha1.LinuxCPU":                 true,
	"nri.pkg.api.v1alpha1.LinuxPids":                true,
	"nri.pkg.api.v1alpha1.Hooks":                    true,
}

// prune drops empty prunable messages below m; reports whether m is empty.
func prune(m protoreflect.Message) bool {
	var fields []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fields = append(fields, fd)
		return true
	})
	for _, fd := range fields {
		if fd.IsList() || fd.IsMap() || fd.Message() == nil {
			continue
		}
		sub := m.Get(fd).Message()
		if prune(sub) && prunable[fd.Message().FullName()] {
			m.Clear(fd)
		}
	}
	n := 0
	m.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool { n++; return true })
	return n == 0
}

func pruned(rsp *api.CreateContainerResponse) *api.CreateContainerResponse {
	if rsp == nil {
		return nil
	}
	c := proto.Clone(rsp).(*api.CreateContainerResponse)
	prune(c.ProtoReflect())
	normalizePids(c.GetAdjust())
	return c
}

// loggerPid is the value the logger plugins put into what they add.
var loggerPid = regexp.MustCompile(`^logger-pid-[0-9]+$`)

// normalizePids makes the logger's process ids comparable.
func normalizePids(a *api.ContainerAdjustment) {
	for k, v := range a.GetAnnotations() {
		a.Annotations[k] = loggerPid.ReplaceAllString(v, "logger-pid-N")
	}
	for _, kv := range a.GetEnv() {
		kv.Value = loggerPid.ReplaceAllString(kv.Value, "logger-pid-N")
	}
}

// agree fails the test unless two set-ups gave the same outcomes.
func agree(t *testing.T, cases []testCase, aName string, a []outcome, bName string, b []outcome) {
	t.Helper()
	for i, c := range cases {
		x, y := a[i], b[i]
		if (x.runErr != "") != (y.runErr != "") {
			t.Errorf("%s: RunPodSandbox: %s: %q, %s: %q", c.name, aName, x.runErr, bName, y.runErr)
		}
		if (x.err != "") != (y.err != "") {
			t.Errorf("%s: CreateContainer: %s: %s\n%s: %s", c.name, aName, x, bName, y)
			continue
		}
		if x.err != "" {
			continue
		}
		if d := cmp.Diff(pruned(x.rsp), pruned(y.rsp), protocmp.Transform()); d != "" {
			t.Errorf("%s: %s and %s differ (-%s +%s):\n%s", c.name, aName, bName, aName, bName, d)
		}
	}
}

// compare runs cases through every available set-up and checks they agree.
// rust is the Rust plugin; upstreamName names upstream's plugin directory
// (plugins/<name>) and upstreamArgs its command line.
func compare(t *testing.T, rust plugin, upstreamName string, upstreamArgs []string, cases []testCase) {
	t.Helper()
	compareWith(t, rust, upstreamName, func(bin string) plugin {
		up := rust
		up.bin, up.args = bin, upstreamArgs
		return up
	}, cases)
}

// compareWith is compare with a function making the upstream plugin to
// host from its binary.
func compareWith(t *testing.T, rust plugin, upstreamName string, mkUpstream func(bin string) plugin, cases []testCase) {
	t.Helper()
	goRust := runGo(t, &rust, nil, cases)
	rustRust := runRust(t, cases, rust)
	expected := runExpected(t, cases)
	agree(t, cases, "go/expected", expected, "go/rust", goRust)
	agree(t, cases, "go/expected", expected, "rust/rust", rustRust)
	if bin := upstreamPlugin(t, upstreamName); bin != "" {
		up := mkUpstream(bin)
		goUp := runGo(t, &up, nil, cases)
		agree(t, cases, "go/upstream", goUp, "go/rust", goRust)
		agree(t, cases, "go/upstream", goUp, "go/expected", expected)
	}
}

var (
	upstreamMu    sync.Mutex
	upstreamBuilt = map[string]string{}
	upstreamDir   string
)

// upstreamPlugin builds upstream's sample plugin from the checkout named by
// NRI_UPSTREAM_SRC, once per test binary; "" when there is none.
func upstreamPlugin(t *testing.T, name string) string {
	t.Helper()
	src := os.Getenv("NRI_UPSTREAM_SRC")
	if src == "" {
		t.Logf("NRI_UPSTREAM_SRC not set: upstream's %s not compared directly (the Go module proxy does not serve upstream's plugin modules)", name)
		return ""
	}
	upstreamMu.Lock()
	defer upstreamMu.Unlock()
	if bin, ok := upstreamBuilt[name]; ok {
		return bin
	}
	if upstreamDir == "" {
		dir, err := os.MkdirTemp("", "nri-upstream-plugins-")
		if err != nil {
			t.Fatal(err)
		}
		upstreamDir = dir
	}
	bin := filepath.Join(upstreamDir, name)
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(src, "plugins", name)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building upstream's %s from %s: %v\n%s", name, cmd.Dir, err, out)
	}
	upstreamBuilt[name] = bin
	return bin
}

// newPod is a pod with the given annotations.
func newPod(id string, annotations map[string]string) *api.PodSandbox {
	return &api.PodSandbox{
		Id: id, Name: "pod-" + id, Uid: "uid-" + id, Namespace: "default",
		Annotations: annotations,
		Linux:       &api.LinuxPodSandbox{CgroupParent: "/kubepods/" + id},
	}
}

// newCtr is a container of pod named name.
func newCtr(pod *api.PodSandbox, id, name string) *api.Container {
	return &api.Container{
		Id: id, PodSandboxId: pod.Id, Name: name,
		Args:        []string{"/bin/sh", "-c", "sleep inf"},
		Env:         []string{"PATH=/bin"},
		Annotations: map[string]string{},
	}
}

// cases numbers ids so every case has its own pod and container.
func mkCase(n int, name string, annotations map[string]string, ctrName string) testCase {
	pod := newPod(fmt.Sprintf("pod%d", n), annotations)
	return testCase{name: name, pod: pod, ctr: newCtr(pod, fmt.Sprintf("ctr%d", n), ctrName)}
}
