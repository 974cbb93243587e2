//! The annotations the device injector reads and the adjustment each one
//! makes. Parsing is separate from the plugin so the tests can feed it
//! annotations directly.

use std::collections::{BTreeMap, HashMap};

use log::{debug, info, warn};
use nri_stub::api::optional::{file_mode, uint32};
use nri_stub::api::{
    CDIDevice, ContainerAdjustment, IOPrioClass, LinuxDevice, LinuxIOPriority, LinuxMemoryPolicy,
    LinuxNetDevice, LinuxScheduler, LinuxSchedulerFlag, LinuxSchedulerPolicy, Mount, MpolFlag,
    MpolMode,
};
use plugin_kit::annotations::{effective_keys, lookup_annotation};
use plugin_kit::goyaml;
use protobuf::Enum;
use serde::{Deserialize, Serialize};

pub const DEVICE_KEY: &str = "devices.noderesource.dev";
pub const OLD_DEVICE_KEY: &str = "devices.nri.io";
pub const MOUNT_KEY: &str = "mounts.noderesource.dev";
pub const OLD_MOUNT_KEY: &str = "mounts.nri.io";
pub const CDI_DEVICE_KEY: &str = "cdi-devices.noderesource.dev";
pub const OLD_CDI_DEVICE_KEY: &str = "cdi-devices.nri.io";
pub const IO_PRIO_KEY: &str = "io-priority.noderesource.dev";
pub const OLD_IO_PRIO_KEY: &str = "io-priority.nri.io";
pub const NET_DEVICE_KEY: &str = "network-devices.noderesource.dev";
pub const OLD_NET_DEVICE_KEY: &str = "network-devices.nri.io";
pub const SCHEDULER_KEY: &str = "scheduling-policy.noderesource.dev";
pub const OLD_SCHEDULER_KEY: &str = "scheduling-policy.nri.io";
pub const SYSCTL_KEY: &str = "sysctl.noderesource.dev";
pub const MEMORY_POLICY_KEY: &str = "memory-policy.noderesource.dev";
pub const OLD_MEMORY_POLICY_KEY: &str = "memory-policy.nri.io";

/// An annotated device.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Device {
    pub path: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub major: i64,
    pub minor: i64,
    pub file_mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// An annotated mount.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct AnnotatedMount {
    pub source: String,
    pub destination: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub options: Vec<String>,
}

/// An annotated I/O priority.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct IoPrio {
    pub class: String,
    pub priority: i32,
}

/// An annotated network device.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct NetDevice {
    #[serde(rename = "hostIf")]
    pub host_if: String,
    pub name: String,
}

/// Annotated scheduling attributes.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Scheduler {
    pub policy: String,
    pub nice: i32,
    pub priority: i32,
    pub flags: Vec<String>,
    pub runtime: u64,
    pub deadline: u64,
    pub period: u64,
}

/// An annotated memory policy.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct MemoryPolicy {
    pub mode: String,
    pub nodes: String,
    pub flags: Vec<String>,
}

/// What a container's annotations ask for, as upstream parses it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    pub devices: Vec<Device>,
    pub cdi_devices: Vec<String>,
    pub mounts: Vec<AnnotatedMount>,
    pub io_priority: Option<IoPrio>,
    pub scheduler: Option<Scheduler>,
    pub net_devices: Vec<NetDevice>,
    pub sysctl: BTreeMap<String, String>,
    pub memory_policy: Option<MemoryPolicy>,
}

fn annotation<'a>(
    annotations: &'a HashMap<String, String>,
    key: &str,
    old: &str,
    ctr: &str,
) -> Option<&'a str> {
    lookup_annotation(annotations, &effective_keys(key, old, ctr))
}

/// Decodes the annotation `key`/`old` for `ctr`; `what` names it in errors
/// ("invalid device annotation …", as upstream words them).
fn decode<T: serde::de::DeserializeOwned>(
    annotations: &HashMap<String, String>,
    key: &str,
    old: &str,
    ctr: &str,
    what: &str,
) -> Result<Option<T>, String> {
    match annotation(annotations, key, old, ctr) {
        None => Ok(None),
        Some(value) => goyaml::from_str_in(key, value)
            .map(Some)
            .map_err(|e| format!("invalid {what} annotation {value:?}: {e}")),
    }
}

