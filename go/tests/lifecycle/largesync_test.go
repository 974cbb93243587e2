package lifecycle

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	upstream "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	nrirs "github.com/nri-rs/nri-rs/go/adaptation"
	"google.golang.org/protobuf/proto"
)

// stateRecorder is an upstream-stub plugin keeping the state it was
// synchronized with (its stub puts split messages together).
type stateRecorder struct {
	mu     sync.Mutex
	pods   []*api.PodSandbox
	ctrs   []*api.Container
	synced chan struct{}
}

func (p *stateRecorder) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pods, p.ctrs = pods, ctrs
	close(p.synced)
	return []*api.ContainerUpdate{{ContainerId: ctrs[len(ctrs)-1].Id}}, nil
}

// RunPodSandbox is there because a stub plugin must subscribe to an event.
func (p *stateRecorder) RunPodSandbox(context.Context, *api.PodSandbox) error { return nil }

// largeState is one pod per ten containers, each container with an
// 8 KiB annotation: about 10 MiB encoded, three messages' worth.
func largeState() ([]*api.PodSandbox, []*api.Container) {
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	blob := strings.Repeat("x", 8<<10)
	for i := 0; i < 1200; i++ {
		if i%10 == 0 {
			pods = append(pods, &api.PodSandbox{Id: fmt.Sprintf("pod%d", i/10), Name: "p", Namespace: "default",
				Labels: map[string]string{"app": fmt.Sprint(i)}})
		}
		ctrs = append(ctrs, &api.Container{Id: fmt.Sprintf("ctr%d", i), PodSandboxId: pods[len(pods)-1].Id,
			Name: "c", State: api.ContainerState_CONTAINER_RUNNING,
			Annotations: map[string]string{"blob": blob, "n": fmt.Sprint(i)}, Args: []string{"sleep", "inf"}})
	}
	return pods, ctrs
}

// syncLarge lets an upstream-stub plugin join a runtime of flavor f whose
// state is pods and ctrs, and returns what the plugin was given and the
// updates the runtime's SyncCB returned.
func syncLarge(t *testing.T, f flavor, pods []*api.PodSandbox, ctrs []*api.Container) (*stateRecorder, []*api.ContainerUpdate) {
	t.Helper()
	dir := t.TempDir()
	socket := filepath.Join(dir, "nri.sock")
	var (
		mu      sync.Mutex
		updates []*api.ContainerUpdate
		syncErr error
	)
	call := func(cb func(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error)) error {
		u, err := cb(context.Background(), pods, ctrs)
		mu.Lock()
		defer mu.Unlock()
		if len(u) > 0 || err != nil {
			updates, syncErr = u, err
		}
		return err
	}
	update := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	var nri interface {
		Start() error
		Stop()
	}
	var err error
	if f.up {
		nri, err = upstream.New("largesync", "0", func(ctx context.Context, cb upstream.SyncCB) error {
			return call(cb)
		}, update, upstream.WithPluginPath(filepath.Join(dir, "plugins")), upstream.WithSocketPath(socket))
	} else {
		nri, err = nrirs.New("largesync", "0", func(ctx context.Context, cb nrirs.SyncCB) error {
			return call(cb)
		}, update, append([]nrirs.Option{nrirs.WithPluginPath(filepath.Join(dir, "plugins")), nrirs.WithSocketPath(socket)}, f.opts...)...)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := nri.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nri.Stop)

	p := &stateRecorder{synced: make(chan struct{})}
	s, err := stub.New(p, stub.WithSocketPath(socket), stub.WithPluginName("recorder"), stub.WithPluginIdx("50"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	// The runtime's SyncCB returns once the plugin's final reply is in.
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		u, err := updates, syncErr
		mu.Unlock()
		if err != nil {
			t.Fatalf("%s: sync: %v", f.name, err)
		}
		select {
		case <-p.synced:
			if u != nil {
				return p, u
			}
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the plugin was not synchronized, or the runtime's SyncCB did not return", f.name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// More state than one message holds reaches a plugin whole and in order,
// under go/adaptation (which encodes it a message at a time) as under
// upstream's adaptation; the plugin's updates come back to the runtime.
func TestStateLargerThanAMessageReachesAJoiningPluginWhole(t *testing.T) {
	pods, ctrs := largeState()
	state := &api.SynchronizeRequest{Pods: pods, Containers: ctrs}
	if n := proto.Size(state); n < 8<<20 {
		t.Fatalf("the state is only %d bytes: it would not be split", n)
	}
	for _, f := range []flavor{{name: "nri-rs"}, {name: "upstream", up: true}} {
		p, updates := syncLarge(t, f, pods, ctrs)
		got := &api.SynchronizeRequest{Pods: p.pods, Containers: p.ctrs}
		if !proto.Equal(got, state) {
			t.Errorf("%s: the plugin got %d pods and %d containers, not the %d and %d of the state (or not as they are)",
				f.name, len(p.pods), len(p.ctrs), len(pods), len(ctrs))
		}
		if len(updates) != 1 || updates[0].ContainerId != "ctr1199" {
			t.Errorf("%s: the runtime got the updates %v", f.name, updates)
		}
	}
}
