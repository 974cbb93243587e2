package generate_test

// The differential test: upstream's Go generator
// (github.com/containerd/nri/pkg/runtime-tools/generate, from the module
// cache) and this package's (nri-rs's Rust generator over the C ABI) are
// given the same spec, options and adjustment, and must leave the same
// spec behind (compared as JSON) or fail with the same error. The corpus is
// the cases of upstream's own generate test suite, rewritten as a table
// here, plus random adjustments from a fixed seed.
//
// Where they may differ is listed in docs/COMPATIBILITY.md ("Spec
// generator"); each such difference is recognized here by what causes it
// (an input property) and by what it must look like, and counted.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	xgen "github.com/containerd/nri/pkg/runtime-tools/generate"
	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nri-rs/nri-rs/go/generate"
	"github.com/nri-rs/nri-rs/go/generate/internal/testgen"
)

const (
	randomSeed  = 20250912
	randomCases = 3000
)

// generator is the API upstream's Generator and ours share, so one case
// drives both alike.
type generator interface {
	Adjust(*api.ContainerAdjustment) error
	AdjustEnv([]*api.KeyValue)
	AdjustArgs([]string)
	AdjustAnnotations(map[string]string) error
	AdjustHooks(*api.Hooks)
	AdjustResources(*api.LinuxResources) error
	AdjustBlockIOClass(*string) error
	AdjustRdtClass(*string) error
	AdjustRdt(*api.LinuxRdt)
	AdjustRdtClosID(*string)
	AdjustRdtSchemata(*[]string)
	AdjustRdtEnableMonitoring(*bool)
	AdjustCgroupsPath(string)
	AdjustOomScoreAdj(*api.OptionalInt)
	AdjustIOPriority(*api.LinuxIOPriority)
	AdjustSeccompPolicy(*api.LinuxSeccomp) error
	AdjustNamespaces([]*api.LinuxNamespace) error
	AdjustSysctl(map[string]string) error
	AdjustLinuxScheduler(*api.LinuxScheduler)
	AdjustMemoryPolicy(*api.LinuxMemoryPolicy)
	AdjustDevices([]*api.LinuxDevice)
	AdjustLinuxNetDevices(map[string]*api.LinuxNetDevice) error
	InjectCDIDevices([]*api.CDIDevice) error
	AdjustRlimits([]*api.POSIXRlimit) error
	AdjustMounts([]*api.Mount) error
}

var (
	_ generator = (*xgen.Generator)(nil)
	_ generator = (*generate.Generator)(nil)
)

