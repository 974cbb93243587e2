//! The metrics the adaptation reports (checklist 6.6, upstream's `Metrics`):
//! per relayed call an invocation and its latency, the size of every reply
//! that carries adjustments, and the number of active plugins.

use std::time::Duration;

use nri_api::{self as api, ContainerUpdate, Event};
use protobuf::Message;
use serde_json::json;

use crate::common::*;
use crate::goprocess::GoPlugin;
use crate::peers::{configure_reply, RawPlugin};

fn bytes(m: &impl Message) -> Vec<u8> {
    m.write_to_bytes().unwrap()
}

fn update(id: &str) -> ContainerUpdate {
    ContainerUpdate {
        container_id: id.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn metrics_count_invocations_latency_adjustments_and_plugins() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let cpu = |id: &str| json!({"container_id": id, "linux": {"resources": {"cpu": {"shares": {"value": 7}}}}});
    let go = GoPlugin::start(
        &h,
        "metered",
        "10",
        json!({
            "events": "runpodsandbox,createcontainer,startcontainer,updatecontainer,stopcontainer",
            "replies": {
                "Synchronize": {"update": [cpu("s1")]},
                "CreateContainer": {"adjust": {"annotations": {"metered": "yes"}}, "update": [cpu("a1")]},
                "UpdateContainer": {"update": [cpu("u1")]},
                "StopContainer": {"update": [cpu("x1"), cpu("x2")]},
            },
            "delay_ms": {"RunPodSandbox": 100},
            "fail": {"StartContainer": "not now"},
        }),
    );
    h.wait_plugins(1).await;
    // Upstream's Go stub cannot send evictions; a raw plugin can.
    let evicting = RawPlugin::connect(
        &h.socket,
        vec![
            (
                "Configure",
                configure_reply(&[Event::CREATE_CONTAINER, Event::UPDATE_CONTAINER]),
            ),
            ("Synchronize", vec![]),
            (
                "CreateContainer",
                bytes(&api::CreateContainerResponse {
                    update: vec![update("a2")],
                    evict: vec![Default::default(), Default::default()],
                    ..Default::default()
                }),
            ),
            (
                "UpdateContainer",
                bytes(&api::UpdateContainerResponse {
                    evict: vec![Default::default()],
                    ..Default::default()
                }),
            ),
        ],
    )
    .await;
    evicting.register("evicting", "20").await.unwrap();
    h.wait_plugins(2).await;

    h.nri
        .run_pod_sandbox(req!(RunPodSandboxRequest, "p"))
        .await
        .unwrap();
    let created = h.nri.create_container(create_req("p", "c")).await.unwrap();
    assert!(
        created.evict.is_empty(),
        "evictions are counted, never acted on"
    );
    h.nri
        .update_container(req!(UpdateContainerRequest, "p", "c"))
        .await
        .unwrap();
    h.nri
        .stop_container(req!(StopContainerRequest, "p", "c"))
        .await
        .unwrap();
    h.nri
        .start_container(req!(StartContainerRequest, "p", "c"))
        .await
        .unwrap_err();

    let invocations = h.metrics.invocations.lock().unwrap().clone();
    let of = |plugin: &str| {
        invocations
            .iter()
            .filter(|(p, _, _)| p == plugin)
            .map(|(_, op, failed)| (op.as_str(), *failed))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of("10-metered"),
        [
            ("Synchronize", false),
            ("RunPodSandbox", false),
            ("CreateContainer", false),
            ("UpdateContainer", false),
            ("StopContainer", false),
            ("StartContainer", true),
        ]
    );
    assert_eq!(
        of("20-evicting"),
        [
            ("Synchronize", false),
            ("CreateContainer", false),
            ("UpdateContainer", false)
        ],
        "no invocation for events it is not subscribed to"
    );

    let latencies = h.metrics.latencies.lock().unwrap().clone();
    let timed: Vec<_> = latencies
        .iter()
        .map(|(p, op, _)| (p.clone(), op.clone(), false))
        .collect();
    let called: Vec<_> = invocations
        .iter()
        .map(|(p, op, _)| (p.clone(), op.clone(), false))
        .collect();
    assert_eq!(timed, called, "one latency per invocation");
    let run = latencies
        .iter()
        .find(|(p, op, _)| p == "10-metered" && op == "RunPodSandbox")
        .unwrap()
        .2;
    assert!(
        run >= Duration::from_millis(100),
        "RunPodSandbox took {run:?}"
    );

    let adjustments = h.metrics.adjustments.lock().unwrap().clone();
    let summary: Vec<_> = adjustments
        .iter()
        .map(|a| {
            (
                a.plugin.as_str(),
                a.op.as_str(),
                a.adjust.is_some(),
                a.updates,
                a.evicts,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("10-metered", "Synchronize", false, 1, 0),
            ("20-evicting", "Synchronize", false, 0, 0),
            ("10-metered", "CreateContainer", true, 1, 0),
            ("20-evicting", "CreateContainer", false, 1, 2),
            ("10-metered", "UpdateContainer", false, 1, 0),
            ("20-evicting", "UpdateContainer", false, 0, 1),
            ("10-metered", "StopContainer", false, 2, 0),
        ]
    );
    let create = &adjustments[2].adjust.as_ref().unwrap();
    assert_eq!(
        create.annotations.get("metered").map(String::as_str),
        Some("yes"),
        "the plugin's own adjustment"
    );

    // The count follows plugins coming and going (pruned after an event).
    drop(go);
    h.nri
        .run_pod_sandbox(req!(RunPodSandboxRequest, "p"))
        .await
        .unwrap();
    h.wait_plugins(1).await;
    let counts = h.metrics.counts.lock().unwrap().clone();
    let mut changes = counts.clone();
    changes.dedup();
    assert_eq!(changes.last(), Some(&1));
    assert!(changes.ends_with(&[1, 2, 1]), "plugin counts {counts:?}");
}

/// An event that waits for one plugin is polled where its caller waits, so
/// its metrics are recorded on the caller's thread; one that waits for
/// several runs on the adaptation's own thread, and records them there.
#[tokio::test]
async fn metrics_are_recorded_where_the_event_runs() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let plugin = || TestPlugin::adjusting(|_| Ok((Default::default(), vec![])));
    let first = h.connect("first", "10", plugin());
    h.wait_plugins(1).await;
    let threads = || h.metrics.latency_threads.lock().unwrap().clone();
    let ops = || h.metrics.latencies.lock().unwrap().len();

    let before = ops();
    h.nri
        .create_container(create_req("pod", "c1"))
        .await
        .unwrap();
    let caller = std::thread::current().name().map(str::to_string);
    assert_ne!(caller.as_deref(), Some("nri-adaptation"));
    assert_eq!(ops(), before + 1);
    assert_eq!(
        threads().last(),
        Some(&caller),
        "one plugin: the caller's thread"
    );

    let second = h.connect("second", "20", plugin());
    h.wait_plugins(2).await;
    let before = ops();
    h.nri
        .create_container(create_req("pod", "c2"))
        .await
        .unwrap();
    assert_eq!(ops(), before + 2);
    let core = Some("nri-adaptation".to_string());
    assert_eq!(
        threads()[before..],
        [core.clone(), core],
        "two plugins: the core's thread"
    );
    first.stop();
    second.stop();
}
