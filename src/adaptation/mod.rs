//! The runtime side of NRI (upstream `pkg/adaptation`): launches and accepts
//! plugins, relays pod and container events to them in index order, merges
//! their adjustments and updates, and has validators vet the result.
//!
//! ```no_run
//! # async fn demo() -> Result<(), nri::adaptation::Error> {
//! use nri::adaptation::{Adaptation, BoxError, Options, SyncCb};
//! use nri::api::ContainerUpdate;
//!
//! let nri = Adaptation::new(
//!     "my-runtime",
//!     "v1.0",
//!     |cb: SyncCb| async move {
//!         // Snapshot pods and containers under the runtime's lock...
//!         let updates = cb.call(vec![], vec![]).await?;
//!         // ...and apply `updates`.
//!         Ok::<_, BoxError>(())
//!     },
//!     |updates: Vec<ContainerUpdate>| async move {
//!         // Apply unsolicited updates; return those that failed.
//!         Ok::<_, BoxError>(Vec::new())
//!     },
//!     Options::default().socket_path("/tmp/nri.sock"),
//! )?;
//! nri.start().await?;
//! # Ok(()) }
//! ```
//!
//! Threading: all plugin I/O runs on one tokio runtime, by default a
//! current-thread runtime on a thread of its own (a ttrpc round trip is
//! several times cheaper there than on a multi-thread runtime on small
//! machines; see docs/ARCHITECTURE.md). The event methods can be awaited
//! from any runtime and are serialized, as upstream's are.

mod builtin;
mod call;
mod callbacks;
mod connect;
mod error;
mod launch;
mod listener;
mod plugin;
mod replies;
pub(crate) mod result;
mod sync;

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use log::{info, warn};

pub use builtin::{BuiltinHandlers, BuiltinPlugin};
pub use callbacks::{Deprecation, DeprecationRecorder, Metrics, SyncCb, SyncFn, UpdateFn};
pub use error::{BoxError, Error};
pub(crate) use sync::EncodedState;
pub use sync::PluginSyncBlock;

use crate::api::*;
use plugin::{Origin, Plugin, Transport};

/// Where pre-installed plugins are looked for.
pub const DEFAULT_PLUGIN_PATH: &str = "/opt/nri/plugins";
/// Where their configuration drop-ins are looked for.
pub const DEFAULT_PLUGIN_CONFIG_PATH: &str = "/etc/nri/conf.d";
/// The socket external plugins connect to.
pub const DEFAULT_SOCKET_PATH: &str = crate::api::DEFAULT_SOCKET_PATH;
/// The NRI version this adaptation implements, sent to plugins in Configure.
pub const NRI_VERSION: &str = "v0.12.2";

static REGISTRATION_TIMEOUT_MS: AtomicU64 =
    AtomicU64::new(DEFAULT_REGISTRATION_TIMEOUT.as_millis() as u64);
static REQUEST_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_REQUEST_TIMEOUT.as_millis() as u64);

/// Sets the process-wide plugin registration timeout (upstream
/// `SetPluginRegistrationTimeout`); adaptations without their own
/// [`Options::registration_timeout`] use it from then on.
pub fn set_plugin_registration_timeout(t: Duration) {
    REGISTRATION_TIMEOUT_MS.store(t.as_millis() as u64, Ordering::Relaxed);
}

/// Sets the process-wide plugin request timeout (upstream
/// `SetPluginRequestTimeout`).
pub fn set_plugin_request_timeout(t: Duration) {
    REQUEST_TIMEOUT_MS.store(t.as_millis() as u64, Ordering::Relaxed);
}

/// Options of an [`Adaptation`], with upstream's defaults.
pub struct Options {
    plugin_path: PathBuf,
    plugin_config_path: PathBuf,
    socket_path: PathBuf,
    external_connections: bool,
    builtin: Vec<BuiltinPlugin>,
    metrics: Option<Arc<dyn Metrics>>,
    deprecation: Option<Arc<dyn DeprecationRecorder>>,
    registration_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    max_pending_connections: usize,
    runtime: Option<tokio::runtime::Handle>,
    nri_version: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            plugin_path: DEFAULT_PLUGIN_PATH.into(),
            plugin_config_path: DEFAULT_PLUGIN_CONFIG_PATH.into(),
            socket_path: DEFAULT_SOCKET_PATH.into(),
            external_connections: true,
            builtin: Vec::new(),
            metrics: None,
            deprecation: None,
            registration_timeout: None,
            request_timeout: None,
            max_pending_connections: 1024,
            runtime: None,
            nri_version: None,
        }
    }
}

