//! Plugins joining while the runtime changes: nothing lost to a plugin
//! that synchronizes, whether the runtime keeps its changes apart from its
//! sync with its own lock or with `PluginSyncBlock`s held across them; and
//! a new instance taking over from an old one without a gap or a duplicate
//! (`plugin_handover`), against upstream's behaviour when that is off.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nri_runtime::{Adaptation, BoxError, Options, SyncCb};
use nri_stub::api::{self, Container, ContainerAdjustment, ContainerUpdate, PodSandbox};
use nri_stub::{HandlerResult, Plugin, Stub, StubHandle};
use tokio::sync::Notify;

use crate::common::{container, pod, PATIENCE};

/// What one plugin instance learned about containers.
#[derive(Default)]
struct Seen {
    synced: Mutex<Vec<String>>,
    created: Mutex<Vec<String>>,
    removed: Mutex<Vec<String>>,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Seen>);

#[nri_stub::plugin]
impl Plugin for Recorder {
    async fn synchronize(
        &self,
        _pods: Vec<PodSandbox>,
        containers: Vec<Container>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        let mut synced = self.0.synced.lock().unwrap();
        synced.extend(containers.into_iter().map(|c| c.id));
        Ok(Vec::new())
    }

    async fn create_container(
        &self,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        self.0.created.lock().unwrap().push(ctr.id.clone());
        Ok((ContainerAdjustment::new(), Vec::new()))
    }

    async fn remove_container(&self, _pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.0.removed.lock().unwrap().push(ctr.id.clone());
        Ok(())
    }
}

impl Seen {
    /// The containers this instance believes exist, or why its view is
    /// inconsistent: a container seen twice, or removed unseen.
    fn view(&self) -> Result<BTreeSet<String>, String> {
        let mut view = BTreeSet::new();
        for id in self.synced.lock().unwrap().iter() {
            if !view.insert(id.clone()) {
                return Err(format!("{id} synchronized twice"));
            }
        }
        for id in self.created.lock().unwrap().iter() {
            if !view.insert(id.clone()) {
                return Err(format!(
                    "{id} both synchronized and created, or created twice"
                ));
            }
        }
        for id in self.removed.lock().unwrap().iter() {
            if !view.remove(id) {
                return Err(format!("{id} removed but never seen"));
            }
        }
        Ok(view)
    }
}

/// A runtime as containerd's and CRI-O's NRI integrations are: one lock
/// around each change (its NRI event and the store update) and around the
/// sync function's snapshot and `SyncCb::call`. After releasing it, the
/// sync function still works for a moment (as a runtime applying updates
/// or logging does), and tells `synced` that it released it.
struct Runtime {
    nri: Adaptation,
    store: Arc<tokio::sync::Mutex<BTreeSet<String>>>,
    synced: Arc<Notify>,
    /// The sync function fails once it handed its state over.
    fail_sync: Arc<std::sync::atomic::AtomicBool>,
    /// Containers a removal has picked.
    removing: Mutex<HashSet<String>>,
    _dir: tempfile::TempDir,
    socket: std::path::PathBuf,
}

