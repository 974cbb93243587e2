//! Registration, events in index order, adjustments reaching the runtime.

use nri::api::{self, ContainerAdjustment, EventMask};

use crate::common::*;

#[tokio::test]
async fn external_plugins_register_get_events_in_index_order_and_adjust() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let late = TestPlugin::adjusting(|_| {
        let mut a = ContainerAdjustment::default();
        a.add_env("FROM", "late");
        Ok((a, vec![]))
    });
    let early = TestPlugin::adjusting(|_| {
        let mut a = ContainerAdjustment::default();
        a.add_annotation("from", "early");
        Ok((a, vec![]))
    });
    h.connect("late", "90", late.clone());
    h.wait_plugins(1).await;
    h.connect("early", "10", early.clone());
    h.wait_plugins(2).await;
    assert_eq!(h.nri.plugins(), ["10-early", "90-late"]);

    h.nri
        .run_pod_sandbox(api::RunPodSandboxRequest {
            pod: protobuf::MessageField::some(pod("p1")),
            ..Default::default()
        })
        .await
        .unwrap();
    let rsp = h
        .nri
        .create_container(create_req("p1", "c1"))
        .await
        .unwrap();
    let adjust = rsp.adjust.unwrap();
    assert_eq!(
        adjust.annotations.get("from").map(String::as_str),
        Some("early")
    );
    assert!(adjust
        .env
        .iter()
        .any(|e| e.key == "FROM" && e.value == "late"));

    assert_eq!(early.events(), ["RunPodSandbox p1", "CreateContainer c1"]);
    assert_eq!(late.events(), ["RunPodSandbox p1", "CreateContainer c1"]);
    let invoked: Vec<_> = h
        .metrics
        .invocations
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, op, _)| op == "CreateContainer")
        .map(|(p, _, _)| p.clone())
        .collect();
    assert_eq!(invoked, ["10-early", "90-late"], "index order");
}

#[tokio::test]
async fn subscription_masks_filter_events() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let p = TestPlugin::default();
    h.connect_with(
        "picky",
        "10",
        Some(EventMask::of(&[api::Event::START_CONTAINER])),
        p.clone(),
    );
    h.wait_plugins(1).await;
    let ctr = api::StartContainerRequest {
        pod: protobuf::MessageField::some(pod("p")),
        container: protobuf::MessageField::some(container("p", "c")),
        ..Default::default()
    };
    h.nri.create_container(create_req("p", "c")).await.unwrap();
    h.nri.start_container(ctr).await.unwrap();
    assert_eq!(p.events(), ["StartContainer c"]);
}
