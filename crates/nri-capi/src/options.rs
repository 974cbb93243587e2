//! `nri_options`: the optional settings of an adaptation (upstream's
//! `With*` options), built with setters so the struct can grow without
//! breaking the ABI.
//!
//! A setter here only converts its C arguments (NULL, UTF-8, C's "0 means
//! none"); whether a value is acceptable is for `nri_runtime::Options` to
//! say, so that a Rust host is refused the same values with the same text.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use super::buffer::str_arg;
use super::builtin::{nri_builtin_plugin, FfiBuiltin};
use super::callbacks::{nri_free_fn, UserData};
use super::error::{boundary, nri_error};
use super::metrics::{
    nri_audit_fn, nri_deprecation_fn, nri_metrics, FfiAudit, FfiDeprecation, FfiMetrics,
};
use super::ptr::{arg_ref, Handle};
use super::status::{nri_status, Failure};
use super::wasm_engine::{nri_wasm_engine, FfiWasmEngine};
use nri_runtime::{BuiltinPlugin, OptionError, Options};

/// Options of an adaptation. Created by `nri_options_new`, consumed by
/// `nri_adaptation_new`, or released by `nri_options_free`. (Rust type:
/// `Box<nri_options>`.)
pub struct nri_options {
    pub(crate) inner: Options,
}

impl Handle for nri_options {
    const NAME: &'static str = "options";
}

/// New options with upstream's defaults: plugins in /opt/nri/plugins,
/// their configuration in /etc/nri/conf.d, the socket at
/// /var/run/nri/nri.sock, external connections enabled.
#[no_mangle]
pub extern "C" fn nri_options_new() -> *mut nri_options {
    nri_options {
        inner: Options::default(),
    }
    .into_raw()
}

/// Releases options that were not handed to `nri_adaptation_new`, running
/// the finalizers of the user data they hold. NULL is a no-op.
///
/// # Safety
/// `opts` is NULL or options from `nri_options_new` not yet consumed.
#[no_mangle]
pub unsafe extern "C" fn nri_options_free(opts: *mut nri_options) {
    // SAFETY: nri_options_free's contract: `opts` is NULL or options from
    // nri_options_new not yet consumed (nor freed).
    unsafe { nri_options::free(opts) }
}

/// Runs a setter on options that must not be NULL. Setters check their
/// arguments before touching the options, so a failed call changes nothing.
///
/// # Safety
/// `opts` is NULL or live options from `nri_options_new` (not consumed or
/// freed), not used by another call while this runs; `err` is NULL or
/// writable. Every setter's contract says the first part ("`opts` comes
/// from `nri_options_new`"); the second is the header's thread rule (an
/// `nri_options` is for one call at a time).
unsafe fn with_options(
    opts: *mut nri_options,
    err: *mut *mut nri_error,
    set: impl FnOnce(&mut Options) -> Result<(), Failure>,
) -> nri_status {
    boundary(err, || {
        // SAFETY: this function's contract: `opts` is NULL or live options no
        // other call uses meanwhile.
        let o = unsafe { nri_options::arg_mut(opts) }?;
        set(&mut o.inner)
    })
}

/// Runs a setter of the core's that may refuse its value: the refusal
/// becomes `NRI_STATUS_INVALID_ARGUMENT` with the core's text, and the
/// options it hands back stay in place, so a refused value changes nothing.
fn try_set(
    o: &mut Options,
    set: impl FnOnce(Options) -> Result<Options, OptionError>,
) -> Result<(), Failure> {
    match set(std::mem::take(o)) {
        Ok(set) => {
            *o = set;
            Ok(())
        }
        Err(e) => {
            let failure = Failure::invalid(e.to_string());
            *o = e.into_options();
            Err(failure)
        }
    }
}

/// Sets an option given as a string, named `what` when it is NULL or not
/// UTF-8.
///
/// # Safety
/// As for [`with_options`]; `value` is NULL or a NUL-terminated string.
unsafe fn set_str(
    opts: *mut nri_options,
    what: &str,
    value: *const c_char,
    err: *mut *mut nri_error,
    set: impl FnOnce(Options, &str) -> Result<Options, OptionError>,
) -> nri_status {
    let set_str = |o: &mut Options| {
        // SAFETY: this function's contract: `value` is NULL or
        // NUL-terminated.
        let v = unsafe { str_arg(what, value) }?;
        try_set(o, |o| set(o, v))
    };
    // SAFETY: this function's contract: `opts` and `err` are as
    // `with_options` needs.
    unsafe { with_options(opts, err, set_str) }
}

