//! The Linux section: devices, cgroups path, seccomp, namespaces, sysctl,
//! network devices, memory policy; and the keyed-map rule shared with
//! annotations.

use std::collections::HashMap;
use std::ffi::OsStr;

use oci_spec::runtime::{self as oci, Spec};
use protobuf::MessageField;

use super::convert::{self, non_empty, none_if_empty, try_map_non_empty};
use super::{init, SpecError};
use nri_api::{self as api, clear_removal_marker, marked_for_removal, OptionalValue};

/// Applies keyed entries (`key` sets, `-key` removes) to a map.
///
/// Removals go first, then additions. Upstream walks a Go map, whose order
/// is random, so when a merged adjustment carries both `-key` and `key`
/// (which is how a plugin claims a key another one set) upstream ends with
/// the key set or removed at random; here it is always set.
pub(super) fn adjust_keyed<'a, V: 'a>(
    map: &mut Option<HashMap<String, V>>,
    entries: impl IntoIterator<Item = (&'a String, V)>,
) {
    let (removals, additions): (Vec<_>, Vec<_>) = entries
        .into_iter()
        .partition(|(k, _)| marked_for_removal(k).is_some());
    if removals.is_empty() && additions.is_empty() {
        return;
    }
    if let Some(m) = map.as_mut() {
        for (k, _) in removals {
            m.remove(clear_removal_marker(k));
        }
    }
    let m = map.get_or_insert_with(HashMap::new);
    for (k, v) in additions {
        m.insert(k.clone(), v);
    }
    none_if_empty(map);
}

/// Devices: each one replaces the device at its path (or, marked `-path`,
/// removes it) and adds an allow rule to the device cgroup. Removing a
/// device leaves its cgroup rules alone, as upstream.
pub(super) fn adjust_devices(
    spec: &mut Spec,
    devices: &[api::LinuxDevice],
) -> Result<(), SpecError> {
    for d in devices {
        let path = clear_removal_marker(&d.path);
        if let Some(list) = spec
            .linux_mut()
            .as_mut()
            .and_then(|l| l.devices_mut().as_mut())
        {
            if let Some(i) = list
                .iter()
                .position(|x| x.path().as_os_str() == OsStr::new(path))
            {
                list.remove(i);
            }
        }
        if marked_for_removal(&d.path).is_some() {
            continue;
        }

        let typ = convert::device_type(&d.type_)?;
        let mut dev = oci::LinuxDevice::default();
        dev.set_path(d.path.clone().into());
        dev.set_typ(typ);
        dev.set_major(d.major);
        dev.set_minor(d.minor);
        dev.set_file_mode(d.file_mode.value());
        dev.set_uid(d.uid.value());
        dev.set_gid(d.gid.value());

        let mut rule = oci::LinuxDeviceCgroup::default();
        rule.set_allow(true);
        rule.set_typ(Some(typ));
        rule.set_major(Some(d.major));
        rule.set_minor(Some(d.minor));
        rule.set_access(Some(device_access(d).to_string()));

        let list = init::linux(spec).devices_mut().get_or_insert_with(Vec::new);
        match list
            .iter_mut()
            .find(|x| x.path().as_os_str() == dev.path().as_os_str())
        {
            Some(existing) => *existing = dev,
            None => list.push(dev),
        }
        init::resources(spec)
            .devices_mut()
            .get_or_insert_with(Vec::new)
            .push(rule);
    }
    if let Some(linux) = spec.linux_mut() {
        none_if_empty(linux.devices_mut());
    }
    Ok(())
}

/// The cgroup access of an added device. Upstream always grants read and
/// write whatever the file mode, and `mknod` to block devices only.
fn device_access(d: &api::LinuxDevice) -> &'static str {
    if d.type_ == "b" {
        "rwm"
    } else {
        "rw"
    }
}

pub(super) fn adjust_cgroups_path(spec: &mut Spec, path: &str) {
    if !path.is_empty() {
        init::linux(spec).set_cgroups_path(Some(path.into()));
    }
}

