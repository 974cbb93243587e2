package wirecompat

import (
	"fmt"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
)

// Hand-written, realistic messages of the kind a runtime and plugins really
// exchange, built with upstream's helpers where it has them.

func realisticResources(memLimit int64, cpus string) *api.LinuxResources {
	return &api.LinuxResources{
		Memory: &api.LinuxMemory{
			Limit:            api.Int64(memLimit),
			Reservation:      api.Int64(memLimit / 2),
			Swap:             api.Int64(memLimit),
			Swappiness:       api.UInt64(60),
			DisableOomKiller: api.Bool(false),
			UseHierarchy:     api.Bool(true),
		},
		Cpu: &api.LinuxCPU{
			Shares: api.UInt64(1024),
			Quota:  api.Int64(-1),
			Period: api.UInt64(100000),
			Cpus:   cpus,
			Mems:   "0",
		},
		HugepageLimits: []*api.HugepageLimit{
			{PageSize: "2MB", Limit: 64 << 20},
			{PageSize: "1GB", Limit: 0},
		},
		BlockioClass: api.String("gold"),
		RdtClass:     api.String(""),
		Unified:      map[string]string{"memory.high": "max", "cpu.weight": "100"},
		Devices: []*api.LinuxDeviceCgroup{
			{Allow: false, Access: "rwm"},
			{Allow: true, Type: "c", Major: api.Int64(1), Minor: api.Int64(3), Access: "rwm"},
			{Allow: true, Type: "c", Major: api.Int64(136), Access: "rwm"},
		},
		Pids: &api.LinuxPids{Limit: 4096},
	}
}

func realisticPod(i int) *api.PodSandbox {
	id := fmt.Sprintf("%064x", 0xabcdef00+i)
	return &api.PodSandbox{
		Id:        id,
		Name:      fmt.Sprintf("web-7c5ddbdf54-%05d", i),
		Uid:       fmt.Sprintf("5f0c7a3e-1c2b-4d5e-8f90-%012d", i),
		Namespace: "production",
		Labels: map[string]string{
			"app":                         "web",
			"pod-template-hash":           "7c5ddbdf54",
			"io.kubernetes.pod.namespace": "production",
		},
		Annotations: map[string]string{
			"kubernetes.io/config.source": "api",
			"kubernetes.io/config.seen":   "2025-01-01T00:00:00.000000000Z",
		},
		RuntimeHandler: "runc",
		Linux: &api.LinuxPodSandbox{
			PodOverhead:  &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(10)}},
			PodResources: realisticResources(1<<30, "0-3"),
			CgroupParent: "/kubepods/burstable/pod" + id[:12],
			CgroupsPath:  "kubepods-burstable.slice:cri-containerd:" + id[:12],
			Namespaces: []*api.LinuxNamespace{
				{Type: "network", Path: "/var/run/netns/cni-" + id[:8]},
				{Type: "ipc"},
				{Type: "uts"},
			},
			Resources: realisticResources(1<<30, "0-3"),
		},
		Pid: uint32(4000 + i),
		Ips: []string{fmt.Sprintf("10.244.1.%d", i%250+1), fmt.Sprintf("fd00::%x", i+1)},
	}
}

