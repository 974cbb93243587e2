//go:build cgo

// Package generate is a drop-in for upstream NRI's
// github.com/containerd/nri/pkg/runtime-tools/generate (v0.12.2): the same
// exported names and signatures, with the adjustment logic done by nri-rs's
// Rust spec generator (nri_spec) over the C ABI (include/nri.h). A
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
	// UnlimitedPidsLimit is the pids limit that means no limit: given to
	// SetLinuxResourcesPidsLimit, it leaves the spec's limit alone.
	UnlimitedPidsLimit = -1
)

// UnderlyingGenerator lists the methods of
// [github.com/opencontainers/runtime-tools/generate.Generator] that a
// Generator wraps; the set is upstream's. This package uses only Spec (to find the spec) and,
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

// GeneratorOption configures a Generator as SpecGenerator makes it.
type GeneratorOption func(*Generator)

// Generator wraps a runtime-tools generator and adds the methods that apply
// NRI adjustments and updates to the spec it works on (Config).
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

// SpecGenerator wraps gg, whose spec becomes Config, and applies opts.
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

// WithLabelFilter records fn as the filter for labels, which may drop some or
// fail. As upstream, no method of Generator applies it.
func WithLabelFilter(fn func(map[string]string) (map[string]string, error)) GeneratorOption {
	return func(g *Generator) {
		g.filterLabels = fn
	}
}

// WithAnnotationFilter has fn filter (or reject) an adjustment's annotations
// before they are applied; fn sees the keys with their removal markers.
func WithAnnotationFilter(fn func(map[string]string) (map[string]string, error)) GeneratorOption {
	return func(g *Generator) {
		g.filterAnnotations = fn
	}
}

// WithBlockIOResolver has fn turn a block I/O class name into the settings
// to use; without it, block I/O classes are ignored.
func WithBlockIOResolver(fn func(string) (*rspec.LinuxBlockIO, error)) GeneratorOption {
	return func(g *Generator) {
		g.resolveBlockIO = fn
	}
}

// WithRdtResolver has fn turn an RDT class name into the settings to use;
// without it, RDT classes are ignored.
func WithRdtResolver(fn func(string) (*rspec.LinuxIntelRdt, error)) GeneratorOption {
	return func(g *Generator) {
		g.resolveRdt = fn
	}
}

// WithResourceChecker has fn check, and possibly change, the resources once an
// adjustment has been applied to them; its error fails the adjustment.
func WithResourceChecker(fn func(*rspec.LinuxResources) error) GeneratorOption {
	return func(g *Generator) {
		g.checkResources = fn
	}
}

// WithCDIDeviceInjector gives the runtime's own way of putting CDI devices,
// named in full, into the spec; without it, CDI devices are skipped.
func WithCDIDeviceInjector(fn func(*rspec.Spec, []string) error) GeneratorOption {
	return func(g *Generator) {
		g.injectCDIDevices = fn
	}
}

// Adjust applies every part of adjust to the spec, in upstream's order.
// On error the Spec is left as it was.
func (g *Generator) Adjust(adjust *nri.ContainerAdjustment) error {
	if adjust == nil {
		return nil
	}
	return g.adjust(adjust, g.callbacks(useAll))
}

// AdjustEnv sets the variables env names, removes those marked "-NAME" and
// appends the new ones.
func (g *Generator) AdjustEnv(env []*nri.KeyValue) {
	if len(env) == 0 {
		return
	}
	g.mustAdjust(&nri.ContainerAdjustment{Env: env})
}

// AdjustArgs replaces the process's arguments with args, if any are given.
func (g *Generator) AdjustArgs(args []string) {
	if len(args) == 0 {
		return
	}
	g.mustAdjust(&nri.ContainerAdjustment{Args: args})
}

// AdjustAnnotations sets the annotations given, or removes those marked
// "-key", after the annotation filter has seen them. A filter's
// error is returned as it is, as upstream does.
func (g *Generator) AdjustAnnotations(annotations map[string]string) error {
	err := g.adjust(&nri.ContainerAdjustment{Annotations: annotations}, g.callbacks(useAnnotationFilter))
	if cb, ok := err.(*callbackError); ok {
		return cb.err
	}
	return err
}

// AdjustHooks appends each of hooks to the spec's list for its stage.
func (g *Generator) AdjustHooks(hooks *nri.Hooks) {
	if hooks != nil {
		g.mustAdjust(&nri.ContainerAdjustment{Hooks: hooks})
	}
}

// AdjustResources applies r's CPU, memory limit, hugepage, pids, unified and
// device cgroup settings to the spec, then runs the resource checker; block
// I/O and RDT classes are left to AdjustBlockIOClass and AdjustRdtClass.
func (g *Generator) AdjustResources(r *nri.LinuxResources) error {
	if r == nil {
		return nil
	}
	return g.update(r, g.callbacks(useResourceChecker))
}

// AdjustBlockIOClass replaces the spec's block I/O settings with those the
// resolver gives for the class; with no resolver it does nothing.
func (g *Generator) AdjustBlockIOClass(blockIOClass *string) error {
	if blockIOClass == nil || g.resolveBlockIO == nil {
		return nil
	}
	r := &nri.LinuxResources{BlockioClass: nri.String(*blockIOClass)}
	return g.update(r, g.callbacks(useBlockIOResolver))
}

// AdjustRdtClass replaces the spec's RDT settings with those the resolver
// gives for the class; with no resolver it does nothing.
func (g *Generator) AdjustRdtClass(rdtClass *string) error {
	if rdtClass == nil || g.resolveRdt == nil {
		return nil
	}
	r := &nri.LinuxResources{RdtClass: nri.String(*rdtClass)}
	return g.update(r, g.callbacks(useRdtResolver))
}

