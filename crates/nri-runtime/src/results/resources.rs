//! Resources, merged the same way for adjustments and updates.

use protobuf::MessageField;

use nri_api::{ConflictError, Field, LinuxCPU, LinuxMemory, LinuxResources};

use super::*;

/// Claims what `new` sets among memory, CPU, hugepage limits, unified
/// cgroup v2 settings and the block I/O and RDT classes, and writes it over
/// each of `targets`. Upstream's claim order decides which conflict is
/// reported.
pub(super) fn merge_resources(
    claims: &mut Claims<'_>,
    new: &LinuxResources,
    targets: &mut [&mut LinuxResources],
) -> Result<(), ConflictError> {
    apply_resources(Some(claims), new, targets)
}

/// The claims of [`merge_resources`] alone, in the same order, stopping at
/// the first conflict; nothing is written.
pub(super) fn claim_resources(
    claims: &mut Claims<'_>,
    new: &LinuxResources,
) -> Result<(), ConflictError> {
    apply_resources(Some(claims), new, &mut [])
}

/// The writes of [`merge_resources`] alone, once [`claim_resources`]
/// succeeded: the same as writing over a copy and keeping it.
pub(super) fn write_resources(new: &LinuxResources, target: &mut LinuxResources) {
    let Ok(()) = apply_resources(None, new, &mut [target]) else {
        unreachable!("nothing is claimed, so nothing conflicts")
    };
}

/// Claims (unless `claims` is `None`) and writes each part of `new` in
/// turn, so that at a conflict exactly the parts before it are written.
fn apply_resources(
    claims: Option<&mut Claims<'_>>,
    new: &LinuxResources,
    targets: &mut [&mut LinuxResources],
) -> Result<(), ConflictError> {
    let mut claims = MaybeClaims(claims);
    if let Some(memory) = new.memory.as_ref() {
        claims.simples(memory_fields(memory))?;
        for target in targets.iter_mut() {
            overlay_memory(target.memory.mut_or_insert_default(), memory);
        }
    }
    if let Some(cpu) = new.cpu.as_ref() {
        claims.simples(cpu_fields(cpu))?;
        for target in targets.iter_mut() {
            overlay_cpu(target.cpu.mut_or_insert_default(), cpu);
        }
    }
    // Hugepage limits are appended, claimed per page size.
    for limit in &new.hugepage_limits {
        steps(1 + targets.len());
        claims.key(Field::HugepageLimits, &limit.page_size)?;
        for target in targets.iter_mut() {
            target.hugepage_limits.push(limit.clone());
        }
    }
    // Sorted for a deterministic conflict; upstream walks a Go map.
    steps(new.unified.len());
    let mut unified: Vec<_> = new.unified.iter().collect();
    unified.sort_unstable_by(|a, b| {
        steps(1);
        a.cmp(b)
    });
    for (key, value) in unified {
        steps(1 + targets.len());
        claims.key(Field::CgroupsUnified, key)?;
        for target in targets.iter_mut() {
            target.unified.insert(key.clone(), value.clone());
        }
    }
    if new.blockio_class.is_some() {
        claims.simple(Field::BlockioClass)?;
        for target in targets.iter_mut() {
            target.blockio_class.clone_from(&new.blockio_class);
        }
    }
    if new.rdt_class.is_some() {
        claims.simple(Field::RdtClass)?;
        for target in targets.iter_mut() {
            target.rdt_class.clone_from(&new.rdt_class);
        }
    }
    Ok(())
}

/// Claims, or nothing when only writing.
struct MaybeClaims<'c, 'a>(Option<&'c mut Claims<'a>>);

impl MaybeClaims<'_, '_> {
    fn simple(&mut self, field: Field) -> Result<(), ConflictError> {
        self.0.as_mut().map_or(Ok(()), |c| c.simple(field))
    }

    fn simples(&mut self, fields: impl IntoIterator<Item = Field>) -> Result<(), ConflictError> {
        self.0.as_mut().map_or(Ok(()), |c| c.simples(fields))
    }

    fn key(&mut self, field: Field, key: &str) -> Result<(), ConflictError> {
        self.0.as_mut().map_or(Ok(()), |c| c.key(field, key))
    }
}

/// The memory fields `m` sets, in upstream's claim order.
pub(super) fn memory_fields(m: &LinuxMemory) -> impl Iterator<Item = Field> {
    [
        (m.limit.is_some(), Field::MemLimit),
        (m.reservation.is_some(), Field::MemReservation),
        (m.swap.is_some(), Field::MemSwapLimit),
        (m.kernel.is_some(), Field::MemKernelLimit),
        (m.kernel_tcp.is_some(), Field::MemTCPLimit),
        (m.swappiness.is_some(), Field::MemSwappiness),
        (m.disable_oom_killer.is_some(), Field::MemDisableOomKiller),
        (m.use_hierarchy.is_some(), Field::MemUseHierarchy),
    ]
    .into_iter()
    .filter_map(|(set, field)| set.then_some(field))
}

/// The CPU fields `c` sets, in upstream's claim order. The cpuset strings
/// count as set only when non-empty.
pub(super) fn cpu_fields(c: &LinuxCPU) -> impl Iterator<Item = Field> {
    [
        (c.shares.is_some(), Field::CPUShares),
        (c.quota.is_some(), Field::CPUQuota),
        (c.period.is_some(), Field::CPUPeriod),
        (c.realtime_runtime.is_some(), Field::CPURealtimeRuntime),
        (c.realtime_period.is_some(), Field::CPURealtimePeriod),
        (!c.cpus.is_empty(), Field::CPUSetCPUs),
        (!c.mems.is_empty(), Field::CPUSetMems),
    ]
    .into_iter()
    .filter_map(|(set, field)| set.then_some(field))
}

pub(super) fn overlay<T: Clone>(target: &mut MessageField<T>, new: &MessageField<T>) {
    if new.is_some() {
        target.clone_from(new);
    }
}

pub(super) fn overlay_memory(target: &mut LinuxMemory, new: &LinuxMemory) {
    overlay(&mut target.limit, &new.limit);
    overlay(&mut target.reservation, &new.reservation);
    overlay(&mut target.swap, &new.swap);
    overlay(&mut target.kernel, &new.kernel);
    overlay(&mut target.kernel_tcp, &new.kernel_tcp);
    overlay(&mut target.swappiness, &new.swappiness);
    overlay(&mut target.disable_oom_killer, &new.disable_oom_killer);
    overlay(&mut target.use_hierarchy, &new.use_hierarchy);
}

pub(super) fn overlay_cpu(target: &mut LinuxCPU, new: &LinuxCPU) {
    overlay(&mut target.shares, &new.shares);
    overlay(&mut target.quota, &new.quota);
    overlay(&mut target.period, &new.period);
    overlay(&mut target.realtime_runtime, &new.realtime_runtime);
    overlay(&mut target.realtime_period, &new.realtime_period);
    if !new.cpus.is_empty() {
        target.cpus.clone_from(&new.cpus);
    }
    if !new.mems.is_empty() {
        target.mems.clone_from(&new.mems);
    }
}
