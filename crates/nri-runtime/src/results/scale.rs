//! The merge's work grows linearly with a reply's size, for every repeated
//! field: each case merges a reply of n and of 4n entries and compares the
//! counted work (see `work.rs`), so the result does not depend on the
//! machine or its load. Linear work grows 4×, n·log n a little more, and
//! quadratic work 16×; the bound allows 6×.

use protobuf::MessageField;

use super::work::{measure, Work};
use super::*;
use nri_api::{
    mark_for_removal, CDIDevice, ContainerEviction, HugepageLimit, KeyValue, LinuxContainerUpdate,
    LinuxDevice, LinuxNamespace, LinuxNetDevice, Mount, POSIXRlimit,
};

/// The larger reply of each case has this many entries.
const LARGE: usize = 60_000;
const SMALL: usize = LARGE / 4;
/// How much more work 4× the entries may take.
const BOUND: u64 = 6;

/// One event's merge, built before counting starts.
pub(super) enum Merge {
    Create(
        CreateContainerRequest,
        Vec<(String, CreateContainerResponse)>,
    ),
    Update(
        UpdateContainerRequest,
        Vec<(String, UpdateContainerResponse)>,
    ),
    Stop(Vec<(String, StopContainerResponse)>),
}

impl Merge {
    /// Merges every reply in turn; whether it conflicted.
    pub(super) fn run(self) -> bool {
        match self {
            Merge::Create(mut req, replies) => {
                let mut result = CreateResult::new(&mut req);
                replies
                    .into_iter()
                    .try_for_each(|(plugin, rpl)| result.apply(&mut req, &plugin, rpl))
                    .is_err()
            }
            Merge::Update(mut req, replies) => {
                let mut result = UpdateResult::new(&mut req);
                replies
                    .into_iter()
                    .try_for_each(|(plugin, rpl)| result.apply(&mut req, &plugin, rpl))
                    .is_err()
            }
            Merge::Stop(replies) => {
                let mut result = StopResult::new();
                replies
                    .into_iter()
                    .try_for_each(|(plugin, rpl)| result.apply(&plugin, rpl))
                    .is_err()
            }
        }
    }
}

/// The work of merging `merge` (freeing memory is not counted).
pub(super) fn work_of(merge: Merge) -> Work {
    let (conflicted, work) = measure(|| merge.run());
    assert!(!conflicted, "the case must not conflict");
    work
}

/// Checks that `case` at 4n entries costs at most [`BOUND`] times its cost
/// at n, in steps, allocations and allocated bytes.
fn linear(name: &str, case: impl Fn(usize) -> Merge) {
    let small = work_of(case(SMALL));
    let large = work_of(case(LARGE));
    eprintln!("{name}: n={SMALL} {small:?}, n={LARGE} {large:?}");
    for (what, s, l) in [
        ("steps", small.steps, large.steps),
        ("allocations", small.allocs, large.allocs),
        ("bytes", small.bytes, large.bytes),
    ] {
        assert!(
            l <= BOUND * s.max(1),
            "{name}: {what} grow from {s} at n={SMALL} to {l} at n={LARGE}, more than {BOUND}×"
        );
    }
    assert!(large.steps >= LARGE as u64, "{name}: steps are counted");
}

/// Checks that `case` costs the same at n and at 4n entries.
fn constant(name: &str, case: impl Fn(usize) -> Merge) {
    let small = work_of(case(SMALL));
    let large = work_of(case(LARGE));
    eprintln!("{name}: n={SMALL} {small:?}, n={LARGE} {large:?}");
    assert_eq!(small, large, "{name}");
}

fn one_adjustment(ctr: Container, adjust: ContainerAdjustment) -> Merge {
    Merge::Create(
        CreateContainerRequest {
            container: MessageField::some(ctr),
            ..Default::default()
        },
        vec![(
            "00-a".to_string(),
            CreateContainerResponse {
                adjust: MessageField::some(adjust),
                ..Default::default()
            },
        )],
    )
}

fn linux(build: impl FnOnce(&mut LinuxContainerAdjustment)) -> ContainerAdjustment {
    let mut linux = LinuxContainerAdjustment::default();
    build(&mut linux);
    ContainerAdjustment {
        linux: MessageField::some(linux),
        ..Default::default()
    }
}

