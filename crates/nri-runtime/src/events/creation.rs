//! A CreateContainer request in the form its event needs, chosen once from
//! who reads it: the runtime's bytes as they came, decoded but for its pod,
//! or decoded; and the container the plugins' adjustments are merged into.

use std::future::Future;
use std::sync::Arc;

use protobuf::{Message, MessageField};

use crate::events::outgoing::Outgoing;
use crate::plugins::event_budget::EventBudget;
use crate::plugins::plugin::Plugin;
use crate::plugins::request::{invalid, Call, Request};
use crate::results::CreateResult;
use crate::{Core, Error};
use nri_api::*;

const EVENT: Event = CreateContainerRequest::EVENT;

/// A CreateContainer request as the runtime hands it over: decoded (the
/// Rust API) or encoded and not yet checked (the C ABI).
pub(crate) enum Handed {
    Decoded(CreateContainerRequest),
    Encoded(Vec<u8>),
}

impl Handed {
    /// The id of the request's pod, if it names one.
    pub(crate) fn pod_id(&self) -> Option<String> {
        let id = match self {
            Handed::Decoded(req) => req.pod_id().to_string(),
            Handed::Encoded(bytes) => crate::plugins::request::pod_id_of(bytes)?,
        };
        (!id.is_empty()).then_some(id)
    }
}

/// One CreateContainer event's request, in its form, and where the merge
/// writes the plugins' adjustments.
pub(crate) struct Creation {
    out: Outgoing<CreateContainerRequest>,
    /// There exactly while the request stays encoded: the merge writes
    /// into it instead (see [`Creation::new`]).
    stand_in: Option<CreateContainerRequest>,
    /// Of a request kept encoded that validators will vet: their request,
    /// begun with the pod and the container as they read them, taken from
    /// the bytes.
    as_read: Option<ValidateContainerAdjustmentRequest>,
    validated: bool,
    /// Whether every validator reads of the pod and the container only
    /// what `nri_validator::as_read` keeps (also when there is none).
    validators_read_little: bool,
}

impl Creation {
    /// The request in the form `plugins` and `validators` (and the audit
    /// log) need.
    ///
    /// With one plugin taking the event (the common node), the request
    /// stays encoded, as the runtime handed it over: it is checked, the
    /// plugin is sent its bytes, and the plugin's adjustment, which no later
    /// plugin sees, is merged into a stand-in for the container (the merged
    /// reply does not depend on the container's contents). That takes bytes
    /// that normalizing leaves as they are (go/adaptation normalizes before
    /// encoding), and validators that read of the pod and the container
    /// only what is taken from its bytes (the default validator: the pod's
    /// name, namespace and annotations, the container's ID, name and
    /// seccomp profile). With more plugins, one's adjustment changes what
    /// the next is sent, and other validators and the audit log are given
    /// the container itself: then it is decoded from the start, which
    /// checks it too.
    pub(crate) fn new(
        handed: Handed,
        core: &Core,
        plugins: &[Arc<Plugin>],
        validators: &[Arc<Plugin>],
    ) -> Result<Creation, Error> {
        let validated = !validators.is_empty();
        let validators_read_little = validators.iter().all(|v| v.reads_as_read());
        let formed = |out, stand_in, as_read| Creation {
            out,
            stand_in,
            as_read,
            validated,
            validators_read_little,
        };
        let bytes = match handed {
            Handed::Decoded(req) => {
                return Ok(formed(Outgoing::new(Request::Decoded(req)), None, None))
            }
            Handed::Encoded(bytes) => bytes,
        };
        let stays_encoded = validators_read_little
            && core.audit.is_none()
            && plugins.iter().filter(|p| p.will_see(EVENT)).count() <= 1;
        let parts = stays_encoded
            .then(|| encoded_parts(&bytes, validated))
            .flatten();
        if let Some((id, as_read)) = parts {
            let bytes: Arc<[u8]> = bytes.into();
            let req = Request::checked(Arc::clone(&bytes))?;
            let out = Outgoing::with_bytes(req, bytes);
            return Ok(formed(out, Some(CreateResult::stand_in(id)), as_read));
        }
        // Otherwise the pod is decoded only if something reads it: a
        // validator, the audit log, or a builtin plugin, which is given the
        // whole request. Plugins over ttrpc are sent its bytes as they came.
        let keeps_pod = !validated
            && core.audit.is_none()
            && !plugins.iter().any(|p| p.is_builtin() && p.will_see(EVENT));
        Ok(formed(decoded(bytes, keeps_pod)?, None, None))
    }

    /// The request, if it is wholly decoded (as it is with an audit log).
    pub(crate) fn decoded(&self) -> Option<&CreateContainerRequest> {
        match self.out.request() {
            Request::Decoded(r) => Some(r),
            Request::Encoded(_) | Request::Partly { .. } => None,
        }
    }

    /// The merge, begun: the container it writes into is normalized as
    /// upstream normalizes it before the first plugin.
    pub(crate) fn start_merge(&mut self) -> Result<CreateResult, Error> {
        let mut result = CreateResult::new(self.target()?);
        // A stand-in is never read; without validators, neither are the owners.
        if self.stand_in.is_some() && !self.validated {
            result.read_by_reply_only();
        }
        Ok(result)
    }

