//! The plugin side of NRI (the Node Resource Interface of containerd and
//! CRI-O): connect to a runtime, register, get configured and
//! synchronized, then serve the events the plugin subscribed to.
//!
//! A plugin is a type implementing [`Plugin`]: one async method per NRI
//! event, each with a default that accepts the event and changes nothing.
//! [`#[nri_stub::plugin]`](macro@plugin) on the `impl` block subscribes the
//! plugin to exactly the events whose handlers the block defines. A
//! [`Stub`] connects the plugin to the runtime and serves it:
//!
//! ```no_run
//! use nri_stub::api::{Container, ContainerAdjustment, ContainerUpdate, PodSandbox};
//! use nri_stub::{HandlerResult, Plugin, Stub};
//!
//! /// Sets an environment variable in every container created.
//! struct Hello;
//!
//! #[nri_stub::plugin]
//! impl Plugin for Hello {
//!     async fn create_container(
//!         &self,
//!         pod: &PodSandbox,
//!         ctr: &Container,
//!     ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
//!         let mut adjustment = ContainerAdjustment::new();
//!         adjustment.add_env("HELLO", &format!("{}/{}", pod.name, ctr.name));
//!         Ok((adjustment, Vec::new()))
//!     }
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), nri_stub::StubError> {
//!     // Registers as "50-hello" on /var/run/nri/nri.sock (or on the
//!     // socket the runtime handed over, when it launched the plugin).
//!     let stub = Stub::builder().name("hello").idx("50").build(Hello)?;
//!     // Serves until the runtime goes away.
//!     stub.run().await
//! }
//! ```
//!
//! The companion crate `nri-plugin-kit` (library `plugin_kit`) adds what
//! most plugins need around this: Go-style flags, logging, YAML
//! configuration, a ready-made `main`, and with its `testing` feature a
//! runtime to run the plugin against in its own unit tests.
//!
//! # Runtimes
//!
//! The stub speaks NRI as upstream's Go stub of [`NRI_VERSION`] does. It
//! works with runtimes built on upstream's `pkg/adaptation` from v0.10.0
//! on and with nri-rs's runtime core; what an older runtime lacks (such
//! as [`StubBuilder::failure_policy`] before v0.12.4) it ignores. nri-rs's
//! test `tests/conformance/stub-against.sh` hosts plugins built on this
//! crate in each upstream release from v0.10.0 to v0.12.5, launched by the
//! runtime and dialing its socket.
//!
//! The connection is chosen as upstream's stub does: a stream given with
//! [`StubBuilder::connection`]; else the socket fd in `NRI_PLUGIN_SOCKET`
//! (set when the runtime launched the plugin); else the runtime's socket
//! path (default `/var/run/nri/nri.sock`). The name and index come from the
//! builder, else `NRI_PLUGIN_NAME`/`NRI_PLUGIN_IDX`, else the executable's
//! file name (`NN-name`).
#![warn(missing_docs)]

// Lets `#[nri_stub::plugin]`'s expansion (`::nri_stub::...`) resolve in this
// crate's own tests and doc examples too.
extern crate self as nri_stub;

mod plugin;
mod server;
mod service;

/// The NRI protocol types, re-exported so a plugin needs one dependency.
pub use nri_api as api;
/// Subscribes a [`Plugin`] to the events its handlers cover:
///
/// ```
/// use nri_stub::api::PodSandbox;
/// use nri_stub::{HandlerResult, Plugin};
///
/// struct PodLogger;
///
/// #[nri_stub::plugin]
/// impl Plugin for PodLogger {
///     async fn run_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
///         println!("started {}/{}", pod.namespace, pod.name);
///         Ok(())
///     }
///
///     async fn remove_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
///         println!("removed {}/{}", pod.namespace, pod.name);
///         Ok(())
///     }
/// }
///
/// let events = PodLogger.implemented_events();
/// assert_eq!(events.to_string(), "RunPodSandbox,RemovePodSandbox");
/// ```
pub use nri_stub_macros::plugin;

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use log::{info, warn};
use tokio::sync::{oneshot, watch};

pub use plugin::{ConfigureInfo, HandlerError, HandlerResult, Plugin};

use nri_api::mux::{self, Mux};
use nri_api::EventMask;
use service::Service;

/// The NRI version this stub implements, reported to the runtime at
/// registration (upstream's stub reports its Go module version).
pub const NRI_VERSION: &str = "v0.12.5";

/// Why a stub could not be built, started or kept running.
#[derive(Debug, thiserror::Error)]
pub enum StubError {
    /// The index is not two digits, or no index was given and the
    /// executable's file name is not `NN-name`.
    #[error(transparent)]
    InvalidName(#[from] api::PluginNameError),
    /// [`StubBuilder::idx`] was called although the runtime gave an index
    /// in `NRI_PLUGIN_IDX` (the runtime's wins; do not set both).
    #[error("plugin index already set ({0:?})")]
    IndexAlreadySet(String),
    /// The plugin defines no handler (missing `#[nri_stub::plugin]`?).
    #[error("plugin {0} does not implement any NRI request handlers")]
    NoHandlers(String),
    /// [`StubBuilder::events`] names events the plugin has no handler for.
    #[error("requested events {requested} include unhandled events {extra}")]
    UnhandledEvents {
        /// The events asked for.
        requested: EventMask,
        /// Those of them without a handler.
        extra: EventMask,
    },
    /// `NRI_PLUGIN_SOCKET` does not name an open stream socket.
    #[error(
        "invalid socket in environment ({}={value:?}): {reason}",
        api::PLUGIN_SOCKET_ENV
    )]
    InvalidSocketEnv {
        /// The variable's value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The runtime's socket could not be dialed.
    #[error("failed to connect to NRI service at {path}: {source}")]
    Connect {
        /// The socket dialed.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The connection could not be set up.
    #[error("failed to set up plugin connection: {0}")]
    Setup(String),
    /// The runtime refused the registration, or did not answer in time.
    #[error("failed to register with NRI/Runtime: {0}")]
    Register(String),
    /// Configuration failed: the plugin's `configure` returned an error,
    /// or the runtime did not configure the plugin in time.
    #[error("plugin was not configured: {0}")]
    Configure(String),
    /// A request to the runtime was made while not connected.
    #[error("stub: no service/connection")]
    NoService,
    /// A request to the runtime ([`StubHandle::update_containers`]) failed.
    #[error("runtime request failed: {0}")]
    Request(String),
    /// The runtime closed the connection (or it broke).
    #[error("connection to the runtime closed: {0}")]
    Closed(String),
    /// The stub was stopped while starting.
    #[error("stub stopped")]
    Stopped,
}

/// State shared by the stub, its handles and the per-connection service.
pub(crate) struct Shared {
    name: String,
    idx: String,
    /// Told to the runtime in Configure.
    failure_policy: Option<api::FailurePolicy>,
    state: Mutex<SharedState>,
}

struct SharedState {
    registration_timeout: Duration,
    request_timeout: Duration,
    runtime_nri_version: String,
    runtime: Option<api::ttrpc::RuntimeClient>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, SharedState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn full_name(&self) -> String {
        format!("{}-{}", self.idx, self.name)
    }

    pub(crate) fn adopt_configuration(&self, req: &api::ConfigureRequest) {
        let mut state = self.lock();
        state.registration_timeout = millis(req.registration_timeout);
        state.request_timeout = millis(req.request_timeout);
        state.runtime_nri_version = req.NRI_version.clone();
    }
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

/// Options of a [`Stub`]; made by [`Stub::builder`].
///
/// ```no_run
/// # use nri_stub::{Plugin, Stub};
/// # struct MyPlugin;
/// # #[nri_stub::plugin] impl Plugin for MyPlugin {
/// #     async fn run_pod_sandbox(&self, _: &nri_stub::api::PodSandbox) -> nri_stub::HandlerResult<()> { Ok(()) }
/// # }
/// # async fn demo() -> Result<(), nri_stub::StubError> {
/// use std::time::Duration;
///
/// let stub = Stub::builder()
///     .name("my-plugin")
///     .idx("40")
///     .socket_path("/run/nri/nri.sock")
///     // Runtimes from NRI v0.12.4 on fail the request if the plugin does not
///     // answer, and keep the plugin connected after a timeout.
///     .failure_policy(true, true)
///     .reconnect(Duration::from_secs(5))
///     .on_close(|| log::warn!("lost the runtime"))
///     .build(MyPlugin)?;
/// stub.run().await
/// # }
/// ```
pub struct StubBuilder {
    name: Option<String>,
    idx: Option<String>,
    /// The index the runtime gave in `NRI_PLUGIN_IDX`, if any.
    env_idx: Option<String>,
    idx_conflict: bool,
    socket_path: PathBuf,
    connection: Option<std::os::unix::net::UnixStream>,
    events: Option<EventMask>,
    failure_policy: Option<api::FailurePolicy>,
    on_close: Option<Box<dyn Fn() + Send + Sync>>,
    reconnect: Option<Duration>,
}

impl Default for StubBuilder {
    fn default() -> Self {
        StubBuilder {
            name: std::env::var(api::PLUGIN_NAME_ENV)
                .ok()
                .filter(|s| !s.is_empty()),
            idx: None,
            env_idx: std::env::var(api::PLUGIN_IDX_ENV)
                .ok()
                .filter(|s| !s.is_empty()),
            idx_conflict: false,
            socket_path: PathBuf::from(api::DEFAULT_SOCKET_PATH),
            connection: None,
            events: None,
            failure_policy: None,
            on_close: None,
            reconnect: None,
        }
    }
}

impl StubBuilder {
    /// The plugin name to register with (overrides `NRI_PLUGIN_NAME`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The plugin index to register with. Like upstream, it is an error to
    /// set it when the runtime already gave one in `NRI_PLUGIN_IDX`; the
    /// error surfaces from [`StubBuilder::build`].
    pub fn idx(mut self, idx: impl Into<String>) -> Self {
        self.idx_conflict = self.env_idx.is_some();
        self.idx = Some(idx.into());
        self
    }

    /// The runtime socket to dial when not launched by the runtime.
    pub fn socket_path(mut self, path: impl AsRef<Path>) -> Self {
        self.socket_path = path.as_ref().to_path_buf();
        self
    }

    /// Use this already-connected stream instead of dialing.
    pub fn connection(mut self, stream: std::os::unix::net::UnixStream) -> Self {
        self.connection = Some(stream);
        self
    }

    /// Subscribe to these events instead of every implemented one (unless
    /// `Plugin::configure` returns a non-empty mask).
    pub fn events(mut self, events: EventMask) -> Self {
        self.events = Some(events);
        self
    }

    /// Tell the runtime what to do when this plugin fails to answer
    /// (upstream's `WithFailurePolicy`): fail the request instead of going
    /// on without the plugin, and keep it connected after a timeout instead
    /// of dropping it. Runtimes before NRI v0.12.4 ignore it.
    pub fn failure_policy(mut self, fail_request: bool, keep_connected: bool) -> Self {
        self.failure_policy = Some(api::FailurePolicy {
            fail_request,
            keep_connected,
            ..Default::default()
        });
        self
    }

    /// Called whenever the connection to the runtime is lost.
    pub fn on_close(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_close = Some(Box::new(f));
        self
    }

    /// Make [`Stub::run`] reconnect after losing the runtime, waiting
    /// `delay` between attempts, until [`StubHandle::stop`].
    pub fn reconnect(mut self, delay: Duration) -> Self {
        self.reconnect = Some(delay);
        self
    }

    /// Builds the stub for `plugin`. Fails when the name or index is
    /// missing or invalid, the plugin has no handler, or
    /// [`events`](Self::events) asks for an event it does not handle.
    /// Nothing is connected yet: see [`Stub::run`].
    pub fn build<P: Plugin>(self, plugin: P) -> Result<Stub<P>, StubError> {
        let (idx, name) = self.identity()?;
        api::check_plugin_index(&idx)?;
        let implemented = plugin.implemented_events();
        if implemented.is_empty() {
            return Err(StubError::NoHandlers(format!("{idx}-{name}")));
        }
        if let Some(requested) = self.events {
            let extra = EventMask::from_raw(requested.raw() & !implemented.raw());
            if !extra.is_empty() {
                return Err(StubError::UnhandledEvents { requested, extra });
            }
        }
        let shared = Arc::new(Shared {
            name,
            idx,
            failure_policy: self.failure_policy,
            state: Mutex::new(SharedState {
                registration_timeout: api::DEFAULT_REGISTRATION_TIMEOUT,
                request_timeout: api::DEFAULT_REQUEST_TIMEOUT,
                runtime_nri_version: "unknown".to_string(),
                runtime: None,
            }),
        });
        info!(
            "created plugin {} (handles {implemented})",
            shared.full_name()
        );
        let (stop_tx, _) = watch::channel(false);
        Ok(Stub {
            plugin: Arc::new(plugin),
            shared,
            socket_path: self.socket_path,
            connection: Mutex::new(self.connection),
            events: self.events,
            on_close: self.on_close,
            reconnect: self.reconnect,
            stop: Arc::new(stop_tx),
            env_socket_taken: AtomicBool::new(false),
            session: Mutex::new(None),
        })
    }

    /// Index and name: explicit or from the environment, else parsed from
    /// the executable name.
    fn identity(&self) -> Result<(String, String), StubError> {
        if self.idx_conflict {
            return Err(StubError::IndexAlreadySet(
                self.env_idx.clone().unwrap_or_default(),
            ));
        }
        let exe = std::env::args()
            .next()
            .map(|a| {
                Path::new(&a)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or(a)
            })
            .unwrap_or_default();
        match (self.idx.as_ref().or(self.env_idx.as_ref()), &self.name) {
            (Some(idx), Some(name)) => Ok((idx.clone(), name.clone())),
            (Some(idx), None) => Ok((idx.clone(), exe)),
            (None, _) => {
                let (idx, base) = api::parse_plugin_name(&exe)?;
                let name = self.name.clone().unwrap_or_else(|| base.to_string());
                Ok((idx.to_string(), name))
            }
        }
    }
}

/// A cheap, clonable handle to a running stub, for use from handlers and
/// other tasks.
#[derive(Clone)]
pub struct StubHandle {
    shared: Arc<Shared>,
    stop: Arc<watch::Sender<bool>>,
}

impl StubHandle {
    /// `NN-name`, as the runtime knows the plugin.
    pub fn full_name(&self) -> String {
        self.shared.full_name()
    }

    /// The registration timeout: the runtime's once configured.
    pub fn registration_timeout(&self) -> Duration {
        self.shared.lock().registration_timeout
    }

    /// The request timeout: the runtime's once configured.
    pub fn request_timeout(&self) -> Duration {
        self.shared.lock().request_timeout
    }

    /// The runtime's NRI version, `"unknown"` until configured.
    pub fn runtime_nri_version(&self) -> String {
        self.shared.lock().runtime_nri_version.clone()
    }

    /// Requests unsolicited updates of containers' resources and evictions
    /// of containers, at any time after the stub started. Returns the
    /// updates the runtime failed to apply.
    ///
    /// ```no_run
    /// # async fn demo(handle: nri_stub::StubHandle) -> Result<(), nri_stub::StubError> {
    /// use nri_stub::api::ContainerUpdate;
    ///
    /// let mut update = ContainerUpdate::for_container("ctr-id");
    /// update.set_linux_cpu_shares(512);
    /// let failed = handle.update_containers(vec![update], vec![]).await?;
    /// assert!(failed.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn update_containers(
        &self,
        update: Vec<api::ContainerUpdate>,
        evict: Vec<api::ContainerEviction>,
    ) -> Result<Vec<api::ContainerUpdate>, StubError> {
        let (client, timeout) = {
            let state = self.shared.lock();
            (
                state.runtime.clone().ok_or(StubError::NoService)?,
                state.request_timeout,
            )
        };
        let req = api::UpdateContainersRequest {
            update,
            evict,
            ..Default::default()
        };
        // Bounded by our own timer as well: a runtime that stops reading
        // must not hang the caller (the ttrpc client's own deadline only
        // starts once the request is queued).
        let limit = timeout.max(Duration::from_secs(1));
        let call = client.update_containers(ttrpc::context::with_duration(limit), &req);
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(rsp)) => Ok(rsp.failed),
            Ok(Err(e)) => Err(StubError::Request(e.to_string())),
            Err(_) => Err(StubError::Request("deadline exceeded".to_string())),
        }
    }

    /// Stops the stub: the connection is closed and [`Stub::run`] returns.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }
}

