// Command merge-timing times one CreateContainer whose only plugin, a
// builtin one, replies with many distinct namespace types, through
// upstream's adaptation and through nri-rs's (go/adaptation), alternating
// the two, so that both meet the same load. The same event with an empty
// reply is timed too, so that what the merge costs per entry can be told
// from what any event costs.
//
//	go run ./cmd/merge-timing -n 60000 -runs 11 [-validate]
//
// It links libnri.a (PKG_CONFIG_PATH as for the Go tests; a release build
// for figures worth comparing). Go's build cache does not see which
// libnri.a it links: to compare two builds of it, set CGO_LDFLAGS=-L<dir>
// and a stamp of the library in CGO_CFLAGS for each, as the Makefile does.
// It prints figures and asserts nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"slices"
	"time"

	upstream "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	nrirs "github.com/nri-rs/nri-rs/go/adaptation"
)

// replies hands out prebuilt replies, so that building one is not timed.
type replies struct {
	next []*api.CreateContainerResponse
}

func (r *replies) handler(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
	if len(r.next) == 0 {
		return &api.CreateContainerResponse{}, nil
	}
	rpl := r.next[0]
	r.next = r.next[1:]
	return rpl, nil
}

// fill queues count replies of the namespace types kinds (each reply its
// own entries; the strings are shared, as they are immutable).
func (r *replies) fill(kinds, paths []string, count int) {
	for range count {
		ns := make([]*api.LinuxNamespace, len(kinds))
		for i := range kinds {
			ns[i] = &api.LinuxNamespace{Type: kinds[i], Path: paths[i]}
		}
		r.next = append(r.next, &api.CreateContainerResponse{
			Adjust: &api.ContainerAdjustment{Linux: &api.LinuxContainerAdjustment{Namespaces: ns}},
		})
	}
}

func plugin(r *replies) *builtin.BuiltinPlugin {
	return &builtin.BuiltinPlugin{Base: "namespaces", Index: "10",
		Handlers: builtin.BuiltinHandlers{CreateContainer: r.handler}}
}

// validator accepts every adjustment; with it, both sides merge for a
// validator to read.
func validator() *builtin.BuiltinPlugin {
	return &builtin.BuiltinPlugin{Base: "accept", Index: "90",
		Handlers: builtin.BuiltinHandlers{ValidateContainerAdjustment: func(context.Context, *api.ValidateContainerAdjustmentRequest) error {
			return nil
		}}}
}

type createFn func(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error)

func request(seq int) *api.CreateContainerRequest {
	return &api.CreateContainerRequest{
		Pod: &api.PodSandbox{Id: "pod0", Name: "pod0", Namespace: "default"},
		Container: &api.Container{Id: fmt.Sprintf("ctr-%d", seq), PodSandboxId: "pod0",
			Name: "ctr", Linux: &api.LinuxContainer{}},
	}
}

// timed runs one CreateContainer after a collection, so that garbage left
// by the other side is not collected on this one's time.
func timed(create createFn, seq, want int) time.Duration {
	runtime.GC()
	start := time.Now()
	rsp, err := create(context.Background(), request(seq))
	took := time.Since(start)
	if err != nil {
		log.Fatalf("CreateContainer: %v", err)
	}
	if got := len(rsp.GetAdjust().GetLinux().GetNamespaces()); got != want {
		log.Fatalf("CreateContainer: %d namespaces in the reply, want %d", got, want)
	}
	return took
}

func main() {
	n := flag.Int("n", 60000, "namespace types in the reply")
	runs := flag.Int("runs", 11, "timed events per side and reply (after one untimed)")
	validate := flag.Bool("validate", false, "add a builtin validator that accepts every adjustment")
	flag.Parse()

	kinds, paths := make([]string, *n), make([]string, *n)
	for i := range kinds {
		kinds[i] = fmt.Sprintf("ns%d", i)
		paths[i] = "/proc/1/ns/" + kinds[i]
	}
	dir, err := os.MkdirTemp("", "merge-timing")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	var upReplies, rsReplies replies
	noSync := func(ctx context.Context, cb upstream.SyncCB) error { _, err := cb(ctx, nil, nil); return err }
	noUpdate := func(context.Context, []*upstream.ContainerUpdate) ([]*upstream.ContainerUpdate, error) {
		return nil, nil
	}
	plugins := func(r *replies) []*builtin.BuiltinPlugin {
		if !*validate {
			return []*builtin.BuiltinPlugin{plugin(r)}
		}
		return []*builtin.BuiltinPlugin{plugin(r), validator()}
	}
	up, err := upstream.New("merge-timing", "0", noSync, noUpdate, upstream.WithPluginPath(dir),
		upstream.WithDisabledExternalConnections(), upstream.WithBuiltinPlugins(plugins(&upReplies)...))
	if err != nil {
		log.Fatal(err)
	}
	rs, err := nrirs.New("merge-timing", "0", func(ctx context.Context, cb nrirs.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}, func(context.Context, []*nrirs.ContainerUpdate) ([]*nrirs.ContainerUpdate, error) { return nil, nil },
		nrirs.WithPluginPath(dir), nrirs.WithDisabledExternalConnections(), nrirs.WithBuiltinPlugins(plugins(&rsReplies)...))
	if err != nil {
		log.Fatal(err)
	}
	for _, start := range []func() error{up.Start, rs.Start} {
		if err := start(); err != nil {
			log.Fatal(err)
		}
	}
	defer up.Stop()
	defer rs.Stop()

	sides := []struct {
		name    string
		create  createFn
		replies *replies
	}{{"upstream", up.CreateContainer, &upReplies}, {"nri-rs", rs.CreateContainer, &rsReplies}}
	seq := 0
	// Per side: the empty reply's times and the large reply's.
	times := make([][2][]time.Duration, len(sides))
	for run := 0; run <= *runs; run++ {
		for s, side := range sides {
			// An empty reply (no reply queued), then the large one.
			seq++
			empty := timed(side.create, seq, 0)
			side.replies.fill(kinds, paths, 1)
			seq++
			large := timed(side.create, seq, *n)
			if run > 0 {
				times[s][0] = append(times[s][0], empty)
				times[s][1] = append(times[s][1], large)
			}
		}
	}
	fmt.Printf("CreateContainer, 1 builtin plugin replying %d namespace types (validator: %v), %d alternating runs per side\n",
		*n, *validate, *runs)
	for s, side := range sides {
		empty, large := median(times[s][0]), median(times[s][1])
		fmt.Printf("%-8s empty reply: median %v; large reply: median %v, min %v; per entry (median large - median empty): %.0f ns\n",
			side.name, empty, large, slices.Min(times[s][1]), float64(large-empty)/float64(*n))
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
