//! Builders for what plugins send back: container adjustments (on create)
//! and container updates (on create, update, stop, or unsolicited).
//!
//! The method names follow upstream's Go helpers (`AddEnv` → `add_env`), so
//! a plugin ported from Go reads the same.

use super::optional::{boolean, int, int64, repeated_string, string, uint64};
use super::removal::mark_for_removal;
use super::{
    CDIDevice, ContainerAdjustment, ContainerUpdate, Hooks, HugepageLimit, KeyValue, LinuxCPU,
    LinuxContainerAdjustment, LinuxDevice, LinuxIOPriority, LinuxMemory, LinuxMemoryPolicy,
    LinuxNamespace, LinuxNetDevice, LinuxPids, LinuxRdt, LinuxResources, LinuxScheduler,
    LinuxSeccomp, Mount, MpolFlag, MpolMode, POSIXRlimit,
};

impl LinuxResources {
    fn memory_mut(&mut self) -> &mut LinuxMemory {
        self.memory.mut_or_insert_default()
    }
    fn cpu_mut(&mut self) -> &mut LinuxCPU {
        self.cpu.mut_or_insert_default()
    }
    fn pids_mut(&mut self) -> &mut LinuxPids {
        self.pids.mut_or_insert_default()
    }
}

/// Resource setters shared by adjustments and updates; `$resources` is the
/// method giving `&mut LinuxResources`, creating it on first use.
macro_rules! resource_setters {
    ($ty:ty, $resources:ident) => {
        impl $ty {
            pub fn set_linux_memory_limit(&mut self, value: i64) {
                self.$resources().memory_mut().limit = int64(value);
            }
            pub fn set_linux_memory_reservation(&mut self, value: i64) {
                self.$resources().memory_mut().reservation = int64(value);
            }
            pub fn set_linux_memory_swap(&mut self, value: i64) {
                self.$resources().memory_mut().swap = int64(value);
            }
            pub fn set_linux_memory_kernel(&mut self, value: i64) {
                self.$resources().memory_mut().kernel = int64(value);
            }
            pub fn set_linux_memory_kernel_tcp(&mut self, value: i64) {
                self.$resources().memory_mut().kernel_tcp = int64(value);
            }
            pub fn set_linux_memory_swappiness(&mut self, value: u64) {
                self.$resources().memory_mut().swappiness = uint64(value);
            }
            pub fn set_linux_memory_disable_oom_killer(&mut self) {
                self.$resources().memory_mut().disable_oom_killer = boolean(true);
            }
            pub fn set_linux_memory_use_hierarchy(&mut self) {
                self.$resources().memory_mut().use_hierarchy = boolean(true);
            }
            pub fn set_linux_cpu_shares(&mut self, value: u64) {
                self.$resources().cpu_mut().shares = uint64(value);
            }
            pub fn set_linux_cpu_quota(&mut self, value: i64) {
                self.$resources().cpu_mut().quota = int64(value);
            }
            /// Takes `i64` like upstream's helper; the wire field is unsigned.
            pub fn set_linux_cpu_period(&mut self, value: i64) {
                self.$resources().cpu_mut().period = uint64(value as u64);
            }
            pub fn set_linux_cpu_realtime_runtime(&mut self, value: i64) {
                self.$resources().cpu_mut().realtime_runtime = int64(value);
            }
            pub fn set_linux_cpu_realtime_period(&mut self, value: u64) {
                self.$resources().cpu_mut().realtime_period = uint64(value);
            }
            pub fn set_linux_cpuset_cpus(&mut self, value: impl Into<String>) {
                self.$resources().cpu_mut().cpus = value.into();
            }
            pub fn set_linux_cpuset_mems(&mut self, value: impl Into<String>) {
                self.$resources().cpu_mut().mems = value.into();
            }
            pub fn set_linux_pid_limits(&mut self, value: i64) {
                self.$resources().pids_mut().limit = value;
            }
            pub fn add_linux_hugepage_limit(&mut self, page_size: impl Into<String>, limit: u64) {
                self.$resources().hugepage_limits.push(HugepageLimit {
                    page_size: page_size.into(),
                    limit,
                    ..Default::default()
                });
            }
            pub fn set_linux_blockio_class(&mut self, value: impl Into<String>) {
                self.$resources().blockio_class = string(value.into());
            }
            pub fn set_linux_rdt_class(&mut self, value: impl Into<String>) {
                self.$resources().rdt_class = string(value.into());
            }
            pub fn add_linux_unified(&mut self, key: impl Into<String>, value: impl Into<String>) {
                self.$resources().unified.insert(key.into(), value.into());
            }
        }
    };
}

