//! The caller's callbacks, wrapped as the core's traits: the runtime's sync
//! and update functions, builtin plugins, metrics and the deprecation
//! recorder.
//!
//! Callbacks that may block or call back into the library (sync, update,
//! builtin handlers) run on the adaptation's blocking-thread pool, never on
//! the thread driving plugin I/O: a sync callback calls `nri_sync_cb_call`,
//! which needs that thread to talk to the plugins. Metrics and deprecation
//! callbacks run where the event runs (the adaptation's thread, or for an
//! event that waits for one plugin the thread that called it, as upstream
//! calls them from the event's goroutine) and must be quick and must not
//! call the library.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use futures::future::BoxFuture;
use protobuf::Message;

use super::buffer::{bytes, decode, encode as encode_message, nri_buffer, str_arg};
use super::error::{boundary, nri_error};
use super::ptr::{arg_mut, arg_ref, slice_arg, OutSlot};
use super::status::{nri_status, Failure};
use nri_api::*;
use nri_runtime::{BoxError, EncodedState, StateSource, SyncCb, SyncFn, UpdateFn};

/// A finalizer for callback user data.
pub type nri_free_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// The caller's `user_data` and its optional finalizer, run once when the
/// last callback holding it is gone.
pub(crate) struct UserData {
    pub(crate) ptr: *mut c_void,
    free: nri_free_fn,
}

// SAFETY: the header documents that callbacks, and so their user data, may
// be used from any thread, concurrently.
unsafe impl Send for UserData {}
// SAFETY: as for Send; the library itself never dereferences `ptr`.
unsafe impl Sync for UserData {}

impl UserData {
    pub(crate) fn new(ptr: *mut c_void, free: nri_free_fn) -> Arc<UserData> {
        Arc::new(UserData { ptr, free })
    }
}

impl Drop for UserData {
    fn drop(&mut self) {
        if let Some(free) = self.free {
            // SAFETY: `free` and `ptr` came together as a
            // `free_user_data`/`user_data` pair, documented as "called with
            // user_data once"; Drop runs once, when the last Arc holding the
            // pair is gone, so no callback uses `ptr` afterwards.
            unsafe { free(self.ptr) }
        }
    }
}

/// A callback's answer, filled with `nri_reply_set_data` or
/// `nri_reply_set_error` while the callback runs. Left untouched, it is a
/// success with an empty message.
#[derive(Default)]
pub struct nri_reply {
    data: Vec<u8>,
    error: Option<String>,
}

impl nri_reply {
    pub(crate) fn into_result(self) -> Result<Vec<u8>, BoxError> {
        match self.error {
            Some(e) => Err(e.into()),
            None => Ok(self.data),
        }
    }
}

/// Sets the callback's answer to these bytes (copied): the encoded response
/// message the callback's documentation names.
///
/// # Safety
/// `reply` is the reply handed to the running callback; `data` is valid for
/// `len` bytes or `len` is 0.
#[no_mangle]
pub unsafe extern "C" fn nri_reply_set_data(
    reply: *mut nri_reply,
    data: *const u8,
    len: usize,
) -> nri_status {
    boundary(std::ptr::null_mut(), || {
        // SAFETY: nri_reply_set_data's contract: `reply` is the reply handed to
        // the running callback, which the library does not touch until the
        // callback returns.
        let reply = unsafe { arg_mut("reply", reply) }?;
        // SAFETY: nri_reply_set_data's contract: `data` is valid for `len`
        // bytes, or `len` is 0.
        reply.data = unsafe { bytes("data", data, len) }?.to_vec();
        Ok(())
    })
}

/// Makes the callback fail with this message (copied). For a builtin
/// plugin's validation, the message is the reason of the rejection.
///
/// # Safety
/// `reply` is the reply handed to the running callback; `message` is a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn nri_reply_set_error(
    reply: *mut nri_reply,
    message: *const c_char,
) -> nri_status {
    boundary(std::ptr::null_mut(), || {
        // SAFETY: nri_reply_set_error's contract: `reply` is the reply handed
        // to the running callback, which the library does not touch until the
        // callback returns.
        let reply = unsafe { arg_mut("reply", reply) }?;
        // SAFETY: nri_reply_set_error's contract: `message` is NUL-terminated.
        let msg = unsafe { str_arg("message", message) }?;
        reply.error = Some(msg.to_string());
        Ok(())
    })
}