// entries are the methods a case may call, each given the case's
// adjustment (it takes its own part of it).
var entries = map[string]func(g generator, a *api.ContainerAdjustment) error{
	"Adjust":            func(g generator, a *api.ContainerAdjustment) error { return g.Adjust(a) },
	"AdjustAnnotations": func(g generator, a *api.ContainerAdjustment) error { return g.AdjustAnnotations(a.GetAnnotations()) },
	"AdjustResources": func(g generator, a *api.ContainerAdjustment) error {
		return g.AdjustResources(a.GetLinux().GetResources())
	},
	"AdjustBlockIOClass": func(g generator, a *api.ContainerAdjustment) error {
		return g.AdjustBlockIOClass(a.GetLinux().GetResources().GetBlockioClass().Get())
	},
	"AdjustRdtClass": func(g generator, a *api.ContainerAdjustment) error {
		return g.AdjustRdtClass(a.GetLinux().GetResources().GetRdtClass().Get())
	},
	"AdjustSeccompPolicy": func(g generator, a *api.ContainerAdjustment) error {
		return g.AdjustSeccompPolicy(a.GetLinux().GetSeccompPolicy())
	},
	"AdjustNamespaces": func(g generator, a *api.ContainerAdjustment) error {
		return g.AdjustNamespaces(a.GetLinux().GetNamespaces())
	},
	"AdjustSysctl": func(g generator, a *api.ContainerAdjustment) error { return g.AdjustSysctl(a.GetLinux().GetSysctl()) },
	"AdjustLinuxNetDevices": func(g generator, a *api.ContainerAdjustment) error {
		return g.AdjustLinuxNetDevices(a.GetLinux().GetNetDevices())
	},
	"InjectCDIDevices": func(g generator, a *api.ContainerAdjustment) error { return g.InjectCDIDevices(a.GetCDIDevices()) },
	"AdjustRlimits":    func(g generator, a *api.ContainerAdjustment) error { return g.AdjustRlimits(a.GetRlimits()) },
	"AdjustMounts":     func(g generator, a *api.ContainerAdjustment) error { return g.AdjustMounts(a.GetMounts()) },
	"AdjustEnv":        func(g generator, a *api.ContainerAdjustment) error { g.AdjustEnv(a.GetEnv()); return nil },
	"AdjustArgs":       func(g generator, a *api.ContainerAdjustment) error { g.AdjustArgs(a.GetArgs()); return nil },
	"AdjustHooks":      func(g generator, a *api.ContainerAdjustment) error { g.AdjustHooks(a.GetHooks()); return nil },
	"AdjustRdt":        func(g generator, a *api.ContainerAdjustment) error { g.AdjustRdt(a.GetLinux().GetRdt()); return nil },
	"AdjustCgroupsPath": func(g generator, a *api.ContainerAdjustment) error {
		g.AdjustCgroupsPath(a.GetLinux().GetCgroupsPath())
		return nil
	},
	"AdjustOomScoreAdj": func(g generator, a *api.ContainerAdjustment) error {
		g.AdjustOomScoreAdj(a.GetLinux().GetOomScoreAdj())
		return nil
	},
	"AdjustIOPriority": func(g generator, a *api.ContainerAdjustment) error {
		g.AdjustIOPriority(a.GetLinux().GetIoPriority())
		return nil
	},
	"AdjustLinuxScheduler": func(g generator, a *api.ContainerAdjustment) error {
		g.AdjustLinuxScheduler(a.GetLinux().GetScheduler())
		return nil
	},
	"AdjustMemoryPolicy": func(g generator, a *api.ContainerAdjustment) error {
		g.AdjustMemoryPolicy(a.GetLinux().GetMemoryPolicy())
		return nil
	},
	"AdjustDevices": func(g generator, a *api.ContainerAdjustment) error {
		g.AdjustDevices(a.GetLinux().GetDevices())
		return nil
	},
	"AdjustRdtClosID": func(g generator, a *api.ContainerAdjustment) error {
		g.AdjustRdtClosID(a.GetLinux().GetRdt().GetClosId().Get())
		return nil
	},
	"AdjustRdtSchemata": func(g generator, a *api.ContainerAdjustment) error {
		g.AdjustRdtSchemata(a.GetLinux().GetRdt().GetSchemata().Get())
		return nil
	},
	"AdjustRdtEnableMonitoring": func(g generator, a *api.ContainerAdjustment) error {
		g.AdjustRdtEnableMonitoring(a.GetLinux().GetRdt().GetEnableMonitoring().Get())
		return nil
	},
}

