package main

import (
	"fmt"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
)

// Realistic messages: a Kubernetes pod and container roughly as containerd
// hands them to NRI (a CreateContainerRequest of about 7.5 KB, like the one
// upstream's figures in the targets were measured with).

func resources(memLimit int64, cpus string, shares uint64) *api.LinuxResources {
	return &api.LinuxResources{
		Memory: &api.LinuxMemory{Limit: api.Int64(memLimit), Swap: api.Int64(memLimit)},
		Cpu: &api.LinuxCPU{
			Shares: api.UInt64(shares),
			Quota:  api.Int64(int64(shares) * 100000 / 1024),
			Period: api.UInt64(100000),
			Cpus:   cpus,
			Mems:   "0",
		},
		HugepageLimits: []*api.HugepageLimit{{PageSize: "2MB", Limit: 0}, {PageSize: "1GB", Limit: 0}},
		Unified:        map[string]string{"memory.oom.group": "1"},
		Pids:           &api.LinuxPids{Limit: 4096},
	}
}

// lastApplied is the kubectl annotation most real pods carry.
func lastApplied(name string) string {
	return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"labels":{"app":"` + name +
		`","tier":"frontend"},"name":"` + name + `","namespace":"production"},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"` +
		name + `"}},"template":{"metadata":{"labels":{"app":"` + name + `","tier":"frontend"}},"spec":{"containers":[{"env":[{"name":"LOG_LEVEL","value":"info"},{"name":"GOMAXPROCS","value":"2"}],"image":"registry.example.com/team/` +
		name + `:1.24.3","name":"app","ports":[{"containerPort":8080,"name":"http"},{"containerPort":9090,"name":"metrics"}],"readinessProbe":{"httpGet":{"path":"/healthz","port":8080}},"resources":{"limits":{"cpu":"2","memory":"1Gi"},"requests":{"cpu":"500m","memory":"512Mi"}},"volumeMounts":[{"mountPath":"/etc/app","name":"config"},{"mountPath":"/var/cache/app","name":"cache"}]}],"volumes":[{"configMap":{"name":"` +
		name + `-config"},"name":"config"},{"emptyDir":{},"name":"cache"}]}}}}`
}

func realisticPod(i int) *api.PodSandbox {
	id := fmt.Sprintf("%064x", 0x5eed0000+i)
	name := fmt.Sprintf("frontend-web-%d", i%50)
	uid := fmt.Sprintf("5f0c7a3e-1c2b-4d5e-8f90-%012d", i)
	return &api.PodSandbox{
		Id:        id,
		Name:      fmt.Sprintf("%s-7c5ddbdf54-%05d", name, i),
		Uid:       uid,
		Namespace: "production",
		Labels: map[string]string{
			"app":                          name,
			"tier":                         "frontend",
			"pod-template-hash":            "7c5ddbdf54",
			"io.kubernetes.pod.name":       fmt.Sprintf("%s-7c5ddbdf54-%05d", name, i),
			"io.kubernetes.pod.namespace":  "production",
			"io.kubernetes.pod.uid":        uid,
			"app.kubernetes.io/managed-by": "helm",
		},
		Annotations: map[string]string{
			"kubernetes.io/config.source":                      "api",
			"kubernetes.io/config.seen":                        "2025-01-01T00:00:00.000000000Z",
			"kubectl.kubernetes.io/last-applied-configuration": lastApplied(name),
			"prometheus.io/scrape":                             "true",
			"prometheus.io/port":                               "9090",
			"cni.projectcalico.org/containerID":                id,
			"cni.projectcalico.org/podIP":                      fmt.Sprintf("10.244.%d.%d/32", i/250%250, i%250+1),
			"cni.projectcalico.org/podIPs":                     fmt.Sprintf("10.244.%d.%d/32,fd00:10:244::%x/128", i/250%250, i%250+1, i+1),
		},
		RuntimeHandler: "runc",
		Linux: &api.LinuxPodSandbox{
			PodOverhead:  &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(10)}},
			PodResources: resources(1<<30, "", 2048),
			CgroupParent: "kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice",
			CgroupsPath:  "kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice:cri-containerd:" + id,
			Namespaces: []*api.LinuxNamespace{
				{Type: "network", Path: "/var/run/netns/cni-" + uid},
				{Type: "ipc"},
				{Type: "uts"},
			},
			Resources: resources(1<<30, "", 2),
		},
		Pid: uint32(4000 + i),
		Ips: []string{fmt.Sprintf("10.244.%d.%d", i/250%250, i%250+1), fmt.Sprintf("fd00:10:244::%x", i+1)},
	}
}

