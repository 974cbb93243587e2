//! One test per item of "Robust where upstream is not" (docs/COMPATIBILITY.md).

use std::cell::Cell;
use std::time::{Duration, Instant};

use nri_api::mux;
use nri_api::{self as api, Event, EventMask};
use nri_runtime::{BoxError, BuiltinHandlers, BuiltinPlugin, Options};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;
use crate::peers::*;
use crate::serial;

const TIMEOUT: Duration = Duration::from_secs(2);

async fn harness_with_good_plugin() -> (Harness, TestPlugin) {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let good = good_plugin();
    h.connect("good", "50", good.clone());
    h.wait_plugins(1).await;
    good_plugin_still_adjusts(&h, "warmup").await;
    (h, good)
}

/// What a test must get back to once the hostile peer is gone.
struct Baseline {
    fds: usize,
    tasks: usize,
}

impl Baseline {
    fn take(h: &Harness) -> Baseline {
        Baseline {
            fds: open_fds(),
            tasks: h.nri.alive_tasks(),
        }
    }

    async fn restored(&self, h: &Harness) {
        let (fds, tasks) = (Cell::new(0), Cell::new(0));
        let back = eventually(PATIENCE, "fds and tasks back to baseline", || {
            fds.set(open_fds());
            tasks.set(h.nri.alive_tasks());
            fds.get() <= self.fds && tasks.get() <= self.tasks
        });
        if tokio::time::timeout(TIMEOUT * 3, back).await.is_err() {
            panic!(
                "still {} fds and {} tasks, baseline {} and {}",
                fds.get(),
                tasks.get(),
                self.fds,
                self.tasks
            );
        }
    }
}

/// Upstream accepts one connection at a time: 200 silent connections locked
/// good plugins out for ~100 s. Here a good plugin registers at once.
#[test]
fn silent_connections_do_not_hold_up_good_plugins() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        let base = Baseline::take(&h);

        let mut silent = Vec::new();
        for _ in 0..200 {
            silent.push(tokio::net::UnixStream::connect(&h.socket).await.unwrap());
        }
        let started = Instant::now();
        let late = h.connect("late", "60", good_plugin());
        h.wait_plugins(2).await;
        eprintln!(
            "FIGURE 200 silent connections: a good plugin registered in {:?}",
            started.elapsed()
        );
        assert!(
            started.elapsed() < TIMEOUT,
            "registered in {:?}, behind the silent connections",
            started.elapsed()
        );

        // Every silent connection is closed by the runtime within one timeout.
        for s in &mut silent {
            let mut buf = [0u8; 64];
            let n = tokio::time::timeout(TIMEOUT * 2, s.read(&mut buf)).await;
            assert!(matches!(n, Ok(Ok(0)) | Ok(Err(_))), "runtime closed it");
        }
        eprintln!(
            "FIGURE 200 silent connections: all closed {:?} after they connected",
            started.elapsed()
        );
        drop(silent);
        // With the late plugin gone too (pruned after the next event), nothing
        // of the flood may be left.
        late.stop();
        eventually(TIMEOUT, "the late plugin to disconnect", || {
            h.nri.plugins() == ["50-good"]
        })
        .await;
        good_plugin_still_adjusts(&h, "after-flood").await;
        base.restored(&h).await;
    })
}

/// Upstream's mux allocates whatever length a frame claims.
#[test]
fn a_frame_claiming_4_gib_drops_only_that_connection() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        let base = Baseline::take(&h);
        let rss_before = rss_kib();

        let mut s = tokio::net::UnixStream::connect(&h.socket).await.unwrap();
        let mut frame = vec![0, 0, 0, 2, 0xff, 0xff, 0xff, 0xf0];
        frame.extend([0u8; 4096]);
        s.write_all(&frame).await.unwrap();
        let started = Instant::now();
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(TIMEOUT, s.read(&mut buf)).await;
        eprintln!(
            "FIGURE 4 GiB frame claim: connection closed in {:?}, RSS {:+} KiB",
            started.elapsed(),
            rss_kib() as i64 - rss_before as i64
        );
        assert!(
            matches!(n, Ok(Ok(0)) | Ok(Err(_))),
            "runtime closed the connection"
        );
        assert!(rss_kib() < rss_before + 64 * 1024, "no large allocation");
        good_plugin_still_adjusts(&h, "after-bad-frame").await;
        drop(s);
        base.restored(&h).await;
    })
}

