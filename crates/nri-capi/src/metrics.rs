//! What the core reports to the caller as it goes: metrics (upstream's
//! `Metrics` interface) and deprecated features plugins use, both to be
//! quick, on the adaptation's thread or an event's caller's, and audit
//! records, on a thread of their own.

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;
use std::time::Duration;

use protobuf::Message;

use super::callbacks::{nri_free_fn, UserData};
use super::error::to_cstring;
use nri_api::*;
use nri_runtime::{AuditRecord, AuditSink, Deprecation, DeprecationRecorder, Error, Metrics};

/// Metrics callbacks (upstream's `Metrics` interface). Each may be NULL.
/// `plugin` is the plugin's `idx-name`, `op` the operation ("CreateContainer",
/// "Synchronize", ...). They run while events are dispatched, on the
/// adaptation's thread or, for an event that waits for one plugin, on the
/// thread that called the event: keep them quick and do not call the
/// library from them.
#[repr(C)]
pub struct nri_metrics {
    /// Every call made to a plugin; `error` is NULL on success.
    pub invocation: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            plugin: *const c_char,
            op: *const c_char,
            error: *const c_char,
        ),
    >,
    /// How long a plugin call took, in nanoseconds.
    pub latency: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            plugin: *const c_char,
            op: *const c_char,
            nanos: u64,
        ),
    >,
    /// A plugin's answer: its `ContainerAdjustment` encoded (NULL when it
    /// made none; non-NULL, possibly with length 0, when it made one), and
    /// how many updates and evictions it asked for.
    pub adjustments: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            plugin: *const c_char,
            op: *const c_char,
            adjustment: *const u8,
            adjustment_len: usize,
            updates: usize,
            evictions: usize,
        ),
    >,
    /// The number of active plugins.
    pub plugin_count: Option<unsafe extern "C" fn(user_data: *mut c_void, count: usize)>,
    pub user_data: *mut c_void,
    /// Optional; called with `user_data` once, when the adaptation is freed.
    pub free_user_data: nri_free_fn,
}

pub(crate) struct FfiMetrics {
    invocation:
        Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char, *const c_char)>,
    latency: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char, u64)>,
    adjustments: Option<
        unsafe extern "C" fn(
            *mut c_void,
            *const c_char,
            *const c_char,
            *const u8,
            usize,
            usize,
            usize,
        ),
    >,
    plugin_count: Option<unsafe extern "C" fn(*mut c_void, usize)>,
    data: Arc<UserData>,
}

impl FfiMetrics {
    pub(crate) fn from_c(m: &nri_metrics) -> FfiMetrics {
        FfiMetrics {
            invocation: m.invocation,
            latency: m.latency,
            adjustments: m.adjustments,
            plugin_count: m.plugin_count,
            data: UserData::new(m.user_data, m.free_user_data),
        }
    }
}

fn cstr(s: &str) -> CString {
    to_cstring(s.to_string())
}

impl Metrics for FfiMetrics {
    fn record_plugin_invocation(&self, plugin: &str, op: &str, err: Option<&Error>) {
        if let Some(f) = self.invocation {
            let err = err.map(|e| to_cstring(e.to_string()));
            let err_ptr = err.as_ref().map_or(std::ptr::null(), |e| e.as_ptr());
            // SAFETY: calls `invocation` of nri_options_set_metrics's table (a
            // valid nri_metrics, by its contract) as the field documents, with
            // the table's user data; the NUL-terminated `plugin`, `op` and
            // `err` (or NULL) live until it returns.
            unsafe {
                f(
                    self.data.ptr,
                    cstr(plugin).as_ptr(),
                    cstr(op).as_ptr(),
                    err_ptr,
                )
            }
        }
    }

    fn record_plugin_latency(&self, plugin: &str, op: &str, latency: Duration) {
        if let Some(f) = self.latency {
            let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
            // SAFETY: calls `latency` of nri_options_set_metrics's table (a
            // valid nri_metrics, by its contract) as the field documents, with
            // the table's user data; the NUL-terminated `plugin` and `op` live
            // until it returns.
            unsafe {
                f(
                    self.data.ptr,
                    cstr(plugin).as_ptr(),
                    cstr(op).as_ptr(),
                    nanos,
                )
            }
        }
    }