/// Seccomp: the adjustment's policy replaces the spec's.
///
/// Like upstream, the policy's `default_errno` is not carried over (upstream
/// builds the OCI policy without `defaultErrnoRet`).
pub(super) fn adjust_seccomp(
    spec: &mut Spec,
    policy: &MessageField<api::LinuxSeccomp>,
) -> Result<(), SpecError> {
    let Some(p) = policy.as_ref() else {
        return Ok(());
    };
    let mut s = oci::LinuxSeccomp::default();
    s.set_default_action(convert::seccomp_action(&p.default_action)?);
    s.set_architectures(try_map_non_empty(&p.architectures, |a| {
        convert::seccomp_arch(a)
    })?);
    s.set_flags(try_map_non_empty(&p.flags, |f| convert::seccomp_flag(f))?);
    s.set_listener_path(non_empty(&p.listener_path).map(Into::into));
    s.set_listener_metadata(non_empty(&p.listener_metadata));
    s.set_syscalls(try_map_non_empty(&p.syscalls, syscall)?);
    init::linux(spec).set_seccomp(Some(s));
    Ok(())
}

fn syscall(c: &api::LinuxSyscall) -> Result<oci::LinuxSyscall, SpecError> {
    let mut s = oci::LinuxSyscall::default();
    s.set_names(c.names.clone());
    s.set_action(convert::seccomp_action(&c.action)?);
    s.set_errno_ret(c.errno_ret.value());
    s.set_args(try_map_non_empty(&c.args, |a| {
        let mut o = oci::LinuxSeccompArgBuilder::default()
            .index(a.index as usize)
            .value(a.value)
            .op(convert::seccomp_operator(&a.op)?);
        if a.value_two != 0 {
            o = o.value_two(a.value_two);
        }
        Ok(o.build()?)
    })?);
    Ok(s)
}

/// Namespaces: each one replaces the path of the namespace of its type (or,
/// marked `-type`, removes it), or is appended.
pub(super) fn adjust_namespaces(
    spec: &mut Spec,
    namespaces: &[api::LinuxNamespace],
) -> Result<(), SpecError> {
    for n in namespaces {
        let typ = convert::namespace_type(clear_removal_marker(&n.type_))?;
        if marked_for_removal(&n.type_).is_some() {
            if let Some(list) = spec
                .linux_mut()
                .as_mut()
                .and_then(|l| l.namespaces_mut().as_mut())
            {
                if let Some(i) = list.iter().position(|x| x.typ() == typ) {
                    list.remove(i);
                }
            }
            continue;
        }
        let path = non_empty(&n.path).map(Into::into);
        let list = init::linux(spec)
            .namespaces_mut()
            .get_or_insert_with(Vec::new);
        match list.iter_mut().find(|x| x.typ() == typ) {
            Some(existing) => {
                existing.set_path(path);
            }
            None => {
                let mut ns = oci::LinuxNamespace::default();
                ns.set_typ(typ);
                ns.set_path(path);
                list.push(ns);
            }
        }
    }
    if let Some(linux) = spec.linux_mut() {
        none_if_empty(linux.namespaces_mut());
    }
    Ok(())
}

pub(super) fn adjust_sysctl(spec: &mut Spec, sysctl: &HashMap<String, String>) {
    // Only setting a sysctl creates the Linux section; removing one does not.
    let map = if sysctl.keys().any(|k| marked_for_removal(k).is_none()) {
        init::linux(spec).sysctl_mut()
    } else {
        match spec.linux_mut() {
            Some(linux) => linux.sysctl_mut(),
            None => return,
        }
    };
    adjust_keyed(map, sysctl.iter().map(|(k, v)| (k, v.clone())));
}

/// Network devices, keyed by host interface name.
pub(super) fn adjust_net_devices(spec: &mut Spec, devices: &HashMap<String, api::LinuxNetDevice>) {
    if devices.is_empty() {
        return;
    }
    adjust_keyed(
        init::linux(spec).net_devices_mut(),
        devices.iter().map(|(k, d)| {
            let mut o = oci::LinuxNetDevice::default();
            o.set_name(non_empty(&d.name));
            (k, o)
        }),
    );
}

/// Memory policy: replaces the spec's; an unknown mode clears it (as
/// upstream, which maps it to the empty mode).
pub(super) fn adjust_memory_policy(
    spec: &mut Spec,
    policy: &MessageField<api::LinuxMemoryPolicy>,
) -> Result<(), SpecError> {
    let Some(p) = policy.as_ref() else {
        return Ok(());
    };
    let value = match convert::memory_policy_mode(p.mode) {
        None => None,
        Some(mode) => {
            let mut o = oci::LinuxMemoryPolicy::default();
            o.set_mode(mode);
            // runtime-spec writes `nodes` even when empty.
            o.set_nodes(Some(p.nodes.clone()));
            o.set_flags(try_map_non_empty(&p.flags, |f| {
                convert::memory_policy_flag(*f)
            })?);
            Some(o)
        }
    };
    init::linux(spec).set_memory_policy(value);
    Ok(())
}
