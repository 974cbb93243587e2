//! Plugins built on upstream's Go `pkg/stub` (v0.12.5, go/tests/cmd/nri-test-plugin)
//! against the Rust core: as external processes and launched from the
//! plugin directory.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;
use crate::goprocess::{go_plugin, read_log, GoPlugin};
use crate::peers::good_plugin;

pub fn events_of(calls: &[Value]) -> Vec<String> {
    calls
        .iter()
        .map(|c| c["event"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn go_plugin_sees_the_whole_lifecycle_and_adjusts() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let go = GoPlugin::start(
        &h,
        "go",
        "20",
        json!({
            "events": "all",
            "replies": {"CreateContainer": {"adjust": {"annotations": {"go": "was-here"}}}},
        }),
    );
    h.wait_plugins(1).await;

    let rsp = lifecycle(&h, "p", "c").await.unwrap();
    assert_eq!(annotation(&rsp, "go"), Some("was-here"));

    let mut expected = vec!["Configure", "Synchronize"];
    for rpc in LIFECYCLE {
        expected.push(rpc);
        if rpc == "CreateContainer" {
            expected.push("ValidateContainerAdjustment");
        }
    }
    let calls = go.calls();
    assert_eq!(events_of(&calls), expected);
    let configure = &calls[0];
    assert_eq!(configure["config"], "");
}

#[tokio::test]
async fn pre_installed_go_plugin_is_launched_configured_and_synchronized() {
    let h = Harness::start_with(
        |o| o,
        RuntimeState {
            pods: vec![pod("p1"), pod("p2")],
            containers: vec![container("p1", "c1")],
            ..Default::default()
        },
    )
    .await;
    std::fs::create_dir_all(h.plugin_dir()).unwrap();
    std::fs::create_dir_all(h.config_dir()).unwrap();
    std::os::unix::fs::symlink(go_plugin(), h.plugin_dir().join("30-go")).unwrap();
    let log = h.dir.path().join("launched.jsonl");
    let script = json!({"events": "runpodsandbox", "log": log});
    std::fs::write(h.config_dir().join("30-go.conf"), script.to_string()).unwrap();

    h.nri.start().await.unwrap();
    assert_eq!(h.nri.plugins(), ["30-go"], "synchronized inside start()");
    assert_eq!(h.state.lock().unwrap().syncs, 1);
    h.nri
        .run_pod_sandbox(req!(RunPodSandboxRequest, "p3"))
        .await
        .unwrap();
    let calls = read_log(&log);
    assert_eq!(
        events_of(&calls),
        ["Configure", "Synchronize", "RunPodSandbox"]
    );
    assert_eq!(calls[0]["config"], script.to_string(), "the drop-in config");
    assert_eq!(calls[1]["pods"], 2);
    assert_eq!(calls[1]["containers"], 1);
    assert_eq!(calls[2]["pod"], "p3");
    // Logs name the plugin's own process, not the runtime that made its
    // socketpair (what the socket's peer credentials would say).
    let started = logged("pre-connected:30-go[");
    let pid: u32 = started
        .iter()
        .find_map(|l| l.split("30-go[").nth(1)?.split(']').next()?.parse().ok())
        .expect("a log line with the plugin's pid");
    assert_ne!(pid, std::process::id());
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("30-go"),
        "pid {pid} is not the plugin"
    );
    h.nri.stop().await;
}

#[tokio::test]
async fn over_4_mib_of_state_is_synchronized_in_chunks() {
    let containers: Vec<_> = (0..1500)
        .map(|i| {
            let mut c = container("p", &format!("c{i}"));
            c.annotations.insert("blob".into(), "x".repeat(4096));
            c
        })
        .collect();
    // Debug builds encode 6 MiB slowly; the point here is the chunking.
    let h = Harness::start_with(
        |o| o.request_timeout(Duration::from_secs(15)),
        RuntimeState {
            pods: vec![pod("p")],
            containers,
            ..Default::default()
        },
    )
    .await;
    h.nri.start().await.unwrap();
    let go = GoPlugin::start(&h, "sync", "10", json!({"events": "runpodsandbox"}));
    h.wait_plugins(1).await;
    let syncs: Vec<_> = go
        .calls()
        .into_iter()
        .filter(|c| c["event"] == "Synchronize")
        .collect();
    assert!(syncs.len() >= 2, "split into {} messages", syncs.len());
    let total: u64 = syncs
        .iter()
        .map(|c| c["containers"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 1500);
    assert!(syncs[..syncs.len() - 1].iter().all(|c| c["more"] == true));
    assert_eq!(syncs.last().unwrap()["more"], false);
}

#[tokio::test]
async fn a_slow_go_plugin_is_dropped_after_the_request_timeout_and_the_event_completes() {
    let h = Harness::start_with(
        |o| o.request_timeout(Duration::from_millis(500)),
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    let _slow = GoPlugin::start(
        &h,
        "slow",
        "10",
        json!({"events": "createcontainer", "delay_ms": {"CreateContainer": 3000}}),
    );
    h.wait_plugins(1).await;
    h.connect("good", "50", good_plugin());
    h.wait_plugins(2).await;
    let rsp = h.nri.create_container(create_req("p", "c")).await.unwrap();
    assert_eq!(annotation(&rsp, "good"), Some("yes"));
    assert_eq!(h.nri.plugins(), ["50-good"]);
}

#[tokio::test]
async fn a_go_plugin_crashing_mid_request_is_dropped_and_the_event_completes() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let mut crash = GoPlugin::start(
        &h,
        "crash",
        "10",
        json!({"events": "createcontainer,startcontainer", "exit_on": "CreateContainer"}),
    );
    h.wait_plugins(1).await;
    h.nri.create_container(create_req("p", "c")).await.unwrap();
    assert!(h.nri.plugins().is_empty());
    assert_eq!(crash.wait().code(), Some(3), "it crashed as scripted");
}

#[tokio::test]
async fn go_plugin_errors_fail_the_event_unwrapped() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let _p = GoPlugin::start(
        &h,
        "failing",
        "10",
        json!({"events": "startcontainer", "fail": {"StartContainer": "no way"}}),
    );
    h.wait_plugins(1).await;
    let err = h
        .nri
        .start_container(req!(StartContainerRequest, "p", "c"))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "rpc error: code = Unknown desc = no way");
    assert_eq!(
        h.nri.plugins(),
        ["10-failing"],
        "an ordinary error keeps the plugin"
    );
}