// applied is the part of a the entry applies, so a documented difference
// is recognized only by what the call could act on.
func applied(entry string, a *api.ContainerAdjustment) *api.ContainerAdjustment {
	l := a.GetLinux()
	linux := func(part *api.LinuxContainerAdjustment) *api.ContainerAdjustment {
		return &api.ContainerAdjustment{Linux: part}
	}
	switch entry {
	case "Adjust":
		return a
	case "AdjustAnnotations":
		return &api.ContainerAdjustment{Annotations: a.GetAnnotations()}
	case "AdjustEnv":
		return &api.ContainerAdjustment{Env: a.GetEnv()}
	case "AdjustArgs":
		return &api.ContainerAdjustment{Args: a.GetArgs()}
	case "AdjustHooks":
		return &api.ContainerAdjustment{Hooks: a.GetHooks()}
	case "InjectCDIDevices":
		return &api.ContainerAdjustment{CDIDevices: a.GetCDIDevices()}
	case "AdjustRlimits":
		return &api.ContainerAdjustment{Rlimits: a.GetRlimits()}
	case "AdjustMounts":
		return &api.ContainerAdjustment{Mounts: a.GetMounts()}
	case "AdjustResources", "AdjustBlockIOClass", "AdjustRdtClass":
		return linux(&api.LinuxContainerAdjustment{Resources: l.GetResources()})
	case "AdjustRdt", "AdjustRdtClosID", "AdjustRdtSchemata", "AdjustRdtEnableMonitoring":
		return linux(&api.LinuxContainerAdjustment{Rdt: l.GetRdt()})
	case "AdjustCgroupsPath":
		return linux(&api.LinuxContainerAdjustment{CgroupsPath: l.GetCgroupsPath()})
	case "AdjustOomScoreAdj":
		return linux(&api.LinuxContainerAdjustment{OomScoreAdj: l.GetOomScoreAdj()})
	case "AdjustIOPriority":
		return linux(&api.LinuxContainerAdjustment{IoPriority: l.GetIoPriority()})
	case "AdjustSeccompPolicy":
		return linux(&api.LinuxContainerAdjustment{SeccompPolicy: l.GetSeccompPolicy()})
	case "AdjustNamespaces":
		return linux(&api.LinuxContainerAdjustment{Namespaces: l.GetNamespaces()})
	case "AdjustSysctl":
		return linux(&api.LinuxContainerAdjustment{Sysctl: l.GetSysctl()})
	case "AdjustLinuxNetDevices":
		return linux(&api.LinuxContainerAdjustment{NetDevices: l.GetNetDevices()})
	case "AdjustLinuxScheduler":
		return linux(&api.LinuxContainerAdjustment{Scheduler: l.GetScheduler()})
	case "AdjustMemoryPolicy":
		return linux(&api.LinuxContainerAdjustment{MemoryPolicy: l.GetMemoryPolicy()})
	case "AdjustDevices":
		return linux(&api.LinuxContainerAdjustment{Devices: l.GetDevices()})
	}
	panic("no part for " + entry)
}

// options says which of the test callbacks a case sets.
type options struct {
	filter, blockio, rdt, checker, cdi bool
}

// The test callbacks, the same functions for both generators.

func filterAnnotations(m map[string]string) (map[string]string, error) {
	if _, ok := m["fail"]; ok {
		return nil, errors.New("annotation \"fail\" is not allowed")
	}
	out := map[string]string{}
	for k, v := range m {
		if !strings.HasPrefix(api.ClearRemovalMarker(k), "x.") {
			out[k] = v
		}
	}
	return out, nil
}

func resolveBlockIO(class string) (*rspec.LinuxBlockIO, error) {
	switch class {
	case "bad":
		return nil, fmt.Errorf("unknown block I/O class %q", class)
	case "none":
		return nil, nil
	}
	w := uint16(10 * len(class))
	return &rspec.LinuxBlockIO{Weight: &w}, nil
}

func resolveRdt(class string) (*rspec.LinuxIntelRdt, error) {
	if class == "bad" {
		return nil, fmt.Errorf("unknown RDT class %q", class)
	}
	return &rspec.LinuxIntelRdt{ClosID: class, Schemata: []string{"L3:0=f"}}, nil
}

func checkResources(r *rspec.LinuxResources) error {
	if r == nil {
		return nil
	}
	if m := r.Memory; m != nil && m.Limit != nil && *m.Limit > 1<<40 {
		return fmt.Errorf("memory limit %d is too high", *m.Limit)
	}
	if c := r.CPU; c != nil && c.Shares != nil && *c.Shares > 10000 {
		*c.Shares = 10000
	}
	return nil
}

func injectCDIDevices(s *rspec.Spec, names []string) error {
	for i, n := range names {
		if strings.Contains(n, "bad") {
			return fmt.Errorf("unresolvable CDI device %q", n)
		}
		if s.Process == nil {
			s.Process = &rspec.Process{}
		}
		if s.Linux == nil {
			s.Linux = &rspec.Linux{}
		}
		s.Process.Env = append(s.Process.Env, fmt.Sprintf("CDI_%d=%s", i, n))
		s.Linux.Devices = append(s.Linux.Devices, rspec.LinuxDevice{Path: "/dev/cdi/" + n, Type: "c", Major: 10, Minor: int64(i)})
	}
	return nil
}

