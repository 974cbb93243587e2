package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/containerd/ttrpc"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// exitOnStatus is the exit status for exit_on, distinct from a clean
// close (0) and a start-up failure (1).
const exitOnStatus = 3

// plugin implements every handler interface of upstream's stub, so the
// subscription is decided by the script alone.
type plugin struct {
	name       string // <idx>-<name>, as in the log lines
	flagScript *script
	stub       stub.Stub

	script    atomic.Pointer[script]
	scriptErr atomic.Pointer[error]
	// configFailed is set when Configure fails, so that the runtime then
	// closing the connection does not turn into a clean exit.
	configFailed atomic.Bool
	// configured is set once the runtime has called Configure, that is
	// once registration is over.
	configured atomic.Bool
	logMu      sync.Mutex
	unsolOnce  sync.Once
}

var (
	_ stub.ConfigureInterface                   = (*plugin)(nil)
	_ stub.SynchronizeInterface                 = (*plugin)(nil)
	_ stub.ShutdownInterface                    = (*plugin)(nil)
	_ stub.RunPodInterface                      = (*plugin)(nil)
	_ stub.UpdatePodInterface                   = (*plugin)(nil)
	_ stub.PostUpdatePodInterface               = (*plugin)(nil)
	_ stub.StopPodInterface                     = (*plugin)(nil)
	_ stub.RemovePodInterface                   = (*plugin)(nil)
	_ stub.CreateContainerInterface             = (*plugin)(nil)
	_ stub.PostCreateContainerInterface         = (*plugin)(nil)
	_ stub.StartContainerInterface              = (*plugin)(nil)
	_ stub.PostStartContainerInterface          = (*plugin)(nil)
	_ stub.UpdateContainerInterface             = (*plugin)(nil)
	_ stub.PostUpdateContainerInterface         = (*plugin)(nil)
	_ stub.StopContainerInterface               = (*plugin)(nil)
	_ stub.RemoveContainerInterface             = (*plugin)(nil)
	_ stub.ValidateContainerAdjustmentInterface = (*plugin)(nil)
)

func newPlugin(name string, flagScript *script) *plugin {
	p := &plugin{name: name, flagScript: flagScript}
	if flagScript != nil {
		p.script.Store(flagScript)
	} else {
		empty, _ := parseScript([]byte("{}"), "(none)")
		p.script.Store(empty)
	}
	return p
}

func (p *plugin) current() *script { return p.script.Load() }

// act applies the script's delay and failure for one handler call.
func (p *plugin) act(event string) error {
	s := p.current()
	if ms := s.DelayMs[event]; ms > 0 {
		logrus.Infof("%s: delaying %s reply by %d ms", p.name, event, ms)
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	if msg, ok := s.Fail[event]; ok {
		logrus.Infof("%s: failing %s: %s", p.name, event, msg)
		return errors.New(msg)
	}
	return nil
}

func clone[T proto.Message](m T) T { return proto.Clone(m).(T) }

func cloneUpdates(in []*api.ContainerUpdate) []*api.ContainerUpdate {
	var out []*api.ContainerUpdate
	for _, u := range in {
		out = append(out, clone(u))
	}
	return out
}

//
// Handlers.
//

func (p *plugin) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	p.configured.Store(true)
	if errp := p.scriptErr.Load(); errp != nil {
		logrus.Errorf("%s: %v", p.name, *errp)
		p.configFailed.Store(true)
		return 0, *errp
	}
	s := p.current()
	logrus.Infof("%s: configured by %s %s with script from %s", p.name, runtime, version, s.source)
	if err := p.act(evConfigure); err != nil {
		p.configFailed.Store(true)
		return 0, err
	}
	// 0 lets the stub subscribe to every implemented handler.
	return s.events, nil
}

func (p *plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	if err := p.act(evSynchronize); err != nil {
		return nil, err
	}
	if r := p.current().syncReply; r != nil {
		return cloneUpdates(r.Update), nil
	}
	return nil, nil
}

func (p *plugin) Shutdown(context.Context) {
	_ = p.act(evShutdown)
}

func (p *plugin) RunPodSandbox(context.Context, *api.PodSandbox) error {
	return p.act("RunPodSandbox")
}

func (p *plugin) UpdatePodSandbox(context.Context, *api.PodSandbox, *api.LinuxResources, *api.LinuxResources) error {
	return p.act("UpdatePodSandbox")
}

func (p *plugin) PostUpdatePodSandbox(context.Context, *api.PodSandbox) error {
	return p.act("PostUpdatePodSandbox")
}