    /// The validators' request, if there are validators, begun with the
    /// pristine (normalized) container, before any plugin touches it, as
    /// they read it; from bytes kept encoded, with the pod too.
    pub(crate) fn validation(
        &mut self,
    ) -> Result<Option<ValidateContainerAdjustmentRequest>, Error> {
        if !self.validated {
            return Ok(None);
        }
        if let Some(as_read) = self.as_read.take() {
            return Ok(Some(as_read));
        }
        // (Decoded: an encoded request has validators only with the pod
        // and the container as read.)
        let r = self.out.request().message()?;
        Ok(Some(ValidateContainerAdjustmentRequest {
            container: match self.validators_read_little {
                true => MessageField::some(nri_validator::as_read::container(&r.container)),
                false => r.container.clone(),
            },
            ..Default::default()
        }))
    }

    /// Relays the request to `p`, as it stands after the replies merged so
    /// far.
    pub(crate) fn relay<'a>(
        &'a mut self,
        p: &'a Plugin,
        budget: EventBudget,
    ) -> impl Future<Output = Result<Option<CreateContainerResponse>, Error>> + 'a {
        self.out.relay(p, budget)
    }

    /// Merges the reply of `plugin` (its full name) into `result`, and its
    /// adjustment into the container.
    pub(crate) fn merge(
        &mut self,
        result: &mut CreateResult,
        plugin: &str,
        rpl: CreateContainerResponse,
    ) -> Result<(), Error> {
        // Only an adjustment changes the container later plugins see.
        if rpl
            .adjust
            .as_ref()
            .is_some_and(|a| *a != ContainerAdjustment::default())
        {
            self.out.stale();
        }
        result
            .apply(self.target()?, plugin, rpl)
            .map_err(|e| Error::Merge(e.to_string()))
    }

    /// Moves a decoded request's pod into the validators' request `v`: no
    /// plugin is sent the request any more, and the pod is not adjusted.
    /// (Of bytes kept encoded, `v` was given the pod as read.)
    pub(crate) fn hand_pod_to(&mut self, v: &mut ValidateContainerAdjustmentRequest) {
        if let Request::Decoded(r) = self.out.request_mut() {
            v.pod = std::mem::take(&mut r.pod);
        }
    }

    /// Where the merge writes: the stand-in while the request stays
    /// encoded, else the request's decoded part (decoding bytes in place).
    fn target(&mut self) -> Result<&mut CreateContainerRequest, Error> {
        match &mut self.stand_in {
            Some(s) => Ok(s),
            None => self.out.request_mut().decoded_part_mut(),
        }
    }
}

/// What a CreateContainer request kept encoded needs taken from its bytes:
/// its container's ID, for the stand-in, and when it is to be validated,
/// the validators' request begun with the pod and the container as they
/// read it. `None` if the bytes are not normalized or hold twice a field
/// read here: decode them.
fn encoded_parts(
    bytes: &[u8],
    validated: bool,
) -> Option<(String, Option<ValidateContainerAdjustmentRequest>)> {
    let id = CreateResult::normalized_container_id(bytes)?;
    let as_read = match validated {
        true => {
            let (pod, container) = nri_validator::as_read::from_create_request(bytes)?;
            Some(ValidateContainerAdjustmentRequest {
                pod,
                container,
                ..Default::default()
            })
        }
        false => None,
    };
    Some((id, as_read))
}

/// A CreateContainer request decoded from the runtime's bytes, with the
/// bytes kept for plugins if normalizing will leave the request as it is.
/// With `keep_pod`, the pod stays encoded (`Request::Partly`) where it
/// leads the request, as every encoder puts it, and is well-formed: the
/// merge reads and changes only the container. (Decoded before the bytes
/// move: the order of the allocations shows in glibc's malloc: some 30,000
/// instructions per event.)
fn decoded(bytes: Vec<u8>, keep_pod: bool) -> Result<Outgoing<CreateContainerRequest>, Error> {
    // A pod that does not decode is not split off: decoding the whole
    // request says why.
    let split = keep_pod
        .then(|| {
            nri_api::wire::split_leading::<CreateContainerRequest>(
                &bytes,
                nri_api::wire::field::CREATE_CONTAINER_REQUEST_POD,
            )
        })
        .flatten();
    let req = match split {
        Some((pod, rest)) => Request::Partly {
            rest: CreateContainerRequest::parse_from_bytes(rest)
                .map_err(invalid::<CreateContainerRequest>)?,
            kept: pod.into(),
        },
        None => Request::Decoded(
            CreateContainerRequest::parse_from_bytes(&bytes)
                .map_err(invalid::<CreateContainerRequest>)?,
        ),
    };
    let normalized = match &req {
        Request::Decoded(r) | Request::Partly { rest: r, .. } => CreateResult::is_normalized(r),
        Request::Encoded(_) => false,
    };
    Ok(match normalized {
        true => Outgoing::with_bytes(req, bytes.into()),
        false => Outgoing::new(req),
    })
}
