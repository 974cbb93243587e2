//! Pod concurrency (`Options::pod_concurrency`): events of different pods
//! overlap, those of one pod keep their order, a plugin that did not opt in
//! is sent one request at a time, and each merged result is the one running
//! the events in turn gives. The plugins are upstream Go-stub processes
//! that log when each request arrived and when they answered it.

use std::collections::HashMap;

use futures::future::join_all;
use nri_api::*;
use serde_json::{json, Value};

use crate::common::*;
use crate::goprocess::{go_plugin, read_log, GoPlugin};

async fn harness(concurrency: bool, concurrent: &[&str]) -> Harness {
    let concurrent: Vec<String> = concurrent.iter().map(|s| s.to_string()).collect();
    let h = Harness::start_with(
        move |o| {
            concurrent
                .into_iter()
                .fold(o.pod_concurrency(concurrency), |o, p| {
                    o.concurrent_plugin(p).unwrap()
                })
        },
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    h
}

/// A request as the plugin logged it: what, for whom, and when.
struct Span {
    event: String,
    pod: String,
    started: i64,
    ended: i64,
}

fn spans(calls: &[Value]) -> Vec<Span> {
    calls
        .iter()
        .filter(|c| c["started_ns"].is_i64())
        .map(|c| Span {
            event: c["event"].as_str().unwrap_or_default().to_string(),
            pod: c["pod"].as_str().unwrap_or_default().to_string(),
            started: c["started_ns"].as_i64().unwrap(),
            ended: c["ended_ns"].as_i64().unwrap(),
        })
        .collect()
}

/// The most requests of `spans` that were in the plugin's hands at once.
fn most_at_once(spans: &[&Span]) -> usize {
    let mut edges: Vec<(i64, i32)> = spans
        .iter()
        .flat_map(|s| [(s.started, 1), (s.ended, -1)])
        .collect();
    // An end and a start at the same instant do not overlap.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

fn script(extra: Value) -> Value {
    let mut s = json!({"events": "all", "spans": true});
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

/// Eight creations for eight pods at once: the plugin that said it takes
/// concurrent requests has several in hand at a time, the other one only
/// one, and both see all eight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_did_not_opt_in_is_sent_one_request_at_a_time() {
    let h = harness(true, &["10-together"]).await;
    let slow = json!({"delay_ms": {"CreateContainer": 40}});
    let together = GoPlugin::start(&h, "together", "10", script(slow.clone()));
    let alone = GoPlugin::start(&h, "alone", "20", script(slow));
    h.wait_plugins(2).await;
    let created = join_all((0..8).map(|i| {
        h.nri
            .create_container(create_req(&format!("p{i}"), &format!("c{i}")))
    }))
    .await;
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    let of = |p: &GoPlugin| {
        spans(&p.calls())
            .into_iter()
            .filter(|s| s.event == "CreateContainer")
            .collect::<Vec<_>>()
    };
    let (together, alone) = (of(&together), of(&alone));
    assert_eq!((together.len(), alone.len()), (8, 8));
    assert_eq!(most_at_once(&alone.iter().collect::<Vec<_>>()), 1);
    assert!(
        most_at_once(&together.iter().collect::<Vec<_>>()) > 1,
        "the pods' creations did not overlap"
    );
}

/// A pre-installed plugin opts in through its runtime drop-in
/// (`concurrentRequests: true`); its neighbour without one does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_installed_plugin_opts_in_through_its_runtime_drop_in() {
    let h = Harness::start_with(|o| o.pod_concurrency(true), RuntimeState::default()).await;
    std::fs::create_dir_all(h.plugin_dir()).unwrap();
    std::fs::create_dir_all(h.config_dir()).unwrap();
    let mut logs = Vec::new();
    for (name, dropin) in [
        ("10-says", Some("concurrentRequests: true\n")),
        ("20-silent", None),
    ] {
        std::os::unix::fs::symlink(go_plugin(), h.plugin_dir().join(name)).unwrap();
        let log = h.dir.path().join(format!("{name}.jsonl"));
        let script = script(json!({"delay_ms": {"CreateContainer": 40}, "log": log}));
        std::fs::write(
            h.config_dir().join(format!("{name}.conf")),
            script.to_string(),
        )
        .unwrap();
        if let Some(text) = dropin {
            std::fs::write(h.config_dir().join(format!("{name}.runtime.yaml")), text).unwrap();
        }
        logs.push(log);
    }
    h.nri.start().await.unwrap();
    join_all((0..8).map(|i| {
        h.nri
            .create_container(create_req(&format!("p{i}"), &format!("c{i}")))
    }))
    .await;
    let most = |log| {
        let spans = spans(&read_log(log));
        let created: Vec<&Span> = spans
            .iter()
            .filter(|s| s.event == "CreateContainer")
            .collect();
        assert_eq!(created.len(), 8);
        most_at_once(&created)
    };
    assert!(most(&logs[0]) > 1, "the drop-in's word was not taken");
    assert_eq!(most(&logs[1]), 1);
    h.nri.stop().await;
}

/// Without pod concurrency nothing changes: every plugin has one request
/// in hand at a time, whatever it says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pod_concurrency_events_run_in_turn() {
    let h = harness(false, &["10-together"]).await;
    let p = GoPlugin::start(
        &h,
        "together",
        "10",
        script(json!({"delay_ms": {"CreateContainer": 10}})),
    );
    h.wait_plugins(1).await;
    join_all((0..6).map(|i| {
        h.nri
            .create_container(create_req(&format!("p{i}"), &format!("c{i}")))
    }))
    .await;
    let spans = spans(&p.calls());
    assert_eq!(most_at_once(&spans.iter().collect::<Vec<_>>()), 1);
}