fn resources(build: impl FnOnce(&mut LinuxResources)) -> ContainerAdjustment {
    let mut resources = LinuxResources::default();
    build(&mut resources);
    linux(|l| l.resources = MessageField::some(resources))
}

fn ctr() -> Container {
    Container {
        id: "c".to_string(),
        ..Default::default()
    }
}

fn namespace(kind: String) -> LinuxNamespace {
    LinuxNamespace {
        path: format!("/proc/1/ns/{kind}"),
        type_: kind,
        ..Default::default()
    }
}

fn mount(destination: String) -> Mount {
    Mount {
        source: "/src".to_string(),
        destination,
        ..Default::default()
    }
}

fn device(path: String) -> LinuxDevice {
    LinuxDevice {
        path,
        type_: "c".to_string(),
        ..Default::default()
    }
}

fn env(key: String) -> KeyValue {
    KeyValue {
        key,
        value: "v".to_string(),
        ..Default::default()
    }
}

fn keys(n: usize, prefix: &str) -> impl Iterator<Item = String> + '_ {
    (0..n).map(move |i| format!("{prefix}{i}"))
}

fn removals(n: usize, prefix: &str) -> impl Iterator<Item = String> + '_ {
    keys(n, prefix).map(|k| mark_for_removal(&k))
}

#[test]
fn namespaces_added() {
    linear("namespaces added", |n| {
        one_adjustment(
            ctr(),
            linux(|l| l.namespaces = keys(n, "ns").map(namespace).collect()),
        )
    });
}

#[test]
fn namespaces_replaced_and_removed() {
    linear("namespaces replaced and removed", |n| {
        let mut c = ctr();
        // The container's own list, with a duplicate type per entry.
        let own = keys(n, "ns").chain(keys(n, "ns")).map(namespace).collect();
        c.linux.mut_or_insert_default().namespaces = own;
        let half = n / 2;
        let edits = keys(half, "ns")
            .map(namespace)
            .chain(
                keys(n, "ns")
                    .skip(half)
                    .map(|k| namespace(mark_for_removal(&k))),
            )
            .collect();
        one_adjustment(c, linux(|l| l.namespaces = edits))
    });
}

#[test]
fn mounts_added_and_removed() {
    linear("mounts", |n| {
        let mut c = ctr();
        c.mounts = keys(n, "/old").map(mount).collect();
        let adjust = ContainerAdjustment {
            mounts: removals(n, "/old")
                .chain(removals(n, "/gone"))
                .chain(keys(n, "/m"))
                .map(mount)
                .collect(),
            ..Default::default()
        };
        one_adjustment(c, adjust)
    });
}

#[test]
fn env_added_and_removed() {
    linear("env", |n| {
        let mut c = ctr();
        c.env = keys(n, "OLD").map(|k| format!("{k}=x")).collect();
        let adjust = ContainerAdjustment {
            env: removals(n, "OLD").chain(keys(n, "E")).map(env).collect(),
            ..Default::default()
        };
        one_adjustment(c, adjust)
    });
}

#[test]
fn devices_added_and_removed() {
    linear("devices", |n| {
        let mut c = ctr();
        c.linux.mut_or_insert_default().devices = keys(n, "/dev/old").map(device).collect();
        let devices = removals(n, "/dev/old")
            .chain(keys(n, "/dev/d"))
            .map(device)
            .collect();
        one_adjustment(c, linux(|l| l.devices = devices))
    });
}

#[test]
fn annotations_set_removed_and_replaced() {
    linear("annotations", |n| {
        let mut c = ctr();
        c.annotations = keys(n, "old").map(|k| (k, "x".to_string())).collect();
        let annotations = keys(n, "a")
            .chain(removals(n, "old"))
            .chain(removals(n, "a"))
            .map(|k| (k, "v".to_string()))
            .collect();
        one_adjustment(
            c,
            ContainerAdjustment {
                annotations,
                ..Default::default()
            },
        )
    });
}