impl Options {
    /// The directory of pre-installed plugins (`WithPluginPath`).
    pub fn plugin_path(mut self, p: impl Into<PathBuf>) -> Self {
        self.plugin_path = p.into();
        self
    }
    /// The directory of configuration drop-ins (`WithPluginConfigPath`).
    pub fn plugin_config_path(mut self, p: impl Into<PathBuf>) -> Self {
        self.plugin_config_path = p.into();
        self
    }
    /// The socket for external plugins (`WithSocketPath`).
    pub fn socket_path(mut self, p: impl Into<PathBuf>) -> Self {
        self.socket_path = p.into();
        self
    }
    /// Accept no external plugins (`WithDisabledExternalConnections`).
    pub fn disable_external_connections(mut self) -> Self {
        self.external_connections = false;
        self
    }
    /// Adds builtin plugins (`WithBuiltinPlugins`).
    pub fn builtin_plugins(mut self, plugins: impl IntoIterator<Item = BuiltinPlugin>) -> Self {
        self.builtin.extend(plugins);
        self
    }
    /// Enables the builtin default validator with this configuration
    /// (`WithDefaultValidator`); nothing happens unless `cfg.enable`.
    pub fn default_validator(mut self, cfg: crate::validator::DefaultValidatorConfig) -> Self {
        if let Some(v) = builtin::default_validator(cfg) {
            self.builtin.insert(0, v);
        }
        self
    }
    /// Where plugin metrics go (`WithMetrics`).
    pub fn metrics(mut self, m: Arc<dyn Metrics>) -> Self {
        self.metrics = Some(m);
        self
    }
    /// Who hears about deprecated plugin behaviour (`WithDeprecationRecorder`).
    pub fn deprecation_recorder(mut self, d: Arc<dyn DeprecationRecorder>) -> Self {
        self.deprecation = Some(d);
        self
    }
    /// This adaptation's registration timeout, instead of the process-wide one.
    pub fn registration_timeout(mut self, t: Duration) -> Self {
        self.registration_timeout = Some(t);
        self
    }
    /// This adaptation's request timeout, instead of the process-wide one.
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.request_timeout = Some(t);
        self
    }
    /// Most external connections in the registration handshake at once;
    /// more are closed at once (default 1024).
    pub fn max_pending_connections(mut self, n: usize) -> Self {
        self.max_pending_connections = n.max(1);
        self
    }
    /// Run plugin I/O on this runtime instead of a dedicated thread.
    pub fn runtime(mut self, handle: tokio::runtime::Handle) -> Self {
        self.runtime = Some(handle);
        self
    }

    /// The NRI version the runtime reports to plugins in `Configure`
    /// (default: [`NRI_VERSION`], the release this crate implements). The Go
    /// wrapper passes the version in its build info, as upstream reports;
    /// upstream's tests set it with `WithTestNRIVersion`.
    pub fn nri_version(mut self, v: impl Into<String>) -> Self {
        self.nri_version = Some(v.into());
        self
    }
}

/// State shared by the adaptation, its plugins and their connections.
pub(crate) struct Core {
    pub(crate) runtime_name: String,
    pub(crate) runtime_version: String,
    pub(crate) nri_version: String,
    pub(crate) sync_fn: Box<dyn SyncFn>,
    pub(crate) update_fn: Box<dyn UpdateFn>,
    pub(crate) metrics: Arc<dyn Metrics>,
    pub(crate) deprecation: Option<Arc<dyn DeprecationRecorder>>,
    registration_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    handle: tokio::runtime::Handle,
    /// Active plugins in invocation order.
    plugins: Mutex<Vec<Arc<Plugin>>>,
    /// Serializes events, as upstream's adaptation lock does. Only events
    /// take it: registration, sync and unsolicited updates never wait for it.
    events: tokio::sync::Mutex<()>,
    /// Whether the adaptation is running, and the events some active plugin
    /// subscribes to, in one word, so [`Core::wants`] sees both as they were
    /// at one instant. Written only under the plugin list's lock.
    ///
    /// Running is between a successful `start` and `stop`. Events are
    /// refused outside it, since builtin validators only exist while running
    /// and an event let through without them would create an unvalidated
    /// container. Checked under the event lock, which `stop` takes, so an
    /// event either runs entirely before the plugins are closed or not at
    /// all.
    state: AtomicU64,
    sync_lock: sync::SyncLock,
}

