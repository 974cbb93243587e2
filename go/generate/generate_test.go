package generate_test

// The Go wrapper's own behaviour: errors, panics, atomicity, the shared
// Config, nil entries, the underlying generator's environment.

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	xgen "github.com/containerd/nri/pkg/runtime-tools/generate"
	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nri-rs/nri-rs/go/generate"
	"github.com/nri-rs/nri-rs/go/generate/internal/testgen"
)

func adjustEnv(keyvals ...string) *api.ContainerAdjustment {
	a := &api.ContainerAdjustment{}
	for i := 0; i+1 < len(keyvals); i += 2 {
		a.AddEnv(keyvals[i], keyvals[i+1])
	}
	return a
}

func TestAdjustReplacesTheSharedConfig(t *testing.T) {
	spec := baseSpec()
	gg := testgen.New(spec)
	g := generate.SpecGenerator(gg)
	a := adjustEnv("A", "1")
	a.SetLinuxMemoryLimit(1 << 20)
	if err := g.Adjust(a); err != nil {
		t.Fatal(err)
	}
	if g.Config != spec || gg.Spec() != spec {
		t.Fatal("the Config pointer changed")
	}
	if !reflect.DeepEqual(spec.Process.Env, []string{"A=1"}) || *spec.Linux.Resources.Memory.Swap != 1<<20 {
		t.Fatalf("spec not adjusted: %+v", spec.Process)
	}
	if g.Adjust(nil) != nil {
		t.Fatal("a nil adjustment is a no-op")
	}
}

func TestErrorsLeaveTheSpecAsItWas(t *testing.T) {
	for name, tc := range map[string]struct {
		opt    generate.GeneratorOption
		adjust *api.ContainerAdjustment
		want   string
	}{
		"namespace": {nil, withLinux(&api.LinuxContainerAdjustment{Namespaces: []*api.LinuxNamespace{{Type: "net"}}}),
			`unrecognized namespace "net"`},
		"rlimit": {nil, &api.ContainerAdjustment{Rlimits: []*api.POSIXRlimit{{Type: "nofile"}}},
			`cannot apply rlimit type "nofile": not representable in the OCI spec (oci-spec 0.10)`},
		"checker": {generate.WithResourceChecker(checkResources), withResources(&api.LinuxResources{Memory: &api.LinuxMemory{Limit: api.Int64(1 << 41)}}),
			"failed to adjust resources in OCI Spec: memory limit 2199023255552 is too high"},
	} {
		t.Run(name, func(t *testing.T) {
			spec := baseSpec()
			var opts []generate.GeneratorOption
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			g := generate.SpecGenerator(testgen.New(spec), opts...)
			tc.adjust.AddEnv("A", "changed before the failure")
			err := g.Adjust(tc.adjust)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
			if !reflect.DeepEqual(spec, baseSpec()) {
				t.Fatalf("spec changed: %+v", spec.Process)
			}
		})
	}
}

func TestCallbackErrorsAreUpstreamsAndWrapTheCause(t *testing.T) {
	cause := errors.New("no such class")
	g := generate.SpecGenerator(testgen.New(baseSpec()),
		generate.WithBlockIOResolver(func(string) (*rspec.LinuxBlockIO, error) { return nil, cause }),
		// As upstream, the filter runs even when there are no annotations.
		generate.WithAnnotationFilter(func(m map[string]string) (map[string]string, error) {
			if len(m) == 0 {
				return m, nil
			}
			return nil, cause
		}),
		generate.WithCDIDeviceInjector(func(*rspec.Spec, []string) error { return cause }),
	)
	err := g.Adjust(withResources(&api.LinuxResources{BlockioClass: api.String("x")}))
	if err == nil || err.Error() != "failed to adjust BlockIO class in OCI Spec: no such class" || !errors.Is(err, cause) {
		t.Fatalf("block I/O: %v", err)
	}
	err = g.Adjust(&api.ContainerAdjustment{Annotations: map[string]string{"a": "b"}})
	if err == nil || err.Error() != "failed to adjust annotations in OCI Spec: no such class" || !errors.Is(err, cause) {
		t.Fatalf("Adjust annotations: %v", err)
	}
	// As upstream: AdjustAnnotations and the injector return the error as is.
	if err := g.AdjustAnnotations(map[string]string{"a": "b"}); err != cause {
		t.Fatalf("AdjustAnnotations: %v", err)
	}
	if err := g.Adjust(&api.ContainerAdjustment{CDIDevices: []*api.CDIDevice{{Name: "v/c=d"}}}); err != cause {
		t.Fatalf("CDI: %v", err)
	}
}

func TestCallbackPanicsReachTheCaller(t *testing.T) {
	spec := baseSpec()
	g := generate.SpecGenerator(testgen.New(spec), generate.WithCDIDeviceInjector(func(s *rspec.Spec, _ []string) error {
		s.Hostname = "changed by the injector"
		panic("injector bug")
	}))
	defer func() {
		if p := recover(); p != "injector bug" {
			t.Fatalf("recovered %v", p)
		}
		if !reflect.DeepEqual(spec, baseSpec()) {
			t.Fatalf("spec changed: %q", spec.Hostname)
		}
	}()
	_ = g.Adjust(&api.ContainerAdjustment{CDIDevices: []*api.CDIDevice{{Name: "v/c=d"}}})
	t.Fatal("no panic")
}

