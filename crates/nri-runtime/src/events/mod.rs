//! The event flows: relay in index order, merge, validate. Each runs on the
//! adaptation's runtime under the event lock; plugins dropped on the way are
//! pruned at the end, whatever the outcome.

pub(crate) mod creation;
pub(crate) mod outgoing;

use std::borrow::Cow;
use std::sync::Arc;

use crate::events::creation::{Creation, Handed};
use crate::events::outgoing::Outgoing;
use crate::plugins::event_budget::EventBudget;
use crate::plugins::plugin::Plugin;
use crate::plugins::request::{Call, Encoding, Request};
use crate::results::{CreateResult, MergeError, StopResult, UpdateResult};
use crate::sync::joining::{self, Joining};
use crate::{AuditVerdict, Core, Error};
use nri_api::*;
use protobuf::{Message, MessageField};

/// An event's hold on the adaptation from its start to its end, as
/// upstream's lock and its deferred pruning: the event lock, the plugins as
/// they stood when it began, and its time budget. When it ends, however it
/// ends, closed plugins are pruned, the lock still held.
struct Turn<'a> {
    plugins: Vec<Arc<Plugin>>,
    /// The plugins whose sync has begun: the event is kept for them.
    joining: Vec<Arc<Joining>>,
    budget: EventBudget,
    // Fields drop in order: closed plugins are pruned before the lock is
    // let go, so the next event's snapshot holds none of them.
    _prune: PruneOnExit<'a>,
    _serialized: crate::event_lock::EventTurn<'a>,
}

impl Turn<'_> {
    /// Waits for the event's turn: after every event before it, or with
    /// pod concurrency after those of its pod, `pod`.
    async fn begin<'a>(core: &'a Core, pod: Option<&str>) -> Result<Turn<'a>, Error> {
        let serialized = core.serialize_event(pod).await?;
        let prune = PruneOnExit(core);
        let budget = EventBudget::start(core.event_timeout);
        Ok(Turn {
            plugins: core.snapshot(),
            joining: core.joining(),
            budget,
            _prune: prune,
            _serialized: serialized,
        })
    }
}

impl Turn<'_> {
    /// The bytes of this event's request if a joining plugin takes it.
    fn to_keep<C: Call>(&self, req: &Request<C>) -> Option<Arc<[u8]>> {
        joining::kept(&self.joining, C::EVENT, || joining::bytes_of(req))
    }

    /// The event went through: the joining plugins are told of it once
    /// they are synchronized.
    fn keep(&self, event: Event, request: Option<Arc<[u8]>>) {
        if let Some(request) = request {
            for j in &self.joining {
                j.missed(event, &request);
            }
        }
    }
}

/// Prunes closed plugins when the event ends, however it ends.
struct PruneOnExit<'a>(&'a Core);

impl Drop for PruneOnExit<'_> {
    fn drop(&mut self) {
        self.0.prune_closed();
    }
}

/// The pod an event is about, when events of different pods run at once.
fn pod_of<C: Call>(core: &Core, req: &Request<C>) -> Option<String> {
    core.events.by_pod().then(|| req.pod_id()).flatten()
}

pub(crate) async fn relay_all<C: Call>(core: Arc<Core>, req: Request<C>) -> Result<(), Error> {
    let turn = Turn::begin(&core, pod_of(&core, &req).as_deref()).await?;
    let kept = turn.to_keep(&req);
    let mut req = Outgoing::new(req);
    for p in &turn.plugins {
        req.relay(p, turn.budget).await?;
    }
    turn.keep(C::EVENT, kept);
    Ok(())
}

