package generate_test

// The corpus of the differential test: the cases of upstream's generate
// test suite (v0.12.2, pkg/runtime-tools/generate/generate_suite_test.go)
// as a table, and a generator of random cases.

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
)

func ptr[T any](v T) *T { return &v }

// baseSpec is the spec upstream's suite starts from: an empty process and
// memory, CPU and pids resources.
func baseSpec() *rspec.Spec {
	return &rspec.Spec{
		Process: &rspec.Process{},
		Linux: &rspec.Linux{
			Resources: &rspec.LinuxResources{
				Memory: &rspec.LinuxMemory{Limit: ptr[int64](12345)},
				CPU: &rspec.LinuxCPU{
					Shares: ptr[uint64](45678),
					Quota:  ptr[int64](87654),
					Period: ptr[uint64](54321),
					Cpus:   "0-111",
					Mems:   "0-4",
				},
				Pids: &rspec.LinuxPids{Limit: ptr[int64](1)},
			},
		},
	}
}

func withLinux(l *api.LinuxContainerAdjustment) *api.ContainerAdjustment {
	return &api.ContainerAdjustment{Linux: l}
}

func withResources(r *api.LinuxResources) *api.ContainerAdjustment {
	return withLinux(&api.LinuxContainerAdjustment{Resources: r})
}

func upstreamCases() []testCase {
	seccomp := &rspec.LinuxSeccomp{
		DefaultAction: rspec.ActAllow,
		ListenerPath:  "/run/meshuggah-rocks.sock",
		Architectures: []rspec.Arch{},
		Flags:         []rspec.LinuxSeccompFlag{},
		Syscalls: []rspec.LinuxSyscall{{
			Names:  []string{"sched_getaffinity"},
			Action: rspec.ActNotify,
			Args:   []rspec.LinuxSeccompArg{},
		}},
	}
	withOom := baseSpec()
	withOom.Process.OOMScoreAdj = ptr(123)
	withSysctl := baseSpec()
	withSysctl.Linux.Sysctl = map[string]string{"delete.me": "foobar"}
	withRdt := baseSpec()
	withRdt.Linux.IntelRdt = &rspec.LinuxIntelRdt{ClosID: "bar"}

	cases := []struct {
		name   string
		spec   *rspec.Spec
		adjust *api.ContainerAdjustment
	}{
		{"nil adjustment", nil, nil},
		{"empty adjustment", nil, withLinux(&api.LinuxContainerAdjustment{})},
		{"args", nil, &api.ContainerAdjustment{Args: []string{"arg0", "arg1", "arg2"}}},
		{"rlimits", nil, &api.ContainerAdjustment{Rlimits: []*api.POSIXRlimit{{Type: "nofile", Hard: 456, Soft: 123}}}},
		{"memory limit", nil, withResources(&api.LinuxResources{Memory: &api.LinuxMemory{Limit: api.Int64(11111)}})},
		{"oom score adj", nil, withLinux(&api.LinuxContainerAdjustment{OomScoreAdj: &api.OptionalInt{Value: 123}})},
		{"unset oom score adj", nil, withLinux(&api.LinuxContainerAdjustment{})},
		{"existing oom score adj", withOom, &api.ContainerAdjustment{}},
		{"CPU shares", nil, withResources(&api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(11111)}})},
		{"CPU quota", nil, withResources(&api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(11111)}})},
		{"CPU period", nil, withResources(&api.LinuxResources{Cpu: &api.LinuxCPU{Period: api.UInt64(11111)}})},
		{"cpuset CPUs", nil, withResources(&api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "5,6"}})},
		{"cpuset mems", nil, withResources(&api.LinuxResources{Cpu: &api.LinuxCPU{Mems: "5,6"}})},
		{"pids limit", nil, withResources(&api.LinuxResources{Pids: &api.LinuxPids{Limit: 123}})},
		{"mounts are sorted", nil, &api.ContainerAdjustment{Mounts: []*api.Mount{
			{Destination: "/a/b/c/d/e", Source: "/host/e"},
			{Destination: "/a/b/c", Source: "/host/c"},
			{Destination: "/a/b", Source: "/host/b"},
			{Destination: "/a", Source: "/host/a"},
		}}},
		{"seccomp policy", nil, withLinux(&api.LinuxContainerAdjustment{SeccompPolicy: api.FromOCILinuxSeccomp(seccomp)})},
		{"sysctl", withSysctl, withLinux(&api.LinuxContainerAdjustment{Sysctl: map[string]string{
			"net.ipv4.ip_forward":           "1",
			api.MarkForRemoval("delete.me"): "",
		}})},
		{"RDT", nil, withLinux(&api.LinuxContainerAdjustment{Rdt: &api.LinuxRdt{
			ClosId:           api.String("foo"),
			Schemata:         api.RepeatedString([]string{"L2:0=ff", "L3:0=f"}),
			EnableMonitoring: api.Bool(true),
		}})},
		{"RDT remove", withRdt, withLinux(&api.LinuxContainerAdjustment{Rdt: &api.LinuxRdt{Remove: true}})},
	}
	out := make([]testCase, 0, len(cases))
	for _, c := range cases {
		spec := c.spec
		if spec == nil {
			spec = baseSpec()
		}
		out = append(out, testCase{name: "upstream: " + c.name, spec: spec, entry: "Adjust", adjust: c.adjust})
	}
	return out
}