/// Before this was bounded, 200 connections that each sent one ~4 MiB
/// message and waited grew the runtime by ~700 MiB, and up to 1,024 could.
/// Now a connection that announces more than a registration before it has
/// registered is closed at once, and a good plugin still joins.
#[test]
fn connections_that_never_register_cannot_pin_memory() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        let base = Baseline::take(&h);
        let rss_before = rss_kib();
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(rss_before));
        let sampler = {
            let peak = std::sync::Arc::clone(&peak);
            tokio::spawn(async move {
                loop {
                    peak.fetch_max(rss_kib(), std::sync::atomic::Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
        };

        // One frame on the Runtime service connection: a ttrpc request
        // header announcing 4 MiB, then the 4 MiB.
        const LEN: usize = 4 << 20;
        let mut frame = mux::RUNTIME_SERVICE_CONN.to_be_bytes().to_vec();
        frame.extend(((mux::TTRPC_HEADER_LEN + LEN) as u32).to_be_bytes());
        frame.extend((LEN as u32).to_be_bytes());
        frame.extend([0, 0, 0, 1, 1, 0]);
        frame.resize(frame.len() + LEN, 0x5a);
        let frame = std::sync::Arc::new(frame);
        let started = Instant::now();
        // NRI_HOSTILE_CONNECTIONS=1000 (with `ulimit -n` raised) for the
        // figure at the runtime's default of 1,024 pending handshakes.
        let count: usize = std::env::var("NRI_HOSTILE_CONNECTIONS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(200);
        let (mut conns, mut writers) = (Vec::new(), Vec::new());
        for _ in 0..count {
            let s = tokio::net::UnixStream::connect(&h.socket).await.unwrap();
            let (mut rd, mut wr) = s.into_split();
            let frame = std::sync::Arc::clone(&frame);
            writers.push(tokio::spawn(async move {
                // Fails once the runtime hangs up; that is the point.
                let _ = wr.write_all(&frame).await;
                std::future::pending::<()>().await;
            }));
            conns.push(tokio::spawn(async move {
                let mut buf = [0u8; 64];
                let n = tokio::time::timeout(TIMEOUT, rd.read(&mut buf)).await;
                (matches!(n, Ok(Ok(0)) | Ok(Err(_))), started.elapsed())
            }));
        }
        let late = h.connect("late", "60", good_plugin());
        h.wait_plugins(2).await;
        let joined = started.elapsed();
        let mut slowest = Duration::ZERO;
        for c in conns {
            let (closed, after) = c.await.unwrap();
            assert!(
                closed,
                "a connection announcing 4 MiB stayed open for {TIMEOUT:?}"
            );
            slowest = slowest.max(after);
        }
        sampler.abort();
        writers.iter().for_each(|w| w.abort());
        let grew = peak.load(std::sync::atomic::Ordering::Relaxed) as i64 - rss_before as i64;
        eprintln!(
            "FIGURE {count} unregistered connections sending 4 MiB: all closed in {slowest:?}, \
             a good plugin joined in {joined:?}, peak RSS {grew:+} KiB"
        );
        assert!(grew < 64 * 1024, "peak RSS grew by {grew} KiB");
        assert!(slowest < TIMEOUT / 2, "closed only after {slowest:?}");
        late.stop();
        eventually(TIMEOUT, "the late plugin to disconnect", || {
            h.nri.plugins() == ["50-good"]
        })
        .await;
        good_plugin_still_adjusts(&h, "after-flood").await;
        base.restored(&h).await;
    })
}

/// Upstream treats a malformed reply as an ordinary plugin error: every
/// container fails and the plugin stays. Here it is dropped.
#[test]
fn a_malformed_reply_drops_the_plugin_and_the_event_goes_on() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        let base = Baseline::take(&h);

        let liar = RawPlugin::connect(
            &h.socket,
            vec![
                ("Configure", configure_reply(&[Event::CREATE_CONTAINER])),
                ("Synchronize", vec![]),
                ("CreateContainer", vec![0xff; 32]),
            ],
        )
        .await;
        liar.register("liar", "10").await.unwrap();
        h.wait_plugins(2).await;
        let started = Instant::now();
        good_plugin_still_adjusts(&h, "c1").await;
        eprintln!(
            "FIGURE malformed reply: c1 created without the liar in {:?}",
            started.elapsed()
        );
        assert_eq!(h.nri.plugins(), ["50-good"], "the liar is gone");
        tokio::time::timeout(TIMEOUT, liar.mux.closed())
            .await
            .expect("closed by the runtime");
        good_plugin_still_adjusts(&h, "c2").await;
        drop(liar);
        base.restored(&h).await;
    })
}