func realisticContainer(pod *api.PodSandbox, i int) *api.Container {
	id := fmt.Sprintf("%064x", 0xc0ffee00+i)
	return &api.Container{
		Id:           id,
		PodSandboxId: pod.Id,
		Name:         fmt.Sprintf("app-%d", i),
		State:        api.ContainerState_CONTAINER_RUNNING,
		Labels:       map[string]string{"io.kubernetes.container.name": fmt.Sprintf("app-%d", i)},
		Annotations:  map[string]string{"io.kubernetes.container.restartCount": "0"},
		Args:         []string{"/usr/bin/server", "--port=8080", ""},
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin", "LANG=C.UTF-8", "GREETING=grüß dich"},
		Mounts: []*api.Mount{
			{Destination: "/etc/hosts", Type: "bind", Source: "/var/lib/kubelet/pods/x/etc-hosts", Options: []string{"rbind", "rprivate", "rw"}},
			{Destination: "/dev/shm", Type: "bind", Source: "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/x/shm", Options: []string{"rbind", "ro"}},
			{Destination: "/proc", Type: "proc", Source: "proc"},
		},
		Hooks: &api.Hooks{
			Prestart: []*api.Hook{{Path: "/usr/bin/nvidia-container-runtime-hook", Args: []string{"nvidia-container-runtime-hook", "prestart"}, Env: []string{"DEBUG=0"}}},
			Poststop: []*api.Hook{{Path: "/usr/local/bin/cleanup", Timeout: api.Int(5)}},
		},
		Linux: &api.LinuxContainer{
			Namespaces: []*api.LinuxNamespace{{Type: "pid"}, {Type: "mount"}, {Type: "network", Path: "/proc/4000/ns/net"}},
			Devices: []*api.LinuxDevice{
				{Path: "/dev/null", Type: "c", Major: 1, Minor: 3, FileMode: api.FileMode(0o666), Uid: api.UInt32(0), Gid: api.UInt32(0)},
				{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0, FileMode: api.FileMode(0o660), Gid: api.UInt32(44)},
			},
			Resources:      realisticResources(512<<20, "2"),
			OomScoreAdj:    api.Int(-997),
			CgroupsPath:    "kubepods-burstable.slice:cri-containerd:" + id[:12],
			IoPriority:     &api.LinuxIOPriority{Class: api.IOPrioClass_IOPRIO_CLASS_BE, Priority: 4},
			SeccompProfile: &api.SecurityProfile{ProfileType: api.SecurityProfile_LOCALHOST, LocalhostRef: "profiles/audit.json"},
			SeccompPolicy: &api.LinuxSeccomp{
				DefaultAction: "SCMP_ACT_ERRNO",
				DefaultErrno:  api.UInt32(1),
				Architectures: []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"},
				Syscalls: []*api.LinuxSyscall{
					{Names: []string{"accept", "accept4", "read", "write"}, Action: "SCMP_ACT_ALLOW"},
					{Names: []string{"personality"}, Action: "SCMP_ACT_ALLOW", Args: []*api.LinuxSeccompArg{
						{Index: 0, Value: 0xffffffff, ValueTwo: 0, Op: "SCMP_CMP_EQ"},
						{Index: 1, Value: 8, ValueTwo: 0xffffffffffffffff, Op: "SCMP_CMP_MASKED_EQ"},
					}},
					{Names: []string{"ptrace"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: api.UInt32(0)},
				},
			},
			Sysctl:     map[string]string{"net.core.somaxconn": "1024", "kernel.shm_rmid_forced": "1"},
			NetDevices: map[string]*api.LinuxNetDevice{"eth1": {Name: "net1"}, "ens5f0v1": {Name: "vf1"}},
			Scheduler: &api.LinuxScheduler{
				Policy: api.LinuxSchedulerPolicy_SCHED_FIFO, Priority: 10, Nice: -5,
				Flags: []api.LinuxSchedulerFlag{api.LinuxSchedulerFlag_SCHED_FLAG_RESET_ON_FORK, api.LinuxSchedulerFlag_SCHED_FLAG_UTIL_CLAMP_MAX},
			},
			Rdt: &api.LinuxRdt{ClosId: api.String("gold"), Schemata: api.RepeatedString([]string{"L3:0=ff;1=ff", "MB:0=50"}), EnableMonitoring: api.Bool(true)},
		},
		Pid:           uint32(5000 + i),
		Rlimits:       []*api.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1048576, Soft: 1024}, {Type: "RLIMIT_CORE"}},
		CreatedAt:     1735689600_000000000 + int64(i),
		StartedAt:     1735689601_000000000 + int64(i),
		FinishedAt:    0,
		ExitCode:      -1,
		StatusReason:  "OOMKilled",
		StatusMessage: "container exceeded its memory limit",
		CDIDevices:    []*api.CDIDevice{{Name: "nvidia.com/gpu=0"}, {Name: "vendor.example/fpga=all"}},
		User:          &api.User{Uid: 1000, Gid: 1000, AdditionalGids: []uint32{4, 24, 27, 1 << 31}},
		Image:         &api.Image{Name: "registry.example/web:1.2.3", Digest: "sha256:" + id, ConfigDigest: "sha256:" + id[32:] + id[:32]},
	}
}