// gen draws the parts of random cases; full asks for every section, so a
// per-group method always has something to apply.
type gen struct {
	*rand.Rand
	full bool
}

func (r gen) chance(inN int) bool { return r.IntN(inN) == 0 }

// present draws whether a section is there: one time in inN, or three in
// four for a full case.
func (r gen) present(inN int) bool {
	if r.full {
		return !r.chance(4)
	}
	return r.chance(inN)
}

func pick[T any](r gen, from ...T) T { return from[r.IntN(len(from))] }

// some is up to n values drawn by f.
func some[T any](r gen, n int, f func() T) []T {
	var out []T
	for range r.IntN(n + 1) {
		out = append(out, f())
	}
	return out
}

func (r gen) keyed(keys []string, values ...string) map[string]string {
	m := map[string]string{}
	n := r.IntN(4)
	if r.full {
		n++
	}
	for range n {
		m[pick(r, keys...)] = pick(r, values...)
	}
	return m
}

var (
	destinations = []string{"/a", "/a/b", "/a/b/c", "/c//d/", "/z", "/", "/a/./b", "/var/lib/x"}
	devicePaths  = []string{"/dev/a", "/dev/b", "/dev/c"}
	nsTypes      = []string{"network", "pid", "mount", "ipc", "uts", "user", "cgroup", "time"}
	rlimitTypes  = []string{"RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CORE", "RLIMIT_MEMLOCK"}
	seccompActs  = []string{"SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_LOG", "SCMP_ACT_NOTIFY"}
)

func (r gen) spec() *rspec.Spec {
	s := &rspec.Spec{Version: "1.2.0"}
	if !r.chance(5) {
		s.Process = &rspec.Process{
			Args: []string{"sh"},
			Cwd:  "/",
			Env:  some(r, 4, func() string { return pick(r, "PATH=/bin", "A=1", "B=2", "A=dup", "NOEQ", "=x", "C=") }),
		}
		if r.chance(3) {
			s.Process.Rlimits = []rspec.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 10, Soft: 5}}
		}
	}
	s.Mounts = some(r, 3, func() rspec.Mount {
		return rspec.Mount{Destination: pick(r, destinations...), Source: "/host", Type: "bind", Options: []string{"rbind"}}
	})
	if r.chance(2) {
		s.Annotations = r.keyed([]string{"a", "b", "x.y"}, "1", "2")
	}
	if r.chance(3) {
		s.Hooks = &rspec.Hooks{Prestart: []rspec.Hook{{Path: "/bin/true"}}} //nolint:staticcheck // still adjustable
	}
	if r.chance(4) {
		return s
	}
	l := &rspec.Linux{}
	s.Linux = l
	if r.chance(2) {
		l.Resources = &rspec.LinuxResources{}
		if r.chance(2) {
			l.Resources.Memory = &rspec.LinuxMemory{Limit: ptr[int64](1 << 20), Reservation: ptr[int64](1 << 19)}
		}
		if r.chance(2) {
			l.Resources.CPU = &rspec.LinuxCPU{Shares: ptr[uint64](1024), Cpus: "0-3"}
		}
		if r.chance(2) {
			l.Resources.Pids = &rspec.LinuxPids{}
			if r.chance(2) {
				l.Resources.Pids.Limit = ptr[int64](r.Int64N(100))
			}
		}
		if r.chance(3) {
			l.Resources.Devices = []rspec.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}
		}
		if r.chance(3) {
			l.Resources.BlockIO = &rspec.LinuxBlockIO{Weight: ptr[uint16](500)}
		}
		if r.chance(3) {
			l.Resources.HugepageLimits = []rspec.LinuxHugepageLimit{{Pagesize: "2MB", Limit: 4096}}
		}
		if r.chance(3) {
			l.Resources.Unified = map[string]string{"memory.high": "max"}
		}
	}
	l.Namespaces = some(r, 3, func() rspec.LinuxNamespace {
		return rspec.LinuxNamespace{Type: rspec.LinuxNamespaceType(pick(r, nsTypes...))}
	})
	l.Devices = some(r, 2, func() rspec.LinuxDevice {
		return rspec.LinuxDevice{Path: pick(r, devicePaths...), Type: "c", Major: 1, Minor: 3}
	})
	if r.present(3) {
		l.Sysctl = r.keyed([]string{"net.a", "net.b"}, "0", "1")
	}
	if r.present(4) {
		l.NetDevices = map[string]rspec.LinuxNetDevice{"eth0": {Name: "ctr0"}}
	}
	if r.chance(4) {
		l.IntelRdt = &rspec.LinuxIntelRdt{ClosID: "old"}
	}
	if r.chance(4) {
		l.RootfsPropagation = pick(r, "rprivate", "rslave", "rshared")
	}
	if r.chance(4) {
		l.Seccomp = &rspec.LinuxSeccomp{DefaultAction: rspec.ActErrno}
	}
	return s
}

