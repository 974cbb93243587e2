package adaptation

import (
	"context"
	"testing"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

func startedAdaptation(t *testing.T, opts ...Option) *Adaptation {
	t.Helper()
	sync := func(ctx context.Context, cb SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	update := func(context.Context, []*ContainerUpdate) ([]*ContainerUpdate, error) { return nil, nil }
	opts = append([]Option{WithPluginPath(t.TempDir()), WithDisabledExternalConnections()}, opts...)
	r, err := New("skip", "0", sync, update, opts...)
	require.NoError(t, err)
	require.NoError(t, r.Start())
	t.Cleanup(r.Stop)
	return r
}

func skipCreateReq() *CreateContainerRequest {
	return &CreateContainerRequest{
		Pod:       &PodSandbox{Id: "pod0"},
		Container: &Container{Id: "ctr0", PodSandboxId: "pod0", Name: "ctr0", Env: []string{"A=1"}},
	}
}

// With no plugin, every event is skipped, and each skipped answer is what
// the core gives for the same event when it does run it.
func TestSkippedEventsAnswerAsTheCoreDoes(t *testing.T) {
	r := startedAdaptation(t)
	for ev := api.Event_RUN_POD_SANDBOX; ev < api.Event_VALIDATE_CONTAINER_ADJUSTMENT; ev++ {
		assert.True(t, r.skips(ev), "%v not skipped without plugins", ev)
	}

	pod := &PodSandbox{Id: "pod0"}
	ctr := &Container{Id: "ctr0", PodSandboxId: "pod0"}
	for name, c := range map[string]struct {
		ev                 api.Event
		req, core, skipped proto.Message
	}{
		"UpdatePodSandbox": {api.Event_UPDATE_POD_SANDBOX, &UpdatePodSandboxRequest{Pod: pod}, &UpdatePodSandboxResponse{}, &UpdatePodSandboxResponse{}},
		"CreateContainer":  {api.Event_CREATE_CONTAINER, skipCreateReq(), &CreateContainerResponse{}, &CreateContainerResponse{}},
		"UpdateContainer":  {api.Event_UPDATE_CONTAINER, &UpdateContainerRequest{Pod: pod, Container: ctr}, &UpdateContainerResponse{}, &UpdateContainerResponse{}},
		"StopContainer":    {api.Event_STOP_CONTAINER, &StopContainerRequest{Pod: pod, Container: ctr}, &StopContainerResponse{}, &StopContainerResponse{}},
	} {
		require.NoError(t, r.relayMessage(context.Background(), c.ev, c.req, c.core), name)
		answerSkipped(c.skipped)
		assert.True(t, proto.Equal(c.core, c.skipped), "%s: the core answers %v, skipping answers %v", name, c.core, c.skipped)
	}
	// The public method answers as the core does, with the parts present.
	rsp, err := r.CreateContainer(context.Background(), skipCreateReq())
	require.NoError(t, err)
	require.NotNil(t, rsp.Adjust.GetLinux().GetResources().GetMemory())
	assert.NotNil(t, rsp.Adjust.GetHooks())
	upd, err := r.UpdateContainer(context.Background(), &UpdateContainerRequest{Pod: pod, Container: ctr})
	require.NoError(t, err)
	assert.Len(t, upd.Update, 1)
}

// Events a plugin subscribes to reach it; the others are skipped. A
// validator takes part in every creation, whatever it subscribes to.
func TestOnlyEventsNoPluginWantsAreSkipped(t *testing.T) {
	creates := 0
	adjuster := &builtin.BuiltinPlugin{Base: "adjuster", Index: "10", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			creates++
			adjust := &api.ContainerAdjustment{}
			adjust.AddEnv("SEEN", "1")
			return &api.CreateContainerResponse{Adjust: adjust}, nil
		},
	}}
	r := startedAdaptation(t, WithBuiltinPlugins(adjuster))
	assert.False(t, r.skips(api.Event_CREATE_CONTAINER))
	assert.True(t, r.skips(api.Event_RUN_POD_SANDBOX))
	rsp, err := r.CreateContainer(context.Background(), skipCreateReq())
	require.NoError(t, err)
	assert.Equal(t, 1, creates)
	require.Len(t, rsp.Adjust.Env, 1)
	assert.Equal(t, "SEEN", rsp.Adjust.Env[0].Key)

	rejected := 0
	validator := &builtin.BuiltinPlugin{Base: "validator", Index: "20", Handlers: builtin.BuiltinHandlers{
		ValidateContainerAdjustment: func(context.Context, *api.ValidateContainerAdjustmentRequest) error {
			rejected++
			return assert.AnError
		},
	}}
	r = startedAdaptation(t, WithBuiltinPlugins(validator))
	assert.False(t, r.skips(api.Event_CREATE_CONTAINER))
	assert.True(t, r.skips(api.Event_UPDATE_CONTAINER))
	_, err = r.CreateContainer(context.Background(), skipCreateReq())
	require.Error(t, err)
	assert.Equal(t, 1, rejected)
}

// Outside Start and Stop nothing is skipped, so the core says why events
// are refused.
func TestEventsOfAStoppedAdaptationAreNotSkipped(t *testing.T) {
	r := startedAdaptation(t)
	r.Stop()
	assert.False(t, r.skips(api.Event_RUN_POD_SANDBOX))
	err := r.RunPodSandbox(context.Background(), &RunPodSandboxRequest{Pod: &PodSandbox{Id: "pod0"}})
	assert.ErrorContains(t, err, "not running")
}