/// RunPodSandbox, and with required plugins guarding pods, the check that
/// they are there before any plugin sees the pod and still there after.
pub(crate) async fn run_pod_sandbox(
    core: Arc<Core>,
    req: Request<RunPodSandboxRequest>,
) -> Result<(), Error> {
    let turn = Turn::begin(&core, pod_of(&core, &req).as_deref()).await?;
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
    let kept = turn.to_keep(&req);
    // The guard reads the request while plugins are sent it, which no
    // reply changes: its bytes are held apart, not in an `Outgoing`.
    let mut encoding = Encoding::default();
    for p in &turn.plugins {
        p.relay(&req, &mut encoding, turn.budget).await?;
    }
    guard(&turn.plugins)?;
    turn.keep(RunPodSandboxRequest::EVENT, kept);
    Ok(())
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

/// CreateContainer: each plugin's adjustment and updates merged in index
/// order, then the result vetted by the validators, all at once.
pub(crate) async fn create_container(
    core: Arc<Core>,
    handed: Handed,
) -> Result<CreateContainerResponse, Error> {
    let pod = core.events.by_pod().then(|| handed.pod_id()).flatten();
    let turn = Turn::begin(&core, pod.as_deref()).await?;
    let validators: Vec<Arc<Plugin>> = turn
        .plugins
        .iter()
        .filter(|p| p.is_validator())
        .cloned()
        .collect();
    let kept = joining::kept(
        &turn.joining,
        CreateContainerRequest::EVENT,
        || match &handed {
            Handed::Encoded(bytes) => Some(Arc::from(bytes.as_slice())),
            Handed::Decoded(req) => req.write_to_bytes().ok().map(Arc::from),
        },
    );
    let mut req = Creation::new(handed, &core, &turn.plugins, &validators)?;
    let draft = req
        .decoded()
        .and_then(|r| audit_draft(&core, CreateContainerRequest::EVENT, &r.pod, &r.container));
    let mut result = req.start_merge()?;
    let mut verdicts = Vec::new();
    let outcome = async {
        let validation = req.validation()?;
        for p in &turn.plugins {
            let Some(rpl) = req.relay(p, turn.budget).await? else {
                continue;
            };
            record_adjustments(&core, p, CreateContainerRequest::EVENT, &rpl);
            req.merge(&mut result, &p.name, rpl)?;
        }
        let Some(mut validation) = validation else {
            return Ok(());
        };
        req.hand_pod_to(&mut validation);
        let said = vet(
            &validators,
            &turn.plugins,
            validation,
            &mut result,
            turn.budget,
        )
        .await;
        if draft.is_some() {
            verdicts = crate::results::audit::verdicts(&validators, &said);
        }
        said.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }
    .await;
    if let Some(draft) = draft {
        audit_creation(&core, draft, &result, verdicts, &outcome, &turn.plugins).await;
    }
    if outcome.is_ok() {
        turn.keep(CreateContainerRequest::EVENT, kept);
    }
    outcome.map(|()| result.into_response())
}

/// Has `validators` vet the merged `result`, all at once, with `req`, their
/// request begun; what each said, in plugin order.
async fn vet(
    validators: &[Arc<Plugin>],
    plugins: &[Arc<Plugin>],
    mut req: ValidateContainerAdjustmentRequest,
    result: &mut CreateResult,
    budget: EventBudget,
) -> Vec<Result<(), Error>> {
    // Every plugin taking part, subscribed or not, in invocation order;
    // but not one that has gone (even during this event), so that a
    // required plugin that is gone never lets a container through.
    // Upstream lists every plugin still open when its turn came, so one
    // dropped during its own call is listed.
    req.plugins = active_instances(plugins);
    // Validators read the merged result itself, lent, not a copy.
    result.lend_to(&mut req);
    let req = Request::Decoded(req);
    // Encoded once for all external validators (a failure to encode
    // shows in each); builtin ones are given the request itself.
    let mut encoding = Encoding::default();
    if validators.iter().any(|v| !v.is_builtin()) {
        let _ = encoding.of(&req);
    }
    let encoding = &encoding;
    // Validators run concurrently; the first failure in plugin order
    // wins. One that is gone by now is skipped (`Plugin::validate`), as
    // upstream.
    let said = futures::future::join_all(
        validators
            .iter()
            .map(|v| v.validate(&req, encoding, budget)),
    )
    .await;
    if let Request::Decoded(mut v) = req {
        result.take_back(&mut v);
    }
    said
}

/// What UpdateContainer and StopContainer differ in. Otherwise their flow
/// is one, [`merge_event`]: each plugin's reply merged in index order.
pub(crate) trait MergedEvent: Call {
    /// The merge of the replies so far.
    type Merge;

    /// The request's pod and container, for the audit record.
    fn subject(&self) -> (&MessageField<PodSandbox>, &MessageField<Container>);

    /// The merge before any reply, the request normalized as upstream
    /// normalizes it before the first plugin.
    fn start_merge(&mut self) -> Self::Merge;

    /// Whether `rpl` changes the request later plugins are sent.
    fn changes_request(rpl: &Self::Reply) -> bool;

    fn merge(
        merge: &mut Self::Merge,
        req: &mut Self,
        plugin: &str,
        rpl: Self::Reply,
    ) -> Result<(), MergeError>;

    /// Who set what, for the audit record.
    fn owners(merge: &Self::Merge) -> &OwningPlugins;

    /// The updates merged so far, for the audit record.
    fn updates(merge: &Self::Merge) -> Cow<'_, [ContainerUpdate]>;

    fn into_response(merge: Self::Merge) -> Self::Reply;
}

impl MergedEvent for UpdateContainerRequest {
    type Merge = UpdateResult;

    fn subject(&self) -> (&MessageField<PodSandbox>, &MessageField<Container>) {
        (&self.pod, &self.container)
    }

    fn start_merge(&mut self) -> UpdateResult {
        UpdateResult::new(self)
    }

    // An update of the request's own container changes its resources.
    fn changes_request(rpl: &UpdateContainerResponse) -> bool {
        !rpl.update.is_empty()
    }

    fn merge(
        merge: &mut UpdateResult,
        req: &mut Self,
        plugin: &str,
        rpl: UpdateContainerResponse,
    ) -> Result<(), MergeError> {
        merge.apply(req, plugin, rpl)
    }

    fn owners(merge: &UpdateResult) -> &OwningPlugins {
        merge.owners()
    }

    fn updates(merge: &UpdateResult) -> Cow<'_, [ContainerUpdate]> {
        Cow::Owned(merge.updates())
    }

    fn into_response(merge: UpdateResult) -> UpdateContainerResponse {
        merge.into_response()
    }
}

