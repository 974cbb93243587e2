package adaptation_test

// The cases of upstream's internal metrics_test.go, ported to the public
// API: a builtin plugin answering like upstream's dummy plugin, driven by
// real events through the Rust core, and the metrics the core reports for
// each operation.

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

type invocation struct {
	plugin, op string
	err        error
}

type latency struct {
	plugin, op string
	latency    time.Duration
}

type adjustment struct {
	plugin, op      string
	adjust          *api.ContainerAdjustment
	updates, evicts int
}

// recordingMetrics is called from the core's threads, hence the lock.
type recordingMetrics struct {
	sync.Mutex
	count       int
	invocations []invocation
	latencies   []latency
	adjustments []adjustment
}

func (m *recordingMetrics) RecordPluginInvocation(plugin, op string, err error) {
	m.Lock()
	defer m.Unlock()
	m.invocations = append(m.invocations, invocation{plugin, op, err})
}

func (m *recordingMetrics) RecordPluginLatency(plugin, op string, l time.Duration) {
	m.Lock()
	defer m.Unlock()
	m.latencies = append(m.latencies, latency{plugin, op, l})
}

func (m *recordingMetrics) RecordPluginAdjustments(plugin, op string, a *api.ContainerAdjustment, updates, evicts int) {
	m.Lock()
	defer m.Unlock()
	m.adjustments = append(m.adjustments, adjustment{plugin, op, a, updates, evicts})
}

func (m *recordingMetrics) UpdatePluginCount(n int) {
	m.Lock()
	defer m.Unlock()
	m.count = n
}

// of returns what was recorded for one operation, and forgets it all.
func (m *recordingMetrics) of(op string) ([]invocation, []latency, []adjustment) {
	m.Lock()
	defer m.Unlock()
	var (
		inv []invocation
		lat []latency
		adj []adjustment
	)
	for _, i := range m.invocations {
		if i.op == op {
			inv = append(inv, i)
		}
	}
	for _, l := range m.latencies {
		if l.op == op {
			lat = append(lat, l)
		}
	}
	for _, a := range m.adjustments {
		if a.op == op {
			adj = append(adj, a)
		}
	}
	m.invocations, m.latencies, m.adjustments = nil, nil, nil
	return inv, lat, adj
}

func update(id string) []*api.ContainerUpdate {
	return []*api.ContainerUpdate{{ContainerId: id}}
}

func evict(ids ...string) []*api.ContainerEviction {
	var e []*api.ContainerEviction
	for _, id := range ids {
		e = append(e, &api.ContainerEviction{ContainerId: id})
	}
	return e
}

// dummyHandlers answer every request as upstream's dummyPlugin does.
func dummyHandlers() builtin.BuiltinHandlers {
	return builtin.BuiltinHandlers{
		Synchronize: func(context.Context, *api.SynchronizeRequest) (*api.SynchronizeResponse, error) {
			return &api.SynchronizeResponse{Update: update("test-container")}, nil
		},
		RunPodSandbox:    func(context.Context, *api.RunPodSandboxRequest) error { return nil },
		StopPodSandbox:   func(context.Context, *api.StopPodSandboxRequest) error { return nil },
		RemovePodSandbox: func(context.Context, *api.RemovePodSandboxRequest) error { return nil },
		UpdatePodSandbox: func(context.Context, *api.UpdatePodSandboxRequest) (*api.UpdatePodSandboxResponse, error) {
			return &api.UpdatePodSandboxResponse{}, nil
		},
		PostUpdatePodSandbox: func(context.Context, *api.PostUpdatePodSandboxRequest) error { return nil },
		CreateContainer: func(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			return &api.CreateContainerResponse{
				Adjust: &api.ContainerAdjustment{},
				Update: update("test-container"),
				Evict:  evict("test-container"),
			}, nil
		},
		PostCreateContainer: func(context.Context, *api.PostCreateContainerRequest) error { return nil },
		StartContainer:      func(context.Context, *api.StartContainerRequest) error { return nil },
		PostStartContainer:  func(context.Context, *api.PostStartContainerRequest) error { return nil },
		UpdateContainer: func(context.Context, *api.UpdateContainerRequest) (*api.UpdateContainerResponse, error) {
			return &api.UpdateContainerResponse{
				Update: update("test-container"),
				Evict:  evict("test-container", "test-container-2"),
			}, nil
		},
		PostUpdateContainer: func(context.Context, *api.PostUpdateContainerRequest) error { return nil },
		StopContainer: func(context.Context, *api.StopContainerRequest) (*api.StopContainerResponse, error) {
			return &api.StopContainerResponse{Update: update("test-container")}, nil
		},
		RemoveContainer:             func(context.Context, *api.RemoveContainerRequest) error { return nil },
		ValidateContainerAdjustment: func(context.Context, *api.ValidateContainerAdjustmentRequest) error { return nil },
	}
}