resource_setters!(ContainerAdjustment, linux_resources_mut);
resource_setters!(ContainerUpdate, linux_resources_mut);

impl ContainerAdjustment {
    fn linux_mut(&mut self) -> &mut LinuxContainerAdjustment {
        self.linux.mut_or_insert_default()
    }

    fn linux_resources_mut(&mut self) -> &mut LinuxResources {
        self.linux_mut().resources.mut_or_insert_default()
    }

    fn linux_rdt_mut(&mut self) -> &mut LinuxRdt {
        self.linux_mut().rdt.mut_or_insert_default()
    }

    pub fn add_annotation(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.annotations.insert(key.into(), value.into());
    }

    /// Removes an annotation; removing first lets a plugin take over a key
    /// another plugin set.
    pub fn remove_annotation(&mut self, key: &str) {
        self.annotations
            .insert(mark_for_removal(key), String::new());
    }

    pub fn add_mount(&mut self, mount: Mount) {
        self.mounts.push(mount);
    }

    pub fn remove_mount(&mut self, container_path: &str) {
        self.mounts.push(Mount {
            destination: mark_for_removal(container_path),
            ..Default::default()
        });
    }

    pub fn add_env(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.env.push(KeyValue {
            key: key.into(),
            value: value.into(),
            ..Default::default()
        });
    }

    pub fn remove_env(&mut self, key: &str) {
        self.env.push(KeyValue {
            key: mark_for_removal(key),
            ..Default::default()
        });
    }

    /// Replaces the container's command line; conflicts with any other
    /// plugin doing the same.
    pub fn set_args<S: Into<String>>(&mut self, args: impl IntoIterator<Item = S>) {
        self.args = args.into_iter().map(Into::into).collect();
    }

    /// Replaces the command line even if another plugin already did: the
    /// leading empty argument marks it as an override.
    pub fn update_args<S: Into<String>>(&mut self, args: impl IntoIterator<Item = S>) {
        self.args = std::iter::once(String::new())
            .chain(args.into_iter().map(Into::into))
            .collect();
    }

    pub fn add_hooks(&mut self, hooks: Hooks) {
        let own = self.hooks.mut_or_insert_default();
        own.prestart.extend(hooks.prestart);
        own.create_runtime.extend(hooks.create_runtime);
        own.create_container.extend(hooks.create_container);
        own.start_container.extend(hooks.start_container);
        own.poststart.extend(hooks.poststart);
        own.poststop.extend(hooks.poststop);
    }

    pub fn add_rlimit(&mut self, kind: impl Into<String>, hard: u64, soft: u64) {
        self.rlimits.push(POSIXRlimit {
            type_: kind.into(),
            hard,
            soft,
            ..Default::default()
        });
    }

    pub fn add_device(&mut self, device: LinuxDevice) {
        self.linux_mut().devices.push(device);
    }

    pub fn remove_device(&mut self, path: &str) {
        self.linux_mut().devices.push(LinuxDevice {
            path: mark_for_removal(path),
            ..Default::default()
        });
    }

    pub fn add_cdi_device(&mut self, device: CDIDevice) {
        self.CDI_devices.push(device);
    }

    pub fn add_or_replace_namespace(&mut self, namespace: LinuxNamespace) {
        self.linux_mut().namespaces.push(namespace);
    }

    pub fn remove_namespace(&mut self, kind: &str) {
        self.linux_mut().namespaces.push(LinuxNamespace {
            type_: mark_for_removal(kind),
            ..Default::default()
        });
    }

    pub fn add_linux_net_device(&mut self, host_device: impl Into<String>, device: LinuxNetDevice) {
        self.linux_mut()
            .net_devices
            .insert(host_device.into(), device);
    }

    pub fn remove_linux_net_device(&mut self, host_device: &str) {
        self.linux_mut()
            .net_devices
            .insert(mark_for_removal(host_device), LinuxNetDevice::default());
    }

