//! Result merging against upstream's behaviour.
//!
//! `upstream_*` tests replay the cases of upstream's
//! `adaptation_suite_test.go` (single plugin `00-test`; two plugins `00-bar`
//! then `10-foo`, where `10-foo` removes before it sets when asked to),
//! without live plugins. The others pin each rule of the conformance
//! checklist, section 4.

use protobuf::MessageField;

use super::*;
use nri_api::optional::{boolean, int64, repeated_string, string, uint64};
use nri_api::{
    CDIDevice, Field, Hook, HugepageLimit, IOPrioClass, KeyValue, LinuxContainerUpdate,
    LinuxDevice, LinuxDeviceCgroup, LinuxIOPriority, LinuxNamespace, LinuxNetDevice, LinuxPids,
    LinuxRdt, LinuxScheduler, LinuxSchedulerFlag, LinuxSchedulerPolicy, LinuxSeccomp, LinuxSyscall,
    Mount, MpolFlag, MpolMode, OptionalValue, POSIXRlimit,
};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A plugin's CreateContainer answer, computed from the container it sees.
type Answer<'a> = (&'a str, &'a dyn Fn(&Container) -> CreateContainerResponse);

fn adjusting(adjust: ContainerAdjustment) -> CreateContainerResponse {
    CreateContainerResponse {
        adjust: MessageField::some(adjust),
        ..Default::default()
    }
}

fn updating(update: Vec<ContainerUpdate>) -> CreateContainerResponse {
    CreateContainerResponse {
        update,
        ..Default::default()
    }
}

fn with(build: impl FnOnce(&mut ContainerAdjustment)) -> ContainerAdjustment {
    let mut adjust = ContainerAdjustment::default();
    build(&mut adjust);
    adjust
}

fn update_of(ctr_id: &str, build: impl FnOnce(&mut ContainerUpdate)) -> ContainerUpdate {
    let mut update = ContainerUpdate::for_container(ctr_id);
    build(&mut update);
    update
}

fn container(id: &str) -> Container {
    Container {
        id: id.to_string(),
        name: id.to_string(),
        ..Default::default()
    }
}

fn create_request(ctr: Container) -> CreateContainerRequest {
    CreateContainerRequest {
        container: MessageField::some(ctr),
        ..Default::default()
    }
}