/// Parses every annotation for container `ctr`. The first bad one is the
/// error, in upstream's order (devices, CDI devices, mounts, I/O priority,
/// scheduler, network devices, sysctl, memory policy).
pub fn parse(annotations: &HashMap<String, String>, ctr: &str) -> Result<Request, String> {
    Ok(Request {
        devices: decode(annotations, DEVICE_KEY, OLD_DEVICE_KEY, ctr, "device")?
            .unwrap_or_default(),
        cdi_devices: decode(
            annotations,
            CDI_DEVICE_KEY,
            OLD_CDI_DEVICE_KEY,
            ctr,
            "CDI device",
        )?
        .unwrap_or_default(),
        mounts: decode(annotations, MOUNT_KEY, OLD_MOUNT_KEY, ctr, "mount")?.unwrap_or_default(),
        io_priority: decode(
            annotations,
            IO_PRIO_KEY,
            OLD_IO_PRIO_KEY,
            ctr,
            "I/O priority",
        )?,
        scheduler: decode(
            annotations,
            SCHEDULER_KEY,
            OLD_SCHEDULER_KEY,
            ctr,
            "scheduler",
        )?,
        net_devices: decode(
            annotations,
            NET_DEVICE_KEY,
            OLD_NET_DEVICE_KEY,
            ctr,
            "net device",
        )?
        .unwrap_or_default(),
        sysctl: decode::<Option<BTreeMap<String, String>>>(
            annotations,
            SYSCTL_KEY,
            "",
            ctr,
            "sysctl",
        )?
        .flatten()
        .unwrap_or_default(),
        memory_policy: decode::<Option<MemoryPolicy>>(
            annotations,
            MEMORY_POLICY_KEY,
            OLD_MEMORY_POLICY_KEY,
            ctr,
            "memory policy",
        )?
        .map(|p| p.unwrap_or_default()),
    })
}

impl Device {
    pub fn to_nri(&self) -> LinuxDevice {
        let mut dev = LinuxDevice {
            path: self.path.clone(),
            type_: self.kind.clone(),
            major: self.major,
            minor: self.minor,
            ..Default::default()
        };
        if self.file_mode != 0 {
            dev.file_mode = file_mode(self.file_mode);
        }
        if self.uid != 0 {
            dev.uid = uint32(self.uid);
        }
        if self.gid != 0 {
            dev.gid = uint32(self.gid);
        }
        dev
    }
}

impl IoPrio {
    /// `None` for an unknown class (upstream then sets no priority).
    pub fn to_nri(&self) -> Option<LinuxIOPriority> {
        let class = match self.class.as_str() {
            "IOPRIO_CLASS_NONE" => IOPrioClass::IOPRIO_CLASS_NONE,
            "IOPRIO_CLASS_RT" => IOPrioClass::IOPRIO_CLASS_RT,
            "IOPRIO_CLASS_BE" => IOPrioClass::IOPRIO_CLASS_BE,
            "IOPRIO_CLASS_IDLE" => IOPrioClass::IOPRIO_CLASS_IDLE,
            other => {
                warn!("unknown I/O priority class {other:?}, using IOPRIO_CLASS_BE");
                return None;
            }
        };
        Some(LinuxIOPriority {
            class: class.into(),
            priority: self.priority,
            ..Default::default()
        })
    }
}

impl Scheduler {
    /// Unknown policy and flag names map to the zero value, as upstream's
    /// lookup in the generated name tables does.
    pub fn to_nri(&self) -> LinuxScheduler {
        LinuxScheduler {
            policy: LinuxSchedulerPolicy::from_str(&self.policy)
                .unwrap_or_default()
                .into(),
            nice: self.nice,
            priority: self.priority,
            flags: self
                .flags
                .iter()
                .map(|f| LinuxSchedulerFlag::from_str(f).unwrap_or_default().into())
                .collect(),
            runtime: self.runtime,
            deadline: self.deadline,
            period: self.period,
            ..Default::default()
        }
    }
}