// realisticAdjustment exercises every ContainerAdjustment helper upstream has.
func realisticAdjustment() *api.ContainerAdjustment {
	a := &api.ContainerAdjustment{}
	a.AddAnnotation("example.io/tuned-by", "resource-plugin")
	a.RemoveAnnotation("example.io/stale")
	a.AddMount(&api.Mount{Destination: "/data", Source: "/srv/data", Type: "bind", Options: []string{"rbind", "ro"}})
	a.RemoveMount("/tmp/scratch")
	a.AddEnv("HTTP_PROXY", "http://proxy.example:3128")
	a.AddEnv("EMPTY", "")
	a.RemoveEnv("DEBUG")
	a.SetArgs([]string{"/bin/sh", "-c", "exec /usr/bin/server --tuned"})
	a.AddHooks(&api.Hooks{
		Prestart:        []*api.Hook{{Path: "/usr/libexec/oci/hooks.d/prestart", Args: []string{"prestart", "--verbose"}, Env: []string{"A=1"}, Timeout: api.Int(10)}},
		CreateRuntime:   []*api.Hook{{Path: "/usr/libexec/oci/hooks.d/create-runtime"}},
		CreateContainer: []*api.Hook{{Path: "/usr/libexec/oci/hooks.d/create-container"}},
		StartContainer:  []*api.Hook{{Path: "/usr/libexec/oci/hooks.d/start-container"}},
		Poststart:       []*api.Hook{{Path: "/usr/libexec/oci/hooks.d/poststart"}},
		Poststop:        []*api.Hook{{Path: "/usr/libexec/oci/hooks.d/poststop", Timeout: api.Int(0)}},
	})
	a.AddRlimit("RLIMIT_NOFILE", 65536, 1024)
	a.AddRlimit("RLIMIT_MEMLOCK", ^uint64(0), ^uint64(0))
	a.AddDevice(&api.LinuxDevice{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0, FileMode: api.FileMode(0o666), Uid: api.UInt32(0), Gid: api.UInt32(44)})
	a.RemoveDevice("/dev/fuse")
	a.AddCDIDevice(&api.CDIDevice{Name: "nvidia.com/gpu=0"})
	a.AddOrReplaceNamespace(&api.LinuxNamespace{Type: "network", Path: "/var/run/netns/custom"})
	a.RemoveNamespace(&api.LinuxNamespace{Type: "ipc"})
	a.AddLinuxNetDevice("eth1", &api.LinuxNetDevice{Name: "net1"})
	a.SetLinuxMemoryPolicy(api.MpolMode_MPOL_BIND, "0-1", api.MpolFlag_MPOL_F_STATIC_NODES, api.MpolFlag_MPOL_F_NUMA_BALANCING)
	a.SetLinuxMemoryLimit(512 << 20)
	a.SetLinuxMemoryReservation(256 << 20)
	a.SetLinuxMemorySwap(1 << 30)
	a.SetLinuxMemoryKernel(64 << 20)
	a.SetLinuxMemoryKernelTCP(16 << 20)
	a.SetLinuxMemorySwappiness(0)
	a.SetLinuxMemoryDisableOomKiller()
	a.SetLinuxMemoryUseHierarchy()
	a.SetLinuxCPUShares(2048)
	a.SetLinuxCPUQuota(-1)
	a.SetLinuxCPUPeriod(100000)
	a.SetLinuxCPURealtimeRuntime(950000)
	a.SetLinuxCPURealtimePeriod(1000000)
	a.SetLinuxCPUSetCPUs("2-5,8")
	a.SetLinuxCPUSetMems("0")
	a.SetLinuxPidLimits(1024)
	a.AddLinuxHugepageLimit("2MB", 128<<20)
	a.SetLinuxBlockIOClass("gold")
	a.SetLinuxRDTClass("rdt-gold")
	a.SetLinuxRDTClosID("clos-1")
	a.SetLinuxRDTSchemata([]string{"L3:0=ff", "MB:0=70"})
	a.SetLinuxRDTEnableMonitoring(true)
	a.AddLinuxUnified("memory.high", "400M")
	a.AddLinuxUnified("io.weight", "default 100")
	a.SetLinuxCgroupsPath("/kubepods/tuned/container")
	oom := -500
	a.SetLinuxOomScoreAdj(&oom)
	a.SetLinuxIOPriority(&api.LinuxIOPriority{Class: api.IOPrioClass_IOPRIO_CLASS_RT, Priority: 0})
	a.SetLinuxSeccompPolicy(&api.LinuxSeccomp{
		DefaultAction:    "SCMP_ACT_LOG",
		Architectures:    []string{"SCMP_ARCH_AARCH64"},
		Flags:            []string{"SECCOMP_FILTER_FLAG_LOG"},
		ListenerPath:     "/run/seccomp-agent.sock",
		ListenerMetadata: "meta",
		Syscalls:         []*api.LinuxSyscall{{Names: []string{"mount"}, Action: "SCMP_ACT_NOTIFY"}},
	})
	a.SetLinuxSysctl("net.ipv4.ip_forward", "1")
	a.SetLinuxScheduler(&api.LinuxScheduler{
		Policy:   api.LinuxSchedulerPolicy_SCHED_DEADLINE,
		Flags:    []api.LinuxSchedulerFlag{api.LinuxSchedulerFlag_SCHED_FLAG_RECLAIM, api.LinuxSchedulerFlag_SCHED_FLAG_DL_OVERRUN},
		Runtime:  10_000_000,
		Deadline: 30_000_000,
		Period:   30_000_000,
	})
	return a
}

