//! One trait over the 14 plugin requests, so the relay logic (subscription,
//! timeout, metrics, error classification, StateChange fallback) is written
//! once for ttrpc and builtin plugins alike; and [`Encoding`], a request's
//! bytes, made once per event for all its plugins.

use std::borrow::Cow;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::plugins::builtin::BuiltinHandlers;
use crate::{BoxError, Error};
use nri_api::*;

/// A request the adaptation relays to plugins.
pub(crate) trait Call: protobuf::Message + Send + Sync + 'static {
    type Reply: protobuf::Message + Default + Send + 'static;
    /// The event this request belongs to (subscription bit, metrics name).
    const EVENT: Event;
    /// Its method of the Plugin service.
    const METHOD: &'static str;

    fn via_builtin(
        &self,
        handlers: Arc<dyn BuiltinHandlers>,
    ) -> BoxFuture<'static, Result<Self::Reply, BoxError>>;

    /// The id of the pod this request is about ("" if it has none).
    fn pod_id(&self) -> &str;

    /// Whether this request has a deprecated `StateChange` form.
    const HAS_STATE_CHANGE: bool = false;

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
    ($req:ty => $rsp:ty, $event:ident, $method:literal, $rpc:ident, builtin: reply $(, state: $sc:tt)?) => {
        call!(@impl $req => $rsp, $event, $method, |h: Arc<dyn BuiltinHandlers>, r: $req| async move {
            h.$rpc(r).await
        } $(, state: $sc)?);
    };
    ($req:ty => $rsp:ty, $event:ident, $method:literal, $rpc:ident, builtin: unit $(, state: $sc:tt)?) => {
        call!(@impl $req => $rsp, $event, $method, |h: Arc<dyn BuiltinHandlers>, r: $req| async move {
            h.$rpc(r).await.map(|()| <$rsp>::default())
        } $(, state: $sc)?);
    };
    (@impl $req:ty => $rsp:ty, $event:ident, $method:literal, $builtin:expr $(, state: $sc:tt)?) => {
        impl Call for $req {
            type Reply = $rsp;
            const EVENT: Event = Event::$event;
            const METHOD: &'static str = $method;

            fn via_builtin(
                &self,
                handlers: Arc<dyn BuiltinHandlers>,
            ) -> BoxFuture<'static, Result<$rsp, BoxError>> {
                Box::pin(($builtin)(handlers, self.clone()))
            }

            fn pod_id(&self) -> &str {
                self.pod.as_ref().map_or("", |p| p.id.as_str())
            }

            $(call!(@state $sc);)?
        }
    };
    (@state pod) => {
        const HAS_STATE_CHANGE: bool = true;
        fn state_change(&self) -> Option<StateChangeEvent> {
            Some(state_change(Self::EVENT, &self.pod, None))
        }
    };
    (@state container) => {
        const HAS_STATE_CHANGE: bool = true;
        fn state_change(&self) -> Option<StateChangeEvent> {
            Some(state_change(Self::EVENT, &self.pod, Some(&self.container)))
        }
    };
}

call!(RunPodSandboxRequest => RunPodSandboxResponse, RUN_POD_SANDBOX, "RunPodSandbox", run_pod_sandbox, builtin: unit, state: pod);
call!(UpdatePodSandboxRequest => UpdatePodSandboxResponse, UPDATE_POD_SANDBOX, "UpdatePodSandbox", update_pod_sandbox, builtin: reply);
call!(PostUpdatePodSandboxRequest => PostUpdatePodSandboxResponse, POST_UPDATE_POD_SANDBOX, "PostUpdatePodSandbox", post_update_pod_sandbox, builtin: unit, state: pod);
call!(StopPodSandboxRequest => StopPodSandboxResponse, STOP_POD_SANDBOX, "StopPodSandbox", stop_pod_sandbox, builtin: unit, state: pod);
call!(RemovePodSandboxRequest => RemovePodSandboxResponse, REMOVE_POD_SANDBOX, "RemovePodSandbox", remove_pod_sandbox, builtin: unit, state: pod);
call!(CreateContainerRequest => CreateContainerResponse, CREATE_CONTAINER, "CreateContainer", create_container, builtin: reply);
call!(PostCreateContainerRequest => PostCreateContainerResponse, POST_CREATE_CONTAINER, "PostCreateContainer", post_create_container, builtin: unit, state: container);
call!(StartContainerRequest => StartContainerResponse, START_CONTAINER, "StartContainer", start_container, builtin: unit, state: container);
call!(PostStartContainerRequest => PostStartContainerResponse, POST_START_CONTAINER, "PostStartContainer", post_start_container, builtin: unit, state: container);
call!(UpdateContainerRequest => UpdateContainerResponse, UPDATE_CONTAINER, "UpdateContainer", update_container, builtin: reply);
call!(PostUpdateContainerRequest => PostUpdateContainerResponse, POST_UPDATE_CONTAINER, "PostUpdateContainer", post_update_container, builtin: unit, state: container);
call!(StopContainerRequest => StopContainerResponse, STOP_CONTAINER, "StopContainer", stop_container, builtin: reply);
call!(RemoveContainerRequest => RemoveContainerResponse, REMOVE_CONTAINER, "RemoveContainer", remove_container, builtin: unit, state: container);
// A builtin validator's error is a rejection, as with upstream's wrapper.
// A validator that can validate a borrowed request is not given a copy:
// the request holds the pod and the container, and copying and freeing it
// cost more than the default validator's whole check.
impl Call for ValidateContainerAdjustmentRequest {
    type Reply = ValidateContainerAdjustmentResponse;
    const EVENT: Event = Event::VALIDATE_CONTAINER_ADJUSTMENT;
    const METHOD: &'static str = "ValidateContainerAdjustment";