impl MemoryPolicy {
    pub fn to_nri(&self) -> Result<LinuxMemoryPolicy, String> {
        let mode = MpolMode::from_str(&self.mode)
            .ok_or_else(|| format!("invalid memory policy mode {:?}", self.mode))?;
        let flags = self
            .flags
            .iter()
            .map(|f| {
                MpolFlag::from_str(f)
                    .map(Into::into)
                    .ok_or_else(|| format!("invalid memory policy flag {f:?}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(LinuxMemoryPolicy {
            mode: mode.into(),
            nodes: self.nodes.clone(),
            flags,
            ..Default::default()
        })
    }
}

/// The adjustment for container `ctr` (named `name` in logs) of a pod with
/// `annotations`, or why there is none.
pub fn adjustment(
    annotations: &HashMap<String, String>,
    ctr: &str,
    name: &str,
) -> Result<ContainerAdjustment, String> {
    let req = parse(annotations, ctr)?;
    let mut adjust = ContainerAdjustment::new();
    if req.devices.is_empty() {
        debug!("{name}: no devices annotated...");
    }
    for d in &req.devices {
        adjust.add_device(d.to_nri());
        info!("{name}: injected device {:?}...", d.path);
    }
    for cdi in &req.cdi_devices {
        adjust.add_cdi_device(CDIDevice {
            name: cdi.clone(),
            ..Default::default()
        });
        info!("{name}: injected CDI device {cdi:?}...");
    }
    for m in &req.mounts {
        adjust.add_mount(Mount {
            source: m.source.clone(),
            destination: m.destination.clone(),
            type_: m.kind.clone(),
            options: m.options.clone(),
            ..Default::default()
        });
        info!(
            "{name}: injected mount {:?} -> {:?}...",
            m.source, m.destination
        );
    }
    if let Some(prio) = &req.io_priority {
        match prio.to_nri() {
            Some(p) => adjust.set_linux_io_priority(p),
            // Upstream sets a nil priority: the linux part exists, empty.
            None => {
                adjust.linux.mut_or_insert_default();
            }
        }
        info!(
            "{name}: injected I/O priority <I/O priority class {}:{}>...",
            prio.class, prio.priority
        );
    }
    if let Some(sch) = &req.scheduler {
        adjust.set_linux_scheduler(sch.to_nri());
        info!(
            "{name}: adjusted scheduling attributes to policy={}...",
            sch.policy
        );
    }
    for d in &req.net_devices {
        adjust.add_linux_net_device(
            d.host_if.clone(),
            LinuxNetDevice {
                name: d.name.clone(),
                ..Default::default()
            },
        );
        info!(
            "{name}: injected network device {:?} -> {:?}...",
            d.host_if, d.name
        );
    }
    for (ctl, val) in &req.sysctl {
        adjust.set_linux_sysctl(ctl.clone(), val.clone());
        info!("{name}: adjusted sysctl {ctl}={val}...");
    }
    if let Some(pol) = &req.memory_policy {
        let p = pol
            .to_nri()
            .map_err(|e| format!("invalid memory policy: {e}"))?;
        let flags: Vec<MpolFlag> = p.flags.iter().filter_map(|f| f.enum_value().ok()).collect();
        adjust.set_linux_memory_policy(pol_mode(&p), p.nodes.clone(), &flags);
        info!("{name}: adjusted memory policy to mode={}...", pol.mode);
    }
    Ok(adjust)
}

fn pol_mode(p: &LinuxMemoryPolicy) -> MpolMode {
    p.mode.enum_value_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    use plugin_kit::annotations::from_pairs as ann;

    #[test]
    fn devices_with_optional_fields_and_go_yaml() {
        let a = ann(&[(
            "devices.noderesource.dev/container.c0",
            "- path: /dev/nri-null\n  type: c\n  major: 1\n  minor: 3\n  file_mode: 0666\n  uid: 1000\n- Path: /dev/b\n  type: b\n  major: 8\n",
        )]);
        let adj = adjustment(&a, "c0", "pod/c0").unwrap();
        let devs = &adj.linux.devices;
        assert_eq!(devs.len(), 2);
        assert_eq!(devs[0].path, "/dev/nri-null");
        assert_eq!(devs[0].file_mode.value, 0o666);
        assert_eq!(devs[0].uid.value, 1000);
        assert!(devs[0].gid.is_none());
        assert_eq!(devs[1].path, "/dev/b");
        assert!(devs[1].file_mode.is_none());
        // Another container gets nothing from a container-specific key.
        assert_eq!(
            adjustment(&a, "c1", "pod/c1").unwrap(),
            ContainerAdjustment::new()
        );
    }

    #[test]
    fn precedence_of_keys() {
        let a = ann(&[
            ("mounts.nri.io", "- {source: /old, destination: /old}"),
            (
                "mounts.noderesource.dev/pod",
                "- {source: /pod, destination: /pod}",
            ),
            (
                "mounts.nri.io/container.c2",
                "- {source: /c2, destination: /c2, type: bind, options: [bind, ro]}",
            ),
        ]);
        let r = parse(&a, "c2").unwrap();
        assert_eq!(r.mounts[0].source, "/c2");
        assert_eq!(r.mounts[0].options, ["bind", "ro"]);
        assert_eq!(parse(&a, "other").unwrap().mounts[0].source, "/pod");
    }

    #[test]
    fn cdi_net_sysctl_sched_ioprio_mempolicy() {
        let a = ann(&[
            (
                "cdi-devices.nri.io",
                "- vendor0.com/device=null\n- vendor1.com/device=dev1\n",
            ),
            (
                "network-devices.noderesource.dev/container.c0",
                "- hostIf: ens2.100\n  Name: netdev0\n",
            ),
            (
                "sysctl.noderesource.dev/pod",
                "net.core.somaxconn: 256\nnet.ipv4.ip_forward: \"1\"\n",
            ),
            (
                "scheduling-policy.noderesource.dev",
                "policy: SCHED_FIFO\npriority: 10\nflags: [SCHED_FLAG_RECLAIM, bogus]\n",
            ),
            (
                "io-priority.noderesource.dev",
                "class: IOPRIO_CLASS_RT\npriority: 2\n",
            ),
            (
                "memory-policy.noderesource.dev",
                "mode: MPOL_INTERLEAVE\nnodes: 2,3\nflags: [MPOL_F_STATIC_NODES]\n",
            ),
        ]);
        let adj = adjustment(&a, "c0", "p/c0").unwrap();
        assert_eq!(adj.CDI_devices.len(), 2);
        assert_eq!(adj.linux.net_devices["ens2.100"].name, "netdev0");
        assert_eq!(adj.linux.sysctl["net.core.somaxconn"], "256");
        assert_eq!(adj.linux.sysctl["net.ipv4.ip_forward"], "1");
        let s = &adj.linux.scheduler;
        assert_eq!(s.policy.enum_value(), Ok(LinuxSchedulerPolicy::SCHED_FIFO));
        assert_eq!(
            s.flags.iter().map(|f| f.value()).collect::<Vec<_>>(),
            [1, 0] // unknown flag names map to the zero value, as upstream
        );
        assert_eq!(
            adj.linux.io_priority.class.enum_value(),
            Ok(IOPrioClass::IOPRIO_CLASS_RT)
        );
        assert_eq!(adj.linux.memory_policy.nodes, "2,3");
        assert_eq!(adj.linux.memory_policy.flags.len(), 1);
    }

    #[test]
    fn unknown_io_priority_class_sets_nothing() {
        let a = ann(&[("io-priority.nri.io/pod", "class: FAST\n")]);
        let adj = adjustment(&a, "c", "p/c").unwrap();
        assert!(adj.linux.is_some());
        assert!(adj.linux.io_priority.is_none());
    }

    #[test]
    fn malformed_annotations_are_errors() {
        for (key, value, want) in [
            ("devices.nri.io", "- path: [", "invalid device annotation"),
            (
                "devices.nri.io",
                "path: /dev/x",
                "invalid device annotation",
            ),
            (
                "devices.nri.io",
                "- major: one",
                "invalid device annotation",
            ),
            (
                "cdi-devices.nri.io",
                "vendor.com/device=x",
                "invalid CDI device annotation",
            ),
            (
                "mounts.nri.io",
                "- options: bind",
                "invalid mount annotation",
            ),
            (
                "io-priority.nri.io",
                "- class: x",
                "invalid I/O priority annotation",
            ),
            (
                "scheduling-policy.nri.io",
                "nice: lots",
                "invalid scheduler annotation",
            ),
            (
                "network-devices.nri.io",
                "hostIf: eth0",
                "invalid net device annotation",
            ),
            (
                "sysctl.noderesource.dev",
                "- a",
                "invalid sysctl annotation",
            ),
            (
                "memory-policy.nri.io",
                "mode: [",
                "invalid memory policy annotation",
            ),
            (
                "memory-policy.nri.io",
                "mode: MPOL_NOPE",
                "invalid memory policy: invalid memory policy mode \"MPOL_NOPE\"",
            ),
            (
                "memory-policy.nri.io",
                "mode: MPOL_BIND\nflags: [X]",
                "invalid memory policy flag \"X\"",
            ),
        ] {
            let err = adjustment(&ann(&[(key, value)]), "c", "p/c").unwrap_err();
            assert!(err.contains(want), "{key}={value:?}: {err}");
        }
    }
}
