//! Registration, events in index order, adjustments reaching the runtime.

use nri_api::{self as api, ContainerAdjustment, EventMask};

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
        .run_pod_sandbox(req!(RunPodSandboxRequest, "p1"))
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
    // Not running: every event is wanted, so that it is refused with a reason.
    assert!(h.nri.wants_event(api::Event::START_CONTAINER));
    h.nri.start().await.unwrap();
    assert!(!h.nri.wants_event(api::Event::START_CONTAINER));
    let p = TestPlugin::default();
    h.connect_with(
        "picky",
        "10",
        Some(EventMask::of(&[api::Event::START_CONTAINER])),
        p.clone(),
    );
    h.wait_plugins(1).await;
    assert!(h.nri.wants_event(api::Event::START_CONTAINER));
    assert!(!h.nri.wants_event(api::Event::CREATE_CONTAINER));
    assert!(h.nri.wants_event(api::Event::UNKNOWN));
    let ctr = req!(StartContainerRequest, "p", "c");
    h.nri.create_container(create_req("p", "c")).await.unwrap();
    h.nri.start_container(ctr).await.unwrap();
    assert_eq!(p.events(), ["StartContainer c"]);
    h.nri.stop().await;
    assert!(h.nri.wants_event(api::Event::START_CONTAINER));
}

fn annotating(key: &'static str, value: &'static str, remove_first: bool) -> TestPlugin {
    TestPlugin::adjusting(move |_| {
        let mut a = ContainerAdjustment::default();
        if remove_first {
            a.remove_annotation(key);
        }
        a.add_annotation(key, value);
        Ok((a, vec![]))
    })
}

#[tokio::test]
async fn conflicting_plugins_fail_creation_with_upstreams_message() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    h.connect("a", "10", annotating("team", "a", false));
    h.connect("b", "20", annotating("team", "b", false));
    h.wait_plugins(2).await;
    let err = h
        .nri
        .create_container(create_req("p", "c"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugins \"20-b\" and \"10-a\" both tried to set Annotations team"
    );
}

#[tokio::test]
async fn remove_then_set_overrides_an_earlier_plugin() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    h.connect("a", "10", annotating("team", "a", false));
    h.connect("b", "20", annotating("team", "b", true));
    h.wait_plugins(2).await;
    let rsp = h.nri.create_container(create_req("p", "c")).await.unwrap();
    assert_eq!(annotation(&rsp, "team"), Some("b"));
}

#[tokio::test]
async fn sixteen_plugins_at_once_and_plugins_leaving_while_events_flow() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let mut handles = Vec::new();
    for i in 0..16 {
        let key: &'static str = Box::leak(format!("p{i}").into_boxed_str());
        handles.push(h.connect(
            key,
            &format!("{:02}", 10 + i),
            annotating(key, "set", false),
        ));
    }
    h.wait_plugins(16).await;
    let rsp = h.nri.create_container(create_req("p", "c0")).await.unwrap();
    assert_eq!(
        rsp.adjust.annotations.len(),
        16,
        "every plugin's adjustment merged"
    );

    // Half of them leave while containers keep being created.
    for (i, handle) in handles.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        handle.stop();
        let rsp = h
            .nri
            .create_container(create_req("p", &format!("c{}", i + 1)))
            .await
            .unwrap();
        assert!(!rsp.adjust.annotations.is_empty());
    }
    h.wait_plugins(8).await;
    let rsp = h
        .nri
        .create_container(create_req("p", "last"))
        .await
        .unwrap();
    assert_eq!(rsp.adjust.annotations.len(), 8);
}

/// `stop` waits for the event in progress and refuses later ones, so a
/// container is never created past a stop without its validators (found by
/// the C tests: a create racing a stop used to run with no plugins left).
#[tokio::test]
async fn a_racing_stop_never_lets_an_unvalidated_container_through() {
    // A required plugin that never comes: the validator rejects everything.
    let cfg = nri_validator::DefaultValidatorConfig {
        enable: true,
        required_plugins: vec!["never-there".into()],
        ..Default::default()
    };
    for round in 0..20 {
        let h = Harness::start_with(
            |o| {
                o.default_validator(cfg.clone())
                    .disable_external_connections()
            },
            RuntimeState::default(),
        )
        .await;
        h.nri.start().await.unwrap();
        let creates: Vec<_> = (0..40)
            .map(|i| {
                let nri = std::sync::Arc::clone(&h.nri);
                tokio::spawn(async move {
                    nri.create_container(create_req("pod0", &format!("c{i}")))
                        .await
                })
            })
            .collect();
        tokio::task::yield_now().await;
        h.nri.stop().await;
        for c in creates {
            let res = c.await.unwrap();
            assert!(
                res.is_err(),
                "round {round}: a container was created unvalidated"
            );
        }
    }
}
