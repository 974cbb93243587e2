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

// slowSyncDelay is how long slowSyncer takes over Synchronize: over the
// 300ms request timeout these tests set, within the registration timeout.
const slowSyncDelay = 800 * time.Millisecond

// slowSyncer answers Synchronize after slowSyncDelay, closing began when
// its sync begins.
type slowSyncer struct{ began chan struct{} }

func newSlowSyncer() slowSyncer { return slowSyncer{began: make(chan struct{})} }

func (p slowSyncer) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	close(p.began)
	time.Sleep(slowSyncDelay)
	return nil, nil
}

func (slowSyncer) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	return nil, nil, nil
}

// startSyncTimeoutRuntime starts an adaptation on a socket of its own with
// a 300ms request timeout, and returns it and its socket.
func startSyncTimeoutRuntime(t *testing.T, opts ...nri.Option) (*nri.Adaptation, string) {
	nri.SetPluginRequestTimeout(300 * time.Millisecond)
	t.Cleanup(func() { nri.SetPluginRequestTimeout(nri.DefaultPluginRequestTimeout) })
	dir, err := os.MkdirTemp("", "nri-rs-sync-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "nri.sock")
	opts = append([]nri.Option{nri.WithPluginPath(filepath.Join(dir, "plugins")), nri.WithSocketPath(socket)}, opts...)
	r, err := nri.New("sync-timeouts", "0", noSync, noUpdate, opts...)
	require.NoError(t, err)
	require.NoError(t, r.Start())
	t.Cleanup(r.Stop)
	return r, socket
}

// connectSlowSyncer connects an upstream-stub plugin whose sync is slow.
func connectSlowSyncer(t *testing.T, socket, idx, name string) slowSyncer {
	p := newSlowSyncer()
	s, err := stub.New(p, stub.WithSocketPath(socket), stub.WithPluginName(name), stub.WithPluginIdx(idx))
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)
	return p
}

// By default a sync may take the registration timeout: a plugin whose
// Synchronize takes longer than the request timeout joins, where
// upstream drops it.
func TestASyncLongerThanTheRequestTimeoutJoinsByDefault(t *testing.T) {
	r, socket := startSyncTimeoutRuntime(t)
	connectSlowSyncer(t, socket, "10", "slowsync")
	joined := func() bool { return !r.PluginClosed("10-slowsync")() }
	require.Eventually(t, joined, 5*time.Second, time.Millisecond, "the plugin joins")
	_, err := r.CreateContainer(context.Background(), createReq("c1"))
	require.NoError(t, err)
	assert.True(t, joined(), "and stays")
}

// A sync timeout set by WithPluginSyncTimeout is kept as is and drops a
// plugin whose sync takes longer; WithPluginSyncTimeoutFor gives one
// plugin more.
func TestPluginSyncTimeoutIsKeptAsIs(t *testing.T) {
	r, socket := startSyncTimeoutRuntime(t,
		nri.WithPluginSyncTimeout(300*time.Millisecond),
		nri.WithPluginSyncTimeoutFor("10-patient", 3*time.Second))
	connectSlowSyncer(t, socket, "10", "patient")
	require.Eventually(t, func() bool { return !r.PluginClosed("10-patient")() },
		5*time.Second, time.Millisecond, "the plugin with its own sync timeout joins")

	hasty := connectSlowSyncer(t, socket, "20", "hasty")
	select {
	case <-hasty.began:
	case <-time.After(5 * time.Second):
		t.Fatal("the hasty plugin was never sent Synchronize")
	}
	// Kept, it would have joined once its sync ended.
	time.Sleep(slowSyncDelay + 300*time.Millisecond)
	assert.True(t, r.PluginClosed("20-hasty")(), "the plugin under the 300ms sync timeout is dropped")
	assert.False(t, r.PluginClosed("10-patient")())
}

// The options refuse what cannot be a sync timeout.
func TestPluginSyncTimeoutRefusesNoTimeAndNoName(t *testing.T) {
	_, err := nri.New("x", "0", noSync, noUpdate, nri.WithPluginSyncTimeout(time.Microsecond))
	assert.EqualError(t, err, "failed to apply option: sync timeout 1µs is below 1ms")
	_, err = nri.New("x", "0", noSync, noUpdate, nri.WithPluginSyncTimeoutFor("", time.Second))
	assert.EqualError(t, err, "failed to apply option: plugin sync timeout: empty plugin name")
	_, err = nri.New("x", "0", noSync, noUpdate, nri.WithPluginSyncTimeoutFor("slow", 0))
	assert.EqualError(t, err, `failed to apply option: sync timeout 0s of plugin "slow" is below 1ms`)
}
