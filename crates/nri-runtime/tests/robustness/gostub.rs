//! Upstream Go-stub plugins meeting ttrpc's 4 MiB limit or going away
//! while idle: no plugin may be dropped for what it did not do, and no
//! container may fail for a plugin that is already gone.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;
use crate::goprocess::GoPlugin;
use crate::peers::eventually;
use crate::serial;

const MIB: usize = 1 << 20;

/// A container carrying `own` bytes of annotations of its own.
fn carrying(ctr: &str, own: usize) -> nri_api::CreateContainerRequest {
    let mut req = create_req("pod", ctr);
    if own > 0 {
        req.container
            .as_mut()
            .unwrap()
            .annotations
            .insert("own".into(), "o".repeat(own));
    }
    req
}

/// A plugin before others grows the request past 4 MiB. ttrpc refuses to
/// send it; that is not the receiver's fault: the one request fails with Go
/// ttrpc's ResourceExhausted, as upstream's does, every plugin stays, and
/// the next container that fits is seen by all of them.
///
/// 00-grow adds 2.5 MiB, 50-next 1 MiB, 90-check validates.
/// - 2 MiB of its own: the request to 50-next would be 4.5 MiB;
/// - 1 MiB of its own: 50-next gets 3.5 MiB, the validation would be 4.5;
/// - nothing of its own: everything fits.
#[test]
fn a_request_grown_past_the_limit_fails_that_request_and_keeps_the_receiver() {
    serial(async {
        let h = Harness::start().await;
        h.nri.start().await.unwrap();
        let adding = |key: &str, size: usize| {
            json!({
                "events": "CreateContainer",
                "replies": {"CreateContainer": {"adjust": {"annotations": {key: "x".repeat(size)}}}},
            })
        };
        let _grow = GoPlugin::start(&h, "grow", "00", adding("grown", 5 * MIB / 2));
        let next = GoPlugin::start(&h, "next", "50", adding("next", MIB));
        let check = GoPlugin::start(
            &h,
            "check",
            "90",
            json!({"events": "ValidateContainerAdjustment"}),
        );
        h.wait_plugins(3).await;
        let all = ["00-grow", "50-next", "90-check"];

        let started = Instant::now();
        let err = creation_error(&h, carrying("too-big-for-next", 2 * MIB)).await;
        eprintln!(
            "FIGURE grown request to 50-next: failed in {:?}: {err}",
            started.elapsed()
        );
        assert!(
            err.starts_with("rpc error: code = ResourceExhausted desc = message length ")
                && err.ends_with(" exceed maximum message size of 4194304"),
            "{err}"
        );
        assert_eq!(h.nri.plugins(), all, "nobody dropped");
        assert!(!next.saw("CreateContainer", "too-big-for-next"));

        let started = Instant::now();
        let err = creation_error(&h, carrying("too-big-to-validate", MIB)).await;
        eprintln!(
            "FIGURE grown validation request: failed in {:?}: {err}",
            started.elapsed()
        );
        assert!(
            err.starts_with(
                "validator plugin 90-check failed: rpc error: code = ResourceExhausted \
                 desc = message length "
            ),
            "{err}"
        );
        assert_eq!(h.nri.plugins(), all, "nobody dropped");
        assert!(next.saw("CreateContainer", "too-big-to-validate"));

        let rsp = h
            .nri
            .create_container(carrying("fits", 0))
            .await
            .expect("a container that fits is created");
        assert_eq!(annotation(&rsp, "grown").map(str::len), Some(5 * MIB / 2));
        assert_eq!(annotation(&rsp, "next").map(str::len), Some(MIB));
        assert!(next.saw("CreateContainer", "fits"));
        assert!(check.saw("ValidateContainerAdjustment", "fits"));
        assert!(!check.saw("ValidateContainerAdjustment", "too-big-to-validate"));
        assert_eq!(h.nri.plugins(), all);
    })
}