    pub fn set_linux_memory_policy(
        &mut self,
        mode: MpolMode,
        nodes: impl Into<String>,
        flags: &[MpolFlag],
    ) {
        self.linux_mut().memory_policy = protobuf::MessageField::some(LinuxMemoryPolicy {
            mode: mode.into(),
            nodes: nodes.into(),
            flags: flags.iter().map(|f| (*f).into()).collect(),
            ..Default::default()
        });
    }

    pub fn set_linux_rdt_clos_id(&mut self, value: impl Into<String>) {
        self.linux_rdt_mut().clos_id = string(value.into());
    }

    pub fn set_linux_rdt_schemata<S: Into<String>>(&mut self, value: impl IntoIterator<Item = S>) {
        self.linux_rdt_mut().schemata =
            repeated_string(value.into_iter().map(Into::into).collect::<Vec<_>>());
    }

    pub fn set_linux_rdt_enable_monitoring(&mut self, value: bool) {
        self.linux_rdt_mut().enable_monitoring = boolean(value);
    }

    pub fn remove_linux_rdt(&mut self) {
        self.linux_rdt_mut().remove = true;
    }

    pub fn set_linux_cgroups_path(&mut self, value: impl Into<String>) {
        self.linux_mut().cgroups_path = value.into();
    }

    /// `None` clears the OOM score adjustment (an absent wrapper).
    pub fn set_linux_oom_score_adj(&mut self, value: Option<i64>) {
        self.linux_mut().oom_score_adj = match value {
            Some(v) => int(v),
            None => protobuf::MessageField::none(),
        };
    }

    pub fn set_linux_io_priority(&mut self, priority: LinuxIOPriority) {
        self.linux_mut().io_priority = protobuf::MessageField::some(priority);
    }

    pub fn set_linux_seccomp_policy(&mut self, policy: LinuxSeccomp) {
        self.linux_mut().seccomp_policy = protobuf::MessageField::some(policy);
    }

    pub fn set_linux_sysctl(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.linux_mut().sysctl.insert(key.into(), value.into());
    }

    pub fn set_linux_scheduler(&mut self, scheduler: LinuxScheduler) {
        self.linux_mut().scheduler = protobuf::MessageField::some(scheduler);
    }
}

impl ContainerUpdate {
    /// An empty update for the given container.
    pub fn for_container(id: impl Into<String>) -> Self {
        ContainerUpdate {
            container_id: id.into(),
            ..Default::default()
        }
    }

    fn linux_resources_mut(&mut self) -> &mut LinuxResources {
        self.linux
            .mut_or_insert_default()
            .resources
            .mut_or_insert_default()
    }

    /// A failure to apply this update does not fail the operation it came with.
    pub fn set_ignore_failure(&mut self) {
        self.ignore_failure = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OptionalValue;

    #[test]
    fn adjustment_builders_fill_nested_fields() {
        let mut a = ContainerAdjustment::new();
        a.add_env("A", "1");
        a.remove_env("B");
        a.add_annotation("k", "v");
        a.remove_annotation("gone");
        a.remove_mount("/mnt");
        a.set_linux_memory_limit(1 << 20);
        a.set_linux_cpu_shares(512);
        a.set_linux_rdt_clos_id("gold");
        a.remove_linux_net_device("eth1");
        a.update_args(["sh", "-c", "true"]);
        a.set_linux_oom_score_adj(Some(0));

        assert_eq!(a.env[1].key, "-B");
        assert_eq!(a.annotations.get("-gone").map(String::as_str), Some(""));
        assert_eq!(a.mounts[0].destination, "-/mnt");
        let res = a.linux.resources.as_ref().unwrap();
        assert_eq!(res.memory.limit.value(), Some(1 << 20));
        assert_eq!(res.cpu.shares.value(), Some(512));
        assert_eq!(a.linux.rdt.clos_id.value().as_deref(), Some("gold"));
        assert!(a.linux.net_devices.contains_key("-eth1"));
        assert_eq!(a.args, ["", "sh", "-c", "true"]);
        assert_eq!(a.linux.oom_score_adj.value(), Some(0));
    }

    #[test]
    fn update_builders() {
        let mut u = ContainerUpdate::for_container("c1");
        u.set_linux_cpuset_cpus("0-1");
        u.add_linux_unified("memory.high", "1000");
        u.set_ignore_failure();
        let res = u.linux.resources.as_ref().unwrap();
        assert_eq!(res.cpu.cpus, "0-1");
        assert_eq!(res.unified["memory.high"], "1000");
        assert!(u.ignore_failure);
    }
}
