//! The event flows: relay in index order, merge, validate. Each runs on the
//! adaptation's runtime under the event lock; plugins dropped on the way are
//! pruned at the end, whatever the outcome.

use std::sync::Arc;

use super::budget::EventBudget;
use super::call::{Call, Encoding};
use super::plugin::Plugin;
use super::result::{CreateResult, StopResult, UpdateResult};
use super::{Core, Error};
use nri_api::*;
use protobuf::MessageField;

/// Prunes closed plugins when the event ends, however it ends.
struct PruneOnExit<'a>(&'a Core);

impl Drop for PruneOnExit<'_> {
    fn drop(&mut self) {
        self.0.prune_closed();
    }
}

pub(crate) async fn relay_all<C: Call>(core: Arc<Core>, req: C) -> Result<(), Error> {
    let _serialized = core.serialize_event().await?;
    let _prune = PruneOnExit(&core);
    let budget = EventBudget::start(&core);
    let mut encoding = Encoding::default();
    for p in core.snapshot() {
        p.relay(&req, &mut encoding, budget).await?;
    }
    Ok(())
}

/// RunPodSandbox, and with required plugins guarding pods, the check that
/// they are there before any plugin sees the pod and still there after.
pub(crate) async fn run_pod_sandbox(
    core: Arc<Core>,
    req: RunPodSandboxRequest,
) -> Result<(), Error> {
    let _serialized = core.serialize_event().await?;
    let _prune = PruneOnExit(&core);
    let budget = EventBudget::start(&core);
    let plugins = core.snapshot();
    let guard = |plugins: &[Arc<Plugin>]| match &core.pod_guard {
        Some(validator) => validator
            .check_pod_required_plugins(req.pod.get_or_default(), &active_instances(plugins))
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
    guard(&plugins)?;
    let mut encoding = Encoding::default();
    for p in &plugins {
        p.relay(&req, &mut encoding, budget).await?;
    }
    guard(&plugins)
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

pub(crate) async fn create_container(
    core: Arc<Core>,
    mut req: CreateContainerRequest,
    encoded: Option<Vec<u8>>,
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
    let mut draft = audit_draft(
        &core,
        CreateContainerRequest::EVENT,
        &req.pod,
        &req.container,
    );

    // The runtime's bytes are what plugins would be sent only if
    // normalizing adds nothing (go/adaptation normalizes before encoding).
    let mut encoding = match encoded {
        Some(bytes) if CreateResult::is_normalized(&req) => Encoding::given(bytes),
        _ => Encoding::default(),
    };
    let mut result = CreateResult::new(&mut req);
    let mut verdicts = Vec::new();
    let outcome = async {
        // The pristine (normalized) container, before any plugin touches
        // it. (The pod is not adjusted: it is taken from the request at
        // the end.)
        let validate = (!validators.is_empty()).then(|| ValidateContainerAdjustmentRequest {
            container: req.container.clone(),
            ..Default::default()
        });
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
            result
                .apply(&mut req, &p.name, rpl)
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
        validate.pod = std::mem::take(&mut req.pod);
        let rpl = result.response();
        validate.adjust = rpl.adjust.clone();
        validate.update = rpl.update.clone();
        validate.owners = protobuf::MessageField::some(result.owners().clone());
        let validate = &validate;
        // Encoded once for all external validators (a failure to encode
        // shows in each); builtin ones are given the request itself.
        let mut encoding = Encoding::default();
        if validators.iter().any(|v| !v.is_builtin()) {
            let _ = encoding.of(validate);
        }
        let encoding = &encoding;
        // Validators run concurrently; the first failure in plugin order
        // wins. One that is gone by now is skipped (`Plugin::validate`), as
        // upstream.
        let said = futures::future::join_all(
            validators
                .iter()
                .map(|v| v.validate(validate, encoding, budget)),
        )
        .await;
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
                .apply(&mut req, &p.name, rpl)
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