/// The bit of [`Core::state`] saying the adaptation is running; the low 32
/// bits are an [`EventMask`].
const RUNNING: u64 = 1 << 63;

impl Core {
    pub(crate) fn registration_timeout(&self) -> Duration {
        self.registration_timeout.unwrap_or_else(|| {
            Duration::from_millis(REGISTRATION_TIMEOUT_MS.load(Ordering::Relaxed))
        })
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
            .unwrap_or_else(|| Duration::from_millis(REQUEST_TIMEOUT_MS.load(Ordering::Relaxed)))
    }

    pub(crate) fn spawn<F>(&self, f: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.handle.spawn(f);
    }

    /// Takes the event lock for one event, if the adaptation is running.
    pub(crate) async fn serialize_event(&self) -> Result<tokio::sync::MutexGuard<'_, ()>, Error> {
        let guard = self.events.lock().await;
        if !self.is_running() {
            return Err(Error::NotRunning);
        }
        Ok(guard)
    }

    /// The active plugins, for one event.
    fn snapshot(&self) -> Vec<Arc<Plugin>> {
        self.lock_plugins().clone()
    }

    fn lock_plugins(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Plugin>>> {
        self.plugins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `event` would reach a plugin now. False only while running
    /// with no plugin subscribed to it (for CreateContainer, no validator
    /// either): the event's outcome is then known without running it, and
    /// a caller may skip it, as upstream costs nothing without plugins. One
    /// load of a word published with the plugin list, so running and the
    /// subscriptions are seen as they were at one instant.
    pub(crate) fn wants(&self, event: Event) -> bool {
        let state = self.state.load(Ordering::Acquire);
        let mask = EventMask::from_raw(state as u32 as i32);
        state & RUNNING == 0
            || !EventMask::VALID.is_set(event)
            || mask.is_set(event)
            || (event == Event::CREATE_CONTAINER
                && mask.is_set(Event::VALIDATE_CONTAINER_ADJUSTMENT))
    }

    fn is_running(&self) -> bool {
        self.state.load(Ordering::Acquire) & RUNNING != 0
    }

    /// Republishes [`Core::state`]; `plugins` is the locked list.
    fn publish(&self, plugins: &[Arc<Plugin>], running: bool) {
        let events = plugins
            .iter()
            .fold(0u32, |m, p| m | p.events().raw() as u32);
        let running = if running { RUNNING } else { 0 };
        self.state
            .store(u64::from(events) | running, Ordering::Release);
    }

    /// Republishes the events after the locked list `plugins` changed.
    fn publish_events(&self, plugins: &[Arc<Plugin>]) {
        self.publish(plugins, self.is_running());
    }

    fn set_running(&self, running: bool) {
        let plugins = self.lock_plugins();
        self.publish(&plugins, running);
    }

    /// Adds plugins, keeping index order (stable: equal indices keep their
    /// arrival order, which upstream leaves unspecified).
    fn add_plugins(&self, new: impl IntoIterator<Item = Arc<Plugin>>) {
        let count = {
            let mut plugins = self.lock_plugins();
            plugins.extend(new);
            plugins.sort_by(|a, b| a.idx.cmp(&b.idx));
            self.publish_events(&plugins);
            plugins.len()
        };
        self.metrics.update_plugin_count(count);
    }

    /// Drops closed plugins; called after every event, as upstream does.
    fn prune_closed(&self) {
        let (closed, count) = {
            let mut plugins = self.lock_plugins();
            let (closed, open): (Vec<_>, Vec<_>) = plugins.drain(..).partition(|p| p.is_closed());
            *plugins = open;
            self.publish_events(&plugins);
            (closed, plugins.len())
        };
        for p in closed {
            info!("removing closed plugin {}", p.qualified_name());
            p.close();
        }
        self.metrics.update_plugin_count(count);
    }

    fn close_all(&self) {
        let plugins = {
            let mut plugins = self.lock_plugins();
            let all = std::mem::take(&mut *plugins);
            self.publish_events(&plugins);
            all
        };
        for p in plugins {
            p.close();
        }
        self.metrics.update_plugin_count(0);
    }
}

/// The thread running the adaptation's own tokio runtime.
struct RuntimeThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RuntimeThread {
    fn spawn() -> Result<(RuntimeThread, tokio::runtime::Handle), Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::InvalidConfig(format!("tokio runtime: {e}")))?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("nri-adaptation".into())
            .spawn(move || {
                let _ = rt.block_on(stopped);
            })
            .map_err(|e| Error::InvalidConfig(format!("adaptation thread: {e}")))?;
        Ok((
            RuntimeThread {
                stop: Some(stop),
                thread: Some(thread),
            },
            handle,
        ))
    }
}

