//! NRI values to oci-spec values.
//!
//! Upstream's runtime-spec Go types hold enums as strings, so upstream
//! copies whatever string an adjustment carries. oci-spec holds them as Rust
//! enums, so each string is looked up in a table of the runtime-spec names;
//! a string that is not there is refused ([`SpecError::Unsupported`]).
//! The tables spell out the runtime-spec names instead of relying on
//! oci-spec's serde or strum renaming: a test checks that each entry
//! serializes back to its own name, which is how oci-spec's two misspelled
//! scheduler flags were found (see [`scheduler_flag`]).

use oci_spec::runtime as oci;
use protobuf::EnumOrUnknown;

use super::SpecError;
use nri_api as api;

/// A runtime-spec enum: its JSON names and the oci-spec variants they map to.
pub(super) type Table<T> = &'static [(&'static str, T)];

fn lookup<T: Copy>(table: Table<T>, field: &'static str, name: &str) -> Result<T, SpecError> {
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| SpecError::unsupported(field, name))
}

pub(super) const RLIMIT_TYPES: Table<oci::PosixRlimitType> = {
    use oci::PosixRlimitType::*;
    &[
        ("RLIMIT_AS", RlimitAs),
        ("RLIMIT_CORE", RlimitCore),
        ("RLIMIT_CPU", RlimitCpu),
        ("RLIMIT_DATA", RlimitData),
        ("RLIMIT_FSIZE", RlimitFsize),
        ("RLIMIT_LOCKS", RlimitLocks),
        ("RLIMIT_MEMLOCK", RlimitMemlock),
        ("RLIMIT_MSGQUEUE", RlimitMsgqueue),
        ("RLIMIT_NICE", RlimitNice),
        ("RLIMIT_NOFILE", RlimitNofile),
        ("RLIMIT_NPROC", RlimitNproc),
        ("RLIMIT_RSS", RlimitRss),
        ("RLIMIT_RTPRIO", RlimitRtprio),
        ("RLIMIT_RTTIME", RlimitRttime),
        ("RLIMIT_SIGPENDING", RlimitSigpending),
        ("RLIMIT_STACK", RlimitStack),
    ]
};

pub(super) const DEVICE_TYPES: Table<oci::LinuxDeviceType> = {
    use oci::LinuxDeviceType::*;
    &[("a", A), ("b", B), ("c", C), ("u", U), ("p", P)]
};

pub(super) const SECCOMP_ACTIONS: Table<oci::LinuxSeccompAction> = {
    use oci::LinuxSeccompAction::*;
    &[
        ("SCMP_ACT_KILL", ScmpActKill),
        ("SCMP_ACT_KILL_PROCESS", ScmpActKillProcess),
        ("SCMP_ACT_KILL_THREAD", ScmpActKillThread),
        ("SCMP_ACT_TRAP", ScmpActTrap),
        ("SCMP_ACT_ERRNO", ScmpActErrno),
        ("SCMP_ACT_TRACE", ScmpActTrace),
        ("SCMP_ACT_ALLOW", ScmpActAllow),
        ("SCMP_ACT_LOG", ScmpActLog),
        ("SCMP_ACT_NOTIFY", ScmpActNotify),
    ]
};

pub(super) const SECCOMP_ARCHES: Table<oci::Arch> = {
    use oci::Arch::*;
    &[
        ("SCMP_ARCH_NATIVE", ScmpArchNative),
        ("SCMP_ARCH_X86", ScmpArchX86),
        ("SCMP_ARCH_X86_64", ScmpArchX86_64),
        ("SCMP_ARCH_X32", ScmpArchX32),
        ("SCMP_ARCH_ARM", ScmpArchArm),
        ("SCMP_ARCH_AARCH64", ScmpArchAarch64),
        ("SCMP_ARCH_MIPS", ScmpArchMips),
        ("SCMP_ARCH_MIPS64", ScmpArchMips64),
        ("SCMP_ARCH_MIPS64N32", ScmpArchMips64n32),
        ("SCMP_ARCH_MIPSEL", ScmpArchMipsel),
        ("SCMP_ARCH_MIPSEL64", ScmpArchMipsel64),
        ("SCMP_ARCH_MIPSEL64N32", ScmpArchMipsel64n32),
        ("SCMP_ARCH_PPC", ScmpArchPpc),
        ("SCMP_ARCH_PPC64", ScmpArchPpc64),
        ("SCMP_ARCH_PPC64LE", ScmpArchPpc64le),
        ("SCMP_ARCH_S390", ScmpArchS390),
        ("SCMP_ARCH_S390X", ScmpArchS390x),
        ("SCMP_ARCH_PARISC", ScmpArchParisc),
        ("SCMP_ARCH_PARISC64", ScmpArchParisc64),
        ("SCMP_ARCH_RISCV64", ScmpArchRiscv64),
        ("SCMP_ARCH_LOONGARCH64", ScmpArchLoongarch64),
        ("SCMP_ARCH_M68K", ScmpArchM68k),
        ("SCMP_ARCH_SH", ScmpArchSh),
        ("SCMP_ARCH_SHEB", ScmpArchSheb),
    ]
};

