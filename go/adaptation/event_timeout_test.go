package adaptation_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

// Two builtin plugins of 400 ms each against a 600 ms budget: the event
// fails at the budget, neither plugin is dropped, and the next event sees
// both again.
func TestEventTimeoutBoundsWholeEvents(t *testing.T) {
	var (
		mu    sync.Mutex
		calls []string
	)
	slow := func(name string) *builtin.BuiltinPlugin {
		return &builtin.BuiltinPlugin{Base: name, Index: "10", Handlers: builtin.BuiltinHandlers{
			RunPodSandbox: func(context.Context, *api.RunPodSandboxRequest) error {
				mu.Lock()
				calls = append(calls, name)
				mu.Unlock()
				time.Sleep(400 * time.Millisecond)
				return nil
			},
		}}
	}
	r := newAdaptation(t, noSync, nri.WithEventTimeout(600*time.Millisecond),
		nri.WithBuiltinPlugins(slow("a"), slow("b")))
	require.NoError(t, r.Start())
	defer r.Stop()

	for i := 0; i < 2; i++ {
		started := time.Now()
		err := r.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: &api.PodSandbox{Id: "pod0"}})
		took := time.Since(started)
		require.EqualError(t, err, "RunPodSandbox exceeded the NRI event time budget of 600ms")
		assert.Less(t, took, 900*time.Millisecond)
		time.Sleep(300 * time.Millisecond) // the cut-off handler returns
	}
	mu.Lock()
	assert.Equal(t, []string{"a", "b", "a", "b"}, calls, "both plugins stayed")
	mu.Unlock()

	_, err := nri.New("x", "0", noSync, noUpdate, nri.WithEventTimeout(0))
	assert.EqualError(t, err, "failed to apply option: event timeout 0s is below 1ms")
}

// The runtime's context reaches the core: when it ends while a plugin
// still works on the event, the event returns the context's own error at
// once, as upstream v0.12.4 does; a live context changes nothing.
func TestTheRuntimesContextEndsTheEvent(t *testing.T) {
	slow := &builtin.BuiltinPlugin{Base: "slow", Index: "10", Handlers: builtin.BuiltinHandlers{
		RunPodSandbox: func(context.Context, *api.RunPodSandboxRequest) error {
			time.Sleep(time.Second)
			return nil
		},
		CreateContainer: func(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			adjust := &api.ContainerAdjustment{}
			adjust.AddAnnotation("seen-by", "slow")
			return &api.CreateContainerResponse{Adjust: adjust}, nil
		},
	}}
	r := newAdaptation(t, noSync, nri.WithBuiltinPlugins(slow))
	require.NoError(t, r.Start())
	defer r.Stop()
	pod := &api.RunPodSandboxRequest{Pod: &api.PodSandbox{Id: "pod0"}}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	started := time.Now()
	err := r.RunPodSandbox(ctx, pod)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(started), 600*time.Millisecond)

	ctx, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	started = time.Now()
	err = r.RunPodSandbox(ctx, pod)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(started), 600*time.Millisecond)

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	rsp, err := r.CreateContainer(ctx, createReq("live"))
	require.NoError(t, err)
	assert.Equal(t, "slow", rsp.GetAdjust().GetAnnotations()["seen-by"])
}