#[tokio::test]
async fn a_go_validator_rejection_fails_creation() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let _v = GoPlugin::start(
        &h,
        "validator",
        "90",
        json!({"events": "validatecontaineradjustment", "validate": {"reject": true, "reason": "not today"}}),
    );
    h.wait_plugins(1).await;
    let err = h
        .nri
        .create_container(create_req("p", "c"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "validator \"90-validator\" rejected container adjustment, reason: not today"
    );
}

#[tokio::test]
async fn go_plugin_unsolicited_updates_reach_the_runtime() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let result = h.dir.path().join("unsolicited.json");
    let _p = GoPlugin::start(
        &h,
        "updater",
        "10",
        json!({"events": "runpodsandbox", "unsolicited": {"after_ms": 0, "update": [{"container_id": "c9", "linux": {"resources": {"cpu": {"shares": {"value": 123}}}}}], "result_log": result}}),
    );
    h.wait_plugins(1).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !result.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no unsolicited update"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let outcome: Value = serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    assert_eq!(
        outcome["error"].as_str().unwrap_or(""),
        "",
        "the plugin's UpdateContainers failed"
    );
    let got = h.state.lock().unwrap().unsolicited.clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].container_id, "c9");
    assert_eq!(got[0].linux.resources.cpu.shares.value, 123);
}