/// Runs a blocking callback on the adaptation's blocking pool and returns
/// its reply.
pub(crate) async fn run_blocking(
    what: &'static str,
    f: impl FnOnce(&mut nri_reply) + Send + 'static,
) -> Result<Vec<u8>, BoxError> {
    let joined = tokio::task::spawn_blocking(move || {
        let mut reply = nri_reply::default();
        f(&mut reply);
        reply
    })
    .await;
    match joined {
        Ok(reply) => reply.into_result(),
        Err(e) => Err(format!("{what} callback did not complete: {e}").into()),
    }
}

pub(crate) fn decode_reply<M: Message>(bytes: Vec<u8>) -> Result<M, BoxError> {
    decode::<M>(&bytes).map_err(|f| f.message.into())
}

/// The runtime's sync callback. It holds the runtime's lock, encodes its
/// pods and containers as a `SynchronizeRequest` (fields `pod` and
/// `container`), calls `nri_sync_cb_call` with them, applies the updates
/// it gets back, and returns. An error set on `reply` rejects the plugin(s).
pub type nri_sync_fn = Option<
    unsafe extern "C" fn(user_data: *mut c_void, cb: *mut nri_sync_cb, reply: *mut nri_reply),
>;

/// The runtime's handler of unsolicited container updates. `request` is an
/// encoded `UpdateContainersRequest` (field `update`); the reply data is an
/// encoded `UpdateContainersResponse` listing the updates that failed.
pub type nri_update_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        request: *const u8,
        len: usize,
        reply: *mut nri_reply,
    ),
>;

/// The synchronization of the plugin(s) being brought up, handed to the
/// sync callback. Valid only while that callback runs.
pub struct nri_sync_cb {
    cb: SyncCb,
    handle: tokio::runtime::Handle,
}

/// Synchronizes the plugin(s) with the runtime's state: `state` is an
/// encoded `SynchronizeRequest` with the runtime's pods and containers. On
/// success `*updates` receives an encoded `SynchronizeResponse` whose
/// `update` lists the container updates the plugins asked for.
///
/// # Safety
/// `cb` is the value handed to the running sync callback; `state` is valid
/// for `len` bytes (or `len` is 0); `updates` is writable; `err` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn nri_sync_cb_call(
    cb: *mut nri_sync_cb,
    state: *const u8,
    len: usize,
    updates: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: nri_sync_cb_call's contract: `cb` is the value handed to the
        // running sync callback, alive until it returns.
        let cb = unsafe { arg_ref("cb", cb) }?;
        // SAFETY: nri_sync_cb_call's contract: `updates` is writable.
        let updates = unsafe { OutSlot::new("updates", updates) }?;
        // SAFETY: nri_sync_cb_call's contract: `state` is valid for `len`
        // bytes, or `len` is 0.
        let state = unsafe { bytes(SynchronizeRequest::NAME, state, len) }?;
        // Plugins get the pods and containers as encoded here: decoding and
        // encoding them again would cost more than all else in a sync.
        let state = EncodedState::split(state).map_err(|e| {
            Failure::new(
                nri_status::InvalidMessage,
                format!("invalid {}: {e}", SynchronizeRequest::NAME),
            )
        })?;
        synchronize(cb, updates, &state)
    })
}

/// Synchronizes the plugin(s) of `cb` with `state` and writes their
/// updates, as an encoded `SynchronizeResponse`, to `updates`.
fn synchronize(
    cb: &nri_sync_cb,
    updates: OutSlot<'_, nri_buffer>,
    state: &dyn StateSource,
) -> Result<(), Failure> {
    let mut rsp = SynchronizeResponse::new();
    rsp.update = cb.handle.block_on(cb.cb.call_source(state))?;
    updates.write(encode_message(&rsp)?);
    Ok(())
}

