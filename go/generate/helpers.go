//go:build cgo

package generate

// Setters upstream adds next to its generator, as candidates for the stock
// runtime-tools generator. They take runtime-spec values and
// only set fields, with no NRI rule involved, so they work on g.Config
// directly in Go, creating the sections they need as empty ones.

import (
	"slices"

	nri "github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nri-rs/nri-rs/go/generate/internal/ensure"
)

// AddCreateRuntimeHook appends hook to the spec's createRuntime hooks.
func (g *Generator) AddCreateRuntimeHook(hook rspec.Hook) {
	h := g.hooks()
	h.CreateRuntime = append(h.CreateRuntime, hook)
}

// AddCreateContainerHook appends hook to the spec's createContainer hooks.
func (g *Generator) AddCreateContainerHook(hook rspec.Hook) {
	h := g.hooks()
	h.CreateContainer = append(h.CreateContainer, hook)
}

// AddStartContainerHook appends hook to the spec's startContainer hooks.
func (g *Generator) AddStartContainerHook(hook rspec.Hook) {
	h := g.hooks()
	h.StartContainer = append(h.StartContainer, hook)
}

// ClearLinuxIntelRdt drops the spec's whole intelRdt section.
func (g *Generator) ClearLinuxIntelRdt() { g.linux().IntelRdt = nil }

// SetLinuxIntelRdt puts rdt in place of the spec's intelRdt section.
func (g *Generator) SetLinuxIntelRdt(rdt *rspec.LinuxIntelRdt) { g.linux().IntelRdt = rdt }

// SetLinuxIntelRdtClosID stores closID as the intelRdt class of service id.
func (g *Generator) SetLinuxIntelRdtClosID(closID string) { g.intelRdt().ClosID = closID }

// SetLinuxIntelRdtEnableMonitoring switches intelRdt monitoring to value.
func (g *Generator) SetLinuxIntelRdtEnableMonitoring(value bool) {
	g.intelRdt().EnableMonitoring = value
}

// SetLinuxIntelRdtSchemata stores a copy of schemata as the intelRdt schemata.
func (g *Generator) SetLinuxIntelRdtSchemata(schemata []string) {
	g.intelRdt().Schemata = slices.Clone(schemata)
}

// ClearLinuxResourcesBlockIO drops the block I/O part of the resources.
func (g *Generator) ClearLinuxResourcesBlockIO() { g.resources().BlockIO = nil }

// SetLinuxResourcesBlockIO puts blockIO in place of the resources' block I/O
// part.
func (g *Generator) SetLinuxResourcesBlockIO(blockIO *rspec.LinuxBlockIO) {
	g.resources().BlockIO = blockIO
}

// SetProcessIOPriority puts ioprio in place of the process's I/O priority;
// one without a class clears it.
func (g *Generator) SetProcessIOPriority(ioprio *rspec.LinuxIOPriority) {
	p := g.process()
	if ioprio != nil && ioprio.Class == "" {
		ioprio = nil
	}
	p.IOPriority = ioprio
}

// SetLinuxResourcesPidsLimit stores limit as the pids cgroup limit. The
// runtime-spec field is a pointer (nil: no limit) since its v1.3.0, but
// NRI's value is a plain int64, so UnlimitedPidsLimit (or less) leaves the
// limit as it is; a pids section is created either way.
func (g *Generator) SetLinuxResourcesPidsLimit(limit int64) {
	pids := ensure.Ptr(&g.resources().Pids)
	if limit > UnlimitedPidsLimit {
		pids.Limit = &limit
	}
}

// AddLinuxNetDevice records device as the one to move in from host interface
// hostDev (nil: nothing).
func (g *Generator) AddLinuxNetDevice(hostDev string, device *nri.LinuxNetDevice) {
	if device != nil {
		g.netDevices()[hostDev] = device.ToOCI()
	}
}

// RemoveLinuxNetDevice drops the network device of host interface hostDev.
func (g *Generator) RemoveLinuxNetDevice(hostDev string) { delete(g.netDevices(), hostDev) }

// SetLinuxMemoryPolicy puts mpol in place of the spec's memory policy; one
// without a mode clears it.
func (g *Generator) SetLinuxMemoryPolicy(mpol *rspec.LinuxMemoryPolicy) {
	l := g.linux()
	if mpol != nil && mpol.Mode == "" {
		mpol = nil
	}
	l.MemoryPolicy = mpol
}

func (g *Generator) spec() *rspec.Spec { return ensure.Ptr(&g.Config) }

func (g *Generator) process() *rspec.Process { return ensure.Ptr(&g.spec().Process) }

func (g *Generator) hooks() *rspec.Hooks { return ensure.Ptr(&g.spec().Hooks) }

func (g *Generator) linux() *rspec.Linux { return ensure.Ptr(&g.spec().Linux) }

func (g *Generator) resources() *rspec.LinuxResources { return ensure.Ptr(&g.linux().Resources) }

func (g *Generator) intelRdt() *rspec.LinuxIntelRdt { return ensure.Ptr(&g.linux().IntelRdt) }

func (g *Generator) netDevices() map[string]rspec.LinuxNetDevice {
	return ensure.Map(&g.linux().NetDevices)
}
