//go:build cgo

// Package generate is a drop-in for upstream NRI's
// github.com/containerd/nri/pkg/runtime-tools/generate (v0.12.2): the same
// exported names and signatures, with the adjustment logic done by nri-rs's
// Rust spec generator (nri::spec) over the C ABI (include/nri.h). A
// runtime changes the import path and nothing else.
//
// Each Adjust* call marshals the spec (g.Config) to JSON and the NRI values
// to protobuf, lets the Rust generator apply them, and replaces *g.Config
// with the result, so the underlying generator, which shares g.Config, sees
// the change. Callbacks (filters, resolvers, checker, CDI injector) run on
// the calling goroutine during the call, as upstream's do.
//
// Differences from upstream are listed in docs/COMPATIBILITY.md ("Spec
// generator") and docs/spec.md; the main ones: an adjustment that cannot be
// applied returns an error and leaves g.Config as it was (upstream may
// leave half of it applied or panic), and values the OCI spec has no name
// for are refused rather than written.
package generate

import (
	"strings"

	nri "github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
)

const (
	// UnlimitedPidsLimit indicates unlimited Linux PIDs limit.
	UnlimitedPidsLimit = -1
)

// UnderlyingGenerator is the interface for
// [github.com/opencontainers/runtime-tools/generate.Generator], the same
// as upstream's. This package uses only Spec (to find the spec) and,
// after changing the environment, ClearProcessEnv and AddProcessEnv, so a
// generator that keeps state about the environment stays in step.
type UnderlyingGenerator interface {
	AddAnnotation(key, value string)
	AddDevice(device rspec.LinuxDevice)
	AddOrReplaceLinuxNamespace(ns string, path string) error
	AddPostStartHook(postStartHook rspec.Hook)
	AddPostStopHook(postStopHook rspec.Hook)
	AddPreStartHook(preStartHook rspec.Hook)
	AddProcessEnv(name, value string)
	AddLinuxResourcesDevice(allow bool, devType string, major, minor *int64, access string)
	AddLinuxResourcesHugepageLimit(pageSize string, limit uint64)
	AddLinuxResourcesUnified(key, val string)
	AddMount(mnt rspec.Mount)
	AddLinuxSysctl(key, value string)
	ClearMounts()
	ClearProcessEnv()
	Mounts() []rspec.Mount
	RemoveAnnotation(key string)
	RemoveDevice(path string)
	RemoveLinuxNamespace(ns string) error
	RemoveMount(dest string)
	RemoveLinuxSysctl(key string)
	SetProcessArgs(args []string)
	SetLinuxCgroupsPath(path string)
	SetLinuxResourcesCPUCpus(cpus string)
	SetLinuxResourcesCPUMems(mems string)
	SetLinuxResourcesCPUPeriod(period uint64)
	SetLinuxResourcesCPUQuota(quota int64)
	SetLinuxResourcesCPURealtimePeriod(period uint64)
	SetLinuxResourcesCPURealtimeRuntime(time int64)
	SetLinuxResourcesCPUShares(shares uint64)
	SetLinuxResourcesMemoryLimit(limit int64)
	SetLinuxResourcesMemorySwap(swap int64)
	SetLinuxRootPropagation(rp string) error
	SetProcessOOMScoreAdj(adj int)
	Spec() *rspec.Spec
}

// GeneratorOption is an option for Generator().
type GeneratorOption func(*Generator)

// Generator extends a stock runtime-tools Generator with functions for
// handling NRI container adjustment.
type Generator struct {
	UnderlyingGenerator
	Config            *rspec.Spec
	filterLabels      func(map[string]string) (map[string]string, error)
	filterAnnotations func(map[string]string) (map[string]string, error)
	resolveBlockIO    func(string) (*rspec.LinuxBlockIO, error)
	resolveRdt        func(string) (*rspec.LinuxIntelRdt, error)
	injectCDIDevices  func(*rspec.Spec, []string) error
	checkResources    func(*rspec.LinuxResources) error
}

// SpecGenerator returns a wrapped OCI Spec Generator.
func SpecGenerator(gg UnderlyingGenerator, opts ...GeneratorOption) *Generator {
	g := &Generator{
		UnderlyingGenerator: gg,
		Config:              gg.Spec(),
	}
	for _, o := range opts {
		o(g)
	}
	return g
}

// WithLabelFilter provides an option for filtering or rejecting labels.
// As upstream, no method of Generator applies it.
func WithLabelFilter(fn func(map[string]string) (map[string]string, error)) GeneratorOption {
	return func(g *Generator) {
		g.filterLabels = fn
	}
}

// WithAnnotationFilter provides an option for filtering or rejecting annotations.
func WithAnnotationFilter(fn func(map[string]string) (map[string]string, error)) GeneratorOption {
	return func(g *Generator) {
		g.filterAnnotations = fn
	}
}

// WithBlockIOResolver specifies a function for resolving Block I/O classes by name.
func WithBlockIOResolver(fn func(string) (*rspec.LinuxBlockIO, error)) GeneratorOption {
	return func(g *Generator) {
		g.resolveBlockIO = fn
	}
}