/// The directory of pre-installed plugins (`WithPluginPath`).
///
/// # Safety
/// `opts` comes from `nri_options_new`; `path` is a NUL-terminated string;
/// `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_plugin_path(
    opts: *mut nri_options,
    path: *const c_char,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_plugin_path's contract: `opts` comes from
    // nri_options_new, `path` is NUL-terminated, `err` is NULL or writable.
    unsafe { set_str(opts, "plugin path", path, err, |o, p| o.plugin_path(p)) }
}

/// The directory of plugin configuration drop-ins (`WithPluginConfigPath`).
///
/// # Safety
/// `opts` comes from `nri_options_new`; `path` is a NUL-terminated string;
/// `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_plugin_config_path(
    opts: *mut nri_options,
    path: *const c_char,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_plugin_config_path's contract: `opts` comes from
    // nri_options_new, `path` is NUL-terminated, `err` is NULL or writable.
    unsafe {
        set_str(opts, "plugin config path", path, err, |o, p| {
            o.plugin_config_path(p)
        })
    }
}

/// The socket external plugins connect to (`WithSocketPath`).
///
/// # Safety
/// `opts` comes from `nri_options_new`; `path` is a NUL-terminated string;
/// `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_socket_path(
    opts: *mut nri_options,
    path: *const c_char,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_socket_path's contract: `opts` comes from
    // nri_options_new, `path` is NUL-terminated, `err` is NULL or writable.
    unsafe { set_str(opts, "socket path", path, err, |o, p| o.socket_path(p)) }
}

/// Where WASM plugins' compiled modules are kept, so that a module is
/// compiled once per node, not at every start (default
/// /var/cache/nri/wasm; created 0700 if missing, and not used if another
/// user owns it or others may write to it). An empty `dir` keeps none:
/// every start compiles, as upstream does. Only a library built with its
/// `compiled-wasm` feature compiles modules or reads the cache; without
/// it the directory is not touched. Upstream has no such option.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `dir` is a NUL-terminated string;
/// `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_wasm_cache_dir(
    opts: *mut nri_options,
    dir: *const c_char,
    err: *mut *mut nri_error,
) -> nri_status {
    let set = |o: &mut Options| {
        // SAFETY: nri_options_set_wasm_cache_dir's contract: `dir` is
        // NUL-terminated.
        let dir = unsafe { str_arg("dir", dir) }?;
        let dir = (!dir.is_empty()).then(|| std::path::PathBuf::from(dir));
        *o = std::mem::take(o).wasm_cache_dir(dir);
        Ok(())
    };
    // SAFETY: nri_options_set_wasm_cache_dir's contract: `opts` comes from
    // nri_options_new, `err` is NULL or writable.
    unsafe { with_options(opts, err, set) }
}

/// Lends the library a WASM engine for the WASM plugins that the
/// compiled-module cache does not hold: they run on it instead of being
/// compiled at start (go/adaptation lends wazero, upstream's engine, so
/// that a node's first start costs what upstream's does). Modules the
/// cache holds still run compiled. A library built without its
/// `compiled-wasm` feature (the default) runs every module on it, and
/// without it refuses them. The table is copied; its user data is owned
/// from here on, even when this fails. Upstream has no such option.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `engine` points to a valid
/// `nri_wasm_engine`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_wasm_engine(
    opts: *mut nri_options,
    engine: *const nri_wasm_engine,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_wasm_engine's contract: `engine` points to a
    // valid nri_wasm_engine (NULL is refused inside the boundary).
    let engine = unsafe { FfiWasmEngine::from_c(engine) };
    // SAFETY: nri_options_set_wasm_engine's contract: `opts` comes from
    // nri_options_new, `err` is NULL or writable.
    unsafe {
        with_options(opts, err, |o| {
            *o = std::mem::take(o).wasm_engine(Arc::new(engine?));
            Ok(())
        })
    }
}

