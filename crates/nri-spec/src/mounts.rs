//! Mounts: replacement by destination, removal, propagation, ordering.

use std::cmp::Ordering;
use std::ffi::OsStr;

use oci_spec::runtime::{self as oci, Spec};

use super::convert::{non_empty, non_empty_vec, none_if_empty};
use super::{init, BoxError, PropagationChecker, SpecError};
use nri_api::{self as api, marked_for_removal};

/// Applies the adjustment's mounts in order, then sorts all mounts.
///
/// Each mount first removes the spec's mount at its destination; a mount
/// marked `-destination` only removes. A mount with `rshared` or `rslave`
/// among its options needs its host source to have that propagation
/// (`check`) and makes the rootfs propagation `rshared`, or `rslave` unless
/// it is already `rshared` or `rslave`.
///
/// As upstream, the propagation seen last carries over to later mounts
/// that name none, so they are checked (and propagate) the same way.
pub(super) fn adjust_mounts(
    spec: &mut Spec,
    mounts: &[api::Mount],
    check: Option<&PropagationChecker>,
) -> Result<(), SpecError> {
    if mounts.is_empty() {
        return Ok(());
    }
    let mut propagation = "";
    for m in mounts {
        if let Some(destination) = marked_for_removal(&m.destination) {
            remove_mount(spec, destination);
            continue;
        }
        remove_mount(spec, &m.destination);

        if let Some(p) = m
            .options
            .iter()
            .rev()
            .find(|o| matches!(o.as_str(), "rprivate" | "rshared" | "rslave"))
        {
            propagation = p;
        }
        let accepted: &[&str] = match propagation {
            "rshared" => &["rshared"],
            "rslave" => &["rshared", "rslave"],
            _ => &[],
        };
        if !accepted.is_empty() {
            if let Some(check) = check {
                check(&m.source, accepted).map_err(|cause| SpecError::MountPropagation {
                    destination: m.destination.clone(),
                    cause,
                })?;
            }
            let linux = init::linux(spec);
            let keep = propagation == "rslave"
                && matches!(
                    linux.rootfs_propagation().as_deref(),
                    Some("rshared" | "rslave")
                );
            if !keep {
                linux.set_rootfs_propagation(Some(propagation.to_string()));
            }
        }

        let mut mnt = oci::Mount::default();
        mnt.set_destination(m.destination.clone().into());
        mnt.set_typ(non_empty(&m.type_));
        mnt.set_source(non_empty(&m.source).map(Into::into));
        mnt.set_options(non_empty_vec(&m.options));
        spec.mounts_mut().get_or_insert_with(Vec::new).push(mnt);
    }
    if let Some(list) = spec.mounts_mut() {
        list.sort_by(mount_order);
    }
    none_if_empty(spec.mounts_mut());
    Ok(())
}

/// Removes the first mount at exactly this destination (compared as a
/// string, as upstream: `/a/` and `/a` differ).
fn remove_mount(spec: &mut Spec, destination: &str) {
    if let Some(list) = spec.mounts_mut() {
        if let Some(i) = list
            .iter()
            .position(|m| m.destination().as_os_str() == OsStr::new(destination))
        {
            list.remove(i);
        }
    }
}

/// Upstream's mount order (Docker's and CRI-O's): fewer path components
/// first, then by destination. Sorting is stable, so mounts that compare
/// equal (the same destination twice) keep their order; Go's `sort.Sort`
/// does not promise that for more than 12 mounts.
fn mount_order(a: &oci::Mount, b: &oci::Mount) -> Ordering {
    let (a, b) = (a.destination().as_os_str(), b.destination().as_os_str());
    depth(a)
        .cmp(&depth(b))
        .then_with(|| a.as_encoded_bytes().cmp(b.as_encoded_bytes()))
}

/// The number of separators in the lexically cleaned path.
fn depth(path: &OsStr) -> usize {
    clean(&path.to_string_lossy()).matches('/').count()
}

/// Go's `filepath.Clean` on Unix: one separator between elements, no `.`,
/// `..` resolved lexically (dropped at the root), `.` for an empty result.
pub(super) fn clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// The host check upstream makes on Linux: the mount holding `source`
/// (the longest mount point that is a string prefix of the cleaned path,
/// in `/proc/self/mountinfo`) must have one of the `accepted`
/// propagations.
pub(super) fn check_host_propagation(source: &str, accepted: &[&str]) -> Result<(), BoxError> {
    let table = std::fs::read_to_string("/proc/self/mountinfo")?;
    check_propagation(&table, source, accepted)
}

/// [`check_host_propagation`] against a given mount table.
pub(super) fn check_propagation(
    mountinfo: &str,
    source: &str,
    accepted: &[&str],
) -> Result<(), BoxError> {
    let found = propagation_of(mountinfo, source)?;
    if accepted.contains(&found) {
        return Ok(());
    }
    Err(format!(
        "path {source:?} mount propagation is {found:?}, not {:?}",
        accepted.join(" or ")
    )
    .into())
}

/// `rshared`, `rslave` or `""` for the mount holding `path`.
fn propagation_of(mountinfo: &str, path: &str) -> Result<&'static str, BoxError> {
    let dir = clean(path);
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines().filter(|l| !l.is_empty()) {
        let (mount_point, optional) = parse_mountinfo_line(line)?;
        let longer = best
            .as_ref()
            .is_none_or(|(len, _)| mount_point.len() > *len);
        if longer && dir.starts_with(&mount_point) {
            best = Some((mount_point.len(), optional));
        }
    }
    let (_, optional) = best.ok_or_else(|| format!("failed to get mount info for {path:?}"))?;
    for field in optional.split(' ') {
        if field.starts_with("shared:") {
            return Ok("rshared");
        }
        if field.starts_with("master:") {
            return Ok("rslave");
        }
    }
    Ok("")
}

/// The mount point and the optional fields of one mountinfo line
/// (`proc(5)`: `id parent major:minor root mount-point options [optional...] - fstype source super-options`).
fn parse_mountinfo_line(line: &str) -> Result<(String, String), BoxError> {
    let fields: Vec<&str> = line.split(' ').collect();
    if fields.len() < 10 {
        return Err(format!(
            "parsing {line:?} failed: not enough fields ({})",
            fields.len()
        )
        .into());
    }
    let separator = (6..=fields.len() - 4)
        .rev()
        .find(|&i| fields[i] == "-")
        .ok_or_else(|| format!("parsing {line:?} failed: missing - separator"))?;
    Ok((unescape(fields[4])?, fields[6..separator].join(" ")))
}

/// Undoes mountinfo's octal escapes (`\040` for a space and so on).
fn unescape(field: &str) -> Result<String, BoxError> {
    if !field.contains('\\') {
        return Ok(field.to_string());
    }
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let code = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok())
            .ok_or_else(|| format!("bad escape sequence in mountinfo field {field:?}"))?;
        out.push(code);
        i += 4;
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}