// realisticUpdate exercises every ContainerUpdate helper upstream has.
func realisticUpdate(id string) *api.ContainerUpdate {
	u := &api.ContainerUpdate{}
	u.SetContainerId(id)
	u.SetLinuxMemoryLimit(1 << 30)
	u.SetLinuxMemoryReservation(512 << 20)
	u.SetLinuxMemorySwap(2 << 30)
	u.SetLinuxMemoryKernel(0)
	u.SetLinuxMemoryKernelTCP(8 << 20)
	u.SetLinuxMemorySwappiness(10)
	u.SetLinuxMemoryDisableOomKiller()
	u.SetLinuxMemoryUseHierarchy()
	u.SetLinuxCPUShares(512)
	u.SetLinuxCPUQuota(50000)
	u.SetLinuxCPUPeriod(100000)
	u.SetLinuxCPURealtimeRuntime(0)
	u.SetLinuxCPURealtimePeriod(0)
	u.SetLinuxCPUSetCPUs("0-1")
	u.SetLinuxCPUSetMems("0-1")
	u.SetLinuxPidLimits(256)
	u.AddLinuxHugepageLimit("1GB", 2<<30)
	u.SetLinuxBlockIOClass("silver")
	u.SetLinuxRDTClass("rdt-silver")
	u.AddLinuxUnified("memory.max", "1073741824")
	u.SetIgnoreFailure()
	return u
}

