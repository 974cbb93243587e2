package adaptation_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

// counting is an upstream-stub plugin that notes how many CreateContainer
// requests it has in hand at once.
type counting struct {
	now, most atomic.Int32
	seen      atomic.Int32
	synced    chan struct{}
}

func (p *counting) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	close(p.synced)
	return nil, nil
}

func (p *counting) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	n := p.now.Add(1)
	for {
		m := p.most.Load()
		if n <= m || p.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(30 * time.Millisecond)
	p.now.Add(-1)
	p.seen.Add(1)
	return nil, nil, nil
}

// mostAtOnce creates a container in each of six pods at once and returns
// the most requests the plugin had in hand at a time.
func mostAtOnce(t *testing.T, opts ...nri.Option) int32 {
	dir, err := os.MkdirTemp("", "nri-rs-pods-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "nri.sock")
	opts = append([]nri.Option{nri.WithPluginPath(filepath.Join(dir, "plugins")), nri.WithSocketPath(socket)}, opts...)
	r, err := nri.New("pods", "0", noSync, noUpdate, opts...)
	require.NoError(t, err)
	require.NoError(t, r.Start())
	t.Cleanup(r.Stop)
	p := &counting{synced: make(chan struct{})}
	s, err := stub.New(p, stub.WithSocketPath(socket), stub.WithPluginName("counting"), stub.WithPluginIdx("10"))
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)
	// Once it answered its Synchronize, a sync block is the barrier after
	// which it is registered, as upstream's own suite uses it.
	select {
	case <-p.synced:
	case <-time.After(5 * time.Second):
		t.Fatal("the plugin was never synchronized")
	}
	r.BlockPluginSync().Unblock()
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			pod := fmt.Sprintf("pod%d", i)
			_, err := r.CreateContainer(context.Background(), &api.CreateContainerRequest{
				Pod:       &api.PodSandbox{Id: pod},
				Container: &api.Container{Id: "c-" + pod, PodSandboxId: pod},
			})
			assert.NoError(t, err)
		}(i)
	}
	wg.Wait()
	assert.EqualValues(t, 6, p.seen.Load())
	return p.most.Load()
}

// With WithPodConcurrency, a plugin named there is sent different pods'
// creations at once; without its name, or without the option, it has one
// request in hand at a time, as under upstream.
func TestWithPodConcurrencyOverlapsPodsForThePluginsItNames(t *testing.T) {
	assert.Greater(t, mostAtOnce(t, nri.WithPodConcurrency("10-counting")), int32(1))
	assert.EqualValues(t, 1, mostAtOnce(t, nri.WithPodConcurrency()))
	assert.EqualValues(t, 1, mostAtOnce(t))
}

// NRI_RS_POD_CONCURRENCY, read at New, stands for WithPodConcurrency of the
// plugins it names, for runtimes that do not pass the option themselves.
func TestPodConcurrencyEnvironmentVariableActsAsTheOption(t *testing.T) {
	t.Setenv("NRI_RS_POD_CONCURRENCY", " other, 10-counting")
	assert.Greater(t, mostAtOnce(t), int32(1))
	t.Setenv("NRI_RS_POD_CONCURRENCY", "")
	assert.EqualValues(t, 1, mostAtOnce(t))
}