/// Run no WASM plugins, as upstream built with its `nri_no_wasm` build
/// tag: a module in the plugin directory is refused with "no WASM
/// support", on any engine, lent or compiled (see `nri_wasm_supported`).
/// go/adaptation sets it when built with that tag.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_disable_wasm(
    opts: *mut nri_options,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_disable_wasm's contract: `opts` comes from
    // nri_options_new, `err` is NULL or writable.
    unsafe {
        with_options(opts, err, |o| {
            *o = std::mem::take(o).disable_wasm();
            Ok(())
        })
    }
}

/// Accept no external plugin connections: no socket is created
/// (`WithDisabledExternalConnections`).
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_disable_external_connections(
    opts: *mut nri_options,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_disable_external_connections's contract: `opts` comes
    // from nri_options_new, `err` is NULL or writable.
    unsafe {
        with_options(opts, err, |o| {
            *o = std::mem::take(o).disable_external_connections();
            Ok(())
        })
    }
}

/// How long a plugin may take to register, in milliseconds, for this
/// adaptation only (0 keeps the process-wide value, see
/// `nri_set_plugin_registration_timeout`).
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_registration_timeout(
    opts: *mut nri_options,
    millis: u64,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_registration_timeout's contract: `opts` comes
    // from nri_options_new, `err` is NULL or writable.
    unsafe { set_timeout(opts, millis, err, Options::registration_timeout) }
}

/// How long a plugin may take to answer a request, in milliseconds, for
/// this adaptation only (0 keeps the process-wide value, see
/// `nri_set_plugin_request_timeout`).
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_request_timeout(
    opts: *mut nri_options,
    millis: u64,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_request_timeout's contract: `opts` comes from
    // nri_options_new, `err` is NULL or writable.
    unsafe { set_timeout(opts, millis, err, Options::request_timeout) }
}

/// A time budget for each whole event, in milliseconds (0: none, the
/// default, as upstream). Each plugin call then waits at most what is left
/// of the budget; when it runs out the event fails with
/// `NRI_STATUS_PLUGIN_FAILED` ("... exceeded the NRI event time budget
/// of ...") and no plugin is dropped for it. Not upstream's.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_event_timeout(
    opts: *mut nri_options,
    millis: u64,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_event_timeout's contract: `opts` comes from
    // nri_options_new, `err` is NULL or writable.
    unsafe { set_timeout(opts, millis, err, Options::event_timeout) }
}

/// A request timeout for one plugin, instead of the adaptation's, for every
/// request to it. `plugin` is its `idx-name` or its name alone (the
/// `idx-name` wins); it overrides a pre-installed plugin's runtime drop-in
/// (`<idx>-<name>.runtime.yaml`, key `requestTimeout`). `millis` must be
/// at least 1; setting a plugin again replaces its timeout. Not upstream's.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `plugin` is a NUL-terminated
/// string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_plugin_request_timeout(
    opts: *mut nri_options,
    plugin: *const c_char,
    millis: u64,
    err: *mut *mut nri_error,
) -> nri_status {
    let t = Duration::from_millis(millis);
    // SAFETY: nri_options_set_plugin_request_timeout's contract: `opts`
    // comes from nri_options_new, `plugin` is NUL-terminated, `err` is
    // NULL or writable.
    unsafe {
        set_str(opts, "plugin", plugin, err, |o, name| {
            o.plugin_request_timeout(name, t)
        })
    }
}

/// How long a plugin's Synchronize may take, all its messages together,
/// in milliseconds, used as is for every plugin without one of its own
/// (`nri_options_set_plugin_sync_timeout`). Unset, a sync may take the
/// registration timeout, or the plugin's request timeout if longer, plus
/// 1 ms per pod and container sent; upstream gives it the request timeout.
/// `millis` must be at least 1. Not upstream's.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_sync_timeout(
    opts: *mut nri_options,
    millis: u64,
    err: *mut *mut nri_error,
) -> nri_status {
    let t = Duration::from_millis(millis);
    // SAFETY: nri_options_set_sync_timeout's contract: `opts` comes from
    // nri_options_new, `err` is NULL or writable.
    unsafe { with_options(opts, err, |o| try_set(o, |o| o.sync_timeout(t))) }
}

