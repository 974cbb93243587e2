package adaptation_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

// coreThreads counts this process's threads of the core's runtimes, as
// the core counts them.
func coreThreads(t *testing.T) int {
	t.Helper()
	return nri.CoreThreads()
}

func openFds(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(fds)
}

// Stop ends the core's runtime thread and its blocking pool and closes
// every fd the core opened (its listener, its runtime's epoll and eventfd),
// as upstream's Stop leaves nothing behind; Start begins again.
//
// It runs in a process of its own (this test binary, run again for it
// alone): adaptations other tests leave to finalizers keep their threads
// and fds for as long as the finalizers take, which no count here could
// tell from a leak.
func TestStopLeavesNoThreadOrFdOfTheCore(t *testing.T) {
	if os.Getenv("NRI_RS_STOP_TEST_ALONE") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStopLeavesNoThreadOrFdOfTheCore$", "-test.count=1")
		cmd.Env = append(os.Environ(), "NRI_RS_STOP_TEST_ALONE=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the test in a process of its own:\n%s", out)
		require.Contains(t, string(out), "PASS")
		return
	}
	tagger := &builtin.BuiltinPlugin{Base: "tagger", Index: "10", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			return &api.CreateContainerResponse{}, nil
		},
	}}
	dir, err := os.MkdirTemp("", "nri-rs-stop-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	cycle := func(r *nri.Adaptation) {
		require.NoError(t, r.Start())
		for i := 0; i < 5; i++ {
			_, err := r.CreateContainer(context.Background(), createReq("c"))
			require.NoError(t, err)
		}
		r.Stop()
	}
	newWithSocket := func() *nri.Adaptation {
		r, err := nri.New("stop", "0", noSync, noUpdate,
			nri.WithPluginPath(filepath.Join(dir, "plugins")),
			nri.WithSocketPath(filepath.Join(dir, "nri.sock")),
			nri.WithBuiltinPlugins(tagger))
		require.NoError(t, err)
		return r
	}
	// A first cycle lets Go open what it keeps for itself (its poller).
	cycle(newWithSocket())
	fds := openFds(t)
	threads := coreThreads(t)
	require.Zero(t, threads, "threads of the core after a stopped adaptation")

	r := newWithSocket()
	// The thread names itself once it runs.
	require.Eventually(t, func() bool { return coreThreads(t) > threads }, time.Second, time.Millisecond,
		"the core runs a thread once created")
	for round := 0; round < 2; round++ {
		cycle(r)
		// A thread that has been joined may linger in /proc for a moment,
		// longer on a loaded machine.
		require.Eventually(t, func() bool { return coreThreads(t) <= threads }, 5*time.Second, time.Millisecond,
			"threads of the core left after Stop (round %d)", round)
		require.LessOrEqual(t, openFds(t), fds, "fds left after Stop (round %d)", round)
	}
}

// A runtime's sync that calls back into the core while Stop is ending the
// core's runtime gets an error, not a panic of the core (tokio's "context
// is being shutdown", caught at the C ABI and printed to the daemon's
// stderr before this was fixed).
func TestASyncCallbackDuringStopFailsCleanly(t *testing.T) {
	dir, err := os.MkdirTemp("", "nri-rs-stop-sync-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "nri.sock")
	entered, stopping := make(chan struct{}), make(chan struct{})
	cbErr := make(chan error, 1)
	started := false
	syncFn := func(ctx context.Context, cb nri.SyncCB) error {
		if !started { // Start's, for the (no) pre-installed plugins
			started = true
			_, err := cb(ctx, nil, nil)
			return err
		}
		close(entered)
		<-stopping
		// Stop has begun: let it get as far as ending the core's runtime,
		// which waits for this callback to return.
		time.Sleep(200 * time.Millisecond)
		_, err := cb(ctx, nil, nil)
		cbErr <- err
		return err
	}
	r, err := nri.New("stop-sync", "0", syncFn, noUpdate,
		nri.WithPluginPath(filepath.Join(dir, "plugins")), nri.WithSocketPath(socket))
	require.NoError(t, err)
	require.NoError(t, r.Start())

	s, err := stub.New(slowCreator{}, stub.WithSocketPath(socket), stub.WithPluginName("late"),
		stub.WithPluginIdx("10"))
	require.NoError(t, err)
	go func() { _ = s.Start(context.Background()) }()
	defer s.Stop()

	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin's synchronization never began")
	}
	close(stopping)
	r.Stop()
	select {
	case err := <-cbErr:
		require.Error(t, err, "a sync callback after Stop cannot reach the plugin")
		assert.NotContains(t, err.Error(), "panic")
		assert.NotContains(t, err.Error(), "Tokio")
	case <-time.After(10 * time.Second):
		t.Fatal("the sync callback never returned")
	}
}

// shutdownRecorder is an upstream-stub plugin that notes the runtime's
// Shutdown request.
type shutdownRecorder struct{ got chan struct{} }

func (p *shutdownRecorder) RunPodSandbox(context.Context, *api.PodSandbox) error { return nil }
func (p *shutdownRecorder) Shutdown(context.Context)                             { close(p.got) }

// WithShutdownOnStop makes Stop send plugins Shutdown; without it, as
// upstream, they never get one.
func TestStopSendsShutdownOnlyWithTheOption(t *testing.T) {
	for _, asked := range []bool{false, true} {
		dir, err := os.MkdirTemp("", "nri-rs-shutdown-")
		require.NoError(t, err)
		defer os.RemoveAll(dir)
		socket := filepath.Join(dir, "nri.sock")
		opts := []nri.Option{nri.WithPluginPath(filepath.Join(dir, "plugins")), nri.WithSocketPath(socket)}
		if asked {
			opts = append(opts, nri.WithShutdownOnStop())
		}
		r, err := nri.New("shutdown", "0", noSync, noUpdate, opts...)
		require.NoError(t, err)
		require.NoError(t, r.Start())
		p := &shutdownRecorder{got: make(chan struct{})}
		s, err := stub.New(p, stub.WithSocketPath(socket), stub.WithPluginName("told"), stub.WithPluginIdx("10"))
		require.NoError(t, err)
		require.NoError(t, s.Start(context.Background()))
		closed := r.PluginClosed("10-told")
		require.Eventually(t, func() bool { return !closed() }, 5*time.Second, time.Millisecond,
			"the plugin joins")
		r.Stop()
		select {
		case <-p.got:
			assert.True(t, asked, "Shutdown sent without WithShutdownOnStop")
		case <-time.After(time.Second):
			assert.False(t, asked, "no Shutdown with WithShutdownOnStop")
		}
		s.Stop()
	}
}
