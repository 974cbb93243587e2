//! Plugins that never finish synchronizing must not hold the runtime up.

use std::time::{Duration, Instant};

use nri_api::{self as api, ContainerUpdate, EventMask};
use nri_stub::{ConfigureInfo, HandlerResult, Plugin};

use crate::common::*;
use crate::peers::*;
use crate::serial;

/// Registers, then never answers Synchronize.
struct NeverSyncs;

#[nri_stub::plugin]
impl Plugin for NeverSyncs {
    async fn configure(&self, _info: &ConfigureInfo) -> HandlerResult<EventMask> {
        Ok(EventMask::EMPTY)
    }

    async fn synchronize(
        &self,
        _pods: Vec<api::PodSandbox>,
        _containers: Vec<api::Container>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        std::future::pending().await
    }

    async fn run_pod_sandbox(&self, _pod: &api::PodSandbox) -> HandlerResult<()> {
        Ok(())
    }
}

const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);
/// Each hung sync's deadline, set: the default would be the registration
/// timeout, and the test four times as long.
const SYNC_TIMEOUT: Duration = REQUEST_TIMEOUT;
const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(2);

/// With every waiting sync queued on the (fair) sync lock itself, a runtime
/// that holds `BlockPluginSync` around each CreateContainer, as containerd
/// does, had one call held for 20 sync timeouts (~10 s) by 20 such
/// plugins; upstream, accepting one connection at a time, held none longer
/// than one. Now no call waits longer than one sync.
#[test]
fn plugins_that_never_synchronize_hold_no_runtime_call_longer_than_one_sync() {
    serial(async {
        let h = Harness::start_with(
            |o| {
                o.request_timeout(REQUEST_TIMEOUT)
                    .registration_timeout(REGISTRATION_TIMEOUT)
                    .sync_timeout(SYNC_TIMEOUT)
                    .unwrap()
            },
            RuntimeState::default(),
        )
        .await;
        h.nri.start().await.unwrap();
        let good = h.connect("good", "50", good_plugin());
        h.wait_plugins(1).await;

        let hung: Vec<_> = (0..20)
            .map(|i| h.connect(&format!("hung{i}"), "10", NeverSyncs))
            .collect();
        eventually(PATIENCE, "20 hung plugins to register", || {
            logged("registering")
                .iter()
                .filter(|l| l.contains("-hung"))
                .count()
                >= 20
        })
        .await;

        let started = Instant::now();
        let mut longest = Duration::ZERO;
        let mut calls = 0;
        while started.elapsed() < 3 * SYNC_TIMEOUT || calls < 4 {
            let t = Instant::now();
            let block = tokio::time::timeout(REGISTRATION_TIMEOUT, h.nri.block_plugin_sync())
                .await
                .unwrap_or_else(|_| {
                    panic!("a runtime call waited over {REGISTRATION_TIMEOUT:?} for syncs")
                });
            good_plugin_still_adjusts(&h, &format!("c{calls}")).await;
            drop(block);
            longest = longest.max(t.elapsed());
            calls += 1;
        }
        eprintln!(
            "FIGURE 20 plugins never answering Synchronize ({SYNC_TIMEOUT:?} timeout): \
             {calls} runtime calls in {:?}, the longest {longest:?}",
            started.elapsed()
        );
        assert!(
            longest < SYNC_TIMEOUT + SYNC_TIMEOUT / 2,
            "a runtime call waited {longest:?}, more than one sync"
        );
        for p in hung {
            p.stop();
        }
        good.stop();
    })
}
