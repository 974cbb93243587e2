//! The event flows: relay in index order, merge, validate. Each runs on the
//! adaptation's runtime under the event lock; plugins dropped on the way are
//! pruned at the end, whatever the outcome.

use std::sync::Arc;

use super::budget::EventBudget;
use super::call::{invalid, Call, Encoding, Request};
use super::plugin::Plugin;
use super::result::{CreateResult, StopResult, UpdateResult};
use super::{Core, Error};
use nri_api::*;
use protobuf::{Message, MessageField};

/// An event's hold on the adaptation from its start to its end, as
/// upstream's lock and its deferred pruning: the event lock, the plugins as
/// they stood when it began, and its time budget. When it ends, however it
/// ends, closed plugins are pruned, the lock still held.
struct Turn<'a> {
    plugins: Vec<Arc<Plugin>>,
    budget: EventBudget,
    // Fields drop in order: closed plugins are pruned before the lock is
    // let go, so the next event's snapshot holds none of them.
    _prune: PruneOnExit<'a>,
    _serialized: tokio::sync::MutexGuard<'a, ()>,
}

impl Turn<'_> {
    async fn begin(core: &Core) -> Result<Turn<'_>, Error> {
        let serialized = core.serialize_event().await?;
        let prune = PruneOnExit(core);
        let budget = EventBudget::start(core);
        Ok(Turn {
            plugins: core.snapshot(),
            budget,
            _prune: prune,
            _serialized: serialized,
        })
    }
}

/// Prunes closed plugins when the event ends, however it ends.
struct PruneOnExit<'a>(&'a Core);

impl Drop for PruneOnExit<'_> {
    fn drop(&mut self) {
        self.0.prune_closed();
    }
}

pub(crate) async fn relay_all<C: Call>(core: Arc<Core>, req: Request<C>) -> Result<(), Error> {
    let turn = Turn::begin(&core).await?;
    let mut encoding = Encoding::default();
    for p in &turn.plugins {
        p.relay(&req, &mut encoding, turn.budget).await?;
    }
    Ok(())
}

/// RunPodSandbox, and with required plugins guarding pods, the check that
/// they are there before any plugin sees the pod and still there after.
pub(crate) async fn run_pod_sandbox(
    core: Arc<Core>,
    req: Request<RunPodSandboxRequest>,
) -> Result<(), Error> {
    let turn = Turn::begin(&core).await?;
    // Only the guard needs the pod decoded.
    let guarded = match &core.pod_guard {
        Some(validator) => Some((validator, req.message()?)),
        None => None,
    };
    let guard = |plugins: &[Arc<Plugin>]| match &guarded {
        Some((validator, msg)) => validator
            .check_pod_required_plugins(msg.pod.get_or_default(), &active_instances(plugins))
            .map_err(|e| Error::PodRejected {
                plugin: format!(
                    "{}-{}",
                    nri_validator::DEFAULT_VALIDATOR_INDEX,
                    nri_validator::DEFAULT_VALIDATOR_NAME
                ),
                reason: e.to_string(),
            }),
        None => Ok(()),
    };
    guard(&turn.plugins)?;
    let mut encoding = Encoding::default();
    for p in &turn.plugins {
        p.relay(&req, &mut encoding, turn.budget).await?;
    }
    guard(&turn.plugins)
}

/// The plugins of `plugins` not gone (even during this event), as a
/// validator is told of them.
fn active_instances(plugins: &[Arc<Plugin>]) -> Vec<PluginInstance> {
    plugins
        .iter()
        .filter(|p| !p.is_closed())
        .map(|p| PluginInstance {
            name: p.base.clone(),
            index: p.idx.clone(),
            ..Default::default()
        })
        .collect()
}

/// A CreateContainer request as the runtime hands it over: decoded (the
/// Rust API) or encoded and not yet checked (the C ABI).
pub(crate) enum Creation {
    Decoded(CreateContainerRequest),
    Encoded(Vec<u8>),
}

