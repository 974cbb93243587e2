//! Process fields (rlimits, OOM score, I/O priority, scheduler) and hooks.

use serde_json::json;

use super::{adjusted, base_json, generator, refused};
use crate::SpecError;
use nri_api::{
    optional, ContainerAdjustment, Hook, Hooks, IOPrioClass, LinuxIOPriority, LinuxScheduler,
    LinuxSchedulerFlag, LinuxSchedulerPolicy,
};

#[test]
fn rlimits_append_without_replacing() {
    let mut adjust = ContainerAdjustment::new();
    adjust.add_rlimit("RLIMIT_NOFILE", 2, 1);
    adjust.add_rlimit("RLIMIT_NPROC", 4, 3);
    let mut spec = base_json();
    spec["process"]["rlimits"] = json!([{"type": "RLIMIT_NOFILE", "hard": 10, "soft": 10}]);
    assert_eq!(
        adjusted(spec, &adjust)["process"]["rlimits"],
        json!([
            {"type": "RLIMIT_NOFILE", "hard": 10, "soft": 10},
            {"type": "RLIMIT_NOFILE", "hard": 2, "soft": 1},
            {"type": "RLIMIT_NPROC", "hard": 4, "soft": 3},
        ])
    );
}

#[test]
fn rlimit_types_outside_runtime_spec_are_refused() {
    // Upstream's own test uses "nofile"; Go copies any string.
    let mut adjust = ContainerAdjustment::new();
    adjust.add_env("E", "1");
    adjust.add_rlimit("nofile", 456, 123);
    let err = refused(&generator(), base_json(), &adjust);
    assert!(
        matches!(err, SpecError::Unsupported { field: "rlimit type", ref value } if value == "nofile")
    );
}

#[test]
fn oom_score_out_of_i32_range_is_refused() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_oom_score_adj(Some(i64::from(i32::MAX) + 1));
    let err = refused(&generator(), base_json(), &adjust);
    assert!(matches!(err, SpecError::OutOfRange { .. }), "{err}");
}

#[test]
fn io_priority_is_set_and_class_none_clears_it() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_io_priority(LinuxIOPriority {
        class: IOPrioClass::IOPRIO_CLASS_IDLE.into(),
        priority: 7,
        ..Default::default()
    });
    let spec = adjusted(base_json(), &adjust);
    assert_eq!(
        spec["process"]["ioPriority"],
        json!({"class": "IOPRIO_CLASS_IDLE", "priority": 7})
    );

    let mut clear = ContainerAdjustment::new();
    clear.set_linux_io_priority(LinuxIOPriority::default());
    assert_eq!(adjusted(spec, &clear), base_json());
}

#[test]
fn io_priority_with_unknown_class_clears_it() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_io_priority(LinuxIOPriority {
        class: protobuf::EnumOrUnknown::from_i32(42),
        ..Default::default()
    });
    let mut spec = base_json();
    spec["process"]["ioPriority"] = json!({"class": "IOPRIO_CLASS_RT", "priority": 1});
    assert_eq!(adjusted(spec, &adjust), base_json());
}

fn scheduler(policy: LinuxSchedulerPolicy, flags: &[LinuxSchedulerFlag]) -> LinuxScheduler {
    LinuxScheduler {
        policy: policy.into(),
        nice: -5,
        priority: 0,
        flags: flags.iter().map(|f| (*f).into()).collect(),
        runtime: 100,
        deadline: 0,
        period: 300,
        ..Default::default()
    }
}

#[test]
fn scheduler_is_set_with_zero_fields_left_out() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_scheduler(scheduler(
        LinuxSchedulerPolicy::SCHED_DEADLINE,
        &[
            LinuxSchedulerFlag::SCHED_FLAG_RECLAIM,
            LinuxSchedulerFlag::SCHED_FLAG_UTIL_CLAMP_MAX,
        ],
    ));
    assert_eq!(
        adjusted(base_json(), &adjust)["process"]["scheduler"],
        json!({
            "policy": "SCHED_DEADLINE",
            "nice": -5,
            "flags": ["SCHED_FLAG_RECLAIM", "SCHED_FLAG_UTIL_CLAMP_MAX"],
            "runtime": 100,
            "period": 300
        })
    );
}

#[test]
fn scheduler_none_clears_it() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_scheduler(scheduler(LinuxSchedulerPolicy::SCHED_NONE, &[]));
    let mut spec = base_json();
    spec["process"]["scheduler"] = json!({"policy": "SCHED_FIFO", "priority": 10});
    assert_eq!(adjusted(spec, &adjust), base_json());
}

#[test]
fn scheduler_flags_oci_spec_misspells_are_refused() {
    for flag in [
        LinuxSchedulerFlag::SCHED_FLAG_RESET_ON_FORK,
        LinuxSchedulerFlag::SCHED_FLAG_DL_OVERRUN,
    ] {
        let mut adjust = ContainerAdjustment::new();
        adjust.set_linux_scheduler(scheduler(LinuxSchedulerPolicy::SCHED_RR, &[flag]));
        let err = refused(&generator(), base_json(), &adjust);
        assert!(
            matches!(
                err,
                SpecError::Unsupported {
                    field: "scheduler flag",
                    ..
                }
            ),
            "{err}"
        );
    }
}

#[test]
fn unknown_scheduler_policy_is_refused() {
    let mut adjust = ContainerAdjustment::new();
    let mut s = scheduler(LinuxSchedulerPolicy::SCHED_RR, &[]);
    s.policy = protobuf::EnumOrUnknown::from_i32(99);
    adjust.set_linux_scheduler(s);
    refused(&generator(), base_json(), &adjust);
}

#[test]
fn hooks_are_appended_to_their_lists() {
    let hook = |path: &str| Hook {
        path: path.into(),
        args: vec![path.into(), "arg".into()],
        env: vec![],
        timeout: optional::int(5),
        ..Default::default()
    };
    let mut adjust = ContainerAdjustment::new();
    adjust.add_hooks(Hooks {
        prestart: vec![hook("/pre")],
        create_runtime: vec![hook("/cr1"), hook("/cr2")],
        create_container: vec![hook("/cc")],
        start_container: vec![hook("/sc")],
        poststart: vec![hook("/post")],
        poststop: vec![hook("/stop")],
        ..Default::default()
    });
    let mut spec = base_json();
    spec["hooks"] = json!({"createRuntime": [{"path": "/existing"}]});
    let j = |p: &str| json!({"path": p, "args": [p, "arg"], "timeout": 5});
    assert_eq!(
        adjusted(spec, &adjust)["hooks"],
        json!({
            "prestart": [j("/pre")],
            "createRuntime": [{"path": "/existing"}, j("/cr1"), j("/cr2")],
            "createContainer": [j("/cc")],
            "startContainer": [j("/sc")],
            "poststart": [j("/post")],
            "poststop": [j("/stop")],
        })
    );
}

#[test]
fn empty_hooks_create_nothing() {
    let mut adjust = ContainerAdjustment::new();
    adjust.add_hooks(Hooks::default());
    assert_eq!(adjusted(base_json(), &adjust), base_json());
}