/// Runs a CreateContainer merge with plugins answering in turn, each
/// seeing the container as adjusted by the ones before.
fn create(
    req: &mut CreateContainerRequest,
    answers: &[Answer<'_>],
) -> Result<CreateResult, MergeError> {
    let mut result = CreateResult::new(req);
    for (plugin, answer) in answers {
        let rpl = answer(&req.container);
        result.apply(req, plugin, rpl)?;
    }
    Ok(result)
}

/// The merged adjustment of fixed plugin answers.
fn merged(
    ctr: Container,
    answers: Vec<(&str, CreateContainerResponse)>,
) -> Result<(ContainerAdjustment, Container), MergeError> {
    let mut req = create_request(ctr);
    let mut result = CreateResult::new(&mut req);
    for (plugin, rpl) in answers {
        result.apply(&mut req, plugin, rpl)?;
    }
    let adjust = result.into_response().adjust.unwrap_or_default();
    Ok((strip(adjust), req.container.unwrap_or_default()))
}

/// One plugin, `00-a`, adjusting `ctr`: the merged reply and container.
fn adjusted(
    ctr: Container,
    build: impl FnOnce(&mut ContainerAdjustment),
) -> (ContainerAdjustment, Container) {
    merged(ctr, vec![("00-a", adjusting(with(build)))]).expect("no conflict")
}

/// What `10-b` conflicts on when it answers after `00-a`: the end of the
/// error text, `<Field> <key>` (the whole text if it is not a conflict).
fn clash(first: CreateContainerResponse, second: CreateContainerResponse) -> String {
    let text = conflict(merged(
        container("c"),
        vec![("00-a", first), ("10-b", second)],
    ));
    match text.strip_prefix(r#"plugins "10-b" and "00-a" both tried to set "#) {
        Some(what) => what.to_string(),
        None => text,
    }
}

fn conflict(result: Result<impl Sized, MergeError>) -> String {
    match result {
        Ok(_) => panic!("expected a conflict"),
        Err(err) => err.to_string(),
    }
}

/// Drops sub-messages that hold nothing, like upstream's `Strip()`, so an
/// expectation lists only what a plugin changed.
fn strip(mut adjust: ContainerAdjustment) -> ContainerAdjustment {
    if let Some(linux) = adjust.linux.as_mut() {
        if let Some(resources) = linux.resources.as_mut() {
            prune(&mut resources.memory);
            prune(&mut resources.cpu);
        }
        prune(&mut linux.resources);
        prune(&mut linux.rdt);
    }
    prune(&mut adjust.linux);
    prune(&mut adjust.hooks);
    adjust
}

fn strip_update(mut update: ContainerUpdate) -> ContainerUpdate {
    if let Some(linux) = update.linux.as_mut() {
        if let Some(resources) = linux.resources.as_mut() {
            prune(&mut resources.memory);
            prune(&mut resources.cpu);
        }
        prune(&mut linux.resources);
    }
    prune(&mut update.linux);
    update
}

fn prune<T: protobuf::Message + PartialEq>(field: &mut MessageField<T>) {
    if field.as_ref() == Some(&T::default()) {
        *field = MessageField::none();
    }
}

fn linux_adjust(build: impl FnOnce(&mut LinuxContainerAdjustment)) -> ContainerAdjustment {
    let mut linux = LinuxContainerAdjustment::default();
    build(&mut linux);
    ContainerAdjustment {
        linux: MessageField::some(linux),
        ..Default::default()
    }
}

fn resources_adjust(resources: LinuxResources) -> ContainerAdjustment {
    linux_adjust(|l| l.resources = MessageField::some(resources))
}

fn mount(destination: &str, source: &str) -> Mount {
    Mount {
        destination: destination.to_string(),
        source: source.to_string(),
        ..Default::default()
    }
}

fn device(path: &str, minor: i64) -> LinuxDevice {
    LinuxDevice {
        path: path.to_string(),
        type_: "c".to_string(),
        major: 313,
        minor,
        ..Default::default()
    }
}

fn namespace(kind: &str, path: &str) -> LinuxNamespace {
    LinuxNamespace {
        type_: kind.to_string(),
        path: path.to_string(),
        ..Default::default()
    }
}

fn hook(path: &str) -> Hook {
    Hook {
        path: path.to_string(),
        ..Default::default()
    }
}

fn map<V: Clone>(entries: &[(&str, V)]) -> HashMap<String, V> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------
// Upstream's cases: "Plugin container creation adjustments"
// ---------------------------------------------------------------------------

/// The container of upstream's adjustment tests.
fn upstream_container(with_spec_extras: bool) -> Container {
    let mut ctr = container("ctr0");
    ctr.pod_sandbox_id = "pod0".to_string();
    ctr.args = strings(&["echo", "original", "argument", "list"]);
    let resources = LinuxResources {
        cpu: MessageField::some(LinuxCPU {
            shares: uint64(111u64),
            quota: int64(222),
            period: uint64(333u64),
            realtime_runtime: int64(444),
            realtime_period: uint64(555u64),
            ..Default::default()
        }),
        memory: MessageField::some(LinuxMemory {
            limit: int64(11111),
            reservation: int64(22222),
            swap: int64(33333),
            swappiness: uint64(44444u64),
            disable_oom_killer: boolean(false),
            use_hierarchy: boolean(false),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut linux = LinuxContainer {
        resources: MessageField::some(resources),
        ..Default::default()
    };
    if with_spec_extras {
        ctr.mounts = vec![Mount {
            type_: "bind".to_string(),
            source: "/remove/test".to_string(),
            destination: "/remove/test/destination".to_string(),
            ..Default::default()
        }];
        linux.namespaces = vec![namespace("cgroup", "/var/run/cgroupns/original")];
    }
    ctr.linux = MessageField::some(linux);
    ctr
}

fn upstream_seccomp() -> LinuxSeccomp {
    LinuxSeccomp {
        default_action: "SCMP_ACT_ALLOW".to_string(),
        listener_path: "/run/meshuggah-rocks.sock".to_string(),
        syscalls: vec![LinuxSyscall {
            names: strings(&["sched_getaffinity"]),
            action: "SCMP_ACT_NOTIFY".to_string(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn upstream_scheduler() -> LinuxScheduler {
    LinuxScheduler {
        policy: LinuxSchedulerPolicy::SCHED_FIFO.into(),
        priority: 10,
        flags: vec![LinuxSchedulerFlag::SCHED_FLAG_RESET_ON_FORK.into()],
        ..Default::default()
    }
}

/// What upstream's mock plugin `plugin` (`idx-name`) answers for `subject`.
fn upstream_adjust(
    subject: &str,
    plugin: &str,
    ctr: &Container,
    overwrite: bool,
) -> ContainerAdjustment {
    let (idx, name) = plugin.split_once('-').unwrap_or(("00", plugin));
    let mut a = ContainerAdjustment::default();
    match subject {
        "annotation" => {
            if overwrite {
                a.remove_annotation("key");
            }
            a.add_annotation("key", plugin);
        }
        "mount" => {
            if overwrite {
                a.remove_mount("/mnt/test");
            }
            a.add_mount(mount("/mnt/test", &format!("/dev/{plugin}")));
        }
        "remove mount" => a.remove_mount("/remove/test/destination"),
        "environment" => {
            if overwrite {
                a.remove_env("key");
            }
            a.add_env("key", plugin);
        }
        "arguments" => {
            if overwrite {
                let mut args = ctr.args.clone();
                args.push("twice...".to_string());
                a.update_args(args);
            } else {
                a.set_args(["echo", "updated", "argument", "list"]);
            }
        }
        "hooks" => a.add_hooks(Hooks {
            prestart: vec![hook(&format!("/bin/{plugin}"))],
            ..Default::default()
        }),
        "device" => {
            if overwrite {
                a.remove_device("/dev/test");
            }
            a.add_device(device("/dev/test", 100 + idx.parse::<i64>().unwrap_or(0)));
        }
        "namespace" => {
            a.add_or_replace_namespace(namespace("cgroup", "/var/run/cgroupns/replaced"))
        }
        "rlimit" => a.add_rlimit("nofile", 456, 123),
        "CDI-device" => a.add_cdi_device(CDIDevice {
            name: "vendor0.com/dev=dev0".to_string(),
            ..Default::default()
        }),
        "I/O priority" => a.set_linux_io_priority(LinuxIOPriority {
            class: IOPrioClass::IOPRIO_CLASS_RT.into(),
            priority: 5,
            ..Default::default()
        }),
        "linux net device" => {
            if overwrite {
                a.remove_linux_net_device("hostIf");
            }
            a.add_linux_net_device(
                "hostIf",
                LinuxNetDevice {
                    name: "containerIf".to_string(),
                    ..Default::default()
                },
            );
        }
        "linux scheduler" => a.set_linux_scheduler(upstream_scheduler()),
        "linux sysctl" => a.set_linux_sysctl("net.core.somaxconn", "256"),
        "linux memory policy" => a.set_linux_memory_policy(
            MpolMode::MPOL_INTERLEAVE,
            "0,1",
            &[MpolFlag::MPOL_F_STATIC_NODES],
        ),
        "resources/cpu" => {
            a.set_linux_cpu_shares(123);
            a.set_linux_cpu_quota(456);
            a.set_linux_cpu_period(789);
            a.set_linux_cpu_realtime_runtime(321);
            a.set_linux_cpu_realtime_period(654);
            a.set_linux_cpuset_cpus("0-1");
            a.set_linux_cpuset_mems("2-3");
        }
        "resources/mem" => {
            a.set_linux_memory_limit(1234000);
            a.set_linux_memory_reservation(4000);
            a.set_linux_memory_swap(34000);
            a.set_linux_memory_kernel(30000);
            a.set_linux_memory_kernel_tcp(2000);
            a.set_linux_memory_swappiness(987);
            a.set_linux_memory_disable_oom_killer();
            a.set_linux_memory_use_hierarchy();
        }
        "resources/classes" => {
            a.set_linux_rdt_class(plugin);
            a.set_linux_blockio_class(plugin);
        }
        "resources/hugepagelimits" => {
            a.add_linux_hugepage_limit("1M", 4096);
            a.add_linux_hugepage_limit("4M", 1024);
        }
        "resources/unified" => {
            a.add_linux_unified("resource.1", "value1");
            a.add_linux_unified("resource.2", "value2");
        }
        "cgroupspath" => a.set_linux_cgroups_path(format!("/{plugin}")),
        "seccomp" => a.set_linux_seccomp_policy(upstream_seccomp()),
        "rdt" => {
            if overwrite {
                a.remove_linux_rdt();
            }
            a.set_linux_rdt_clos_id(name);
            a.set_linux_rdt_schemata(["L3:0=ff", "MB:0=50"]);
            a.set_linux_rdt_enable_monitoring(true);
        }
        other => panic!("unknown subject {other}"),
    }
    a
}

fn cpu_resources(cpu: LinuxCPU) -> LinuxResources {
    LinuxResources {
        cpu: MessageField::some(cpu),
        ..Default::default()
    }
}

fn memory_resources(memory: LinuxMemory) -> LinuxResources {
    LinuxResources {
        memory: MessageField::some(memory),
        ..Default::default()
    }
}

fn plugin_cpu() -> LinuxCPU {
    LinuxCPU {
        shares: uint64(123u64),
        quota: int64(456),
        period: uint64(789u64),
        realtime_runtime: int64(321),
        realtime_period: uint64(654u64),
        cpus: "0-1".to_string(),
        mems: "2-3".to_string(),
        ..Default::default()
    }
}

fn plugin_memory() -> LinuxMemory {
    LinuxMemory {
        limit: int64(1234000),
        reservation: int64(4000),
        swap: int64(34000),
        kernel: int64(30000),
        kernel_tcp: int64(2000),
        swappiness: uint64(987u64),
        disable_oom_killer: boolean(true),
        use_hierarchy: boolean(true),
        ..Default::default()
    }
}

fn classes(plugin: &str) -> LinuxResources {
    LinuxResources {
        rdt_class: string(plugin),
        blockio_class: string(plugin),
        ..Default::default()
    }
}

fn hugepages() -> Vec<HugepageLimit> {
    [("1M", 4096), ("4M", 1024)]
        .into_iter()
        .map(|(page_size, limit)| HugepageLimit {
            page_size: page_size.to_string(),
            limit,
            ..Default::default()
        })
        .collect()
}

fn unified() -> HashMap<String, String> {
    map(&[
        ("resource.1", "value1".to_string()),
        ("resource.2", "value2".to_string()),
    ])
}

fn rdt(clos_id: &str) -> LinuxRdt {
    LinuxRdt {
        clos_id: string(clos_id),
        schemata: repeated_string(strings(&["L3:0=ff", "MB:0=50"])),
        enable_monitoring: boolean(true),
        ..Default::default()
    }
}

#[test]
fn upstream_single_plugin_adjustments() {
    let cases: Vec<(&str, ContainerAdjustment)> = vec![
        (
            "annotation",
            with(|a| a.annotations = map(&[("key", "00-test".to_string())])),
        ),
        (
            "mount",
            with(|a| a.mounts = vec![mount("/mnt/test", "/dev/00-test")]),
        ),
        (
            "remove mount",
            with(|a| a.mounts = vec![mount("-/remove/test/destination", "")]),
        ),
        (
            "environment",
            with(|a| {
                a.add_env("key", "00-test");
            }),
        ),
        (
            "arguments",
            with(|a| a.args = strings(&["echo", "updated", "argument", "list"])),
        ),
        (
            "hooks",
            with(|a| {
                a.hooks = MessageField::some(Hooks {
                    prestart: vec![hook("/bin/00-test")],
                    ..Default::default()
                })
            }),
        ),
        (
            "device",
            linux_adjust(|l| l.devices = vec![device("/dev/test", 100)]),
        ),
        (
            "namespace",
            linux_adjust(|l| {
                l.namespaces = vec![namespace("cgroup", "/var/run/cgroupns/replaced")]
            }),
        ),
        ("rlimit", with(|a| a.add_rlimit("nofile", 456, 123))),
        (
            "CDI-device",
            with(|a| {
                a.add_cdi_device(CDIDevice {
                    name: "vendor0.com/dev=dev0".to_string(),
                    ..Default::default()
                })
            }),
        ),
        (
            "I/O priority",
            linux_adjust(|l| {
                l.io_priority = MessageField::some(LinuxIOPriority {
                    class: IOPrioClass::IOPRIO_CLASS_RT.into(),
                    priority: 5,
                    ..Default::default()
                })
            }),
        ),
        (
            "linux net device",
            linux_adjust(|l| {
                l.net_devices = map(&[(
                    "hostIf",
                    LinuxNetDevice {
                        name: "containerIf".to_string(),
                        ..Default::default()
                    },
                )])
            }),
        ),
        (
            "linux scheduler",
            linux_adjust(|l| l.scheduler = MessageField::some(upstream_scheduler())),
        ),
        (
            "linux sysctl",
            linux_adjust(|l| l.sysctl = map(&[("net.core.somaxconn", "256".to_string())])),
        ),
        (
            "linux memory policy",
            with(|a| {
                a.set_linux_memory_policy(
                    MpolMode::MPOL_INTERLEAVE,
                    "0,1",
                    &[MpolFlag::MPOL_F_STATIC_NODES],
                )
            }),
        ),
        (
            "resources/cpu",
            resources_adjust(cpu_resources(plugin_cpu())),
        ),
        (
            "resources/mem",
            resources_adjust(memory_resources(plugin_memory())),
        ),
        ("resources/classes", resources_adjust(classes("00-test"))),
        (
            "resources/hugepagelimits",
            resources_adjust(LinuxResources {
                hugepage_limits: hugepages(),
                ..Default::default()
            }),
        ),
        (
            "resources/unified",
            resources_adjust(LinuxResources {
                unified: unified(),
                ..Default::default()
            }),
        ),
        (
            "cgroupspath",
            linux_adjust(|l| l.cgroups_path = "/00-test".to_string()),
        ),
        (
            "seccomp",
            linux_adjust(|l| l.seccomp_policy = MessageField::some(upstream_seccomp())),
        ),
        (
            "rdt",
            linux_adjust(|l| l.rdt = MessageField::some(rdt("test"))),
        ),
    ];

    for (subject, expected) in cases {
        let answer = |ctr: &Container| adjusting(upstream_adjust(subject, "00-test", ctr, false));
        let mut req = create_request(upstream_container(true));
        let result = create(&mut req, &[("00-test", &answer)]).expect(subject);
        let adjust = result.into_response().adjust.unwrap_or_default();
        assert_eq!(strip(adjust), expected, "subject {subject}");
    }
}

/// 00-bar answers first, then 10-foo, which removes first if `remove`.
fn upstream_two_plugins(subject: &str, remove: bool) -> Result<ContainerAdjustment, MergeError> {
    let bar = |ctr: &Container| adjusting(upstream_adjust(subject, "00-bar", ctr, false));
    let foo = |ctr: &Container| adjusting(upstream_adjust(subject, "10-foo", ctr, remove));
    let mut req = create_request(upstream_container(false));
    let result = create(&mut req, &[("00-bar", &bar), ("10-foo", &foo)])?;
    Ok(strip(result.into_response().adjust.unwrap_or_default()))
}

#[test]
fn upstream_two_plugins_conflict_without_removal() {
    // The field (and key) each subject conflicts on; simple fields keep
    // upstream's trailing space.
    let cases = [
        ("annotation", "Annotations key"),
        ("mount", "Mounts /mnt/test"),
        ("environment", "Env key"),
        ("arguments", "Args "),
        ("device", "Devices /dev/test"),
        ("resources/classes", "BlockioClass "),
        ("I/O priority", "IoPriority "),
        ("linux net device", "LinuxNetDevices hostIf"),
        ("linux scheduler", "LinuxSched "),
        ("rdt", "RdtClosID "),
    ];
    for (subject, what) in cases {
        assert_eq!(
            conflict(upstream_two_plugins(subject, false)),
            format!(r#"plugins "10-foo" and "00-bar" both tried to set {what}"#),
            "subject {subject}"
        );
    }
}

#[test]
fn upstream_two_plugins_remove_then_set() {
    let cases: Vec<(&str, bool, ContainerAdjustment)> = vec![
        (
            "annotation",
            true,
            with(|a| {
                a.annotations = map(&[("-key", String::new()), ("key", "10-foo".to_string())])
            }),
        ),
        (
            "mount",
            true,
            with(|a| a.mounts = vec![mount("/mnt/test", "/dev/10-foo")]),
        ),
        ("environment", true, with(|a| a.add_env("key", "10-foo"))),
        (
            "arguments",
            true,
            with(|a| a.args = strings(&["echo", "updated", "argument", "list", "twice..."])),
        ),
        (
            "hooks",
            false,
            with(|a| {
                a.hooks = MessageField::some(Hooks {
                    prestart: vec![hook("/bin/00-bar"), hook("/bin/10-foo")],
                    ..Default::default()
                })
            }),
        ),
        (
            "device",
            true,
            linux_adjust(|l| l.devices = vec![device("/dev/test", 110)]),
        ),
        (
            "linux net device",
            true,
            linux_adjust(|l| {
                l.net_devices = map(&[
                    ("-hostIf", LinuxNetDevice::default()),
                    (
                        "hostIf",
                        LinuxNetDevice {
                            name: "containerIf".to_string(),
                            ..Default::default()
                        },
                    ),
                ])
            }),
        ),
        (
            "rdt",
            true,
            linux_adjust(|l| l.rdt = MessageField::some(rdt("foo"))),
        ),
    ];
    for (subject, remove, expected) in cases {
        let adjust = upstream_two_plugins(subject, remove).expect(subject);
        assert_eq!(adjust, expected, "subject {subject}");
    }
}

// ---------------------------------------------------------------------------
// Upstream's cases: "Plugin container updates during creation"
// ---------------------------------------------------------------------------

/// What upstream's mock plugin asks for `ctr_id`: the same values as its
/// adjustments.
fn upstream_update(subject: &str, plugin: &str, ctr_id: &str) -> ContainerUpdate {
    update_with(
        ctr_id,
        upstream_updated(subject, plugin, LinuxResources::default()),
    )
}

/// The resources upstream expects a single plugin's update to produce on
/// top of `base`.
fn upstream_updated(subject: &str, plugin: &str, base: LinuxResources) -> LinuxResources {
    let mut expected = base;
    match subject {
        "resources/cpu" => expected.cpu = MessageField::some(plugin_cpu()),
        "resources/memory" => expected.memory = MessageField::some(plugin_memory()),
        "resources/classes" => {
            expected.rdt_class = string(plugin);
            expected.blockio_class = string(plugin);
        }
        "resources/hugepagelimits" => expected.hugepage_limits = hugepages(),
        "resources/unified" => expected.unified = unified(),
        other => panic!("unknown subject {other}"),
    }
    expected
}

fn update_with(ctr_id: &str, resources: LinuxResources) -> ContainerUpdate {
    ContainerUpdate {
        container_id: ctr_id.to_string(),
        linux: MessageField::some(LinuxContainerUpdate {
            resources: MessageField::some(resources),
            ..Default::default()
        }),
        ..Default::default()
    }
}

const UPDATE_SUBJECTS: [&str; 5] = [
    "resources/cpu",
    "resources/memory",
    "resources/classes",
    "resources/hugepagelimits",
    "resources/unified",
];

#[test]
fn upstream_updates_during_creation() {
    for subject in UPDATE_SUBJECTS {
        // One plugin, then only 10-foo of two: the update of ctr0 passes.
        for plugins in [&["00-test"][..], &["00-bar", "10-foo"][..]] {
            let updater = *plugins.last().unwrap_or(&"00-test");
            let mut req = create_request(container("ctr1"));
            let mut result = CreateResult::new(&mut req);
            for plugin in plugins {
                let update = if *plugin == updater {
                    vec![upstream_update(subject, plugin, "ctr0")]
                } else {
                    vec![]
                };
                result.apply(&mut req, plugin, updating(update)).unwrap();
            }
            let reply = result.into_response();
            assert_eq!(reply.update.len(), 1, "subject {subject}");
            let want = update_with(
                "ctr0",
                upstream_updated(subject, updater, LinuxResources::default()),
            );
            assert_eq!(strip_update(reply.update[0].clone()), want, "{subject}");
        }

        // Both plugins update the same fields of ctr0: a conflict.
        let mut req = create_request(container("ctr1"));
        let mut result = CreateResult::new(&mut req);
        let bar = updating(vec![upstream_update(subject, "00-bar", "ctr0")]);
        let foo = updating(vec![upstream_update(subject, "10-foo", "ctr0")]);
        result.apply(&mut req, "00-bar", bar).unwrap();
        let err = result.apply(&mut req, "10-foo", foo).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(r#"plugins "10-foo" and "00-bar" both tried to set "#),
            "{subject}: {err}"
        );
    }
}

// ---------------------------------------------------------------------------
// Upstream's cases: "Solicited container updates by plugins"
// ---------------------------------------------------------------------------

/// The resources of upstream's UpdateContainer request.
fn upstream_request_resources() -> LinuxResources {
    LinuxResources {
        cpu: MessageField::some(LinuxCPU {
            shares: uint64(999u64),
            quota: int64(888),
            period: uint64(777u64),
            realtime_runtime: int64(666),
            realtime_period: uint64(555u64),
            cpus: "444".to_string(),
            mems: "333".to_string(),
            ..Default::default()
        }),
        memory: MessageField::some(LinuxMemory {
            limit: int64(9999),
            reservation: int64(8888),
            swap: int64(7777),
            kernel: int64(6666),
            kernel_tcp: int64(5555),
            swappiness: uint64(444u64),
            disable_oom_killer: boolean(false),
            use_hierarchy: boolean(false),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn update_request(ctr_id: &str, resources: LinuxResources) -> UpdateContainerRequest {
    UpdateContainerRequest {
        container: MessageField::some(container(ctr_id)),
        linux_resources: MessageField::some(resources),
        ..Default::default()
    }
}

fn update_reply(update: Vec<ContainerUpdate>) -> UpdateContainerResponse {
    UpdateContainerResponse {
        update,
        ..Default::default()
    }
}

#[test]
fn upstream_solicited_updates() {
    for subject in UPDATE_SUBJECTS {
        for plugins in [&["00-test"][..], &["00-bar", "10-foo"][..]] {
            let updater = *plugins.last().unwrap_or(&"00-test");
            let mut req = update_request("ctr0", upstream_request_resources());
            let mut result = UpdateResult::new(&mut req);
            for plugin in plugins {
                let update = if *plugin == updater {
                    vec![upstream_update(subject, plugin, "ctr0")]
                } else {
                    vec![]
                };
                result
                    .apply(&mut req, plugin, update_reply(update))
                    .unwrap();
            }
            let reply = result.into_response();
            assert_eq!(reply.update.len(), 1, "subject {subject}");
            let want = update_with(
                "ctr0",
                upstream_updated(subject, updater, upstream_request_resources()),
            );
            assert_eq!(strip_update(reply.update[0].clone()), want, "{subject}");
        }

        let mut req = update_request("ctr0", upstream_request_resources());
        let mut result = UpdateResult::new(&mut req);
        let bar = update_reply(vec![upstream_update(subject, "00-bar", "ctr0")]);
        let foo = update_reply(vec![upstream_update(subject, "10-foo", "ctr0")]);
        result.apply(&mut req, "00-bar", bar).unwrap();
        let err = result.apply(&mut req, "10-foo", foo).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(r#"plugins "10-foo" and "00-bar" both tried to set "#),
            "{subject}: {err}"
        );
    }
}

// ---------------------------------------------------------------------------
// Initialization and application order
// ---------------------------------------------------------------------------

#[test]
fn create_normalizes_the_container_and_preinitializes_the_reply() {
    let mut req = CreateContainerRequest::default();
    let result = CreateResult::new(&mut req);
    let ctr = req.container.as_ref().expect("container filled in");
    assert!(ctr.hooks.is_some());
    let resources = ctr.linux.resources.as_ref().expect("resources filled in");
    assert!(resources.memory.is_some() && resources.cpu.is_some());

    let reply = result.into_response();
    assert_eq!(reply.adjust.as_ref(), Some(&empty_adjustment()));
    let adjust = reply.adjust.as_ref().unwrap();
    assert!(adjust.hooks.is_some());
    let resources = adjust.linux.resources.as_ref().expect("reply resources");
    assert!(resources.memory.is_some() && resources.cpu.is_some());
    assert!(reply.update.is_empty() && reply.evict.is_empty());
}

#[test]
fn update_normalizes_the_request_resources() {
    let mut req = UpdateContainerRequest::default();
    UpdateResult::new(&mut req);
    let resources = req.linux_resources.as_ref().expect("resources filled in");
    assert!(resources.memory.is_some() && resources.cpu.is_some());
}

#[test]
fn the_first_error_stops_the_merge() {
    let mut req = create_request(container("c"));
    let mut result = CreateResult::new(&mut req);
    let first = with(|a| a.add_annotation("k", "1"));
    result.apply(&mut req, "00-a", adjusting(first)).unwrap();
    // Annotations come before mounts, so the mount is never merged.
    let second = with(|a| {
        a.add_annotation("k", "2");
        a.add_mount(mount("/m", "/src"));
    });
    let err = result
        .apply(&mut req, "10-b", adjusting(second))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"plugins "10-b" and "00-a" both tried to set Annotations k"#
    );
    assert_eq!(
        err.as_conflict().map(|c| c.field()),
        Some(Field::Annotations)
    );
    assert!(req.container.mounts.is_empty());
    assert!(result.response().adjust.mounts.is_empty());
}

#[test]
fn evictions_are_ignored() {
    let mut req = create_request(container("c"));
    let mut result = CreateResult::new(&mut req);
    let rpl = CreateContainerResponse {
        evict: vec![nri_api::ContainerEviction {
            container_id: "victim".to_string(),
            reason: "why not".to_string(),
            ..Default::default()
        }],
        ..Default::default()
    };
    result.apply(&mut req, "00-a", rpl).unwrap();
    assert!(result.into_response().evict.is_empty());

    let mut req = update_request("c", LinuxResources::default());
    let mut result = UpdateResult::new(&mut req);
    let rpl = UpdateContainerResponse {
        evict: vec![Default::default()],
        ..Default::default()
    };
    result.apply(&mut req, "00-a", rpl).unwrap();
    assert!(result.into_response().evict.is_empty());
}

// ---------------------------------------------------------------------------
// 4.2, row by row
// ---------------------------------------------------------------------------

#[test]
fn annotations_set_and_mirror() {
    let (adjust, ctr) = adjusted(container("c"), |a| a.add_annotation("k", "v"));
    assert_eq!(adjust.annotations, map(&[("k", "v".to_string())]));
    assert_eq!(ctr.annotations, map(&[("k", "v".to_string())]));
}

#[test]
fn annotation_removal_alone_keeps_everything_but_adds_a_marker() {
    let mut ctr = container("c");
    ctr.annotations = map(&[("spec", "x".to_string())]);
    let (adjust, ctr) = merged(
        ctr,
        vec![
            ("00-a", adjusting(with(|a| a.add_annotation("k", "v")))),
            (
                "10-b",
                adjusting(with(|a| {
                    a.remove_annotation("k");
                    a.remove_annotation("spec");
                })),
            ),
        ],
    )
    .unwrap();
    // QUIRK: the reply holds both `k` and `-k`; the container keeps both.
    assert_eq!(
        adjust.annotations,
        map(&[
            ("k", "v".to_string()),
            ("-k", String::new()),
            ("-spec", String::new())
        ])
    );
    assert_eq!(
        ctr.annotations,
        map(&[("k", "v".to_string()), ("spec", "x".to_string())])
    );
}

#[test]
fn annotation_removal_alone_does_not_release_ownership() {
    let answers = vec![
        ("00-a", adjusting(with(|a| a.add_annotation("k", "v")))),
        ("10-b", adjusting(with(|a| a.remove_annotation("k")))),
        ("20-c", adjusting(with(|a| a.add_annotation("k", "w")))),
    ];
    assert_eq!(
        conflict(merged(container("c"), answers)),
        r#"plugins "20-c" and "00-a" both tried to set Annotations k"#
    );
}

#[test]
fn remove_then_set_overrides_and_deletes_from_the_container() {
    let mut req = create_request(container("c"));
    let mut result = CreateResult::new(&mut req);
    let set = |v: &str| {
        let v = v.to_string();
        adjusting(with(move |a| a.add_annotation("k", v)))
    };
    result.apply(&mut req, "00-a", set("1")).unwrap();
    let over = with(|a| {
        a.remove_annotation("k");
        a.add_annotation("k", "2");
    });
    result.apply(&mut req, "10-b", adjusting(over)).unwrap();
    assert_eq!(
        result.owners().compound_owner("c", Field::Annotations, "k"),
        Some("10-b")
    );
    assert_eq!(req.container.annotations["k"], "2");
    // Clear-by-other then conflict: a third plugin now conflicts with 10-b.
    let err = result.apply(&mut req, "20-c", set("3")).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"plugins "20-c" and "10-b" both tried to set Annotations k"#
    );
}

#[test]
fn a_plugin_conflicts_with_itself() {
    let cases: Vec<(ContainerAdjustment, &str)> = vec![
        (
            with(|a| {
                a.add_mount(mount("/x", "/a"));
                a.add_mount(mount("/x", "/b"));
            }),
            r#"plugins "00-a" and "00-a" both tried to set Mounts /x"#,
        ),
        (
            with(|a| {
                a.add_env("E", "1");
                a.add_env("E", "2");
            }),
            r#"plugins "00-a" and "00-a" both tried to set Env E"#,
        ),
        (
            with(|a| {
                a.add_device(device("/dev/d", 1));
                a.add_device(device("/dev/d", 2));
            }),
            r#"plugins "00-a" and "00-a" both tried to set Devices /dev/d"#,
        ),
        (
            with(|a| {
                a.add_rlimit("nofile", 1, 1);
                a.add_rlimit("nofile", 2, 2);
            }),
            r#"plugins "00-a" and "00-a" both tried to set Rlimits nofile"#,
        ),
        (
            with(|a| {
                a.add_cdi_device(CDIDevice {
                    name: "v.com/d=0".to_string(),
                    ..Default::default()
                });
                a.add_cdi_device(CDIDevice {
                    name: "v.com/d=0".to_string(),
                    ..Default::default()
                });
            }),
            r#"plugins "00-a" and "00-a" both tried to set CdiDevices v.com/d=0"#,
        ),
        (
            with(|a| {
                a.add_linux_hugepage_limit("2M", 1);
                a.add_linux_hugepage_limit("2M", 2);
            }),
            r#"plugins "00-a" and "00-a" both tried to set HugepageLimits 2M"#,
        ),
        (
            // Removing and re-adding a namespace claims its type twice.
            with(|a| {
                a.remove_namespace("net");
                a.add_or_replace_namespace(namespace("net", "/x"));
            }),
            r#"plugins "00-a" and "00-a" both tried to set Namespace net"#,
        ),
    ];
    for (adjust, want) in cases {
        assert_eq!(
            conflict(merged(container("c"), vec![("00-a", adjusting(adjust))])),
            want
        );
    }
}

#[test]
fn mounts_replace_by_destination() {
    let mut ctr = container("c");
    ctr.mounts = vec![
        mount("/keep", "/k"),
        mount("/mod", "/old"),
        mount("/gone", "/g"),
    ];
    let (adjust, ctr) = adjusted(ctr, |a| {
        a.add_mount(mount("/mod", "/new"));
        a.remove_mount("/gone");
        a.add_mount(mount("/added", "/n"));
    });
    assert_eq!(
        ctr.mounts,
        [
            mount("/keep", "/k"),
            mount("/mod", "/new"),
            mount("/added", "/n")
        ]
    );
    // Additions first, then the removal marker of a destination not re-added.
    assert_eq!(
        adjust.mounts,
        [
            mount("/mod", "/new"),
            mount("/added", "/n"),
            mount("-/gone", "")
        ]
    );
}

#[test]
fn mount_removal_drops_an_earlier_plugins_mount_and_its_owner() {
    let add = |source: &'static str| adjusting(with(move |a| a.add_mount(mount("/x", source))));
    let (adjust, ctr) = merged(
        container("c"),
        vec![
            ("00-a", add("/a")),
            ("10-b", adjusting(with(|a| a.remove_mount("/x")))),
        ],
    )
    .unwrap();
    assert_eq!(adjust.mounts, [mount("-/x", "")]);
    assert!(ctr.mounts.is_empty());

    // 10-b cleared /x, so a later claim conflicts with 10-b, not with 00-a.
    let answers = vec![
        ("00-a", add("/a")),
        ("10-b", adjusting(with(|a| a.remove_mount("/x")))),
        ("20-c", add("/c")),
    ];
    assert_eq!(
        conflict(merged(container("c"), answers)),
        r#"plugins "20-c" and "10-b" both tried to set Mounts /x"#
    );
}

#[test]
fn an_earlier_mount_marker_survives_a_later_re_add() {
    let mut ctr = container("c");
    ctr.mounts = vec![mount("/x", "/spec")];
    let (adjust, ctr) = merged(
        ctr,
        vec![
            ("00-a", adjusting(with(|a| a.remove_mount("/x")))),
            ("10-b", adjusting(with(|a| a.add_mount(mount("/x", "/b"))))),
        ],
    )
    .unwrap();
    assert_eq!(adjust.mounts, [mount("-/x", ""), mount("/x", "/b")]);
    assert_eq!(ctr.mounts, [mount("/x", "/b")]);
}

#[test]
fn duplicate_mount_removal_markers_collapse() {
    let (adjust, _) = adjusted(container("c"), |a| {
        a.remove_mount("/y");
        a.remove_mount("/x");
        a.remove_mount("/y");
    });
    assert_eq!(adjust.mounts, [mount("-/y", ""), mount("-/x", "")]);
}

#[test]
fn env_replaces_by_name_and_never_reports_removals() {
    let mut ctr = container("c");
    ctr.env = strings(&["KEEP=1", "MOD=old", "GONE=x", "BARE"]);
    let (adjust, ctr) = adjusted(ctr, |a| {
        a.add_env("MOD", "new");
        a.remove_env("GONE");
        a.remove_env("BARE");
        a.add_env("NEW", "a=b");
    });
    assert_eq!(ctr.env, strings(&["KEEP=1", "MOD=new", "NEW=a=b"]));
    // QUIRK: the removals never reach the reply.
    let names: Vec<_> = adjust.env.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(names, ["MOD", "NEW"]);
}

#[test]
fn keyed_merge_is_the_same_with_few_and_many_keys() {
    // A handful of keys is compared directly and more go through a map;
    // the outcome must not depend on which.
    for n in [2, 8, 9, 30] {
        let mut ctr = container("c");
        ctr.env = (0..n).map(|i| format!("K{i}=old")).collect();
        ctr.env.push("STAY=1".to_string());
        let (adjust, ctr) = adjusted(ctr, |a| {
            for i in 0..n {
                let key = format!("K{i}");
                match i % 3 {
                    0 => a.add_env(&key, "new"),
                    1 => a.remove_env(&key),
                    _ => {
                        a.remove_env(&key);
                        a.add_env(&key, "new");
                    }
                }
            }
        });
        let kept: Vec<String> = (0..n)
            .filter(|i| i % 3 != 1)
            .map(|i| format!("K{i}"))
            .collect();
        let mut want = vec!["STAY=1".to_string()];
        want.extend(kept.iter().map(|k| format!("{k}=new")));
        assert_eq!(ctr.env, want, "{n} keys");
        let names: Vec<_> = adjust.env.iter().map(|e| e.key.clone()).collect();
        assert_eq!(names, kept, "{n} keys");
    }
}

#[test]
fn env_removal_drops_an_earlier_plugins_variable() {
    let (adjust, ctr) = merged(
        container("c"),
        vec![
            ("00-a", adjusting(with(|a| a.add_env("E", "1")))),
            ("10-b", adjusting(with(|a| a.remove_env("E")))),
        ],
    )
    .unwrap();
    assert!(adjust.env.is_empty());
    assert!(ctr.env.is_empty());
}

#[test]
fn args_replace_and_chain() {
    let mut ctr = container("c");
    ctr.args = strings(&["orig"]);
    let (adjust, ctr) = adjusted(ctr, |a| a.set_args(["a", "b"]));
    assert_eq!(adjust.args, ["a", "b"]);
    assert_eq!(ctr.args, ["a", "b"]);

    // 10-foo appends to the args 00-bar produced, as it sees them.
    let bar = |_: &Container| adjusting(with(|a| a.set_args(["echo", "bar"])));
    let foo = |ctr: &Container| {
        let mut args = ctr.args.clone();
        args.push("foo".to_string());
        adjusting(with(|a| a.update_args(args)))
    };
    let mut req = create_request(container("c"));
    let result = create(&mut req, &[("00-bar", &bar), ("10-foo", &foo)]).unwrap();
    assert_eq!(req.container.args, ["echo", "bar", "foo"]);
    assert_eq!(result.response().adjust.args, ["echo", "bar", "foo"]);
    assert_eq!(
        result.owners().simple_owner("c", Field::Args),
        Some("10-foo")
    );
}

#[test]
fn a_lone_empty_argument_empties_the_command_line() {
    let mut ctr = container("c");
    ctr.args = strings(&["orig"]);
    let (adjust, ctr) = adjusted(ctr, |a| a.args = strings(&[""]));
    assert!(adjust.args.is_empty());
    assert!(ctr.args.is_empty());
}

#[test]
fn hooks_accumulate_in_plugin_order() {
    let hooks = |path: &'static str| {
        adjusting(with(move |a| {
            a.add_hooks(Hooks {
                prestart: vec![hook(path)],
                poststop: vec![hook(path)],
                ..Default::default()
            })
        }))
    };
    let mut ctr = container("c");
    ctr.hooks = MessageField::some(Hooks {
        prestart: vec![hook("/spec")],
        ..Default::default()
    });
    let mut req = create_request(ctr);
    let mut result = CreateResult::new(&mut req);
    for (plugin, path) in [("00-a", "/a"), ("10-b", "/b"), ("20-c", "/c")] {
        result.apply(&mut req, plugin, hooks(path)).unwrap();
    }
    // An empty hooks message claims nothing.
    let empty = adjusting(with(|a| a.hooks = MessageField::some(Hooks::default())));
    result.apply(&mut req, "30-d", empty).unwrap();

    assert_eq!(result.owners().hooks_owner("c"), Some("00-a,10-b,20-c"));
    let reply = result.into_response();
    assert_eq!(
        reply.adjust.hooks.prestart,
        [hook("/a"), hook("/b"), hook("/c")]
    );
    assert_eq!(
        reply.adjust.hooks.poststop,
        [hook("/a"), hook("/b"), hook("/c")]
    );
    assert_eq!(
        req.container.hooks.prestart,
        [hook("/spec"), hook("/a"), hook("/b"), hook("/c")]
    );
}

#[test]
fn devices_replace_by_path_and_never_report_removals() {
    let mut ctr = container("c");
    ctr.linux = MessageField::some(LinuxContainer {
        devices: vec![device("/dev/keep", 1), device("/dev/gone", 2)],
        ..Default::default()
    });
    let (adjust, ctr) = adjusted(ctr, |a| {
        a.remove_device("/dev/gone");
        a.add_device(device("/dev/new", 3));
    });
    assert_eq!(
        ctr.linux.devices,
        [device("/dev/keep", 1), device("/dev/new", 3)]
    );
    // QUIRK: no removal marker for the device taken from the spec.
    assert_eq!(adjust.linux.devices, [device("/dev/new", 3)]);
}

#[test]
fn memory_and_cpu_merge_per_field() {
    let mut ctr = container("c");
    ctr.linux = MessageField::some(LinuxContainer {
        resources: MessageField::some(LinuxResources {
            memory: MessageField::some(LinuxMemory {
                limit: int64(1),
                swap: int64(2),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let (adjust, ctr) = merged(
        ctr,
        vec![
            ("00-a", adjusting(with(|a| a.set_linux_memory_limit(10)))),
            (
                "10-b",
                adjusting(with(|a| {
                    a.set_linux_memory_reservation(20);
                    a.set_linux_cpu_shares(30);
                    // Empty cpusets count as unset and claim nothing.
                    a.set_linux_cpuset_cpus("");
                })),
            ),
            ("20-c", adjusting(with(|a| a.set_linux_cpuset_cpus("0-3")))),
        ],
    )
    .unwrap();
    let memory = &ctr.linux.resources.memory;
    assert_eq!(memory.limit.value(), Some(10));
    assert_eq!(memory.swap.value(), Some(2));
    assert_eq!(memory.reservation.value(), Some(20));
    assert_eq!(ctr.linux.resources.cpu.cpus, "0-3");
    let reply = &adjust.linux.resources;
    assert_eq!(reply.memory.limit.value(), Some(10));
    assert_eq!(reply.memory.swap.value(), None);
    assert_eq!(reply.cpu.shares.value(), Some(30));
    assert_eq!(reply.cpu.cpus, "0-3");

    assert_eq!(
        clash(
            adjusting(with(|a| a.set_linux_memory_swap(1))),
            adjusting(with(|a| a.set_linux_memory_swap(2)))
        ),
        "MemSwapLimit "
    );
}

#[test]
fn hugepages_append_and_conflict_per_page_size() {
    let pages = |size: &'static str| adjusting(with(move |a| a.add_linux_hugepage_limit(size, 1)));
    let (adjust, ctr) = merged(
        container("c"),
        vec![("00-a", pages("2M")), ("10-b", pages("1G"))],
    )
    .unwrap();
    let sizes = |l: &[HugepageLimit]| l.iter().map(|h| h.page_size.clone()).collect::<Vec<_>>();
    assert_eq!(sizes(&adjust.linux.resources.hugepage_limits), ["2M", "1G"]);
    assert_eq!(sizes(&ctr.linux.resources.hugepage_limits), ["2M", "1G"]);
    assert_eq!(clash(pages("2M"), pages("2M")), "HugepageLimits 2M");
}

#[test]
fn cgroup_device_rules_append_without_ownership() {
    let rule = |access: &'static str| {
        resources_adjust(LinuxResources {
            devices: vec![LinuxDeviceCgroup {
                allow: true,
                access: access.to_string(),
                ..Default::default()
            }],
            ..Default::default()
        })
    };
    let (adjust, ctr) = merged(
        container("c"),
        vec![
            ("00-a", adjusting(rule("r"))),
            ("10-b", adjusting(rule("r"))),
        ],
    )
    .unwrap();
    assert_eq!(adjust.linux.resources.devices.len(), 2);
    assert_eq!(ctr.linux.resources.devices.len(), 2);
}

#[test]
fn unified_merges_per_key() {
    let unified =
        |k: &'static str, v: &'static str| adjusting(with(move |a| a.add_linux_unified(k, v)));
    let (adjust, ctr) = merged(
        container("c"),
        vec![("00-a", unified("a", "1")), ("10-b", unified("b", "2"))],
    )
    .unwrap();
    let want = map(&[("a", "1".to_string()), ("b", "2".to_string())]);
    assert_eq!(adjust.linux.resources.unified, want);
    assert_eq!(ctr.linux.resources.unified, want);
    assert_eq!(
        clash(unified("a", "1"), unified("a", "2")),
        "CgroupsUnified a"
    );
}

#[test]
fn classes_are_simple_fields() {
    let (adjust, ctr) = merged(
        container("c"),
        vec![
            ("00-a", adjusting(with(|a| a.set_linux_blockio_class("io")))),
            ("10-b", adjusting(with(|a| a.set_linux_rdt_class("gold")))),
        ],
    )
    .unwrap();
    assert_eq!(
        adjust.linux.resources.blockio_class.value().as_deref(),
        Some("io")
    );
    assert_eq!(
        ctr.linux.resources.rdt_class.value().as_deref(),
        Some("gold")
    );
    assert_eq!(
        clash(
            adjusting(with(|a| a.set_linux_rdt_class("x"))),
            adjusting(with(|a| a.set_linux_rdt_class("y")))
        ),
        "RdtClass "
    );
}

#[test]
fn pids_limit_is_set_in_adjustments() {
    let (adjust, ctr) = adjusted(container("c"), |a| a.set_linux_pid_limits(42));
    assert_eq!(adjust.linux.resources.pids.limit, 42);
    assert_eq!(ctr.linux.resources.pids.limit, 42);
    assert_eq!(
        clash(
            adjusting(with(|a| a.set_linux_pid_limits(1))),
            adjusting(with(|a| a.set_linux_pid_limits(2)))
        ),
        "PidsLimit "
    );
}

#[test]
fn cgroups_path_is_set_only_when_not_empty() {
    let (adjust, ctr) = merged(
        container("c"),
        vec![
            ("00-a", adjusting(with(|a| a.set_linux_cgroups_path("/a")))),
            // An empty path is "unchanged" and claims nothing.
            ("10-b", adjusting(with(|a| a.set_linux_cgroups_path("")))),
        ],
    )
    .unwrap();
    assert_eq!(adjust.linux.cgroups_path, "/a");
    assert_eq!(ctr.linux.cgroups_path, "/a");
    assert_eq!(
        clash(
            adjusting(with(|a| a.set_linux_cgroups_path("/a"))),
            adjusting(with(|a| a.set_linux_cgroups_path("/b")))
        ),
        "CgroupsPath "
    );
}

#[test]
fn oom_score_adj_is_set_when_present_even_if_zero() {
    let (adjust, ctr) = merged(
        container("c"),
        vec![(
            "00-a",
            adjusting(with(|a| a.set_linux_oom_score_adj(Some(0)))),
        )],
    )
    .unwrap();
    assert_eq!(adjust.linux.oom_score_adj.value(), Some(0));
    assert_eq!(ctr.linux.oom_score_adj.value(), Some(0));
    let oom = |v: i64| adjusting(with(move |a| a.set_linux_oom_score_adj(Some(v))));
    assert_eq!(clash(oom(1), oom(2)), "OomScoreAdj ");
}

#[test]
fn whole_messages_replace_and_mirror() {
    let io = LinuxIOPriority {
        class: IOPrioClass::IOPRIO_CLASS_BE.into(),
        priority: 3,
        ..Default::default()
    };
    let (adjust, ctr) = adjusted(container("c"), |a| {
        a.set_linux_io_priority(io.clone());
        a.set_linux_seccomp_policy(upstream_seccomp());
        a.set_linux_scheduler(upstream_scheduler());
    });
    assert_eq!(adjust.linux.io_priority.as_ref(), Some(&io));
    assert_eq!(ctr.linux.io_priority.as_ref(), Some(&io));
    assert_eq!(ctr.linux.seccomp_policy.as_ref(), Some(&upstream_seccomp()));
    assert_eq!(
        adjust.linux.seccomp_policy.as_ref(),
        Some(&upstream_seccomp())
    );
    assert_eq!(ctr.linux.scheduler.as_ref(), Some(&upstream_scheduler()));
    assert_eq!(adjust.linux.scheduler.as_ref(), Some(&upstream_scheduler()));

    let seccomp = || adjusting(with(|a| a.set_linux_seccomp_policy(upstream_seccomp())));
    assert_eq!(clash(seccomp(), seccomp()), "SeccompPolicy ");
}

#[test]
fn namespaces_keep_their_order() {
    let mut ctr = container("c");
    ctr.linux = MessageField::some(LinuxContainer {
        namespaces: vec![
            namespace("pid", "/p"),
            namespace("net", "/n"),
            namespace("ipc", "/i"),
            namespace("net", "/dup"),
        ],
        ..Default::default()
    });
    let (adjust, ctr) = adjusted(ctr, |a| {
        a.add_or_replace_namespace(namespace("ipc", "/new-ipc"));
        a.remove_namespace("pid");
        a.add_or_replace_namespace(namespace("cgroup", "/cg"));
    });
    // Fixed: replaced in place, new ones appended; duplicates collapse (the
    // last one wins) as in upstream's map.
    assert_eq!(
        ctr.linux.namespaces,
        [
            namespace("net", "/dup"),
            namespace("ipc", "/new-ipc"),
            namespace("cgroup", "/cg"),
        ]
    );
    // Every entry reaches the reply, removal markers included.
    assert_eq!(
        adjust.linux.namespaces,
        [
            namespace("ipc", "/new-ipc"),
            namespace("-pid", ""),
            namespace("cgroup", "/cg"),
        ]
    );
}

#[test]
fn namespaces_conflict_per_type_even_for_removals() {
    let add = with(|a| a.add_or_replace_namespace(namespace("net", "/a")));
    let remove = with(|a| a.remove_namespace("net"));
    assert_eq!(clash(adjusting(add), adjusting(remove)), "Namespace net");
}

#[test]
fn sysctl_remove_then_set_and_remove_only() {
    let mut ctr = container("c");
    ctr.linux = MessageField::some(LinuxContainer {
        sysctl: map(&[("a", "0".to_string()), ("b", "0".to_string())]),
        ..Default::default()
    });
    let (adjust, ctr) = merged(
        ctr,
        vec![
            ("00-x", adjusting(with(|a| a.set_linux_sysctl("a", "1")))),
            (
                "10-y",
                adjusting(with(|a| {
                    a.set_linux_sysctl("-a", "");
                    a.set_linux_sysctl("a", "2");
                    a.set_linux_sysctl("-b", "");
                })),
            ),
        ],
    )
    .unwrap();
    // The remove-only marker lands in the sysctls, as since upstream
    // v0.12.3, and `b` stays in the container.
    assert_eq!(
        adjust.linux.sysctl,
        map(&[
            ("a", "2".to_string()),
            ("-a", String::new()),
            ("-b", String::new())
        ])
    );
    assert!(adjust.annotations.is_empty(), "{:?}", adjust.annotations);
    assert_eq!(
        ctr.linux.sysctl,
        map(&[("a", "2".to_string()), ("b", "0".to_string())])
    );
}

#[test]
fn sysctl_conflicts_per_key() {
    let set = |v: &'static str| adjusting(with(move |a| a.set_linux_sysctl("k", v)));
    assert_eq!(clash(set("1"), set("2")), "Sysctl k");
}

#[test]
fn net_devices_mirror_and_mark_removals() {
    let dev = |name: &str| LinuxNetDevice {
        name: name.to_string(),
        ..Default::default()
    };
    let (adjust, ctr) = merged(
        container("c"),
        vec![
            (
                "00-a",
                adjusting(with(|a| a.add_linux_net_device("eth1", dev("in1")))),
            ),
            (
                "10-b",
                adjusting(with(|a| a.remove_linux_net_device("eth9"))),
            ),
        ],
    )
    .unwrap();
    assert_eq!(
        adjust.linux.net_devices,
        map(&[("eth1", dev("in1")), ("-eth9", LinuxNetDevice::default())])
    );
    assert_eq!(ctr.linux.net_devices, map(&[("eth1", dev("in1"))]));
}

#[test]
fn rdt_goes_to_the_reply_only() {
    let (adjust, ctr) = adjusted(container("c"), |a| a.set_linux_rdt_clos_id("gold"));
    assert_eq!(adjust.linux.rdt.clos_id.value().as_deref(), Some("gold"));
    assert!(ctr.linux.rdt.is_none());
}

#[test]
fn rdt_removal_wipes_earlier_values() {
    let mut req = create_request(container("c"));
    let mut result = CreateResult::new(&mut req);
    let first = with(|a| {
        a.set_linux_rdt_clos_id("gold");
        a.set_linux_rdt_enable_monitoring(true);
    });
    result.apply(&mut req, "00-a", adjusting(first)).unwrap();
    let removal = with(|a| a.remove_linux_rdt());
    result.apply(&mut req, "10-b", adjusting(removal)).unwrap();
    assert_eq!(
        result.response().adjust.linux.rdt.as_ref(),
        Some(&LinuxRdt {
            remove: true,
            ..Default::default()
        })
    );
    // All three RDT fields now belong to the remover.
    for field in [
        Field::RdtClosID,
        Field::RdtSchemata,
        Field::RdtEnableMonitoring,
    ] {
        assert_eq!(result.owners().simple_owner("c", field), Some("-10-b"));
    }
    let again = with(|a| a.set_linux_rdt_schemata(["L3:0=f"]));
    let err = result
        .apply(&mut req, "20-c", adjusting(again))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"plugins "20-c" and "10-b" both tried to set RdtSchemata "#
    );
}

#[test]
fn any_linux_adjustment_creates_an_empty_rdt_in_the_reply() {
    let mut req = create_request(container("c"));
    let mut result = CreateResult::new(&mut req);
    assert!(result.response().adjust.linux.rdt.is_none());
    let linux = with(|a| a.set_linux_cgroups_path("/x"));
    result.apply(&mut req, "00-a", adjusting(linux)).unwrap();
    // QUIRK: upstream's nil check tests the wrong variable.
    assert_eq!(
        result.response().adjust.linux.rdt.as_ref(),
        Some(&LinuxRdt::default())
    );
}

#[test]
fn memory_policy_goes_to_the_reply_only() {
    let policy = || {
        adjusting(with(|a| {
            a.set_linux_memory_policy(MpolMode::MPOL_BIND, "0", &[])
        }))
    };
    let (adjust, _) = merged(container("c"), vec![("00-a", policy())]).unwrap();
    assert_eq!(adjust.linux.memory_policy.nodes, "0");
    assert_eq!(clash(policy(), policy()), "MemoryPolicy ");
}

#[test]
fn rlimits_append_and_mirror() {
    let (adjust, ctr) = merged(
        container("c"),
        vec![
            ("00-a", adjusting(with(|a| a.add_rlimit("nofile", 2, 1)))),
            ("10-b", adjusting(with(|a| a.add_rlimit("nproc", 4, 3)))),
        ],
    )
    .unwrap();
    let kinds = |l: &[POSIXRlimit]| l.iter().map(|r| r.type_.clone()).collect::<Vec<_>>();
    assert_eq!(kinds(&adjust.rlimits), ["nofile", "nproc"]);
    assert_eq!(kinds(&ctr.rlimits), ["nofile", "nproc"]);
}

#[test]
fn cdi_devices_go_to_the_reply_only_and_conflict_across_plugins() {
    let cdi = || {
        adjusting(with(|a| {
            a.add_cdi_device(CDIDevice {
                name: "v.com/gpu=0".to_string(),
                ..Default::default()
            })
        }))
    };
    let (adjust, ctr) = merged(container("c"), vec![("00-a", cdi())]).unwrap();
    assert_eq!(adjust.CDI_devices.len(), 1);
    assert!(ctr.CDI_devices.is_empty());
    assert_eq!(clash(cdi(), cdi()), "CdiDevices v.com/gpu=0");
}

// ---------------------------------------------------------------------------
// 4.3 and 4.5: container updates
// ---------------------------------------------------------------------------

#[test]
fn updating_the_created_container_fails() {
    let mut req = create_request(container("ctr1"));
    let mut result = CreateResult::new(&mut req);
    let update = updating(vec![update_of("ctr1", |u| u.set_linux_cpu_shares(1))]);
    let err = result.apply(&mut req, "00-a", update).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"plugin "00-a" asked update of "ctr1" during creation"#
    );
    assert!(err.as_conflict().is_none());
}

#[test]
fn the_during_creation_error_quotes_like_go() {
    let mut req = create_request(container("c\"1\n"));
    let mut result = CreateResult::new(&mut req);
    let err = result
        .apply(
            &mut req,
            "00-a",
            updating(vec![update_of("c\"1\n", |_| ())]),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"plugin "00-a" asked update of "c\"1\n" during creation"#
    );
}

#[test]
fn updates_merge_per_container_in_first_seen_order() {
    let mut req = create_request(container("new"));
    let mut result = CreateResult::new(&mut req);
    let first = updating(vec![
        update_of("b", |u| u.set_linux_cpu_shares(1)),
        update_of("a", |u| u.set_linux_memory_limit(2)),
    ]);
    result.apply(&mut req, "00-x", first).unwrap();
    let second = updating(vec![
        update_of("c", |u| u.set_linux_cpu_quota(3)),
        update_of("b", |u| u.add_linux_unified("k", "v")),
    ]);
    result.apply(&mut req, "10-y", second).unwrap();

    let reply = result.into_response();
    let ids: Vec<_> = reply
        .update
        .iter()
        .map(|u| u.container_id.as_str())
        .collect();
    assert_eq!(ids, ["b", "a", "c"]);
    let b = &reply.update[0].linux.resources;
    assert_eq!(b.cpu.shares.value(), Some(1));
    assert_eq!(b.unified["k"], "v");
}

#[test]
fn ignore_failure_is_anded_over_plugins() {
    let mut result = StopResult::new();
    let both = |ignore: bool| StopContainerResponse {
        update: vec![
            update_of("a", |u| {
                u.ignore_failure = ignore;
            }),
            update_of("b", |u| u.ignore_failure = true),
        ],
        ..Default::default()
    };
    result.apply("00-x", both(true)).unwrap();
    result.apply("10-y", both(false)).unwrap();
    let reply = result.into_response();
    assert!(!reply.update[0].ignore_failure);
    assert!(reply.update[1].ignore_failure);
}

#[test]
fn an_ignored_failure_keeps_claims_but_not_values() {
    let mut result = StopResult::new();
    let shares = |v: u64| update_of("a", move |u| u.set_linux_cpu_shares(v));
    let first = StopContainerResponse {
        update: vec![shares(1)],
        ..Default::default()
    };
    result.apply("00-x", first).unwrap();

    // 10-y's update conflicts on shares after claiming the limit: the
    // failure is swallowed, the limit stays claimed but is not applied.
    let mut failing = update_of("a", |u| {
        u.set_linux_memory_limit(5);
        u.set_linux_cpu_shares(2);
    });
    failing.ignore_failure = true;
    let second = StopContainerResponse {
        update: vec![failing, update_of("z", |_| ())],
        ..Default::default()
    };
    result.apply("10-y", second).unwrap();
    assert_eq!(
        result.owners().simple_owner("a", Field::MemLimit),
        Some("10-y")
    );

    let reply = result.into_response();
    let a = &reply.update[0].linux.resources;
    assert_eq!(a.cpu.shares.value(), Some(1));
    assert_eq!(a.memory.limit.value(), None);
    // An update without resources still leaves an (empty) entry.
    assert_eq!(reply.update[1].container_id, "z");
}

#[test]
fn an_unignored_failure_fails_even_if_an_earlier_update_ignored_failures() {
    let mut result = StopResult::new();
    let mut ignoring = update_of("a", |u| u.set_linux_cpu_shares(1));
    ignoring.ignore_failure = true;
    result
        .apply(
            "00-x",
            StopContainerResponse {
                update: vec![ignoring],
                ..Default::default()
            },
        )
        .unwrap();
    let err = result
        .apply(
            "10-y",
            StopContainerResponse {
                update: vec![update_of("a", |u| u.set_linux_cpu_shares(2))],
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"plugins "10-y" and "00-x" both tried to set CPUShares "#
    );
}

#[test]
fn update_reply_ends_with_the_target() {
    let mut req = update_request("t", LinuxResources::default());
    let mut result = UpdateResult::new(&mut req);
    let rpl = update_reply(vec![
        update_of("t", |u| u.set_linux_cpu_shares(7)),
        update_of("o1", |u| u.set_linux_cpu_shares(1)),
    ]);
    result.apply(&mut req, "00-a", rpl).unwrap();
    let rpl = update_reply(vec![update_of("o2", |u| u.set_linux_cpu_shares(2))]);
    result.apply(&mut req, "10-b", rpl).unwrap();

    let reply = result.into_response();
    let ids: Vec<_> = reply
        .update
        .iter()
        .map(|u| u.container_id.as_str())
        .collect();
    assert_eq!(ids, ["o1", "o2", "t"]);
}

#[test]
fn update_reply_ends_with_an_empty_element_when_nobody_updated_the_target() {
    let mut req = update_request("t", LinuxResources::default());
    let result = UpdateResult::new(&mut req);
    assert_eq!(result.into_response().update, [ContainerUpdate::default()]);

    let mut req = update_request("t", LinuxResources::default());
    let mut result = UpdateResult::new(&mut req);
    let rpl = update_reply(vec![update_of("o", |u| u.set_linux_cpu_shares(1))]);
    result.apply(&mut req, "00-a", rpl).unwrap();
    let reply = result.into_response();
    assert_eq!(reply.update.len(), 2);
    assert_eq!(reply.update[1], ContainerUpdate::default());
}

#[test]
fn target_updates_chain_through_the_request() {
    let mut req = update_request("t", upstream_request_resources());
    let mut result = UpdateResult::new(&mut req);
    let rpl = update_reply(vec![update_of("t", |u| u.set_linux_cpu_shares(1))]);
    result.apply(&mut req, "00-a", rpl).unwrap();
    // Later plugins see the merged resources in the request.
    assert_eq!(req.linux_resources.cpu.shares.value(), Some(1));
    assert_eq!(req.linux_resources.memory.limit.value(), Some(9999));
    let rpl = update_reply(vec![update_of("t", |u| u.set_linux_memory_limit(2))]);
    result.apply(&mut req, "10-b", rpl).unwrap();
    assert_eq!(
        result.owners().simple_owner("t", Field::MemLimit),
        Some("10-b")
    );

    let reply = result.into_response();
    let merged = &reply.update[0].linux.resources;
    assert_eq!(merged.cpu.shares.value(), Some(1));
    assert_eq!(merged.memory.limit.value(), Some(2));
    assert_eq!(
        merged.cpu.quota.value(),
        Some(888),
        "the request shows through"
    );
}

#[test]
fn a_failed_target_update_leaves_the_request_alone() {
    let mut req = update_request("t", LinuxResources::default());
    let mut result = UpdateResult::new(&mut req);
    let rpl = update_reply(vec![update_of("t", |u| u.set_linux_cpu_shares(1))]);
    result.apply(&mut req, "00-a", rpl).unwrap();
    let mut failing = update_of("t", |u| {
        u.set_linux_cpu_quota(5);
        u.set_linux_cpu_shares(2);
    });
    failing.ignore_failure = true;
    result
        .apply(&mut req, "10-b", update_reply(vec![failing]))
        .unwrap();
    assert_eq!(req.linux_resources.cpu.quota.value(), None);
    assert_eq!(req.linux_resources.cpu.shares.value(), Some(1));
}

#[test]
fn pids_in_updates_are_dropped() {
    let mut result = StopResult::new();
    let rpl = StopContainerResponse {
        update: vec![update_of("a", |u| u.set_linux_pid_limits(10))],
        ..Default::default()
    };
    result.apply("00-x", rpl).unwrap();
    assert_eq!(result.owners().simple_owner("a", Field::PidsLimit), None);
    assert!(result.into_response().update[0]
        .linux
        .resources
        .pids
        .is_none());
}

#[test]
fn pids_in_the_update_request_are_claimed_by_every_updating_plugin() {
    let resources = LinuxResources {
        pids: MessageField::some(LinuxPids {
            limit: 100,
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut req = update_request("t", resources);
    let mut result = UpdateResult::new(&mut req);
    let touch = |v: u64| update_reply(vec![update_of("t", move |u| u.set_linux_cpu_shares(v))]);
    // The plugins touch unrelated fields, yet the second one conflicts.
    result.apply(&mut req, "00-a", touch(1)).unwrap();
    let rpl = update_reply(vec![update_of("t", |u| u.set_linux_memory_limit(1))]);
    let err = result.apply(&mut req, "10-b", rpl).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"plugins "10-b" and "00-a" both tried to set PidsLimit "#
    );
}

#[test]
fn stop_has_no_target() {
    let mut result = StopResult::new();
    let rpl = StopContainerResponse {
        update: vec![update_of("a", |u| u.set_linux_cpu_shares(1))],
        ..Default::default()
    };
    result.apply("00-x", rpl).unwrap();
    let reply = result.into_response();
    assert_eq!(reply.update.len(), 1);
    assert_eq!(reply.update[0].container_id, "a");
}

// ---------------------------------------------------------------------------
// Untrusted input
// ---------------------------------------------------------------------------

#[test]
fn odd_replies_do_not_panic() {
    let mut req = CreateContainerRequest::default();
    let mut result = CreateResult::new(&mut req);
    let odd = with(|a| {
        a.args = strings(&[""]);
        a.annotations = map(&[("-", String::new()), ("", String::new())]);
        a.mounts = vec![mount("-", ""), mount("", "")];
        a.env = vec![KeyValue::default()];
        a.add_or_replace_namespace(namespace("-", ""));
        a.set_linux_sysctl("--x", "");
        a.set_linux_sysctl("-x", "");
        a.linux.mut_or_insert_default().rdt = MessageField::some(LinuxRdt {
            remove: true,
            ..Default::default()
        });
        a.linux.mut_or_insert_default().resources = MessageField::some(LinuxResources {
            hugepage_limits: vec![HugepageLimit::default()],
            pids: MessageField::some(LinuxPids::default()),
            ..Default::default()
        });
    });
    result.apply(&mut req, "", adjusting(odd)).unwrap();
    // Updates of a container without an ID, and without resources.
    let updates = updating(vec![
        ContainerUpdate::default(),
        update_with("x", LinuxResources::default()),
    ]);
    // The created container has no ID either, so this is "during creation".
    assert!(result.apply(&mut req, "", updates).is_err());

    // A request whose container the caller dropped between calls.
    req.container = MessageField::none();
    let more = with(|a| a.add_hooks(Hooks::default()));
    result.apply(&mut req, "00-a", adjusting(more)).unwrap();

    let mut req = UpdateContainerRequest::default();
    let mut result = UpdateResult::new(&mut req);
    req.linux_resources = MessageField::none();
    let rpl = update_reply(vec![update_of("", |u| u.set_linux_cpu_shares(1))]);
    result.apply(&mut req, "00-a", rpl).unwrap();
    assert_eq!(result.into_response().update.len(), 1);
}

/// `is_normalized` says exactly when `new` would change nothing: then the
/// runtime's own encoding of the request is what plugins may be sent.
#[test]
fn is_normalized_is_true_exactly_when_normalizing_adds_nothing() {
    let mut full = Container::default();
    normalize_container(&mut full);
    let mut no_cpu = full.clone();
    no_cpu
        .linux
        .mut_or_insert_default()
        .resources
        .mut_or_insert_default()
        .cpu = MessageField::none();
    let mut no_hooks = full.clone();
    no_hooks.hooks = MessageField::none();
    for container in [
        None,
        Some(Container::default()),
        Some(no_cpu),
        Some(no_hooks),
        Some(full),
    ] {
        let req = CreateContainerRequest {
            container: container.into(),
            ..Default::default()
        };
        let mut normalized = req.clone();
        CreateResult::new(&mut normalized);
        assert_eq!(
            CreateResult::is_normalized(&req),
            normalized == req,
            "{req:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// The request kept encoded
// ---------------------------------------------------------------------------

#[test]
fn an_encoded_request_is_normalized_exactly_when_normalizing_keeps_its_bytes() {
    use protobuf::Message;
    let with = |hooks: bool, memory: bool, cpu: bool, id: &str| {
        let mut ctr = Container {
            id: id.into(),
            name: "c".into(),
            ..Default::default()
        };
        if hooks {
            ctr.hooks.mut_or_insert_default();
        }
        let resources = ctr
            .linux
            .mut_or_insert_default()
            .resources
            .mut_or_insert_default();
        if memory {
            resources.memory.mut_or_insert_default();
        }
        if cpu {
            resources.cpu.mut_or_insert_default();
        }
        CreateContainerRequest {
            container: MessageField::some(ctr),
            ..Default::default()
        }
    };
    for hooks in [false, true] {
        for memory in [false, true] {
            for cpu in [false, true] {
                for id in ["", "ctr-1"] {
                    let req = with(hooks, memory, cpu, id);
                    let bytes = req.write_to_bytes().unwrap();
                    let mut normalized = req.clone();
                    CreateResult::new(&mut normalized);
                    let keeps = normalized.write_to_bytes().unwrap() == bytes;
                    let found = CreateResult::normalized_container_id(&bytes);
                    // An empty ID is absent from the bytes: decoded instead.
                    assert_eq!(
                        found.is_some(),
                        keeps && !id.is_empty(),
                        "{hooks} {memory} {cpu} {id:?}"
                    );
                    if let Some(found) = found {
                        assert_eq!(found, id);
                    }
                }
            }
        }
    }
    // A container field twice is merged by decoding: not one payload.
    let bytes = with(true, true, true, "x").write_to_bytes().unwrap();
    assert_eq!(
        CreateResult::normalized_container_id(&[bytes.clone(), bytes].concat()),
        None
    );
}