/// A plugin bound to the stub machinery: made by [`StubBuilder::build`],
/// served by [`Stub::run`] (or [`Stub::start`], which returns once the
/// plugin is registered and configured).
pub struct Stub<P> {
    plugin: Arc<P>,
    shared: Arc<Shared>,
    socket_path: PathBuf,
    connection: Mutex<Option<std::os::unix::net::UnixStream>>,
    events: Option<EventMask>,
    on_close: Option<Box<dyn Fn() + Send + Sync>>,
    reconnect: Option<Duration>,
    stop: Arc<watch::Sender<bool>>,
    /// Set once the fd in `NRI_PLUGIN_SOCKET` was adopted: it is handed over
    /// once, so a reconnect dials the socket path instead.
    env_socket_taken: AtomicBool,
    session: Mutex<Option<Session>>,
}

/// One live connection to the runtime.
struct Session {
    mux: Mux,
    /// Stops serving when dropped.
    _server: server::Server,
}

impl Stub<()> {
    /// Starts building a stub.
    pub fn builder() -> StubBuilder {
        StubBuilder::default()
    }
}

impl<P: Plugin> Stub<P> {
    /// The plugin this stub serves.
    pub fn plugin(&self) -> &P {
        &self.plugin
    }

    /// A handle for other tasks: the plugin's name, the runtime's
    /// timeouts and version, unsolicited updates, stopping the stub.
    pub fn handle(&self) -> StubHandle {
        StubHandle {
            shared: self.shared.clone(),
            stop: self.stop.clone(),
        }
    }