pub(super) const SECCOMP_FLAGS: Table<oci::LinuxSeccompFilterFlag> = {
    use oci::LinuxSeccompFilterFlag::*;
    &[
        ("SECCOMP_FILTER_FLAG_LOG", SeccompFilterFlagLog),
        ("SECCOMP_FILTER_FLAG_TSYNC", SeccompFilterFlagTsync),
        ("SECCOMP_FILTER_FLAG_SPEC_ALLOW", SeccompFilterFlagSpecAllow),
        (
            "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV",
            SeccompFilterFlagWaitKillableRecv,
        ),
    ]
};

pub(super) const SECCOMP_OPERATORS: Table<oci::LinuxSeccompOperator> = {
    use oci::LinuxSeccompOperator::*;
    &[
        ("SCMP_CMP_NE", ScmpCmpNe),
        ("SCMP_CMP_LT", ScmpCmpLt),
        ("SCMP_CMP_LE", ScmpCmpLe),
        ("SCMP_CMP_EQ", ScmpCmpEq),
        ("SCMP_CMP_GE", ScmpCmpGe),
        ("SCMP_CMP_GT", ScmpCmpGt),
        ("SCMP_CMP_MASKED_EQ", ScmpCmpMaskedEq),
    ]
};

/// The namespace names NRI adjustments use. Like upstream's generator,
/// only the runtime-spec names: `net` and `mnt` are not accepted.
pub(super) const NAMESPACE_TYPES: Table<oci::LinuxNamespaceType> = {
    use oci::LinuxNamespaceType::*;
    &[
        ("network", Network),
        ("pid", Pid),
        ("mount", Mount),
        ("ipc", Ipc),
        ("uts", Uts),
        ("user", User),
        ("cgroup", Cgroup),
        ("time", Time),
    ]
};

pub(super) fn rlimit_type(name: &str) -> Result<oci::PosixRlimitType, SpecError> {
    lookup(RLIMIT_TYPES, "rlimit type", name)
}

pub(super) fn device_type(name: &str) -> Result<oci::LinuxDeviceType, SpecError> {
    lookup(DEVICE_TYPES, "device type", name)
}

/// A device cgroup rule's type: empty means "all", written as no type at all.
pub(super) fn device_cgroup_type(name: &str) -> Result<Option<oci::LinuxDeviceType>, SpecError> {
    if name.is_empty() {
        return Ok(None);
    }
    lookup(DEVICE_TYPES, "device cgroup rule type", name).map(Some)
}

pub(super) fn seccomp_action(name: &str) -> Result<oci::LinuxSeccompAction, SpecError> {
    lookup(SECCOMP_ACTIONS, "seccomp action", name)
}

pub(super) fn seccomp_arch(name: &str) -> Result<oci::Arch, SpecError> {
    lookup(SECCOMP_ARCHES, "seccomp architecture", name)
}

pub(super) fn seccomp_flag(name: &str) -> Result<oci::LinuxSeccompFilterFlag, SpecError> {
    lookup(SECCOMP_FLAGS, "seccomp flag", name)
}

pub(super) fn seccomp_operator(name: &str) -> Result<oci::LinuxSeccompOperator, SpecError> {
    lookup(SECCOMP_OPERATORS, "seccomp operator", name)
}

pub(super) fn namespace_type(name: &str) -> Result<oci::LinuxNamespaceType, SpecError> {
    NAMESPACE_TYPES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| SpecError::UnknownNamespace(name.to_string()))
}

/// The value of an NRI enum field, or its number when this build does not
/// know it.
fn known<E: protobuf::Enum>(value: EnumOrUnknown<E>) -> Result<E, i32> {
    value.enum_value()
}

/// `None` for `IOPRIO_CLASS_NONE` and unknown classes: upstream maps both to
/// the empty class, and an empty class clears the I/O priority.
pub(super) fn io_priority_class(
    class: EnumOrUnknown<api::IOPrioClass>,
) -> Option<oci::IOPriorityClass> {
    use api::IOPrioClass as C;
    match known(class) {
        Ok(C::IOPRIO_CLASS_RT) => Some(oci::IOPriorityClass::IoprioClassRt),
        Ok(C::IOPRIO_CLASS_BE) => Some(oci::IOPriorityClass::IoprioClassBe),
        Ok(C::IOPRIO_CLASS_IDLE) => Some(oci::IOPriorityClass::IoprioClassIdle),
        Ok(C::IOPRIO_CLASS_NONE) | Err(_) => None,
    }
}