// rare is true for about one case in n: values upstream handles
// differently, by design (see docs/COMPATIBILITY.md).
func (r gen) rare() bool { return r.chance(40) }

func (r gen) mount() *api.Mount {
	dest := pick(r, destinations...)
	if r.chance(5) {
		return &api.Mount{Destination: api.MarkForRemoval(dest)}
	}
	m := &api.Mount{Destination: dest, Type: "bind", Source: pick(r, "/", "/tmp", "/host/x")}
	m.Options = some(r, 3, func() string { return pick(r, "rbind", "ro", "nosuid", "rprivate") })
	if r.chance(10) {
		m.Options = append(m.Options, pick(r, "rshared", "rslave"))
	}
	return m
}

func (r gen) device() *api.LinuxDevice {
	path := pick(r, devicePaths...)
	if r.chance(4) {
		return &api.LinuxDevice{Path: api.MarkForRemoval(path)}
	}
	d := &api.LinuxDevice{Path: path, Type: pick(r, "c", "b", "u", "p"), Major: r.Int64N(300), Minor: r.Int64N(10)}
	if r.rare() {
		d.Type = "x"
	}
	if r.chance(2) {
		d.FileMode = api.FileMode(0o620)
	}
	if r.chance(2) {
		d.Uid, d.Gid = api.UInt32(uint32(r.IntN(1000))), api.UInt32(uint32(r.IntN(1000)))
	}
	return d
}

func (r gen) resources() *api.LinuxResources {
	res := &api.LinuxResources{}
	if r.present(2) {
		m := &api.LinuxMemory{}
		if r.chance(4) {
			m.Limit = api.Int64(0)
		} else if r.chance(2) {
			m.Limit = api.Int64(pick[int64](r, 1<<20, 1<<30, 1<<41))
		}
		if r.chance(3) {
			m.Reservation, m.Swap = api.Int64(1<<19), api.Int64(1<<21)
		}
		res.Memory = m
	}
	if r.present(2) {
		c := &api.LinuxCPU{Cpus: pick(r, "", "0-1", "2"), Mems: pick(r, "", "0")}
		if r.chance(2) {
			c.Shares = api.UInt64(pick[uint64](r, 2, 1024, 20000))
		}
		if r.chance(2) {
			c.Quota, c.Period = api.Int64(50000), api.UInt64(100000)
		}
		if r.chance(4) {
			c.RealtimeRuntime, c.RealtimePeriod = api.Int64(1000), api.UInt64(10000)
		}
		res.Cpu = c
	}
	res.HugepageLimits = some(r, 2, func() *api.HugepageLimit {
		return &api.HugepageLimit{PageSize: pick(r, "2MB", "1GB"), Limit: uint64(r.IntN(1 << 20))}
	})
	if r.rare() {
		res.HugepageLimits = append(res.HugepageLimits, &api.HugepageLimit{PageSize: "1GB", Limit: 1 << 63})
	}
	if r.present(3) {
		res.Unified = r.keyed([]string{"memory.high", "cpu.weight"}, "max", "100")
	}
	res.Devices = some(r, 2, func() *api.LinuxDeviceCgroup {
		d := &api.LinuxDeviceCgroup{Allow: r.chance(2), Type: pick(r, "", "a", "b", "c"), Access: pick(r, "", "r", "rwm")}
		if r.chance(2) {
			d.Major, d.Minor = api.Int64(r.Int64N(300)), api.Int64(r.Int64N(10))
		}
		return d
	})
	if r.present(3) {
		res.Pids = &api.LinuxPids{Limit: pick[int64](r, -1, -5, 0, 42)}
	}
	if r.present(4) {
		res.BlockioClass = api.String(pick(r, "", "slow", "none", "bad"))
	}
	if r.present(4) {
		res.RdtClass = api.String(pick(r, "", "gold", "bad"))
	}
	return res
}