/// The container events of one container, in the order a runtime sends
/// them.
const CONTAINER_LIFECYCLE: [&str; 4] = [
    "CreateContainer",
    "StartContainer",
    "StopContainer",
    "RemoveContainer",
];

async fn send(h: &Harness, event: &str, pod: &str, ctr: &str) {
    let res = match event {
        "RunPodSandbox" => h.nri.run_pod_sandbox(req!(RunPodSandboxRequest, pod)).await,
        "CreateContainer" => h.nri.create_container(create_req(pod, ctr)).await.map(drop),
        "StartContainer" => {
            h.nri
                .start_container(req!(StartContainerRequest, pod, ctr))
                .await
        }
        "StopContainer" => h
            .nri
            .stop_container(req!(StopContainerRequest, pod, ctr))
            .await
            .map(drop),
        "RemoveContainer" => {
            h.nri
                .remove_container(req!(RemoveContainerRequest, pod, ctr))
                .await
        }
        "StopPodSandbox" => {
            h.nri
                .stop_pod_sandbox(req!(StopPodSandboxRequest, pod))
                .await
        }
        _ => {
            h.nri
                .remove_pod_sandbox(req!(RemovePodSandboxRequest, pod))
                .await
        }
    };
    res.unwrap();
}

/// A pod's life as a runtime drives it: the pod started, then two
/// containers' lifecycles sent at the same time, each in its order, with
/// random pauses, then the pod stopped and removed.
async fn pod_life(h: &Harness, pod: String, pauses: Vec<u64>) {
    send(h, "RunPodSandbox", &pod, "").await;
    let container = |n: usize| {
        let (pod, pauses) = (pod.clone(), pauses.clone());
        async move {
            let ctr = format!("{pod}-c{n}");
            for (i, event) in CONTAINER_LIFECYCLE.iter().enumerate() {
                tokio::time::sleep(std::time::Duration::from_micros(pauses[n * 4 + i])).await;
                send(h, event, &pod, &ctr).await;
            }
        }
    };
    futures::join!(container(0), container(1));
    send(h, "StopPodSandbox", &pod, "").await;
    send(h, "RemovePodSandbox", &pod, "").await;
}