// WithRdtResolver specifies a function for resolving RDT classes by name.
func WithRdtResolver(fn func(string) (*rspec.LinuxIntelRdt, error)) GeneratorOption {
	return func(g *Generator) {
		g.resolveRdt = fn
	}
}

// WithResourceChecker specifies a function to perform final resource adjustment.
func WithResourceChecker(fn func(*rspec.LinuxResources) error) GeneratorOption {
	return func(g *Generator) {
		g.checkResources = fn
	}
}

// WithCDIDeviceInjector specifies a runtime-specific function to use for CDI
// device resolution and injection into an OCI Spec.
func WithCDIDeviceInjector(fn func(*rspec.Spec, []string) error) GeneratorOption {
	return func(g *Generator) {
		g.injectCDIDevices = fn
	}
}

// Adjust adjusts all aspects of the OCI Spec that NRI knows/cares about.
// On error the Spec is left as it was.
func (g *Generator) Adjust(adjust *nri.ContainerAdjustment) error {
	if adjust == nil {
		return nil
	}
	return g.adjust(adjust, g.callbacks(useAll))
}

// AdjustEnv adjusts the environment of the OCI Spec.
func (g *Generator) AdjustEnv(env []*nri.KeyValue) {
	if len(env) == 0 {
		return
	}
	g.mustAdjust(&nri.ContainerAdjustment{Env: env})
}

// AdjustArgs adjusts the process arguments in the OCI Spec.
func (g *Generator) AdjustArgs(args []string) {
	if len(args) == 0 {
		return
	}
	g.mustAdjust(&nri.ContainerAdjustment{Args: args})
}

// AdjustAnnotations adjusts the annotations in the OCI Spec. A filter's
// error is returned as it is, as upstream does.
func (g *Generator) AdjustAnnotations(annotations map[string]string) error {
	err := g.adjust(&nri.ContainerAdjustment{Annotations: annotations}, g.callbacks(useAnnotationFilter))
	if cb, ok := err.(*callbackError); ok {
		return cb.err
	}
	return err
}

// AdjustHooks adjusts the OCI hooks in the OCI Spec.
func (g *Generator) AdjustHooks(hooks *nri.Hooks) {
	if hooks != nil {
		g.mustAdjust(&nri.ContainerAdjustment{Hooks: hooks})
	}
}

// AdjustResources adjusts the (Linux) resources in the OCI Spec, without
// their block I/O and RDT classes.
func (g *Generator) AdjustResources(r *nri.LinuxResources) error {
	if r == nil {
		return nil
	}
	return g.update(r, g.callbacks(useResourceChecker))
}

// AdjustBlockIOClass adjusts the block I/O class in the OCI Spec.
func (g *Generator) AdjustBlockIOClass(blockIOClass *string) error {
	if blockIOClass == nil || g.resolveBlockIO == nil {
		return nil
	}
	r := &nri.LinuxResources{BlockioClass: nri.String(*blockIOClass)}
	return g.update(r, g.callbacks(useBlockIOResolver))
}

// AdjustRdtClass adjusts the RDT class in the OCI Spec.
func (g *Generator) AdjustRdtClass(rdtClass *string) error {
	if rdtClass == nil || g.resolveRdt == nil {
		return nil
	}
	r := &nri.LinuxResources{RdtClass: nri.String(*rdtClass)}
	return g.update(r, g.callbacks(useRdtResolver))
}

// AdjustRdt adjusts the intelRdt object in the OCI Spec.
func (g *Generator) AdjustRdt(r *nri.LinuxRdt) {
	if r != nil {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{Rdt: r})
	}
}

// AdjustRdtClosID adjusts the RDT CLOS id in the OCI Spec.
func (g *Generator) AdjustRdtClosID(value *string) {
	if value != nil {
		g.AdjustRdt(&nri.LinuxRdt{ClosId: nri.String(*value)})
	}
}

// AdjustRdtSchemata adjusts the RDT schemata in the OCI Spec.
func (g *Generator) AdjustRdtSchemata(value *[]string) {
	if value != nil {
		g.AdjustRdt(&nri.LinuxRdt{Schemata: nri.RepeatedString(*value)})
	}
}

// AdjustRdtEnableMonitoring adjusts the RDT monitoring in the OCI Spec.
func (g *Generator) AdjustRdtEnableMonitoring(value *bool) {
	if value != nil {
		g.AdjustRdt(&nri.LinuxRdt{EnableMonitoring: nri.Bool(*value)})
	}
}

// AdjustCgroupsPath adjusts the cgroup pseudofs path in the OCI Spec.
func (g *Generator) AdjustCgroupsPath(path string) {
	if path != "" {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{CgroupsPath: path})
	}
}

// AdjustOomScoreAdj adjusts the kernel's Out-Of-Memory (OOM) killer score for the container.
// This may override kubelet's settings for OOM score.
func (g *Generator) AdjustOomScoreAdj(score *nri.OptionalInt) {
	if score != nil {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{OomScoreAdj: score})
	}
}

