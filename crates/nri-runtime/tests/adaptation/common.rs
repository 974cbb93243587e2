//! The test runtime: an Adaptation on a temp-dir socket with recording
//! callbacks, and a configurable Rust stub plugin.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nri_api::{self as api, ContainerAdjustment, ContainerUpdate, EventMask};
use nri_runtime::{Adaptation, BoxError, Error, Metrics, Options, SyncCb};
use nri_stub::{ConfigureInfo, HandlerResult, Plugin, Stub, StubHandle};
use tokio::sync::watch;

/// The longest any test waits for something it observes.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// One `record_plugin_adjustments` call.
#[derive(Clone, Debug, PartialEq)]
pub struct Adjustments {
    pub plugin: String,
    pub op: String,
    pub adjust: Option<ContainerAdjustment>,
    pub updates: usize,
    pub evicts: usize,
}

/// Records what metrics the adaptation reports.
#[derive(Default)]
pub struct Recorded {
    /// (plugin, op, failed)
    pub invocations: Mutex<Vec<(String, String, bool)>>,
    /// (plugin, op, latency)
    pub latencies: Mutex<Vec<(String, String, Duration)>>,
    /// The name of the thread each latency was recorded on.
    pub latency_threads: Mutex<Vec<Option<String>>>,
    pub adjustments: Mutex<Vec<Adjustments>>,
    /// Every plugin count reported, in order.
    pub counts: Mutex<Vec<usize>>,
    pub count: Mutex<Option<watch::Sender<usize>>>,
}

pub struct TestMetrics(pub Arc<Recorded>);

impl Metrics for TestMetrics {
    fn record_plugin_invocation(&self, plugin: &str, op: &str, err: Option<&Error>) {
        self.0.invocations.lock().unwrap().push((
            plugin.to_string(),
            op.to_string(),
            err.is_some(),
        ));
    }
    fn record_plugin_latency(&self, plugin: &str, op: &str, latency: Duration) {
        self.0
            .latencies
            .lock()
            .unwrap()
            .push((plugin.to_string(), op.to_string(), latency));
        self.0
            .latency_threads
            .lock()
            .unwrap()
            .push(std::thread::current().name().map(str::to_string));
    }
    fn record_plugin_adjustments(
        &self,
        plugin: &str,
        op: &str,
        adjust: Option<&ContainerAdjustment>,
        updates: usize,
        evicts: usize,
    ) {
        self.0.adjustments.lock().unwrap().push(Adjustments {
            plugin: plugin.to_string(),
            op: op.to_string(),
            adjust: adjust.cloned(),
            updates,
            evicts,
        });
    }
    fn update_plugin_count(&self, n: usize) {
        self.0.counts.lock().unwrap().push(n);
        if let Some(tx) = self.0.count.lock().unwrap().as_ref() {
            tx.send_replace(n);
        }
    }
}

/// The runtime's state the sync callback hands out, and what it got back.
#[derive(Default)]
pub struct RuntimeState {
    pub pods: Vec<api::PodSandbox>,
    pub containers: Vec<api::Container>,
    pub sync_updates: Vec<ContainerUpdate>,
    pub unsolicited: Vec<ContainerUpdate>,
    pub syncs: usize,
    pub fail_sync: bool,
    /// The update callback applies nothing and reports every update failed.
    pub fail_updates: bool,
    /// How long the update callback takes.
    pub update_delay: Duration,
    /// Update callbacks running now, and the most that ever ran at once.
    pub updates_running: usize,
    pub most_updates_running: usize,
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub nri: Arc<Adaptation>,
    pub state: Arc<Mutex<RuntimeState>>,
    pub metrics: Arc<Recorded>,
    count: watch::Receiver<usize>,
}

impl Harness {
    pub async fn start() -> Harness {
        Harness::start_with(|o| o, RuntimeState::default()).await
    }

