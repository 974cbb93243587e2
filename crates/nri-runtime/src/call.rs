//! One trait over the 14 plugin requests, so the relay logic (subscription,
//! timeout, metrics, error classification, StateChange fallback) is written
//! once for ttrpc and builtin plugins alike.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::builtin::BuiltinHandlers;
use super::BoxError;
use nri_api::ttrpc::PluginClient;
use nri_api::*;

/// A request the adaptation relays to plugins.
pub(crate) trait Call: Send + Sync + 'static {
    type Reply: Default + Send + 'static;
    /// The event this request belongs to (subscription bit, metrics name).
    const EVENT: Event;

    fn via_ttrpc<'a>(
        &'a self,
        client: &'a PluginClient,
        ctx: ::ttrpc::context::Context,
    ) -> BoxFuture<'a, ::ttrpc::Result<Self::Reply>>;

    fn via_builtin(
        &self,
        handlers: Arc<dyn BuiltinHandlers>,
    ) -> BoxFuture<'static, Result<Self::Reply, BoxError>>;

    /// The deprecated `StateChange` form of this request, for the nine
    /// events that have one.
    fn state_change(&self) -> Option<StateChangeEvent> {
        None
    }
}

fn state_change(
    event: Event,
    pod: &protobuf::MessageField<PodSandbox>,
    container: Option<&protobuf::MessageField<Container>>,
) -> StateChangeEvent {
    StateChangeEvent {
        event: event.into(),
        pod: pod.clone(),
        container: container.cloned().unwrap_or_default(),
        ..Default::default()
    }
}

/// Implements [`Call`] for one request type.
///
/// `builtin: reply` means the builtin handler returns the reply message;
/// `builtin: unit` means it returns `()` and the reply is empty.
macro_rules! call {
    ($req:ty => $rsp:ty, $event:ident, $rpc:ident, builtin: reply $(, state: $sc:tt)?) => {
        call!(@impl $req => $rsp, $event, $rpc, |h: Arc<dyn BuiltinHandlers>, r: $req| async move {
            h.$rpc(r).await
        } $(, state: $sc)?);
    };
    ($req:ty => $rsp:ty, $event:ident, $rpc:ident, builtin: unit $(, state: $sc:tt)?) => {
        call!(@impl $req => $rsp, $event, $rpc, |h: Arc<dyn BuiltinHandlers>, r: $req| async move {
            h.$rpc(r).await.map(|()| <$rsp>::default())
        } $(, state: $sc)?);
    };
    (@impl $req:ty => $rsp:ty, $event:ident, $rpc:ident, $builtin:expr $(, state: $sc:tt)?) => {
        impl Call for $req {
            type Reply = $rsp;
            const EVENT: Event = Event::$event;

            fn via_ttrpc<'a>(
                &'a self,
                client: &'a PluginClient,
                ctx: ::ttrpc::context::Context,
            ) -> BoxFuture<'a, ::ttrpc::Result<$rsp>> {
                Box::pin(client.$rpc(ctx, self))
            }

            fn via_builtin(
                &self,
                handlers: Arc<dyn BuiltinHandlers>,
            ) -> BoxFuture<'static, Result<$rsp, BoxError>> {
                Box::pin(($builtin)(handlers, self.clone()))
            }

            $(call!(@state $sc);)?
        }
    };
    (@state pod) => {
        fn state_change(&self) -> Option<StateChangeEvent> {
            Some(state_change(Self::EVENT, &self.pod, None))
        }
    };
    (@state container) => {
        fn state_change(&self) -> Option<StateChangeEvent> {
            Some(state_change(Self::EVENT, &self.pod, Some(&self.container)))
        }
    };
}

call!(RunPodSandboxRequest => RunPodSandboxResponse, RUN_POD_SANDBOX, run_pod_sandbox, builtin: unit, state: pod);
call!(UpdatePodSandboxRequest => UpdatePodSandboxResponse, UPDATE_POD_SANDBOX, update_pod_sandbox, builtin: reply);
call!(PostUpdatePodSandboxRequest => PostUpdatePodSandboxResponse, POST_UPDATE_POD_SANDBOX, post_update_pod_sandbox, builtin: unit, state: pod);
call!(StopPodSandboxRequest => StopPodSandboxResponse, STOP_POD_SANDBOX, stop_pod_sandbox, builtin: unit, state: pod);
call!(RemovePodSandboxRequest => RemovePodSandboxResponse, REMOVE_POD_SANDBOX, remove_pod_sandbox, builtin: unit, state: pod);
call!(CreateContainerRequest => CreateContainerResponse, CREATE_CONTAINER, create_container, builtin: reply);
call!(PostCreateContainerRequest => PostCreateContainerResponse, POST_CREATE_CONTAINER, post_create_container, builtin: unit, state: container);
call!(StartContainerRequest => StartContainerResponse, START_CONTAINER, start_container, builtin: unit, state: container);
call!(PostStartContainerRequest => PostStartContainerResponse, POST_START_CONTAINER, post_start_container, builtin: unit, state: container);
call!(UpdateContainerRequest => UpdateContainerResponse, UPDATE_CONTAINER, update_container, builtin: reply);
call!(PostUpdateContainerRequest => PostUpdateContainerResponse, POST_UPDATE_CONTAINER, post_update_container, builtin: unit, state: container);
call!(StopContainerRequest => StopContainerResponse, STOP_CONTAINER, stop_container, builtin: reply);
call!(RemoveContainerRequest => RemoveContainerResponse, REMOVE_CONTAINER, remove_container, builtin: unit, state: container);
// A builtin validator's error is a rejection, as with upstream's wrapper.
call!(@impl ValidateContainerAdjustmentRequest => ValidateContainerAdjustmentResponse,
VALIDATE_CONTAINER_ADJUSTMENT, validate_container_adjustment,
|h: Arc<dyn BuiltinHandlers>, r: ValidateContainerAdjustmentRequest| async move {
    Ok(match h.validate_container_adjustment(r).await {
        Ok(()) => ValidateContainerAdjustmentResponse::default(),
        Err(e) => ValidateContainerAdjustmentResponse {
            reject: true,
            reason: e.to_string(),
            ..Default::default()
        },
    })
});