// AdjustRdt sets the RDT fields r carries in the spec's intelRdt section,
// clearing the section first when r asks for removal.
func (g *Generator) AdjustRdt(r *nri.LinuxRdt) {
	if r != nil {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{Rdt: r})
	}
}

// AdjustRdtClosID sets the RDT class of service (CLOS) id, if value is set.
func (g *Generator) AdjustRdtClosID(value *string) {
	if value != nil {
		g.AdjustRdt(&nri.LinuxRdt{ClosId: nri.String(*value)})
	}
}

// AdjustRdtSchemata sets the RDT schemata lines, if value is set.
func (g *Generator) AdjustRdtSchemata(value *[]string) {
	if value != nil {
		g.AdjustRdt(&nri.LinuxRdt{Schemata: nri.RepeatedString(*value)})
	}
}

// AdjustRdtEnableMonitoring turns RDT monitoring on or off, if value is set.
func (g *Generator) AdjustRdtEnableMonitoring(value *bool) {
	if value != nil {
		g.AdjustRdt(&nri.LinuxRdt{EnableMonitoring: nri.Bool(*value)})
	}
}

// AdjustCgroupsPath makes a non-empty path the container's cgroups path.
func (g *Generator) AdjustCgroupsPath(path string) {
	if path != "" {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{CgroupsPath: path})
	}
}

// AdjustOomScoreAdj sets the process's oom_score_adj, replacing whatever the
// spec held, including a value kubelet chose.
func (g *Generator) AdjustOomScoreAdj(score *nri.OptionalInt) {
	if score != nil {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{OomScoreAdj: score})
	}
}

// AdjustIOPriority sets the process's I/O priority; class IOPRIO_CLASS_NONE
// clears it.
func (g *Generator) AdjustIOPriority(ioprio *nri.LinuxIOPriority) {
	if ioprio != nil {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{IoPriority: ioprio})
	}
}

// AdjustSeccompPolicy puts policy in place of the spec's seccomp profile,
// whichever profile kubelet had asked for.
func (g *Generator) AdjustSeccompPolicy(policy *nri.LinuxSeccomp) error {
	if policy == nil {
		return nil
	}
	return g.adjustLinux(&nri.LinuxContainerAdjustment{SeccompPolicy: policy})
}

// AdjustNamespaces gives each namespace type listed its new path, appending
// the types the spec lacks; a type marked "-type" is removed.
func (g *Generator) AdjustNamespaces(namespaces []*nri.LinuxNamespace) error {
	if len(namespaces) == 0 {
		return nil
	}
	return g.adjustLinux(&nri.LinuxContainerAdjustment{Namespaces: namespaces})
}

// AdjustSysctl sets each sysctl key given to its value; a key marked "-key"
// is removed.
func (g *Generator) AdjustSysctl(sysctl map[string]string) error {
	if len(sysctl) == 0 {
		return nil
	}
	return g.adjustLinux(&nri.LinuxContainerAdjustment{Sysctl: sysctl})
}

// AdjustLinuxScheduler sets the process's scheduling policy and its
// parameters; policy SCHED_NONE clears them.
func (g *Generator) AdjustLinuxScheduler(sch *nri.LinuxScheduler) {
	if sch != nil {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{Scheduler: sch})
	}
}

// AdjustMemoryPolicy puts memoryPolicy in place of the spec's Linux memory
// policy (the set_mempolicy mode, nodes and flags).
func (g *Generator) AdjustMemoryPolicy(memoryPolicy *nri.LinuxMemoryPolicy) {
	if memoryPolicy != nil {
		g.mustAdjustLinux(&nri.LinuxContainerAdjustment{MemoryPolicy: memoryPolicy})
	}
}

// AdjustDevices puts each device at its path, allowing it in the device
// cgroup; a path marked "-path" removes the device there.
func (g *Generator) AdjustDevices(devices []*nri.LinuxDevice) {
	if len(devices) == 0 {
		return
	}
	g.mustAdjustLinux(&nri.LinuxContainerAdjustment{Devices: devices})
}

// AdjustLinuxNetDevices sets the network devices to move into the container,
// keyed by host interface name; a key marked "-name" is removed.
func (g *Generator) AdjustLinuxNetDevices(devices map[string]*nri.LinuxNetDevice) error {
	if len(devices) == 0 {
		return nil
	}
	return g.adjustLinux(&nri.LinuxContainerAdjustment{NetDevices: devices})
}

// InjectCDIDevices hands the fully qualified names of devices to the
// injector given with WithCDIDeviceInjector, which edits the spec; with no
// injector, or no devices, it does nothing.
// The injector's error is returned as it is, and the Spec put back as it
// was.
func (g *Generator) InjectCDIDevices(devices []*nri.CDIDevice) error {
	if len(devices) == 0 || g.injectCDIDevices == nil {
		return nil
	}
	return g.adjust(&nri.ContainerAdjustment{CDIDevices: devices}, g.callbacks(useCDIInjector))
}

// AdjustRlimits appends each POSIX rlimit given to the process's list.
func (g *Generator) AdjustRlimits(rlimits []*nri.POSIXRlimit) error {
	if len(rlimits) == 0 {
		return nil
	}
	return g.adjust(&nri.ContainerAdjustment{Rlimits: rlimits}, nil)
}

// AdjustMounts puts each mount at its destination, replacing the one there (a
// destination marked "-dest" only removes), then sorts the mounts.
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
