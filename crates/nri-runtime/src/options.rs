//! How an adaptation is configured: [`Options`], the defaults, and the
//! process-wide timeouts upstream lets a runtime set before `New`.
//!
//! Every check of an option's value is made here, by the setter that takes
//! it, so that a Rust host and the C ABI (and the Go wrapper over it) refuse
//! the same values with the same text; the shells only translate their
//! arguments.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nri_api::*;

use crate::plugins::timeouts::PluginTimeouts;
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

/// The smallest audit record limit accepted: a record keeps its container,
/// outcome and verdicts whatever the limit, so a smaller one would leave
/// hardly any record a change.
const MIN_AUDIT_RECORD_LIMIT: usize = 256;

/// A value an [`Options`] setter refused. Its text says which value and
/// why (`socket path is empty`); it converts into
/// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for `?`.
///
/// The setter's options come back, as they were before the call, from
/// [`into_options`](Self::into_options): a host that keeps its options
/// across calls (the C ABI does) loses nothing to a refused value.
pub struct OptionError {
    message: String,
    options: Box<Options>,
}

impl OptionError {
    fn new(options: Options, message: impl Into<String>) -> Self {
        OptionError {
            message: message.into(),
            options: Box::new(options),
        }
    }

    /// The options the refusing setter was called on, unchanged by it.
    pub fn into_options(self) -> Options {
        *self.options
    }
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

// The options are left out: they hold callbacks, and only the text says
// what went wrong.
impl fmt::Debug for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OptionError")
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

impl std::error::Error for OptionError {}

impl From<OptionError> for crate::Error {
    fn from(e: OptionError) -> Self {
        crate::Error::InvalidConfig(e.message)
    }
}

/// Why `t` cannot be a plugin's timeout, if it cannot: no request could
/// succeed within 0, and ttrpc sends timeouts as i64 nanoseconds.
fn timeout_refusal(t: Duration) -> Option<&'static str> {
    if t.is_zero() {
        Some("is 0")
    } else if t.as_nanos() > i64::MAX as u128 {
        Some("is out of range")
    } else {
        None
    }
}

