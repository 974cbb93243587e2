//! nri-writable-cgroups: mounts `/sys/fs/cgroup` read-write in containers
//! annotated `writable-cgroups.noderesource.dev: "true"` (pod-wide or
//! `/container.<name>`), but only when the host's cgroup2 mount has the
//! `nsdelegate` option — as upstream's Go `writable-cgroups` sample.
//!
//! Flags: `-idx NN`, `-socket-path PATH`, `-host-mount-file PATH` (default
//! `/host/proc/1/mountinfo`), `-verbose`.

use log::{debug, error, info, warn};
use nri_stub::api::{Container, ContainerAdjustment, ContainerUpdate, Mount, PodSandbox};
use nri_stub::{HandlerResult, Plugin};
use plugin_kit::annotations::{effective_keys, lookup_annotation};
use plugin_kit::{Flags, StubOptions};

const WRITABLE_CGROUPS_ANNOTATION: &str = "writable-cgroups.noderesource.dev";
const CGROUPS_MOUNT: &str = "/sys/fs/cgroup";

/// Unescapes the octal escapes (`\040`) the kernel uses in mountinfo.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            if let Some(v) = std::str::from_utf8(&bytes[i + 1..i + 4])
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the first cgroup2 mount at `/sys/fs/cgroup` or
/// `/sys/fs/cgroup/unified` in `mountinfo` has the `nsdelegate` option.
fn has_ns_delegate(mountinfo: &str) -> Result<bool, String> {
    for (n, line) in mountinfo.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(' ').collect();
        let sep = fields
            .iter()
            .skip(6)
            .position(|f| *f == "-")
            .map(|p| p + 6)
            .filter(|&p| fields.len() >= p + 4)
            .ok_or_else(|| {
                format!(
                    "error scanning mount file: parsing line {}: bad format {line:?}",
                    n + 1
                )
            })?;
        let mountpoint = unescape(fields[4]);
        let fstype = fields[sep + 1];
        let vfs_options = fields[sep + 3];
        if fstype != "cgroup2"
            || (mountpoint != CGROUPS_MOUNT && mountpoint != "/sys/fs/cgroup/unified")
        {
            continue;
        }
        return Ok(vfs_options.split(',').any(|o| o == "nsdelegate"));
    }
    Ok(false)
}

fn check_host_ns_delegate(path: &str) -> Result<bool, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("failed to open mount file {path:?}: {e}"))?;
    has_ns_delegate(&text)
}

/// `old` with `ro` dropped and `rw` added; `None` when already read-write.
fn read_write_mount(old: &Mount) -> Option<Mount> {
    let mut options = Vec::with_capacity(old.options.len() + 1);
    let (mut has_rw, mut changed) = (false, false);
    for opt in &old.options {
        match opt.as_str() {
            "rw" => {
                has_rw = true;
                options.push(opt.clone());
            }
            "ro" => changed = true,
            _ => options.push(opt.clone()),
        }
    }
    if !has_rw {
        options.push("rw".to_string());
        changed = true;
    }
    changed.then(|| Mount {
        destination: old.destination.clone(),
        type_: old.type_.clone(),
        source: old.source.clone(),
        options,
        ..Default::default()
    })
}

struct WritableCgroups {
    host_ns_delegate: bool,
}

impl WritableCgroups {
    fn adjust(&self, pod: &PodSandbox, ctr: &Container) -> Result<ContainerAdjustment, String> {
        let who = format!(
            "namespace={} pod={} container={}",
            pod.namespace, pod.name, ctr.name
        );
        let keys = effective_keys(WRITABLE_CGROUPS_ANNOTATION, "", &ctr.name);
        let enabled = match lookup_annotation(&pod.annotations, &keys) {
            Some(value) => {
                debug!("{who}: found effective annotation {WRITABLE_CGROUPS_ANNOTATION}={value:?}");
                value == "true"
            }
            None => {
                debug!("{who}: annotation {WRITABLE_CGROUPS_ANNOTATION} not found");
                false
            }
        };
        if !enabled {
            return Ok(ContainerAdjustment::new());
        }
        if !self.host_ns_delegate {
            warn!("{who}: cgroup mount on host does not have 'nsdelegate' option; ignoring request to make cgroups writable");
            return Ok(ContainerAdjustment::new());
        }
        let Some(old) = ctr.mounts.iter().find(|m| m.destination == CGROUPS_MOUNT) else {
            let err = format!("no {CGROUPS_MOUNT} mount found to modify, this is unexpected");
            error!("{who}: failed to find cgroup mount: {err}");
            return Err(err);
        };
        let Some(new) = read_write_mount(old) else {
            debug!("{who}: cgroup mount is already read-write");
            return Ok(ContainerAdjustment::new());
        };
        let mut adjust = ContainerAdjustment::new();
        adjust.add_mount(new);
        adjust.remove_mount(&old.destination);
        info!("{who}: Successfully adjusted mounts for writable cgroups");
        Ok(adjust)
    }
}