    /// Connects, registers and waits until the runtime has configured the
    /// plugin. Events are served in the background until the connection
    /// closes or [`Stub::stop`] is called. Not to be called concurrently.
    pub async fn start(&self) -> Result<(), StubError> {
        self.close().await;
        let mux = Mux::new(self.connect()?, mux::Options::default());
        match self.handshake(&mux).await {
            Ok(server) => {
                *self.session_lock() = Some(Session {
                    mux,
                    _server: server,
                });
                info!("started plugin {}", self.shared.full_name());
                Ok(())
            }
            Err(e) => {
                mux.close();
                self.shared.lock().runtime = None;
                Err(e)
            }
        }
    }

    /// Runs the plugin: start, then serve until the runtime goes away or
    /// the stub is stopped. With [`StubBuilder::reconnect`] it keeps
    /// reconnecting instead of returning when the runtime goes away. Like
    /// upstream's `Run`, it may be called again after it returned.
    pub async fn run(&self) -> Result<(), StubError> {
        self.stop.send_replace(false);
        let mut stop = self.stop.subscribe();
        loop {
            if stopped(&stop) {
                return Ok(());
            }
            let started = self.start().await;
            let result = match started {
                Ok(()) => self.wait_closed(&mut stop).await,
                Err(e) => Err(e),
            };
            if stopped(&stop) {
                self.close().await;
                return Ok(());
            }
            match (self.reconnect, result) {
                (Some(delay), result) => {
                    if let Err(e) = result {
                        warn!(
                            "plugin {}: {e}; reconnecting in {delay:?}",
                            self.shared.full_name()
                        );
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = stop.changed() => {}
                    }
                }
                (None, result) => return result,
            }
        }
    }