    /// `tweak` adjusts the options (plugin dir etc. are set already).
    pub async fn start_with(
        tweak: impl FnOnce(Options) -> Options,
        state: RuntimeState,
    ) -> Harness {
        let _ = env_logger_init();
        // NRI_TEST_KEEP=1 keeps the temp dir (plugin logs, stderr) for a post-mortem.
        let dir = tempfile::Builder::new()
            .disable_cleanup(std::env::var_os("NRI_TEST_KEEP").is_some())
            .tempdir()
            .unwrap();
        let socket = dir.path().join("run/nri.sock");
        let state = Arc::new(Mutex::new(state));
        let metrics = Arc::new(Recorded::default());
        let (tx, count) = watch::channel(0);
        *metrics.count.lock().unwrap() = Some(tx);

        let s1 = Arc::clone(&state);
        let s2 = Arc::clone(&state);
        let opts = Options::default()
            .socket_path(&socket)
            .and_then(|o| o.plugin_path(dir.path().join("plugins")))
            .and_then(|o| o.plugin_config_path(dir.path().join("conf.d")))
            .unwrap()
            .wasm_cache_dir(Some(dir.path().join("wasm-cache")))
            .registration_timeout(Duration::from_secs(2))
            .request_timeout(Duration::from_secs(2))
            .metrics(Arc::new(TestMetrics(Arc::clone(&metrics))));
        let nri = Adaptation::new(
            "test-runtime",
            "v9.9.9",
            move |cb: SyncCb| {
                let state = Arc::clone(&s1);
                async move {
                    let (pods, ctrs, fail) = {
                        let s = state.lock().unwrap();
                        (s.pods.clone(), s.containers.clone(), s.fail_sync)
                    };
                    if fail {
                        return Err::<(), BoxError>("runtime refuses sync".into());
                    }
                    let updates = cb.call(pods, ctrs).await?;
                    let mut s = state.lock().unwrap();
                    s.syncs += 1;
                    s.sync_updates.extend(updates);
                    Ok(())
                }
            },
            move |updates: Vec<ContainerUpdate>| {
                let state = Arc::clone(&s2);
                async move {
                    let delay = {
                        let mut s = state.lock().unwrap();
                        s.updates_running += 1;
                        s.most_updates_running = s.most_updates_running.max(s.updates_running);
                        s.update_delay
                    };
                    // A zero delay must not sleep: a timer rounds up to the
                    // next millisecond tick, and the flood test needs updates
                    // answered at once (their replies as large as requests),
                    // not refused as too many in flight.
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    let mut s = state.lock().unwrap();
                    s.updates_running -= 1;
                    if s.fail_updates {
                        return Ok::<_, BoxError>(updates);
                    }
                    s.unsolicited.extend(updates);
                    Ok(Vec::new())
                }
            },
            tweak(opts),
        )
        .unwrap();
        Harness {
            dir,
            socket,
            nri: Arc::new(nri),
            state,
            metrics,
            count,
        }
    }

    pub fn plugin_dir(&self) -> PathBuf {
        self.dir.path().join("plugins")
    }

    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("conf.d")
    }

    /// Waits until exactly `n` plugins are active.
    pub async fn wait_plugins(&self, n: usize) {
        let mut count = self.count.clone();
        tokio::time::timeout(PATIENCE, count.wait_for(|c| *c == n))
            .await
            .unwrap_or_else(|_| {
                panic!("expected {n} active plugins, have {:?}", self.nri.plugins())
            })
            .unwrap();
    }

    /// Starts a Rust stub plugin connecting to the socket.
    pub fn connect<P: Plugin>(&self, name: &str, idx: &str, plugin: P) -> StubHandle {
        self.connect_with(name, idx, None, plugin)
    }

    pub fn connect_with<P: Plugin>(
        &self,
        name: &str,
        idx: &str,
        events: Option<EventMask>,
        plugin: P,
    ) -> StubHandle {
        let mut b = Stub::builder()
            .name(name)
            .idx(idx)
            .socket_path(&self.socket);
        if let Some(e) = events {
            b = b.events(e);
        }
        let stub = b.build(plugin).unwrap();
        let handle = stub.handle();
        tokio::spawn(async move {
            let _ = stub.run().await;
        });
        handle
    }
}

/// Core logs go to the test output when RUST_LOG is set; the adaptation's
/// messages at info level and above are also kept for [`logged`].
fn env_logger_init() -> Result<(), log::SetLoggerError> {
    let inner = env_logger::builder().is_test(true).build();
    let max = inner.filter().max(log::LevelFilter::Info);
    log::set_boxed_logger(Box::new(TestLogger(inner)))?;
    log::set_max_level(max);
    Ok(())
}

