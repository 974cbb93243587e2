//! Slow plugins that each answer within the request timeout: an event is
//! as long as all of them (upstream's behaviour, the default), unless the
//! runtime sets a budget for whole events.

use std::time::{Duration, Instant};

use nri_runtime::Error;

use crate::common::*;
use crate::serial;

const EACH: Duration = Duration::from_millis(400);
const BUDGET: Duration = Duration::from_secs(1);

async fn four_slow_plugins(h: &Harness) -> Vec<nri_stub::StubHandle> {
    h.nri.start().await.unwrap();
    let slow: Vec<_> = ["10", "20", "30", "40"]
        .iter()
        .map(|idx| {
            let key = format!("slow{idx}");
            let mut p = TestPlugin::adjusting(move |_| {
                let mut a = nri_api::ContainerAdjustment::default();
                a.add_annotation(&key, "yes");
                Ok((a, vec![]))
            });
            p.delay = Some(EACH);
            h.connect(&format!("slow{idx}"), idx, p)
        })
        .collect();
    h.wait_plugins(4).await;
    slow
}

#[test]
fn without_a_budget_an_event_takes_as_long_as_its_plugins() {
    serial(async {
        let h = Harness::start().await;
        let slow = four_slow_plugins(&h).await;
        let started = Instant::now();
        h.nri
            .create_container(create_req("pod", "c1"))
            .await
            .expect("every plugin answered within its timeout");
        let took = started.elapsed();
        eprintln!("FIGURE 4 plugins answering in {EACH:?}, no event budget: CreateContainer took {took:?}");
        assert!(took >= 4 * EACH, "{took:?}");
        slow.iter().for_each(|p| p.stop());
    })
}

#[test]
fn an_event_budget_bounds_the_event_and_drops_no_plugin() {
    serial(async {
        let h = Harness::start_with(|o| o.event_timeout(BUDGET), RuntimeState::default()).await;
        let slow = four_slow_plugins(&h).await;
        for ctr in ["c1", "c2"] {
            let started = Instant::now();
            let err = h
                .nri
                .create_container(create_req("pod", ctr))
                .await
                .expect_err("the budget ran out");
            let took = started.elapsed();
            eprintln!("FIGURE 4 plugins answering in {EACH:?}, budget {BUDGET:?}: {ctr} failed in {took:?}: {err}");
            assert!(matches!(err, Error::EventTimeout { .. }), "{err:?}");
            assert_eq!(
                err.to_string(),
                "CreateContainer exceeded the NRI event time budget of 1s"
            );
            assert!(took >= BUDGET && took < BUDGET + EACH / 2, "{took:?}");
            assert_eq!(
                h.nri.plugins().len(),
                4,
                "a plugin was dropped for the budget"
            );
        }
        // Events that fit the budget go through.
        h.nri
            .run_pod_sandbox(nri_api::RunPodSandboxRequest {
                pod: protobuf::MessageField::some(pod("pod")),
                ..Default::default()
            })
            .await
            .unwrap();
        slow.iter().for_each(|p| p.stop());
    })
}

/// A runtime gives up on an event (upstream: its context ends) by dropping
/// the call: the event stops there, later plugins never see it, and the
/// plugin it was waiting for is not blamed.
#[test]
fn dropping_an_event_cancels_it_and_blames_no_plugin() {
    serial(async {
        let h = Harness::start().await;
        h.nri.start().await.unwrap();
        let mut slow = TestPlugin::adjusting(|_| Ok((Default::default(), vec![])));
        slow.delay = Some(EACH);
        let slow = h.connect("slow", "10", slow);
        let later = TestPlugin::adjusting(|_| Ok((Default::default(), vec![])));
        let seen = std::sync::Arc::clone(&later.log);
        let later = h.connect("later", "20", later);
        h.wait_plugins(2).await;

        let gave_up = tokio::time::timeout(
            EACH / 4,
            h.nri.create_container(create_req("pod", "abandoned")),
        )
        .await;
        assert!(
            gave_up.is_err(),
            "the event finished before the runtime gave up"
        );
        // Had the event gone on, the later plugin would see it by now.
        tokio::time::sleep(EACH + EACH / 2).await;
        let log = seen.lock().unwrap().clone();
        assert!(
            !log.iter().any(|l| l.contains("abandoned")),
            "the cancelled event went on: {log:?}"
        );
        assert_eq!(h.nri.plugins(), ["10-slow", "20-later"]);
        h.nri
            .create_container(create_req("pod", "next"))
            .await
            .expect("the next event reaches both");
        assert!(seen.lock().unwrap().iter().any(|l| l.contains("next")));
        slow.stop();
        later.stop();
    })
}