func (r gen) seccomp() *api.LinuxSeccomp {
	s := &api.LinuxSeccomp{
		DefaultAction: pick(r, seccompActs...),
		Architectures: some(r, 2, func() string { return pick(r, "SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64") }),
		Flags:         some(r, 1, func() string { return pick(r, "SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW") }),
		ListenerPath:  pick(r, "", "/run/seccomp.sock"),
	}
	if r.chance(3) {
		s.DefaultErrno = api.UInt32(1)
	}
	s.Syscalls = some(r, 2, func() *api.LinuxSyscall {
		sc := &api.LinuxSyscall{Names: some(r, 2, func() string { return pick(r, "read", "write", "mount") }), Action: pick(r, seccompActs...)}
		if r.chance(3) {
			sc.ErrnoRet = api.UInt32(38)
		}
		sc.Args = some(r, 1, func() *api.LinuxSeccompArg {
			return &api.LinuxSeccompArg{Index: 1, Value: 2, ValueTwo: 3, Op: pick(r, "SCMP_CMP_EQ", "SCMP_CMP_MASKED_EQ")}
		})
		return sc
	})
	if r.rare() {
		s.DefaultAction = ""
	}
	return s
}

func (r gen) linux() *api.LinuxContainerAdjustment {
	l := &api.LinuxContainerAdjustment{}
	l.Devices = some(r, 2, r.device)
	if r.full || r.chance(2) {
		l.Resources = r.resources()
	}
	if r.present(4) {
		l.CgroupsPath = pick(r, "/kubepods/x", "system.slice:cri:x")
	}
	if r.present(4) {
		l.OomScoreAdj = api.Int(pick(r, -1000, 0, 500))
		if r.rare() {
			l.OomScoreAdj = &api.OptionalInt{Value: 1 << 40}
		}
	}
	if r.present(5) {
		l.IoPriority = &api.LinuxIOPriority{Class: api.IOPrioClass(r.IntN(4)), Priority: int32(r.IntN(8))}
	}
	if r.present(5) {
		s := &api.LinuxScheduler{Policy: api.LinuxSchedulerPolicy(r.IntN(8)), Nice: int32(r.IntN(10)), Priority: int32(r.IntN(3))}
		s.Flags = some(r, 2, func() api.LinuxSchedulerFlag {
			return pick(r, api.LinuxSchedulerFlag_SCHED_FLAG_RECLAIM, api.LinuxSchedulerFlag_SCHED_FLAG_KEEP_POLICY,
				api.LinuxSchedulerFlag_SCHED_FLAG_UTIL_CLAMP_MAX)
		})
		if r.rare() {
			s.Flags = append(s.Flags, api.LinuxSchedulerFlag_SCHED_FLAG_RESET_ON_FORK)
		}
		if r.chance(3) {
			s.Runtime, s.Deadline, s.Period = 10, 20, 30
		}
		l.Scheduler = s
	}
	if r.present(5) {
		l.SeccompPolicy = r.seccomp()
	}
	l.Namespaces = some(r, 2, func() *api.LinuxNamespace {
		t := pick(r, nsTypes...)
		if r.chance(3) {
			return &api.LinuxNamespace{Type: api.MarkForRemoval(t)}
		}
		if r.chance(30) {
			t = "net" // refused alike
		}
		return &api.LinuxNamespace{Type: t, Path: pick(r, "", "/proc/1/ns/"+t)}
	})
	if r.chance(3) {
		l.Sysctl = r.keyed([]string{"net.a", "net.b", "-net.a", "-net.c"}, "0", "1")
	}
	if r.chance(4) {
		l.NetDevices = map[string]*api.LinuxNetDevice{}
		for range r.IntN(3) {
			l.NetDevices[pick(r, "eth0", "eth1", "-eth0")] = &api.LinuxNetDevice{Name: pick(r, "", "ctr1")}
		}
	}
	if r.present(5) {
		l.MemoryPolicy = &api.LinuxMemoryPolicy{Mode: api.MpolMode(r.IntN(7)), Nodes: pick(r, "", "0-1")}
		l.MemoryPolicy.Flags = some(r, 2, func() api.MpolFlag { return api.MpolFlag(r.IntN(3)) })
	}
	if r.present(4) {
		rdt := &api.LinuxRdt{Remove: r.chance(3)}
		if r.chance(2) {
			rdt.ClosId = api.String(pick(r, "", "c1"))
		}
		if r.chance(2) {
			rdt.Schemata = api.RepeatedString(some(r, 2, func() string { return "L3:0=f" }))
		}
		if r.chance(2) {
			rdt.EnableMonitoring = api.Bool(r.chance(2))
		}
		l.Rdt = rdt
	}
	return l
}