// optionsOf are the options o sets, made by one package's constructors.
func optionsOf[O any](o options,
	filter func(func(map[string]string) (map[string]string, error)) O,
	blockio func(func(string) (*rspec.LinuxBlockIO, error)) O,
	rdt func(func(string) (*rspec.LinuxIntelRdt, error)) O,
	checker func(func(*rspec.LinuxResources) error) O,
	cdi func(func(*rspec.Spec, []string) error) O,
) []O {
	var opts []O
	for _, opt := range []struct {
		set  bool
		make func() O
	}{
		{o.filter, func() O { return filter(filterAnnotations) }},
		{o.blockio, func() O { return blockio(resolveBlockIO) }},
		{o.rdt, func() O { return rdt(resolveRdt) }},
		{o.checker, func() O { return checker(checkResources) }},
		{o.cdi, func() O { return cdi(injectCDIDevices) }},
	} {
		if opt.set {
			opts = append(opts, opt.make())
		}
	}
	return opts
}

// A case: a spec, options, a method and the adjustment it is given.
type testCase struct {
	name   string
	spec   *rspec.Spec
	opts   options
	entry  string
	adjust *api.ContainerAdjustment
}

// outcome is what one generator made of a case.
type outcome struct {
	spec  any // the spec as JSON, decoded
	err   string
	panic string
}

func (o outcome) String() string {
	switch {
	case o.panic != "":
		return "panic: " + o.panic
	case o.err != "":
		return "error: " + o.err
	}
	return "ok"
}