func (p *plugin) StopPodSandbox(context.Context, *api.PodSandbox) error {
	return p.act("StopPodSandbox")
}

func (p *plugin) RemovePodSandbox(context.Context, *api.PodSandbox) error {
	return p.act("RemovePodSandbox")
}

func (p *plugin) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if err := p.act("CreateContainer"); err != nil {
		return nil, nil, err
	}
	r := p.current().createReply
	if r == nil {
		return nil, nil, nil
	}
	var adjust *api.ContainerAdjustment
	if r.Adjust != nil {
		adjust = clone(r.Adjust)
	}
	return adjust, cloneUpdates(r.Update), nil
}

func (p *plugin) PostCreateContainer(context.Context, *api.PodSandbox, *api.Container) error {
	return p.act("PostCreateContainer")
}

func (p *plugin) StartContainer(context.Context, *api.PodSandbox, *api.Container) error {
	return p.act("StartContainer")
}

func (p *plugin) PostStartContainer(context.Context, *api.PodSandbox, *api.Container) error {
	return p.act("PostStartContainer")
}

func (p *plugin) UpdateContainer(context.Context, *api.PodSandbox, *api.Container, *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	if err := p.act("UpdateContainer"); err != nil {
		return nil, err
	}
	if r := p.current().updateReply; r != nil {
		return cloneUpdates(r.Update), nil
	}
	return nil, nil
}

func (p *plugin) PostUpdateContainer(context.Context, *api.PodSandbox, *api.Container) error {
	return p.act("PostUpdateContainer")
}

func (p *plugin) StopContainer(context.Context, *api.PodSandbox, *api.Container) ([]*api.ContainerUpdate, error) {
	if err := p.act("StopContainer"); err != nil {
		return nil, err
	}
	if r := p.current().stopReply; r != nil {
		return cloneUpdates(r.Update), nil
	}
	return nil, nil
}

func (p *plugin) RemoveContainer(context.Context, *api.PodSandbox, *api.Container) error {
	return p.act("RemoveContainer")
}

// ValidateContainerAdjustment rejects when the script says so. The stub
// turns any error from here into a Reject with the error text as Reason,
// so "fail" rejects too.
func (p *plugin) ValidateContainerAdjustment(context.Context, *api.ValidateContainerAdjustmentRequest) error {
	if err := p.act("ValidateContainerAdjustment"); err != nil {
		return err
	}
	if v := p.current().Validate; v != nil && v.Reject {
		return errors.New(v.Reason)
	}
	return nil
}

//
// Wire-level hooks: a ttrpc server interceptor, installed through the
// stub's WithTTRPCOptions, sees every request as it arrives, before the
// stub reassembles Synchronize chunks or dispatches StateChange.
//

// logEntry is one line of the script's log.
type logEntry struct {
	Plugin     string `json:"plugin"`
	Event      string `json:"event"`
	Method     string `json:"method"`
	Pod        string `json:"pod"`
	Container  string `json:"container"`
	More       bool   `json:"more"`
	Pods       int    `json:"pods"`
	Containers int    `json:"containers"`
	Config     string `json:"config"`
	// What the runtime sent in Configure.
	RuntimeName           string `json:"runtime_name"`
	RuntimeVersion        string `json:"runtime_version"`
	NRIVersion            string `json:"nri_version"`
	RegistrationTimeoutMs int64  `json:"registration_timeout_ms"`
	RequestTimeoutMs      int64  `json:"request_timeout_ms"`
	// With the script's spans: when the request arrived and was answered.
	StartedNs int64 `json:"started_ns,omitempty"`
	EndedNs   int64 `json:"ended_ns,omitempty"`
}

