//! The deprecated StateChange fallback (checklist 3.5) and the deprecation
//! recorder (6.7), with plugins whose ttrpc server lacks per-event methods,
//! as plugins built with stubs older than NRI v0.2 do.

use std::sync::{Arc, Mutex};

use nri::adaptation::{Deprecation, DeprecationRecorder};
use nri::api::{self, Event, StateChangeEvent};
use protobuf::MessageField;

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

const LIFECYCLE: [Event; 13] = [
    Event::RUN_POD_SANDBOX,
    Event::UPDATE_POD_SANDBOX,
    Event::POST_UPDATE_POD_SANDBOX,
    Event::STOP_POD_SANDBOX,
    Event::REMOVE_POD_SANDBOX,
    Event::CREATE_CONTAINER,
    Event::POST_CREATE_CONTAINER,
    Event::START_CONTAINER,
    Event::POST_START_CONTAINER,
    Event::UPDATE_CONTAINER,
    Event::POST_UPDATE_CONTAINER,
    Event::STOP_CONTAINER,
    Event::REMOVE_CONTAINER,
];

/// Every lifecycle event once, in lifecycle order, for pod `p` and
/// container `c`; returns CreateContainer's result.
async fn lifecycle(h: &Harness, p: &str, c: &str) -> Result<(), nri::adaptation::Error> {
    let pod = || MessageField::some(pod(p));
    let ctr = || MessageField::some(container(p, c));
    let nri = &h.nri;
    nri.run_pod_sandbox(api::RunPodSandboxRequest {
        pod: pod(),
        ..Default::default()
    })
    .await
    .unwrap();
    nri.update_pod_sandbox(api::UpdatePodSandboxRequest {
        pod: pod(),
        ..Default::default()
    })
    .await
    .unwrap();
    nri.post_update_pod_sandbox(api::PostUpdatePodSandboxRequest {
        pod: pod(),
        ..Default::default()
    })
    .await
    .unwrap();
    let created = nri.create_container(create_req(p, c)).await.map(|_| ());
    nri.post_create_container(api::PostCreateContainerRequest {
        pod: pod(),
        container: ctr(),
        ..Default::default()
    })
    .await
    .unwrap();
    nri.start_container(api::StartContainerRequest {
        pod: pod(),
        container: ctr(),
        ..Default::default()
    })
    .await
    .unwrap();
    nri.post_start_container(api::PostStartContainerRequest {
        pod: pod(),
        container: ctr(),
        ..Default::default()
    })
    .await
    .unwrap();
    nri.update_container(api::UpdateContainerRequest {
        pod: pod(),
        container: ctr(),
        ..Default::default()
    })
    .await
    .unwrap();
    nri.post_update_container(api::PostUpdateContainerRequest {
        pod: pod(),
        container: ctr(),
        ..Default::default()
    })
    .await
    .unwrap();
    nri.stop_container(api::StopContainerRequest {
        pod: pod(),
        container: ctr(),
        ..Default::default()
    })
    .await
    .unwrap();
    nri.remove_container(api::RemoveContainerRequest {
        pod: pod(),
        container: ctr(),
        ..Default::default()
    })
    .await
    .unwrap();
    nri.stop_pod_sandbox(api::StopPodSandboxRequest {
        pod: pod(),
        ..Default::default()
    })
    .await
    .unwrap();
    nri.remove_pod_sandbox(api::RemovePodSandboxRequest {
        pod: pod(),
        ..Default::default()
    })
    .await
    .unwrap();
    created
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
            ("Configure", configure_reply(&LIFECYCLE)),
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
    let all: Vec<(&str, Vec<u8>)> = [
        "RunPodSandbox",
        "PostUpdatePodSandbox",
        "StopPodSandbox",
        "RemovePodSandbox",
        "PostCreateContainer",
        "StartContainer",
        "PostStartContainer",
        "PostUpdateContainer",
        "RemoveContainer",
        "UpdatePodSandbox",
        "UpdateContainer",
        "StopContainer",
        "CreateContainer",
        "Synchronize",
    ]
    .into_iter()
    .map(|m| (m, vec![]))
    .chain([("Configure", configure_reply(&LIFECYCLE))])
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
    let mut expected = vec![
        "Configure",
        "Synchronize",
        "RunPodSandbox",
        sc,
        "UpdatePodSandbox",
        sc,
    ];
    // post-create, start, post-start; update; post-update; stop; remove, stop pod, remove pod
    expected.extend([
        sc,
        sc,
        sc,
        "UpdateContainer",
        sc,
        "StopContainer",
        sc,
        sc,
        sc,
    ]);
    expected.extend([
        sc,
        "UpdatePodSandbox",
        sc,
        sc,
        sc,
        sc,
        "UpdateContainer",
        sc,
        "StopContainer",
        sc,
        sc,
        sc,
    ]);
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
