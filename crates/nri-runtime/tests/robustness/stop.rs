//! Stop ends everything the adaptation started: connections, handshakes
//! and syncs in progress, its runtime thread and every fd; nothing joins a
//! stopped adaptation, and it starts again.

use std::time::{Duration, Instant};

use nri_api::{self as api, ContainerUpdate, EventMask};
use nri_stub::{ConfigureInfo, HandlerResult, Plugin};
use tokio::io::AsyncReadExt;

use crate::common::*;
use crate::peers::*;
use crate::serial;

/// Answers Synchronize after a second, well within the request timeout.
struct SlowSync;

const SYNC_TAKES: Duration = Duration::from_secs(1);

#[nri_stub::plugin]
impl Plugin for SlowSync {
    async fn configure(&self, _info: &ConfigureInfo) -> HandlerResult<EventMask> {
        Ok(EventMask::EMPTY)
    }

    async fn synchronize(
        &self,
        _pods: Vec<api::PodSandbox>,
        _containers: Vec<api::Container>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        tokio::time::sleep(SYNC_TAKES).await;
        Ok(vec![])
    }

    async fn run_pod_sandbox(&self, _pod: &api::PodSandbox) -> HandlerResult<()> {
        Ok(())
    }
}

/// Threads of the adaptation's own runtime (they carry its name).
fn core_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|name| name.trim_end() == "nri-adaptation")
        })
        .count()
}

/// Reads until the peer hangs up; how long that took.
async fn hung_up_within(s: &mut tokio::net::UnixStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout(limit, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => continue,
            Err(_) => return None,
        }
    }
}

/// After stop, 6 fds and 3-9 threads of the core were left, and a
/// handshake or sync in progress went on and added its plugin to the
/// stopped adaptation. Now stop cancels both at once and leaves nothing.
#[test]
fn stop_cancels_what_is_in_progress_and_leaves_no_fd_or_thread() {
    serial(async {
        let fds = open_fds();
        let h = Harness::start().await;
        h.nri.start().await.unwrap();
        let good = h.connect("good", "50", good_plugin());
        h.wait_plugins(1).await;
        good_plugin_still_adjusts(&h, "before-stop").await;

        // A sync in progress and a handshake in progress.
        let syncing = h.connect("syncing", "20", SlowSync);
        eventually(PATIENCE, "the plugin to be synchronizing", || {
            !logged("20-syncing registering").is_empty()
        })
        .await;
        let mut handshaking = tokio::net::UnixStream::connect(&h.socket).await.unwrap();

        let stopped = Instant::now();
        h.nri.stop().await;
        let stop_took = stopped.elapsed();
        let hung_up = hung_up_within(&mut handshaking, Duration::from_secs(1)).await;
        assert!(
            hung_up.is_some(),
            "a handshake in progress went on after stop"
        );
        assert!(h.nri.plugins().is_empty(), "{:?}", h.nri.plugins());
        // A joined thread may linger in /proc for a moment.
        eventually(Duration::from_secs(1), "no thread of the core left", || {
            core_threads() == 0
        })
        .await;
        // The sync would have ended, and added its plugin, by now.
        tokio::time::sleep(SYNC_TAKES + SYNC_TAKES / 2).await;
        assert!(
            h.nri.plugins().is_empty(),
            "joined the stopped adaptation: {:?}",
            h.nri.plugins()
        );

        drop(handshaking);
        syncing.stop();
        good.stop();
        eventually(
            PATIENCE,
            "fds back to the count before the adaptation",
            || open_fds() <= fds,
        )
        .await;
        eprintln!(
            "FIGURE stop with a sync and a handshake in progress: took {stop_took:?}, \
             the handshake hung up {hung_up:?} later; 0 threads and 0 fds of the core left"
        );
        drop(h);
    })
}

#[test]
fn a_stopped_adaptation_starts_again() {
    serial(async {
        let h = Harness::start().await;
        for round in 0..2 {
            h.nri.start().await.unwrap();
            let good = h.connect("good", "50", good_plugin());
            h.wait_plugins(1).await;
            good_plugin_still_adjusts(&h, &format!("round-{round}")).await;
            h.nri.stop().await;
            assert!(h.nri.plugins().is_empty());
            assert!(matches!(
                h.nri
                    .create_container(create_req("pod", "after-stop"))
                    .await,
                Err(nri_runtime::Error::NotRunning)
            ));
            good.stop();
        }
    })
}
