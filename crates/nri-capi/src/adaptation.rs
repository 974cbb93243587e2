//! `nri_adaptation`: the runtime adaptation behind an opaque handle and its
//! lifecycle; the events it relays are in `events.rs`.
//!
//! Every function blocks the calling thread until done. They may be called
//! from many threads at once, but not from inside a callback of the same
//! adaptation (the sync callback holds the plugin synchronization, and the
//! others run on the adaptation's own threads), and `nri_adaptation_free`
//! must not race with any other call on the same handle.

use std::ffi::c_char;
use std::sync::Arc;
use std::time::Duration;

use futures::executor::block_on;

use super::buffer::{nri_buffer, str_arg};
use super::callbacks::{nri_callbacks, FfiSync, FfiUpdate, UserData};
use super::error::{boundary, boundary_void, nri_error};
use super::options::nri_options;
use super::ptr::{arg_ref, Handle, OutSlot};
use super::status::{nri_status, Failure};
use nri_api::*;
use nri_runtime::{self as adaptation, Adaptation, Options, PluginSyncBlock};

/// An NRI runtime adaptation (Rust type: `Box<nri_adaptation>` around
/// `nri_runtime::Adaptation`, which owns its own tokio runtime thread).
pub struct nri_adaptation {
    pub(crate) inner: Adaptation,
}

impl Handle for nri_adaptation {
    const NAME: &'static str = "adaptation";
}

/// Creates an adaptation for the runtime `name` `version` (upstream `New`).
/// `opts` may be NULL for the defaults; it is consumed either way, as is
/// the callbacks' user data (its finalizer runs when the adaptation is
/// freed, or before this returns if it fails). On success `*out` receives
/// the handle.
///
/// # Safety
/// `name` and `version` are NUL-terminated strings; `callbacks` points to a
/// valid table; `opts` is NULL or from `nri_options_new`; `out` is
/// writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_new(
    name: *const c_char,
    version: *const c_char,
    callbacks: *const nri_callbacks,
    opts: *mut nri_options,
    out: *mut *mut nri_adaptation,
    err: *mut *mut nri_error,
) -> nri_status {
    // Take ownership of everything handed over before anything can fail.
    // SAFETY: nri_adaptation_new's contract: `opts` is NULL or from
    // nri_options_new, and consumed by this call, so C no longer uses it.
    let opts = unsafe { nri_options::take(opts) }.map_or_else(Options::default, |o| o.inner);
    // SAFETY: nri_adaptation_new's contract: `callbacks` points to a valid
    // table (NULL is refused below, inside the boundary).
    let cbs = unsafe { arg_ref("callbacks", callbacks) };
    let data = cbs
        .as_ref()
        .ok()
        .map(|c| UserData::new(c.user_data, c.free_user_data));
    boundary(err, || {
        let cbs = cbs?;
        let data = data.expect("taken with the callbacks");
        let sync = cbs
            .sync
            .ok_or_else(|| Failure::invalid("callbacks.sync is NULL"))?;
        let update = cbs
            .update
            .ok_or_else(|| Failure::invalid("callbacks.update is NULL"))?;
        // SAFETY: nri_adaptation_new's contract: `name` is NUL-terminated.
        let name = unsafe { str_arg("name", name) }?;
        // SAFETY: nri_adaptation_new's contract: `version` is
        // NUL-terminated.
        let version = unsafe { str_arg("version", version) }?;
        // SAFETY: nri_adaptation_new's contract: `out` is writable.
        let out = unsafe { OutSlot::new("out", out) }?;
        let inner = Adaptation::new(
            name,
            version,
            FfiSync {
                f: sync,
                data: Arc::clone(&data),
            },
            FfiUpdate { f: update, data },
            opts,
        )?;
        out.write(nri_adaptation { inner }.into_raw());
        Ok(())
    })
}

/// Starts builtin and pre-installed plugins, synchronizes them through the
/// sync callback, then opens the socket for external plugins (upstream
/// `Start`). Fails with `NRI_STATUS_START_FAILED` if already started.
///
/// # Safety
/// `a` is a live handle; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_start(
    a: *const nri_adaptation,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: nri_adaptation_start's contract: `a` is a live handle.
        let a = unsafe { nri_adaptation::arg(a) }?;
        Ok(block_on(a.inner.start())?)
    })
}