    fn record_plugin_adjustments(
        &self,
        plugin: &str,
        op: &str,
        adjust: Option<&ContainerAdjustment>,
        updates: usize,
        evicts: usize,
    ) {
        if let Some(f) = self.adjustments {
            let bytes = adjust
                .map(|a| a.write_to_bytes().unwrap_or_default())
                .unwrap_or_default();
            // Non-NULL, even for an empty encoding, when there is an adjustment.
            let ptr = if adjust.is_some() {
                bytes.as_ptr()
            } else {
                std::ptr::null()
            };
            // SAFETY: calls `adjustments` of nri_options_set_metrics's table (a
            // valid nri_metrics, by its contract) as the field documents, with
            // the table's user data; the NUL-terminated `plugin` and `op`, and
            // `ptr` (NULL, or `bytes.len()` bytes) live until it returns.
            unsafe {
                f(
                    self.data.ptr,
                    cstr(plugin).as_ptr(),
                    cstr(op).as_ptr(),
                    ptr,
                    bytes.len(),
                    updates,
                    evicts,
                )
            }
        }
    }

    fn update_plugin_count(&self, count: usize) {
        if let Some(f) = self.plugin_count {
            // SAFETY: calls `plugin_count` of nri_options_set_metrics's table
            // (a valid nri_metrics, by its contract) as the field documents,
            // with the table's user data.
            unsafe { f(self.data.ptr, count) }
        }
    }
}

/// Told about a plugin using a deprecated NRI feature: `deprecation` is
/// `NRI_DEPRECATION_*`, `plugin` the plugin's `idx-name`. Runs where the
/// event runs: on the adaptation's thread or, for an event that waits for
/// one plugin, on the thread that called the event. Keep it quick and do
/// not call the library from it.
pub type nri_deprecation_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        deprecation: nri_deprecation,
        plugin: *const c_char,
        details: *const c_char,
    ),
>;

/// Deprecated NRI features plugins may still use.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum nri_deprecation {
    /// The plugin has no RPC for an event and gets the old `StateChange`.
    StateChange = 1,
}

pub(crate) struct FfiDeprecation {
    pub(crate) f: unsafe extern "C" fn(*mut c_void, nri_deprecation, *const c_char, *const c_char),
    pub(crate) data: Arc<UserData>,
}

impl DeprecationRecorder for FfiDeprecation {
    fn plugin_warning(&self, deprecation: Deprecation, plugin: &str, details: &str) {
        let d = match deprecation {
            Deprecation::StateChange => nri_deprecation::StateChange,
        };
        // SAFETY: calls the `record` given to
        // nri_options_set_deprecation_recorder as nri_deprecation_fn documents,
        // with its user data (callbacks may run on any thread, by the header's
        // conventions); the NUL-terminated `plugin` and `details` live until it
        // returns.
        unsafe {
            (self.f)(
                self.data.ptr,
                d,
                cstr(plugin).as_ptr(),
                cstr(details).as_ptr(),
            )
        }
    }
}

/// Given each audit record as one line of JSON (`json`, NUL-terminated,
/// `len` bytes without the NUL; see docs/THREAT-MODEL.md for its fields). Runs
/// on the adaptation's audit thread, one record at a time in event order;
/// it may block (events wait only once 1024 records are queued), but must
/// not call the library.
pub type nri_audit_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, json: *const c_char, len: usize)>;

pub(crate) struct FfiAudit {
    pub(crate) f: unsafe extern "C" fn(*mut c_void, *const c_char, usize),
    pub(crate) data: Arc<UserData>,
}

impl AuditSink for FfiAudit {
    fn record(&self, _record: &AuditRecord, json: &str) {
        // JSON escapes NUL, so the text has none; the length is the text's.
        let text = cstr(json);
        // SAFETY: calls the `record` given to nri_options_set_audit_callback
        // as nri_audit_fn documents, with its user data (callbacks may run
        // on any thread, by the header's conventions); `text` lives until
        // it returns.
        unsafe { (self.f)(self.data.ptr, text.as_ptr(), json.len()) }
    }
}