func realisticContainer(pod *api.PodSandbox, i int) *api.Container {
	id := fmt.Sprintf("%064x", 0xc0ffee0000+i)
	volumes := "/var/lib/kubelet/pods/" + pod.Uid + "/volumes"
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOSTNAME=" + pod.Name,
		"LOG_LEVEL=info",
		"GOMAXPROCS=2",
		"POD_NAME=" + pod.Name,
		"POD_NAMESPACE=production",
	}
	for _, svc := range []string{"KUBERNETES", "FRONTEND_WEB", "BACKEND_API", "REDIS_CACHE", "POSTGRES_PRIMARY", "AUTH_SERVICE", "METRICS_EXPORTER"} {
		env = append(env,
			svc+"_SERVICE_HOST=10.96.0.1",
			svc+"_SERVICE_PORT=443",
			svc+"_PORT=tcp://10.96.0.1:443",
			svc+"_PORT_443_TCP=tcp://10.96.0.1:443",
			svc+"_PORT_443_TCP_PROTO=tcp",
			svc+"_PORT_443_TCP_ADDR=10.96.0.1",
		)
	}
	bind := func(dst, src string, ro bool) *api.Mount {
		opts := []string{"rbind", "rprivate", "rw"}
		if ro {
			opts = []string{"rbind", "rprivate", "ro"}
		}
		return &api.Mount{Destination: dst, Type: "bind", Source: src, Options: opts}
	}
	sandboxes := "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/" + pod.Id
	return &api.Container{
		Id:           id,
		PodSandboxId: pod.Id,
		Name:         "app",
		State:        api.ContainerState_CONTAINER_CREATED,
		Labels: map[string]string{
			"io.kubernetes.container.name": "app",
			"io.kubernetes.pod.name":       pod.Name,
			"io.kubernetes.pod.namespace":  "production",
			"io.kubernetes.pod.uid":        pod.Uid,
		},
		Annotations: map[string]string{
			"io.kubernetes.container.hash":                     "8a4f3b2c",
			"io.kubernetes.container.restartCount":             "0",
			"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
			"io.kubernetes.container.terminationMessagePolicy": "File",
			"io.kubernetes.pod.terminationGracePeriod":         "30",
			"io.kubernetes.container.ports":                    `[{"name":"http","containerPort":8080,"protocol":"TCP"},{"name":"metrics","containerPort":9090,"protocol":"TCP"}]`,
		},
		Args: []string{"/usr/local/bin/server", "--config=/etc/app/config.yaml", "--listen=:8080", "--metrics=:9090"},
		Env:  env,
		Mounts: []*api.Mount{
			bind("/etc/app", volumes+"/kubernetes.io~configmap/config", true),
			bind("/var/cache/app", volumes+"/kubernetes.io~empty-dir/cache", false),
			bind("/var/run/secrets/kubernetes.io/serviceaccount", volumes+"/kubernetes.io~projected/kube-api-access-x7k2p", true),
			bind("/etc/hosts", "/var/lib/kubelet/pods/"+pod.Uid+"/etc-hosts", false),
			bind("/dev/termination-log", "/var/lib/kubelet/pods/"+pod.Uid+"/containers/app/1a2b3c4d", false),
			bind("/etc/hostname", sandboxes+"/hostname", false),
			bind("/etc/resolv.conf", sandboxes+"/resolv.conf", false),
			bind("/dev/shm", sandboxes+"/shm", false),
			bind("/var/log/app", volumes+"/kubernetes.io~empty-dir/logs", false),
			bind("/etc/tls", volumes+"/kubernetes.io~secret/tls-certs", true),
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		},
		Linux: &api.LinuxContainer{
			Namespaces: []*api.LinuxNamespace{
				{Type: "pid"}, {Type: "ipc", Path: fmt.Sprintf("/proc/%d/ns/ipc", pod.Pid)},
				{Type: "uts", Path: fmt.Sprintf("/proc/%d/ns/uts", pod.Pid)}, {Type: "mount"},
				{Type: "network", Path: fmt.Sprintf("/proc/%d/ns/net", pod.Pid)},
			},
			Devices: []*api.LinuxDevice{
				{Path: "/dev/null", Type: "c", Major: 1, Minor: 3, FileMode: api.FileMode(0o666), Uid: api.UInt32(0), Gid: api.UInt32(0)},
				{Path: "/dev/zero", Type: "c", Major: 1, Minor: 5, FileMode: api.FileMode(0o666), Uid: api.UInt32(0), Gid: api.UInt32(0)},
				{Path: "/dev/urandom", Type: "c", Major: 1, Minor: 9, FileMode: api.FileMode(0o666), Uid: api.UInt32(0), Gid: api.UInt32(0)},
			},
			Resources:      resources(1<<30, "", 2048),
			OomScoreAdj:    api.Int(-997),
			SeccompProfile: &api.SecurityProfile{ProfileType: api.SecurityProfile_RUNTIME_DEFAULT},
			CgroupsPath:    pod.Linux.CgroupParent + ":cri-containerd:" + id,
		},
		Pid:       uint32(5000 + i),
		Rlimits:   []*api.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1048576, Soft: 1048576}},
		CreatedAt: 1735689600_000000000 + int64(i),
		User:      &api.User{Uid: 1000, Gid: 1000, AdditionalGids: []uint32{1000}},
		Image:     &api.Image{Name: "registry.example.com/team/frontend-web:1.24.3"},
	}
}