fn log_lines() -> &'static Mutex<Vec<String>> {
    static LINES: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    LINES.get_or_init(Mutex::default)
}

struct TestLogger(env_logger::Logger);

impl log::Log for TestLogger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        is_kept(m) || self.0.enabled(m)
    }
    fn log(&self, record: &log::Record<'_>) {
        if is_kept(record.metadata()) {
            log_lines().lock().unwrap().push(record.args().to_string());
        }
        if self.0.matches(record) {
            self.0.log(record);
        }
    }
    fn flush(&self) {
        self.0.flush();
    }
}

fn is_kept(m: &log::Metadata<'_>) -> bool {
    m.level() <= log::Level::Info && m.target().starts_with("nri_runtime")
}

/// The adaptation's log messages (info and above, of every test in this
/// process) that contain `needle`.
pub fn logged(needle: &str) -> Vec<String> {
    log_lines()
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(needle))
        .cloned()
        .collect()
}

pub fn pod(id: &str) -> api::PodSandbox {
    api::PodSandbox {
        id: id.into(),
        name: format!("{id}-name"),
        namespace: "default".into(),
        uid: format!("{id}-uid"),
        ..Default::default()
    }
}

pub fn container(pod: &str, id: &str) -> api::Container {
    api::Container {
        id: id.into(),
        pod_sandbox_id: pod.into(),
        name: format!("{id}-name"),
        ..Default::default()
    }
}

/// A request of type `api::$req` for pod `$pod` (and container `$ctr`).
macro_rules! req {
    ($req:ident, $pod:expr) => {
        nri_api::$req {
            pod: protobuf::MessageField::some($crate::common::pod($pod)),
            ..Default::default()
        }
    };
    ($req:ident, $pod:expr, $ctr:expr) => {
        nri_api::$req {
            pod: protobuf::MessageField::some($crate::common::pod($pod)),
            container: protobuf::MessageField::some($crate::common::container($pod, $ctr)),
            ..Default::default()
        }
    };
}
#[allow(unused_imports)] // tests/robustness shares this file
pub(crate) use req;

/// The RPCs [`lifecycle`] raises, in order.
pub const LIFECYCLE: [&str; 13] = [
    "RunPodSandbox",
    "UpdatePodSandbox",
    "PostUpdatePodSandbox",
    "CreateContainer",
    "PostCreateContainer",
    "StartContainer",
    "PostStartContainer",
    "UpdateContainer",
    "PostUpdateContainer",
    "StopContainer",
    "RemoveContainer",
    "StopPodSandbox",
    "RemovePodSandbox",
];

/// Every lifecycle event once, in lifecycle order, for pod `p` and its
/// container `c`; only CreateContainer may fail.
pub async fn lifecycle(
    h: &Harness,
    p: &str,
    c: &str,
) -> Result<api::CreateContainerResponse, Error> {
    lifecycle_creating(h, p, c, create_req(p, c)).await
}

/// [`lifecycle`], with the CreateContainer request given.
pub async fn lifecycle_creating(
    h: &Harness,
    p: &str,
    c: &str,
    create: api::CreateContainerRequest,
) -> Result<api::CreateContainerResponse, Error> {
    let nri = &h.nri;
    nri.run_pod_sandbox(req!(RunPodSandboxRequest, p))
        .await
        .unwrap();
    nri.update_pod_sandbox(req!(UpdatePodSandboxRequest, p))
        .await
        .unwrap();
    nri.post_update_pod_sandbox(req!(PostUpdatePodSandboxRequest, p))
        .await
        .unwrap();
    let created = nri.create_container(create).await;
    nri.post_create_container(req!(PostCreateContainerRequest, p, c))
        .await
        .unwrap();
    nri.start_container(req!(StartContainerRequest, p, c))
        .await
        .unwrap();
    nri.post_start_container(req!(PostStartContainerRequest, p, c))
        .await
        .unwrap();
    nri.update_container(req!(UpdateContainerRequest, p, c))
        .await
        .unwrap();
    nri.post_update_container(req!(PostUpdateContainerRequest, p, c))
        .await
        .unwrap();
    nri.stop_container(req!(StopContainerRequest, p, c))
        .await
        .unwrap();
    nri.remove_container(req!(RemoveContainerRequest, p, c))
        .await
        .unwrap();
    nri.stop_pod_sandbox(req!(StopPodSandboxRequest, p))
        .await
        .unwrap();
    nri.remove_pod_sandbox(req!(RemovePodSandboxRequest, p))
        .await
        .unwrap();
    created
}