impl Runtime {
    async fn start(tweak: impl FnOnce(Options) -> Options) -> Runtime {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("nri.sock");
        let store = Arc::new(tokio::sync::Mutex::new(BTreeSet::<String>::new()));
        let synced = Arc::new(Notify::new());
        let fail_sync = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, n, f) = (
            Arc::clone(&store),
            Arc::clone(&synced),
            Arc::clone(&fail_sync),
        );
        let opts = Options::default()
            .socket_path(&socket)
            .and_then(|o| o.plugin_path(dir.path().join("plugins")))
            .and_then(|o| o.plugin_config_path(dir.path().join("conf.d")))
            .unwrap()
            .request_timeout(Duration::from_secs(5));
        let nri = Adaptation::new(
            "test-runtime",
            "v9.9.9",
            move |cb: SyncCb| {
                let (store, synced, fail) = (Arc::clone(&s), Arc::clone(&n), Arc::clone(&f));
                async move {
                    {
                        let ids = store.lock().await;
                        let ctrs: Vec<_> = ids.iter().map(|id| container("pod", id)).collect();
                        cb.call(vec![pod("pod")], ctrs).await?;
                    }
                    synced.notify_one();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    if fail.load(std::sync::atomic::Ordering::Acquire) {
                        return Err::<(), BoxError>("the runtime fails the sync".into());
                    }
                    Ok::<(), BoxError>(())
                }
            },
            |_: Vec<ContainerUpdate>| async { Ok::<_, BoxError>(Vec::new()) },
            tweak(opts),
        )
        .unwrap();
        nri.start().await.unwrap();
        // Start's own sync, for pre-installed plugins.
        synced.notified().await;
        Runtime {
            nri,
            store,
            synced,
            fail_sync,
            removing: Mutex::default(),
            _dir: dir,
            socket,
        }
    }

    async fn create(&self, id: &str) {
        let mut store = self.store.lock().await;
        let req = api::CreateContainerRequest {
            pod: Some(pod("pod")).into(),
            container: Some(container("pod", id)).into(),
            ..Default::default()
        };
        self.nri.create_container(req).await.unwrap();
        store.insert(id.to_string());
    }

    async fn remove_oldest(&self) {
        let mut store = self.store.lock().await;
        let Some(id) = store.first().cloned() else {
            return;
        };
        let req = api::RemoveContainerRequest {
            pod: Some(pod("pod")).into(),
            container: Some(container("pod", &id)).into(),
            ..Default::default()
        };
        self.nri.remove_container(req).await.unwrap();
        store.remove(&id);
    }

    /// A creation as containerd makes one: a `PluginSyncBlock` held from
    /// before its event until its store update, `hold` later, and no lock.
    async fn create_blocked(&self, id: &str, hold: Duration) {
        let mut block = self.nri.block_plugin_sync().await;
        let req = api::CreateContainerRequest {
            pod: Some(pod("pod")).into(),
            container: Some(container("pod", id)).into(),
            ..Default::default()
        };
        self.nri.create_container(req).await.unwrap();
        tokio::time::sleep(hold).await;
        self.store.lock().await.insert(id.to_string());
        block.unblock();
    }

    /// The removal of the oldest container, as [`Runtime::create_blocked`].
    async fn remove_blocked(&self, hold: Duration) {
        let mut block = self.nri.block_plugin_sync().await;
        // One removal per container, as a runtime makes.
        let id = {
            let store = self.store.lock().await;
            let mut removing = self.removing.lock().unwrap();
            let Some(id) = store.iter().find(|id| !removing.contains(*id)).cloned() else {
                return;
            };
            removing.insert(id.clone());
            id
        };
        let req = api::RemoveContainerRequest {
            pod: Some(pod("pod")).into(),
            container: Some(container("pod", &id)).into(),
            ..Default::default()
        };
        self.nri.remove_container(req).await.unwrap();
        tokio::time::sleep(hold).await;
        self.store.lock().await.remove(&id);
        block.unblock();
    }

    fn connect(&self, name: &str, plugin: Recorder) -> StubHandle {
        let stub = Stub::builder()
            .name(name)
            .idx("50")
            .socket_path(&self.socket)
            .build(plugin)
            .unwrap();
        let handle = stub.handle();
        tokio::spawn(async move {
            let _ = stub.run().await;
        });
        handle
    }

    async fn wait_until(&self, what: &str, ok: impl Fn(&Adaptation) -> bool) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !ok(&self.nri) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting: {what} (plugins: {:?})",
                self.nri.plugins()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Joins `iterations` plugins one after the other while containers are