    fn pod_id(&self) -> &str {
        self.pod.as_ref().map_or("", |p| p.id.as_str())
    }

    fn via_builtin(
        &self,
        handlers: Arc<dyn BuiltinHandlers>,
    ) -> BoxFuture<'static, Result<Self::Reply, BoxError>> {
        fn verdict(v: Result<(), BoxError>) -> ValidateContainerAdjustmentResponse {
            match v {
                Ok(()) => ValidateContainerAdjustmentResponse::default(),
                Err(e) => ValidateContainerAdjustmentResponse {
                    reject: true,
                    reason: e.to_string(),
                    ..Default::default()
                },
            }
        }
        if let Some(v) = handlers.validate_borrowed(self) {
            return Box::pin(std::future::ready(Ok(verdict(v))));
        }
        let req = self.clone();
        Box::pin(async move { Ok(verdict(handlers.validate_container_adjustment(req).await)) })
    }
}

/// Evaluates `$then` with `$T` the request type of `$event`, one of the
/// 13 events a runtime sends, or `$other` for any other event: the one
/// table from an event to its request type, for the code that has an
/// event's number and bytes (the C ABI's relay, a joining plugin's
/// replay). `call!` above ties each type to its event the other way.
macro_rules! for_request_of {
    ($event:expr, |$T:ident| $then:expr, $other:expr) => {{
        use nri_api::*;
        match $event {
            Event::RUN_POD_SANDBOX => {
                type $T = RunPodSandboxRequest;
                $then
            }
            Event::UPDATE_POD_SANDBOX => {
                type $T = UpdatePodSandboxRequest;
                $then
            }
            Event::POST_UPDATE_POD_SANDBOX => {
                type $T = PostUpdatePodSandboxRequest;
                $then
            }
            Event::STOP_POD_SANDBOX => {
                type $T = StopPodSandboxRequest;
                $then
            }
            Event::REMOVE_POD_SANDBOX => {
                type $T = RemovePodSandboxRequest;
                $then
            }
            Event::CREATE_CONTAINER => {
                type $T = CreateContainerRequest;
                $then
            }
            Event::POST_CREATE_CONTAINER => {
                type $T = PostCreateContainerRequest;
                $then
            }
            Event::START_CONTAINER => {
                type $T = StartContainerRequest;
                $then
            }
            Event::POST_START_CONTAINER => {
                type $T = PostStartContainerRequest;
                $then
            }
            Event::UPDATE_CONTAINER => {
                type $T = UpdateContainerRequest;
                $then
            }
            Event::POST_UPDATE_CONTAINER => {
                type $T = PostUpdateContainerRequest;
                $then
            }
            Event::STOP_CONTAINER => {
                type $T = StopContainerRequest;
                $then
            }
            Event::REMOVE_CONTAINER => {
                type $T = RemoveContainerRequest;
                $then
            }
            _ => $other,
        }
    }};
}
pub(crate) use for_request_of;

/// An event's request as the adaptation relays it: the message, or only its
/// bytes as the runtime handed them over (checked with
/// [`nri_api::wire::check`]), which most plugins are sent as they are. The
/// message is decoded from them only for a plugin that needs it (a builtin
/// plugin, or one on the deprecated StateChange RPC), each time one does.
pub(crate) enum Request<C> {
    Decoded(C),
    Encoded(Arc<[u8]>),
    /// Decoded but for some leading fields, which stay as the runtime
    /// encoded them (`kept`, none of them in `rest`): a CreateContainer
    /// request's pod, which no plugin's adjustment changes, so that it is
    /// neither decoded nor encoded again for each plugin after one adjusts
    /// the container.
    Partly {
        kept: Arc<[u8]>,
        rest: C,
    },
}

impl<C: Call> Request<C> {
    /// The runtime's bytes, if they are a well-formed `C` (with decoding's
    /// error if they are not).
    pub(crate) fn checked(bytes: Arc<[u8]>) -> Result<Self, Error>
    where
        C: protobuf::MessageFull,
    {
        nri_api::wire::check::<C>(&bytes)
            .map_err(|e| Error::InvalidMessage(format!("invalid {}: {e}", C::NAME)))?;
        Ok(Request::Encoded(bytes))
    }