/// Upstream keeps the connection of a rejected registration open.
#[test]
fn a_rejected_registration_closes_the_connection() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        let base = Baseline::take(&h);

        let bad = RawPlugin::connect(&h.socket, vec![]).await;
        let started = Instant::now();
        let err = bad.register("bad name", "10").await.unwrap_err();
        // Upstream's code and text: a plain Go error reaches the plugin as
        // `Unknown`.
        assert_eq!(
            status_text(&err),
            "UNKNOWN: invalid plugin name: invalid plugin name \"bad name\": \
             contains invalid character ' '"
        );
        tokio::time::timeout(TIMEOUT, bad.mux.closed())
            .await
            .expect("closed by the runtime");
        eprintln!(
            "FIGURE rejected registration: {}; closed after {:?}",
            status_text(&err),
            started.elapsed()
        );
        drop(bad);
        good_plugin_still_adjusts(&h, "c1").await;
        base.restored(&h).await;
    })
}

/// Upstream leaks a task per repeated RegisterPlugin.
#[test]
fn registering_twice_is_refused() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        let base = Baseline::take(&h);

        let twice = RawPlugin::connect(&h.socket, idle_methods()).await;
        twice.register("twice", "10").await.unwrap();
        h.wait_plugins(2).await;
        for _ in 0..7 {
            let err = twice.register("twice", "10").await.unwrap_err();
            assert!(err.to_string().contains("already registered"), "{err}");
        }
        // The eighth refusal is the last: the runtime hangs up.
        let _ = twice.register("twice", "10").await;
        tokio::time::timeout(TIMEOUT, twice.mux.closed())
            .await
            .expect("a connection refused 8 times is closed");
        assert!(
            !logged("8 requests refused, the last: plugin already registered").is_empty(),
            "the runtime says why"
        );
        drop(twice);
        // The closed plugin is pruned after the next event.
        good_plugin_still_adjusts(&h, "c1").await;
        assert_eq!(h.nri.plugins(), ["50-good"]);
        base.restored(&h).await;
    })
}

/// A plugin name is logged as the plugin registers, before it is checked:
/// a peer could put newlines (forged log lines) or megabytes in it.
#[test]
fn what_a_peer_sends_reaches_the_log_escaped_and_bounded() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        let base = Baseline::take(&h);
        let forger = RawPlugin::connect(&h.socket, idle_methods()).await;
        let name = format!("x\nlevel=error msg=\"forged line\"{}", "y".repeat(30_000));
        let err = forger.register(&name, "10").await.unwrap_err();
        assert!(err.to_string().contains("invalid plugin name"), "{err}");
        let lines = logged("registering");
        let line = lines
            .iter()
            .find(|l| l.contains("msg=\"forged line"))
            .expect("the registration is logged");
        assert!(!line.contains('\n'), "a peer forged a log line: {line:?}");
        assert!(line.len() < 2048, "a {}-byte log line", line.len());
        assert!(line.contains("more bytes)"), "{line}");
        forger.mux.close();
        drop(forger);
        good_plugin_still_adjusts(&h, "after-forger").await;
        base.restored(&h).await;
    })
}

