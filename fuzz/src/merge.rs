//! The merge of plugin replies (`nri-runtime`'s `result/`, reached through
//! its `fuzzing` feature): CreateContainer, UpdateContainer and
//! StopContainer events, each with a few plugins' replies built by
//! `arbitrary` from the input, some of them decoded from raw protobuf.
//!
//! No panic, and the work is bounded: the merge counts its elementary
//! steps (one per element visited, one per comparison when sorting), and a
//! merge may take at most a fixed number of them per input byte, so work
//! that grows faster than the replies is reported.

use arbitrary::{Arbitrary, Unstructured};
use protobuf::{Message, MessageField};

use nri_api::*;
use nri_runtime::fuzzing::{merge_steps, CreateResult, StopResult, UpdateResult};

/// Steps a merge may take per input byte (plus [`BASE_STEPS`]). Linear
/// merging with sorting stays far below it; quadratic work exceeds it
/// once the replies have a few hundred entries.
const STEPS_PER_BYTE: u64 = 64;
const BASE_STEPS: u64 = 4096;

/// Keys come from small sets so that plugins often meet on one: that is
/// where claims conflict and removals apply.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(crate) struct Key(u8);

impl Key {
    fn name(self, prefix: &str) -> String {
        format!("{prefix}{}", self.0 % 6)
    }
}

#[derive(Arbitrary, Debug)]
pub(crate) enum Resource {
    MemoryLimit(i64),
    MemoryReservation(i64),
    MemorySwap(i64),
    Swappiness(u64),
    DisableOomKiller,
    CpuShares(u64),
    CpuQuota(i64),
    CpuPeriod(i64),
    Cpus(Key),
    Mems(Key),
    Pids(i64),
    Hugepage(Key, u64),
    BlockioClass(Key),
    RdtClass(Key),
    Unified(Key, Key),
}

fn set_resource(
    r: &Resource,
    adj: Option<&mut ContainerAdjustment>,
    upd: Option<&mut ContainerUpdate>,
) {
    macro_rules! on {
        ($($call:tt)*) => {{
            if let Some(a) = adj { a.$($call)*; }
            if let Some(u) = upd { u.$($call)*; }
        }};
    }
    match *r {
        Resource::MemoryLimit(v) => on!(set_linux_memory_limit(v)),
        Resource::MemoryReservation(v) => on!(set_linux_memory_reservation(v)),
        Resource::MemorySwap(v) => on!(set_linux_memory_swap(v)),
        Resource::Swappiness(v) => on!(set_linux_memory_swappiness(v)),
        Resource::DisableOomKiller => on!(set_linux_memory_disable_oom_killer()),
        Resource::CpuShares(v) => on!(set_linux_cpu_shares(v)),
        Resource::CpuQuota(v) => on!(set_linux_cpu_quota(v)),
        Resource::CpuPeriod(v) => on!(set_linux_cpu_period(v)),
        Resource::Cpus(k) => on!(set_linux_cpuset_cpus(k.name("0-"))),
        Resource::Mems(k) => on!(set_linux_cpuset_mems(k.name(""))),
        Resource::Pids(v) => on!(set_linux_pid_limits(v)),
        Resource::Hugepage(k, v) => on!(add_linux_hugepage_limit(k.name("hp"), v)),
        Resource::BlockioClass(k) => on!(set_linux_blockio_class(k.name("io"))),
        Resource::RdtClass(k) => on!(set_linux_rdt_class(k.name("rdt"))),
        Resource::Unified(k, v) => on!(add_linux_unified(k.name("u."), v.name("v"))),
    }
}

/// One thing a plugin's adjustment does.
#[derive(Arbitrary, Debug)]
pub(crate) enum Adjust {
    Annotation(Key, Key),
    RemoveAnnotation(Key),
    Mount(Key, Key),
    RemoveMount(Key),
    Env(Key, Key),
    RemoveEnv(Key),
    Args(Vec<Key>),
    UpdateArgs(Vec<Key>),
    Hook(u8, Key),
    Rlimit(Key, u64, u64),
    Device(Key, i64, i64),
    RemoveDevice(Key),
    Cdi(Key),
    Namespace(Key, Key),
    RemoveNamespace(Key),
    NetDevice(Key, Key),
    RemoveNetDevice(Key),
    Sysctl(Key, Key),
    CgroupsPath(Key),
    OomScoreAdj(Option<i64>),
    RdtClosId(Key),
    RdtSchemata(Vec<Key>),
    RdtMonitoring(bool),
    RemoveRdt,
    Resource(Resource),
}

