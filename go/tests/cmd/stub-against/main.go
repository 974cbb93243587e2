// Command stub-against hosts plugins written on nri-rs's Rust stub
// (crates/nri-stub) in upstream's Go runtime, github.com/containerd/nri's
// pkg/adaptation, of whichever release the module it is built in requires.
// tests/conformance/stub-against.sh builds it once per release, so that a
// plugin is known to work with each runtime a node may run.
//
// Two plugins take part:
//
//   - the logger (plugins/logger), pre-installed in the plugin directory:
//     the runtime launches it, hands it a connected socket and its
//     configuration, which subscribes it to the eleven pod and container
//     events and has it add an environment variable and an annotation to
//     every container created;
//   - the template (plugins/template), started by this program and
//     dialing the runtime's socket, as an operator starts a plugin.
//
// One pod and one container then go through their lifecycle. It fails
// unless both plugins were synchronized, the logger's adjustment is in the
// CreateContainer response, the logger logged every event and the
// template logged its pod and container events.
//
//	stub-against -logger target/debug/nri-logger -template target/debug/nri-template
//
// The request types of the state-change events changed between releases
// (a StateChangeEvent before v0.12.0, one request type per event since);
// the events are called through reflection, so that one source builds
// against every release.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
)

const (
	patience = 20 * time.Second
	envKey   = "NRI_RS_STUB_AGAINST"
	annKey   = "nri-rs.test/stub-against"
)

// The events the logger is subscribed to and must log, in lifecycle order.
var events = []string{
	"RunPodSandbox", "CreateContainer", "PostCreateContainer", "StartContainer",
	"PostStartContainer", "UpdateContainer", "PostUpdateContainer", "StopContainer",
	"RemoveContainer", "StopPodSandbox", "RemovePodSandbox",
}

func main() {
	logger := flag.String("logger", "", "the nri-logger binary")
	template := flag.String("template", "", "the nri-template binary")
	flag.Parse()
	if *logger == "" || *template == "" {
		fmt.Fprintln(os.Stderr, "usage: stub-against -logger BIN -template BIN")
		os.Exit(2)
	}
	if err := run(*logger, *template); err != nil {
		fmt.Fprintf(os.Stderr, "stub-against (upstream runtime %s): %v\n", upstreamVersion(), err)
		os.Exit(1)
	}
}

// upstreamVersion is the release of github.com/containerd/nri built in.
func upstreamVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/containerd/nri" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// syncs counts the plugins the runtime synchronized.
type syncs struct {
	mu sync.Mutex
	n  int
	ch chan struct{}
}

func (s *syncs) add() {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

func (s *syncs) waitFor(n int) error {
	deadline := time.After(patience)
	for {
		s.mu.Lock()
		got := s.n
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-s.ch:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			return fmt.Errorf("%d of %d plugins synchronized within %v", got, n, patience)
		}
	}
}