/// created and removed around each join, one of them just after the sync
/// function let go of the runtime's lock. Returns the joins whose plugin's
/// view (snapshot, then events) was not the runtime's store, with why.
async fn race_joins(activate_within_sync: bool, iterations: usize) -> (usize, Vec<String>) {
    let rt = Runtime::start(|o| o.activate_within_sync(activate_within_sync)).await;
    let mut wrong = Vec::new();
    let mut objects = 0;
    for i in 0..iterations {
        let seen = Recorder::default();
        let handle = rt.connect("joiner", seen.clone());
        let churn = async {
            for j in 0..3 {
                rt.create(&format!("c{i}-{j}")).await;
                tokio::task::yield_now().await;
                if rt.store.lock().await.len() > 12 {
                    rt.remove_oldest().await;
                }
            }
            rt.synced.notified().await;
            rt.create(&format!("w{i}")).await;
        };
        tokio::time::timeout(PATIENCE, churn)
            .await
            .expect("the join's sync never ran");
        objects += 4;
        rt.wait_until("the joiner is active", |n| n.has_plugin("50-joiner"))
            .await;
        let store = rt.store.lock().await.clone();
        match seen.0.view() {
            Ok(view) if view == store => {}
            Ok(view) => wrong.push(format!(
                "join {i}: missing {:?}, extra {:?}",
                store.difference(&view).collect::<Vec<_>>(),
                view.difference(&store).collect::<Vec<_>>()
            )),
            Err(e) => wrong.push(format!("join {i}: {e}")),
        }
        handle.stop();
        rt.wait_until("the joiner is gone", |n| !n.has_plugin("50-joiner"))
            .await;
    }
    rt.nri.stop().await;
    (objects, wrong)
}

