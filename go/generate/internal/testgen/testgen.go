// Package testgen is a minimal generate.UnderlyingGenerator working
// directly on an *rspec.Spec, for tests: the role upstream's own tests give
// their internal ocigen package (which other modules cannot import), with
// the same observable rules: named entries (devices, namespaces, hugepage
// limits, env) are replaced in place or appended, removals take the first
// match, and sections are created empty when first needed.
package testgen

import (
	"fmt"
	"slices"
	"strings"

	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nri-rs/nri-rs/go/generate/internal/ensure"
)

// Generator edits the spec it was created with.
type Generator struct {
	spec *rspec.Spec
}

// New returns a generator for spec.
func New(spec *rspec.Spec) *Generator { return &Generator{spec: spec} }

// Spec is the spec being edited.
func (g *Generator) Spec() *rspec.Spec { return g.spec }

func (g *Generator) root() *rspec.Spec { return ensure.Ptr(&g.spec) }

func (g *Generator) process() *rspec.Process { return ensure.Ptr(&g.root().Process) }

func (g *Generator) linux() *rspec.Linux { return ensure.Ptr(&g.root().Linux) }

func (g *Generator) resources() *rspec.LinuxResources { return ensure.Ptr(&g.linux().Resources) }

func (g *Generator) cpu() *rspec.LinuxCPU { return ensure.Ptr(&g.resources().CPU) }

func (g *Generator) memory() *rspec.LinuxMemory { return ensure.Ptr(&g.resources().Memory) }

func (g *Generator) hooks() *rspec.Hooks { return ensure.Ptr(&g.root().Hooks) }

// AddAnnotation sets an annotation.
func (g *Generator) AddAnnotation(key, value string) {
	ensure.Map(&g.root().Annotations)[key] = value
}

// RemoveAnnotation deletes an annotation.
func (g *Generator) RemoveAnnotation(key string) {
	if g.spec != nil {
		delete(g.spec.Annotations, key)
	}
}

// AddDevice replaces the device at the same path, or appends it.
func (g *Generator) AddDevice(device rspec.LinuxDevice) {
	l := g.linux()
	if i := slices.IndexFunc(l.Devices, func(d rspec.LinuxDevice) bool { return d.Path == device.Path }); i >= 0 {
		l.Devices[i] = device
		return
	}
	l.Devices = append(l.Devices, device)
}

// RemoveDevice removes the first device at path.
func (g *Generator) RemoveDevice(path string) {
	if g.spec == nil || g.spec.Linux == nil {
		return
	}
	l := g.spec.Linux
	if i := slices.IndexFunc(l.Devices, func(d rspec.LinuxDevice) bool { return d.Path == path }); i >= 0 {
		l.Devices = slices.Delete(l.Devices, i, i+1)
	}
}

var namespaceTypes = []rspec.LinuxNamespaceType{
	rspec.NetworkNamespace, rspec.PIDNamespace, rspec.MountNamespace, rspec.IPCNamespace,
	rspec.UTSNamespace, rspec.UserNamespace, rspec.CgroupNamespace, rspec.TimeNamespace,
}

func namespaceType(ns string) (rspec.LinuxNamespaceType, error) {
	if t := rspec.LinuxNamespaceType(ns); slices.Contains(namespaceTypes, t) {
		return t, nil
	}
	return "", fmt.Errorf("unrecognized namespace %q", ns)
}

// AddOrReplaceLinuxNamespace sets the path of the first namespace of the
// type, or appends one.
func (g *Generator) AddOrReplaceLinuxNamespace(ns string, path string) error {
	t, err := namespaceType(ns)
	if err != nil {
		return err
	}
	l := g.linux()
	if i := slices.IndexFunc(l.Namespaces, func(n rspec.LinuxNamespace) bool { return n.Type == t }); i >= 0 {
		l.Namespaces[i].Path = path
		return nil
	}
	l.Namespaces = append(l.Namespaces, rspec.LinuxNamespace{Type: t, Path: path})
	return nil
}

// RemoveLinuxNamespace removes the first namespace of the type.
func (g *Generator) RemoveLinuxNamespace(ns string) error {
	t, err := namespaceType(ns)
	if err != nil || g.spec == nil || g.spec.Linux == nil {
		return err
	}
	l := g.spec.Linux
	if i := slices.IndexFunc(l.Namespaces, func(n rspec.LinuxNamespace) bool { return n.Type == t }); i >= 0 {
		l.Namespaces = slices.Delete(l.Namespaces, i, i+1)
	}
	return nil
}

// AddPreStartHook appends a prestart hook.
func (g *Generator) AddPreStartHook(hook rspec.Hook) {
	h := g.hooks()
	h.Prestart = append(h.Prestart, hook) //nolint:staticcheck // deprecated, still adjustable
}

// AddPostStartHook appends a poststart hook.
func (g *Generator) AddPostStartHook(hook rspec.Hook) {
	h := g.hooks()
	h.Poststart = append(h.Poststart, hook)
}

// AddPostStopHook appends a poststop hook.
func (g *Generator) AddPostStopHook(hook rspec.Hook) {
	h := g.hooks()
	h.Poststop = append(h.Poststop, hook)
}

// AddProcessEnv replaces the first variable of that name, or appends it;
// an empty name is ignored.
func (g *Generator) AddProcessEnv(name, value string) {
	if name == "" {
		return
	}
	p := g.process()
	entry := name + "=" + value
	if i := slices.IndexFunc(p.Env, func(e string) bool { return strings.HasPrefix(e, name+"=") }); i >= 0 {
		p.Env[i] = entry
		return
	}
	p.Env = append(p.Env, entry)
}