func (r gen) adjustment() *api.ContainerAdjustment {
	a := &api.ContainerAdjustment{}
	if r.present(2) {
		a.Annotations = r.keyed([]string{"a", "b", "-a", "-c", "x.drop", "-x.gone", "fail"}, "v1", "v2")
		if !r.chance(10) {
			delete(a.Annotations, "fail")
		}
	}
	a.Mounts = some(r, 3, r.mount)
	a.Env = some(r, 3, func() *api.KeyValue {
		return &api.KeyValue{Key: pick(r, "A", "B", "C", "-A", "-B", "PATH"), Value: pick(r, "x", "y", "")}
	})
	if r.present(4) {
		a.Hooks = &api.Hooks{}
		hook := func() *api.Hook {
			h := &api.Hook{Path: "/bin/hook", Args: []string{"hook", "x"}}
			if r.chance(2) {
				h.Timeout = api.Int(5)
			}
			return h
		}
		a.Hooks.Prestart = some(r, 1, hook)
		a.Hooks.CreateRuntime = some(r, 1, hook)
		a.Hooks.CreateContainer = some(r, 1, hook)
		a.Hooks.StartContainer = some(r, 1, hook)
		a.Hooks.Poststart = some(r, 1, hook)
		a.Hooks.Poststop = some(r, 1, hook)
	}
	if r.full || !r.chance(3) {
		a.Linux = r.linux()
	}
	a.Rlimits = some(r, 2, func() *api.POSIXRlimit {
		return &api.POSIXRlimit{Type: pick(r, rlimitTypes...), Hard: 100, Soft: uint64(r.IntN(100))}
	})
	if r.rare() {
		a.Rlimits = append(a.Rlimits, &api.POSIXRlimit{Type: "nofile", Hard: 1, Soft: 1})
	}
	if r.present(4) {
		a.CDIDevices = some(r, 2, func() *api.CDIDevice { return &api.CDIDevice{Name: pick(r, "vendor.com/gpu=0", "vendor.com/gpu=bad")} })
	}
	if r.present(4) {
		a.Args = []string{"/bin/app", pick(r, "-v", "--x")}
	}
	return a
}

// randomCase calls Adjust in half of the cases and one of the per-group
// methods in the other half, with every section of the adjustment drawn.
func randomCase(rng *rand.Rand, i int) testCase {
	r := gen{Rand: rng}
	tc := testCase{name: fmt.Sprintf("random %d", i), entry: "Adjust"}
	if r.chance(2) {
		names := slices.Sorted(maps.Keys(entries))
		tc.entry = pick(r, names...)
		r.full = true
	}
	tc.spec = r.spec()
	tc.opts = options{r.chance(2), r.chance(2), r.chance(2), r.chance(2), r.chance(2)}
	tc.adjust = r.adjustment()
	return tc
}