/// Options of an [`Adaptation`](crate::Adaptation), with upstream's defaults.
///
/// A setter whose value can be invalid returns a `Result` and refuses the
/// value with an [`OptionError`], leaving the options as they were.
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
    pub(crate) sync_timeout: Option<Duration>,
    pub(crate) event_timeout: Option<Duration>,
    pub(crate) shutdown_on_stop: bool,
    pub(crate) guard_pods: bool,
    pub(crate) activate_within_sync: bool,
    pub(crate) plugin_timeouts: std::collections::HashMap<String, PluginTimeouts>,
    pub(crate) plugin_handover: bool,
    pub(crate) pod_concurrency: bool,
    pub(crate) concurrent_plugins: std::collections::HashSet<String>,
    pub(crate) identities: Option<crate::IdentityPolicy>,
    pub(crate) audit: crate::results::audit::AuditConfig,
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
            sync_timeout: None,
            event_timeout: None,
            shutdown_on_stop: false,
            guard_pods: false,
            activate_within_sync: false,
            plugin_timeouts: Default::default(),
            plugin_handover: false,
            pod_concurrency: false,
            concurrent_plugins: Default::default(),
            identities: None,
            audit: crate::results::audit::AuditConfig {
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
    /// The directory of pre-installed plugins (`WithPluginPath`); refused
    /// when empty.
    pub fn plugin_path(self, p: impl Into<PathBuf>) -> Result<Self, OptionError> {
        self.set_path("plugin path", p.into(), |o| &mut o.plugin_path)
    }
    /// The directory of configuration drop-ins (`WithPluginConfigPath`);
    /// refused when empty.
    pub fn plugin_config_path(self, p: impl Into<PathBuf>) -> Result<Self, OptionError> {
        self.set_path("plugin config path", p.into(), |o| {
            &mut o.plugin_config_path
        })
    }
    /// The socket for external plugins (`WithSocketPath`); refused when
    /// empty.
    pub fn socket_path(self, p: impl Into<PathBuf>) -> Result<Self, OptionError> {
        self.set_path("socket path", p.into(), |o| &mut o.socket_path)
    }

    /// Sets the path `field` picks, named `what` in the error. An empty
    /// path is never a usable one, and would only show up later, far from
    /// the call that gave it.
    fn set_path(
        mut self,
        what: &str,
        p: PathBuf,
        field: fn(&mut Self) -> &mut PathBuf,
    ) -> Result<Self, OptionError> {
        if p.as_os_str().is_empty() {
            return Err(OptionError::new(self, format!("{what} is empty")));
        }
        *field(&mut self) = p;
        Ok(self)
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
    /// may write to it. Only read with the `compiled-wasm` feature.
    pub fn wasm_cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.wasm_cache_dir = dir;
        self
    }
    /// An engine of the host's to run the WASM modules that the
    /// compiled-module cache does not hold, in place of compiling them at
    /// start (see [`WasmEngine`](crate::WasmEngine)). Without the
    /// `compiled-wasm` feature, every module runs on it.
    pub fn wasm_engine(mut self, engine: Arc<dyn crate::WasmEngine>) -> Self {
        self.wasm_engine = Some(engine);
        self
    }
    /// Run no WASM plugins, as upstream built with its `nri_no_wasm` tag:
    /// a module in the plugin directory is refused with "no WASM support",
    /// on any engine. For a runtime that asks for that build of upstream's
    /// (go/adaptation does, built with the tag).
    pub fn disable_wasm(mut self) -> Self {
        self.wasm_disabled = true;
        self
    }
    /// Accept no external plugins (`WithDisabledExternalConnections`).
    pub fn disable_external_connections(mut self) -> Self {
        self.external_connections = false;
        self
    }
    /// Adds builtin plugins (`WithBuiltinPlugins`). A plugin with an empty
    /// name or index is refused, and then none of `plugins` is added.
    pub fn builtin_plugins(
        mut self,
        plugins: impl IntoIterator<Item = BuiltinPlugin>,
    ) -> Result<Self, OptionError> {
        let plugins: Vec<BuiltinPlugin> = plugins.into_iter().collect();
        if let Some(p) = plugins
            .iter()
            .find(|p| p.base.is_empty() || p.index.is_empty())
        {
            let message = format!(
                "builtin plugin {:?}-{:?}: empty name or index",
                p.index, p.base
            );
            return Err(OptionError::new(self, message));
        }
        self.builtin.extend(plugins);
        Ok(self)
    }
    /// Enables the builtin default validator with this configuration
    /// (`WithDefaultValidator`); nothing happens unless `cfg.enable`.
    pub fn default_validator(mut self, cfg: nri_validator::DefaultValidatorConfig) -> Self {
        if let Some(v) = crate::plugins::builtin::default_validator(cfg.clone()) {
            self.builtin.insert(0, v);
            self.validator = Some(cfg);
        }
        self
    }
    /// [`default_validator`](Self::default_validator) with the
    /// configuration given as YAML or JSON, with upstream's keys (see
    /// [`DefaultValidatorConfig::from_yaml`](nri_validator::DefaultValidatorConfig::from_yaml));
    /// blank text leaves the validator off. Text that does not parse is
    /// refused.
    pub fn default_validator_yaml(self, config: &str) -> Result<Self, OptionError> {
        match nri_validator::DefaultValidatorConfig::from_yaml(config) {
            Ok(cfg) => Ok(self.default_validator(cfg)),
            Err(e) => {
                let message = format!("invalid default validator config: {e}");
                Err(OptionError::new(self, message))
            }
        }
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
    /// every request to it (Configure, events, validation) but
    /// Synchronize, whose default deadline starts from it when it is
    /// longer than the registration timeout (see
    /// [`sync_timeout`](Self::sync_timeout)).
    /// `plugin` is its `idx-name` or its name alone; the `idx-name` wins.
    /// The plugin is told it in Configure, as it is told the adaptation's.
    /// This overrides a pre-installed plugin's runtime drop-in
    /// (`<idx>-<name>.runtime.yaml`, `requestTimeout`, in the plugin
    /// configuration directory), which overrides the adaptation's. An
    /// event budget still cuts it short. Upstream has one timeout for all
    /// plugins (its open proposal, nri#287, has the plugin ask for its own
    /// in Configure; no wire change here). Not upstream's: a runtime opts
    /// in.
    ///
    /// Refused: an empty `plugin`, a zero `t` (no request could succeed),
    /// and a `t` the wire cannot carry (it sends timeouts as i64
    /// nanoseconds).
    pub fn plugin_request_timeout(
        self,
        plugin: impl Into<String>,
        t: Duration,
    ) -> Result<Self, OptionError> {
        self.set_plugin_timeout(plugin.into(), "request", t, |p| &mut p.request)
    }
    /// How long a Synchronize may take, all its messages together, for
    /// every plugin without a sync timeout of its own
    /// ([`plugin_sync_timeout`](Self::plugin_sync_timeout)), as is,
    /// whatever the node holds.
    ///
    /// Unset, a sync may take the registration timeout, or the plugin's
    /// request timeout if that is longer, plus a millisecond for each pod
    /// and container in the state sent. The joining plugin carries the
    /// whole node in that one request; upstream gives it one request
    /// timeout (2 s by default), which resource-policy plugins miss on
    /// big nodes, to be dropped, reconnect, and miss it again. The
    /// millisecond is over ten times what an upstream Go-stub plugin was
    /// measured to take per object here (docs/PERFORMANCE.md: 10,000
    /// containers in 5,000 pods in 0.88 s on 2 cores), so a plugin doing
    /// real work per object fits too. A plugin can tell only by timing.
    /// The option is nri-rs's; so is the default, where upstream's is the
    /// request timeout.
    ///
    /// Refused: a zero `t` (no sync could succeed), and a `t` the wire
    /// cannot carry (ttrpc sends timeouts as i64 nanoseconds).
    pub fn sync_timeout(mut self, t: Duration) -> Result<Self, OptionError> {
        if let Some(why) = timeout_refusal(t) {
            return Err(OptionError::new(self, format!("sync timeout {why}")));
        }
        self.sync_timeout = Some(t);
        Ok(self)
    }
    /// A sync timeout for one plugin, instead of the adaptation's or the
    /// default one (see [`sync_timeout`](Self::sync_timeout)), used as is.
    /// `plugin` is its `idx-name` or its name alone; the `idx-name` wins.
    /// This overrides a pre-installed plugin's runtime drop-in
    /// (`syncTimeout`), as [`plugin_request_timeout`](Self::plugin_request_timeout)
    /// does `requestTimeout`, and is refused as that one is. Not
    /// upstream's: a runtime opts in.
    pub fn plugin_sync_timeout(
        self,
        plugin: impl Into<String>,
        t: Duration,
    ) -> Result<Self, OptionError> {
        self.set_plugin_timeout(plugin.into(), "sync", t, |p| &mut p.sync)
    }

    /// Sets one of `plugin`'s timeouts, the `what` timeout that `field`
    /// picks, or refuses it.
    fn set_plugin_timeout(
        mut self,
        plugin: String,
        what: &str,
        t: Duration,
        field: fn(&mut PluginTimeouts) -> &mut Option<Duration>,
    ) -> Result<Self, OptionError> {
        let refused = if plugin.is_empty() {
            Some("plugin is empty".to_string())
        } else {
            timeout_refusal(t).map(|why| format!("{what} timeout of plugin {plugin:?} {why}"))
        };
        if let Some(message) = refused {
            return Err(OptionError::new(self, message));
        }
        *field(self.plugin_timeouts.entry(plugin).or_default()) = Some(t);
        Ok(self)
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
    /// Kept for runtimes that set it; what it asked for is how every
    /// plugin joins now. A plugin that connects is made active as soon as
    /// it has answered its `Synchronize`, while the runtime's
    /// [`SyncFn`](crate::SyncFn) still runs, after the events it missed
    /// since its sync began were replayed to it: each pod and container
    /// reaches it once, in its snapshot or as events. If the sync function
    /// then fails, the plugin is dropped again. Upstream activates the
    /// plugin after the sync function returned and loses to it what
    /// happened in between.
    pub fn activate_within_sync(mut self, on: bool) -> Self {
        self.activate_within_sync = on;
        self
    }
    /// Runs the events of different pods at once; those of one pod still
    /// run one at a time and in order (upstream runs every event of every
    /// pod one at a time, so a burst of pod starts queues behind each
    /// plugin's slowest answer). A plugin is sent requests of different
    /// pods at once only if it is named in
    /// [`concurrent_plugin`](Self::concurrent_plugin) or its runtime
    /// drop-in says `concurrentRequests: true`; every other plugin is sent
    /// one request at a time, as under upstream. Each event's merge,
    /// conflicts, validation, failure policy and audit record are its own,
    /// as they are when events run in turn. Off by default. Not
    /// upstream's: a runtime opts in.
    pub fn pod_concurrency(mut self, on: bool) -> Self {
        self.pod_concurrency = on;
        self
    }
    /// Names a plugin (by `idx-name` or name) that takes requests of
    /// different pods at once, with [`pod_concurrency`](Self::pod_concurrency).
    /// Refused: an empty name.
    pub fn concurrent_plugin(mut self, plugin: impl Into<String>) -> Result<Self, OptionError> {
        let plugin = plugin.into();
        if plugin.is_empty() {
            return Err(OptionError::new(self, "plugin is empty".to_string()));
        }
        self.concurrent_plugins.insert(plugin);
        Ok(self)
    }
    /// A plugin that registers under the `idx-name` of a connected one
    /// (external or pre-installed, never builtin) replaces it once
    /// synchronized: in one step, the new instance
    /// joins the plugin list and the old one leaves it, so every event goes
    /// to exactly one of them. The old instance is closed once the events
    /// it was already in have ended (and, with
    /// [`shutdown_on_stop`](Self::shutdown_on_stop), sent `Shutdown` first,
    /// waiting one request timeout at most). The new instance joins
    /// within the sync and the old one leaves once the runtime's sync
    /// function returned, so that a failed sync keeps the old one. Upstream keeps both and sends each event to both. Not
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
    /// [`plugin_identities`](Self::plugin_identities) with the policy given
    /// as YAML or JSON (see [`IdentityPolicy`](crate::IdentityPolicy)); a
    /// policy that [`IdentityPolicy::from_yaml`](crate::IdentityPolicy::from_yaml)
    /// refuses (an unknown key, a relative path) is refused with its text.
    pub fn plugin_identities_yaml(self, policy: &str) -> Result<Self, OptionError> {
        match crate::IdentityPolicy::from_yaml(policy) {
            Ok(policy) => Ok(self.plugin_identities(policy)),
            Err(e) => Err(OptionError::new(self, e.to_string())),
        }
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
    /// file cannot be opened. An empty `path` is refused.
    pub fn audit_file(mut self, path: impl Into<PathBuf>) -> Result<Self, OptionError> {
        let path = path.into();
        if path.as_os_str().is_empty() {
            return Err(OptionError::new(self, "path is empty"));
        }
        self.audit.file = Some(path);
        Ok(self)
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
    /// of the list, and `omitted` says what. A limit below 256 bytes is
    /// refused.
    pub fn audit_record_limit(mut self, bytes: usize) -> Result<Self, OptionError> {
        if bytes < MIN_AUDIT_RECORD_LIMIT {
            let message =
                format!("audit record limit {bytes} is below {MIN_AUDIT_RECORD_LIMIT} bytes");
            return Err(OptionError::new(self, message));
        }
        self.audit.record_limit = bytes;
        Ok(self)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of the error `set` refuses default options with, after
    /// checking that the options come back as they were.
    fn refusal(set: impl FnOnce(Options) -> Result<Options, OptionError>) -> String {
        let before = Options::default().nri_version("before");
        let err = refused(set(before));
        let back = err.to_string();
        let options = err.into_options();
        assert_eq!(options.nri_version.as_deref(), Some("before"));
        back
    }

    #[test]
    fn empty_paths_are_refused_by_name() {
        assert_eq!(refusal(|o| o.plugin_path("")), "plugin path is empty");
        assert_eq!(
            refusal(|o| o.plugin_config_path("")),
            "plugin config path is empty"
        );
        assert_eq!(refusal(|o| o.socket_path("")), "socket path is empty");
        assert_eq!(refusal(|o| o.audit_file("")), "path is empty");
    }

    #[test]
    fn a_refused_path_leaves_the_one_set_before() {
        let o = Options::default().socket_path("/run/a.sock").unwrap();
        let o = refused(o.socket_path("")).into_options();
        assert_eq!(o.socket_path, PathBuf::from("/run/a.sock"));
        let o = o
            .plugin_path("/p")
            .unwrap()
            .plugin_config_path("/c")
            .unwrap();
        assert_eq!(
            (o.plugin_path.to_str(), o.plugin_config_path.to_str()),
            (Some("/p"), Some("/c"))
        );
        let o = o.audit_file("/var/log/nri.jsonl").unwrap();
        assert_eq!(
            o.audit.file.as_deref(),
            Some(std::path::Path::new("/var/log/nri.jsonl"))
        );
    }

    #[test]
    fn a_plugin_request_timeout_needs_a_name_and_a_time_the_wire_carries() {
        let secs = Duration::from_secs(1);
        assert_eq!(
            refusal(|o| o.plugin_request_timeout("", secs)),
            "plugin is empty"
        );
        assert_eq!(
            refusal(|o| o.plugin_request_timeout("slow", Duration::ZERO)),
            "request timeout of plugin \"slow\" is 0"
        );
        let longest = Duration::from_nanos(i64::MAX as u64);
        assert_eq!(
            refusal(|o| o.plugin_request_timeout("slow", longest + Duration::from_nanos(1))),
            "request timeout of plugin \"slow\" is out of range"
        );
        // What the C ABI passes for UINT64_MAX milliseconds.
        assert_eq!(
            refusal(|o| o.plugin_request_timeout("slow", Duration::from_millis(u64::MAX))),
            "request timeout of plugin \"slow\" is out of range"
        );
        let o = Options::default()
            .plugin_request_timeout("10-slow", longest)
            .unwrap()
            .plugin_request_timeout("fast", Duration::from_nanos(1))
            .unwrap();
        assert_eq!(o.plugin_timeouts["10-slow"].request, Some(longest));
        assert_eq!(
            o.plugin_timeouts["fast"].request,
            Some(Duration::from_nanos(1))
        );
    }

    #[test]
    fn a_sync_timeout_needs_a_time_the_wire_carries() {
        let longest = Duration::from_nanos(i64::MAX as u64);
        assert_eq!(
            refusal(|o| o.sync_timeout(Duration::ZERO)),
            "sync timeout is 0"
        );
        assert_eq!(
            refusal(|o| o.sync_timeout(longest + Duration::from_nanos(1))),
            "sync timeout is out of range"
        );
        // What the C ABI passes for UINT64_MAX milliseconds.
        assert_eq!(
            refusal(|o| o.sync_timeout(Duration::from_millis(u64::MAX))),
            "sync timeout is out of range"
        );
        let o = Options::default().sync_timeout(longest).unwrap();
        assert_eq!(o.sync_timeout, Some(longest));
        let o = refused(o.sync_timeout(Duration::ZERO)).into_options();
        assert_eq!(o.sync_timeout, Some(longest), "a refusal keeps the last");
    }

    #[test]
    fn a_plugin_sync_timeout_needs_a_name_and_a_time_the_wire_carries() {
        let secs = Duration::from_secs(1);
        assert_eq!(
            refusal(|o| o.plugin_sync_timeout("", secs)),
            "plugin is empty"
        );
        assert_eq!(
            refusal(|o| o.plugin_sync_timeout("slow", Duration::ZERO)),
            "sync timeout of plugin \"slow\" is 0"
        );
        assert_eq!(
            refusal(|o| o.plugin_sync_timeout("slow", Duration::from_millis(u64::MAX))),
            "sync timeout of plugin \"slow\" is out of range"
        );
        // Both timeouts of one plugin, set apart, are kept together.
        let o = Options::default()
            .plugin_request_timeout("10-slow", secs)
            .unwrap()
            .plugin_sync_timeout("10-slow", 3 * secs)
            .unwrap()
            .plugin_sync_timeout("fast", secs)
            .unwrap();
        assert_eq!(
            o.plugin_timeouts["10-slow"],
            PluginTimeouts {
                request: Some(secs),
                sync: Some(3 * secs)
            }
        );
        assert_eq!(o.plugin_timeouts["fast"].request, None);
    }

    struct NoHandlers;
    impl crate::BuiltinHandlers for NoHandlers {
        fn implemented_events(&self) -> EventMask {
            EventMask::EMPTY
        }
    }

    /// The error of a call that must fail (`Options` has no `Debug`, so
    /// `unwrap_err` is not at hand).
    fn refused(r: Result<Options, OptionError>) -> OptionError {
        r.err().expect("the value is refused")
    }

    #[test]
    fn a_builtin_plugin_needs_a_name_and_an_index() {
        assert_eq!(
            refusal(|o| o.builtin_plugins([BuiltinPlugin::new("", "10", NoHandlers)])),
            "builtin plugin \"10\"-\"\": empty name or index"
        );
        assert_eq!(
            refusal(|o| o.builtin_plugins([BuiltinPlugin::new("ok", "", NoHandlers)])),
            "builtin plugin \"\"-\"ok\": empty name or index"
        );
        // One bad plugin keeps the good ones given with it out too.
        let o = refused(Options::default().builtin_plugins([
            BuiltinPlugin::new("good", "10", NoHandlers),
            BuiltinPlugin::new("", "20", NoHandlers),
        ]))
        .into_options();
        assert!(o.builtin.is_empty());
        let o = o
            .builtin_plugins([BuiltinPlugin::new("good", "10", NoHandlers)])
            .unwrap();
        assert_eq!(o.builtin.len(), 1);
    }

    #[test]
    fn a_default_validator_config_that_does_not_parse_is_refused() {
        let text = refusal(|o| o.default_validator_yaml("enable: 17"));
        assert!(
            text.starts_with("invalid default validator config: "),
            "{text}"
        );
        assert!(refusal(|o| o.default_validator_yaml("enable: ["))
            .starts_with("invalid default validator config: "));
        let o = Options::default().default_validator_yaml("").unwrap();
        assert!(o.validator.is_none() && o.builtin.is_empty());
        let o = o.default_validator_yaml("enable: true").unwrap();
        assert!(o.validator.is_some_and(|v| v.enable));
        assert_eq!(o.builtin.len(), 1);
    }

    #[test]
    fn an_identity_policy_is_refused_with_the_policys_own_text() {
        let text = refusal(|o| o.plugin_identities_yaml("rules: [{plugins: [x], users: [0]}]"));
        assert!(
            text.starts_with("invalid plugin identity policy: "),
            "{text}"
        );
        assert_eq!(
            refusal(|o| o.plugin_identities_yaml("rules: [{plugins: [x], executables: [bin/x]}]")),
            "invalid plugin identity policy: executable bin/x is not an absolute path"
        );
        let o = Options::default()
            .plugin_identities_yaml("rules: [{plugins: [x], uids: [0]}]")
            .unwrap();
        assert!(o.identities.is_some());
    }

    #[test]
    fn an_audit_record_limit_below_256_bytes_is_refused() {
        assert_eq!(
            refusal(|o| o.audit_record_limit(255)),
            "audit record limit 255 is below 256 bytes"
        );
        assert_eq!(
            Options::default()
                .audit_record_limit(256)
                .unwrap()
                .audit
                .record_limit,
            256
        );
    }

    #[test]
    fn a_refused_value_converts_into_the_adaptations_config_error() {
        let err = crate::Error::from(refused(Options::default().socket_path("")));
        assert!(matches!(&err, crate::Error::InvalidConfig(m) if m == "socket path is empty"));
        assert_eq!(
            err.to_string(),
            "failed to create NRI adaptation, socket path is empty"
        );
        // Hosts box errors: the error must cross threads.
        fn boxable<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
        boxable(&refused(Options::default().socket_path("")));
    }
}
