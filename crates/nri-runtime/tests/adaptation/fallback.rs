//! The deprecated StateChange fallback (checklist 3.5) and the deprecation
//! recorder (6.7), with plugins whose ttrpc server lacks per-event methods,
//! as plugins built with older stubs do.

use std::sync::{Arc, Mutex};

use nri_api::{self as api, Event, StateChangeEvent};
use nri_runtime::{Deprecation, DeprecationRecorder};

use crate::common::*;
use crate::peers::{configure_reply, RawPlugin};

#[derive(Default)]
struct Recorder(Mutex<Vec<(Deprecation, String, String)>>);

impl DeprecationRecorder for Recorder {
    fn plugin_warning(&self, deprecation: Deprecation, plugin: &str, details: &str) {
        self.0
            .lock()
            .unwrap()
            .push((deprecation, plugin.to_string(), details.to_string()));
    }
}

/// The 13 lifecycle events (validation is the last of all events).
fn lifecycle_events() -> &'static [Event] {
    &api::ALL_EVENTS[..api::ALL_EVENTS.len() - 1]
}

/// The plugin answers Unimplemented to RunPodSandbox, the first event it
/// gets: from then on all nine events that have a StateChange form go to
/// StateChange, even StartContainer, which it does implement (the switch is
/// per plugin and for good, as upstream's). The other events keep their
/// dedicated RPCs, and CreateContainer, which it lacks, fails the event: it
/// has no fallback. The recorder hears once per event.
#[tokio::test]
async fn a_plugin_without_dedicated_rpcs_gets_state_change_and_the_recorder_is_told() {
    let recorder = Arc::new(Recorder::default());
    let rec = Arc::clone(&recorder);
    let h = Harness::start_with(
        move |o| o.deprecation_recorder(rec),
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    let trunk = || async { tokio::net::UnixStream::connect(&h.socket).await.unwrap() };
    let old = RawPlugin::refusing(
        trunk().await,
        vec![
            ("Configure", configure_reply(lifecycle_events())),
            ("Synchronize", vec![]),
            ("StateChange", vec![]),
            ("StartContainer", vec![]),
            ("UpdatePodSandbox", vec![]),
            ("UpdateContainer", vec![]),
            ("StopContainer", vec![]),
        ],
        &["RunPodSandbox"],
    )
    .await;
    old.register("old", "10").await.unwrap();
    // A plugin with every RPC is not affected by its neighbour's fallback.
    let all: Vec<(&str, Vec<u8>)> = LIFECYCLE
        .into_iter()
        .chain(["Synchronize"])
        .map(|m| (m, vec![]))
        .chain([("Configure", configure_reply(lifecycle_events()))])
        .collect();
    let modern = RawPlugin::over(trunk().await, all).await;
    modern.register("modern", "20").await.unwrap();
    h.wait_plugins(2).await;

    let err = lifecycle(&h, "p1", "c1").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "rpc error: code = Unimplemented desc = CreateContainer method",
        "no fallback for CreateContainer"
    );
    lifecycle(&h, "p2", "c2").await.unwrap_err();
    assert_eq!(
        h.nri.plugins(),
        ["10-old", "20-modern"],
        "Unimplemented is no reason to drop"
    );

    let sc = "StateChange";
    // The RPCs of lifecycle(), as the old plugin sees them.
    let seen = |rpc: &'static str| match rpc {
        "CreateContainer" => None, // not served: the runtime's request is refused by ttrpc
        "UpdatePodSandbox" | "UpdateContainer" | "StopContainer" => Some(rpc),
        _ => Some(sc),
    };
    let mut expected = vec!["Configure", "Synchronize", "RunPodSandbox"];
    expected.extend(LIFECYCLE.iter().chain(&LIFECYCLE).filter_map(|r| seen(r)));
    assert_eq!(
        old.methods(),
        expected,
        "the dedicated RunPodSandbox is tried once"
    );

    let funnelled: Vec<(Event, String, String)> = old
        .requests::<StateChangeEvent>(sc)
        .into_iter()
        .map(|e| {
            (
                e.event.enum_value().unwrap(),
                e.pod.id.clone(),
                e.container.id.clone(),
            )
        })
        .collect();
    let nine = [
        (Event::RUN_POD_SANDBOX, false),
        (Event::POST_UPDATE_POD_SANDBOX, false),
        (Event::POST_CREATE_CONTAINER, true),
        (Event::START_CONTAINER, true),
        (Event::POST_START_CONTAINER, true),
        (Event::POST_UPDATE_CONTAINER, true),
        (Event::REMOVE_CONTAINER, true),
        (Event::STOP_POD_SANDBOX, false),
        (Event::REMOVE_POD_SANDBOX, false),
    ];
    let want = |p: &str, c: &str| {
        nine.iter()
            .map(|(e, with_ctr)| {
                (
                    *e,
                    p.to_string(),
                    if *with_ctr {
                        c.to_string()
                    } else {
                        String::new()
                    },
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(funnelled, [want("p1", "c1"), want("p2", "c2")].concat());

    let warnings = recorder.0.lock().unwrap().clone();
    let want: Vec<_> = nine
        .iter()
        .map(|(e, _)| {
            (
                Deprecation::StateChange,
                "10-old".to_string(),
                format!(
                    "does not implement a dedicated {} RPC call",
                    e.pretty_name()
                ),
            )
        })
        .collect();
    assert_eq!(warnings, want, "once per plugin and event");

    assert!(
        !modern.methods().iter().any(|m| m == sc),
        "the modern plugin got {:?}",
        modern.methods()
    );
    // The fallback is part of the one invocation metrics see.
    let runs = h
        .metrics
        .invocations
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, op, _)| p == "10-old" && op == "RunPodSandbox")
        .count();
    assert_eq!(runs, 2);
}