/// Upstream wedges when a plugin stops reading its socket: writes have no
/// deadline and are made under its locks. Here the frozen plugin costs one
/// request timeout and is dropped; the good plugin's adjustment still lands.
#[tokio::test]
async fn a_plugin_that_stops_reading_costs_one_timeout() {
    let h = Harness::start_with(
        |o| o.request_timeout(Duration::from_secs(1)),
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    let frozen = GoPlugin::start(&h, "frozen", "10", json!({"events": "createcontainer"}));
    h.wait_plugins(1).await;
    h.connect("good", "50", good_plugin());
    h.wait_plugins(2).await;
    // SAFETY: plain kill(2) on our own child.
    let stopped = unsafe { libc::kill(frozen.pid() as i32, libc::SIGSTOP) };
    assert_eq!(stopped, 0);

    // 2 MiB of request: far more than the socket buffers hold.
    let mut req = create_req("p", "big");
    for i in 0..512 {
        req.container
            .mut_or_insert_default()
            .annotations
            .insert(format!("k{i}"), "v".repeat(4096));
    }
    let started = std::time::Instant::now();
    let rsp = h.nri.create_container(req).await.unwrap();
    assert_eq!(annotation(&rsp, "good"), Some("yes"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(h.nri.plugins(), ["50-good"]);
    let rsp = h
        .nri
        .create_container(create_req("p", "next"))
        .await
        .unwrap();
    assert_eq!(annotation(&rsp, "good"), Some("yes"));
}

/// The largest reply a Go plugin sends: ttrpc's 4 MiB, which Go writes as a
/// 4096-byte frame and one frame of nearly 4 MiB. It arrives whole.
#[tokio::test]
async fn a_go_plugin_reply_of_almost_4_mib_arrives_whole() {
    let h = Harness::start_with(
        |o| o.request_timeout(Duration::from_secs(10)),
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    let value = "x".repeat((4 << 20) - 1024);
    let _big = GoPlugin::start(
        &h,
        "big",
        "10",
        json!({"events": "createcontainer",
               "replies": {"CreateContainer": {"adjust": {"annotations": {"big": value}}}}}),
    );
    h.wait_plugins(1).await;
    let rsp = h.nri.create_container(create_req("p", "c")).await.unwrap();
    assert_eq!(rsp.adjust.annotations.get("big"), Some(&value));
    assert_eq!(h.nri.plugins(), ["10-big"]);
}

/// A Go plugin cannot send a reply over ttrpc's 4 MiB limit: its ttrpc
/// server refuses to write it, puts nothing on the wire and closes its end of
/// the connection, so the plugin never answers again. The runtime drops it
/// after one request timeout, as upstream does; the event completes.
#[tokio::test]
async fn a_go_plugin_whose_reply_exceeds_4_mib_falls_silent_and_costs_one_timeout() {
    let h = Harness::start_with(
        |o| o.request_timeout(Duration::from_secs(1)),
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    let big = GoPlugin::start(
        &h,
        "big",
        "10",
        json!({"events": "createcontainer",
               "replies": {"CreateContainer": {"adjust": {"annotations": {"big": "x".repeat(5 << 20)}}}}}),
    );
    h.wait_plugins(1).await;
    h.connect("good", "50", good_plugin());
    h.wait_plugins(2).await;
    let started = std::time::Instant::now();
    let rsp = h.nri.create_container(create_req("p", "c")).await.unwrap();
    let took = started.elapsed();
    assert_eq!(annotation(&rsp, "good"), Some("yes"));
    assert!(!rsp.adjust.annotations.contains_key("big"));
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(3),
        "took {took:?}"
    );
    assert_eq!(h.nri.plugins(), ["50-good"]);
    let stderr = std::fs::read_to_string(&big.stderr).unwrap();
    assert!(
        stderr.contains("failed sending message on channel")
            && stderr.contains("exceed maximum message size of 4194304"),
        "the Go side refused to send: {stderr}"
    );
}