/// Encodes part of the runtime's state for [`nri_sync_cb_stream`]: pods
/// `pods_from` up to (not including) `pods_to` and containers
/// `containers_from` up to `containers_to`, of the lists whose sizes were
/// given, written to `out` as the encoded `SynchronizeRequest` holding just
/// those (fields `pods`, then `containers`, each object at exactly its
/// given size; no `more`), which takes exactly the `len` bytes `out` has.
/// An error set on `reply` with `nri_reply_set_error` fails the sync with
/// that message; so do bytes that do not hold those objects at those
/// sizes. Called on the thread that called `nri_sync_cb_stream`, before it
/// returns, once for each message each plugin is sent.
pub type nri_sync_encode_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        pods_from: usize,
        pods_to: usize,
        containers_from: usize,
        containers_to: usize,
        out: *mut u8,
        len: usize,
        reply: *mut nri_reply,
    ),
>;

/// No encoded object is larger: protobuf's own limit (2 GiB).
const MAX_OBJECT_SIZE: usize = i32::MAX as usize;

/// As [`nri_sync_cb_call`], but the state is encoded a message at a time,
/// so that it never exists encoded all at once: `pod_sizes` (`pods` of
/// them) and `container_sizes` (`containers`) are the encoded size of each
/// pod and container, in order, from which the messages are planned as
/// `nri_sync_cb_call` plans them; `encode` is called with `user_data` for
/// each message's objects (see [`nri_sync_encode_fn`]). Each message is
/// encoded while the plugin reads the one before.
///
/// # Safety
/// `cb` is the value handed to the running sync callback; `pod_sizes` is
/// valid for `pods` elements and `container_sizes` for `containers` (or
/// the count is 0), unchanged until this returns; `updates` is writable;
/// `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_sync_cb_stream(
    cb: *mut nri_sync_cb,
    pod_sizes: *const usize,
    pods: usize,
    container_sizes: *const usize,
    containers: usize,
    encode: nri_sync_encode_fn,
    user_data: *mut c_void,
    updates: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: nri_sync_cb_stream's contract: `cb` is the value handed to
        // the running sync callback, alive until it returns.
        let cb = unsafe { arg_ref("cb", cb) }?;
        // SAFETY: nri_sync_cb_stream's contract: `updates` is writable.
        let updates = unsafe { OutSlot::new("updates", updates) }?;
        // SAFETY: nri_sync_cb_stream's contract: `pod_sizes` is valid for
        // `pods` elements, or `pods` is 0, unchanged until this returns.
        let pod_sizes = unsafe { slice_arg("pod_sizes", pod_sizes, pods) }?;
        // SAFETY: as for pod_sizes.
        let container_sizes = unsafe { slice_arg("container_sizes", container_sizes, containers) }?;
        let encode = encode.ok_or_else(|| Failure::invalid("encode is NULL"))?;
        for (what, sizes) in [
            ("pod_sizes", pod_sizes),
            ("container_sizes", container_sizes),
        ] {
            if let Some((i, n)) = sizes.iter().enumerate().find(|(_, &n)| n > MAX_OBJECT_SIZE) {
                return Err(Failure::invalid(format!(
                    "{what}[{i}] is {n}: no encoded object is that large"
                )));
            }
        }
        let state = CallerState {
            pod_sizes,
            container_sizes,
            encode,
            user_data,
        };
        synchronize(cb, updates, &state)
    })
}

/// The state `nri_sync_cb_stream` was given: its sizes, and the caller's
/// function that encodes a message's objects.
struct CallerState<'a> {
    pod_sizes: &'a [usize],
    container_sizes: &'a [usize],
    encode: unsafe extern "C" fn(
        *mut c_void,
        usize,
        usize,
        usize,
        usize,
        *mut u8,
        usize,
        *mut nri_reply,
    ),
    user_data: *mut c_void,
}