#[nri_stub::plugin]
impl Plugin for WritableCgroups {
    async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        Ok((self.adjust(pod, ctr)?, Vec::new()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::new("nri-writable-cgroups")
        .string("idx", "", "plugin index to register to NRI")
        .string("socket-path", "", "path of the NRI socket file")
        .string(
            "host-mount-file",
            "/host/proc/1/mountinfo",
            "path to the host mountinfo file to check for nsdelegate",
        )
        .boolean("verbose", "enable (more) verbose logging")
        .parse_env_or_exit();
    plugin_kit::logging::init(flags.flag("verbose"));
    let host_ns_delegate = match check_host_ns_delegate(flags.get("host-mount-file")) {
        Err(e) => {
            warn!("Failed to check for nsdelegate option on host cgroup mount, disabling writable cgroups: {e}");
            false
        }
        Ok(false) => {
            warn!(
                "Host cgroup mount does not have 'nsdelegate' option, disabling writable cgroups"
            );
            false
        }
        Ok(true) => {
            info!("Host cgroup mount has 'nsdelegate' option, enabling writable cgroups support");
            true
        }
    };
    plugin_kit::run_plugin(
        StubOptions::from_flags(&flags, "socket-path"),
        WritableCgroups { host_ns_delegate },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELEGATED: &str = "24 30 0:22 / /sys rw,nosuid - sysfs sysfs rw\n\
        35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";

    fn pod(annotations: &[(&str, &str)]) -> PodSandbox {
        PodSandbox {
            name: "p".into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn ctr(options: &[&str]) -> Container {
        Container {
            name: "c".into(),
            mounts: vec![Mount {
                destination: CGROUPS_MOUNT.into(),
                type_: "cgroup".into(),
                source: "cgroup".into(),
                options: options.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn mountinfo_parsing() {
        assert_eq!(has_ns_delegate(DELEGATED), Ok(true));
        assert_eq!(
            has_ns_delegate(&DELEGATED.replace("nsdelegate,", "")),
            Ok(false)
        );
        assert_eq!(
            has_ns_delegate(&DELEGATED.replace("/sys/fs/cgroup ", "/sys/fs/cgroup/unified ")),
            Ok(true)
        );
        assert_eq!(has_ns_delegate(""), Ok(false));
        assert!(has_ns_delegate("garbage line\n").is_err());
        assert!(check_host_ns_delegate("/nonexistent/mountinfo").is_err());
        assert_eq!(unescape("/a\\040b"), "/a b");
    }

    #[test]
    fn annotated_containers_get_rw_cgroups() {
        let p = WritableCgroups {
            host_ns_delegate: true,
        };
        let adj = p
            .adjust(
                &pod(&[("writable-cgroups.noderesource.dev/container.c", "true")]),
                &ctr(&["ro", "nosuid"]),
            )
            .unwrap();
        assert_eq!(adj.mounts.len(), 2);
        assert_eq!(adj.mounts[0].options, ["nosuid", "rw"]);
        assert_eq!(adj.mounts[1].destination, "-/sys/fs/cgroup");
        // Already rw: nothing to do.
        let none = p
            .adjust(
                &pod(&[("writable-cgroups.noderesource.dev", "true")]),
                &ctr(&["rw"]),
            )
            .unwrap();
        assert_eq!(none, ContainerAdjustment::new());
        // Not "true": nothing.
        let none = p
            .adjust(
                &pod(&[("writable-cgroups.noderesource.dev/pod", "yes")]),
                &ctr(&["ro"]),
            )
            .unwrap();
        assert_eq!(none, ContainerAdjustment::new());
        // The container's own key outranks the pod-wide one.
        let adj = p
            .adjust(
                &pod(&[
                    ("writable-cgroups.noderesource.dev/pod", "false"),
                    ("writable-cgroups.noderesource.dev/container.c", "true"),
                ]),
                &ctr(&["ro"]),
            )
            .unwrap();
        assert_eq!(adj.mounts.len(), 2);
        // Host without nsdelegate: nothing.
        let off = WritableCgroups {
            host_ns_delegate: false,
        };
        let none = off
            .adjust(
                &pod(&[("writable-cgroups.noderesource.dev", "true")]),
                &ctr(&["ro"]),
            )
            .unwrap();
        assert_eq!(none, ContainerAdjustment::new());
        // No cgroup mount at all: an error.
        let mut bare = ctr(&[]);
        bare.mounts.clear();
        assert!(p
            .adjust(
                &pod(&[("writable-cgroups.noderesource.dev", "true")]),
                &bare
            )
            .unwrap_err()
            .contains("no /sys/fs/cgroup mount found"));
    }
}
