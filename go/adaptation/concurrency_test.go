package adaptation_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

// Many goroutines may call into the core at once; each gets its own
// container's adjustment back.
func TestConcurrentEventsFromManyGoroutines(t *testing.T) {
	tagger := &builtin.BuiltinPlugin{Base: "tagger", Index: "10", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			adjust := &api.ContainerAdjustment{}
			adjust.AddAnnotation("tagged-by", "tagger")
			adjust.AddEnv("CTR", req.Container.Id)
			return &api.CreateContainerResponse{Adjust: adjust}, nil
		},
	}}
	r := newAdaptation(t, noSync, nri.WithBuiltinPlugins(tagger))
	require.NoError(t, r.Start())
	defer r.Stop()

	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				req := createReq(fmt.Sprintf("w%d-%d", w, i))
				rsp, err := r.CreateContainer(context.Background(), req)
				if err != nil {
					errs <- err
					continue
				}
				if env := rsp.GetAdjust().GetEnv(); len(env) != 1 || env[0].Value != req.Container.Id {
					errs <- fmt.Errorf("%s got env %v", req.Container.Id, env)
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The core's own log records reach the runtime's pkg/log logger.
func TestCoreLogsGoToPkgLog(t *testing.T) {
	rec := nri.RecordLog(t)

	p := &builtin.BuiltinPlugin{Base: "quiet", Index: "20", Handlers: builtin.BuiltinHandlers{}}
	r := newAdaptation(t, noSync, nri.WithBuiltinPlugins(p))
	require.NoError(t, r.Start())
	r.Stop()
	// Logged by the Rust core (crates/nri-runtime), not by the Go wrapper.
	assert.True(t, rec.Has("plugin builtin:20-quiet started"), "core log lines: %v", rec)
}