impl Drop for RuntimeThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            // Never join from the runtime's own thread (a drop from inside a task).
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

/// The NRI runtime adaptation (upstream `Adaptation`).
pub struct Adaptation {
    core: Arc<Core>,
    plugin_path: PathBuf,
    plugin_config_path: PathBuf,
    socket_path: PathBuf,
    external_connections: bool,
    max_pending_connections: usize,
    builtin: Vec<BuiltinPlugin>,
    listener: Mutex<Option<listener::Listener>>,
    // Last: dropped after everything that may still spawn onto it.
    _thread: Option<RuntimeThread>,
}

impl Adaptation {
    /// Creates an adaptation for the runtime `name` `version` (upstream `New`).
    pub fn new(
        name: impl Into<String>,
        version: impl Into<String>,
        sync_fn: impl SyncFn,
        update_fn: impl UpdateFn,
        opts: Options,
    ) -> Result<Adaptation, Error> {
        let (thread, handle) = match opts.runtime {
            Some(h) => (None, h),
            None => {
                let (t, h) = RuntimeThread::spawn()?;
                (Some(t), h)
            }
        };
        for b in &opts.builtin {
            if b.base.is_empty() || b.index.is_empty() {
                return Err(Error::InvalidConfig(format!(
                    "invalid builtin plugin {b:?}: empty name or index"
                )));
            }
        }
        let core = Arc::new(Core {
            runtime_name: name.into(),
            runtime_version: version.into(),
            nri_version: opts.nri_version.unwrap_or_else(|| NRI_VERSION.to_string()),
            sync_fn: Box::new(sync_fn),
            update_fn: Box::new(update_fn),
            metrics: opts
                .metrics
                .unwrap_or_else(|| Arc::new(callbacks::NoMetrics)),
            deprecation: opts.deprecation,
            registration_timeout: opts.registration_timeout,
            request_timeout: opts.request_timeout,
            handle,
            plugins: Mutex::new(Vec::new()),
            events: tokio::sync::Mutex::new(()),
            state: AtomicU64::new(0),
            sync_lock: sync::SyncLock::default(),
        });
        info!("runtime interface created");
        Ok(Adaptation {
            core,
            plugin_path: opts.plugin_path,
            plugin_config_path: opts.plugin_config_path,
            socket_path: opts.socket_path,
            external_connections: opts.external_connections,
            max_pending_connections: opts.max_pending_connections,
            builtin: opts.builtin,
            listener: Mutex::new(None),
            _thread: thread,
        })
    }