impl Adjust {
    fn apply(&self, a: &mut ContainerAdjustment) {
        match self {
            Adjust::Annotation(k, v) => a.add_annotation(k.name("a"), v.name("v")),
            Adjust::RemoveAnnotation(k) => a.remove_annotation(&k.name("a")),
            Adjust::Mount(d, s) => a.add_mount(Mount {
                destination: d.name("/m"),
                source: s.name("/src"),
                type_: "bind".into(),
                options: vec!["rbind".into()],
                ..Default::default()
            }),
            Adjust::RemoveMount(d) => a.remove_mount(&d.name("/m")),
            Adjust::Env(k, v) => a.add_env(k.name("E"), v.name("v")),
            Adjust::RemoveEnv(k) => a.remove_env(&k.name("E")),
            Adjust::Args(args) => a.set_args(args.iter().map(|k| k.name("arg"))),
            Adjust::UpdateArgs(args) => a.update_args(args.iter().map(|k| k.name("arg"))),
            Adjust::Hook(which, path) => {
                let hook = Hook {
                    path: path.name("/hook"),
                    ..Default::default()
                };
                let mut hooks = Hooks::default();
                match which % 6 {
                    0 => hooks.prestart.push(hook),
                    1 => hooks.create_runtime.push(hook),
                    2 => hooks.create_container.push(hook),
                    3 => hooks.start_container.push(hook),
                    4 => hooks.poststart.push(hook),
                    _ => hooks.poststop.push(hook),
                }
                a.add_hooks(hooks);
            }
            Adjust::Rlimit(k, hard, soft) => a.add_rlimit(k.name("RLIMIT_"), *hard, *soft),
            Adjust::Device(p, major, minor) => a.add_device(LinuxDevice {
                path: p.name("/dev/d"),
                type_: "c".into(),
                major: *major,
                minor: *minor,
                ..Default::default()
            }),
            Adjust::RemoveDevice(p) => a.remove_device(&p.name("/dev/d")),
            Adjust::Cdi(k) => a.add_cdi_device(CDIDevice {
                name: k.name("vendor.com/dev="),
                ..Default::default()
            }),
            Adjust::Namespace(t, p) => a.add_or_replace_namespace(LinuxNamespace {
                type_: t.name("ns"),
                path: p.name("/proc/1/ns/"),
                ..Default::default()
            }),
            Adjust::RemoveNamespace(t) => a.remove_namespace(&t.name("ns")),
            Adjust::NetDevice(h, n) => a.add_linux_net_device(
                h.name("eth"),
                LinuxNetDevice {
                    name: n.name("net"),
                    ..Default::default()
                },
            ),
            Adjust::RemoveNetDevice(h) => a.remove_linux_net_device(&h.name("eth")),
            Adjust::Sysctl(k, v) => a.set_linux_sysctl(k.name("net.k"), v.name("v")),
            Adjust::CgroupsPath(p) => a.set_linux_cgroups_path(p.name("/cg")),
            Adjust::OomScoreAdj(v) => a.set_linux_oom_score_adj(*v),
            Adjust::RdtClosId(k) => a.set_linux_rdt_clos_id(k.name("clos")),
            Adjust::RdtSchemata(s) => a.set_linux_rdt_schemata(s.iter().map(|k| k.name("L3:"))),
            Adjust::RdtMonitoring(on) => a.set_linux_rdt_enable_monitoring(*on),
            Adjust::RemoveRdt => a.remove_linux_rdt(),
            Adjust::Resource(r) => set_resource(r, Some(a), None),
        }
    }
}

/// One container update a plugin asks for.
#[derive(Arbitrary, Debug)]
pub(crate) struct Update {
    /// Which container: the event's own is `ctr0`.
    ctr: Key,
    ignore_failure: bool,
    resources: Vec<Resource>,
}

impl Update {
    fn build(&self) -> ContainerUpdate {
        let mut u = ContainerUpdate::for_container(format!("ctr{}", self.ctr.0 % 4));
        if self.ignore_failure {
            u.set_ignore_failure();
        }
        for r in &self.resources {
            set_resource(r, None, Some(&mut u));
        }
        u
    }
}

/// One plugin's reply.
#[derive(Arbitrary, Debug)]
pub(crate) enum Reply {
    Built {
        adjust: Option<Vec<Adjust>>,
        updates: Vec<Update>,
        evictions: Vec<Key>,
    },
    /// Bytes decoded as the event's response message; undecodable bytes
    /// make an empty reply.
    Raw(Vec<u8>),
}

impl Reply {
    fn adjustment(adjust: &Option<Vec<Adjust>>) -> MessageField<ContainerAdjustment> {
        match adjust {
            None => MessageField::none(),
            Some(ops) => {
                let mut a = ContainerAdjustment::default();
                ops.iter().for_each(|op| op.apply(&mut a));
                MessageField::some(a)
            }
        }
    }