const testPlugin = "00-test-plugin"

func startWithMetrics(t *testing.T) (*nri.Adaptation, *recordingMetrics) {
	t.Helper()
	m := &recordingMetrics{}
	syncFn := func(ctx context.Context, cb nri.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	updateFn := func(context.Context, []*nri.ContainerUpdate) ([]*nri.ContainerUpdate, error) { return nil, nil }
	r, err := nri.New("metrics-test", "0.0.1", syncFn, updateFn,
		nri.WithPluginPath(t.TempDir()),
		nri.WithDisabledExternalConnections(),
		nri.WithMetrics(m),
		nri.WithBuiltinPlugins(&builtin.BuiltinPlugin{Base: "test-plugin", Index: "00", Handlers: dummyHandlers()}),
	)
	require.NoError(t, err)
	require.NoError(t, r.Start())
	t.Cleanup(r.Stop)
	return r, m
}

func pod() *api.PodSandbox { return &api.PodSandbox{Id: "pod0", Name: "pod0", Namespace: "ns"} }
func ctr() *api.Container {
	return &api.Container{Id: "ctr0", PodSandboxId: "pod0", Name: "ctr0", State: api.ContainerState_CONTAINER_CREATED}
}

// checkCall asserts one successful invocation of op with a latency.
func checkCall(t *testing.T, inv []invocation, lat []latency, op string) {
	t.Helper()
	if assert.Len(t, inv, 1, op) {
		assert.Equal(t, testPlugin, inv[0].plugin)
		assert.Nil(t, inv[0].err)
	}
	if assert.Len(t, lat, 1, op) {
		assert.Equal(t, testPlugin, lat[0].plugin)
		assert.NotZero(t, lat[0].latency)
	}
}

func TestSynchronizeMetrics(t *testing.T) {
	_, m := startWithMetrics(t)
	inv, lat, adj := m.of("Synchronize")
	checkCall(t, inv, lat, "Synchronize")
	require.Len(t, adj, 1)
	assert.Equal(t, testPlugin, adj[0].plugin)
	assert.Equal(t, 1, adj[0].updates)
	assert.Equal(t, 0, adj[0].evicts)
	assert.Nil(t, adj[0].adjust)
	m.Lock()
	assert.Equal(t, 1, m.count, "plugin count")
	m.Unlock()
}

func TestEventMetrics(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		event api.Event
		run   func(*nri.Adaptation) error
		// nil: no adjustments recorded for the event.
		adjust *adjustment
	}{
		{api.Event_RUN_POD_SANDBOX, func(r *nri.Adaptation) error {
			return r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod()})
		}, nil},
		{api.Event_UPDATE_POD_SANDBOX, func(r *nri.Adaptation) error {
			_, err := r.UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{Pod: pod()})
			return err
		}, nil},
		{api.Event_POST_UPDATE_POD_SANDBOX, func(r *nri.Adaptation) error {
			return r.PostUpdatePodSandbox(ctx, &api.PostUpdatePodSandboxRequest{Pod: pod()})
		}, nil},
		{api.Event_STOP_POD_SANDBOX, func(r *nri.Adaptation) error {
			return r.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod()})
		}, nil},
		{api.Event_REMOVE_POD_SANDBOX, func(r *nri.Adaptation) error {
			return r.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod()})
		}, nil},
		{api.Event_CREATE_CONTAINER, func(r *nri.Adaptation) error {
			_, err := r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod(), Container: ctr()})
			return err
		}, &adjustment{updates: 1, evicts: 1, adjust: &api.ContainerAdjustment{}}},
		{api.Event_POST_CREATE_CONTAINER, func(r *nri.Adaptation) error {
			return r.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod(), Container: ctr()})
		}, nil},
		{api.Event_START_CONTAINER, func(r *nri.Adaptation) error {
			return r.StartContainer(ctx, &api.StartContainerRequest{Pod: pod(), Container: ctr()})
		}, nil},
		{api.Event_POST_START_CONTAINER, func(r *nri.Adaptation) error {
			return r.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod(), Container: ctr()})
		}, nil},
		{api.Event_UPDATE_CONTAINER, func(r *nri.Adaptation) error {
			_, err := r.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod(), Container: ctr()})
			return err
		}, &adjustment{updates: 1, evicts: 2}},
		{api.Event_POST_UPDATE_CONTAINER, func(r *nri.Adaptation) error {
			return r.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod(), Container: ctr()})
		}, nil},
		{api.Event_STOP_CONTAINER, func(r *nri.Adaptation) error {
			_, err := r.StopContainer(ctx, &api.StopContainerRequest{Pod: pod(), Container: ctr()})
			return err
		}, &adjustment{updates: 1}},
		{api.Event_REMOVE_CONTAINER, func(r *nri.Adaptation) error {
			return r.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod(), Container: ctr()})
		}, nil},
	}
	for _, tc := range cases {
		op := tc.event.PrettyName()
		t.Run(op, func(t *testing.T) {
			r, m := startWithMetrics(t)
			m.of("") // forget start-up
			require.NoError(t, tc.run(r))
			inv, lat, adj := m.of(op)
			checkCall(t, inv, lat, op)
			if tc.adjust == nil {
				assert.Len(t, adj, 0)
				return
			}
			require.Len(t, adj, 1)
			assert.Equal(t, testPlugin, adj[0].plugin)
			assert.Equal(t, tc.adjust.updates, adj[0].updates)
			assert.Equal(t, tc.adjust.evicts, adj[0].evicts)
			assert.Equal(t, tc.adjust.adjust != nil, adj[0].adjust != nil)
		})
	}
}