/// A sync timeout for one plugin, used as is instead of the adaptation's
/// (`nri_options_set_sync_timeout`) or the default. `plugin` is its
/// `idx-name` or its name alone (the `idx-name` wins); it overrides a
/// pre-installed plugin's runtime drop-in (key `syncTimeout`). `millis`
/// must be at least 1; setting a plugin again replaces its sync timeout,
/// and leaves its request timeout alone. Not upstream's.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `plugin` is a NUL-terminated
/// string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_plugin_sync_timeout(
    opts: *mut nri_options,
    plugin: *const c_char,
    millis: u64,
    err: *mut *mut nri_error,
) -> nri_status {
    let t = Duration::from_millis(millis);
    // SAFETY: nri_options_set_plugin_sync_timeout's contract: `opts` comes
    // from nri_options_new, `plugin` is NUL-terminated, `err` is NULL or
    // writable.
    unsafe {
        set_str(opts, "plugin", plugin, err, |o, name| {
            o.plugin_sync_timeout(name, t)
        })
    }
}

/// Whether `nri_adaptation_stop` first sends every connected plugin the
/// protocol's `Shutdown` request, all at once, waiting at most one request
/// timeout in all, before closing the connections. Off by default, as
/// upstream never sends it. Not upstream's.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_shutdown_on_stop(
    opts: *mut nri_options,
    on: bool,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_shutdown_on_stop's contract: `opts` comes
    // from nri_options_new, `err` is NULL or writable.
    unsafe { set_flag(opts, on, err, Options::shutdown_on_stop) }
}

/// Whether the default validator's required plugins guard pods too: a
/// `RunPodSandbox` fails with `NRI_STATUS_REJECTED` ("validator
/// "00-default-validator" rejected pod sandbox, reason: ...") when a
/// required plugin is absent before it or was dropped during it. Needs the
/// default validator (`nri_options_set_default_validator`). Off by default,
/// as upstream lets pods through. Not upstream's.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_required_plugins_guard_pods(
    opts: *mut nri_options,
    on: bool,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_required_plugins_guard_pods's contract: `opts` comes
    // from nri_options_new, `err` is NULL or writable.
    unsafe { set_flag(opts, on, err, Options::required_plugins_guard_pods) }
}

/// Kept for runtimes that set it; it changes nothing. A plugin that
/// connects is made active as soon as it answered its `Synchronize`, while
/// the runtime's sync callback still runs, after the events it missed
/// meanwhile were replayed to it. Not upstream's.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_activate_within_sync(
    opts: *mut nri_options,
    on: bool,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_activate_within_sync's contract: `opts` comes
    // from nri_options_new, `err` is NULL or writable.
    unsafe { set_flag(opts, on, err, Options::activate_within_sync) }
}

/// Whether a plugin that registers under the `idx-name` of a connected one
/// replaces it once synchronized, in one step, so each event reaches
/// exactly one of the two; the old one is closed after the events it was
/// in. Off by default, as upstream keeps both. Not upstream's.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_plugin_handover(
    opts: *mut nri_options,
    on: bool,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_plugin_handover's contract: `opts` comes
    // from nri_options_new, `err` is NULL or writable.
    unsafe { set_flag(opts, on, err, Options::plugin_handover) }
}

/// Whether events of different pods may run at once; those of one pod
/// still run one at a time and in order. A plugin is sent requests of
/// different pods at once only if named with
/// `nri_options_add_concurrent_plugin` (or its runtime drop-in says
/// `concurrentRequests: true`); every other plugin gets one at a time. Off
/// by default, as upstream runs every event in turn. Not upstream's.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_pod_concurrency(
    opts: *mut nri_options,
    on: bool,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_pod_concurrency's contract: `opts` comes
    // from nri_options_new, `err` is NULL or writable.
    unsafe { set_flag(opts, on, err, Options::pod_concurrency) }
}

/// Names a plugin (`idx-name`, or its name alone) that takes requests of
/// different pods at once, with `nri_options_set_pod_concurrency`. An empty
/// name is refused. Not upstream's.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `plugin` is a NUL-terminated
/// string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_add_concurrent_plugin(
    opts: *mut nri_options,
    plugin: *const c_char,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_add_concurrent_plugin's contract: `opts` comes
    // from nri_options_new, `plugin` is NUL-terminated, `err` is NULL or
    // writable.
    unsafe {
        set_str(opts, "plugin", plugin, err, |o, name| {
            o.concurrent_plugin(name)
        })
    }
}

