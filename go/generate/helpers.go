//go:build cgo

package generate

// Setters upstream adds next to its generator (it calls them "could be
// added to the stock Spec generator"). They take runtime-spec values and
// only set fields, with no NRI rule involved, so they work on g.Config
// directly in Go, creating the sections they need as empty ones.

import (
	"slices"

	nri "github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nri-rs/nri-rs/go/generate/internal/ensure"
)

// AddCreateRuntimeHook adds a hooks new CreateRuntime hooks.
func (g *Generator) AddCreateRuntimeHook(hook rspec.Hook) {
	h := g.hooks()
	h.CreateRuntime = append(h.CreateRuntime, hook)
}

// AddCreateContainerHook adds a hooks new CreateContainer hooks.
func (g *Generator) AddCreateContainerHook(hook rspec.Hook) {
	h := g.hooks()
	h.CreateContainer = append(h.CreateContainer, hook)
}

// AddStartContainerHook adds a hooks new StartContainer hooks.
func (g *Generator) AddStartContainerHook(hook rspec.Hook) {
	h := g.hooks()
	h.StartContainer = append(h.StartContainer, hook)
}

// ClearLinuxIntelRdt clears RDT CLOS.
func (g *Generator) ClearLinuxIntelRdt() { g.linux().IntelRdt = nil }

// SetLinuxIntelRdt sets RDT CLOS.
func (g *Generator) SetLinuxIntelRdt(rdt *rspec.LinuxIntelRdt) { g.linux().IntelRdt = rdt }

// SetLinuxIntelRdtClosID sets g.Config.Linux.IntelRdt.ClosID
func (g *Generator) SetLinuxIntelRdtClosID(closID string) { g.intelRdt().ClosID = closID }

// SetLinuxIntelRdtEnableMonitoring sets g.Config.Linux.IntelRdt.EnableMonitoring
func (g *Generator) SetLinuxIntelRdtEnableMonitoring(value bool) {
	g.intelRdt().EnableMonitoring = value
}

// SetLinuxIntelRdtSchemata sets g.Config.Linux.IntelRdt.Schemata
func (g *Generator) SetLinuxIntelRdtSchemata(schemata []string) {
	g.intelRdt().Schemata = slices.Clone(schemata)
}

// ClearLinuxResourcesBlockIO clears Block I/O settings.
func (g *Generator) ClearLinuxResourcesBlockIO() { g.resources().BlockIO = nil }

// SetLinuxResourcesBlockIO sets Block I/O settings.
func (g *Generator) SetLinuxResourcesBlockIO(blockIO *rspec.LinuxBlockIO) {
	g.resources().BlockIO = blockIO
}

// SetProcessIOPriority sets the (Linux) IO priority of the container. A
// priority without a class clears it.
func (g *Generator) SetProcessIOPriority(ioprio *rspec.LinuxIOPriority) {
	p := g.process()
	if ioprio != nil && ioprio.Class == "" {
		ioprio = nil
	}
	p.IOPriority = ioprio
}

// SetLinuxResourcesPidsLimit sets Linux PID limit. Starting with
// v1.3.0 opencontainers/runtime-spec switched the PID limit to
// *int64 from int64 with nil meaning "unlimited". The API types keep
// int64, so UnlimitedPidsLimit (or less) leaves the limit as it is; a pids
// section is created either way.
func (g *Generator) SetLinuxResourcesPidsLimit(limit int64) {
	pids := ensure.Ptr(&g.resources().Pids)
	if limit > UnlimitedPidsLimit {
		pids.Limit = &limit
	}
}

// AddLinuxNetDevice adds a new Linux net device (nil: nothing).
func (g *Generator) AddLinuxNetDevice(hostDev string, device *nri.LinuxNetDevice) {
	if device != nil {
		g.netDevices()[hostDev] = device.ToOCI()
	}
}

// RemoveLinuxNetDevice removes a Linux net device.
func (g *Generator) RemoveLinuxNetDevice(hostDev string) { delete(g.netDevices(), hostDev) }

// SetLinuxMemoryPolicy sets the given Linux memory policy. A policy
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