// realisticOwners records field ownership the way the runtime does while
// merging adjustments from several plugins.
func realisticOwners(containerIDs ...string) *api.OwningPlugins {
	o := api.NewOwningPlugins()
	for i, id := range containerIDs {
		p1, p2 := fmt.Sprintf("10-resource-%d", i), "90-devices"
		for _, err := range []error{
			o.ClaimAnnotation(id, "example.io/tuned-by", p1),
			o.ClaimMount(id, "/data", p1),
			o.ClaimDevice(id, "/dev/nvidia0", p2),
			o.ClaimCdiDevice(id, "nvidia.com/gpu=0", p2),
			o.ClaimEnv(id, "HTTP_PROXY", p1),
			o.ClaimEnv(id, "NO_PROXY", p2),
			o.ClaimArgs(id, p1),
			o.ClaimHooks(id, p2),
			o.ClaimMemLimit(id, p1),
			o.ClaimMemReservation(id, p1),
			o.ClaimMemSwapLimit(id, p1),
			o.ClaimMemKernelLimit(id, p1),
			o.ClaimMemTCPLimit(id, p1),
			o.ClaimMemSwappiness(id, p1),
			o.ClaimMemDisableOomKiller(id, p1),
			o.ClaimMemUseHierarchy(id, p1),
			o.ClaimCPUShares(id, p1),
			o.ClaimCPUQuota(id, p1),
			o.ClaimCPUPeriod(id, p1),
			o.ClaimCPURealtimeRuntime(id, p1),
			o.ClaimCPURealtimePeriod(id, p1),
			o.ClaimCPUSetCPUs(id, p1),
			o.ClaimCPUSetMems(id, p1),
			o.ClaimPidsLimit(id, p1),
			o.ClaimHugepageLimit(id, "2MB", p1),
			o.ClaimBlockioClass(id, p1),
			o.ClaimRdtClass(id, p1),
			o.ClaimCgroupsUnified(id, "memory.high", p1),
			o.ClaimCgroupsPath(id, p1),
			o.ClaimOomScoreAdj(id, p1),
			o.ClaimRlimit(id, "RLIMIT_NOFILE", p2),
			o.ClaimIOPriority(id, p1),
			o.ClaimSeccompPolicy(id, p2),
			o.ClaimNamespace(id, "network", p2),
			o.ClaimSysctl(id, "net.ipv4.ip_forward", p2),
			o.ClaimLinuxNetDevice(id, "eth1", p2),
			o.ClaimLinuxScheduler(id, p1),
			o.ClaimRdtClosID(id, p1),
			o.ClaimRdtSchemata(id, p1),
			o.ClaimRdtEnableMonitoring(id, p1),
			o.ClaimMemoryPolicy(id, p1),
		} {
			if err != nil {
				panic(fmt.Sprintf("claiming ownership: %v", err))
			}
		}
	}
	return o
}