    /// The message, decoded if it has not been.
    pub(crate) fn message(&self) -> Result<Cow<'_, C>, Error> {
        match self {
            Request::Decoded(m) => Ok(Cow::Borrowed(m)),
            Request::Encoded(bytes) => decode(bytes).map(Cow::Owned),
            Request::Partly { kept, rest } => {
                let mut m = rest.clone();
                merge(&mut m, kept)?;
                Ok(Cow::Owned(m))
            }
        }
    }

    /// The message, decoded in place if it came encoded, wholly or partly.
    pub(crate) fn decoded_mut(&mut self) -> Result<&mut C, Error> {
        match self {
            Request::Decoded(_) => {}
            Request::Encoded(bytes) => *self = Request::Decoded(decode(bytes)?),
            Request::Partly { kept, rest } => {
                merge(rest, kept)?;
                *self = Request::Decoded(std::mem::take(rest));
            }
        }
        self.decoded_part_mut()
    }

    /// The decoded fields of the message, to be changed: all of them, but
    /// for those a `Partly` request keeps encoded. An `Encoded` request is
    /// decoded in place first.
    pub(crate) fn decoded_part_mut(&mut self) -> Result<&mut C, Error> {
        if let Request::Encoded(bytes) = self {
            *self = Request::Decoded(decode(bytes)?);
        }
        match self {
            Request::Decoded(m) | Request::Partly { rest: m, .. } => Ok(m),
            // Not reached: decoded just above.
            Request::Encoded(_) => Err(Error::InvalidMessage(format!("{} not decoded", C::NAME))),
        }
    }

    /// The id of the pod the request is about, if it names one: read from
    /// the bytes where it came encoded, without decoding them.
    pub(crate) fn pod_id(&self) -> Option<String> {
        let id = match self {
            Request::Decoded(m) => m.pod_id().to_string(),
            Request::Encoded(bytes) => pod_id_of(bytes)?,
            Request::Partly { kept, rest } => {
                pod_id_of(kept).unwrap_or_else(|| rest.pod_id().to_string())
            }
        };
        (!id.is_empty()).then_some(id)
    }

    /// The request's `StateChange` form, if it has one.
    pub(crate) fn state_change(&self) -> Result<Option<StateChangeEvent>, Error> {
        if !C::HAS_STATE_CHANGE {
            return Ok(None);
        }
        Ok(self.message()?.state_change())
    }
}

/// The pod id in an encoded request (field 1, the pod, whose field 1 is
/// its id, in every request an event sends).
pub(crate) fn pod_id_of(bytes: &[u8]) -> Option<String> {
    let pod = nri_api::wire::only_field(bytes, 1)?;
    let id = nri_api::wire::only_field(pod, 1)?;
    std::str::from_utf8(id).ok().map(str::to_string)
}

fn decode<C: Call>(bytes: &[u8]) -> Result<C, Error> {
    C::parse_from_bytes(bytes).map_err(invalid::<C>)
}

/// `kept` merged into `m`: the fields a `Partly` request kept encoded,
/// which `m` does not hold, so the order of the two does not matter.
fn merge<C: Call>(m: &mut C, kept: &[u8]) -> Result<(), Error> {
    m.merge_from_bytes(kept).map_err(invalid::<C>)
}

/// Decoding's error for a `C`, as every path that decodes one reports it.
pub(crate) fn invalid<C: Call>(e: protobuf::Error) -> Error {
    Error::InvalidMessage(format!("invalid {}: {e}", C::NAME))
}

/// A request's encoding, made at most once and sent to each plugin for as
/// long as the request stays as it is: for most events, to all of them.
/// (ttrpc's generated client would encode it again for every plugin, and
/// compute its size twice each time.) Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Encoding(Option<Arc<[u8]>>);

impl Encoding {
    /// The request already encoded, as the runtime handed it over.
    pub(crate) fn given(bytes: Arc<[u8]>) -> Self {
        Encoding(Some(bytes))
    }

    /// The bytes of `req`, encoding it unless that was done already or it
    /// came encoded.
    pub(crate) fn of<C: Call>(&mut self, req: &Request<C>) -> protobuf::Result<Arc<[u8]>> {
        if let Some(bytes) = &self.0 {
            return Ok(Arc::clone(bytes));
        }
        let bytes: Arc<[u8]> = match req {
            Request::Decoded(m) => m.write_to_bytes()?.into(),
            Request::Encoded(bytes) => Arc::clone(bytes),
            // The kept fields lead, as they came.
            Request::Partly { kept, rest } => {
                let size = rest.compute_size() as usize;
                let mut bytes = Vec::with_capacity(kept.len() + size);
                bytes.extend_from_slice(kept);
                let mut os = protobuf::CodedOutputStream::vec(&mut bytes);
                rest.write_to_with_cached_sizes(&mut os)?;
                os.flush()?;
                drop(os);
                bytes.into()
            }
        };
        self.0 = Some(Arc::clone(&bytes));
        Ok(bytes)
    }

    /// The request changed: the next plugin needs it encoded anew.
    pub(crate) fn stale(&mut self) {
        self.0 = None;
    }
}
