package plugincompat

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
)

func adjustment(f func(a *api.ContainerAdjustment)) *api.ContainerAdjustment {
	a := &api.ContainerAdjustment{}
	f(a)
	return a
}

// caseList builds numbered cases.
type caseList []testCase

func (l *caseList) add(name string, annotations map[string]string, ctrName string, want *api.ContainerAdjustment, wantErr bool) *testCase {
	c := mkCase(len(*l), name, annotations, ctrName)
	c.want, c.wantErr = want, wantErr
	*l = append(*l, c)
	return &(*l)[len(*l)-1]
}

func TestUlimitAdjuster(t *testing.T) {
	var cases caseList
	cases.add("none", nil, "sleep", &api.ContainerAdjustment{}, false)
	cases.add("upstream's sample", map[string]string{
		"ulimits.nri.containerd.io/container.sleep": "- type: memlock\n  hard: 987654\n  soft: 645321\n- type: RLIMIT_NOFILE\n  hard: 4096\n  soft: 1024\n- type: nproc\n  hard: 9000\n",
	}, "sleep", adjustment(func(a *api.ContainerAdjustment) {
		a.AddRlimit("RLIMIT_MEMLOCK", 987654, 645321)
		a.AddRlimit("RLIMIT_NOFILE", 4096, 1024)
		a.AddRlimit("RLIMIT_NPROC", 9000, 0)
	}), false)
	cases.add("new key wins over deprecated", map[string]string{
		"ulimits.noderesource.dev/container.c":  "- {type: Rlimit_Core, hard: 10, soft: 10}",
		"ulimits.nri.containerd.io/container.c": "- {type: cpu, hard: 1}",
	}, "c", adjustment(func(a *api.ContainerAdjustment) { a.AddRlimit("RLIMIT_CORE", 10, 10) }), false)
	cases.add("pod-level keys are ignored", map[string]string{
		"ulimits.noderesource.dev/pod": "- {type: cpu, hard: 1}",
		"ulimits.noderesource.dev":     "- {type: cpu, hard: 1}",
	}, "c", &api.ContainerAdjustment{}, false)
	cases.add("other container's key", map[string]string{
		"ulimits.noderesource.dev/container.other": "- {type: cpu, hard: 1}",
	}, "c", &api.ContainerAdjustment{}, false)
	for _, bad := range []string{
		"- type: bogus", "- {type: cpu, hard: 1, soft: 2}", "- {type: cpu, hard: -1}",
		"type: cpu", "- [", "- {type: cpu, hard: lots}",
	} {
		cases.add("malformed: "+bad, map[string]string{"ulimits.noderesource.dev/container.c": bad}, "c", nil, true)
	}
	compare(t, plugin{name: "ulimit-adjuster", idx: "10", bin: rustBinary(t, "nri-ulimit-adjuster")},
		"ulimit-adjuster", nil, cases)
}

func TestRdt(t *testing.T) {
	var cases caseList
	cases.add("none", nil, "c0", &api.ContainerAdjustment{}, false)
	cases.add("all fields", map[string]string{
		"closid.rdt.noderesource.dev/container.c0":           "gold",
		"schemata.rdt.noderesource.dev/container.c0":         "L3:0=ff,MB:0=50",
		"enablemonitoring.rdt.noderesource.dev/container.c0": "1",
		"closid.rdt.noderesource.dev/container.c1":           "silver",
		"unknown.rdt.noderesource.dev/container.c0":          "x",
	}, "c0", adjustment(func(a *api.ContainerAdjustment) {
		a.SetLinuxRDTClosID("gold")
		a.SetLinuxRDTSchemata([]string{"L3:0=ff", "MB:0=50"})
		a.SetLinuxRDTEnableMonitoring(true)
	}), false)
	cases.add("monitoring off", map[string]string{
		"enablemonitoring.rdt.noderesource.dev/container.c0": "false",
	}, "c0", adjustment(func(a *api.ContainerAdjustment) { a.SetLinuxRDTEnableMonitoring(false) }), false)
	cases.add("bad boolean", map[string]string{
		"enablemonitoring.rdt.noderesource.dev/container.c0": "yes",
	}, "c0", nil, true)
	compare(t, plugin{name: "rdt", idx: "10", bin: rustBinary(t, "nri-rdt")}, "rdt", nil, cases)
}