/// Three rounds of 300 pods (9,900 events), all pods at once, each with
/// two containers whose events are sent at the same time: no two events
/// of one pod are in the plugin's hands at once, each pod's and each
/// container's events reach it in their order, and different pods'
/// events do overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pods_events_keep_their_order_across_random_interleavings() {
    let h = harness(true, &["together"]).await;
    let p = GoPlugin::start(
        &h,
        "together",
        "10",
        script(
            json!({"events": "runpodsandbox,stoppodsandbox,removepodsandbox,createcontainer,startcontainer,stopcontainer,removecontainer"}),
        ),
    );
    h.wait_plugins(1).await;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % 400
    };
    for round in 0..3 {
        let lives: Vec<_> = (0..300)
            .map(|i| {
                let pauses = (0..8).map(|_| next()).collect();
                pod_life(&h, format!("r{round}p{i}"), pauses)
            })
            .collect();
        join_all(lives).await;
    }
    let calls = p.calls();
    let spans = spans(&calls);
    let mut by_pod: HashMap<&str, Vec<(&Span, &str)>> = HashMap::new();
    let logged = calls.iter().filter(|c| c["started_ns"].is_i64());
    for (s, c) in spans.iter().zip(logged).filter(|(s, _)| !s.pod.is_empty()) {
        by_pod
            .entry(&s.pod)
            .or_default()
            .push((s, c["container"].as_str().unwrap_or_default()));
    }
    assert_eq!(by_pod.len(), 900);
    for (pod, mut seen) in by_pod {
        seen.sort_by_key(|(s, _)| s.started);
        let names: Vec<_> = seen
            .iter()
            .map(|(s, c)| format!("{} {c}", s.event))
            .collect();
        assert_eq!(seen.len(), 11, "pod {pod}: {names:?}");
        let only: Vec<&Span> = seen.iter().map(|(s, _)| *s).collect();
        assert_eq!(most_at_once(&only), 1, "pod {pod}'s events overlapped");
        assert_eq!(seen[0].0.event, "RunPodSandbox", "pod {pod}");
        assert_eq!(seen[9].0.event, "StopPodSandbox", "pod {pod}");
        assert_eq!(seen[10].0.event, "RemovePodSandbox", "pod {pod}");
        for n in 0..2 {
            let ctr = format!("{pod}-c{n}");
            let events: Vec<&str> = seen
                .iter()
                .filter(|(_, c)| *c == ctr)
                .map(|(s, _)| s.event.as_str())
                .collect();
            assert_eq!(events, CONTAINER_LIFECYCLE, "container {ctr}");
        }
    }
    assert!(
        most_at_once(&spans.iter().collect::<Vec<_>>()) > 1,
        "no two pods' events overlapped"
    );
}

/// 40 creations, each adjusted by two plugins, give with pod concurrency
/// exactly the responses they give in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_merged_result_is_the_serial_one() {
    let replies = |k: &str| {
        json!({"replies": {"CreateContainer": {
            "adjust": {"annotations": {k: "set"}, "env": [{"key": k, "value": "1"}]},
        }}, "delay_ms": {"CreateContainer": 2}})
    };
    let mut responses = Vec::new();
    for concurrency in [false, true] {
        let h = harness(concurrency, &["a", "b"]).await;
        let _a = GoPlugin::start(&h, "a", "10", script(replies("a")));
        let _b = GoPlugin::start(&h, "b", "20", script(replies("b")));
        h.wait_plugins(2).await;
        let got = join_all((0..40).map(|i| {
            h.nri
                .create_container(create_req(&format!("p{i}"), &format!("c{i}")))
        }))
        .await;
        responses.push(
            got.into_iter()
                .map(|r| r.unwrap())
                .collect::<Vec<CreateContainerResponse>>(),
        );
        h.nri.stop().await;
    }
    assert_eq!(responses[0], responses[1]);
    assert!(responses[1].iter().all(|r| r.adjust.annotations.len() == 2));
}