/// Stops accepting plugins and closes all of them (upstream `Stop`).
/// Stopping a stopped adaptation does nothing. Events are refused with
/// `NRI_STATUS_NOT_RUNNING` until it is started again.
///
/// # Safety
/// `a` is a live handle; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_stop(
    a: *const nri_adaptation,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: nri_adaptation_stop's contract: `a` is a live handle.
        let a = unsafe { nri_adaptation::arg(a) }?;
        block_on(a.inner.stop());
        Ok(())
    })
}

/// Whether `event` (an `nri_event` number) must reach the core now. False
/// only while the adaptation runs, no active plugin subscribes to the
/// event (for CreateContainer: and no validator is active; for
/// RunPodSandbox: and required plugins do not guard pods) and no plugin
/// has left since the last event (the next event prunes it and reports
/// the new plugin count, as upstream's does). Such an event succeeds
/// without any plugin seeing it, with the response it has when no plugin
/// answers, so a runtime may skip it and save encoding the request. True
/// for a NULL handle, an unknown event, or an adaptation not running: the
/// event call then reports why. One atomic load; never blocks.
///
/// # Safety
/// `a` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_wants_event(a: *const nri_adaptation, event: i32) -> bool {
    let wants = || {
        // SAFETY: nri_adaptation_wants_event's contract: `a` is NULL or a
        // live handle.
        let Some(a) = (unsafe { nri_adaptation::get(a) }) else {
            return true;
        };
        <Event as protobuf::Enum>::from_i32(event).is_none_or(|e| a.inner.wants_event(e))
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(wants)).unwrap_or(true)
}

/// How many threads the adaptations' own runtimes have running in this
/// process (each one's thread and blocking pool), for leak checks: after
/// `nri_adaptation_stop` of every adaptation it is 0, unless a runtime
/// callback that was still running then is still running. Counting threads
/// by their name would count a host's threads too: a thread a host's
/// runtime starts from within a callback inherits the callback thread's
/// name.
#[no_mangle]
pub extern "C" fn nri_core_threads() -> usize {
    nri_runtime::core_threads()
}

/// Whether this library runs WASM plugins from the plugin directory by
/// itself, compiled (built with its `compiled-wasm` feature; the default
/// build is not). When false, WASM plugins run only on an engine the
/// caller lends (`nri_options_set_wasm_engine`, as go/adaptation lends
/// wazero); an adaptation lent none logs upstream's `ErrWasmDisabled`
/// condition ("WASM support is disabled (at build time)") and refuses them
/// with "no WASM support", as upstream built with `nri_no_wasm` does.
#[no_mangle]
pub extern "C" fn nri_wasm_supported() -> bool {
    nri_runtime::WASM_SUPPORTED
}

/// Whether a plugin of full name `name` (`idx-name`, e.g. `10-logger`) is
/// active: registered and its connection open. False for a NULL handle, a
/// NULL or non-UTF-8 name, or a plugin that is gone or closing. Never
/// blocks on an event in progress.
///
/// # Safety
/// `a` is NULL or a live handle; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_has_plugin(
    a: *const nri_adaptation,
    name: *const c_char,
) -> bool {
    let has = || {
        // SAFETY: nri_adaptation_has_plugin's contract: `a` is NULL or a
        // live handle.
        let Some(a) = (unsafe { nri_adaptation::get(a) }) else {
            return false;
        };
        // SAFETY: nri_adaptation_has_plugin's contract: `name` is NULL or
        // NUL-terminated.
        unsafe { str_arg("name", name) }.is_ok_and(|name| a.inner.has_plugin(name))
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(has)).unwrap_or(false)
}