// realisticMessages returns named, hand-written messages.
func realisticMessages() map[string]proto.Message {
	pods := []*api.PodSandbox{realisticPod(0), realisticPod(1), realisticPod(2)}
	var ctrs []*api.Container
	for i, pod := range pods {
		for j := 0; j < 3; j++ {
			ctrs = append(ctrs, realisticContainer(pod, i*10+j))
		}
	}
	pod, ctr := pods[0], ctrs[0]
	stopped := realisticContainer(pods[1], 99)
	stopped.State = api.ContainerState_CONTAINER_STOPPED
	stopped.FinishedAt = stopped.StartedAt + 5_000_000_000
	stopped.ExitCode = 137

	adjust := realisticAdjustment()
	updates := []*api.ContainerUpdate{realisticUpdate(ctrs[1].Id), realisticUpdate(ctrs[2].Id)}
	evictions := []*api.ContainerEviction{{ContainerId: ctrs[3].Id, Reason: "evicted to make room for a guaranteed pod"}}

	removeRdt := &api.ContainerAdjustment{}
	removeRdt.RemoveLinuxRDT()
	removeRdt.RemoveLinuxNetDevice("eth2")

	validate := &api.ValidateContainerAdjustmentRequest{Pod: pod, Container: ctr, Update: updates}
	validate.AddResponse(&api.CreateContainerResponse{Adjust: adjust, Update: updates})
	validate.AddOwners(realisticOwners(ctr.Id, ctrs[1].Id, ctrs[2].Id))
	validate.AddPlugin("resource", "10")
	validate.AddPlugin("devices", "90")
	validate.AddPlugin("validator", "99")

	events := api.EventMask(0)
	events.Set(api.Event_RUN_POD_SANDBOX, api.Event_CREATE_CONTAINER, api.Event_UPDATE_CONTAINER,
		api.Event_REMOVE_CONTAINER, api.Event_VALIDATE_CONTAINER_ADJUSTMENT)

	return map[string]proto.Message{
		"ContainerAdjustment/helpers":        adjust,
		"ContainerAdjustment/removals":       removeRdt,
		"ContainerUpdate/helpers":            updates[0],
		"PodSandbox/realistic":               pod,
		"Container/running":                  ctr,
		"Container/stopped":                  stopped,
		"SynchronizeRequest/several":         &api.SynchronizeRequest{Pods: pods, Containers: append(ctrs, stopped), More: true},
		"SynchronizeResponse/updates":        &api.SynchronizeResponse{Update: updates, More: true},
		"ValidateContainerAdjustmentRequest": validate,
		"ValidateContainerAdjustmentResponse/reject": &api.ValidateContainerAdjustmentResponse{
			Reject: true, Reason: "plugin 10-resource may not set seccomp policy",
		},
		"CreateContainerRequest":  &api.CreateContainerRequest{Pod: pod, Container: ctr},
		"CreateContainerResponse": &api.CreateContainerResponse{Adjust: adjust, Update: updates, Evict: evictions},
		"UpdateContainerRequest": &api.UpdateContainerRequest{
			Pod: pod, Container: ctr, LinuxResources: realisticResources(2<<30, "0-7"),
		},
		"UpdateContainerResponse": &api.UpdateContainerResponse{Update: updates, Evict: evictions},
		"UpdatePodSandboxRequest": &api.UpdatePodSandboxRequest{
			Pod: pod, OverheadLinuxResources: realisticResources(64<<20, ""), LinuxResources: realisticResources(4<<30, "0-15"),
		},
		"StopContainerResponse": &api.StopContainerResponse{Update: updates},
		"ConfigureRequest": &api.ConfigureRequest{
			Config:              "{\"option\": true}\n# yaml or toml, opaque to NRI\n",
			RuntimeName:         "containerd",
			RuntimeVersion:      "v2.1.0",
			RegistrationTimeout: 5000,
			RequestTimeout:      2000,
			NRIVersion:          "v0.12.2",
		},
		"ConfigureResponse":     &api.ConfigureResponse{Events: int32(events)},
		"ConfigureResponse/all": &api.ConfigureResponse{Events: int32(api.MustParseEventMask("all"))},
		"RegisterPluginRequest": &api.RegisterPluginRequest{PluginName: "resource-plugin", PluginIdx: "10", NRIVersion: "v0.12.2"},
		"UpdateContainersRequest": &api.UpdateContainersRequest{
			Update: updates,
			Evict:  append(evictions, &api.ContainerEviction{ContainerId: ctrs[4].Id}),
		},
		"UpdateContainersResponse":  &api.UpdateContainersResponse{Failed: updates[:1]},
		"StateChangeEvent":          &api.StateChangeEvent{Event: api.Event_POST_START_CONTAINER, Pod: pod, Container: ctr},
		"StateChangeEvent/remove":   &api.StateChangeEvent{Event: api.Event_REMOVE_POD_SANDBOX, Pod: pods[2]},
		"LogRequest":                &api.LogRequest{Msg: "plugin started: ✓", Level: api.LogRequest_LEVEL_WARN},
		"LogRequest/error":          &api.LogRequest{Msg: "failed", Level: api.LogRequest_LEVEL_ERROR},
		"RunPodSandboxRequest":      &api.RunPodSandboxRequest{Pod: pods[1]},
		"PostStartContainerRequest": &api.PostStartContainerRequest{Pod: pods[1], Container: ctrs[4]},
		"Empty":                     &api.Empty{},
	}
}