func TestTheInjectorGetsConfigItself(t *testing.T) {
	spec := baseSpec()
	var g *generate.Generator
	g = generate.SpecGenerator(testgen.New(spec), generate.WithCDIDeviceInjector(func(s *rspec.Spec, names []string) error {
		if s != g.Config {
			t.Error("the injector got a copy")
		}
		if !reflect.DeepEqual(s.Process.Env, []string{"A=1"}) {
			t.Errorf("the injector does not see the earlier steps: %v", s.Process.Env)
		}
		s.Hostname = strings.Join(names, ",")
		return nil
	}))
	a := adjustEnv("A", "1")
	a.AddCDIDevice(&api.CDIDevice{Name: "v/c=d"})
	a.AddCDIDevice(&api.CDIDevice{Name: "v/c=e"})
	if err := g.Adjust(a); err != nil {
		t.Fatal(err)
	}
	if spec.Hostname != "v/c=d,v/c=e" {
		t.Fatalf("hostname %q", spec.Hostname)
	}
}

func TestPidsWithoutALimitStayWithoutOne(t *testing.T) {
	spec := baseSpec()
	spec.Linux.Resources.Pids.Limit = nil
	g := generate.SpecGenerator(testgen.New(spec))
	if err := g.AdjustResources(&api.LinuxResources{Pids: &api.LinuxPids{Limit: generate.UnlimitedPidsLimit}}); err != nil {
		t.Fatal(err)
	}
	if spec.Linux.Resources.Pids == nil || spec.Linux.Resources.Pids.Limit != nil {
		t.Fatalf("pids %+v", spec.Linux.Resources.Pids)
	}
}

func TestSpecFieldsTheCoreCannotHoldAreRefused(t *testing.T) {
	spec := baseSpec()
	spec.VM = &rspec.VM{Hypervisor: rspec.VMHypervisor{Path: "/hv"}, Kernel: rspec.VMKernel{Path: "/k"}, HwConfig: &rspec.HWConfig{VCPUs: ptr[uint32](2)}}
	g := generate.SpecGenerator(testgen.New(spec))
	err := g.Adjust(adjustEnv("A", "1"))
	if err == nil || err.Error() != "spec fields oci-spec 0.10 cannot hold would be lost: vm.hwconfig" {
		t.Fatalf("got %v", err)
	}
	if spec.Process.Env != nil || spec.VM.HwConfig == nil {
		t.Fatal("spec changed")
	}
}

