//! The caller's callbacks, wrapped as the core's traits: the runtime's sync
//! and update functions, builtin plugins, metrics and the deprecation
//! recorder.
//!
//! Callbacks that may block or call back into the library (sync, update,
//! builtin handlers) run on the adaptation's blocking-thread pool, never on
//! the thread driving plugin I/O: a sync callback calls `nri_sync_cb_call`,
//! which needs that thread to talk to the plugins. Metrics and deprecation
//! callbacks run on the adaptation's thread and must be quick and must not
//! call the library.

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use protobuf::Message;

use super::buffer::{bytes, decode, encode, nri_buffer, str_arg};
use super::error::{boundary, nri_error, nri_status, to_cstring, Failure};
use super::ptr::{arg_mut, arg_ref, OutSlot};
use nri_api::*;
use nri_runtime::{
    BoxError, BuiltinHandlers, Deprecation, DeprecationRecorder, EncodedState, Error, Metrics,
    SyncCb, SyncFn, UpdateFn,
};

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
async fn run_blocking(
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

fn decode_reply<M: Message>(bytes: Vec<u8>) -> Result<M, BoxError> {
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
        let mut rsp = SynchronizeResponse::new();
        rsp.update = cb.handle.block_on(cb.cb.call_encoded(&state))?;
        updates.write(encode(&rsp)?);
        Ok(())
    })
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

/// What a builtin plugin is asked to handle. Events have the numbers of
/// the NRI `Event` enum.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum nri_builtin_op {
    RunPodSandbox = 1,
    StopPodSandbox = 2,
    RemovePodSandbox = 3,
    CreateContainer = 4,
    PostCreateContainer = 5,
    StartContainer = 6,
    PostStartContainer = 7,
    UpdateContainer = 8,
    PostUpdateContainer = 9,
    StopContainer = 10,
    RemoveContainer = 11,
    UpdatePodSandbox = 12,
    PostUpdatePodSandbox = 13,
    ValidateContainerAdjustment = 14,
    Configure = 32,
    Synchronize = 33,
}

/// A builtin plugin's handler. `request` is the encoded request message of
/// `op` (e.g. `CreateContainerRequest`); the reply data is the encoded
/// response message for the ops that have one (`ConfigureResponse`,
/// `SynchronizeResponse`, `UpdatePodSandboxResponse`,
/// `CreateContainerResponse`, `UpdateContainerResponse`,
/// `StopContainerResponse`) and is ignored for the others. An error set on
/// the reply fails the event; for `VALIDATE_CONTAINER_ADJUSTMENT` it
/// rejects the adjustment with the error as the reason.
pub type nri_builtin_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        op: nri_builtin_op,
        request: *const u8,
        len: usize,
        reply: *mut nri_reply,
    ),
>;

/// A builtin plugin, for `nri_options_add_builtin_plugin`.
#[repr(C)]
pub struct nri_builtin_plugin {
    /// The plugin's name, e.g. "resource-manager".
    pub name: *const c_char,
    /// The plugin's index, two digits, e.g. "10".
    pub index: *const c_char,
    /// The events the plugin handles when its Configure reply subscribes to
    /// none: bit `e - 1` for NRI `Event` number `e` (the NRI `EventMask`).
    pub events: i32,
    /// Required.
    pub handle: nri_builtin_fn,
    pub user_data: *mut c_void,
    /// Optional; called with `user_data` once, when the plugin is dropped.
    pub free_user_data: nri_free_fn,
}

pub(crate) struct FfiBuiltin {
    f: unsafe extern "C" fn(*mut c_void, nri_builtin_op, *const u8, usize, *mut nri_reply),
    events: EventMask,
    data: Arc<UserData>,
}

impl FfiBuiltin {
    /// # Safety
    /// `p` is NULL or points to a valid `nri_builtin_plugin`, whose `name`
    /// and `index` are NULL or NUL-terminated, for the call.
    pub(crate) unsafe fn from_c(
        p: *const nri_builtin_plugin,
    ) -> Result<(String, String, FfiBuiltin), Failure> {
        // SAFETY: this function's contract: `p` is NULL or a valid table for
        // the call.
        let p = unsafe { arg_ref("plugin", p) }?;
        // Own the user data first, so the finalizer runs even on error.
        let data = UserData::new(p.user_data, p.free_user_data);
        // SAFETY: this function's contract: `name` is NULL or NUL-terminated;
        // it is copied before the call returns.
        let name = unsafe { str_arg("plugin name", p.name) }?.to_string();
        // SAFETY: this function's contract: `index` is NULL or NUL-terminated;
        // it is copied before the call returns.
        let index = unsafe { str_arg("plugin index", p.index) }?.to_string();
        let f = p
            .handle
            .ok_or_else(|| Failure::invalid(format!("builtin plugin {name:?} has no handler")))?;
        let events = EventMask::from_raw(p.events);
        Ok((name, index, FfiBuiltin { f, events, data }))
    }

