//! How an adaptation is configured: [`Options`], the defaults, and the
//! process-wide timeouts upstream lets a runtime set before `New`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nri_api::*;

use crate::{BuiltinPlugin, DeprecationRecorder, Metrics};

/// Where pre-installed plugins are looked for.
pub const DEFAULT_PLUGIN_PATH: &str = "/opt/nri/plugins";
/// Where their configuration drop-ins are looked for.
pub const DEFAULT_PLUGIN_CONFIG_PATH: &str = "/etc/nri/conf.d";
/// The socket external plugins connect to.
pub const DEFAULT_SOCKET_PATH: &str = nri_api::DEFAULT_SOCKET_PATH;
/// The NRI version this adaptation implements, sent to plugins in Configure.
pub const NRI_VERSION: &str = "v0.12.5";

pub(crate) static REGISTRATION_TIMEOUT_MS: AtomicU64 =
    AtomicU64::new(DEFAULT_REGISTRATION_TIMEOUT.as_millis() as u64);
pub(crate) static REQUEST_TIMEOUT_MS: AtomicU64 =
    AtomicU64::new(DEFAULT_REQUEST_TIMEOUT.as_millis() as u64);

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
    pub(crate) plugin_path: PathBuf,
    pub(crate) plugin_config_path: PathBuf,
    pub(crate) socket_path: PathBuf,
    pub(crate) external_connections: bool,
    pub(crate) builtin: Vec<BuiltinPlugin>,
    pub(crate) metrics: Option<Arc<dyn Metrics>>,
    pub(crate) deprecation: Option<Arc<dyn DeprecationRecorder>>,
    pub(crate) registration_timeout: Option<Duration>,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) event_timeout: Option<Duration>,
    pub(crate) shutdown_on_stop: bool,
    pub(crate) guard_pods: bool,
    pub(crate) activate_within_sync: bool,
    pub(crate) plugin_request_timeouts: std::collections::HashMap<String, Duration>,
    pub(crate) plugin_handover: bool,
    pub(crate) identities: Option<crate::IdentityPolicy>,
    pub(crate) audit: crate::audit::AuditConfig,
    /// The default validator's configuration, if enabled.
    pub(crate) validator: Option<nri_validator::DefaultValidatorConfig>,
    pub(crate) max_pending_connections: usize,
    pub(crate) runtime: Option<tokio::runtime::Handle>,
    pub(crate) nri_version: Option<String>,
    pub(crate) wasm_memory_limit: usize,
    pub(crate) wasm_cache_dir: Option<PathBuf>,
    pub(crate) wasm_engine: Option<Arc<dyn crate::WasmEngine>>,
    pub(crate) wasm_disabled: bool,
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
            event_timeout: None,
            shutdown_on_stop: false,
            guard_pods: false,
            activate_within_sync: false,
            plugin_request_timeouts: Default::default(),
            plugin_handover: false,
            identities: None,
            audit: crate::audit::AuditConfig {
                sink: None,
                file: None,
                env_values: false,
                record_limit: crate::DEFAULT_AUDIT_RECORD_LIMIT,
            },
            validator: None,
            max_pending_connections: 1024,
            runtime: None,
            nri_version: None,
            wasm_memory_limit: crate::DEFAULT_WASM_MEMORY_LIMIT,
            wasm_cache_dir: Some(crate::DEFAULT_WASM_CACHE_DIR.into()),
            wasm_engine: None,
            wasm_disabled: false,
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
    /// The most linear memory one WASM plugin may grow to, in bytes
    /// (default [`DEFAULT_WASM_MEMORY_LIMIT`](crate::DEFAULT_WASM_MEMORY_LIMIT)):
    /// a module that grows past it traps, and is closed as a plugin that
    /// crashed. Upstream sets no limit (up to WebAssembly's 4 GiB).
    pub fn wasm_memory_limit(mut self, bytes: usize) -> Self {
        self.wasm_memory_limit = bytes;
        self
    }
    /// Where WASM plugins' compiled modules are kept, so that a module is
    /// compiled once per node rather than at every start (default
    /// [`DEFAULT_WASM_CACHE_DIR`](crate::DEFAULT_WASM_CACHE_DIR)); `None`
    /// compiles at every start, as upstream does. The directory is created
    /// `0700` if missing, and not used if another user owns it or others
    /// may write to it.
    pub fn wasm_cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.wasm_cache_dir = dir;
        self
    }
    /// An engine of the host's to run the WASM modules that the
    /// compiled-module cache does not hold, in place of compiling them at
    /// start (see [`WasmEngine`](crate::WasmEngine)). Not used in a build
    /// without WASM support.
    pub fn wasm_engine(mut self, engine: Arc<dyn crate::WasmEngine>) -> Self {
        self.wasm_engine = Some(engine);
        self
    }
    /// Run no WASM plugins, as upstream built with its `nri_no_wasm` tag:
    /// a module in the plugin directory is refused with "no WASM support",
    /// as in a build without WASM support. For a runtime that asks for
    /// that build of upstream's (go/adaptation does, built with the tag)
    /// while this library has WASM support.
    pub fn disable_wasm(mut self) -> Self {
        self.wasm_disabled = true;
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
    pub fn default_validator(mut self, cfg: nri_validator::DefaultValidatorConfig) -> Self {
        if let Some(v) = crate::builtin::default_validator(cfg.clone()) {
            self.builtin.insert(0, v);
            self.validator = Some(cfg);
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
    /// A request timeout for one plugin, instead of the adaptation's, for
    /// every request to it (Configure, Synchronize, events, validation).
    /// `plugin` is its `idx-name` or its name alone; the `idx-name` wins.
    /// The plugin is told it in Configure, as it is told the adaptation's.
    /// This overrides a pre-installed plugin's runtime drop-in
    /// (`<idx>-<name>.runtime.yaml`, `requestTimeout`, in the plugin
    /// configuration directory), which overrides the adaptation's. An
    /// event budget still cuts it short. Upstream has one timeout for all
    /// plugins (its open proposal, nri#287, has the plugin ask for its own
    /// in Configure; no wire change here). Not upstream's: a runtime opts
    /// in.
    pub fn plugin_request_timeout(mut self, plugin: impl Into<String>, t: Duration) -> Self {
        self.plugin_request_timeouts.insert(plugin.into(), t);
        self
    }
    /// A time budget for each whole event: every plugin call gets the
    /// request timeout or what is left of the budget, whichever is less.
    /// When the budget runs out the event fails with
    /// [`Error::EventTimeout`](crate::Error::EventTimeout) and no plugin is
    /// dropped for it. Off by default, as upstream has none: K plugins that
    /// each answer just within the request timeout then make an event K
    /// timeouts long. Not upstream's: a runtime opts in.
    pub fn event_timeout(mut self, t: Duration) -> Self {
        self.event_timeout = Some(t);
        self
    }
    /// [`Adaptation::stop`](crate::Adaptation::stop) first sends every
    /// connected plugin the `Shutdown` request the protocol defines, all at
    /// once and waiting at most one request timeout in all, then closes
    /// the connections. Off by default: upstream never sends `Shutdown`, so
    /// its plugins only see their connection close. Builtin plugins get
    /// none (upstream's builtin `Shutdown` does nothing). Not upstream's: a
    /// runtime opts in.
    pub fn shutdown_on_stop(mut self, on: bool) -> Self {
        self.shutdown_on_stop = on;
        self
    }
    /// The default validator's required plugins guard pods too: a
    /// `RunPodSandbox` fails, before any plugin sees it, when a required
    /// plugin is absent, and after, when one was dropped on the way (a
    /// timeout, a lost connection), with the container check's reason
    /// ([`Error::PodRejected`](crate::Error::PodRejected)). Pod-wide
    /// annotations (`<key>/pod`, `<key>`) add required plugins or tolerate
    /// missing ones, as for containers. Needs
    /// [`default_validator`](Self::default_validator) with required
    /// plugins, or the annotation; off by default, as upstream lets pods
    /// through. Not upstream's: a runtime opts in.
    pub fn required_plugins_guard_pods(mut self, on: bool) -> Self {
        self.guard_pods = on;
        self
    }
    /// A plugin that connects is made active as soon as it has answered
    /// its `Synchronize`, while the runtime's [`SyncFn`](crate::SyncFn) is
    /// still running, instead of after it returned. Every event the
    /// runtime sends once its sync function returned then reaches the
    /// plugin, so a runtime that serializes its sync function with its
    /// changes (its own lock, or a [`PluginSyncBlock`](crate::PluginSyncBlock)
    /// around each) loses no pod or container to a joining plugin: each is
    /// in the snapshot or reaches it as an event, exactly once. Upstream
    /// activates the plugin only after the sync function returned, and an
    /// event sent in between is not offered to it. If the sync function
    /// then fails, the plugin is dropped again. Not upstream's: a runtime
    /// opts in.
    pub fn activate_within_sync(mut self, on: bool) -> Self {
        self.activate_within_sync = on;
        self
    }
    /// A plugin that registers under the `idx-name` of a connected one
    /// (external or pre-installed, never builtin) replaces it once
    /// synchronized: in one step, the new instance
    /// joins the plugin list and the old one leaves it, so every event goes
    /// to exactly one of them. The old instance is closed once the events
    /// it was already in have ended (and, with
    /// [`shutdown_on_stop`](Self::shutdown_on_stop), sent `Shutdown` first,
    /// waiting one request timeout at most). With
    /// [`activate_within_sync`](Self::activate_within_sync) the new
    /// instance joins within the sync and the old one leaves once the
    /// runtime's sync function returned, so that a failed sync keeps the
    /// old one. Upstream keeps both and sends each event to both. Not
    /// upstream's: a runtime opts in.
    pub fn plugin_handover(mut self, on: bool) -> Self {
        self.plugin_handover = on;
        self
    }
    /// Checks who registers external plugins: a plugin may register under
    /// a name only if `policy` admits its identity (the uid, gid, pid,
    /// executable and cgroup of its process, recorded when it connected)
    /// for that name, and only if no live plugin holds the name (its base
    /// name, whatever the index, so `99-foo` cannot stand in for a
    /// required `foo`). With [`plugin_handover`](Self::plugin_handover), a
    /// new instance may take over a name from an instance of the same
    /// `idx-name` with the same uid, gid and executable. A refused plugin
    /// is told why (`plugin name "foo" is held by external:10-foo[42]`)
    /// and disconnected. Builtin, pre-installed and WASM plugins are not
    /// checked, but hold their names too. Upstream lets any process that
    /// can reach the socket register under any name; off by default.
    pub fn plugin_identities(mut self, policy: crate::IdentityPolicy) -> Self {
        self.identities = Some(policy);
        self
    }
    /// Keeps an audit log, delivering each record to `sink`: one record per
    /// CreateContainer, UpdateContainer or StopContainer event in which a
    /// plugin changed something or a validator refused, and per update a
    /// plugin asked for on its own (`UpdateContainers`). See
    /// [`AuditRecord`](crate::AuditRecord). The sink runs on a thread of
    /// its own; events wait for it only when 1024 records are queued.
    /// Upstream has no audit log; off by default.
    pub fn audit_sink(mut self, sink: Arc<dyn crate::AuditSink>) -> Self {
        self.audit.sink = Some(sink);
        self
    }
    /// Keeps an audit log (see [`audit_sink`](Self::audit_sink)) in `path`
    /// as JSON lines, appended to; the adaptation fails to be made if the
    /// file cannot be opened.
    pub fn audit_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.audit.file = Some(path.into());
        self
    }
    /// Records environment variables' values in audit records; by default
    /// they read `(redacted)`, their names being kept.
    pub fn audit_env_values(mut self, on: bool) -> Self {
        self.audit.env_values = on;
        self
    }
    /// The most bytes one audit record's JSON may take (default
    /// [`DEFAULT_AUDIT_RECORD_LIMIT`](crate::DEFAULT_AUDIT_RECORD_LIMIT),
    /// 64 KiB): past it, the values are left out, then changes from the end
    /// of the list, and `omitted` says what.
    pub fn audit_record_limit(mut self, bytes: usize) -> Self {
        self.audit.record_limit = bytes;
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