#[test]
fn sysctl_and_net_devices() {
    linear("sysctl and net devices", |n| {
        one_adjustment(
            ctr(),
            linux(|l| {
                l.sysctl = keys(n, "net.k")
                    .chain(removals(n, "net.gone"))
                    .map(|k| (k, "1".to_string()))
                    .collect();
                l.net_devices = keys(n, "eth")
                    .map(|k| (k, LinuxNetDevice::default()))
                    .collect();
            }),
        )
    });
}

#[test]
fn resources_of_an_adjustment() {
    linear("hugepages, unified, cgroup device rules", |n| {
        one_adjustment(
            ctr(),
            resources(|r| {
                r.hugepage_limits = keys(n, "size")
                    .map(|page_size| HugepageLimit {
                        page_size,
                        limit: 1,
                        ..Default::default()
                    })
                    .collect();
                r.unified = keys(n, "memory.k").map(|k| (k, "1".to_string())).collect();
                r.devices = (0..n).map(|_| Default::default()).collect();
            }),
        )
    });
}

#[test]
fn rlimits_cdi_devices_hooks_args() {
    linear("rlimits, CDI devices, hooks, args", |n| {
        let hooks = Hooks {
            prestart: (0..n).map(|_| Default::default()).collect(),
            poststop: (0..n).map(|_| Default::default()).collect(),
            ..Default::default()
        };
        let adjust = ContainerAdjustment {
            rlimits: keys(n, "RLIMIT_")
                .map(|type_| POSIXRlimit {
                    type_,
                    ..Default::default()
                })
                .collect(),
            CDI_devices: keys(n, "vendor.com/dev=")
                .map(|name| CDIDevice {
                    name,
                    ..Default::default()
                })
                .collect(),
            hooks: MessageField::some(hooks),
            args: std::iter::once(String::new())
                .chain(keys(n, "arg"))
                .collect(),
            ..Default::default()
        };
        one_adjustment(ctr(), adjust)
    });
}

