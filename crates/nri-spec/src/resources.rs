//! Linux resources: CPU, memory, hugepages, unified, pids, device rules,
//! block I/O and RDT classes, RDT fields.

use oci_spec::runtime::{self as oci, Spec};
use protobuf::MessageField;

use super::convert::{self, non_empty};
use super::{
    init, BlockIoResolver, BoxError, ClassResolver, RdtResolver, ResourceChecker, SpecError,
    UNLIMITED_PIDS_LIMIT,
};
use nri_api::{self as api, OptionalValue};

/// Applies resources the way upstream's `AdjustResources` does, then runs
/// the resource checker on the result.
///
/// Of the memory settings only a non-zero limit is applied, and it sets the
/// swap limit to the same value; the other memory fields are ignored, as
/// upstream ignores them. Hugepage limits replace the limit of their page
/// size; unified entries are set; device rules are appended. A pids limit
/// of -1 ([`UNLIMITED_PIDS_LIMIT`]) or less leaves the limit as it is (a
/// pids section is created if there was none).
pub(super) fn adjust_resources(
    spec: &mut Spec,
    r: &api::LinuxResources,
    check: Option<&ResourceChecker>,
) -> Result<(), SpecError> {
    init::linux(spec);

    if let Some(c) = r.cpu.as_ref() {
        if let Some(v) = c.period.value() {
            init::cpu(spec).set_period(Some(v));
        }
        if let Some(v) = c.quota.value() {
            init::cpu(spec).set_quota(Some(v));
        }
        if let Some(v) = c.shares.value() {
            init::cpu(spec).set_shares(Some(v));
        }
        if !c.cpus.is_empty() {
            init::cpu(spec).set_cpus(Some(c.cpus.clone()));
        }
        if !c.mems.is_empty() {
            init::cpu(spec).set_mems(Some(c.mems.clone()));
        }
        if let Some(v) = c.realtime_runtime.value() {
            init::cpu(spec).set_realtime_runtime(Some(v));
        }
        if let Some(v) = c.realtime_period.value() {
            init::cpu(spec).set_realtime_period(Some(v));
        }
    }
    if let Some(limit) = r.memory.as_ref().and_then(|m| m.limit.value()) {
        if limit != 0 {
            init::memory(spec)
                .set_limit(Some(limit))
                .set_swap(Some(limit));
        }
    }
    for h in &r.hugepage_limits {
        let limit = hugepage_limit(h)?;
        let list = init::resources(spec)
            .hugepage_limits_mut()
            .get_or_insert_with(Vec::new);
        match list.iter_mut().find(|x| *x.page_size() == h.page_size) {
            Some(existing) => {
                existing.set_limit(limit.limit());
            }
            None => list.push(limit),
        }
    }
    if !r.unified.is_empty() {
        init::resources(spec)
            .unified_mut()
            .get_or_insert_with(Default::default)
            .extend(r.unified.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if let Some(p) = r.pids.as_ref() {
        // A new pids section has no limit; oci-spec writes that as 0.
        let pids = init::resources(spec)
            .pids_mut()
            .get_or_insert_with(oci::LinuxPids::default);
        if p.limit > UNLIMITED_PIDS_LIMIT {
            pids.set_limit(p.limit);
        }
    }
    if !r.devices.is_empty() {
        let rules = r
            .devices
            .iter()
            .map(device_rule)
            .collect::<Result<Vec<_>, _>>()?;
        init::resources(spec)
            .devices_mut()
            .get_or_insert_with(Vec::new)
            .extend(rules);
    }

    if let Some(check) = check {
        let resources = spec
            .linux_mut()
            .as_mut()
            .and_then(|l| l.resources_mut().as_mut());
        check(resources).map_err(SpecError::ResourceCheck)?;
    }
    Ok(())
}

/// A block I/O class: resolved to block I/O settings by the resolver; the
/// empty class clears them. Ignored when no resolver is set.
pub(super) fn adjust_blockio_class(
    spec: &mut Spec,
    class: Option<String>,
    resolve: Option<&BlockIoResolver>,
) -> Result<(), SpecError> {
    let resolved = resolve_class(class, resolve, |class, cause| SpecError::BlockIoClass {
        class,
        cause,
    })?;
    if let Some(value) = resolved {
        init::resources(spec).set_block_io(value);
    }
    Ok(())
}

/// An RDT class: resolved to RDT settings by the resolver; the empty class
/// clears them. Ignored when no resolver is set.
pub(super) fn adjust_rdt_class(
    spec: &mut Spec,
    class: Option<String>,
    resolve: Option<&RdtResolver>,
) -> Result<(), SpecError> {
    let resolved = resolve_class(class, resolve, |class, cause| SpecError::RdtClass {
        class,
        cause,
    })?;
    if let Some(value) = resolved {
        init::linux(spec).set_intel_rdt(value);
    }
    Ok(())
}

/// What a class stands for: `None` to leave the spec alone (no class, or
/// no resolver), `Some(None)` to clear (the empty class or a resolver
/// saying so), `Some(Some(settings))` to set.
fn resolve_class<T>(
    class: Option<String>,
    resolve: Option<&ClassResolver<T>>,
    error: fn(String, BoxError) -> SpecError,
) -> Result<Option<Option<T>>, SpecError> {
    let (Some(class), Some(resolve)) = (class, resolve) else {
        return Ok(None);
    };
    if class.is_empty() {
        return Ok(Some(None));
    }
    resolve(&class)
        .map(Some)
        .map_err(|cause| error(class, cause))
}

/// RDT fields: `remove` clears the RDT settings first, then each present
/// field is set.
pub(super) fn adjust_rdt(spec: &mut Spec, rdt: &MessageField<api::LinuxRdt>) {
    let Some(r) = rdt.as_ref() else {
        return;
    };
    if r.remove {
        init::linux(spec).set_intel_rdt(None);
    }
    if let Some(id) = r.clos_id.value() {
        init::intel_rdt(spec).set_clos_id(non_empty(&id));
    }
    if let Some(schemata) = r.schemata.value() {
        init::intel_rdt(spec).set_schemata((!schemata.is_empty()).then_some(schemata));
    }
    if let Some(enable) = r.enable_monitoring.value() {
        init::intel_rdt(spec).set_enable_monitoring(enable.then_some(true));
    }
}

fn hugepage_limit(h: &api::HugepageLimit) -> Result<oci::LinuxHugepageLimit, SpecError> {
    let limit =
        i64::try_from(h.limit).map_err(|_| SpecError::out_of_range("hugepage limit", h.limit))?;
    let mut o = oci::LinuxHugepageLimit::default();
    o.set_page_size(h.page_size.clone());
    o.set_limit(limit);
    Ok(o)
}

fn device_rule(d: &api::LinuxDeviceCgroup) -> Result<oci::LinuxDeviceCgroup, SpecError> {
    let mut o = oci::LinuxDeviceCgroup::default();
    o.set_allow(d.allow);
    o.set_typ(convert::device_cgroup_type(&d.type_)?);
    o.set_major(d.major.value());
    o.set_minor(d.minor.value());
    o.set_access(non_empty(&d.access));
    Ok(o)
}

/// NRI resources as OCI resources, field for field: what upstream's
/// `LinuxResources.ToOCI()` gives a runtime to apply an update with.
///
/// As upstream: the CPU and memory sections are always present (empty when
/// the update has none), every memory field is carried, a pids limit of -1
/// or less means no limit (written by oci-spec as 0), and the block I/O and
/// RDT classes are left out (a runtime resolves those itself).
pub fn resources_to_oci(r: &api::LinuxResources) -> Result<oci::LinuxResources, SpecError> {
    let mut o = oci::LinuxResources::default();
    let mut memory = oci::LinuxMemory::default();
    if let Some(m) = r.memory.as_ref() {
        #[allow(deprecated)] // kernel memory: deprecated in runtime-spec, still carried
        memory.set_kernel(m.kernel.value());
        memory
            .set_limit(m.limit.value())
            .set_reservation(m.reservation.value())
            .set_swap(m.swap.value())
            .set_kernel_tcp(m.kernel_tcp.value())
            .set_swappiness(m.swappiness.value())
            .set_disable_oom_killer(m.disable_oom_killer.value())
            .set_use_hierarchy(m.use_hierarchy.value());
    }
    let mut cpu = oci::LinuxCpu::default();
    if let Some(c) = r.cpu.as_ref() {
        cpu.set_shares(c.shares.value())
            .set_quota(c.quota.value())
            .set_period(c.period.value())
            .set_realtime_runtime(c.realtime_runtime.value())
            .set_realtime_period(c.realtime_period.value())
            .set_cpus(non_empty(&c.cpus))
            .set_mems(non_empty(&c.mems));
    }
    o.set_memory(Some(memory)).set_cpu(Some(cpu));
    if !r.hugepage_limits.is_empty() {
        let limits = r.hugepage_limits.iter().map(hugepage_limit);
        o.set_hugepage_limits(Some(limits.collect::<Result<_, _>>()?));
    }
    if !r.unified.is_empty() {
        o.set_unified(Some(r.unified.clone()));
    }
    if !r.devices.is_empty() {
        let rules = r.devices.iter().map(device_rule);
        o.set_devices(Some(rules.collect::<Result<_, _>>()?));
    }
    if let Some(p) = r.pids.as_ref() {
        let mut pids = oci::LinuxPids::default();
        if p.limit > UNLIMITED_PIDS_LIMIT {
            pids.set_limit(p.limit);
        }
        o.set_pids(Some(pids));
    }
    Ok(o)
}
