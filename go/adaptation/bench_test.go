package adaptation_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

// The Go side of one event crossing: allocations and bytes per
// CreateContainer (b.ReportAllocs), with no plugin and with one builtin
// plugin that adjusts the container. Run with
//
//	go test -run '^$' -bench CreateContainer -benchmem ./adaptation/
//
// The request is of the size containerd sends (about 7 KB encoded: many
// env entries, mounts, labels and annotations); the plugin returns a
// typical adjustment (env, an annotation, a mount, CPU and memory).

// benchRequest builds a CreateContainerRequest of a realistic size.
func benchRequest() *api.CreateContainerRequest {
	pod := &api.PodSandbox{
		Id:          fmt.Sprintf("%064x", 0xbe9c4),
		Name:        "web-6d8f9c7b5-x2k9q",
		Uid:         "0b7c2d1e-3f4a-4b5c-9d8e-7f6a5b4c3d2e",
		Namespace:   "production",
		Labels:      map[string]string{},
		Annotations: map[string]string{},
		Linux: &api.LinuxPodSandbox{
			CgroupParent: "kubepods-burstable-pod0b7c2d1e.slice",
			Resources:    benchResources(),
		},
		Ips: []string{"10.244.1.7", "fd00:10:244::7"},
	}
	ctr := &api.Container{
		Id:           fmt.Sprintf("%064x", 0xc7a),
		PodSandboxId: pod.Id,
		Name:         "app",
		State:        api.ContainerState_CONTAINER_CREATED,
		Labels:       map[string]string{},
		Annotations:  map[string]string{},
		Args:         []string{"/usr/local/bin/server", "--config=/etc/app/config.yaml", "--listen=:8080"},
		Linux: &api.LinuxContainer{
			Namespaces:  []*api.LinuxNamespace{{Type: "pid"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}, {Type: "network"}},
			Resources:   benchResources(),
			OomScoreAdj: api.Int(-997),
			CgroupsPath: "kubepods-burstable-pod0b7c2d1e.slice:cri-containerd:c7a",
		},
		Rlimits: []*api.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1048576, Soft: 1048576}},
		User:    &api.User{Uid: 1000, Gid: 1000},
	}
	for i := 0; i < 8; i++ {
		pod.Labels[fmt.Sprintf("example.com/label-%d", i)] = fmt.Sprintf("value-%d", i)
		pod.Annotations[fmt.Sprintf("example.com/annotation-%d", i)] = fmt.Sprintf("%0120d", i)
		ctr.Labels[fmt.Sprintf("io.kubernetes.label-%d", i)] = fmt.Sprintf("value-%d", i)
		ctr.Annotations[fmt.Sprintf("io.kubernetes.annotation-%d", i)] = fmt.Sprintf("%080d", i)
	}
	for i := 0; i < 45; i++ {
		ctr.Env = append(ctr.Env, fmt.Sprintf("SERVICE_%02d_PORT=tcp://10.96.0.%d:443", i, i))
	}
	for i := 0; i < 11; i++ {
		ctr.Mounts = append(ctr.Mounts, &api.Mount{
			Destination: fmt.Sprintf("/mnt/volume-%d", i),
			Type:        "bind",
			Source:      fmt.Sprintf("/var/lib/kubelet/pods/%s/volumes/kubernetes.io~empty-dir/volume-%d", pod.Uid, i),
			Options:     []string{"rbind", "rprivate", "rw"},
		})
	}
	return &api.CreateContainerRequest{Pod: pod, Container: ctr}
}

func benchResources() *api.LinuxResources {
	return &api.LinuxResources{
		Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)},
		Cpu:    &api.LinuxCPU{Shares: api.UInt64(1024), Quota: api.Int64(100000), Period: api.UInt64(100000)},
		Pids:   &api.LinuxPids{Limit: 4096},
	}
}

// benchPlugin adjusts every container as a typical plugin does.
func benchPlugin() *builtin.BuiltinPlugin {
	return &builtin.BuiltinPlugin{
		Base:  "bench",
		Index: "10",
		Handlers: builtin.BuiltinHandlers{
			CreateContainer: func(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
				adjust := &api.ContainerAdjustment{}
				adjust.AddEnv("BENCH", "1")
				adjust.AddAnnotation("example.com/bench", "adjusted")
				adjust.AddMount(&api.Mount{Destination: "/bench", Type: "bind", Source: "/tmp", Options: []string{"rbind", "ro"}})
				adjust.SetLinuxCPUShares(2048)
				adjust.SetLinuxMemoryLimit(2 << 30)
				return &api.CreateContainerResponse{Adjust: adjust}, nil
			},
		},
	}
}

// A runtime's context that can end (containerd's always can) takes the
// cancellable path: one goroutine and an nri_cancel per event.
func BenchmarkCreateContainerBuiltinPluginCancellableContext(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchCreateIn(b, ctx, nri.WithBuiltinPlugins(benchPlugin()))
}

func benchCreate(b *testing.B, opts ...nri.Option) {
	benchCreateIn(b, context.Background(), opts...)
}

func benchCreateIn(b *testing.B, ctx context.Context, opts ...nri.Option) {
	opts = append([]nri.Option{nri.WithPluginPath(b.TempDir()), nri.WithDisabledExternalConnections()}, opts...)
	r, err := nri.New("bench", "0", noSync, noUpdate, opts...)
	require.NoError(b, err)
	require.NoError(b, r.Start())
	defer r.Stop()

	req := benchRequest()
	if _, err := r.CreateContainer(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.CreateContainer(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreateContainerNoPlugin(b *testing.B) { benchCreate(b) }

func BenchmarkCreateContainerBuiltinPlugin(b *testing.B) {
	benchCreate(b, nri.WithBuiltinPlugins(benchPlugin()))
}
