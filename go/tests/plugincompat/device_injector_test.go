package plugincompat

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
)

func deviceInjectorCases() []testCase {
	var cases []testCase
	add := func(name string, annotations map[string]string, ctrName string, want *api.ContainerAdjustment, wantErr bool) {
		c := mkCase(len(cases), name, annotations, ctrName)
		c.want, c.wantErr = want, wantErr
		cases = append(cases, c)
	}
	adj := func(f func(a *api.ContainerAdjustment)) *api.ContainerAdjustment {
		a := &api.ContainerAdjustment{}
		f(a)
		return a
	}

	add("no annotations", nil, "c0", nil, false)
	add("container-specific devices", map[string]string{
		"devices.noderesource.dev/container.c0": "- path: /dev/nri-null\n  type: c\n  major: 1\n  minor: 3\n",
		"devices.noderesource.dev/container.c1": "- path: /dev/nri-zero\n  type: c\n  major: 1\n  minor: 5\n",
	}, "c0", adj(func(a *api.ContainerAdjustment) {
		a.AddDevice(&api.LinuxDevice{Path: "/dev/nri-null", Type: "c", Major: 1, Minor: 3})
	}), false)
	add("device with mode, uid, gid, octal mode", map[string]string{
		"devices.nri.io/pod": "- path: /dev/x\n  type: b\n  major: 8\n  minor: 1\n  file_mode: 0640\n  uid: 1000\n  gid: 5\n",
	}, "any", adj(func(a *api.ContainerAdjustment) {
		a.AddDevice(&api.LinuxDevice{Path: "/dev/x", Type: "b", Major: 8, Minor: 1,
			FileMode: api.FileMode(uint32(0o640)), Uid: api.UInt32(uint32(1000)), Gid: api.UInt32(uint32(5))})
	}), false)
	add("key precedence: old container key beats new pod key", map[string]string{
		"devices.nri.io/container.c2":  "- {path: /dev/c2, type: c, major: 1, minor: 7}",
		"devices.noderesource.dev/pod": "- {path: /dev/pod, type: c, major: 1, minor: 8}",
		"devices.noderesource.dev":     "- {path: /dev/bare, type: c, major: 1, minor: 9}",
	}, "c2", adj(func(a *api.ContainerAdjustment) {
		a.AddDevice(&api.LinuxDevice{Path: "/dev/c2", Type: "c", Major: 1, Minor: 7})
	}), false)
	add("mounts", map[string]string{
		"mounts.noderesource.dev/container.c2": "- source: /home\n  destination: /host-home\n  type: bind\n  options:\n  - bind\n  - ro\n",
	}, "c2", adj(func(a *api.ContainerAdjustment) {
		a.AddMount(&api.Mount{Source: "/home", Destination: "/host-home", Type: "bind", Options: []string{"bind", "ro"}})
	}), false)
	add("CDI devices", map[string]string{
		"cdi-devices.noderesource.dev/container.c2": "- vendor0.com/device=dev0\n- vendor1.com/device=dev1\n",
	}, "c2", adj(func(a *api.ContainerAdjustment) {
		a.AddCDIDevice(&api.CDIDevice{Name: "vendor0.com/device=dev0"})
		a.AddCDIDevice(&api.CDIDevice{Name: "vendor1.com/device=dev1"})
	}), false)
	add("network devices, capitalized key as in upstream's README", map[string]string{
		"network-devices.noderesource.dev/container.c0": "- hostIf: ens2.100\n  Name: netdev0\n",
	}, "c0", adj(func(a *api.ContainerAdjustment) {
		a.AddLinuxNetDevice("ens2.100", &api.LinuxNetDevice{Name: "netdev0"})
	}), false)
	add("sysctl with numeric and string values", map[string]string{
		"sysctl.noderesource.dev/pod": "net.core.somaxconn: 256\nnet.ipv4.ip_forward: \"1\"\n",
	}, "c0", adj(func(a *api.ContainerAdjustment) {
		a.SetLinuxSysctl("net.core.somaxconn", "256")
		a.SetLinuxSysctl("net.ipv4.ip_forward", "1")
	}), false)
	add("I/O priority", map[string]string{
		"io-priority.noderesource.dev": "class: IOPRIO_CLASS_RT\npriority: 2\n",
	}, "c0", adj(func(a *api.ContainerAdjustment) {
		a.SetLinuxIOPriority(&api.LinuxIOPriority{Class: api.IOPrioClass_IOPRIO_CLASS_RT, Priority: 2})
	}), false)
	add("I/O priority with unknown class sets none", map[string]string{
		"io-priority.noderesource.dev": "class: FAST\npriority: 2\n",
	}, "c0", adj(func(a *api.ContainerAdjustment) {
		a.SetLinuxIOPriority(nil) // upstream sets a nil priority: an empty linux part
	}), false)
	add("scheduler, unknown flag maps to zero value", map[string]string{
		"scheduling-policy.nri.io/container.c0": "policy: SCHED_FIFO\npriority: 10\nnice: -5\nflags: [SCHED_FLAG_RECLAIM, NOPE]\n",
	}, "c0", adj(func(a *api.ContainerAdjustment) {
		a.SetLinuxScheduler(&api.LinuxScheduler{Policy: api.LinuxSchedulerPolicy_SCHED_FIFO, Priority: 10, Nice: -5,
			Flags: []api.LinuxSchedulerFlag{api.LinuxSchedulerFlag_SCHED_FLAG_RECLAIM, api.LinuxSchedulerFlag_SCHED_FLAG_RESET_ON_FORK}})
	}), false)
	add("memory policy", map[string]string{
		"memory-policy.noderesource.dev": "mode: MPOL_INTERLEAVE\nnodes: 2,3\nflags: [MPOL_F_STATIC_NODES]\n",
	}, "c0", adj(func(a *api.ContainerAdjustment) {
		a.SetLinuxMemoryPolicy(api.MpolMode_MPOL_INTERLEAVE, "2,3", api.MpolFlag_MPOL_F_STATIC_NODES)
	}), false)
	add("everything at once", map[string]string{
		"devices.noderesource.dev": "- {path: /dev/a, type: c, major: 1, minor: 1}",
		"mounts.nri.io":            "- {source: /a, destination: /b, type: bind, options: [rbind]}",
		"cdi-devices.nri.io":       "- v.com/d=1",
		"sysctl.noderesource.dev":  "kernel.msgmax: \"65536\"",
	}, "c9", adj(func(a *api.ContainerAdjustment) {
		a.AddDevice(&api.LinuxDevice{Path: "/dev/a", Type: "c", Major: 1, Minor: 1})
		a.AddCDIDevice(&api.CDIDevice{Name: "v.com/d=1"})
		a.AddMount(&api.Mount{Source: "/a", Destination: "/b", Type: "bind", Options: []string{"rbind"}})
		a.SetLinuxSysctl("kernel.msgmax", "65536")
	}), false)

	// Malformed annotations: upstream fails the request (no adjustment).
	for _, bad := range []map[string]string{
		{"devices.noderesource.dev": "- path: ["},
		{"devices.noderesource.dev": "path: /dev/x"},
		{"devices.noderesource.dev": "- {path: /dev/x, major: one}"},
		{"devices.noderesource.dev": "- {path: /dev/x, uid: -1}"},
		{"mounts.noderesource.dev": "- options: rw"},
		{"cdi-devices.noderesource.dev": "{a: b}"},
		{"scheduling-policy.noderesource.dev": "nice: lots"},
		{"memory-policy.noderesource.dev": "mode: MPOL_NOPE"},
		{"memory-policy.noderesource.dev": "mode: MPOL_BIND\nflags: [NOPE]"},
		{"sysctl.noderesource.dev": "- a\n- b"},
		{"network-devices.noderesource.dev": "hostIf: eth0"},
	} {
		for k, v := range bad {
			add("malformed "+k+": "+v, bad, "c0", nil, true)
		}
	}
	return cases
}

func TestDeviceInjector(t *testing.T) {
	compare(t, plugin{
		name: "device-injector", idx: "10",
		bin: rustBinary(t, "nri-device-injector"),
	}, "device-injector", nil, deviceInjectorCases())
}
