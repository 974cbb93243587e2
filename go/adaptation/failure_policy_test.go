package adaptation_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

// slowCreator answers CreateContainer after the request timeout.
type slowCreator struct{}

func (slowCreator) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	time.Sleep(time.Second)
	return nil, nil, nil
}

// An upstream Go-stub plugin that declares fail_request and keep_connected
// (with go/adaptation's FailurePolicy, upstream v0.12.4's alias): each
// creation it does not answer in time fails with upstream's text, and the
// plugin stays for the next one.
func TestAPluginsFailurePolicyIsHonoured(t *testing.T) {
	nri.SetPluginRequestTimeout(300 * time.Millisecond)
	defer nri.SetPluginRequestTimeout(nri.DefaultPluginRequestTimeout)
	dir, err := os.MkdirTemp("", "nri-policy")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "nri.sock")
	r, err := nri.New("policy", "0", noSync, noUpdate,
		nri.WithPluginPath(filepath.Join(dir, "plugins")), nri.WithSocketPath(socket))
	require.NoError(t, err)
	require.NoError(t, r.Start())
	defer r.Stop()

	policy := &nri.FailurePolicy{FailRequest: true, KeepConnected: true}
	s, err := stub.New(slowCreator{}, stub.WithSocketPath(socket), stub.WithPluginName("strict"),
		stub.WithPluginIdx("10"), stub.WithFailurePolicy(policy))
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	defer s.Stop()

	const want = "plugin 10-strict failed to handle CreateContainer request: context deadline exceeded"
	var err1 error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if _, err1 = r.CreateContainer(context.Background(), createReq("c1")); err1 != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.EqualError(t, err1, want)
	assert.ErrorIs(t, err1, context.DeadlineExceeded)
	// Kept connected: the next creation reaches it and fails the same way.
	_, err2 := r.CreateContainer(context.Background(), createReq("c2"))
	assert.EqualError(t, err2, want)
}