/// Upstream lets any connection, registered or not, reach UpdateFn.
#[test]
fn only_registered_plugins_may_update_containers() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        let base = Baseline::take(&h);

        let sneaky = RawPlugin::connect(&h.socket, vec![]).await;
        let err = sneaky.update().await.unwrap_err();
        assert!(err.to_string().contains("not registered"), "{err}");
        assert!(
            h.state.lock().unwrap().unsolicited.is_empty(),
            "UpdateFn not reached"
        );
        // Never registering, it is closed after the registration timeout.
        let started = Instant::now();
        tokio::time::timeout(TIMEOUT * 2, sneaky.mux.closed())
            .await
            .expect("closed by the runtime");
        eprintln!(
            "FIGURE unregistered UpdateContainers: {}; closed {:?} later",
            status_text(&err),
            started.elapsed()
        );
        drop(sneaky);

        // A registered plugin's updates do reach the runtime.
        let honest = RawPlugin::connect(&h.socket, idle_methods()).await;
        honest.register("honest", "20").await.unwrap();
        h.wait_plugins(2).await;
        honest.update().await.unwrap();
        assert_eq!(h.state.lock().unwrap().unsolicited.len(), 1);
        honest.mux.close();
        drop(honest);
        good_plugin_still_adjusts(&h, "c1").await;
        base.restored(&h).await;
    })
}

/// A flood of unsolicited update requests is bounded per plugin: while the
/// runtime takes its time over updates, at most four of one plugin's run at
/// once and the rest are refused at once, none queued.
#[test]
fn a_flood_of_update_requests_is_bounded() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        h.state.lock().unwrap().update_delay = Duration::from_millis(200);
        let base = Baseline::take(&h);
        let flooder = RawPlugin::connect(&h.socket, idle_methods()).await;
        flooder.register("flooder", "20").await.unwrap();
        h.wait_plugins(2).await;
        let calls: Vec<_> = (0..500)
            .map(|_| {
                let client = flooder.runtime.clone();
                tokio::spawn(async move { update_via(&client).await })
            })
            .collect();
        let mut accepted = 0;
        for c in calls {
            match tokio::time::timeout(TIMEOUT, c)
                .await
                .expect("no request hangs")
                .unwrap()
            {
                Ok(_) => accepted += 1,
                Err(e) => assert!(e.to_string().contains("too many"), "{e}"),
            }
        }
        eprintln!("FIGURE 500 concurrent UpdateContainers: {accepted} accepted, the rest refused");
        let (applied, most_at_once) = {
            let s = h.state.lock().unwrap();
            (s.unsolicited.len(), s.most_updates_running)
        };
        assert_eq!(applied, accepted);
        assert!(
            most_at_once <= 4,
            "{most_at_once} updates of one plugin ran at once"
        );
        assert!(accepted < 500, "none refused: the bound was never reached");
        good_plugin_still_adjusts(&h, "c1").await;
        flooder.mux.close();
        drop(flooder);
        good_plugin_still_adjusts(&h, "c2").await;
        base.restored(&h).await;
    })
}

