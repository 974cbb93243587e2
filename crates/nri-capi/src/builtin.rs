//! Builtin plugins the caller implements in C (or Go): the ops they
//! handle, their handler and user data, and the core's `BuiltinHandlers`
//! over them. Handlers run on the adaptation's blocking-thread pool.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use async_trait::async_trait;
use protobuf::Message;

use super::buffer::str_arg;
use super::callbacks::{decode_reply, nri_free_fn, nri_reply, run_blocking, UserData};
use super::ptr::arg_ref;
use super::status::Failure;
use nri_api::*;
use nri_runtime::{BoxError, BuiltinHandlers};

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