// intercept logs each request and applies exit_on as soon as the request
// is decoded (that is, before the stub's handler runs), and overrides the
// Configure reply's event mask if the script asks for it.
func (p *plugin) intercept(ctx context.Context, unmarshal ttrpc.Unmarshaler, info *ttrpc.UnaryServerInfo, method ttrpc.Method) (interface{}, error) {
	rpc := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	var req interface{}
	var span *logEntry
	started := time.Now()
	hooked := func(obj interface{}) error {
		if err := unmarshal(obj); err != nil {
			return err
		}
		req = obj
		span = p.received(rpc, obj)
		return nil
	}

	rsp, err := method(ctx, hooked)
	if span != nil {
		span.StartedNs, span.EndedNs = started.UnixNano(), time.Now().UnixNano()
		if err := p.appendLog(p.current().Log, span); err != nil {
			logrus.Errorf("%s: logging %s: %v", p.name, span.Event, err)
		}
	}
	if err != nil {
		return rsp, err
	}

	switch r := rsp.(type) {
	case *api.ConfigureResponse:
		if m := p.current().Configure; m != nil && m.EventsMask != nil {
			logrus.Infof("%s: replying to Configure with raw event mask 0x%x instead of 0x%x",
				p.name, *m.EventsMask, r.Events)
			r.Events = *m.EventsMask
		}
	case *api.SynchronizeResponse:
		if sr, ok := req.(*api.SynchronizeRequest); ok && !sr.More {
			if u := p.current().Unsolicited; u != nil {
				p.unsolOnce.Do(func() { go p.sendUnsolicited() })
			}
		}
	}
	return rsp, nil
}

// received handles one decoded request before the stub sees it. With the
// script's spans, the entry is returned to be logged once answered.
func (p *plugin) received(rpc string, req interface{}) *logEntry {
	e := logEntry{Plugin: p.name, Event: rpc, Method: rpc}
	switch r := req.(type) {
	case *api.ConfigureRequest:
		e.Config = r.Config
		e.RuntimeName, e.RuntimeVersion, e.NRIVersion = r.RuntimeName, r.RuntimeVersion, r.NRIVersion
		e.RegistrationTimeoutMs, e.RequestTimeoutMs = r.RegistrationTimeout, r.RequestTimeout
		s, err := resolveScript(p.flagScript, r.Config)
		if err != nil {
			// Configure's handler fails with this, so the stub's Start
			// returns it and the process exits with an error.
			p.scriptErr.Store(&err)
		} else {
			p.script.Store(s)
		}
	case *api.SynchronizeRequest:
		e.More = r.More
		e.Pods = len(r.Pods)
		e.Containers = len(r.Containers)
	case *api.StateChangeEvent:
		e.Event = r.Event.PrettyName()
	}
	if r, ok := req.(interface{ GetPod() *api.PodSandbox }); ok {
		e.Pod = r.GetPod().GetId()
	}
	if r, ok := req.(interface{ GetContainer() *api.Container }); ok {
		e.Container = r.GetContainer().GetId()
	}

	s := p.current()
	var span *logEntry
	switch {
	case s.Log != "" && s.Spans:
		span = &e
	case s.Log != "":
		if err := p.appendLog(s.Log, &e); err != nil {
			logrus.Errorf("%s: logging %s: %v", p.name, e.Event, err)
		}
	}
	if s.ExitOn != "" && s.ExitOn == e.Event {
		logrus.Warnf("%s: exit_on %s: exiting with status %d", p.name, e.Event, exitOnStatus)
		os.Exit(exitOnStatus)
	}
	return span
}

// appendLog appends one line and fsyncs it, so a test that got the reply
// can read the line.
func (p *plugin) appendLog(path string, e *logEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(append(line, '\n')); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// unsolicitedResult is what result_log receives.
type unsolicitedResult struct {
	Failed []json.RawMessage `json:"failed"`
	Error  string            `json:"error"`
}

// sendUnsolicited sends the script's UpdateContainers request and records
// the outcome.
func (p *plugin) sendUnsolicited() {
	s := p.current()
	u := s.Unsolicited
	time.Sleep(time.Duration(u.AfterMs) * time.Millisecond)
	logrus.Infof("%s: requesting %d unsolicited container updates", p.name, len(s.unsolicited))
	failed, err := p.stub.UpdateContainers(cloneUpdates(s.unsolicited))

	res := unsolicitedResult{Failed: []json.RawMessage{}}
	if err != nil {
		res.Error = err.Error()
		logrus.Warnf("%s: UpdateContainers: %v", p.name, err)
	}
	for _, f := range failed {
		b, merr := protojson.Marshal(f)
		if merr != nil {
			b, _ = json.Marshal(fmt.Sprintf("unencodable update: %v", merr))
		}
		res.Failed = append(res.Failed, b)
	}
	if u.ResultLog == "" {
		return
	}
	if werr := writeFileAtomic(u.ResultLog, &res); werr != nil {
		logrus.Errorf("%s: writing %s: %v", p.name, u.ResultLog, werr)
	}
}

// writeFileAtomic writes v as JSON so that a reader never sees a partial
// file: into a temporary file in the same directory, then renamed.
func writeFileAtomic(path string, v interface{}) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err = tmp.Write(append(data, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