// requests are the messages every case sends, built once.
type requests struct {
	pod *api.PodSandbox
	ctr *api.Container

	runPod       *api.RunPodSandboxRequest
	updatePod    *api.UpdatePodSandboxRequest
	postUpdPod   *api.PostUpdatePodSandboxRequest
	stopPod      *api.StopPodSandboxRequest
	removePod    *api.RemovePodSandboxRequest
	create       *api.CreateContainerRequest
	postCreate   *api.PostCreateContainerRequest
	start        *api.StartContainerRequest
	postStart    *api.PostStartContainerRequest
	update       *api.UpdateContainerRequest
	postUpdate   *api.PostUpdateContainerRequest
	stop         *api.StopContainerRequest
	removeCtr    *api.RemoveContainerRequest
	syncPods     map[int][]*api.PodSandbox
	syncCtrs     map[int][]*api.Container
	createRspLen int
	storm        []*stormPod // the storm's pods, built as needed
}

func newRequests() *requests {
	pod := realisticPod(1)
	ctr := realisticContainer(pod, 1)
	newRes := resources(2<<30, "0-1", 4096)
	// CRI's UpdateContainerResources carries no pids limit; with one,
	// upstream (and nri-rs, which keeps its merge rules) makes every
	// plugin returning an update claim it: a conflict with two plugins.
	newRes.Pids = nil
	return &requests{
		pod:        pod,
		ctr:        ctr,
		runPod:     &api.RunPodSandboxRequest{Pod: pod},
		updatePod:  &api.UpdatePodSandboxRequest{Pod: pod, OverheadLinuxResources: pod.Linux.PodOverhead, LinuxResources: newRes},
		postUpdPod: &api.PostUpdatePodSandboxRequest{Pod: pod},
		stopPod:    &api.StopPodSandboxRequest{Pod: pod},
		removePod:  &api.RemovePodSandboxRequest{Pod: pod},
		create:     &api.CreateContainerRequest{Pod: pod, Container: ctr},
		postCreate: &api.PostCreateContainerRequest{Pod: pod, Container: ctr},
		start:      &api.StartContainerRequest{Pod: pod, Container: ctr},
		postStart:  &api.PostStartContainerRequest{Pod: pod, Container: ctr},
		update:     &api.UpdateContainerRequest{Pod: pod, Container: ctr, LinuxResources: newRes},
		postUpdate: &api.PostUpdateContainerRequest{Pod: pod, Container: ctr},
		stop:       &api.StopContainerRequest{Pod: pod, Container: ctr},
		removeCtr:  &api.RemoveContainerRequest{Pod: pod, Container: ctr},
		syncPods:   map[int][]*api.PodSandbox{},
		syncCtrs:   map[int][]*api.Container{},
	}
}

// copyFor returns copies of the requests an operation of this kind of case
// sends (the others stay nil). Upstream's adaptation merges the plugins'
// adjustments into the CreateContainer and UpdateContainer requests it is
// given, so a request object must never be sent twice: the request would
// grow with every operation.
func (r *requests) copyFor(kind string) *requests {
	q := &requests{pod: r.pod, ctr: r.ctr}
	switch kind {
	case "create":
		q.create = clone(r.create)
	case "update":
		q.update = clone(r.update)
	default:
		q.runPod, q.updatePod, q.postUpdPod = clone(r.runPod), clone(r.updatePod), clone(r.postUpdPod)
		q.stopPod, q.removePod = clone(r.stopPod), clone(r.removePod)
		q.create, q.postCreate, q.start, q.postStart = clone(r.create), clone(r.postCreate), clone(r.start), clone(r.postStart)
		q.update, q.postUpdate, q.stop, q.removeCtr = clone(r.update), clone(r.postUpdate), clone(r.stop), clone(r.removeCtr)
	}
	return q
}

func clone[T proto.Message](m T) T { return proto.Clone(m).(T) }

// syncState is the runtime's state for a Synchronize of n containers, two
// per pod, built once per size.
func (r *requests) syncState(n int) ([]*api.PodSandbox, []*api.Container) {
	if pods, ok := r.syncPods[n]; ok {
		return pods, r.syncCtrs[n]
	}
	pods := make([]*api.PodSandbox, 0, (n+1)/2)
	ctrs := make([]*api.Container, 0, n)
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			pods = append(pods, realisticPod(i/2))
		}
		c := realisticContainer(pods[len(pods)-1], i)
		c.State = api.ContainerState_CONTAINER_RUNNING
		ctrs = append(ctrs, c)
	}
	r.syncPods[n], r.syncCtrs[n] = pods, ctrs
	return pods, ctrs
}
