//go:build wasip1

// Command plugin is the WASM plugin of the WASM tests, written on upstream's
// pkg/api so that it uses exactly the interface upstream's runtime loads
// (the go-plugin ABI: plugin_* exports, malloc and free, the host's log
// function). The tests build it at test time:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
//
// Its drop-in configuration picks a behaviour, so that one module covers
// the well-behaved plugin and the hostile ones:
//
//	mode=adjust  (default) logs every event and adjusts every container
//	mode=error   fails CreateContainer with an error
//	mode=panic   panics in CreateContainer (the Go runtime exits the module)
//	mode=trap    reads outside its linear memory in CreateContainer
//	mode=loop    never returns from CreateContainer
//	mode=alloc   grows its memory in CreateContainer until it cannot
//
// and "resources" makes it also set the container's resources and update
// the other containers (which only one plugin of a scenario may do, as two
// plugins setting the same field is a conflict); "quiet" stops the log
// lines (make bench).
//
// Each event is reported through the host's log function as one line,
// "wasm-test <plugin> <event> <pod>/<container>", which is how the tests
// see what the plugin saw.
package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unsafe"

	"github.com/containerd/nri/pkg/api"
)

func main() {}

func init() {
	api.RegisterPlugin(&plugin{host: api.NewHostFunctions(), mode: "adjust"})
}

type plugin struct {
	host   api.HostFunctions
	name   string
	mode   string
	owner  bool // "resources": sets resources and updates containers
	quiet  bool
	events int
	known  []string // IDs of the containers the plugin knows of, sorted
	hoard  [][]byte // mode=alloc
}

func (p *plugin) log(format string, args ...any) {
	if p.quiet {
		return
	}
	msg := fmt.Sprintf("wasm-test %s "+format, append([]any{p.name}, args...)...)
	_, _ = p.host.Log(context.Background(), &api.LogRequest{Msg: msg, Level: api.LogRequest_LEVEL_INFO})
}

func (p *plugin) saw(event string, pod *api.PodSandbox, ctr *api.Container) {
	p.events++
	c := "-"
	if ctr != nil {
		c = ctr.GetName()
	}
	p.log("%s %s/%s", event, pod.GetName(), c)
}

func (p *plugin) Configure(_ context.Context, req *api.ConfigureRequest) (*api.ConfigureResponse, error) {
	for _, field := range strings.Fields(req.GetConfig()) {
		key, value, _ := strings.Cut(field, "=")
		switch key {
		case "mode":
			p.mode = value
		case "name":
			p.name = value
		case "resources":
			p.owner = true
		case "quiet":
			p.quiet = true
		default:
			return nil, fmt.Errorf("wasm-test: unknown setting %q", key)
		}
	}
	if p.name == "" {
		p.name = "plugin"
	}
	p.log("Configure %s/%s mode=%s", req.GetRuntimeName(), req.GetRuntimeVersion(), p.mode)
	// Every event but validation: a validating plugin changes how the
	// runtime creates containers, which a test asks for on purpose.
	var mask api.EventMask
	for e := api.Event_RUN_POD_SANDBOX; e < api.Event_VALIDATE_CONTAINER_ADJUSTMENT; e++ {
		mask.Set(e)
	}
	return &api.ConfigureResponse{Events: int32(mask)}, nil
}

func (p *plugin) Synchronize(_ context.Context, req *api.SynchronizeRequest) (*api.SynchronizeResponse, error) {
	for _, c := range req.GetContainers() {
		p.known = append(p.known, c.GetId())
	}
	sort.Strings(p.known)
	p.log("Synchronize pods=%d containers=%d", len(req.GetPods()), len(req.GetContainers()))
	return &api.SynchronizeResponse{}, nil
}

func (p *plugin) Shutdown(context.Context, *api.Empty) (*api.Empty, error) {
	p.log("Shutdown")
	return &api.Empty{}, nil
}

func (p *plugin) RunPodSandbox(_ context.Context, req *api.RunPodSandboxRequest) (*api.RunPodSandboxResponse, error) {
	p.saw("RunPodSandbox", req.GetPod(), nil)
	return &api.RunPodSandboxResponse{}, nil
}

func (p *plugin) UpdatePodSandbox(_ context.Context, req *api.UpdatePodSandboxRequest) (*api.UpdatePodSandboxResponse, error) {
	p.saw("UpdatePodSandbox", req.GetPod(), nil)
	return &api.UpdatePodSandboxResponse{}, nil
}

func (p *plugin) PostUpdatePodSandbox(_ context.Context, req *api.PostUpdatePodSandboxRequest) (*api.PostUpdatePodSandboxResponse, error) {
	p.saw("PostUpdatePodSandbox", req.GetPod(), nil)
	return &api.PostUpdatePodSandboxResponse{}, nil
}

func (p *plugin) StopPodSandbox(_ context.Context, req *api.StopPodSandboxRequest) (*api.StopPodSandboxResponse, error) {
	p.saw("StopPodSandbox", req.GetPod(), nil)
	return &api.StopPodSandboxResponse{}, nil
}