// ClearProcessEnv empties the environment of an existing process.
func (g *Generator) ClearProcessEnv() {
	if g.spec != nil && g.spec.Process != nil {
		g.spec.Process.Env = []string{}
	}
}

// SetProcessArgs sets the arguments.
func (g *Generator) SetProcessArgs(args []string) { g.process().Args = args }

// SetProcessOOMScoreAdj sets the OOM score adjustment.
func (g *Generator) SetProcessOOMScoreAdj(adj int) { g.process().OOMScoreAdj = &adj }

// AddMount appends a mount.
func (g *Generator) AddMount(mnt rspec.Mount) {
	s := g.root()
	s.Mounts = append(s.Mounts, mnt)
}

// RemoveMount removes the first mount at dest.
func (g *Generator) RemoveMount(dest string) {
	if g.spec == nil {
		return
	}
	if i := slices.IndexFunc(g.spec.Mounts, func(m rspec.Mount) bool { return m.Destination == dest }); i >= 0 {
		g.spec.Mounts = slices.Delete(g.spec.Mounts, i, i+1)
	}
}

// ClearMounts empties the mounts.
func (g *Generator) ClearMounts() {
	if g.spec != nil {
		g.spec.Mounts = []rspec.Mount{}
	}
}

// Mounts is the spec's mounts.
func (g *Generator) Mounts() []rspec.Mount {
	if g.spec == nil {
		return nil
	}
	return g.spec.Mounts
}

// AddLinuxSysctl sets a sysctl.
func (g *Generator) AddLinuxSysctl(key, value string) {
	ensure.Map(&g.linux().Sysctl)[key] = value
}

// RemoveLinuxSysctl deletes a sysctl.
func (g *Generator) RemoveLinuxSysctl(key string) {
	if g.spec != nil && g.spec.Linux != nil {
		delete(g.spec.Linux.Sysctl, key)
	}
}

// SetLinuxCgroupsPath sets the cgroups path.
func (g *Generator) SetLinuxCgroupsPath(path string) { g.linux().CgroupsPath = path }

// SetLinuxRootPropagation sets the rootfs propagation, one of the mount
// propagation names or empty.
func (g *Generator) SetLinuxRootPropagation(rp string) error {
	valid := []string{"", "private", "rprivate", "slave", "rslave", "shared", "rshared", "unbindable", "runbindable"}
	if !slices.Contains(valid, rp) {
		return fmt.Errorf("rootfs-propagation %q must be empty or one of (r)private|(r)slave|(r)shared|(r)unbindable", rp)
	}
	g.linux().RootfsPropagation = rp
	return nil
}

// AddLinuxResourcesDevice appends a device cgroup rule.
func (g *Generator) AddLinuxResourcesDevice(allow bool, devType string, major, minor *int64, access string) {
	r := g.resources()
	r.Devices = append(r.Devices, rspec.LinuxDeviceCgroup{Allow: allow, Type: devType, Major: major, Minor: minor, Access: access})
}

// AddLinuxResourcesHugepageLimit replaces the limit of a page size, or
// appends one.
func (g *Generator) AddLinuxResourcesHugepageLimit(pageSize string, limit uint64) {
	r := g.resources()
	if i := slices.IndexFunc(r.HugepageLimits, func(h rspec.LinuxHugepageLimit) bool { return h.Pagesize == pageSize }); i >= 0 {
		r.HugepageLimits[i].Limit = limit
		return
	}
	r.HugepageLimits = append(r.HugepageLimits, rspec.LinuxHugepageLimit{Pagesize: pageSize, Limit: limit})
}

// AddLinuxResourcesUnified sets a unified cgroup entry.
func (g *Generator) AddLinuxResourcesUnified(key, val string) {
	ensure.Map(&g.resources().Unified)[key] = val
}

// SetLinuxResourcesCPUShares sets the CPU shares.
func (g *Generator) SetLinuxResourcesCPUShares(shares uint64) { g.cpu().Shares = &shares }

// SetLinuxResourcesCPUQuota sets the CPU quota.
func (g *Generator) SetLinuxResourcesCPUQuota(quota int64) { g.cpu().Quota = &quota }

// SetLinuxResourcesCPUPeriod sets the CPU period.
func (g *Generator) SetLinuxResourcesCPUPeriod(period uint64) { g.cpu().Period = &period }

// SetLinuxResourcesCPURealtimeRuntime sets the realtime runtime.
func (g *Generator) SetLinuxResourcesCPURealtimeRuntime(time int64) { g.cpu().RealtimeRuntime = &time }

// SetLinuxResourcesCPURealtimePeriod sets the realtime period.
func (g *Generator) SetLinuxResourcesCPURealtimePeriod(period uint64) {
	g.cpu().RealtimePeriod = &period
}

// SetLinuxResourcesCPUCpus sets the cpuset CPUs.
func (g *Generator) SetLinuxResourcesCPUCpus(cpus string) { g.cpu().Cpus = cpus }

// SetLinuxResourcesCPUMems sets the cpuset memory nodes.
func (g *Generator) SetLinuxResourcesCPUMems(mems string) { g.cpu().Mems = mems }

// SetLinuxResourcesMemoryLimit sets the memory limit.
func (g *Generator) SetLinuxResourcesMemoryLimit(limit int64) { g.memory().Limit = &limit }

// SetLinuxResourcesMemorySwap sets the swap limit.
func (g *Generator) SetLinuxResourcesMemorySwap(swap int64) { g.memory().Swap = &swap }
