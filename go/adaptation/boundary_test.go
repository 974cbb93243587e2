package adaptation_test

import (
	"context"
	"errors"
	"testing"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	validator "github.com/containerd/nri/plugins/default-validator/builtin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

func noSync(ctx context.Context, cb nri.SyncCB) error {
	_, err := cb(ctx, nil, nil)
	return err
}

func noUpdate(context.Context, []*nri.ContainerUpdate) ([]*nri.ContainerUpdate, error) {
	return nil, nil
}

func newAdaptation(t *testing.T, syncFn nri.SyncFn, opts ...nri.Option) *nri.Adaptation {
	t.Helper()
	opts = append([]nri.Option{nri.WithPluginPath(t.TempDir()), nri.WithDisabledExternalConnections()}, opts...)
	r, err := nri.New("boundary", "0", syncFn, noUpdate, opts...)
	require.NoError(t, err)
	// The core's thread runs from New on: Stop ends it (stopping twice, or
	// before Start, is fine), so no test leaves one to the next.
	t.Cleanup(r.Stop)
	return r
}

func createReq(name string) *api.CreateContainerRequest {
	return &api.CreateContainerRequest{
		Pod:       &api.PodSandbox{Id: "pod0"},
		Container: &api.Container{Id: "ctr-" + name, PodSandboxId: "pod0", Name: name},
	}
}

func TestNewRefusesNilCallbacksAsUpstream(t *testing.T) {
	_, err := nri.New("x", "0", nil, noUpdate)
	assert.EqualError(t, err, "failed to create NRI adaptation, nil SyncFn")
	_, err = nri.New("x", "0", noSync, nil)
	assert.EqualError(t, err, "failed to create NRI adaptation, nil UpdateFn")
	_, err = nri.New("x", "0", noSync, noUpdate, func(*nri.Adaptation) error { return errors.New("bad option") })
	assert.EqualError(t, err, "failed to apply option: bad option")
}

// A zero Adaptation has no core behind it: every call is a clear error,
// never a crash.
func TestZeroAdaptationGivesErrors(t *testing.T) {
	var r nri.Adaptation
	_, err := r.CreateContainer(context.Background(), createReq("c"))
	assert.EqualError(t, err, "adaptation is NULL")
	assert.EqualError(t, r.Start(), "adaptation is NULL")
	r.Stop()
	r.BlockPluginSync().Unblock()
}

func TestEventsOutsideStartAndStopAreRefused(t *testing.T) {
	r := newAdaptation(t, noSync)
	_, err := r.CreateContainer(context.Background(), createReq("early"))
	assert.EqualError(t, err, "NRI adaptation is not running")
	require.NoError(t, r.Start())
	assert.Error(t, r.Start(), "second Start")
	_, err = r.CreateContainer(context.Background(), createReq("ok"))
	require.NoError(t, err)
	r.Stop()
	r.Stop() // twice: harmless
	assert.EqualError(t, r.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{}), "NRI adaptation is not running")
	// And it can be started again.
	require.NoError(t, r.Start())
	_, err = r.CreateContainer(context.Background(), createReq("again"))
	assert.NoError(t, err)
	r.Stop()
}

func TestSyncErrorsAndPanicsFailStart(t *testing.T) {
	failing := newAdaptation(t, func(context.Context, nri.SyncCB) error { return errors.New("runtime says no") })
	err := failing.Start()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "runtime says no")

	panicking := newAdaptation(t, func(context.Context, nri.SyncCB) error { panic("sync exploded") })
	err = panicking.Start()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panic in SyncFn: sync exploded")
}

// A builtin plugin that panics or fails fails the event with a clear
// error; the adaptation stays usable.
func TestBuiltinHandlerPanicsAndErrorsFailOnlyTheEvent(t *testing.T) {
	plugin := &builtin.BuiltinPlugin{Base: "flaky", Index: "10", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			switch req.Container.Name {
			case "panic":
				panic("handler exploded")
			case "fail":
				return nil, errors.New("handler says no")
			}
			adjust := &api.ContainerAdjustment{}
			adjust.AddEnv("FLAKY", "ok")
			return &api.CreateContainerResponse{Adjust: adjust}, nil
		},
	}}
	r := newAdaptation(t, noSync, nri.WithBuiltinPlugins(plugin))
	require.NoError(t, r.Start())
	defer r.Stop()

	_, err := r.CreateContainer(context.Background(), createReq("panic"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panic in builtin plugin: handler exploded")
	_, err = r.CreateContainer(context.Background(), createReq("fail"))
	assert.EqualError(t, err, "handler says no")
	rsp, err := r.CreateContainer(context.Background(), createReq("fine"))
	require.NoError(t, err)
	require.Len(t, rsp.Adjust.Env, 1)
	assert.Equal(t, "FLAKY", rsp.Adjust.Env[0].Key)
}

// The default validator configured from Go runs in the core.
func TestDefaultValidatorFromGoConfig(t *testing.T) {
	hooker := &builtin.BuiltinPlugin{Base: "hooker", Index: "10", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			adjust := &api.ContainerAdjustment{}
			adjust.AddHooks(&api.Hooks{Prestart: []*api.Hook{{Path: "/bin/true"}}})
			return &api.CreateContainerResponse{Adjust: adjust}, nil
		},
	}}
	cfg := &validator.DefaultValidatorConfig{Enable: true, RejectOCIHookAdjustment: true}
	r := newAdaptation(t, noSync, nri.WithBuiltinPlugins(hooker), nri.WithDefaultValidator(cfg))
	require.NoError(t, r.Start())
	defer r.Stop()
	_, err := r.CreateContainer(context.Background(), createReq("hooked"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "attempted restricted OCI hook injection")
}

// WithRequiredPluginsGuardingPods refuses a pod while a required plugin is
// absent, with the validator's reason; without it, as upstream, the pod
// goes through.
func TestRequiredPluginsGuardPodsOnlyWithTheOption(t *testing.T) {
	cfg := &validator.DefaultValidatorConfig{Enable: true, RequiredPlugins: []string{"needed"}}
	for _, guarded := range []bool{false, true} {
		opts := []nri.Option{nri.WithDefaultValidator(cfg)}
		if guarded {
			opts = append(opts, nri.WithRequiredPluginsGuardingPods())
		}
		r := newAdaptation(t, noSync, opts...)
		require.NoError(t, r.Start())
		err := r.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: &api.PodSandbox{Id: "p"}})
		if guarded {
			assert.EqualError(t, err, `validator "00-default-validator" rejected pod sandbox, reason: `+
				`validation error: required plugin "needed" not present`)
		} else {
			assert.NoError(t, err)
		}
		r.Stop()
	}
}
