//! Access to spec sections, creating empty ones on first use, as upstream's
//! `initConfig*` helpers do.
//!
//! oci-spec's `Default` for `Process` and `Linux` is a runc-like template
//! (a shell, capabilities, namespaces, masked paths), not an empty section,
//! so the empty ones are built here; a test pins what they serialize to.

use oci_spec::runtime::{
    Hooks, Linux, LinuxCpu, LinuxIntelRdt, LinuxMemory, LinuxResources, Process, Spec,
};

/// A process with nothing set: what Go's `&rspec.Process{}` is.
pub(super) fn empty_process() -> Process {
    let mut p = Process::default();
    p.set_terminal(None);
    p.set_console_size(None);
    p.set_user(Default::default());
    p.set_args(None);
    p.set_command_line(None);
    p.set_env(None);
    p.set_cwd(Default::default());
    p.set_capabilities(None);
    p.set_rlimits(None);
    p.set_no_new_privileges(None);
    p.set_apparmor_profile(None);
    p.set_oom_score_adj(None);
    p.set_selinux_label(None);
    p.set_io_priority(None);
    p.set_scheduler(None);
    p.set_exec_cpu_affinity(None);
    p
}

/// A Linux section with nothing set: what Go's `&rspec.Linux{}` is.
pub(super) fn empty_linux() -> Linux {
    let mut l = Linux::default();
    l.set_net_devices(None);
    l.set_uid_mappings(None);
    l.set_gid_mappings(None);
    l.set_sysctl(None);
    l.set_resources(None);
    l.set_cgroups_path(None);
    l.set_namespaces(None);
    l.set_devices(None);
    l.set_seccomp(None);
    l.set_rootfs_propagation(None);
    l.set_masked_paths(None);
    l.set_readonly_paths(None);
    l.set_mount_label(None);
    l.set_intel_rdt(None);
    l.set_memory_policy(None);
    l.set_personality(None);
    l.set_time_offsets(None);
    l
}

pub(super) fn process(spec: &mut Spec) -> &mut Process {
    spec.process_mut().get_or_insert_with(empty_process)
}

pub(super) fn linux(spec: &mut Spec) -> &mut Linux {
    spec.linux_mut().get_or_insert_with(empty_linux)
}

pub(super) fn hooks(spec: &mut Spec) -> &mut Hooks {
    spec.hooks_mut().get_or_insert_with(Hooks::default)
}

pub(super) fn resources(spec: &mut Spec) -> &mut LinuxResources {
    linux(spec)
        .resources_mut()
        .get_or_insert_with(LinuxResources::default)
}

pub(super) fn cpu(spec: &mut Spec) -> &mut LinuxCpu {
    resources(spec)
        .cpu_mut()
        .get_or_insert_with(LinuxCpu::default)
}

pub(super) fn memory(spec: &mut Spec) -> &mut LinuxMemory {
    resources(spec)
        .memory_mut()
        .get_or_insert_with(LinuxMemory::default)
}

pub(super) fn intel_rdt(spec: &mut Spec) -> &mut LinuxIntelRdt {
    linux(spec)
        .intel_rdt_mut()
        .get_or_insert_with(LinuxIntelRdt::default)
}