/// A plugin that floods UpdateContainers requests and never reads a reply.
/// ttrpc-rust spawns a task per request it reads, whether or not the reply
/// can go out; upstream grows without bound too. Here the runtime stops
/// reading a plugin whose replies are stuck, and drops it once they have
/// been stuck for a request timeout.
#[test]
fn a_plugin_flooding_requests_without_reading_replies_is_bounded_and_dropped() {
    const BATCH: u32 = 64;
    const FLOOD: u32 = 20_000;
    serial(async {
        // Every update is reported failed, so each reply is as large as its
        // request (~2 KiB): the replies back up after a few thousand requests.
        let h = Harness::start_with(
            |o| o,
            RuntimeState {
                fail_updates: true,
                ..Default::default()
            },
        )
        .await;
        h.nri.start().await.unwrap();
        h.connect("good", "50", good_plugin());
        h.wait_plugins(1).await;
        good_plugin_still_adjusts(&h, "warmup").await;
        let base = Baseline::take(&h);
        let rss_before = rss_kib();

        let trunk = std::os::unix::net::UnixStream::connect(&h.socket).unwrap();
        let raw = trunk.try_clone().unwrap();
        trunk.set_nonblocking(true).unwrap();
        raw.set_nonblocking(true).unwrap();
        let (trunk, deaf) = Deafened::new(tokio::net::UnixStream::from_std(trunk).unwrap());
        let flooder = RawPlugin::over(trunk, idle_methods()).await;
        flooder.register("flooder", "20").await.unwrap();
        h.wait_plugins(2).await;
        deaf.store(true, std::sync::atomic::Ordering::Release);

        let req = api::UpdateContainersRequest {
            update: vec![api::ContainerUpdate {
                container_id: "x".repeat(2048),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut raw = tokio::net::UnixStream::from_std(raw).unwrap();
        let flood = tokio::spawn(async move {
            let mut last_written = Instant::now();
            for batch in 0..FLOOD / BATCH {
                let mut bytes = Vec::new();
                for i in 0..BATCH {
                    let stream_id = 1001 + 2 * (batch * BATCH + i);
                    let msg = ttrpc_request("UpdateContainers", &req, stream_id);
                    bytes.extend(go_frames(mux::RUNTIME_SERVICE_CONN, &msg));
                }
                if raw.write_all(&bytes).await.is_err() {
                    return Some(last_written.elapsed());
                }
                last_written = Instant::now();
            }
            None
        });

        let (mut peak_tasks, mut peak_rss) = (0, 0);
        let mut checked_good = false;
        let deadline = Instant::now() + PATIENCE;
        while !flood.is_finished() {
            assert!(
                Instant::now() < deadline,
                "the flood neither ended nor was cut off"
            );
            peak_tasks = peak_tasks.max(h.nri.alive_tasks());
            peak_rss = peak_rss.max(rss_kib());
            if !checked_good {
                good_plugin_still_adjusts(&h, "during-flood").await;
                checked_good = true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let stuck = flood.await.unwrap();
        eprintln!(
        "FIGURE flood: peak tasks {peak_tasks} (baseline {}), peak RSS +{} KiB, cut off {stuck:?} after the last write",
        base.tasks,
        peak_rss.saturating_sub(rss_before)
    );
        let stuck = stuck.expect("the runtime read the whole flood and never dropped the flooder");
        assert!(
            stuck < TIMEOUT * 2,
            "cut off {stuck:?} after the runtime stopped reading"
        );
        assert!(
            peak_tasks < base.tasks + 64,
            "{peak_tasks} tasks alive at the peak, {} before",
            base.tasks
        );
        assert!(
            peak_rss < rss_before + 32 * 1024,
            "RSS grew by {} KiB",
            peak_rss - rss_before
        );
        eventually(TIMEOUT, "the flooder to be dropped", || {
            h.nri.plugins() == ["50-good"]
        })
        .await;
        good_plugin_still_adjusts(&h, "after-flood").await;
        drop(flooder);
        base.restored(&h).await;
    })
}

/// A plugin whose every reply is over ttrpc's 4 MiB limit. Go's mux cuts a
/// large write into frames of up to 4 MiB + 10 bytes, so a 5 MiB reply
/// arrives as 4096 bytes, one 4 MiB frame and the rest; the frames are legal
/// and ttrpc discards the message. Such a reply breaks the protocol as a
/// malformed one does: the plugin is dropped at its first one and the
/// creation goes on without it. Upstream's reader cannot take the large
/// frame (ENOMEM) and closes the trunk, with the same outcome.
#[test]
fn a_plugin_replying_over_4_mib_is_dropped_and_creation_goes_on() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        let base = Baseline::take(&h);

        let big = GoFramedPlugin::connect(
            &h.socket,
            "big",
            "10",
            Box::new(|method, _| match method {
                "Configure" => configure_reply(&[Event::CREATE_CONTAINER]),
                "CreateContainer" => {
                    let mut adjust = api::ContainerAdjustment::default();
                    adjust.add_annotation("big", "x".repeat(5 << 20));
                    let rsp = api::CreateContainerResponse {
                        adjust: protobuf::MessageField::some(adjust),
                        ..Default::default()
                    };
                    protobuf::Message::write_to_bytes(&rsp).unwrap()
                }
                _ => vec![],
            }),
        )
        .await;
        h.wait_plugins(2).await;

        let started = Instant::now();
        let rsp = h
            .nri
            .create_container(create_req("pod", "c1"))
            .await
            .expect("created without the plugin that broke the protocol");
        let took = started.elapsed();
        assert_eq!(annotation(&rsp, "big"), None);
        assert_eq!(annotation(&rsp, "good"), Some("yes"));
        assert_eq!(h.nri.plugins(), ["50-good"], "the plugin is dropped");
        tokio::time::timeout(TIMEOUT, big.mux.closed())
            .await
            .expect("its trunk closed by the runtime");
        let closing = logged("closing plugin external:10-big");
        eprintln!("FIGURE 5 MiB reply: c1 created in {took:?}; {closing:?}");
        assert!(
            closing
                .iter()
                .any(|l| l.contains("exceed maximum message size of 4194304")),
            "{closing:?}"
        );
        good_plugin_still_adjusts(&h, "c2").await;
        drop(big);
        base.restored(&h).await;
    })
}

/// A builtin validator that hangs.
struct HangingValidator;

#[async_trait::async_trait]
impl BuiltinHandlers for HangingValidator {
    fn implemented_events(&self) -> EventMask {
        EventMask::of(&[Event::VALIDATE_CONTAINER_ADJUSTMENT])
    }
    async fn validate_container_adjustment(
        &self,
        _req: api::ValidateContainerAdjustmentRequest,
    ) -> Result<(), BoxError> {
        std::future::pending().await
    }
}

/// Upstream drops a required validator that timed out, so the next
/// container is created without validation.
#[test]
fn a_validator_that_times_out_never_lets_a_container_through() {
    serial(async {
        let h = Harness::start_with(
            |o: Options| {
                o.request_timeout(Duration::from_millis(300))
                    .builtin_plugins([BuiltinPlugin::new(
                        "default-validator",
                        "00",
                        HangingValidator,
                    )])
                    .unwrap()
            },
            RuntimeState::default(),
        )
        .await;
        h.nri.start().await.unwrap();
        for ctr in ["c1", "c2", "c3"] {
            let started = Instant::now();
            let err = h
                .nri
                .create_container(create_req("pod", ctr))
                .await
                .unwrap_err();
            // Upstream's text for a validator that timed out.
            assert_eq!(
                err.to_string(),
                "validator plugin 00-default-validator failed: context deadline exceeded"
            );
            eprintln!(
                "FIGURE hanging builtin validator: {ctr} failed in {:?}: {err}",
                started.elapsed()
            );
        }
        assert_eq!(h.nri.plugins(), ["00-default-validator"]);
    })
}

/// Upstream's mux closes a connection after a burst of 256 small frames.
#[test]
fn a_burst_of_tiny_frames_is_legal_traffic() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;

        // RegisterPlugin as a ttrpc message, sent one byte per mux frame.
        let req = api::RegisterPluginRequest {
            plugin_name: "tiny".into(),
            plugin_idx: "30".into(),
            NRI_version: "v".repeat(600),
            ..Default::default()
        };
        let msg = ttrpc_request("RegisterPlugin", &req, 1);
        let mut frames = Vec::new();
        for b in &msg {
            frames.extend([0, 0, 0, 2, 0, 0, 0, 1, *b]);
        }
        assert!(msg.len() > 256, "more frames than upstream's queue holds");

        let mut s = tokio::net::UnixStream::connect(&h.socket).await.unwrap();
        let started = Instant::now();
        s.write_all(&frames).await.unwrap();
        // The reply to RegisterPlugin arrives on conn 2: registration worked.
        let mut header = [0u8; 8];
        let deadline = Instant::now() + TIMEOUT;
        loop {
            assert!(Instant::now() < deadline, "no reply to RegisterPlugin");
            s.read_exact(&mut header)
                .await
                .expect("connection kept open");
            let len = u32::from_be_bytes(header[4..8].try_into().unwrap()) as usize;
            let mut body = vec![0u8; len];
            s.read_exact(&mut body).await.unwrap();
            if header[..4] == [0, 0, 0, 2] {
                assert_eq!(body[8], 2, "a ttrpc response");
                eprintln!(
                    "FIGURE {} one-byte frames: registered in {:?}",
                    msg.len(),
                    started.elapsed()
                );
                break;
            }
        }
        good_plugin_still_adjusts(&h, "c1").await;
    })
}

