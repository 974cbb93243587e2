package adaptation_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/stub"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

// WithPluginRequestTimeout gives one plugin longer than the process-wide
// request timeout: it keeps a slow reply (slowCreator's, a second), and a plugin without it is
// dropped for the same reply, as every slow plugin is upstream.
func TestPluginRequestTimeoutOutlastsTheProcessWideOne(t *testing.T) {
	nri.SetPluginRequestTimeout(300 * time.Millisecond)
	t.Cleanup(func() { nri.SetPluginRequestTimeout(nri.DefaultPluginRequestTimeout) })
	dir, err := os.MkdirTemp("", "nri-rs-timeout-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "nri.sock")
	r, err := nri.New("timeouts", "0", noSync, noUpdate,
		nri.WithPluginPath(filepath.Join(dir, "plugins")), nri.WithSocketPath(socket),
		nri.WithPluginRequestTimeout("10-patient", 3*time.Second))
	require.NoError(t, err)
	require.NoError(t, r.Start())
	defer r.Stop()
	for _, name := range []string{"patient", "hasty"} {
		idx := map[string]string{"patient": "10", "hasty": "20"}[name]
		s, err := stub.New(slowCreator{}, stub.WithSocketPath(socket), stub.WithPluginName(name), stub.WithPluginIdx(idx))
		require.NoError(t, err)
		require.NoError(t, s.Start(context.Background()))
		defer s.Stop()
		closed := r.PluginClosed(idx + "-" + name)
		require.Eventually(t, func() bool { return !closed() }, 5*time.Second, time.Millisecond, "%s joins", name)
	}

	_, err = r.CreateContainer(context.Background(), createReq("c1"))
	require.NoError(t, err)
	assert.False(t, r.PluginClosed("10-patient")(), "the plugin with its own timeout stays")
	assert.True(t, r.PluginClosed("20-hasty")(), "the plugin without is dropped")
}

// The option refuses what cannot be a plugin's timeout.
func TestPluginRequestTimeoutRefusesNoNameAndNoTime(t *testing.T) {
	_, err := nri.New("x", "0", noSync, noUpdate, nri.WithPluginRequestTimeout("", time.Second))
	assert.EqualError(t, err, "failed to apply option: plugin request timeout: empty plugin name")
	_, err = nri.New("x", "0", noSync, noUpdate, nri.WithPluginRequestTimeout("slow", time.Microsecond))
	assert.EqualError(t, err, `failed to apply option: request timeout 1µs of plugin "slow" is below 1ms`)
}