// Validation is recorded as an invocation with a latency, never as an
// adjustment (upstream's TestPluginValidateContainerAdjustmentMetrics).
func TestValidateContainerAdjustmentMetrics(t *testing.T) {
	r, m := startWithMetrics(t)
	m.of("")
	_, err := r.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod(), Container: ctr()})
	require.NoError(t, err)
	op := api.Event_VALIDATE_CONTAINER_ADJUSTMENT.PrettyName()
	inv, lat, adj := m.of(op)
	checkCall(t, inv, lat, op)
	assert.Len(t, adj, 0)
}

// podWatcher is an upstream-stub plugin that takes RunPodSandbox only.
type podWatcher struct{}

func (podWatcher) RunPodSandbox(context.Context, *api.PodSandbox) error { return nil }

func (m *recordingMetrics) pluginCount() int {
	m.Lock()
	defer m.Unlock()
	return m.count
}

// A plugin that leaves is pruned, and the plugin count follows, at the next
// event even when no plugin takes that event, as upstream prunes at the end
// of every event. Such events are answered without entering the core as
// long as no plugin has left.
func TestPluginCountFollowsAPluginThatLeavesBeforeAnEventNoPluginTakes(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "nri.sock")
	m := &recordingMetrics{}
	r, err := nri.New("count", "0", noSync, noUpdate, nri.WithMetrics(m),
		nri.WithPluginPath(filepath.Join(dir, "plugins")), nri.WithSocketPath(socket))
	require.NoError(t, err)
	require.NoError(t, r.Start())
	t.Cleanup(r.Stop)

	s, err := stub.New(podWatcher{}, stub.WithSocketPath(socket), stub.WithPluginName("pods"),
		stub.WithPluginIdx("10"))
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	require.Eventually(t, func() bool { return m.pluginCount() == 1 }, 5*time.Second, time.Millisecond,
		"the plugin joins")

	s.Stop()
	start := &api.StartContainerRequest{Pod: pod(), Container: ctr()}
	require.Eventually(t, func() bool {
		require.NoError(t, r.StartContainer(context.Background(), start))
		return m.pluginCount() == 0
	}, 5*time.Second, 10*time.Millisecond, "the plugin count after the plugin left")
}