func (p *plugin) RemovePodSandbox(_ context.Context, req *api.RemovePodSandboxRequest) (*api.RemovePodSandboxResponse, error) {
	p.saw("RemovePodSandbox", req.GetPod(), nil)
	return &api.RemovePodSandboxResponse{}, nil
}

func (p *plugin) CreateContainer(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
	p.saw("CreateContainer", req.GetPod(), req.GetContainer())
	switch p.mode {
	case "error":
		return nil, errors.New("wasm-test: refusing to create " + req.GetContainer().GetName())
	case "panic":
		panic("wasm-test: panicking in CreateContainer")
	case "trap":
		// Past the end of any linear memory (4 GiB at most): a trap, not
		// a Go panic, since only nil pointers are checked.
		return nil, fmt.Errorf("unreachable: %d", *(*byte)(unsafe.Pointer(uintptr(0xfffffff0))))
	case "loop":
		for {
			p.events++
		}
	case "alloc":
		for {
			p.hoard = append(p.hoard, make([]byte, 16<<20))
		}
	}

	adj := &api.ContainerAdjustment{}
	adj.AddAnnotation("wasm-test/"+p.name, fmt.Sprintf("events=%d", p.events))
	adj.AddEnv("WASM_TEST_"+strings.ToUpper(p.name), req.GetContainer().GetName())
	adj.AddMount(&api.Mount{Destination: "/wasm-test/" + p.name, Source: "/tmp/wasm-test", Type: "bind", Options: []string{"bind", "ro"}})
	adj.AddHooks(&api.Hooks{Prestart: []*api.Hook{{Path: "/bin/true", Args: []string{"true", p.name}}}})
	var updates []*api.ContainerUpdate
	if p.owner {
		adj.SetLinuxCPUShares(uint64(512 + p.events))
		adj.SetLinuxMemoryLimit(int64(256 << 20))
		// Updates reach the containers the plugin knows of.
		for _, id := range p.known {
			u := &api.ContainerUpdate{ContainerId: id}
			u.SetLinuxCPUShares(uint64(100 + p.events))
			updates = append(updates, u)
		}
	}
	p.known = append(p.known, req.GetContainer().GetId())
	return &api.CreateContainerResponse{Adjust: adj, Update: updates}, nil
}

func (p *plugin) PostCreateContainer(_ context.Context, req *api.PostCreateContainerRequest) (*api.PostCreateContainerResponse, error) {
	p.saw("PostCreateContainer", req.GetPod(), req.GetContainer())
	return &api.PostCreateContainerResponse{}, nil
}

func (p *plugin) StartContainer(_ context.Context, req *api.StartContainerRequest) (*api.StartContainerResponse, error) {
	p.saw("StartContainer", req.GetPod(), req.GetContainer())
	return &api.StartContainerResponse{}, nil
}

func (p *plugin) PostStartContainer(_ context.Context, req *api.PostStartContainerRequest) (*api.PostStartContainerResponse, error) {
	p.saw("PostStartContainer", req.GetPod(), req.GetContainer())
	return &api.PostStartContainerResponse{}, nil
}

func (p *plugin) UpdateContainer(_ context.Context, req *api.UpdateContainerRequest) (*api.UpdateContainerResponse, error) {
	p.saw("UpdateContainer", req.GetPod(), req.GetContainer())
	return &api.UpdateContainerResponse{}, nil
}

func (p *plugin) PostUpdateContainer(_ context.Context, req *api.PostUpdateContainerRequest) (*api.PostUpdateContainerResponse, error) {
	p.saw("PostUpdateContainer", req.GetPod(), req.GetContainer())
	return &api.PostUpdateContainerResponse{}, nil
}

func (p *plugin) StopContainer(_ context.Context, req *api.StopContainerRequest) (*api.StopContainerResponse, error) {
	p.saw("StopContainer", req.GetPod(), req.GetContainer())
	return &api.StopContainerResponse{}, nil
}

func (p *plugin) RemoveContainer(_ context.Context, req *api.RemoveContainerRequest) (*api.RemoveContainerResponse, error) {
	p.saw("RemoveContainer", req.GetPod(), req.GetContainer())
	for i, id := range p.known {
		if id == req.GetContainer().GetId() {
			p.known = append(p.known[:i], p.known[i+1:]...)
			break
		}
	}
	return &api.RemoveContainerResponse{}, nil
}

func (p *plugin) StateChange(_ context.Context, req *api.StateChangeEvent) (*api.Empty, error) {
	p.saw("StateChange:"+req.GetEvent().String(), req.GetPod(), req.GetContainer())
	return &api.Empty{}, nil
}

func (p *plugin) ValidateContainerAdjustment(_ context.Context, req *api.ValidateContainerAdjustmentRequest) (*api.ValidateContainerAdjustmentResponse, error) {
	p.saw("ValidateContainerAdjustment", req.GetPod(), req.GetContainer())
	return &api.ValidateContainerAdjustmentResponse{}, nil
}