    fn evict(evictions: &[Key]) -> Vec<ContainerEviction> {
        evictions
            .iter()
            .map(|k| ContainerEviction {
                container_id: k.name("ctr"),
                reason: "fuzz".into(),
                ..Default::default()
            })
            .collect()
    }

    pub(crate) fn create(&self) -> CreateContainerResponse {
        match self {
            Reply::Built {
                adjust,
                updates,
                evictions,
            } => CreateContainerResponse {
                adjust: Self::adjustment(adjust),
                update: updates.iter().map(Update::build).collect(),
                evict: Self::evict(evictions),
                ..Default::default()
            },
            Reply::Raw(b) => CreateContainerResponse::parse_from_bytes(b).unwrap_or_default(),
        }
    }

    fn update(&self) -> UpdateContainerResponse {
        match self {
            Reply::Built {
                updates, evictions, ..
            } => UpdateContainerResponse {
                update: updates.iter().map(Update::build).collect(),
                evict: Self::evict(evictions),
                ..Default::default()
            },
            Reply::Raw(b) => UpdateContainerResponse::parse_from_bytes(b).unwrap_or_default(),
        }
    }

    fn stop(&self) -> StopContainerResponse {
        match self {
            Reply::Built { updates, .. } => StopContainerResponse {
                update: updates.iter().map(Update::build).collect(),
                ..Default::default()
            },
            Reply::Raw(b) => StopContainerResponse::parse_from_bytes(b).unwrap_or_default(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum EventKind {
    Create,
    Update,
    Stop,
}

/// One event: the request's container as the runtime has it, and the
/// replies of the plugins in index order.
#[derive(Arbitrary, Debug)]
struct Case {
    event: EventKind,
    /// The request's container, decoded (undecodable bytes: an empty one).
    container: Vec<u8>,
    /// The update request's resources, decoded likewise.
    resources: Vec<u8>,
    replies: Vec<Reply>,
}

pub(crate) fn plugin_name(i: usize) -> String {
    format!("{:02}-plugin{i}", (i * 7) % 100)
}

/// Input: bytes `arbitrary` turns into a [`Case`].
pub fn merge(data: &[u8]) {
    let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let mut container = Container::parse_from_bytes(&case.container).unwrap_or_default();
    container.id = "ctr0".into();
    let before = merge_steps();
    match case.event {
        EventKind::Create => {
            let mut req = CreateContainerRequest {
                container: MessageField::some(container),
                ..Default::default()
            };
            let mut result = CreateResult::new(&mut req);
            for (i, r) in case.replies.iter().enumerate() {
                if result.apply(&mut req, &plugin_name(i), r.create()).is_err() {
                    break;
                }
            }
            let _ = result.owners();
            let rsp = result.into_response();
            assert!(
                rsp.adjust.is_some(),
                "the merged adjustment is always present"
            );
            rsp.write_to_bytes().expect("encoding the merged reply");
        }
        EventKind::Update => {
            let mut req = UpdateContainerRequest {
                container: MessageField::some(container),
                linux_resources: MessageField::from_option(
                    LinuxResources::parse_from_bytes(&case.resources).ok(),
                ),
                ..Default::default()
            };
            let mut result = UpdateResult::new(&mut req);
            for (i, r) in case.replies.iter().enumerate() {
                if result.apply(&mut req, &plugin_name(i), r.update()).is_err() {
                    break;
                }
            }
            let rsp = result.into_response();
            assert!(
                !rsp.update.is_empty(),
                "the updated container's entry is last"
            );
            rsp.write_to_bytes().expect("encoding the merged reply");
        }
        EventKind::Stop => {
            let mut result = StopResult::new();
            for (i, r) in case.replies.iter().enumerate() {
                if result.apply(&plugin_name(i), r.stop()).is_err() {
                    break;
                }
            }
            result
                .into_response()
                .write_to_bytes()
                .expect("encoding the merged reply");
        }
    }
    let steps = merge_steps() - before;
    let bound = BASE_STEPS + STEPS_PER_BYTE * data.len() as u64;
    assert!(
        steps <= bound,
        "the merge took {steps} steps for {} input bytes (bound {bound}): superlinear work",
        data.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound means something only if the merge's steps are counted.
    #[test]
    fn the_merge_counts_its_steps() {
        let mut req = CreateContainerRequest::default();
        let mut result = CreateResult::new(&mut req);
        let mut adjust = ContainerAdjustment::default();
        for i in 0..10 {
            adjust.add_env(format!("E{i}"), "v");
        }
        let before = merge_steps();
        result
            .apply(
                &mut req,
                "10-a",
                CreateContainerResponse {
                    adjust: MessageField::some(adjust),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(merge_steps() - before >= 10);
    }
}