    async fn call<Req: Message, Rsp: Message>(
        &self,
        op: nri_builtin_op,
        req: &Req,
    ) -> Result<Rsp, BoxError> {
        let req = req.write_to_bytes()?;
        let (f, data) = (self.f, Arc::clone(&self.data));
        let rsp = run_blocking("builtin plugin", move |reply| {
            // SAFETY: calls the `handle` of nri_options_add_builtin_plugin's
            // plugin (a valid nri_builtin_plugin, by its contract) as
            // nri_builtin_fn documents, with its user data (callbacks may run
            // on any thread, by the header's conventions); `req` holds
            // `req.len()` bytes, and it and `reply` live until it returns.
            unsafe { f(data.ptr, op, req.as_ptr(), req.len(), reply) }
        })
        .await?;
        decode_reply(rsp)
    }

    /// For ops without a response message: the reply data is ignored.
    async fn notify<Req: Message>(&self, op: nri_builtin_op, req: &Req) -> Result<(), BoxError> {
        self.call::<Req, Empty>(op, req).await.map(drop)
    }
}

#[async_trait]
impl BuiltinHandlers for FfiBuiltin {
    fn implemented_events(&self) -> EventMask {
        self.events
    }
    async fn configure(&self, req: ConfigureRequest) -> Result<ConfigureResponse, BoxError> {
        self.call(nri_builtin_op::Configure, &req).await
    }
    async fn synchronize(&self, req: SynchronizeRequest) -> Result<SynchronizeResponse, BoxError> {
        self.call(nri_builtin_op::Synchronize, &req).await
    }
    async fn run_pod_sandbox(&self, req: RunPodSandboxRequest) -> Result<(), BoxError> {
        self.notify(nri_builtin_op::RunPodSandbox, &req).await
    }
    async fn update_pod_sandbox(
        &self,
        req: UpdatePodSandboxRequest,
    ) -> Result<UpdatePodSandboxResponse, BoxError> {
        self.call(nri_builtin_op::UpdatePodSandbox, &req).await
    }
    async fn post_update_pod_sandbox(
        &self,
        req: PostUpdatePodSandboxRequest,
    ) -> Result<(), BoxError> {
        self.notify(nri_builtin_op::PostUpdatePodSandbox, &req)
            .await
    }
    async fn stop_pod_sandbox(&self, req: StopPodSandboxRequest) -> Result<(), BoxError> {
        self.notify(nri_builtin_op::StopPodSandbox, &req).await
    }
    async fn remove_pod_sandbox(&self, req: RemovePodSandboxRequest) -> Result<(), BoxError> {
        self.notify(nri_builtin_op::RemovePodSandbox, &req).await
    }
    async fn create_container(
        &self,
        req: CreateContainerRequest,
    ) -> Result<CreateContainerResponse, BoxError> {
        self.call(nri_builtin_op::CreateContainer, &req).await
    }
    async fn post_create_container(&self, req: PostCreateContainerRequest) -> Result<(), BoxError> {
        self.notify(nri_builtin_op::PostCreateContainer, &req).await
    }
    async fn start_container(&self, req: StartContainerRequest) -> Result<(), BoxError> {
        self.notify(nri_builtin_op::StartContainer, &req).await
    }
    async fn post_start_container(&self, req: PostStartContainerRequest) -> Result<(), BoxError> {
        self.notify(nri_builtin_op::PostStartContainer, &req).await
    }
    async fn update_container(
        &self,
        req: UpdateContainerRequest,
    ) -> Result<UpdateContainerResponse, BoxError> {
        self.call(nri_builtin_op::UpdateContainer, &req).await
    }
    async fn post_update_container(&self, req: PostUpdateContainerRequest) -> Result<(), BoxError> {
        self.notify(nri_builtin_op::PostUpdateContainer, &req).await
    }
    async fn stop_container(
        &self,
        req: StopContainerRequest,
    ) -> Result<StopContainerResponse, BoxError> {
        self.call(nri_builtin_op::StopContainer, &req).await
    }
    async fn remove_container(&self, req: RemoveContainerRequest) -> Result<(), BoxError> {
        self.notify(nri_builtin_op::RemoveContainer, &req).await
    }
    async fn validate_container_adjustment(
        &self,
        req: ValidateContainerAdjustmentRequest,
    ) -> Result<(), BoxError> {
        self.notify(nri_builtin_op::ValidateContainerAdjustment, &req)
            .await
    }
}