pub(crate) async fn create_container(
    core: Arc<Core>,
    req: Creation,
) -> Result<CreateContainerResponse, Error> {
    let _serialized = core.serialize_event().await?;
    let _prune = PruneOnExit(&core);
    let budget = EventBudget::start(&core);
    let plugins = core.snapshot();
    let validators: Vec<Arc<Plugin>> = plugins
        .iter()
        .filter(|p| p.is_validator())
        .cloned()
        .collect();

    // With one plugin taking the event (the common node), the request
    // stays encoded, as the runtime handed it over: it is checked, the
    // plugin is sent its bytes, and the plugin's adjustment, which no later
    // plugin sees, is merged into a stand-in for the container (the merged
    // reply does not depend on the container's contents). That takes bytes
    // that normalizing leaves as they are (go/adaptation normalizes before
    // encoding), and validators that read of the pod and the container
    // only what is taken from its bytes (the default validator: the pod's
    // name, namespace and annotations, the container's ID, name and
    // seccomp profile). With more plugins, one's adjustment
    // changes what the next is sent, and other validators and the audit
    // log are given the container itself: then it is decoded from the
    // start, which checks it too.
    let validators_read_little = validators.iter().all(|v| v.reads_as_read());
    let stays_encoded = validators_read_little
        && core.audit.is_none()
        && plugins
            .iter()
            .filter(|p| p.will_see(CreateContainerRequest::EVENT))
            .count()
            <= 1;
    // Otherwise the pod is decoded only if something reads it: a
    // validator, the audit log, or a builtin plugin, which is given the
    // whole request. Plugins over ttrpc are sent its bytes as they came.
    let keeps_pod = validators.is_empty()
        && core.audit.is_none()
        && !plugins
            .iter()
            .any(|p| p.is_builtin() && p.will_see(CreateContainerRequest::EVENT));
    let (req, mut encoding, mut stand_in, as_read) = match req {
        Creation::Encoded(bytes) => {
            let parts = stays_encoded
                .then(|| encoded_parts(&bytes, !validators.is_empty()))
                .flatten();
            match parts {
                Some((id, as_read)) => {
                    let bytes: Arc<[u8]> = bytes.into();
                    (
                        Request::checked(Arc::clone(&bytes))?,
                        Encoding::given(bytes),
                        Some(CreateResult::stand_in(id)),
                        as_read,
                    )
                }
                None => {
                    let (req, encoding, stand_in) = decoded(bytes, keeps_pod)?;
                    (req, encoding, stand_in, None)
                }
            }
        }
        Creation::Decoded(req) => (Request::Decoded(req), Encoding::default(), None, None),
    };
    let mut req = req;
    let mut draft = match &req {
        Request::Decoded(r) => {
            audit_draft(&core, CreateContainerRequest::EVENT, &r.pod, &r.container)
        }
        // (Kept encoded only without an audit log.)
        Request::Encoded(_) | Request::Partly { .. } => None,
    };
    // The stand-in is there exactly while the request is encoded.
    let mut result = match &mut stand_in {
        Some(s) => CreateResult::new(s),
        None => CreateResult::new(req.decoded_part_mut()?),
    };
    // A stand-in is never read; without validators, neither are the owners.
    if stand_in.is_some() && validators.is_empty() {
        result.read_by_reply_only();
    }
    let mut verdicts = Vec::new();
    let outcome = async {
        // The pristine (normalized) container, before any plugin touches
        // it, or as validators read it, with the pod then. (Otherwise the
        // pod, which is not adjusted, is taken from the request at the
        // end.)
        let validate = match (as_read, &req, validators.is_empty()) {
            (_, _, true) => None,
            (Some(as_read), _, false) => Some(as_read),
            // (Decoded: an encoded request has validators only with the
            // pod and the container as read.)
            (None, req, false) => {
                let r = req.message()?;
                Some(ValidateContainerAdjustmentRequest {
                    container: match validators_read_little {
                        true => MessageField::some(nri_validator::as_read::container(&r.container)),
                        false => r.container.clone(),
                    },
                    ..Default::default()
                })
            }
        };
        for p in &plugins {
            let Some(rpl) = p.relay(&req, &mut encoding, budget).await? else {
                continue;
            };
            core.metrics.record_plugin_adjustments(
                &p.name,
                CreateContainerRequest::EVENT.pretty_name(),
                rpl.adjust.as_ref(),
                rpl.update.len(),
                rpl.evict.len(),
            );
            // Only an adjustment changes the container later plugins see.
            if rpl
                .adjust
                .as_ref()
                .is_some_and(|a| *a != ContainerAdjustment::default())
            {
                encoding.stale();
            }
            let target = match &mut stand_in {
                Some(s) => s,
                None => req.decoded_part_mut()?,
            };
            result
                .apply(target, &p.name, rpl)
                .map_err(|e| Error::Merge(e.to_string()))?;
        }

        let Some(mut validate) = validate else {
            return Ok(());
        };
        // Every plugin taking part, subscribed or not, in invocation order;
        // but not one that has gone (even during this event), so that a
        // required plugin that is gone never lets a container through.
        // Upstream lists every plugin still open when its turn came, so one
        // dropped during its own call is listed.
        validate.plugins = active_instances(&plugins);
        if let Request::Decoded(r) = &mut req {
            validate.pod = std::mem::take(&mut r.pod);
        }
        // Validators read the merged result itself, lent, not a copy.
        result.lend_to(&mut validate);
        let validate = Request::Decoded(validate);
        // Encoded once for all external validators (a failure to encode
        // shows in each); builtin ones are given the request itself.
        let mut encoding = Encoding::default();
        if validators.iter().any(|v| !v.is_builtin()) {
            let _ = encoding.of(&validate);
        }
        let encoding = &encoding;
        // Validators run concurrently; the first failure in plugin order
        // wins. One that is gone by now is skipped (`Plugin::validate`), as
        // upstream.
        let said = futures::future::join_all(
            validators
                .iter()
                .map(|v| v.validate(&validate, encoding, budget)),
        )
        .await;
        if let Request::Decoded(mut v) = validate {
            result.take_back(&mut v);
        }
        if draft.is_some() {
            verdicts = crate::audit::verdicts(&validators, &said);
        }
        said.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }
    .await;
    if let (Some(mut draft), Some(auditor)) = (draft.take(), core.audit.as_ref()) {
        draft.changes(result.owners());
        draft.set_verdicts(verdicts);
        if draft.worth_it() {
            let rsp = result.response();
            draft.adjustment(rsp.adjust.get_or_default());
            draft.updates(&rsp.update);
            let named: Vec<&Plugin> = plugins.iter().map(|p| &**p).collect();
            auditor
                .submit(draft.finish(outcome.as_ref().map(|_| ()), &named))
                .await;
        }
    }
    outcome.map(|()| result.into_response())
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
fn decoded(
    bytes: Vec<u8>,
    keep_pod: bool,
) -> Result<
    (
        Request<CreateContainerRequest>,
        Encoding,
        Option<CreateContainerRequest>,
    ),
    Error,
> {
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
    let encoding = match normalized {
        true => Encoding::given(bytes.into()),
        false => Encoding::default(),
    };
    Ok((req, encoding, None))
}

pub(crate) async fn update_container(
    core: Arc<Core>,
    mut req: UpdateContainerRequest,
) -> Result<UpdateContainerResponse, Error> {
    let _serialized = core.serialize_event().await?;
    let _prune = PruneOnExit(&core);
    let budget = EventBudget::start(&core);
    let plugins = core.snapshot();
    let draft = audit_draft(
        &core,
        UpdateContainerRequest::EVENT,
        &req.pod,
        &req.container,
    );
    let mut result = UpdateResult::new(&mut req);
    let mut req = Request::Decoded(req);
    let mut encoding = Encoding::default();
    let outcome = async {
        for p in &plugins {
            let Some(rpl) = p.relay(&req, &mut encoding, budget).await? else {
                continue;
            };
            core.metrics.record_plugin_adjustments(
                &p.name,
                UpdateContainerRequest::EVENT.pretty_name(),
                None,
                rpl.update.len(),
                rpl.evict.len(),
            );
            // An update of the request's own container changes its resources.
            if !rpl.update.is_empty() {
                encoding.stale();
            }
            result
                .apply(req.decoded_mut()?, &p.name, rpl)
                .map_err(|e| Error::Merge(e.to_string()))?;
        }
        Ok(())
    }
    .await;
    if let Some(draft) = draft {
        audit_updates(
            &core,
            draft,
            result.owners(),
            &result.updates(),
            &outcome,
            &plugins,
        )
        .await;
    }
    outcome.map(|()| result.into_response())
}

pub(crate) async fn stop_container(
    core: Arc<Core>,
    req: StopContainerRequest,
) -> Result<StopContainerResponse, Error> {
    let _serialized = core.serialize_event().await?;
    let _prune = PruneOnExit(&core);
    let budget = EventBudget::start(&core);
    let plugins = core.snapshot();
    let draft = audit_draft(&core, StopContainerRequest::EVENT, &req.pod, &req.container);
    let mut result = StopResult::new();
    let req = Request::Decoded(req);
    let mut encoding = Encoding::default();
    let outcome = async {
        for p in &plugins {
            let Some(rpl) = p.relay(&req, &mut encoding, budget).await? else {
                continue;
            };
            core.metrics.record_plugin_adjustments(
                &p.name,
                StopContainerRequest::EVENT.pretty_name(),
                None,
                rpl.update.len(),
                0,
            );
            result
                .apply(&p.name, rpl)
                .map_err(|e| Error::Merge(e.to_string()))?;
        }
        Ok(())
    }
    .await;
    if let Some(draft) = draft {
        audit_updates(
            &core,
            draft,
            result.owners(),
            result.updates(),
            &outcome,
            &plugins,
        )
        .await;
    }
    outcome.map(|()| result.into_response())
}

/// The audit record an event starts, if the runtime keeps an audit log.
fn audit_draft(
    core: &Core,
    event: Event,
    pod: &MessageField<PodSandbox>,
    ctr: &MessageField<Container>,
) -> Option<crate::audit::Draft> {
    let ctr = ctr.get_or_default();
    let name = event.pretty_name();
    core.audit
        .as_ref()
        .map(|a| a.draft(name, pod.as_ref(), Some((&ctr.id, &ctr.name))))
}

/// Submits the record of an event that only updates containers, if a
/// plugin changed something.
pub(crate) async fn audit_updates(
    core: &Core,
    mut draft: crate::audit::Draft,
    owners: &OwningPlugins,
    updates: &[ContainerUpdate],
    outcome: &Result<(), Error>,
    plugins: &[Arc<Plugin>],
) {
    let Some(auditor) = core.audit.as_ref() else {
        return;
    };
    draft.changes(owners);
    if draft.worth_it() {
        draft.updates(updates);
        let named: Vec<&Plugin> = plugins.iter().map(|p| &**p).collect();
        auditor
            .submit(draft.finish(outcome.as_ref().map(|_| ()), &named))
            .await;
    }
}