impl MergedEvent for StopContainerRequest {
    type Merge = StopResult;

    fn subject(&self) -> (&MessageField<PodSandbox>, &MessageField<Container>) {
        (&self.pod, &self.container)
    }

    fn start_merge(&mut self) -> StopResult {
        StopResult::new()
    }

    // Only other containers are updated.
    fn changes_request(_: &StopContainerResponse) -> bool {
        false
    }

    fn merge(
        merge: &mut StopResult,
        _: &mut Self,
        plugin: &str,
        rpl: StopContainerResponse,
    ) -> Result<(), MergeError> {
        merge.apply(plugin, rpl)
    }

    fn owners(merge: &StopResult) -> &OwningPlugins {
        merge.owners()
    }

    fn updates(merge: &StopResult) -> Cow<'_, [ContainerUpdate]> {
        Cow::Borrowed(merge.updates())
    }

    fn into_response(merge: StopResult) -> StopContainerResponse {
        merge.into_response()
    }
}

/// UpdateContainer or StopContainer (see [`MergedEvent`]).
pub(crate) async fn merge_event<E>(core: Arc<Core>, mut req: E) -> Result<E::Reply, Error>
where
    E: MergedEvent,
    E::Reply: Counted,
{
    let pod = core.events.by_pod().then(|| req.pod_id().to_string());
    let turn = Turn::begin(&core, pod.as_deref().filter(|p| !p.is_empty())).await?;
    let kept = joining::kept(&turn.joining, E::EVENT, || {
        req.write_to_bytes().ok().map(Arc::from)
    });
    let (pod, ctr) = req.subject();
    let draft = audit_draft(&core, E::EVENT, pod, ctr);
    let mut merged = req.start_merge();
    let mut req = Outgoing::new(Request::Decoded(req));
    let outcome = async {
        for p in &turn.plugins {
            let Some(rpl) = req.relay(p, turn.budget).await? else {
                continue;
            };
            record_adjustments(&core, p, E::EVENT, &rpl);
            if E::changes_request(&rpl) {
                req.stale();
            }
            let target = req.request_mut().decoded_mut()?;
            E::merge(&mut merged, target, &p.name, rpl).map_err(|e| Error::Merge(e.to_string()))?;
        }
        Ok(())
    }
    .await;
    if let Some(draft) = draft {
        let updates = E::updates(&merged);
        audit_updates(
            &core,
            draft,
            E::owners(&merged),
            &updates,
            &outcome,
            &turn.plugins,
        )
        .await;
    }
    if outcome.is_ok() {
        turn.keep(E::EVENT, kept);
    }
    outcome.map(|()| E::into_response(merged))
}

