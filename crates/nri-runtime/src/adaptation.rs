//! [`Adaptation`], the runtime's handle on NRI: construction, start and
//! stop, and one method per event (upstream's `Adaptation` methods).

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};

use log::info;
use nri_api::*;
use protobuf::Message;

use crate::connections::activate::start_plugins;
use crate::core_state::Core;
use crate::events::creation::Handed;
use crate::plugins::request::{for_request_of, Call, Request};
use crate::threads::runtime::RuntimeThread;
use crate::{
    connections::connect, connections::listener, events, sync, BuiltinPlugin, Error, Options,
    PluginSyncBlock, SyncFn, UpdateFn, NRI_VERSION,
};

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
    /// Whether the adaptation runs its own runtime thread (rather than the
    /// caller's runtime): then it starts one at each start and ends it at
    /// stop, so a stopped adaptation keeps no thread or fd.
    own_thread: bool,
    // Last: dropped after everything that may still spawn onto it.
    thread: Mutex<Option<RuntimeThread>>,
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
        let own_thread = opts.runtime.is_none();
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
        let audit = opts
            .audit
            .wants_records()
            .then(|| crate::results::audit::Auditor::start(opts.audit))
            .transpose()?
            .map(Arc::new);
        let core = Arc::new(Core {
            runtime_name: name.into(),
            runtime_version: version.into(),
            nri_version: opts.nri_version.unwrap_or_else(|| NRI_VERSION.to_string()),
            sync_fn: Box::new(sync_fn),
            update_fn: Box::new(update_fn),
            metrics: opts
                .metrics
                .unwrap_or_else(|| Arc::new(crate::metrics::NoMetrics)),
            deprecation: opts.deprecation,
            registration_timeout: opts.registration_timeout,
            request_timeout: opts.request_timeout,
            sync_timeout: opts.sync_timeout,
            event_timeout: opts.event_timeout,
            shutdown_on_stop: opts.shutdown_on_stop,
            plugin_timeouts: opts.plugin_timeouts,
            plugin_handover: opts.plugin_handover,
            identities: opts.identities,
            names: Default::default(),
            audit,
            wasm_memory_limit: opts.wasm_memory_limit,
            wasm_cache_dir: opts.wasm_cache_dir.clone(),
            wasm_engine: opts.wasm_engine.clone(),
            wasm_enabled: crate::plugins::wasm::enabled(
                opts.wasm_disabled,
                opts.wasm_engine.is_some(),
            ),
            pod_guard: opts
                .validator
                .filter(|_| opts.guard_pods)
                .map(nri_validator::DefaultValidator::new),
            handle: RwLock::new(Some(handle)),
            epoch: tokio::sync::watch::Sender::new(0),
            accepting: AtomicBool::new(false),
            plugins: Mutex::new(Vec::new()),
            joining: Mutex::new(Vec::new()),
            events: crate::event_lock::EventLock::new(opts.pod_concurrency),
            concurrent_plugins: opts.concurrent_plugins.clone(),
            state: AtomicU64::new(0),
            sync_lock: sync::lock::SyncLock::default(),
            unregistered: nri_api::mux::Budget::new(connect::UNREGISTERED_BUDGET),
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
            own_thread,
            thread: Mutex::new(thread),
        })
    }

    /// Runs `f` on the adaptation's runtime and waits for it. Dropping the
    /// returned future ends `f` too: that is how a runtime cancels an event
    /// (upstream: its context), and no plugin is blamed for it.
    async fn on_core<T, F>(&self, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, Error>> + Send + 'static,
    {
        let Some(handle) = self.core.handle() else {
            return Err(Error::NotRunning);
        };
        let task = handle.spawn(f);
        let _cancel_on_drop = AbortOnDrop(task.abort_handle());
        match task.await {
            Ok(res) => res,
            Err(e) if e.is_panic() => Err(task_panicked(e.into_panic())),
            Err(_) => Err(Error::NotRunning),
        }
    }

    /// Runs an event, if the adaptation is running. An event that waits
    /// for one plugin at most is polled where the caller waits, with the
    /// core's runtime entered for its timers and I/O: its request then
    /// leaves from the caller's thread, which the core's thread need not
    /// be woken for. An event that waits for several runs on the core's
    /// runtime: there each reply wakes only the core's thread, which goes
    /// on to the next plugin, where the caller's thread would be woken for
    /// every reply (PERFORMANCE.md, "What limits the targets", 1.). The
    /// event's future is boxed at once: it is several KiB, and every move
    /// of it would copy it.
    fn on_event<T, F>(&self, event: Event, f: F) -> impl Future<Output = Result<T, Error>> + '_
    where
        T: Send + 'static,
        F: Future<Output = Result<T, Error>> + Send + 'static,
    {
        let f = Box::pin(f);
        async move {
            if !self.is_running() {
                return Err(Error::NotRunning);
            }
            if self.core.waits_for_several(event) {
                return self.on_core(f).await;
            }
            let Some(handle) = self.core.handle() else {
                return Err(Error::NotRunning);
            };
            // A stop waits for the event lock, which the event holds to
            // its end, so the runtime entered outlives the event.
            let entered = Entered { handle, f };
            futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(entered))
                .await
                .unwrap_or_else(|p| Err(task_panicked(p)))
        }
    }

    /// Starts builtin and pre-installed plugins, synchronizes them with the
    /// runtime, then opens the socket for external plugins (upstream `Start`).
    pub async fn start(&self) -> Result<(), Error> {
        if self.is_running() {
            return Err(Error::Start("NRI adaptation is already running".into()));
        }
        info!("runtime interface starting up...");
        self.ensure_thread()?;
        self.core.accept_plugins();
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

    /// Whether `event` must reach the core now. False only while running,
    /// no active plugin subscribes to it (for `CreateContainer`: and no
    /// validator is active; for `RunPodSandbox`: and required plugins do not
    /// guard pods) and no plugin has left since the last event (which the
    /// next event prunes, as upstream's does). The event's outcome is then known: success
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
    /// external connections are closed too, handshakes and syncs in
    /// progress are cancelled (none adds its plugin afterwards), and the
    /// adaptation's own runtime thread ends, with every fd it had; the
    /// next start begins a new one.
    pub async fn stop(&self) {
        info!("runtime interface shutting down...");
        let _no_event_in_progress = self.core.events.all().await;
        if self.core.shutdown_on_stop && self.is_running() {
            let core = Arc::clone(&self.core);
            let _ = self
                .on_core(async move {
                    core.shut_down_plugins().await;
                    Ok(())
                })
                .await;
        }
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
        self.core.stop_all();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if thread.is_some() {
            self.core.set_handle(None);
        }
        drop(thread);
    }

    /// Starts a runtime thread if the adaptation owns one and stop ended it.
    fn ensure_thread(&self) -> Result<(), Error> {
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if self.own_thread && thread.is_none() {
            let (t, h) = RuntimeThread::spawn()?;
            self.core.set_handle(Some(h));
            *thread = Some(t);
        }
        Ok(())
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
        self.core
            .handle()
            .map_or(0, |h| h.metrics().num_alive_tasks())
    }

    /// Whether a plugin of this full name (`idx-name`) is active: registered
    /// and its connection open.
    pub fn has_plugin(&self, name: &str) -> bool {
        self.core
            .snapshot()
            .iter()
            .any(|p| p.name == name && !p.is_closed())
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

    /// The identity of the active plugin `idx-name`, as recorded when it
    /// connected or was launched (none for builtin and WASM plugins). A
    /// runtime's own checks may use it to tell who stands behind a name.
    pub fn plugin_identity(&self, name: &str) -> Option<crate::PeerIdentity> {
        self.core
            .snapshot()
            .iter()
            .find(|p| p.name == name && !p.is_closed())
            .and_then(|p| p.identity.clone())
    }

    pub async fn run_pod_sandbox(&self, req: RunPodSandboxRequest) -> Result<(), Error> {
        let core = Arc::clone(&self.core);
        self.on_event(
            Event::RUN_POD_SANDBOX,
            events::run_pod_sandbox(core, Request::Decoded(req)),
        )
        .await
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
        self.on_event(
            Event::CREATE_CONTAINER,
            events::create_container(core, Handed::Decoded(req)),
        )
        .await
    }

    /// [`create_container`](Self::create_container) of a request the
    /// runtime holds encoded, answered encoded: how the C ABI relays the
    /// event. With one plugin taking the event and no validator or audit
    /// log, the request is checked, not decoded, and the plugin is sent
    /// these bytes; otherwise it is decoded on the adaptation's own thread
    /// (so that one thread makes and frees its ~200 allocations), and
    /// plugins are sent these bytes until one adjusts the container. Either
    /// way that takes bytes with the empty parts upstream adds to a
    /// container before the first plugin (hooks, linux resources, memory
    /// and CPU), as go/adaptation encodes them.
    pub async fn create_container_wire(&self, encoded: Vec<u8>) -> Result<Vec<u8>, Error> {
        let core = Arc::clone(&self.core);
        self.on_event(Event::CREATE_CONTAINER, async move {
            let rsp = events::create_container(core, Handed::Encoded(encoded)).await?;
            rsp.write_to_bytes().map_err(|e| {
                Error::InvalidMessage(format!(
                    "cannot encode {}: {e}",
                    CreateContainerResponse::NAME
                ))
            })
        })
        .await
    }

    /// Relays an event that plugins only observe, its request held
    /// encoded by the runtime: RunPodSandbox, UpdatePodSandbox (whose
    /// response is always empty), PostUpdatePodSandbox, StopPodSandbox,
    /// RemovePodSandbox, PostCreateContainer, StartContainer,
    /// PostStartContainer, PostUpdateContainer and RemoveContainer. The
    /// bytes are checked and sent to plugins as they are; they are decoded
    /// only for a plugin that needs the message (builtin, StateChange) or
    /// for the required-plugins guard of RunPodSandbox. Another event is
    /// refused as invalid.
    pub async fn relay_encoded(&self, event: Event, encoded: Vec<u8>) -> Result<(), Error> {
        // Checked on the caller's thread: it allocates nothing.
        let relay = match event {
            Event::RUN_POD_SANDBOX => {
                let req = Request::checked(encoded.into())?;
                let core = Arc::clone(&self.core);
                return self
                    .on_event(event, events::run_pod_sandbox(core, req))
                    .await;
            }
            // Those with a response have calls of their own.
            Event::CREATE_CONTAINER | Event::UPDATE_CONTAINER | Event::STOP_CONTAINER => {
                return Err(not_observed(event));
            }
            other => for_request_of!(
                other,
                |T| relay_checked::<T>,
                return Err(not_observed(other))
            ),
        };
        let relayed = relay(Arc::clone(&self.core), encoded)?;
        self.on_event(event, relayed).await
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
        self.on_event(Event::UPDATE_CONTAINER, events::merge_event(core, req))
            .await
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
        self.on_event(Event::STOP_CONTAINER, events::merge_event(core, req))
            .await
    }

    pub async fn remove_container(&self, req: RemoveContainerRequest) -> Result<(), Error> {
        self.relay_all(req).await
    }

    async fn relay_all<C: Call>(&self, req: C) -> Result<(), Error> {
        let core = Arc::clone(&self.core);
        self.on_event(C::EVENT, events::relay_all(core, Request::Decoded(req)))
            .await
    }
}

/// The refusal of an event `relay_encoded` does not relay.
fn not_observed(event: Event) -> Error {
    Error::InvalidMessage(format!(
        "{} is not an event plugins only observe",
        event.pretty_name()
    ))
}

/// Relaying `encoded` as a `C`, once it is checked.
fn relay_checked<C: Call + protobuf::MessageFull>(
    core: Arc<Core>,
    encoded: Vec<u8>,
) -> Result<futures::future::BoxFuture<'static, Result<(), Error>>, Error> {
    let req = Request::<C>::checked(encoded.into())?;
    Ok(Box::pin(events::relay_all(core, req)))
}

impl Drop for Adaptation {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// A future polled with a runtime's context entered, wherever it is polled:
/// its timers and sockets are the runtime's, driven by the runtime's thread.
struct Entered<F> {
    handle: tokio::runtime::Handle,
    f: F,
}

impl<F: Future + Unpin> Future for Entered<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = &mut *self;
        let _entered = this.handle.enter();
        std::pin::Pin::new(&mut this.f).poll(cx)
    }
}

/// Aborts a task when dropped (a finished task ignores it).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A panic of a task or event, wherever it was polled, as the runtime is
/// told of it.
fn task_panicked(p: Box<dyn std::any::Any + Send>) -> Error {
    let message = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    Error::Start(format!("NRI adaptation task panicked: {message}"))
}