// AdjustIOPriority adjusts the IO priority of the container.
func (g *Generator) AdjustIOPriority(ioprio *nri.LinuxIOPriority) {
	if ioprio != nil {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{IoPriority: ioprio})
	}
}

// AdjustSeccompPolicy adjusts the seccomp policy for the container, which may
// override kubelet's settings for the seccomp policy.
func (g *Generator) AdjustSeccompPolicy(policy *nri.LinuxSeccomp) error {
	if policy == nil {
		return nil
	}
	return g.adjustLinux(&nri.LinuxContainerAdjustment{SeccompPolicy: policy})
}

// AdjustNamespaces adds or replaces namespaces in the OCI Spec.
func (g *Generator) AdjustNamespaces(namespaces []*nri.LinuxNamespace) error {
	if len(namespaces) == 0 {
		return nil
	}
	return g.adjustLinux(&nri.LinuxContainerAdjustment{Namespaces: namespaces})
}

// AdjustSysctl adds, replaces, or removes the sysctl settings in the OCI Spec.
func (g *Generator) AdjustSysctl(sysctl map[string]string) error {
	if len(sysctl) == 0 {
		return nil
	}
	return g.adjustLinux(&nri.LinuxContainerAdjustment{Sysctl: sysctl})
}

// AdjustLinuxScheduler adjusts linux scheduling policy parameters.
func (g *Generator) AdjustLinuxScheduler(sch *nri.LinuxScheduler) {
	if sch != nil {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{Scheduler: sch})
	}
}

// AdjustMemoryPolicy adjusts default memory policy (set_mempolicy) for the container.
func (g *Generator) AdjustMemoryPolicy(memoryPolicy *nri.LinuxMemoryPolicy) {
	if memoryPolicy != nil {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{MemoryPolicy: memoryPolicy})
	}
}

// AdjustDevices adjusts the (Linux) devices in the OCI Spec.
func (g *Generator) AdjustDevices(devices []*nri.LinuxDevice) {
	if len(devices) == 0 {
		return
	}
	g.mustAdjustLinux(&nri.LinuxContainerAdjustment{Devices: devices})
}

// AdjustLinuxNetDevices adjusts the linux net devices in the OCI Spec.
func (g *Generator) AdjustLinuxNetDevices(devices map[string]*nri.LinuxNetDevice) error {
	if len(devices) == 0 {
		return nil
	}
	return g.adjustLinux(&nri.LinuxContainerAdjustment{NetDevices: devices})
}

// InjectCDIDevices injects the requested CDI devices into the OCI Spec.
// Devices are given by their fully qualified CDI device names. The
// actual device injection is done using a runtime-specific CDI
// injection function, set using the WithCDIDeviceInjector option.
// The injector's error is returned as it is, and the Spec put back as it
// was.
func (g *Generator) InjectCDIDevices(devices []*nri.CDIDevice) error {
	if len(devices) == 0 || g.injectCDIDevices == nil {
		return nil
	}
	return g.adjust(&nri.ContainerAdjustment{CDIDevices: devices}, g.callbacks(useCDIInjector))
}

// AdjustRlimits adjusts the (Linux) POSIX resource limits in the OCI Spec.
func (g *Generator) AdjustRlimits(rlimits []*nri.POSIXRlimit) error {
	if len(rlimits) == 0 {
		return nil
	}
	return g.adjust(&nri.ContainerAdjustment{Rlimits: rlimits}, nil)
}

// AdjustMounts adjusts the mounts in the OCI Spec.
func (g *Generator) AdjustMounts(mounts []*nri.Mount) error {
	if len(mounts) == 0 {
		return nil
	}
	return g.adjust(&nri.ContainerAdjustment{Mounts: mounts}, nil)
}

func (g *Generator) adjustLinux(l *nri.LinuxContainerAdjustment) error {
	return g.adjust(&nri.ContainerAdjustment{Linux: l}, nil)
}

// mustAdjust applies what upstream applies without an error return. It
// fails only on values the OCI spec cannot hold (an unknown device type,
// I/O priority class, scheduler policy or memory policy mode, ...), which
// upstream writes into the spec unchecked; the spec is then left as it
// was, and the failure is logged.
func (g *Generator) mustAdjust(adjust *nri.ContainerAdjustment) {
	if err := g.adjust(adjust, nil); err != nil {
		logRefused(err)
	}
}

func (g *Generator) mustAdjustLinux(l *nri.LinuxContainerAdjustment) {
	g.mustAdjust(&nri.ContainerAdjustment{Linux: l})
}

// syncEnv replays the process environment through the underlying
// generator, as upstream's AdjustEnv builds it, so a generator that
// indexes the environment (runtime-tools does) stays consistent.
func (g *Generator) syncEnv() {
	if g.UnderlyingGenerator == nil || g.Spec() != g.Config || g.Config.Process == nil {
		return
	}
	env := g.Config.Process.Env
	g.ClearProcessEnv()
	for _, e := range env {
		if name, value, ok := strings.Cut(e, "="); ok {
			g.AddProcessEnv(name, value)
		}
	}
}
