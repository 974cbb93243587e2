package adaptation_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

// slowValidator answers validation after the request timeout.
type slowValidator struct{}

func (slowValidator) ValidateContainerAdjustment(context.Context, *api.ValidateContainerAdjustmentRequest) error {
	time.Sleep(time.Second)
	return nil
}

// failingPlugin fails every creation with an error of its own.
type failingPlugin struct{}

func (failingPlugin) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	return nil, nil, errors.New("no room for it")
}

// withExternalPlugin starts an adaptation that accepts external plugins,
// connects plugin to it over its socket (upstream's Go stub) and returns
// the adaptation once creations reach the plugin: the first creation that
// fails.
func withExternalPlugin(t *testing.T, name string, plugin interface{}) (*nri.Adaptation, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "nri-wrap")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "nri.sock")
	r, err := nri.New("wrap", "0", noSync, noUpdate,
		nri.WithPluginPath(filepath.Join(dir, "plugins")), nri.WithSocketPath(socket))
	require.NoError(t, err)
	require.NoError(t, r.Start())
	t.Cleanup(r.Stop)

	s, err := stub.New(plugin, stub.WithSocketPath(socket), stub.WithPluginName(name), stub.WithPluginIdx("10"))
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)

	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if _, err := r.CreateContainer(context.Background(), createReq("c")); err != nil {
			return r, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the plugin never saw a creation")
	return nil, nil
}

// Upstream (v0.12.4 and later) wraps the error of a validator's ttrpc call,
// so a runtime can tell a validator that timed out with errors.Is.
func TestAValidatorTimeoutWrapsContextDeadlineExceeded(t *testing.T) {
	nri.SetPluginRequestTimeout(300 * time.Millisecond)
	defer nri.SetPluginRequestTimeout(nri.DefaultPluginRequestTimeout)

	_, err := withExternalPlugin(t, "slow", slowValidator{})
	assert.EqualError(t, err, "validator plugin 10-slow failed: context deadline exceeded")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	// A timeout is not a status the validator sent.
	_, isStatus := status.FromError(err)
	assert.False(t, isStatus)
}

// A plugin that fails an event: upstream returns the status error of the
// call itself, so the status and its code can be read from it.
func TestAPluginsErrorIsItsStatus(t *testing.T) {
	_, err := withExternalPlugin(t, "failing", failingPlugin{})
	assert.EqualError(t, err, "rpc error: code = Unknown desc = no room for it")
	st, ok := status.FromError(err)
	require.True(t, ok, "status.FromError(%v)", err)
	assert.Equal(t, codes.Unknown, st.Code())
	assert.Equal(t, "no room for it", st.Message())
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
}

// Upstream merges into the CreateContainerRequest the runtime passed: after
// CreateContainer its Container holds the adjusted annotations, env,
// mounts, resources and so on. The core merges into its own copy, and the
// caller's request stays as it was (COMPATIBILITY.md says why no runtime
// depends on it).
func TestCreateContainerLeavesTheCallersRequestAlone(t *testing.T) {
	adjusting := &builtin.BuiltinPlugin{Base: "adjust", Index: "10", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			a := &api.ContainerAdjustment{}
			a.AddAnnotation("added", "yes")
			a.AddEnv("ADDED", "yes")
			return &api.CreateContainerResponse{Adjust: a}, nil
		},
	}}
	r := newAdaptation(t, noSync, nri.WithBuiltinPlugins(adjusting))
	require.NoError(t, r.Start())
	defer r.Stop()

	req := createReq("c")
	before := proto.Clone(req)
	rsp, err := r.CreateContainer(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, "yes", rsp.Adjust.Annotations["added"])
	assert.True(t, proto.Equal(before, req), "request changed: %v", req)
}
