// Command example shows, in one page, how a container runtime hosts NRI
// plugins with nri-rs: the same code as with upstream's pkg/adaptation,
// only the import path differs.
//
//	make build && cd go && go run ./example -plugin ../target/debug/nri-logger
//
// It installs one plugin binary as a pre-installed plugin ("10-<name>"),
// starts the adaptation (which launches and synchronizes the plugin), runs
// a pod and a container through it, and prints the adjustment the runtime
// would apply to the container's OCI spec.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/containerd/nri/pkg/api"

	// The one line a runtime changes: upstream's
	// "github.com/containerd/nri/pkg/adaptation" becomes
	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

func main() {
	plugin := flag.String("plugin", "../target/debug/nri-logger", "an NRI plugin binary")
	config := flag.String("config", "setEnv: EXAMPLE_PID\naddAnnotation: example.nri-rs.io/seen\n", "the plugin's configuration")
	flag.Parse()

	// Pre-installed plugins live in a directory as NN-name executables,
	// with their configuration in a drop-in directory.
	dir, err := os.MkdirTemp("", "nri-example-")
	check(err)
	defer os.RemoveAll(dir)
	plugins, confs := filepath.Join(dir, "plugins"), filepath.Join(dir, "conf.d")
	check(os.MkdirAll(plugins, 0o755))
	check(os.MkdirAll(confs, 0o755))
	name := "10-" + filepath.Base(*plugin)
	bin, err := os.ReadFile(*plugin)
	check(err)
	check(os.WriteFile(filepath.Join(plugins, name), bin, 0o755))
	check(os.WriteFile(filepath.Join(confs, name+".conf"), []byte(*config), 0o644))

	// The runtime's two callbacks: hand its state to new plugins (with its
	// own lock held), and apply container updates plugins ask for.
	syncFn := func(ctx context.Context, cb nri.SyncCB) error {
		updates, err := cb(ctx, nil, nil) // no pods or containers yet
		fmt.Printf("plugins synchronized, %d updates requested\n", len(updates))
		return err
	}
	updateFn := func(_ context.Context, u []*nri.ContainerUpdate) ([]*nri.ContainerUpdate, error) {
		return nil, nil // nothing failed
	}

	r, err := nri.New("example-runtime", "1.0", syncFn, updateFn,
		nri.WithPluginPath(plugins),
		nri.WithPluginConfigPath(confs),
		nri.WithDisabledExternalConnections(), // or WithSocketPath(...) to accept daemons
	)
	check(err)
	check(r.Start())
	defer r.Stop()
	fmt.Printf("nri-rs %s started with plugin %s\n", nri.Version(), name)

	ctx := context.Background()
	pod := &api.PodSandbox{Id: "pod-1", Name: "web", Namespace: "default", Uid: "uid-1"}
	ctr := &api.Container{Id: "ctr-1", PodSandboxId: pod.Id, Name: "nginx", Args: []string{"nginx"}}

	check(r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}))
	rsp, err := r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
	check(err)
	fmt.Println("adjustment for ctr-1:")
	for k, v := range rsp.GetAdjust().GetAnnotations() {
		fmt.Printf("  annotation %s=%s\n", k, v)
	}
	for _, kv := range rsp.GetAdjust().GetEnv() {
		fmt.Printf("  env        %s=%s\n", kv.Key, kv.Value)
	}
	check(r.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr}))
	_, err = r.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr})
	check(err)
	check(r.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr}))
	check(r.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod}))
	check(r.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod}))
	fmt.Println("pod and container lifecycle done")
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