/// Metrics callbacks (upstream's `Metrics` interface). Each may be NULL.
/// `plugin` is the plugin's `idx-name`, `op` the operation ("CreateContainer",
/// "Synchronize", ...). They run on the adaptation's thread while events are
/// dispatched: keep them quick and do not call the library from them.
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
/// `NRI_DEPRECATION_*`, `plugin` the plugin's `idx-name`. Runs on the
/// adaptation's thread: keep it quick and do not call the library from it.
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

#[cfg(test)]
mod tests {
    use nri_api::{Event, ALL_EVENTS};
    use protobuf::Enum;

    use super::nri_builtin_op;

    /// The event an op stands for. Exhaustive, so a new op must be
    /// placed here (and so checked below) before the crate builds.
    fn event_of(op: nri_builtin_op) -> Option<Event> {
        use nri_builtin_op as Op;
        Some(match op {
            Op::RunPodSandbox => Event::RUN_POD_SANDBOX,
            Op::StopPodSandbox => Event::STOP_POD_SANDBOX,
            Op::RemovePodSandbox => Event::REMOVE_POD_SANDBOX,
            Op::CreateContainer => Event::CREATE_CONTAINER,
            Op::PostCreateContainer => Event::POST_CREATE_CONTAINER,
            Op::StartContainer => Event::START_CONTAINER,
            Op::PostStartContainer => Event::POST_START_CONTAINER,
            Op::UpdateContainer => Event::UPDATE_CONTAINER,
            Op::PostUpdateContainer => Event::POST_UPDATE_CONTAINER,
            Op::StopContainer => Event::STOP_CONTAINER,
            Op::RemoveContainer => Event::REMOVE_CONTAINER,
            Op::UpdatePodSandbox => Event::UPDATE_POD_SANDBOX,
            Op::PostUpdatePodSandbox => Event::POST_UPDATE_POD_SANDBOX,
            Op::ValidateContainerAdjustment => Event::VALIDATE_CONTAINER_ADJUSTMENT,
            Op::Configure | Op::Synchronize => return None,
        })
    }

    const EVERY_OP: [nri_builtin_op; 16] = {
        use nri_builtin_op as Op;
        [
            Op::RunPodSandbox,
            Op::StopPodSandbox,
            Op::RemovePodSandbox,
            Op::CreateContainer,
            Op::PostCreateContainer,
            Op::StartContainer,
            Op::PostStartContainer,
            Op::UpdateContainer,
            Op::PostUpdateContainer,
            Op::StopContainer,
            Op::RemoveContainer,
            Op::UpdatePodSandbox,
            Op::PostUpdatePodSandbox,
            Op::ValidateContainerAdjustment,
            Op::Configure,
            Op::Synchronize,
        ]
    };

    #[test]
    fn every_event_has_the_op_of_its_number_and_name() {
        for event in ALL_EVENTS {
            let op = EVERY_OP
                .into_iter()
                .find(|op| *op as u32 == event.value() as u32)
                .unwrap_or_else(|| panic!("no builtin op numbered as {event:?}"));
            assert_eq!(event_of(op), Some(event), "{op:?}");
            assert_eq!(format!("{op:?}"), event.pretty_name());
        }
        let events = EVERY_OP.into_iter().filter_map(event_of).count();
        assert_eq!(
            events,
            ALL_EVENTS.len(),
            "an op for an event that is not one"
        );
    }

    #[test]
    fn non_event_ops_are_numbered_past_every_event() {
        for op in EVERY_OP.into_iter().filter(|op| event_of(*op).is_none()) {
            assert!(op as u32 > Event::LAST.value() as u32, "{op:?}");
        }
    }
}