// SAFETY: synchronizing calls `encode` only from the future that
// nri_sync_cb_stream's `block_on` drives on the caller's own thread (no
// part of a sync is spawned), which is where nri_sync_encode_fn is
// documented to be called; `user_data` is never dereferenced here.
unsafe impl Sync for CallerState<'_> {}

impl StateSource for CallerState<'_> {
    fn counts(&self) -> (usize, usize) {
        (self.pod_sizes.len(), self.container_sizes.len())
    }

    fn pod_len(&self, i: usize) -> usize {
        self.pod_sizes[i]
    }

    fn container_len(&self, i: usize) -> usize {
        self.container_sizes[i]
    }

    fn encode(
        &self,
        pods: std::ops::Range<usize>,
        containers: std::ops::Range<usize>,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), nri_runtime::Error> {
        // Written in place: the caller's bytes are the message's, not a
        // copy of them.
        let start = out.len();
        out.resize(start + len, 0);
        let mut reply = nri_reply::default();
        // SAFETY: calls the `encode` given to nri_sync_cb_stream as
        // nri_sync_encode_fn documents: with its user data, ranges within
        // the sizes given, `len` writable bytes at `out` and a reply, all
        // alive until it returns, on the thread that called
        // nri_sync_cb_stream (see `Sync` above).
        unsafe {
            (self.encode)(
                self.user_data,
                pods.start,
                pods.end,
                containers.start,
                containers.end,
                out[start..].as_mut_ptr(),
                len,
                &mut reply,
            )
        };
        reply
            .into_result()
            .map(drop)
            .map_err(nri_runtime::Error::Runtime)
    }
}

/// The runtime callbacks of `nri_adaptation_new`.
#[repr(C)]
pub struct nri_callbacks {
    /// Required.
    pub sync: nri_sync_fn,
    /// Required.
    pub update: nri_update_fn,
    /// Passed to both callbacks.
    pub user_data: *mut c_void,
    /// Optional; called with `user_data` once, when the adaptation is freed.
    pub free_user_data: nri_free_fn,
}

pub(crate) struct FfiSync {
    pub(crate) f: unsafe extern "C" fn(*mut c_void, *mut nri_sync_cb, *mut nri_reply),
    pub(crate) data: Arc<UserData>,
}

impl SyncFn for FfiSync {
    fn sync(&self, cb: SyncCb) -> BoxFuture<'static, Result<(), BoxError>> {
        let (f, data) = (self.f, Arc::clone(&self.data));
        Box::pin(async move {
            let handle = tokio::runtime::Handle::current();
            run_blocking("sync", move |reply| {
                let mut cb = nri_sync_cb { cb, handle };
                // SAFETY: calls `callbacks.sync` of nri_adaptation_new (a valid
                // table, by its contract) as nri_sync_fn documents, with its
                // user data, on a blocking thread (callbacks may run on any
                // thread, by the header's conventions); `cb` and `reply` live
                // until it returns.
                unsafe { f(data.ptr, &mut cb, reply) }
            })
            .await
            .map(drop)
        })
    }
}

pub(crate) struct FfiUpdate {
    pub(crate) f: unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut nri_reply),
    pub(crate) data: Arc<UserData>,
}

impl UpdateFn for FfiUpdate {
    fn update(
        &self,
        updates: Vec<ContainerUpdate>,
    ) -> BoxFuture<'static, Result<Vec<ContainerUpdate>, BoxError>> {
        let (f, data) = (self.f, Arc::clone(&self.data));
        Box::pin(async move {
            let mut req = UpdateContainersRequest::new();
            req.update = updates;
            let req = req.write_to_bytes()?;
            let rsp = run_blocking("update", move |reply| {
                // SAFETY: calls `callbacks.update` of nri_adaptation_new (a
                // valid table, by its contract) as nri_update_fn documents,
                // with its user data (callbacks may run on any thread, by the
                // header's conventions); `req` holds `req.len()` bytes, and it
                // and `reply` live until it returns.
                unsafe { f(data.ptr, req.as_ptr(), req.len(), reply) }
            })
            .await?;
            Ok(decode_reply::<UpdateContainersResponse>(rsp)?.failed)
        })
    }
}