/// `Ok(None)` for `SCHED_NONE` (upstream clears the scheduler). An unknown
/// policy number becomes an empty policy string upstream, which oci-spec
/// cannot hold.
pub(super) fn scheduler_policy(
    policy: EnumOrUnknown<api::LinuxSchedulerPolicy>,
) -> Result<Option<oci::LinuxSchedulerPolicy>, SpecError> {
    use api::LinuxSchedulerPolicy as P;
    use oci::LinuxSchedulerPolicy as O;
    Ok(Some(match known(policy) {
        Ok(P::SCHED_NONE) => return Ok(None),
        Ok(P::SCHED_OTHER) => O::SchedOther,
        Ok(P::SCHED_FIFO) => O::SchedFifo,
        Ok(P::SCHED_RR) => O::SchedRr,
        Ok(P::SCHED_BATCH) => O::SchedBatch,
        Ok(P::SCHED_ISO) => O::SchedIso,
        Ok(P::SCHED_IDLE) => O::SchedIdle,
        Ok(P::SCHED_DEADLINE) => O::SchedDeadline,
        Err(n) => return Err(SpecError::unsupported("scheduler policy", n.to_string())),
    }))
}

/// oci-spec 0.10 spells two runtime-spec scheduler flags differently in
/// JSON (`SCHED_RESET_ON_FORK` for `SCHED_FLAG_RESET_ON_FORK`,
/// `SCHED_FLAG_D_L_OVERRUN` for `SCHED_FLAG_DL_OVERRUN`), so a spec carrying
/// them would be wrong for every other runtime-spec reader. Both are refused.
pub(super) fn scheduler_flag(
    flag: EnumOrUnknown<api::LinuxSchedulerFlag>,
) -> Result<oci::LinuxSchedulerFlag, SpecError> {
    use api::LinuxSchedulerFlag as F;
    use oci::LinuxSchedulerFlag as O;
    match known(flag) {
        Ok(F::SCHED_FLAG_RECLAIM) => Ok(O::SchedFlagReclaim),
        Ok(F::SCHED_FLAG_KEEP_POLICY) => Ok(O::SchedFlagKeepPolicy),
        Ok(F::SCHED_FLAG_KEEP_PARAMS) => Ok(O::SchedFlagKeepParams),
        Ok(F::SCHED_FLAG_UTIL_CLAMP_MIN) => Ok(O::SchedFlagUtilClampMin),
        Ok(F::SCHED_FLAG_UTIL_CLAMP_MAX) => Ok(O::SchedFlagUtilClampMax),
        Ok(f @ (F::SCHED_FLAG_RESET_ON_FORK | F::SCHED_FLAG_DL_OVERRUN)) => {
            Err(SpecError::unsupported("scheduler flag", format!("{f:?}")))
        }
        Err(n) => Err(SpecError::unsupported("scheduler flag", n.to_string())),
    }
}

/// `None` for an unknown mode: upstream maps it to the empty mode, and an
/// empty mode clears the memory policy.
pub(super) fn memory_policy_mode(
    mode: EnumOrUnknown<api::MpolMode>,
) -> Option<oci::MemoryPolicyModeType> {
    use api::MpolMode as M;
    use oci::MemoryPolicyModeType as O;
    Some(match known(mode).ok()? {
        M::MPOL_DEFAULT => O::MpolDefault,
        M::MPOL_PREFERRED => O::MpolPreferred,
        M::MPOL_BIND => O::MpolBind,
        M::MPOL_INTERLEAVE => O::MpolInterleave,
        M::MPOL_LOCAL => O::MpolLocal,
        M::MPOL_PREFERRED_MANY => O::MpolPreferredMany,
        M::MPOL_WEIGHTED_INTERLEAVE => O::MpolWeightedInterleave,
    })
}

pub(super) fn memory_policy_flag(
    flag: EnumOrUnknown<api::MpolFlag>,
) -> Result<oci::MemoryPolicyFlagType, SpecError> {
    use api::MpolFlag as F;
    use oci::MemoryPolicyFlagType as O;
    match known(flag) {
        Ok(F::MPOL_F_STATIC_NODES) => Ok(O::MpolFStaticNodes),
        Ok(F::MPOL_F_RELATIVE_NODES) => Ok(O::MpolFRelativeNodes),
        Ok(F::MPOL_F_NUMA_BALANCING) => Ok(O::MpolFNumaBalancing),
        Err(n) => Err(SpecError::unsupported("memory policy flag", n.to_string())),
    }
}

/// Go's `omitempty` for strings: the empty string is not written.
pub(super) fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Go's `omitempty` for slices: an empty list is not written.
pub(super) fn non_empty_vec<T: Clone>(v: &[T]) -> Option<Vec<T>> {
    (!v.is_empty()).then(|| v.to_vec())
}

/// Converts each element, `None` for an empty list (Go's `omitempty`).
pub(super) fn try_map_non_empty<S, T>(
    items: &[S],
    f: impl Fn(&S) -> Result<T, SpecError>,
) -> Result<Option<Vec<T>>, SpecError> {
    if items.is_empty() {
        return Ok(None);
    }
    items.iter().map(f).collect::<Result<Vec<_>, _>>().map(Some)
}

/// Go's `omitempty` on a field we just changed: an empty list or map is
/// written as no field at all, so it becomes `None`.
pub(super) fn none_if_empty<C>(field: &mut Option<C>)
where
    for<'a> &'a C: IntoIterator,
{
    if field
        .as_ref()
        .is_some_and(|c| c.into_iter().next().is_none())
    {
        *field = None;
    }
}
