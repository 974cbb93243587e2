//! The container process: environment, arguments, rlimits, OOM score,
//! I/O priority and scheduler; and the OCI hooks.

use std::collections::HashMap;

use oci_spec::runtime::{self as oci, Process, Spec};
use protobuf::MessageField;

use super::convert::{self, non_empty_vec, none_if_empty, try_map_non_empty};
use super::{init, SpecError};
use nri_api::{self as api, clear_removal_marker, marked_for_removal, OptionalValue};

/// Environment: entries named by the adjustment are replaced or (marked
/// `-NAME`) removed in place, the others are appended in adjustment order.
///
/// A literal port of upstream's `AdjustEnv`, quirks included: rewriting the
/// environment drops entries without `=` and collapses duplicate names
/// (later duplicates win, even over the adjusted value), and a name both
/// removed and set in one adjustment ends up set.
pub(super) fn adjust_env(spec: &mut Spec, env: &[api::KeyValue]) {
    if env.is_empty() {
        return;
    }
    let mut pending: HashMap<&str, &api::KeyValue> = env
        .iter()
        .map(|e| (clear_removal_marker(&e.key), e))
        .collect();

    if let Some(process) = spec.process_mut() {
        let old = process.env_mut().replace(Vec::new()).unwrap_or_default();
        for entry in old {
            let Some((name, value)) = entry.split_once('=') else {
                continue;
            };
            match pending.remove(name) {
                Some(e) if marked_for_removal(&e.key).is_some() => {}
                Some(e) => set_env(process, &e.key, &e.value),
                None => set_env(process, name, value),
            }
        }
    }

    for e in env {
        if marked_for_removal(&e.key).is_none() && pending.contains_key(e.key.as_str()) {
            set_env(init::process(spec), &e.key, &e.value);
        }
    }
    if let Some(process) = spec.process_mut() {
        none_if_empty(process.env_mut());
    }
}

/// Sets `name=value`, replacing the first entry of that name.
fn set_env(process: &mut Process, name: &str, value: &str) {
    if name.is_empty() {
        return;
    }
    let entry = format!("{name}={value}");
    let env = process.env_mut().get_or_insert_with(Vec::new);
    match env.iter_mut().find(|e| {
        e.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('='))
    }) {
        Some(existing) => *existing = entry,
        None => env.push(entry),
    }
}

/// Arguments: a non-empty list replaces the process arguments.
pub(super) fn adjust_args(spec: &mut Spec, args: &[String]) {
    if !args.is_empty() {
        init::process(spec).set_args(Some(args.to_vec()));
    }
}

/// Rlimits are appended, never replaced (as upstream).
pub(super) fn adjust_rlimits(
    spec: &mut Spec,
    rlimits: &[api::POSIXRlimit],
) -> Result<(), SpecError> {
    if rlimits.is_empty() {
        return Ok(());
    }
    let mut added = Vec::with_capacity(rlimits.len());
    for l in rlimits {
        added.push(
            oci::PosixRlimitBuilder::default()
                .typ(convert::rlimit_type(&l.type_)?)
                .hard(l.hard)
                .soft(l.soft)
                .build()?,
        );
    }
    let process = init::process(spec);
    let mut all = process.rlimits().clone().unwrap_or_default();
    all.extend(added);
    process.set_rlimits(Some(all));
    Ok(())
}

pub(super) fn adjust_oom_score_adj(
    spec: &mut Spec,
    score: &MessageField<api::OptionalInt>,
) -> Result<(), SpecError> {
    if let Some(score) = score.value() {
        let score = i32::try_from(score)
            .map_err(|_| SpecError::out_of_range("OOM score adjustment", score))?;
        init::process(spec).set_oom_score_adj(Some(score));
    }
    Ok(())
}

/// A class of `IOPRIO_CLASS_NONE` clears the I/O priority (as upstream).
pub(super) fn adjust_io_priority(
    spec: &mut Spec,
    ioprio: &MessageField<api::LinuxIOPriority>,
) -> Result<(), SpecError> {
    let Some(ioprio) = ioprio.as_ref() else {
        return Ok(());
    };
    let value = match convert::io_priority_class(ioprio.class) {
        None => None,
        Some(class) => Some(
            oci::LinuxIOPriorityBuilder::default()
                .class(class)
                .priority(i64::from(ioprio.priority))
                .build()?,
        ),
    };
    init::process(spec).set_io_priority(value);
    Ok(())
}

/// A policy of `SCHED_NONE` clears the scheduler (as upstream).
pub(super) fn adjust_scheduler(
    spec: &mut Spec,
    sched: &MessageField<api::LinuxScheduler>,
) -> Result<(), SpecError> {
    let Some(sched) = sched.as_ref() else {
        return Ok(());
    };
    let value = match convert::scheduler_policy(sched.policy)? {
        None => None,
        Some(policy) => {
            let mut s = oci::Scheduler::default();
            s.set_policy(policy);
            s.set_nice((sched.nice != 0).then_some(sched.nice));
            s.set_priority((sched.priority != 0).then_some(sched.priority));
            s.set_flags(try_map_non_empty(&sched.flags, |f| {
                convert::scheduler_flag(*f)
            })?);
            s.set_runtime((sched.runtime != 0).then_some(sched.runtime));
            s.set_deadline((sched.deadline != 0).then_some(sched.deadline));
            s.set_period((sched.period != 0).then_some(sched.period));
            Some(s)
        }
    };
    init::process(spec).set_scheduler(value);
    Ok(())
}

/// One of the spec's hook lists.
type HookList = fn(&mut oci::Hooks) -> &mut Option<Vec<oci::Hook>>;

/// Hooks are appended to their lists.
pub(super) fn adjust_hooks(spec: &mut Spec, hooks: &MessageField<api::Hooks>) {
    let Some(hooks) = hooks.as_ref() else {
        return;
    };
    #[allow(deprecated)] // prestart: deprecated in runtime-spec, still adjustable
    let lists: [(&[api::Hook], HookList); 6] = [
        (&hooks.prestart, oci::Hooks::prestart_mut),
        (&hooks.poststart, oci::Hooks::poststart_mut),
        (&hooks.poststop, oci::Hooks::poststop_mut),
        (&hooks.create_runtime, oci::Hooks::create_runtime_mut),
        (&hooks.create_container, oci::Hooks::create_container_mut),
        (&hooks.start_container, oci::Hooks::start_container_mut),
    ];
    for (added, list) in lists {
        if added.is_empty() {
            continue;
        }
        list(init::hooks(spec))
            .get_or_insert_with(Vec::new)
            .extend(added.iter().map(hook));
    }
}

fn hook(h: &api::Hook) -> oci::Hook {
    let mut o = oci::Hook::default();
    o.set_path(h.path.clone().into());
    o.set_args(non_empty_vec(&h.args));
    o.set_env(non_empty_vec(&h.env));
    o.set_timeout(h.timeout.value());
    o
}