pub fn create_req(pod_id: &str, id: &str) -> api::CreateContainerRequest {
    api::CreateContainerRequest {
        pod: protobuf::MessageField::some(pod(pod_id)),
        container: protobuf::MessageField::some(container(pod_id, id)),
        ..Default::default()
    }
}

/// The annotation `key` as a creation's merged adjustment sets it.
pub fn annotation<'a>(rsp: &'a api::CreateContainerResponse, key: &str) -> Option<&'a str> {
    rsp.adjust.annotations.get(key).map(String::as_str)
}

/// Why creating this container fails; panics if it succeeds.
pub async fn creation_error(h: &Harness, req: api::CreateContainerRequest) -> String {
    h.nri
        .create_container(req)
        .await
        .expect_err("the creation succeeded")
        .to_string()
}

pub type Adjuster = Arc<
    dyn Fn(&api::Container) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)>
        + Send
        + Sync,
>;

/// A Rust stub plugin that records every event and adjusts containers with
/// a closure.
#[derive(Clone, Default)]
pub struct TestPlugin {
    pub log: Arc<Mutex<Vec<String>>>,
    /// The pod of every CreateContainer, as the plugin got it.
    pub pods: Arc<Mutex<Vec<api::PodSandbox>>>,
    pub adjust: Option<Adjuster>,
    pub synced: Arc<Mutex<Vec<(usize, usize)>>>,
    pub delay: Option<Duration>,
}

impl TestPlugin {
    pub fn adjusting(
        f: impl Fn(&api::Container) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)>
            + Send
            + Sync
            + 'static,
    ) -> TestPlugin {
        TestPlugin {
            adjust: Some(Arc::new(f)),
            ..Default::default()
        }
    }

    pub fn events(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn note(&self, what: String) {
        self.log.lock().unwrap().push(what);
    }

    async fn pause(&self) {
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
    }
}

#[nri_stub::plugin]
impl Plugin for TestPlugin {
    async fn configure(&self, _info: &ConfigureInfo) -> HandlerResult<EventMask> {
        Ok(EventMask::EMPTY)
    }

    async fn synchronize(
        &self,
        pods: Vec<api::PodSandbox>,
        containers: Vec<api::Container>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.synced
            .lock()
            .unwrap()
            .push((pods.len(), containers.len()));
        Ok(vec![])
    }

    async fn shutdown(&self) {
        self.note("Shutdown".into());
    }

    async fn run_pod_sandbox(&self, pod: &api::PodSandbox) -> HandlerResult<()> {
        self.note(format!("RunPodSandbox {}", pod.id));
        Ok(())
    }

    async fn stop_pod_sandbox(&self, pod: &api::PodSandbox) -> HandlerResult<()> {
        self.note(format!("StopPodSandbox {}", pod.id));
        Ok(())
    }

    async fn remove_pod_sandbox(&self, pod: &api::PodSandbox) -> HandlerResult<()> {
        self.note(format!("RemovePodSandbox {}", pod.id));
        Ok(())
    }

    async fn create_container(
        &self,
        pod: &api::PodSandbox,
        ctr: &api::Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        self.note(format!("CreateContainer {}", ctr.id));
        self.pods.lock().unwrap().push(pod.clone());
        self.pause().await;
        match &self.adjust {
            Some(f) => f(ctr),
            None => Ok((ContainerAdjustment::default(), vec![])),
        }
    }

    async fn start_container(
        &self,
        _pod: &api::PodSandbox,
        ctr: &api::Container,
    ) -> HandlerResult<()> {
        self.note(format!("StartContainer {}", ctr.id));
        Ok(())
    }

    async fn stop_container(
        &self,
        _pod: &api::PodSandbox,
        ctr: &api::Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.note(format!("StopContainer {}", ctr.id));
        Ok(vec![])
    }

    async fn remove_container(
        &self,
        _pod: &api::PodSandbox,
        ctr: &api::Container,
    ) -> HandlerResult<()> {
        self.note(format!("RemoveContainer {}", ctr.id));
        Ok(())
    }
}