/// What the metrics count of a plugin's reply: its adjustment of the new
/// container, its updates and its evictions.
pub(crate) trait Counted {
    fn counts(&self) -> (Option<&ContainerAdjustment>, usize, usize);
}

impl Counted for CreateContainerResponse {
    fn counts(&self) -> (Option<&ContainerAdjustment>, usize, usize) {
        (self.adjust.as_ref(), self.update.len(), self.evict.len())
    }
}

impl Counted for UpdateContainerResponse {
    fn counts(&self) -> (Option<&ContainerAdjustment>, usize, usize) {
        (None, self.update.len(), self.evict.len())
    }
}

impl Counted for StopContainerResponse {
    fn counts(&self) -> (Option<&ContainerAdjustment>, usize, usize) {
        (None, self.update.len(), 0)
    }
}

fn record_adjustments(core: &Core, p: &Plugin, event: Event, rpl: &impl Counted) {
    let (adjust, updates, evicts) = rpl.counts();
    core.metrics
        .record_plugin_adjustments(&p.name, event.pretty_name(), adjust, updates, evicts);
}

/// The audit record an event starts, if the runtime keeps an audit log.
fn audit_draft(
    core: &Core,
    event: Event,
    pod: &MessageField<PodSandbox>,
    ctr: &MessageField<Container>,
) -> Option<crate::results::audit::Draft> {
    let ctr = ctr.get_or_default();
    let name = event.pretty_name();
    core.audit
        .as_ref()
        .map(|a| a.draft(name, pod.as_ref(), Some((&ctr.id, &ctr.name))))
}

/// Submits the record of a CreateContainer, if a plugin changed something
/// or a validator refused.
async fn audit_creation(
    core: &Core,
    mut draft: crate::results::audit::Draft,
    result: &CreateResult,
    verdicts: Vec<AuditVerdict>,
    outcome: &Result<(), Error>,
    plugins: &[Arc<Plugin>],
) {
    let Some(auditor) = core.audit.as_ref() else {
        return;
    };
    draft.changes(result.owners());
    draft.set_verdicts(verdicts);
    if draft.worth_it() {
        let rsp = result.response();
        draft.adjustment(rsp.adjust.get_or_default());
        draft.updates(&rsp.update);
        submit(auditor, draft, outcome, plugins).await;
    }
}

/// Submits the record of an event that only updates containers, if a
/// plugin changed something.
async fn audit_updates(
    core: &Core,
    mut draft: crate::results::audit::Draft,
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
        submit(auditor, draft, outcome, plugins).await;
    }
}

async fn submit(
    auditor: &crate::results::audit::Auditor,
    draft: crate::results::audit::Draft,
    outcome: &Result<(), Error>,
    plugins: &[Arc<Plugin>],
) {
    let named: Vec<&Plugin> = plugins.iter().map(|p| &**p).collect();
    auditor
        .submit(draft.finish(outcome.as_ref().map(|_| ()), &named))
        .await;
}