/// Each of 1,000 joining plugins sees every container exactly once, in its
/// snapshot or as an event, with creations and removals racing its join,
/// one of them right after the sync function let go of the runtime's lock
/// (which upstream loses, see below).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_plugin_misses_no_container() {
    let (objects, wrong) = race_joins(false, 1000).await;
    assert!(
        wrong.is_empty(),
        "{} of 1000 joins saw a wrong state ({objects} containers), first: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// 500 joins, each racing six changes that hold a `PluginSyncBlock`
/// across their event and their store update for 0 to 3 ms, one in three
/// of them a removal, started before and after the plugin connects: each
/// joining plugin sees every container exactly once, and no change waits
/// for a join that is waiting for the changes before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_racing_changes_held_across_blocks_miss_nothing() {
    let rt = Arc::new(Runtime::start(|o| o).await);
    let mut wrong = Vec::new();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut changes = 0;
    for i in 0..500 {
        let seen = Recorder::default();
        let mut tasks = Vec::new();
        let connect_after = next(6);
        let mut handle = None;
        for j in 0..6 {
            if j == connect_after {
                handle = Some(rt.connect("joiner", seen.clone()));
            }
            let rt = Arc::clone(&rt);
            let hold = Duration::from_micros(next(3000));
            let removal = next(3) == 0;
            let id = format!("c{i}-{j}");
            tasks.push(tokio::spawn(async move {
                if removal {
                    rt.remove_blocked(hold).await;
                } else {
                    rt.create_blocked(&id, hold).await;
                }
            }));
            changes += 1;
            tokio::time::sleep(Duration::from_micros(next(500))).await;
        }
        let handle = handle.unwrap_or_else(|| rt.connect("joiner", seen.clone()));
        for t in tasks {
            tokio::time::timeout(PATIENCE, t)
                .await
                .expect("a change waited for a join")
                .unwrap();
        }
        rt.wait_until("the joiner is active", |n| n.has_plugin("50-joiner"))
            .await;
        let store = rt.store.lock().await.clone();
        match seen.0.view() {
            Ok(view) if view == store => {}
            Ok(view) => wrong.push(format!(
                "join {i}: missing {:?}, extra {:?}",
                store.difference(&view).collect::<Vec<_>>(),
                view.difference(&store).collect::<Vec<_>>()
            )),
            Err(e) => wrong.push(format!("join {i}: {e}")),
        }
        handle.stop();
        rt.wait_until("the joiner is gone", |n| !n.has_plugin("50-joiner"))
            .await;
    }
    rt.nri.stop().await;
    assert!(
        wrong.is_empty(),
        "{} of 500 joins ({changes} changes) saw a wrong state, first: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// `activate_within_sync`, which used to ask for this, changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activating_within_the_sync_is_how_every_plugin_joins() {
    let (_, wrong) = race_joins(true, 100).await;
    assert!(wrong.is_empty(), "{wrong:?}");
}

/// Starts the old and the new instance of `50-upgraded` one after the
/// other while containers are created without pause, and returns what each
/// saw of those creations, once the new one is active (and, with
/// handover, the old one gone).
async fn upgrade(handover: bool) -> (Vec<String>, Vec<String>, Vec<String>, bool) {
    let rt = Arc::new(Runtime::start(|o| o.plugin_handover(handover)).await);
    let (old, new) = (Recorder::default(), Recorder::default());
    let old_handle = rt.connect("upgraded", old.clone());
    rt.wait_until("the old instance is active", |n| {
        n.has_plugin("50-upgraded")
    })
    .await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let creator = {
        let (rt, stop) = (Arc::clone(&rt), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut created = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                let id = format!("u{}", created.len());
                rt.create(&id).await;
                created.push(id);
            }
            created
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let new_handle = rt.connect("upgraded", new.clone());
    let new_seen = Arc::clone(&new.0);
    rt.wait_until("the new instance got events", move |_| {
        !new_seen.created.lock().unwrap().is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    stop.store(true, std::sync::atomic::Ordering::Release);
    let created = creator.await.unwrap();
    let old_closed = rt.nri.plugins().len() == 1;
    old_handle.stop();
    new_handle.stop();
    rt.nri.stop().await;
    let old_created = old.0.created.lock().unwrap().clone();
    let new_created = new.0.created.lock().unwrap().clone();
    (created, old_created, new_created, old_closed)
}

/// With `plugin_handover`, every container created while a new instance
/// replaces the old one reaches exactly one of them, and the old one is
/// gone once the new one is active.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_instance_takes_over_without_a_gap_or_a_duplicate() {
    let (created, old, new, old_closed) = upgrade(true).await;
    let (o, n): (HashSet<_>, HashSet<_>) = (old.iter().collect(), new.iter().collect());
    let both: Vec<_> = o.intersection(&n).collect();
    let neither: Vec<_> = created
        .iter()
        .filter(|id| !o.contains(id) && !n.contains(id))
        .collect();
    assert!(both.is_empty(), "seen by both instances: {both:?}");
    // The new instance's snapshot has those created before it synchronized;
    // what the old one no longer got, the new one did.
    assert!(neither.is_empty(), "seen by neither instance: {neither:?}");
    assert!(
        !old.is_empty() && !new.is_empty(),
        "old {} new {}",
        old.len(),
        new.len()
    );
    assert!(old_closed, "the old instance is still connected");
}

/// Without it, as upstream: both instances stay, and each later event
/// reaches both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_both_instances_get_each_event_as_upstream() {
    let (_, old, new, old_closed) = upgrade(false).await;
    let o: HashSet<_> = old.iter().collect();
    assert!(
        new.iter().any(|id| o.contains(id)),
        "no event reached both instances"
    );
    assert!(!old_closed, "the old instance was closed without handover");
}

/// With both options, a new instance whose sync the runtime fails after it
/// answered replaces nothing: the old one stays and keeps getting events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_within_a_handover_keeps_the_old_instance() {
    let rt = Runtime::start(|o| o.activate_within_sync(true).plugin_handover(true)).await;
    let (old, new) = (Recorder::default(), Recorder::default());
    let old_handle = rt.connect("upgraded", old.clone());
    rt.wait_until("the old instance is active", |n| {
        n.has_plugin("50-upgraded")
    })
    .await;
    // Its sync function returns after it is active: let it finish.
    drop(rt.nri.block_plugin_sync().await);
    rt.create("before").await; // so that a sync has something to show
    rt.fail_sync
        .store(true, std::sync::atomic::Ordering::Release);
    let new_handle = rt.connect("upgraded", new.clone());
    let new_seen = Arc::clone(&new.0);
    rt.wait_until("the new instance synchronized", move |_| {
        !new_seen.synced.lock().unwrap().is_empty()
    })
    .await;
    // Once the sync function has failed, the new instance is dropped.
    tokio::time::sleep(Duration::from_millis(50)).await;
    rt.create("after").await;
    assert_eq!(rt.nri.plugins(), ["50-upgraded"]);
    assert!(
        old.0.created.lock().unwrap().contains(&"after".to_string()),
        "the old instance no longer gets events"
    );
    assert!(new.0.created.lock().unwrap().is_empty());
    old_handle.stop();
    new_handle.stop();
    rt.nri.stop().await;
}