func decoded(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

// clone copies a spec through JSON, so the two generators start alike.
func clone(t *testing.T, s *rspec.Spec) *rspec.Spec {
	t.Helper()
	if s == nil {
		return nil
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	out := &rspec.Spec{}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

func run(t *testing.T, tc testCase, upstream bool) (o outcome) {
	t.Helper()
	spec := clone(t, tc.spec)
	var g generator
	if upstream {
		g = xgen.SpecGenerator(testgen.New(spec), optionsOf(tc.opts, xgen.WithAnnotationFilter,
			xgen.WithBlockIOResolver, xgen.WithRdtResolver, xgen.WithResourceChecker, xgen.WithCDIDeviceInjector)...)
	} else {
		g = generate.SpecGenerator(testgen.New(spec), optionsOf(tc.opts, generate.WithAnnotationFilter,
			generate.WithBlockIOResolver, generate.WithRdtResolver, generate.WithResourceChecker, generate.WithCDIDeviceInjector)...)
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				o.panic = fmt.Sprint(p)
			}
		}()
		if err := entries[tc.entry](g, tc.adjust); err != nil {
			o.err = err.Error()
		}
	}()
	o.spec = normalize(decoded(t, spec))
	return o
}

// normalize applies the JSON differences every reader ignores: a syscall
// without names is written `null` by Go and `[]` after a pass through
// oci-spec.
func normalize(v any) any {
	syscalls, _ := dig(v, "linux", "seccomp", "syscalls").([]any)
	for _, s := range syscalls {
		if m, ok := s.(map[string]any); ok && m["names"] == nil {
			m["names"] = []any{}
		}
	}
	return v
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// diff lists the JSON paths where a and b differ.
func diff(a, b any, path string, out *[]string) {
	if len(*out) > 8 || reflect.DeepEqual(a, b) {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		union := maps.Clone(am)
		maps.Copy(union, bm)
		for _, k := range slices.Sorted(maps.Keys(union)) {
			diff(am[k], bm[k], path+"."+k, out)
		}
		return
	}
	as, _ := json.Marshal(a)
	bs, _ := json.Marshal(b)
	*out = append(*out, fmt.Sprintf("%s: upstream %s, ours %s", path, as, bs))
}

// tally counts what the cases came to.
type tally struct {
	cases, equal, refusedAlike  int
	tableEqual, tableDocumented int // of upstream's suite
	documented                  map[string]int
}

func TestDifferential(t *testing.T) {
	corpus := upstreamCases()
	tableCases := len(corpus)
	rng := rand.New(rand.NewPCG(randomSeed, randomSeed))
	for i := range randomCases {
		corpus = append(corpus, randomCase(rng, i))
	}

	tl := tally{documented: map[string]int{}}
	for _, tc := range corpus {
		tl.cases++
		up, ours := run(t, tc, true), run(t, tc, false)
		original := normalize(decoded(t, tc.spec))
		if ours.panic != "" {
			t.Errorf("%s: ours panicked: %s", tc.name, ours.panic)
			continue
		}
		if ours.err != "" && !reflect.DeepEqual(ours.spec, original) {
			t.Errorf("%s: ours failed (%s) and changed the spec", tc.name, ours.err)
			continue
		}
		// Upstream's outcome for a key both removed and set depends on Go's
		// map order: such cases count as documented even when it matches.
		conflicting := len(conflictingKeys(applied(tc.entry, tc.adjust))) > 0 && up.err == "" && ours.err == ""
		if !conflicting && up.panic == "" && up.err == ours.err && (up.err != "" || reflect.DeepEqual(up.spec, ours.spec)) {
			tl.equal++
			if tl.cases <= tableCases {
				tl.tableEqual++
			}
			if up.err != "" {
				tl.refusedAlike++
			}
			continue
		}
		if kind := documented(tc, original, up, ours); kind != "" {
			tl.documented[kind]++
			if tl.cases <= tableCases {
				tl.tableDocumented++
			}
			continue
		}
		var paths []string
		if up.panic == "" && up.err == "" && ours.err == "" {
			diff(up.spec, ours.spec, "", &paths)
		}
		adj, _ := json.Marshal(tc.adjust)
		t.Errorf("%s: %s with options %+v\n  adjustment %s\n  upstream: %s\n  ours:     %s\n  %s",
			tc.name, tc.entry, tc.opts, adj, up, ours, strings.Join(paths, "\n  "))
	}

	n := 0
	kinds := make([]string, 0, len(tl.documented))
	for k, c := range tl.documented {
		n += c
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, c))
	}
	sort.Strings(kinds)
	breakdown := ""
	if n > 0 {
		breakdown = " (" + strings.Join(kinds, ", ") + ")"
	}
	summary := fmt.Sprintf("spec generator differential: %d cases, %d equal (%d of them refused alike), %d documented differences%s; "+
		"upstream's suite: %d cases, %d equal, %d documented; random: %d cases, seed %d",
		tl.cases, tl.equal, tl.refusedAlike, n, breakdown,
		tableCases, tl.tableEqual, tl.tableDocumented, randomCases, randomSeed)
	fmt.Println(summary)
	t.Log(summary)
}

// documented names the documented difference a case shows, or "".
// original is the spec both started from, as JSON.
func documented(tc testCase, original any, up, ours outcome) string {
	a := applied(tc.entry, tc.adjust)
	// Methods without an error return log a refusal and change nothing.
	refused := func(text string) bool {
		return strings.Contains(ours.err, text) ||
			(ours.err == "" && reflect.DeepEqual(ours.spec, original) && !reflect.DeepEqual(up.spec, original))
	}
	switch {
	case unrepresentable(a) && refused("not representable in the OCI spec"):
		// Upstream writes the value (or fails later on something else).
		return "value oci-spec cannot hold refused"
	case outOfRange(a) && refused("out of range for the OCI spec field"):
		return "number out of the OCI field's range refused"
	case up.panic != "" && upstreamDereferencesNil(tc.spec, a):
		// Ours goes on, and succeeds or fails at a later step.
		return "missing section created where upstream panics"
	case up.panic == "" && up.err == "" && ours.err == "" && conflictsResolved(a, up, ours):
		return "key both removed and set ends up set"
	}
	return ""
}