/// Raises one lifecycle event (a name from [`LIFECYCLE`]) for pod `pod` and
/// its container `ctr`.
async fn raise(h: &Harness, event: &str, p: &str, c: &str) -> Result<(), nri_runtime::Error> {
    let nri = &h.nri;
    match event {
        "RunPodSandbox" => nri.run_pod_sandbox(req!(RunPodSandboxRequest, p)).await,
        "UpdatePodSandbox" => nri
            .update_pod_sandbox(req!(UpdatePodSandboxRequest, p))
            .await
            .map(drop),
        "PostUpdatePodSandbox" => {
            nri.post_update_pod_sandbox(req!(PostUpdatePodSandboxRequest, p))
                .await
        }
        "CreateContainer" => {
            let rsp = nri.create_container(create_req(p, c)).await?;
            assert_eq!(annotation(&rsp, "good"), Some("yes"));
            Ok(())
        }
        "PostCreateContainer" => {
            nri.post_create_container(req!(PostCreateContainerRequest, p, c))
                .await
        }
        "StartContainer" => nri.start_container(req!(StartContainerRequest, p, c)).await,
        "PostStartContainer" => {
            nri.post_start_container(req!(PostStartContainerRequest, p, c))
                .await
        }
        "UpdateContainer" => nri
            .update_container(req!(UpdateContainerRequest, p, c))
            .await
            .map(drop),
        "PostUpdateContainer" => {
            nri.post_update_container(req!(PostUpdateContainerRequest, p, c))
                .await
        }
        "StopContainer" => nri
            .stop_container(req!(StopContainerRequest, p, c))
            .await
            .map(drop),
        "RemoveContainer" => {
            nri.remove_container(req!(RemoveContainerRequest, p, c))
                .await
        }
        "StopPodSandbox" => nri.stop_pod_sandbox(req!(StopPodSandboxRequest, p)).await,
        "RemovePodSandbox" => {
            nri.remove_pod_sandbox(req!(RemovePodSandboxRequest, p))
                .await
        }
        other => panic!("not a lifecycle event: {other}"),
    }
}

/// A plugin subscribed to everything, validation included, disconnects
/// while idle, before each of the 13 events in turn. Every event skips it
/// (upstream v0.12.5 checks for closed plugins in all its event loops and
/// in validation) and a plugin that stays still sees it; none fails.
#[test]
fn a_plugin_gone_while_idle_is_skipped_by_every_event_and_by_validation() {
    serial(async {
        let h = Harness::start().await;
        h.nri.start().await.unwrap();
        let stays = GoPlugin::start(
            &h,
            "good",
            "50",
            json!({
                "events": "all",
                "replies": {"CreateContainer": {"adjust": {"annotations": {"good": "yes"}}}},
            }),
        );
        h.wait_plugins(1).await;
        let count = |event: &str| stays.calls().iter().filter(|c| c["event"] == event).count();

        for (i, event) in LIFECYCLE.iter().enumerate() {
            let gone = GoPlugin::start(&h, "gone", "10", json!({"events": "all"}));
            h.wait_plugins(2).await;
            gone.kill();
            eventually(Duration::from_secs(2), "the disconnect to be seen", || {
                h.nri.plugins() == ["50-good"]
            })
            .await;
            let seen = count(event);
            let started = Instant::now();
            let res = raise(&h, event, "pod", &format!("c{i}")).await;
            eprintln!(
                "FIGURE {event} with a plugin gone while idle: {:?} in {:?}",
                res.as_ref().map_err(ToString::to_string),
                started.elapsed()
            );
            if let Err(e) = res {
                panic!("{event} failed for a plugin that is gone: {e}");
            }
            assert_eq!(count(event), seen + 1, "the plugin that stays saw {event}");
            if *event == "CreateContainer" {
                assert_eq!(count("ValidateContainerAdjustment"), 1, "and validated it");
            }
            // The event pruned the gone plugin.
            h.wait_plugins(1).await;
        }
    })
}