func run(loggerBin, templateBin string) error {
	dir, err := os.MkdirTemp("", "stub-against-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pluginDir := filepath.Join(dir, "plugins")
	confDir := filepath.Join(dir, "conf.d")
	socket := filepath.Join(dir, "nri.sock")
	loggerLog := filepath.Join(dir, "logger.log")
	for _, d := range []string{pluginDir, confDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := copyFile(loggerBin, filepath.Join(pluginDir, "10-logger")); err != nil {
		return err
	}
	config := fmt.Sprintf("logFile: %s\nevents: [%s]\naddEnv: %s\naddAnnotation: %s\n",
		loggerLog, strings.Join(events, ", "), envKey, annKey)
	if err := os.WriteFile(filepath.Join(confDir, "10-logger.conf"), []byte(config), 0o644); err != nil {
		return err
	}

	synced := &syncs{ch: make(chan struct{}, 1)}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		if _, err := cb(ctx, nil, nil); err != nil {
			return err
		}
		synced.add()
		return nil
	}
	updateFn := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	r, err := adaptation.New("stub-against", "v0.0.0", syncFn, updateFn,
		adaptation.WithPluginPath(pluginDir),
		adaptation.WithPluginConfigPath(confDir),
		adaptation.WithSocketPath(socket))
	if err != nil {
		return fmt.Errorf("creating the runtime: %w", err)
	}
	if err := r.Start(); err != nil {
		return fmt.Errorf("starting the runtime (and the pre-installed logger): %w", err)
	}
	defer r.Stop()
	if err := synced.waitFor(1); err != nil {
		return fmt.Errorf("the pre-installed logger: %w", err)
	}

	templateLog, err := os.Create(filepath.Join(dir, "template.log"))
	if err != nil {
		return err
	}
	defer templateLog.Close()
	tmpl := exec.Command(templateBin, "-name", "template", "-idx", "20", "-socket", socket)
	tmpl.Stdout, tmpl.Stderr = templateLog, templateLog
	if err := tmpl.Start(); err != nil {
		return err
	}
	defer func() { _ = tmpl.Process.Kill(); _ = tmpl.Wait() }()
	if err := synced.waitFor(2); err != nil {
		return fmt.Errorf("the template dialing the socket: %w\n%s", err, readFile(templateLog.Name()))
	}

	if err := lifecycle(r); err != nil {
		return err
	}

	logged := readFile(loggerLog)
	for _, e := range events {
		if !strings.Contains(logged, e+":") {
			return fmt.Errorf("the logger did not log %s; its log:\n%s", e, logged)
		}
	}
	templateLogged := readFile(templateLog.Name())
	for _, want := range []string{"Started pod ns/pod", "Creating container ns/pod/ctr", "Updating container", "Stopped container", "Removed pod ns/pod"} {
		if !strings.Contains(templateLogged, want) {
			return fmt.Errorf("the template did not log %q; its log:\n%s", want, templateLogged)
		}
	}
	fmt.Printf("stub-against: upstream runtime %s hosted the Rust-stub logger (launched) and template (dialed): "+
		"both synchronized, %d events delivered, the logger's adjustment applied\n", upstreamVersion(), len(events))
	return nil
}

// lifecycle sends one pod and one container through every event.
func lifecycle(r *adaptation.Adaptation) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	pod := &api.PodSandbox{Id: "pod-id", Name: "pod", Uid: "pod-uid", Namespace: "ns"}
	ctr := &api.Container{Id: "ctr-id", PodSandboxId: pod.Id, Name: "ctr", State: api.ContainerState_CONTAINER_CREATED}

	if err := stateChange(ctx, r, "RunPodSandbox", pod, nil); err != nil {
		return err
	}
	created, err := r.CreateContainer(ctx, &adaptation.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		return fmt.Errorf("CreateContainer: %w", err)
	}
	if err := checkAdjustment(created.GetAdjust()); err != nil {
		return err
	}
	for _, e := range []string{"PostCreateContainer", "StartContainer", "PostStartContainer"} {
		if err := stateChange(ctx, r, e, pod, ctr); err != nil {
			return err
		}
	}
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	shares := &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(512)}}
	if _, err := r.UpdateContainer(ctx, &adaptation.UpdateContainerRequest{Pod: pod, Container: ctr, LinuxResources: shares}); err != nil {
		return fmt.Errorf("UpdateContainer: %w", err)
	}
	if err := stateChange(ctx, r, "PostUpdateContainer", pod, ctr); err != nil {
		return err
	}
	ctr.State = api.ContainerState_CONTAINER_STOPPED
	if _, err := r.StopContainer(ctx, &adaptation.StopContainerRequest{Pod: pod, Container: ctr}); err != nil {
		return fmt.Errorf("StopContainer: %w", err)
	}
	if err := stateChange(ctx, r, "RemoveContainer", pod, ctr); err != nil {
		return err
	}
	for _, e := range []string{"StopPodSandbox", "RemovePodSandbox"} {
		if err := stateChange(ctx, r, e, pod, nil); err != nil {
			return err
		}
	}
	return nil
}

// checkAdjustment wants the logger's environment variable and annotation.
func checkAdjustment(adjust *api.ContainerAdjustment) error {
	if adjust == nil {
		return fmt.Errorf("CreateContainer: no adjustment in the response")
	}
	env := false
	for _, kv := range adjust.GetEnv() {
		if kv.GetKey() == envKey && strings.HasPrefix(kv.GetValue(), "logger-pid-") {
			env = true
		}
	}
	if !env || !strings.HasPrefix(adjust.GetAnnotations()[annKey], "logger-pid-") {
		return fmt.Errorf("CreateContainer: the logger's adjustment is missing: %v", adjust)
	}
	return nil
}

// stateChange calls the runtime's method for event, whose request is a
// StateChangeEvent or the event's own request type depending on the
// release; both have Pod and Container fields.
func stateChange(ctx context.Context, r *adaptation.Adaptation, event string, pod *api.PodSandbox, ctr *api.Container) error {
	method := reflect.ValueOf(r).MethodByName(event)
	if !method.IsValid() {
		return fmt.Errorf("the runtime has no method %s", event)
	}
	req := reflect.New(method.Type().In(1).Elem())
	req.Elem().FieldByName("Pod").Set(reflect.ValueOf(pod))
	if ctr != nil {
		req.Elem().FieldByName("Container").Set(reflect.ValueOf(ctr))
	}
	out := method.Call([]reflect.Value{reflect.ValueOf(ctx), req})
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		return fmt.Errorf("%s: %w", event, err)
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func readFile(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}
