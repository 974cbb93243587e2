//! A plugin's failure policy (upstream v0.12.4): what the runtime does when
//! the plugin fails to answer. By default it is dropped and the request
//! goes on without it; `fail_request` fails the request instead, and
//! `keep_connected` keeps it after a timeout.

use std::time::Duration;

use nri_runtime::Error;
use nri_stub::{Stub, StubHandle};

use crate::common::*;
use crate::peers::eventually;
use crate::serial;

const REQUEST_TIMEOUT: Duration = Duration::from_millis(300);

/// A plugin whose CreateContainer takes longer than the request timeout.
fn slow_plugin() -> TestPlugin {
    let mut p = TestPlugin::adjusting(|_| Ok((Default::default(), vec![])));
    p.delay = Some(REQUEST_TIMEOUT * 2);
    p
}

fn connect(h: &Harness, name: &str, fail_request: bool, keep_connected: bool) -> StubHandle {
    let stub = Stub::builder()
        .name(name)
        .idx("10")
        .socket_path(&h.socket)
        .failure_policy(fail_request, keep_connected)
        .build(slow_plugin())
        .unwrap();
    let handle = stub.handle();
    tokio::spawn(async move {
        let _ = stub.run().await;
    });
    handle
}

async fn started() -> Harness {
    let h = Harness::start_with(
        |o| o.request_timeout(REQUEST_TIMEOUT),
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    h
}

#[test]
fn keep_connected_keeps_a_plugin_that_timed_out_and_the_request_goes_on() {
    serial(async {
        let h = started().await;
        let p = connect(&h, "kept", false, true);
        h.wait_plugins(1).await;
        for ctr in ["c1", "c2"] {
            h.nri
                .create_container(create_req("pod", ctr))
                .await
                .expect("the request goes on without the plugin");
            assert_eq!(h.nri.plugins(), ["10-kept"], "kept after its timeout");
        }
        p.stop();
    })
}

#[test]
fn fail_request_fails_the_request_naming_the_plugin() {
    serial(async {
        let h = started().await;
        let p = connect(&h, "strict", true, true);
        h.wait_plugins(1).await;
        for ctr in ["c1", "c2"] {
            let err = h
                .nri
                .create_container(create_req("pod", ctr))
                .await
                .expect_err("the policy fails the request");
            assert!(matches!(err, Error::RequestFailed { .. }), "{err:?}");
            assert!(
                err.to_string()
                    .starts_with("plugin 10-strict failed to handle CreateContainer request: "),
                "{err}"
            );
            assert_eq!(h.nri.plugins(), ["10-strict"]);
        }
        p.stop();
    })
}

#[test]
fn fail_request_without_keep_connected_fails_once_then_the_plugin_is_gone() {
    serial(async {
        let h = started().await;
        let p = connect(&h, "strict", true, false);
        h.wait_plugins(1).await;
        let err = h
            .nri
            .create_container(create_req("pod", "c1"))
            .await
            .expect_err("the policy fails the request");
        assert!(matches!(err, Error::RequestFailed { .. }), "{err:?}");
        assert!(h.nri.plugins().is_empty(), "dropped: {:?}", h.nri.plugins());
        h.nri
            .create_container(create_req("pod", "c2"))
            .await
            .expect("no plugin left to fail it");
        p.stop();
    })
}

#[test]
fn keep_connected_does_not_keep_a_plugin_whose_connection_is_gone() {
    serial(async {
        let h = started().await;
        let p = connect(&h, "kept", true, true);
        h.wait_plugins(1).await;
        p.stop();
        eventually(PATIENCE, "the plugin to disconnect", || {
            logged("disconnected").iter().any(|l| l.contains("10-kept"))
        })
        .await;
        h.nri
            .create_container(create_req("pod", "c1"))
            .await
            .expect("a plugin already gone fails nothing");
        assert!(h.nri.plugins().is_empty());
    })
}

/// The same, declared by a real upstream Go-stub plugin
/// (`stub.WithFailurePolicy`, NRI v0.12.5).
#[test]
fn a_go_stub_plugins_failure_policy_is_honoured() {
    serial(async {
        let h = started().await;
        let go = crate::goprocess::GoPlugin::start(
            &h,
            "gostrict",
            "10",
            serde_json::json!({
                "events": "createcontainer",
                "delay_ms": {"CreateContainer": REQUEST_TIMEOUT.as_millis() as u64 * 2},
                "failure_policy": {"fail_request": true, "keep_connected": true},
            }),
        );
        h.wait_plugins(1).await;
        for ctr in ["c1", "c2"] {
            let err = h
                .nri
                .create_container(create_req("pod", ctr))
                .await
                .expect_err("the Go plugin's policy fails the request");
            assert_eq!(
                err.to_string(),
                "plugin 10-gostrict failed to handle CreateContainer request: context deadline exceeded"
            );
            assert_eq!(h.nri.plugins(), ["10-gostrict"], "kept after its timeout");
        }
        drop(go);
    })
}