/// Sets an on/off option.
///
/// # Safety
/// As for [`with_options`].
unsafe fn set_flag(
    opts: *mut nri_options,
    on: bool,
    err: *mut *mut nri_error,
    set: fn(Options, bool) -> Options,
) -> nri_status {
    // SAFETY: this function's contract is `with_options`'s.
    unsafe {
        with_options(opts, err, |o| {
            *o = set(std::mem::take(o), on);
            Ok(())
        })
    }
}

/// Sets a per-adaptation timeout; 0 leaves the process-wide one in force.
///
/// # Safety
/// As for [`with_options`].
unsafe fn set_timeout(
    opts: *mut nri_options,
    millis: u64,
    err: *mut *mut nri_error,
    set: fn(Options, Duration) -> Options,
) -> nri_status {
    // SAFETY: this function's contract is `with_options`'s.
    unsafe {
        with_options(opts, err, |o| {
            if millis > 0 {
                *o = set(std::mem::take(o), Duration::from_millis(millis));
            }
            Ok(())
        })
    }
}

/// Enables the builtin default validator with this configuration
/// (`WithDefaultValidator`), given as YAML or JSON with upstream's keys
/// (`enable`, `rejectOCIHookAdjustment`, `requiredPlugins`,
/// `tolerateMissingPluginsAnnotation`, ...). A configuration without
/// `enable: true` leaves the validator off, as upstream does.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `config` is a NUL-terminated
/// string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_default_validator(
    opts: *mut nri_options,
    config: *const c_char,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_default_validator's contract: `opts` comes from
    // nri_options_new, `config` is NUL-terminated, `err` is NULL or writable.
    unsafe { set_str(opts, "config", config, err, Options::default_validator_yaml) }
}

/// Checks who registers external plugins (off by default; not upstream's):
/// `policy` is YAML or JSON (`rules: [{plugins: [...], uids: [...], gids:
/// [...], executables: [...], cgroups: [...]}]`). A plugin may register
/// under a name only if a rule lists it and the plugin's process (its
/// uid, gid, executable and cgroup, recorded when it connected) meets the
/// rule's criteria, and only while no other live plugin holds the name,
/// whatever its index. With `nri_options_set_plugin_handover`, a new
/// instance of the same idx-name, uid, gid and executable may take it
/// over. A policy with an unknown key or a relative path fails with
/// `NRI_STATUS_INVALID_ARGUMENT`.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `policy` is a NUL-terminated
/// string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_plugin_identities(
    opts: *mut nri_options,
    policy: *const c_char,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_plugin_identities's contract: `opts` comes
    // from nri_options_new, `policy` is NUL-terminated, `err` is NULL or
    // writable.
    unsafe { set_str(opts, "policy", policy, err, Options::plugin_identities_yaml) }
}

/// Adds a builtin plugin (`WithBuiltinPlugins`). The plugin's user data is
/// owned from here on, even when this fails.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `plugin` points to a valid
/// `nri_builtin_plugin` (its strings are copied); `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_add_builtin_plugin(
    opts: *mut nri_options,
    plugin: *const nri_builtin_plugin,
    err: *mut *mut nri_error,
) -> nri_status {
    // Take the plugin (and its user data) before anything can fail.
    // SAFETY: nri_options_add_builtin_plugin's contract: `plugin` points to a
    // valid nri_builtin_plugin, which includes NUL-terminated `name` and
    // `index`.
    let taken = unsafe { FfiBuiltin::from_c(plugin) };
    // SAFETY: nri_options_add_builtin_plugin's contract: `opts` comes from
    // nri_options_new, `err` is NULL or writable.
    unsafe {
        with_options(opts, err, |o| {
            let (name, index, handlers) = taken?;
            try_set(o, |o| {
                o.builtin_plugins([BuiltinPlugin::new(name, index, handlers)])
            })
        })
    }
}

/// Sets the metrics callbacks (`WithMetrics`). The table is copied; its user
/// data is owned from here on.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `metrics` points to a valid
/// `nri_metrics`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_metrics(
    opts: *mut nri_options,
    metrics: *const nri_metrics,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_metrics's contract: `metrics` points to a valid
    // nri_metrics (NULL is refused below, inside the boundary).
    let m = unsafe { arg_ref("metrics", metrics) }.map(FfiMetrics::from_c);
    // SAFETY: nri_options_set_metrics's contract: `opts` comes from
    // nri_options_new, `err` is NULL or writable.
    unsafe {
        with_options(opts, err, |o| {
            *o = std::mem::take(o).metrics(Arc::new(m?));
            Ok(())
        })
    }
}