/// An update of `ctr_id` setting one unified key and one hugepage limit.
fn update(ctr_id: String, key: String) -> ContainerUpdate {
    let mut resources = LinuxResources::default();
    resources.unified.insert(key.clone(), "1".to_string());
    resources.hugepage_limits.push(HugepageLimit {
        page_size: key,
        limit: 1,
        ..Default::default()
    });
    ContainerUpdate {
        container_id: ctr_id,
        linux: MessageField::some(LinuxContainerUpdate {
            resources: MessageField::some(resources),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn update_request(resources: LinuxResources) -> UpdateContainerRequest {
    UpdateContainerRequest {
        container: MessageField::some(ctr()),
        linux_resources: MessageField::some(resources),
        ..Default::default()
    }
}

#[test]
fn updates_of_many_containers() {
    linear("updates of many containers, creation", |n| {
        let rpl = CreateContainerResponse {
            update: keys(n, "other").map(|id| update(id, "k".into())).collect(),
            ..Default::default()
        };
        let req = CreateContainerRequest {
            container: MessageField::some(ctr()),
            ..Default::default()
        };
        Merge::Create(req, vec![("00-a".to_string(), rpl)])
    });
    linear("updates of many containers, update", |n| {
        let rpl = UpdateContainerResponse {
            update: keys(n, "other").map(|id| update(id, "k".into())).collect(),
            ..Default::default()
        };
        Merge::Update(
            update_request(Default::default()),
            vec![("00-a".to_string(), rpl)],
        )
    });
    linear("updates of many containers, stop", |n| {
        let rpl = StopContainerResponse {
            update: keys(n, "other").map(|id| update(id, "k".into())).collect(),
            ..Default::default()
        };
        Merge::Stop(vec![("00-a".to_string(), rpl)])
    });
}

#[test]
fn many_updates_of_one_container() {
    linear("many updates of one container", |n| {
        let rpl = StopContainerResponse {
            update: keys(n, "k").map(|k| update("other".into(), k)).collect(),
            ..Default::default()
        };
        Merge::Stop(vec![("00-a".to_string(), rpl)])
    });
    linear("many updates of the updated container", |n| {
        let mut request = LinuxResources::default();
        request.pids.mut_or_insert_default().limit = 10;
        // A pids limit in the request is claimed by every update of the
        // target (quirk 21): only the first would succeed, so they may fail.
        let update = keys(n, "k")
            .map(|k| ContainerUpdate {
                ignore_failure: true,
                ..update("c".into(), k)
            })
            .collect();
        let rpl = UpdateContainerResponse {
            update,
            ..Default::default()
        };
        Merge::Update(update_request(request), vec![("00-a".to_string(), rpl)])
    });
    linear("many updates of the updated container, no pids", |n| {
        let update = keys(n, "k").map(|k| update("c".into(), k)).collect();
        let rpl = UpdateContainerResponse {
            update,
            ..Default::default()
        };
        Merge::Update(
            update_request(Default::default()),
            vec![("00-a".to_string(), rpl)],
        )
    });
}

/// Evictions are ignored: no work at all, whatever their number.
#[test]
fn evictions() {
    let eviction = |id| ContainerEviction {
        container_id: id,
        reason: "r".to_string(),
        ..Default::default()
    };
    constant("evictions, creation", |n| {
        let rpl = CreateContainerResponse {
            evict: keys(n, "victim").map(eviction).collect(),
            ..Default::default()
        };
        let req = CreateContainerRequest {
            container: MessageField::some(ctr()),
            ..Default::default()
        };
        Merge::Create(req, vec![("00-a".to_string(), rpl)])
    });
    constant("evictions, update", |n| {
        let rpl = UpdateContainerResponse {
            evict: keys(n, "victim").map(eviction).collect(),
            ..Default::default()
        };
        Merge::Update(
            update_request(Default::default()),
            vec![("00-a".to_string(), rpl)],
        )
    });
}

/// Many plugins, each with a small reply: the work grows with the total.
#[test]
fn many_plugins() {
    linear("many plugins", |n| {
        let replies = (0..n / 10)
            .map(|p| {
                let adjust = ContainerAdjustment {
                    annotations: keys(10, &format!("p{p}-"))
                        .map(|k| (k, "v".to_string()))
                        .collect(),
                    ..Default::default()
                };
                let rpl = CreateContainerResponse {
                    adjust: MessageField::some(adjust),
                    ..Default::default()
                };
                (format!("{p:05}-p"), rpl)
            })
            .collect();
        let req = CreateContainerRequest {
            container: MessageField::some(ctr()),
            ..Default::default()
        };
        Merge::Create(req, replies)
    });
}

/// Not a check: the time one CreateContainer reply of [`LARGE`] distinct
/// namespace types takes to merge, for comparison with upstream's (run in
/// release: `cargo test --release -p nri-runtime --lib namespaces_timed --
/// --ignored --nocapture`), merged into the container and read by its
/// reply only. `NRI_TIMED_RUNS` sets how many merges of each (21).
/// Building the reply and freeing the result are not timed; the counting
/// allocator of the test build is.
#[test]
#[ignore = "a measurement, not a check"]
fn namespaces_timed() {
    let runs = std::env::var("NRI_TIMED_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(21);
    for reply_only in [false, true] {
        let mut ns = Vec::with_capacity(runs);
        for _ in 0..runs {
            let merge = one_adjustment(
                ctr(),
                linux(|l| l.namespaces = keys(LARGE, "ns").map(namespace).collect()),
            );
            let Merge::Create(mut req, replies) = merge else {
                unreachable!("one_adjustment builds a creation")
            };
            let mut result = CreateResult::new(&mut req);
            if reply_only {
                result.read_by_reply_only();
            }
            ns.push(timed_apply(&mut result, &mut req, replies));
            drop((req, result));
        }
        ns.sort_by(f64::total_cmp);
        eprintln!(
            "namespaces, {LARGE} types, {runs} merges{}: min {:.0} ns, median {:.0} ns per entry",
            if reply_only {
                " read by the reply only"
            } else {
                ""
            },
            ns[0],
            ns[runs / 2]
        );
    }
}

/// Merges `replies`; the nanoseconds it took per [`LARGE`] entries. Not
/// inlined, so that a profiler can count this part alone.
#[inline(never)]
fn timed_apply(
    result: &mut CreateResult,
    req: &mut CreateContainerRequest,
    replies: Vec<(String, CreateContainerResponse)>,
) -> f64 {
    let start = std::time::Instant::now();
    for (plugin, rpl) in replies {
        result.apply(req, &plugin, rpl).expect("no conflict");
    }
    start.elapsed().as_nanos() as f64 / LARGE as f64
}
