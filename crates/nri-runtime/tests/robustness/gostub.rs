//! Upstream Go-stub plugins meeting ttrpc's 4 MiB limit or going away
//! while idle: no plugin may be dropped for what it did not do, and no
//! container may fail for a plugin that is already gone.

use std::time::Instant;

use serde_json::json;

use crate::common::*;
use crate::goplugin::GoPlugin;
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