/// Sets the deprecation recorder (`WithDeprecationRecorder`). Its user data
/// is owned from here on, even when this fails.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_deprecation_recorder(
    opts: *mut nri_options,
    record: nri_deprecation_fn,
    user_data: *mut c_void,
    free_user_data: nri_free_fn,
    err: *mut *mut nri_error,
) -> nri_status {
    let data = UserData::new(user_data, free_user_data);
    // SAFETY: nri_options_set_deprecation_recorder's contract: `opts` comes
    // from nri_options_new, `err` is NULL or writable.
    unsafe {
        with_options(opts, err, |o| {
            let f = record.ok_or_else(|| Failure::invalid("record is NULL"))?;
            *o = std::mem::take(o).deprecation_recorder(Arc::new(FfiDeprecation { f, data }));
            Ok(())
        })
    }
}

/// Keeps an audit log, passing each record to `record` (off by default;
/// not upstream's): one record per CreateContainer, UpdateContainer or
/// StopContainer in which a plugin changed something or a validator
/// refused, and per update a plugin asked for on its own. Its user data is
/// owned from here on, even when this fails, and freed once the last record
/// was delivered, when the adaptation is freed.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_audit_callback(
    opts: *mut nri_options,
    record: nri_audit_fn,
    user_data: *mut c_void,
    free_user_data: nri_free_fn,
    err: *mut *mut nri_error,
) -> nri_status {
    let data = UserData::new(user_data, free_user_data);
    // SAFETY: nri_options_set_audit_callback's contract: `opts` comes from
    // nri_options_new, `err` is NULL or writable.
    unsafe {
        with_options(opts, err, |o| {
            let f = record.ok_or_else(|| Failure::invalid("record is NULL"))?;
            *o = std::mem::take(o).audit_sink(Arc::new(FfiAudit { f, data }));
            Ok(())
        })
    }
}

/// Keeps an audit log (see `nri_options_set_audit_callback`) in the file
/// at `path`, as JSON lines appended to it; `nri_adaptation_new` fails if
/// it cannot be opened.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `path` is a NUL-terminated string;
/// `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_audit_file(
    opts: *mut nri_options,
    path: *const c_char,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_audit_file's contract: `opts` comes from
    // nri_options_new, `path` is NUL-terminated, `err` is NULL or writable.
    unsafe { set_str(opts, "path", path, err, |o, p| o.audit_file(p)) }
}

/// Whether audit records carry environment variables' values; by default
/// they read "(redacted)", the names being kept.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_audit_env_values(
    opts: *mut nri_options,
    on: bool,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_audit_env_values's contract: `opts` comes
    // from nri_options_new, `err` is NULL or writable.
    unsafe { set_flag(opts, on, err, Options::audit_env_values) }
}

/// The most bytes one audit record's JSON may take (default 65536; at
/// least 256): past it, the merged values are left out, then changes from
/// the end of the list, and the record's `omitted` says what.
///
/// # Safety
/// `opts` comes from `nri_options_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_audit_record_limit(
    opts: *mut nri_options,
    bytes: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_options_set_audit_record_limit's contract: `opts` comes
    // from nri_options_new, `err` is NULL or writable.
    unsafe { with_options(opts, err, |o| try_set(o, |o| o.audit_record_limit(bytes))) }
}

/// The NRI version reported to plugins in `Configure` (default: the
/// version of `nri_api_version`). Upstream reports the NRI module version
/// of the runtime's build; its tests override it (`WithTestNRIVersion`).
///
/// # Safety
/// `opts` comes from `nri_options_new`; `version` is a NUL-terminated
/// string; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_options_set_nri_version(
    opts: *mut nri_options,
    version: *const c_char,
    err: *mut *mut nri_error,
) -> nri_status {
    let set = |o: &mut Options| {
        // SAFETY: nri_options_set_nri_version's contract: `version` is NUL-
        // terminated.
        let v = unsafe { str_arg("version", version) }?;
        *o = std::mem::take(o).nri_version(v);
        Ok(())
    };
    // SAFETY: nri_options_set_nri_version's contract: `opts` comes from
    // nri_options_new, `err` is NULL or writable.
    unsafe { with_options(opts, err, set) }
}