/// A ttrpc error as the peer sees it: code and message of a status.
fn status_text(e: &ttrpc::Error) -> String {
    match e {
        ttrpc::Error::RpcStatus(s) => {
            format!("{:?}: {}", s.code.enum_value_or_default(), s.message)
        }
        other => other.to_string(),
    }
}

fn rss_kib() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

/// A registered plugin's connection to the runtime, with a way to put raw
/// trunk frames on it between the plugin's own (see
/// [`registered_plugins_holding_half_a_message_pin_what_they_sent`]).
struct Injectable {
    plugin: RawPlugin,
    inject: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    /// Injected bytes the runtime's socket has taken.
    injected: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    _pumps: [tokio::task::JoinHandle<()>; 2],
}

impl Injectable {
    async fn connect(socket: &std::path::Path) -> Injectable {
        let real = tokio::net::UnixStream::connect(socket).await.unwrap();
        let (mut real_rd, mut real_wr) = real.into_split();
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let (mut ours_rd, mut ours_wr) = tokio::io::split(ours);
        let (inject, mut out) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        let injected = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&injected);
        let writer = tokio::spawn(async move {
            let mut buf = vec![0u8; 64 << 10];
            loop {
                let (bytes, is_injected) = tokio::select! {
                    n = ours_rd.read(&mut buf) => match n {
                        Ok(0) | Err(_) => return,
                        Ok(n) => (buf[..n].to_vec(), false),
                    },
                    Some(bytes) = out.recv() => (bytes, true),
                };
                if real_wr.write_all(&bytes).await.is_err() {
                    return;
                }
                if is_injected {
                    counted.fetch_add(bytes.len(), std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        let reader = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut real_rd, &mut ours_wr).await;
        });
        let plugin = RawPlugin::over(theirs, idle_methods()).await;
        Injectable {
            plugin,
            inject,
            injected,
            _pumps: [writer, reader],
        }
    }
}

/// Registered connections are not bounded in number, upstream's neither,
/// and each may start a message up to ttrpc's 4 MiB and stop halfway. Both
/// then hold what was sent: Go's ttrpc allocates the announced length,
/// whose pages are touched only as bytes arrive; here the mux buffers the
/// frames and ttrpc-rust's read allocates the length zeroed (calloc: fresh
/// pages, untouched too). Measured so that a regression to touching the
/// whole announced length shows, and a good plugin still gets its events.
#[test]
fn registered_plugins_holding_half_a_message_pin_what_they_sent() {
    serial(async {
        let (h, _good) = harness_with_good_plugin().await;
        let base = Baseline::take(&h);
        const COUNT: usize = 50;
        const LEN: usize = 4 << 20;
        let mut peers = Vec::new();
        for i in 0..COUNT {
            let p = Injectable::connect(&h.socket).await;
            p.plugin
                .register(&format!("pinned{i}"), "10")
                .await
                .unwrap();
            peers.push(p);
        }
        h.wait_plugins(COUNT + 1).await;
        let rss_before = rss_kib();
        // An UpdateContainers request announcing 4 MiB, of which half is sent.
        let mut msg = (LEN as u32).to_be_bytes().to_vec();
        msg.extend(101u32.to_be_bytes());
        msg.extend([1, 0]);
        msg.resize(10 + LEN / 2, 0x5a);
        let frames = go_frames(mux::RUNTIME_SERVICE_CONN, &msg);
        for p in &peers {
            p.inject.send(frames.clone()).unwrap();
        }
        // Every byte taken by the runtime's sockets (the kernel holds less
        // than 1 MiB of them), then a moment for the runtime to read it.
        eventually(TIMEOUT * 3, "the runtime to take the half messages", || {
            peers
                .iter()
                .all(|p| p.injected.load(std::sync::atomic::Ordering::Relaxed) == frames.len())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let grew = rss_kib() as i64 - rss_before as i64;
        let sent_kib = (COUNT * LEN / 2 / 1024) as i64;
        eprintln!(
            "FIGURE {COUNT} registered connections holding half of a 4 MiB message \
             ({sent_kib} KiB sent): RSS {grew:+} KiB ({:+} KiB each)",
            grew / COUNT as i64
        );
        // The test process holds what the peers sent too (their frames),
        // so the runtime's share is at most the growth itself.
        assert!(
            grew < 2 * sent_kib + 64 * 1024,
            "RSS grew by {grew} KiB for {sent_kib} KiB sent"
        );
        good_plugin_still_adjusts(&h, "while-pinned").await;
        drop(peers);
        eventually(TIMEOUT * 3, "the pinned plugins to go", || {
            h.nri.plugins() == ["50-good"]
        })
        .await;
        base.restored(&h).await;
    })
}
