package adaptation

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
)

// Built with nri_debug_gc, an Adaptation whose last use is an event stays
// alive until the event ends. The callback in the middle of the event
// collects garbage and then waits, so that the finalizers this queued run;
// were r's among them, it would panic (take the runtime.KeepAlive(r) out
// of callEvent and this test crashes).
func TestAnAdaptationLivesThroughItsLastEvent(t *testing.T) {
	if !debugGC {
		t.Skip("needs -tags nri_debug_gc")
	}
	for i := 0; i < 5; i++ {
		require.NoError(t, createOnce(t))
	}
	runtime.GC()
}

// createOnce makes and starts an adaptation and creates one container: its
// last use. The adaptation is left to its finalizer.
func createOnce(t *testing.T) error {
	waiting := &builtin.BuiltinPlugin{Base: "waiting", Index: "10", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			time.Sleep(20 * time.Millisecond)
			return &api.CreateContainerResponse{}, nil
		},
	}}
	r, err := New("finalized", "0", noSyncInternal, noUpdateInternal, WithBuiltinPlugins(waiting),
		WithPluginPath(t.TempDir()), WithDisabledExternalConnections())
	if err != nil {
		return err
	}
	if err := r.Start(); err != nil {
		return err
	}
	_, err = r.CreateContainer(context.Background(), skipCreateReq())
	return err
}

func noSyncInternal(ctx context.Context, cb SyncCB) error {
	_, err := cb(ctx, nil, nil)
	return err
}

func noUpdateInternal(context.Context, []*ContainerUpdate) ([]*ContainerUpdate, error) {
	return nil, nil
}