func TestWritableCgroups(t *testing.T) {
	dir := t.TempDir()
	delegated := filepath.Join(dir, "delegated")
	plain := filepath.Join(dir, "plain")
	line := "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,%smemory_recursiveprot\n"
	if err := os.WriteFile(delegated, []byte(fmt.Sprintf(line, "nsdelegate,")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte(fmt.Sprintf(line, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	cgroupMount := func(opts ...string) *api.Mount {
		return &api.Mount{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: opts}
	}
	withMount := func(c *testCase, m *api.Mount) {
		if m != nil {
			c.ctr.Mounts = []*api.Mount{{Destination: "/proc", Type: "proc", Source: "proc"}, m}
		}
	}
	var cases caseList
	on := map[string]string{"writable-cgroups.noderesource.dev/container.c": "true"}
	withMount(cases.add("read-only cgroups made writable", on, "c", adjustment(func(a *api.ContainerAdjustment) {
		a.AddMount(cgroupMount("nosuid", "rw"))
		a.RemoveMount("/sys/fs/cgroup")
	}), false), cgroupMount("ro", "nosuid"))
	withMount(cases.add("pod-wide annotation", map[string]string{"writable-cgroups.noderesource.dev/pod": "true"}, "c",
		adjustment(func(a *api.ContainerAdjustment) {
			a.AddMount(cgroupMount("nosuid", "rw"))
			a.RemoveMount("/sys/fs/cgroup")
		}), false), cgroupMount("nosuid"))
	withMount(cases.add("already writable", on, "c", &api.ContainerAdjustment{}, false), cgroupMount("rw"))
	withMount(cases.add("annotation not true", map[string]string{"writable-cgroups.noderesource.dev": "True"}, "c",
		&api.ContainerAdjustment{}, false), cgroupMount("ro"))
	withMount(cases.add("not annotated", nil, "c", &api.ContainerAdjustment{}, false), cgroupMount("ro"))
	cases.add("annotated but no cgroup mount", on, "c", nil, true)

	rust := plugin{name: "writable-cgroups", idx: "10", bin: rustBinary(t, "nri-writable-cgroups"),
		args: []string{"-host-mount-file", delegated}}
	compare(t, rust, "writable-cgroups", rust.args, cases)

	// Without nsdelegate on the host nothing is ever changed.
	var off caseList
	withMount(off.add("host without nsdelegate", on, "c", &api.ContainerAdjustment{}, false), cgroupMount("ro"))
	withMount(off.add("missing mount file", on, "c", &api.ContainerAdjustment{}, false), cgroupMount("ro"))
	rust.args = []string{"-host-mount-file", plain}
	compare(t, rust, "writable-cgroups", rust.args, off[:1])
	rust.args = []string{"-host-mount-file", filepath.Join(dir, "missing")}
	compare(t, rust, "writable-cgroups", rust.args, off[1:])
}

// TestQuietPlugins runs the plugins that only watch (template,
// network-logger) and checks they adjust nothing and fail nothing.
func TestQuietPlugins(t *testing.T) {
	for _, p := range []struct{ name, bin string }{
		{"template", "nri-template"},
		{"network-logger", "nri-network-logger"},
	} {
		t.Run(p.name, func(t *testing.T) {
			var cases caseList
			cases.add("plain", nil, "c", nil, false)
			c := cases.add("annotated, with network namespace and IPs", map[string]string{"a": "b"}, "c", nil, false)
			c.pod.Ips = []string{"10.0.0.2"}
			c.pod.Linux.Namespaces = []*api.LinuxNamespace{{Type: "network", Path: "/var/run/netns/x"}}
			compare(t, plugin{name: p.name, idx: "10", bin: rustBinary(t, p.bin)}, p.name, nil, cases)
		})
	}
}

// TestLogger checks the logger's optional adjustments, configured by the
// runtime, against upstream's logger.
func TestLogger(t *testing.T) {
	const pid = "logger-pid-N" // normalized
	var cases caseList
	c := cases.add("adds and sets", nil, "c", adjustment(func(a *api.ContainerAdjustment) {
		a.AddAnnotation("logger.example.com/added", pid)
		a.RemoveAnnotation("logger.example.com/set")
		a.AddAnnotation("logger.example.com/set", pid)
		a.AddEnv("LOGGER_ADDED", pid)
		a.RemoveEnv("LOGGER_SET")
		a.AddEnv("LOGGER_SET", pid)
	}), false)
	c.ctr.Env = append(c.ctr.Env, "LOGGER_SET=old")
	c.ctr.Annotations = map[string]string{"logger.example.com/set": "old"}
	config := "events: [CreateContainer, StopContainer]\naddAnnotation: logger.example.com/added\n" +
		"setAnnotation: logger.example.com/set\naddEnv: LOGGER_ADDED\nsetEnv: LOGGER_SET\n"
	compare(t, plugin{name: "logger", idx: "10", bin: rustBinary(t, "nri-logger"), config: config},
		"logger", nil, cases)
}