func unrepresentable(a *api.ContainerAdjustment) bool {
	l := a.GetLinux()
	for _, r := range a.GetRlimits() {
		if !strings.HasPrefix(r.Type, "RLIMIT_") {
			return true
		}
	}
	for _, d := range l.GetDevices() {
		if _, marked := d.IsMarkedForRemoval(); !marked && !slices.Contains([]string{"a", "b", "c", "u", "p"}, d.Type) {
			return true
		}
	}
	for _, f := range l.GetScheduler().GetFlags() {
		if f == api.LinuxSchedulerFlag_SCHED_FLAG_RESET_ON_FORK || f == api.LinuxSchedulerFlag_SCHED_FLAG_DL_OVERRUN {
			return l.GetScheduler().GetPolicy() != api.LinuxSchedulerPolicy_SCHED_NONE
		}
	}
	if s := l.GetSeccompPolicy(); s != nil {
		if s.DefaultAction == "" || slices.Contains(s.Architectures, "") || slices.Contains(s.Flags, "") {
			return true
		}
		for _, sc := range s.Syscalls {
			if sc.Action == "" {
				return true
			}
		}
	}
	return false
}

func outOfRange(a *api.ContainerAdjustment) bool {
	if o := a.GetLinux().GetOomScoreAdj(); o != nil && int64(int32(o.Value)) != o.Value {
		return true
	}
	for _, h := range a.GetLinux().GetResources().GetHugepageLimits() {
		if h.Limit > 1<<63-1 {
			return true
		}
	}
	return false
}

// upstreamDereferencesNil: rlimits without a process, seccomp without a
// Linux section, an rslave mount without a Linux section.
func upstreamDereferencesNil(s *rspec.Spec, a *api.ContainerAdjustment) bool {
	noProcess := s == nil || s.Process == nil
	noLinux := s == nil || s.Linux == nil
	slave := false
	for _, m := range a.GetMounts() {
		slave = slave || slices.Contains(m.Options, "rslave")
	}
	return (noProcess && len(a.GetRlimits()) > 0) ||
		(noLinux && a.GetLinux().GetSeccompPolicy() != nil) ||
		(noLinux && slave)
}

// conflictsResolved: the adjustment removes and sets the same annotation,
// sysctl or net device; upstream applies them in map order (either may
// win), ours sets. Everything else must be equal, and ours must have the
// keys set.
func conflictsResolved(a *api.ContainerAdjustment, up, ours outcome) bool {
	found := conflictingKeys(a)
	if len(found) == 0 {
		return false
	}
	upCopy, oursCopy := deepCopy(up.spec), deepCopy(ours.spec)
	for _, f := range found {
		um, _ := dig(upCopy, f.path...).(map[string]any)
		om, _ := dig(oursCopy, f.path...).(map[string]any)
		for _, k := range f.keys {
			if _, set := om[k]; !set {
				return false
			}
			delete(um, k)
			delete(om, k)
		}
	}
	return reflect.DeepEqual(prune(upCopy), prune(oursCopy))
}

// keyed are keys of a spec map (at path) an adjustment both removes and sets.
type keyed struct {
	path []string
	keys []string
}

func conflictingKeys(a *api.ContainerAdjustment) []keyed {
	var found []keyed
	if k := conflicts(a.GetAnnotations()); len(k) > 0 {
		found = append(found, keyed{[]string{"annotations"}, k})
	}
	if k := conflicts(a.GetLinux().GetSysctl()); len(k) > 0 {
		found = append(found, keyed{[]string{"linux", "sysctl"}, k})
	}
	nd := map[string]string{}
	for k := range a.GetLinux().GetNetDevices() {
		nd[k] = ""
	}
	if k := conflicts(nd); len(k) > 0 {
		found = append(found, keyed{[]string{"linux", "netDevices"}, k})
	}
	return found
}

func conflicts(m map[string]string) []string {
	var keys []string
	for k := range m {
		if _, ok := m[api.MarkForRemoval(k)]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}

func deepCopy(v any) any {
	data, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

// prune drops the maps emptied by removing conflicting keys.
func prune(v any) any {
	if m, ok := v.(map[string]any); ok {
		for k, e := range m {
			if sub, ok := prune(e).(map[string]any); ok && len(sub) == 0 && (k == "annotations" || k == "sysctl" || k == "netDevices") {
				delete(m, k)
			}
		}
	}
	return v
}