    /// Closes the connection; [`Stub::run`] returns `Ok(())`.
    pub async fn stop(&self) {
        self.stop.send_replace(true);
        self.close().await;
    }

    fn session_lock(&self) -> std::sync::MutexGuard<'_, Option<Session>> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn wait_closed(&self, stop: &mut watch::Receiver<bool>) -> Result<(), StubError> {
        let mux = match self.session_lock().as_ref() {
            Some(s) => s.mux.clone(),
            None => return Ok(()),
        };
        tokio::select! {
            reason = mux.closed() => {
                self.close().await;
                if let Some(f) = &self.on_close {
                    f();
                }
                let reason = reason.map(|e| e.to_string()).unwrap_or_else(|| "EOF".to_string());
                Err(StubError::Closed(reason))
            }
            _ = async { stop.wait_for(|stopped| *stopped).await.is_ok() } => Ok(()),
        }
    }

    async fn close(&self) {
        self.shared.lock().runtime = None;
        let session = self.session_lock().take();
        if let Some(session) = session {
            // The session's server stops as it is dropped here.
            session.mux.close();
        }
    }

    fn connect(&self) -> Result<mux::UnixTrunk, StubError> {
        let stream = match self
            .connection
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(stream) => {
                info!("using given plugin connection");
                stream
            }
            None => match std::env::var(api::PLUGIN_SOCKET_ENV) {
                Ok(value)
                    if !value.is_empty() && !self.env_socket_taken.swap(true, Ordering::SeqCst) =>
                {
                    info!("using connection {value:?} from environment");
                    stream_from_fd(&value)?
                }
                _ => std::os::unix::net::UnixStream::connect(&self.socket_path).map_err(
                    |source| StubError::Connect {
                        path: self.socket_path.clone(),
                        source,
                    },
                )?,
            },
        };
        mux::UnixTrunk::from_std(stream).map_err(|e| StubError::Setup(e.to_string()))
    }

    /// Serves the Plugin service on conn 1, registers over conn 2 and waits
    /// for Configure.
    async fn handshake(&self, mux: &Mux) -> Result<server::Server, StubError> {
        let setup = |e: &dyn std::fmt::Display| StubError::Setup(e.to_string());
        let plugin_conn = mux.open(mux::PLUGIN_SERVICE_CONN).map_err(|e| setup(&e))?;
        let runtime_conn = mux.open(mux::RUNTIME_SERVICE_CONN).map_err(|e| setup(&e))?;

        let (configured_tx, configured_rx) = oneshot::channel();
        let service = Service::new(
            self.plugin.clone(),
            self.shared.clone(),
            self.events,
            configured_tx,
        );
        let server = server::Server::start(plugin_conn, service);

        let client =
            ttrpc::r#async::Client::new(ttrpc::r#async::transport::Socket::new(runtime_conn));
        let runtime = api::ttrpc::RuntimeClient::new(client);
        let timeout = self.shared.lock().registration_timeout;
        self.shared.lock().runtime = Some(runtime.clone());
        let mut stop = self.stop.subscribe();

        let result = async {
            let req = api::RegisterPluginRequest {
                plugin_name: self.shared.name.clone(),
                plugin_idx: self.shared.idx.clone(),
                NRI_version: NRI_VERSION.to_string(),
                ..Default::default()
            };
            info!(
                "registering plugin {} using NRI version {NRI_VERSION}",
                self.shared.full_name()
            );
            let register = runtime.register_plugin(ttrpc::context::with_duration(timeout), &req);
            tokio::select! {
                registered = tokio::time::timeout(timeout, register) => match registered {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(StubError::Register(e.to_string())),
                    Err(_) => return Err(StubError::Register("registration timed out".to_string())),
                },
                _ = async { stop.wait_for(|stopped| *stopped).await.is_ok() } => return Err(StubError::Stopped),
            }
            // A runtime configures right after registration; one that never
            // does must not keep the plugin (or a stop request) waiting.
            tokio::select! {
                configured = configured_rx => match configured {
                    Ok(Ok(_events)) => Ok(()),
                    Ok(Err(msg)) => Err(StubError::Configure(msg)),
                    Err(_) => Err(StubError::Configure("service dropped".to_string())),
                },
                reason = mux.closed() => Err(StubError::Closed(
                    reason.map(|e| e.to_string()).unwrap_or_else(|| "EOF".to_string()),
                )),
                _ = tokio::time::sleep(timeout) => Err(StubError::Configure(format!(
                    "runtime did not configure the plugin within {timeout:?}"
                ))),
                _ = async { stop.wait_for(|stopped| *stopped).await.is_ok() } => Err(StubError::Stopped),
            }
        }
        .await;
        result.map(|()| server)
    }
}

/// Reads the stop flag without holding the watch guard across an await.
fn stopped(stop: &watch::Receiver<bool>) -> bool {
    *stop.borrow()
}

/// Adopts the socket fd the runtime passed in `NRI_PLUGIN_SOCKET`.
fn stream_from_fd(value: &str) -> Result<std::os::unix::net::UnixStream, StubError> {
    let invalid = |reason: String| StubError::InvalidSocketEnv {
        value: value.to_string(),
        reason,
    };
    let fd: i32 = value.trim().parse().map_err(|e| invalid(format!("{e}")))?;
    if fd < 0 {
        return Err(invalid("negative file descriptor".to_string()));
    }
    // SAFETY: fcntl(F_GETFD) only queries the descriptor.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(invalid(std::io::Error::last_os_error().to_string()));
    }
    let mut kind: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: kind and len are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut kind as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(invalid(format!(
            "not a socket: {}",
            std::io::Error::last_os_error()
        )));
    }
    if kind != libc::SOCK_STREAM {
        return Err(invalid("not a stream socket".to_string()));
    }
    // SAFETY: the runtime handed this fd to us to own; it was checked to be
    // an open stream socket and nothing else in the process uses it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(std::os::unix::net::UnixStream::from(owned))
}