    /// Runs `f` on the adaptation's runtime and waits for it.
    async fn on_core<T, F>(&self, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, Error>> + Send + 'static,
    {
        match self.core.handle.spawn(f).await {
            Ok(res) => res,
            Err(e) if e.is_panic() => Err(Error::Start(format!(
                "NRI adaptation task panicked: {}",
                panic_message(e.into_panic())
            ))),
            Err(_) => Err(Error::NotRunning),
        }
    }

    /// Runs an event on the adaptation's runtime, if it is running.
    async fn on_event<T, F>(&self, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, Error>> + Send + 'static,
    {
        if !self.is_running() {
            return Err(Error::NotRunning);
        }
        self.on_core(f).await
    }

    /// Starts builtin and pre-installed plugins, synchronizes them with the
    /// runtime, then opens the socket for external plugins (upstream `Start`).
    pub async fn start(&self) -> Result<(), Error> {
        if self.is_running() {
            return Err(Error::Start("NRI adaptation is already running".into()));
        }
        info!("runtime interface starting up...");
        let core = Arc::clone(&self.core);
        let builtin = self.builtin.clone();
        let (plugin_path, config_path) =
            (self.plugin_path.clone(), self.plugin_config_path.clone());
        self.on_core(start_plugins(core, builtin, plugin_path, config_path))
            .await?;
        if self.external_connections {
            let core = Arc::clone(&self.core);
            let path = self.socket_path.clone();
            let max_pending = self.max_pending_connections;
            let l = self
                .on_core(async move { listener::Listener::start(core, &path, max_pending) })
                .await?;
            *self.listener.lock().unwrap_or_else(|e| e.into_inner()) = Some(l);
        }
        self.core.set_running(true);
        Ok(())
    }

    /// Whether `event` would reach any plugin now. False only while running
    /// and no active plugin subscribes to it (for `CreateContainer`: and no
    /// validator is active). The event's outcome is then known: success
    /// with the response of an event no plugin saw. A runtime may skip the
    /// event and save encoding the request (the Go wrapper does).
    pub fn wants_event(&self, event: Event) -> bool {
        self.core.wants(event)
    }

    /// Whether the adaptation is started and not stopped.
    pub fn is_running(&self) -> bool {
        self.core.is_running()
    }

    /// Stops accepting plugins and closes every plugin, killing launched
    /// ones (upstream `Stop`). Waits for an event in progress to finish,
    /// as upstream's lock does; later events are refused. Unlike upstream,
    /// external connections are closed too.
    pub async fn stop(&self) {
        info!("runtime interface shutting down...");
        let _no_event_in_progress = self.core.events.lock().await;
        self.shut_down();
    }

    fn shut_down(&self) {
        self.core.set_running(false);
        if let Some(l) = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            l.stop();
        }
        self.core.close_all();
    }

    /// Holds off the synchronization of newly connecting plugins (upstream
    /// `BlockPluginSync`). Events are not affected.
    pub async fn block_plugin_sync(&self) -> PluginSyncBlock {
        self.core.sync_lock.block().await
    }

    /// [`block_plugin_sync`](Self::block_plugin_sync) for threads outside
    /// any async runtime.
    pub fn block_plugin_sync_blocking(&self) -> PluginSyncBlock {
        self.core.sync_lock.block_blocking()
    }

    /// Tasks alive on the adaptation's runtime: connections, handshakes,
    /// watchers. For leak checks in tests and diagnostics.
    pub fn alive_tasks(&self) -> usize {
        self.core.handle.metrics().num_alive_tasks()
    }

    /// The full names (`idx-name`) of the active plugins, in invocation order.
    pub fn plugins(&self) -> Vec<String> {
        self.core
            .snapshot()
            .iter()
            .filter(|p| !p.is_closed())
            .map(|p| p.name.clone())
            .collect()
    }

    pub async fn run_pod_sandbox(&self, req: RunPodSandboxRequest) -> Result<(), Error> {
        self.relay_all(req).await
    }

    /// Plugins can only observe this event; the response is always empty.
    pub async fn update_pod_sandbox(
        &self,
        req: UpdatePodSandboxRequest,
    ) -> Result<UpdatePodSandboxResponse, Error> {
        self.relay_all(req).await?;
        Ok(UpdatePodSandboxResponse::default())
    }

    pub async fn post_update_pod_sandbox(
        &self,
        req: PostUpdatePodSandboxRequest,
    ) -> Result<(), Error> {
        self.relay_all(req).await
    }

    pub async fn stop_pod_sandbox(&self, req: StopPodSandboxRequest) -> Result<(), Error> {
        self.relay_all(req).await
    }

    pub async fn remove_pod_sandbox(&self, req: RemovePodSandboxRequest) -> Result<(), Error> {
        self.relay_all(req).await
    }

    /// Collects the plugins' adjustments of the new container and their
    /// updates of other containers, merged, then has validators vet them.
    pub async fn create_container(
        &self,
        req: CreateContainerRequest,
    ) -> Result<CreateContainerResponse, Error> {
        let core = Arc::clone(&self.core);
        self.on_event(events::create_container(core, req)).await
    }

    pub async fn post_create_container(
        &self,
        req: PostCreateContainerRequest,
    ) -> Result<(), Error> {
        self.relay_all(req).await
    }

    pub async fn start_container(&self, req: StartContainerRequest) -> Result<(), Error> {
        self.relay_all(req).await
    }

    pub async fn post_start_container(&self, req: PostStartContainerRequest) -> Result<(), Error> {
        self.relay_all(req).await
    }

    /// Collects the plugins' updates; the target container's merged update
    /// comes last (an empty `ContainerUpdate` if no plugin changed it,
    /// where upstream has a nil entry).
    pub async fn update_container(
        &self,
        req: UpdateContainerRequest,
    ) -> Result<UpdateContainerResponse, Error> {
        let core = Arc::clone(&self.core);
        self.on_event(events::update_container(core, req)).await
    }

    pub async fn post_update_container(
        &self,
        req: PostUpdateContainerRequest,
    ) -> Result<(), Error> {
        self.relay_all(req).await
    }

    /// Collects the plugins' updates of other containers.
    pub async fn stop_container(
        &self,
        req: StopContainerRequest,
    ) -> Result<StopContainerResponse, Error> {
        let core = Arc::clone(&self.core);
        self.on_event(events::stop_container(core, req)).await
    }

    pub async fn remove_container(&self, req: RemoveContainerRequest) -> Result<(), Error> {
        self.relay_all(req).await
    }

    async fn relay_all<C: call::Call>(&self, req: C) -> Result<(), Error> {
        let core = Arc::clone(&self.core);
        self.on_event(events::relay_all(core, req)).await
    }
}

impl Drop for Adaptation {
    fn drop(&mut self) {
        self.shut_down();
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Brings up builtin and pre-installed plugins and synchronizes them in one
/// runtime sync call, as upstream's `startPlugins` does.
async fn start_plugins(
    core: Arc<Core>,
    builtin: Vec<BuiltinPlugin>,
    plugin_path: PathBuf,
    config_path: PathBuf,
) -> Result<(), Error> {
    let mut started: Vec<Arc<Plugin>> = Vec::new();
    for b in builtin {
        let p = Arc::new(Plugin::new(
            b.base.clone(),
            b.index.clone(),
            Origin::Builtin,
            None,
            String::new(),
            Transport::Builtin(b.handlers.clone()),
            Arc::clone(&core),
        ));
        p.configure().await.map_err(|e| {
            Error::Start(format!(
                "failed to initialize/start builtin NRI plugin {:?}: {e}",
                b.base
            ))
        })?;
        started.push(p);
    }

    let discovered = launch::discover(&plugin_path, &config_path)?;
    let launches = discovered.into_iter().filter_map(|d| {
        if launch::is_wasm(&d.path) {
            launch::skip(
                &d,
                &format!(
                    "can't load WASM plugin {}: no WASM support",
                    d.path.display()
                ),
            );
            return None;
        }
        let core = Arc::clone(&core);
        Some(async move {
            let res = match launch::launch(&d) {
                Ok((stream, launched)) => connect::connect(core, stream, Some(launched)).await,
                Err(e) => Err(e),
            };
            res.map_err(|e| launch::skip(&d, &e)).ok()
        })
    });
    for c in futures::future::join_all(launches)
        .await
        .into_iter()
        .flatten()
    {
        started.push(c);
    }

    let cb = SyncCb::new(
        sync::SyncTargets::Started(started.clone()),
        core.request_timeout(),
    );
    if let Err(e) = core.sync_fn.sync(cb).await {
        for p in &started {
            p.close();
        }
        return Err(Error::Runtime(
            format!("failed to synchronize pre-installed NRI Plugins: {e}").into(),
        ));
    }
    let active: Vec<_> = started.into_iter().filter(|p| !p.is_closed()).collect();
    for p in &active {
        info!("plugin {} started", p.qualified_name());
    }
    core.add_plugins(active);
    Ok(())
}

/// Synchronizes a newly connected external plugin and makes it active.
/// Holds the sync lock exclusively (waiting out [`PluginSyncBlock`]s; other
/// plugins' syncs queue behind it) but not the event lock: events and other
/// handshakes go on meanwhile.
pub(crate) async fn sync_and_add(core: Arc<Core>, plugin: Arc<Plugin>) {
    let _exclusive = core.sync_lock.exclusive().await;
    let cb = SyncCb::new(
        sync::SyncTargets::External(Arc::clone(&plugin)),
        core.request_timeout(),
    );
    match core.sync_fn.sync(cb).await {
        Ok(()) if !plugin.is_closed() => {
            info!("plugin {} registered", plugin.qualified_name());
            core.add_plugins([plugin]);
        }
        Ok(()) => warn!(
            "plugin {} went away during synchronization",
            plugin.qualified_name()
        ),
        Err(e) => {
            warn!(
                "failed to synchronize plugin {}: {e}",
                plugin.qualified_name()
            );
            plugin.close();
        }
    }
}

mod events;