/// The identity of the active plugin `name` (`idx-name`), as the kernel
/// reported its process when it connected or was launched: a JSON object
/// written to `identity` (`{"uid":0,"gid":0,"pid":42,"executable":"...",
/// "cgroup":"...","podUid":"...","containerId":"..."}`, what is unknown
/// left out). The buffer is empty if no such plugin is active or it has no
/// identity (builtin and WASM plugins). Never blocks on an event. Not
/// upstream's.
///
/// # Safety
/// `a` is a live handle; `name` is a NUL-terminated string; `identity` is
/// writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_plugin_identity(
    a: *const nri_adaptation,
    name: *const c_char,
    identity: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: nri_adaptation_plugin_identity's contract: `identity` is
        // writable.
        let out = unsafe { OutSlot::new("identity", identity) }?;
        // SAFETY: nri_adaptation_plugin_identity's contract: `a` is a live
        // handle.
        let a = unsafe { nri_adaptation::arg(a) }?;
        // SAFETY: nri_adaptation_plugin_identity's contract: `name` is
        // NUL-terminated.
        let name = unsafe { str_arg("name", name) }?;
        let json = a
            .inner
            .plugin_identity(name)
            .map(|id| id.to_json().into_bytes())
            .unwrap_or_default();
        out.write(nri_buffer::from_vec(json));
        Ok(())
    })
}

/// Stops the adaptation if needed and releases it; the callbacks' user data
/// finalizers run once every callback has returned. NULL is a no-op.
///
/// # Safety
/// `a` is NULL or a live handle, not used by any other call meanwhile or
/// afterwards, and this is not called from one of its callbacks.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_free(a: *mut nri_adaptation) {
    if a.is_null() {
        return;
    }
    boundary_void("nri_adaptation_free", || {
        // SAFETY: nri_adaptation_free's contract: `a` is a live handle
        // that no other call uses meanwhile or afterwards.
        unsafe { nri_adaptation::free(a) }
    });
}

/// Holds off the synchronization of plugins that connect from now on, until
/// released by `nri_plugin_sync_block_free` (upstream `BlockPluginSync` and
/// `Unblock`).
pub struct nri_plugin_sync_block {
    _block: PluginSyncBlock,
}

impl Handle for nri_plugin_sync_block {
    const NAME: &'static str = "block";
}

/// Blocks plugin synchronization (upstream `BlockPluginSync`): waits for a
/// synchronization in progress to finish, then keeps new ones waiting until
/// the block is freed. Events are not affected.
///
/// # Safety
/// `a` is a live handle; `out` is writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_block_plugin_sync(
    a: *const nri_adaptation,
    out: *mut *mut nri_plugin_sync_block,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: nri_adaptation_block_plugin_sync's contract: `a` is a
        // live handle.
        let a = unsafe { nri_adaptation::arg(a) }?;
        // SAFETY: nri_adaptation_block_plugin_sync's contract: `out` is
        // writable.
        let out = unsafe { OutSlot::new("out", out) }?;
        let block = nri_plugin_sync_block {
            _block: a.inner.block_plugin_sync_blocking(),
        };
        out.write(block.into_raw());
        Ok(())
    })
}

/// Releases a plugin sync block, letting waiting plugins synchronize
/// (upstream `Unblock`). NULL is a no-op.
///
/// # Safety
/// `block` is NULL or from `nri_adaptation_block_plugin_sync`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_plugin_sync_block_free(block: *mut nri_plugin_sync_block) {
    if !block.is_null() {
        boundary_void("nri_plugin_sync_block_free", || {
            // SAFETY: nri_plugin_sync_block_free's contract: `block` is from
            // nri_adaptation_block_plugin_sync, not yet freed.
            unsafe { nri_plugin_sync_block::free(block) }
        });
    }
}

/// Sets the process-wide plugin registration timeout, in milliseconds
/// (upstream `SetPluginRegistrationTimeout`); adaptations without their own
/// timeout use it from their next registration on.
#[no_mangle]
pub extern "C" fn nri_set_plugin_registration_timeout(millis: u64) {
    adaptation::set_plugin_registration_timeout(Duration::from_millis(millis));
}

/// Sets the process-wide plugin request timeout, in milliseconds (upstream
/// `SetPluginRequestTimeout`).
#[no_mangle]
pub extern "C" fn nri_set_plugin_request_timeout(millis: u64) {
    adaptation::set_plugin_request_timeout(Duration::from_millis(millis));
}