func TestNilEntriesAreSkipped(t *testing.T) {
	spec := baseSpec()
	spec.Mounts = []rspec.Mount{{Destination: "/a"}}
	spec.Linux.NetDevices = map[string]rspec.LinuxNetDevice{"eth0": {}, "eth1": {}}
	g := generate.SpecGenerator(testgen.New(spec))
	err := g.Adjust(&api.ContainerAdjustment{
		Mounts: []*api.Mount{nil, {Destination: "/b"}},
		Env:    []*api.KeyValue{nil},
		Linux: &api.LinuxContainerAdjustment{NetDevices: map[string]*api.LinuxNetDevice{
			"eth2": nil, api.MarkForRemoval("eth0"): nil,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []rspec.Mount{{Destination: "/a"}, {Destination: "/b"}}
	if !reflect.DeepEqual(spec.Mounts, want) {
		t.Fatalf("mounts %+v", spec.Mounts)
	}
	if !reflect.DeepEqual(spec.Linux.NetDevices, map[string]rspec.LinuxNetDevice{"eth1": {}}) {
		t.Fatalf("net devices %+v", spec.Linux.NetDevices)
	}
}

// envIndex is an underlying generator that indexes the environment, as
// runtime-tools' does, and so must see every rewrite of it.
type envIndex struct {
	*testgen.Generator
	index map[string]int
}

func (e *envIndex) ClearProcessEnv() {
	e.Generator.ClearProcessEnv()
	e.index = map[string]int{}
}

func (e *envIndex) AddProcessEnv(name, value string) {
	e.Generator.AddProcessEnv(name, value)
	e.index[name] = len(e.index)
}

func TestTheUnderlyingGeneratorSeesTheNewEnvironment(t *testing.T) {
	spec := baseSpec()
	spec.Process.Env = []string{"A=1", "B=2", "C=3"}
	gg := &envIndex{Generator: testgen.New(spec), index: map[string]int{"A": 0, "B": 1, "C": 2}}
	g := generate.SpecGenerator(gg)
	a := &api.ContainerAdjustment{}
	a.RemoveEnv("A")
	a.AddEnv("D", "4")
	if err := g.Adjust(a); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"B": 0, "C": 1, "D": 2}; !reflect.DeepEqual(gg.index, want) {
		t.Fatalf("index %v, want %v", gg.index, want)
	}
	if want := []string{"B=2", "C=3", "D=4"}; !reflect.DeepEqual(spec.Process.Env, want) {
		t.Fatalf("env %v", spec.Process.Env)
	}
}

// The API is upstream's: every method of upstream's Generator, with the
// same signature, and the same option constructors.
func TestTheAPIIsUpstreams(t *testing.T) {
	up, ours := reflect.TypeOf(&xgen.Generator{}), reflect.TypeOf(&generate.Generator{})
	for i := range up.NumMethod() {
		m := up.Method(i)
		o, ok := ours.MethodByName(m.Name)
		if !ok {
			t.Errorf("missing method %s", m.Name)
			continue
		}
		if ut, ot := m.Type, o.Type; ut.NumIn() != ot.NumIn() || ut.NumOut() != ot.NumOut() {
			t.Errorf("%s: %v, upstream %v", m.Name, ot, ut)
		} else {
			for j := 1; j < ut.NumIn(); j++ {
				if ut.In(j) != ot.In(j) {
					t.Errorf("%s: argument %d is %v, upstream %v", m.Name, j, ot.In(j), ut.In(j))
				}
			}
			for j := range ut.NumOut() {
				if ut.Out(j) != ot.Out(j) {
					t.Errorf("%s: result %d is %v, upstream %v", m.Name, j, ot.Out(j), ut.Out(j))
				}
			}
		}
	}
	if up.NumMethod() != ours.NumMethod() {
		t.Errorf("%d methods, upstream %d", ours.NumMethod(), up.NumMethod())
	}
	var (
		_ func(generate.UnderlyingGenerator, ...generate.GeneratorOption) *generate.Generator = generate.SpecGenerator
		_ func(func(map[string]string) (map[string]string, error)) generate.GeneratorOption   = generate.WithLabelFilter
		_ func(func(map[string]string) (map[string]string, error)) generate.GeneratorOption   = generate.WithAnnotationFilter
		_ func(func(string) (*rspec.LinuxBlockIO, error)) generate.GeneratorOption            = generate.WithBlockIOResolver
		_ func(func(string) (*rspec.LinuxIntelRdt, error)) generate.GeneratorOption           = generate.WithRdtResolver
		_ func(func(*rspec.LinuxResources) error) generate.GeneratorOption                    = generate.WithResourceChecker
		_ func(func(*rspec.Spec, []string) error) generate.GeneratorOption                    = generate.WithCDIDeviceInjector
		_ xgen.UnderlyingGenerator                                                            = generate.UnderlyingGenerator(nil)
		_ generate.UnderlyingGenerator                                                        = xgen.UnderlyingGenerator(nil)
	)
	if generate.UnlimitedPidsLimit != xgen.UnlimitedPidsLimit {
		t.Error("UnlimitedPidsLimit differs")
	}
}

func TestHelpersSetFieldsAsUpstreams(t *testing.T) {
	var got [2]string
	for i, upstream := range []bool{true, false} {
		spec := &rspec.Spec{}
		var g interface {
			AddCreateRuntimeHook(rspec.Hook)
			AddCreateContainerHook(rspec.Hook)
			AddStartContainerHook(rspec.Hook)
			SetLinuxIntelRdtClosID(string)
			SetLinuxIntelRdtSchemata([]string)
			SetLinuxIntelRdtEnableMonitoring(bool)
			SetLinuxResourcesPidsLimit(int64)
			AddLinuxNetDevice(string, *api.LinuxNetDevice)
			RemoveLinuxNetDevice(string)
			SetProcessIOPriority(*rspec.LinuxIOPriority)
			SetLinuxMemoryPolicy(*rspec.LinuxMemoryPolicy)
			SetLinuxResourcesBlockIO(*rspec.LinuxBlockIO)
		}
		if upstream {
			g = xgen.SpecGenerator(testgen.New(spec))
		} else {
			g = generate.SpecGenerator(testgen.New(spec))
		}
		g.AddCreateRuntimeHook(rspec.Hook{Path: "/a"})
		g.AddCreateContainerHook(rspec.Hook{Path: "/b"})
		g.AddStartContainerHook(rspec.Hook{Path: "/c"})
		g.SetLinuxIntelRdtClosID("c")
		g.SetLinuxIntelRdtSchemata([]string{"L3:0=f"})
		g.SetLinuxIntelRdtEnableMonitoring(true)
		g.SetLinuxResourcesPidsLimit(generate.UnlimitedPidsLimit)
		g.AddLinuxNetDevice("eth0", &api.LinuxNetDevice{Name: "n"})
		g.AddLinuxNetDevice("eth1", nil)
		g.RemoveLinuxNetDevice("eth2")
		g.SetProcessIOPriority(&rspec.LinuxIOPriority{Priority: 1})
		g.SetLinuxMemoryPolicy(&rspec.LinuxMemoryPolicy{Mode: rspec.MpolBind})
		g.SetLinuxResourcesBlockIO(&rspec.LinuxBlockIO{})
		data, _ := json.Marshal(spec)
		got[i] = string(data)
	}
	if got[0] != got[1] || !strings.Contains(got[1], `"startContainer":[{"path":"/c"}]`) {
		t.Errorf("upstream %s\n    ours %s", got[0], got[1])
	}
}
