//! What the runtime and a plugin tell each other when the plugin connects
//! (checklist 2.3, 2.6), and holding synchronization off (6.3).

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::time::Duration;

use nri_api::{ConfigureRequest, ConfigureResponse};
use serde_json::json;

use crate::common::*;
use crate::goplugin::events_of;
use crate::goprocess::GoPlugin;
use crate::peers::{configure_reply, eventually, idle_methods, RawPlugin};

/// Configure carries the runtime's name and version, the NRI version the
/// core implements and both timeouts in milliseconds. The plugin's own NRI
/// version (upstream's Go stub sends its module version) is only logged:
/// plugins registering with no version or an ancient one are configured
/// the same way.
#[tokio::test]
async fn configure_carries_runtime_and_nri_version_and_the_plugins_version_is_only_logged() {
    let h = Harness::start_with(
        |o| {
            o.registration_timeout(Duration::from_millis(2500))
                .request_timeout(Duration::from_millis(1750))
        },
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    let go = GoPlugin::start(&h, "versioned", "10", json!({"events": "runpodsandbox"}));
    h.wait_plugins(1).await;
    let configure = &go.calls()[0];
    assert_eq!(configure["event"], "Configure");
    assert_eq!(configure["runtime_name"], "test-runtime");
    assert_eq!(configure["runtime_version"], "v9.9.9");
    assert_eq!(configure["nri_version"], nri_runtime::NRI_VERSION);
    assert_eq!(configure["nri_version"], "v0.12.5");
    assert_eq!(configure["registration_timeout_ms"], 2500);
    assert_eq!(configure["request_timeout_ms"], 1750);
    assert_eq!(
        logged("plugin 10-versioned registering"),
        // The Go test plugin's upstream stub: go/tests pins v0.12.5.
        ["plugin 10-versioned registering, NRI version v0.12.5"],
        "the Go stub's module version, logged"
    );
    let name = format!("plugin external:10-versioned[{}] ", go.pid());
    assert!(
        !logged(&name).is_empty(),
        "log names carry the peer's pid (SO_PEERCRED)"
    );

    let mut raw = Vec::new();
    for (name, idx, version, shown) in [
        ("unversioned", "20", "", "unknown"),
        ("ancient", "30", "v0.1.0", "v0.1.0"),
    ] {
        let p = RawPlugin::connect(&h.socket, idle_methods()).await;
        p.register_as(name, idx, version).await.unwrap();
        raw.push(p);
        let line = format!("plugin {idx}-{name} registering, NRI version {shown}");
        eventually(PATIENCE, &line, || logged(&line).len() == 1).await;
    }
    h.wait_plugins(3).await;
    for p in &raw {
        let cfg = p.requests::<ConfigureRequest>("Configure");
        assert_eq!(cfg.len(), 1);
        assert_eq!(cfg[0].NRI_version, "v0.12.5");
        assert_eq!(cfg[0].runtime_name, "test-runtime");
        assert_eq!(cfg[0].request_timeout, 1750);
    }
}

/// While the runtime holds a `PluginSyncBlock`, a plugin that connects is
/// registered and configured but not synchronized; events go on for the
/// others and are kept for it. Once unblocked it is synchronized, told of
/// what it missed, and joins.
#[tokio::test]
async fn a_plugin_connecting_while_sync_is_blocked_is_synchronized_after_unblock() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let early = TestPlugin::default();
    h.connect("early", "05", early.clone());
    h.wait_plugins(1).await;
    // Active within its sync: that sync's function returns a moment later.
    eventually(PATIENCE, "the early plugin's sync returned", || {
        h.state.lock().unwrap().syncs == 2
    })
    .await;
    let syncs = 2;

    let mut block = h.nri.block_plugin_sync().await;
    let late = GoPlugin::start(&h, "late", "10", json!({"events": "runpodsandbox"}));
    // The runtime has the Configure reply: next for this plugin comes the sync.
    eventually(PATIENCE, "the late plugin configured", || {
        logged(":10-late[")
            .iter()
            .any(|l| l.contains("subscribed to events"))
    })
    .await;
    assert_eq!(events_of(&late.calls()), ["Configure"]);

    h.nri
        .run_pod_sandbox(req!(RunPodSandboxRequest, "p1"))
        .await
        .expect("events are not blocked");
    assert_eq!(early.events(), ["RunPodSandbox p1"]);
    assert_eq!(h.nri.plugins(), ["05-early"]);
    assert_eq!(
        events_of(&late.calls()),
        ["Configure"],
        "no Synchronize while blocked"
    );
    assert_eq!(
        h.state.lock().unwrap().syncs,
        syncs,
        "sync callback not called"
    );

    block.unblock();
    h.wait_plugins(2).await;
    eventually(PATIENCE, "the late plugin's sync returned", || {
        h.state.lock().unwrap().syncs == syncs + 1
    })
    .await;
    h.nri
        .run_pod_sandbox(req!(RunPodSandboxRequest, "p2"))
        .await
        .unwrap();
    // p1 ran while it waited: it is told of it after its Synchronize,
    // then of p2 as it happens.
    assert_eq!(
        late.calls()
            .iter()
            .map(|c| format!("{} {}", c["event"], c["pod"]).replace('"', ""))
            .collect::<Vec<_>>(),
        [
            "Configure ",
            "Synchronize ",
            "RunPodSandbox p1",
            "RunPodSandbox p2"
        ]
    );
}

/// The socket directory is created owner-only, the socket is reachable by
/// the runtime's user only, whatever the umask, and a stale file in its
/// place is replaced.
#[tokio::test]
async fn the_socket_is_the_runtimes_own_and_replaces_a_stale_one() {
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let fresh = Harness::start().await;
    fresh.nri.start().await.unwrap();
    assert_eq!(mode(fresh.socket.parent().unwrap()), 0o700);
    assert!(std::fs::metadata(&fresh.socket)
        .unwrap()
        .file_type()
        .is_socket());
    assert_eq!(mode(&fresh.socket), 0o600);

    let stale = Harness::start().await;
    let dir = stale.socket.parent().unwrap();
    std::fs::create_dir(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(&stale.socket, "stale").unwrap();
    stale.nri.start().await.unwrap();
    assert!(std::fs::metadata(&stale.socket)
        .unwrap()
        .file_type()
        .is_socket());
    assert_eq!(mode(&stale.socket), 0o600);
    assert_eq!(mode(dir), 0o755, "an existing directory is left alone");
    stale.connect("late", "10", TestPlugin::default());
    stale.wait_plugins(1).await;
}

/// A plugin answering Configure with no events gets every event, the
/// validation included; one answering with bits beyond the last event is
/// refused and its connection closed.
#[tokio::test]
async fn configure_events_zero_means_all_and_invalid_bits_are_refused() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let invalid = RawPlugin::connect(
        &h.socket,
        vec![(
            "Configure",
            protobuf::Message::write_to_bytes(&ConfigureResponse {
                events: 0x4000,
                ..Default::default()
            })
            .unwrap(),
        )],
    )
    .await;
    invalid.register("invalid", "10").await.unwrap();
    tokio::time::timeout(PATIENCE, invalid.mux.closed())
        .await
        .expect("the runtime closes the connection");
    let refused = logged("invalid plugin events: 0x4000");
    assert!(
        refused.iter().any(|l| l.contains(":10-invalid[")),
        "{refused:?}"
    );

    let zero = RawPlugin::connect(
        &h.socket,
        vec![
            ("Configure", configure_reply(&[])),
            ("Synchronize", vec![]),
            ("CreateContainer", vec![]),
            ("ValidateContainerAdjustment", vec![]),
        ],
    )
    .await;
    zero.register("zero", "20").await.unwrap();
    h.wait_plugins(1).await;
    assert_eq!(h.nri.plugins(), ["20-zero"]);
    h.nri.create_container(create_req("p", "c")).await.unwrap();
    assert_eq!(
        zero.methods(),
        [
            "Configure",
            "Synchronize",
            "CreateContainer",
            "ValidateContainerAdjustment"
        ]
    );
}

/// Stopping the adaptation closes external plugins' connections too
/// (upstream leaves them open): the upstream-stub plugin sees the runtime
/// go and exits.
#[tokio::test]
async fn stop_closes_external_plugin_connections() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let mut go = GoPlugin::start(&h, "stopped", "10", json!({"events": "runpodsandbox"}));
    h.wait_plugins(1).await;
    h.nri.stop().await;
    assert!(h.nri.plugins().is_empty());
    let exited = tokio::task::spawn_blocking(move || go.wait());
    let status = tokio::time::timeout(PATIENCE, exited)
        .await
        .expect("the plugin noticed the runtime closed its connection")
        .unwrap();
    assert_eq!(status.code(), Some(0), "a clean close (stub OnClose)");
}

/// With `shutdown_on_stop`, stop first sends `Shutdown` to an upstream
/// Go-stub plugin and to a Rust-stub one; by default, as upstream, neither
/// is ever sent it and both only see their connection close.
#[tokio::test]
async fn stop_sends_shutdown_only_when_asked() {
    for asked in [false, true] {
        let h = Harness::start_with(|o| o.shutdown_on_stop(asked), RuntimeState::default()).await;
        h.nri.start().await.unwrap();
        let mut go = GoPlugin::start(&h, "go", "10", json!({"events": "runpodsandbox"}));
        let rust = TestPlugin::default();
        let _rust = h.connect("rust", "20", rust.clone());
        h.wait_plugins(2).await;
        let started = std::time::Instant::now();
        h.nri.stop().await;
        let took = started.elapsed();
        assert!(h.nri.plugins().is_empty());
        let exited = tokio::task::spawn_blocking(move || {
            let status = go.wait();
            (status, go.calls())
        });
        let (status, calls) = tokio::time::timeout(PATIENCE, exited)
            .await
            .expect("the Go plugin exits once its connection is closed")
            .unwrap();
        assert_eq!(status.code(), Some(0));
        let go_shut = calls.iter().any(|c| c["method"] == "Shutdown");
        let rust_shut = rust.events().iter().any(|e| e == "Shutdown");
        assert_eq!(
            (go_shut, rust_shut),
            (asked, asked),
            "Shutdown seen by the Go and the Rust plugin (shutdown_on_stop: {asked})"
        );
        assert!(took < Duration::from_secs(2), "stop took {took:?}");
    }
}

/// A plugin that never answers `Shutdown` holds stop for one request
/// timeout at most, however many there are.
#[tokio::test]
async fn shutdown_on_stop_waits_one_request_timeout_in_all() {
    let timeout = Duration::from_millis(300);
    let h = Harness::start_with(
        |o| o.shutdown_on_stop(true).request_timeout(timeout),
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    let slow = json!({"events": "runpodsandbox", "delay_ms": {"Shutdown": 5000}});
    let _slow: Vec<_> = (0..3)
        .map(|i| GoPlugin::start(&h, &format!("slow{i}"), "10", slow.clone()))
        .collect();
    h.wait_plugins(3).await;
    let started = std::time::Instant::now();
    h.nri.stop().await;
    let took = started.elapsed();
    assert!(
        took >= timeout && took < timeout * 3,
        "stop took {took:?} with three plugins not answering Shutdown"
    );
}

/// The process-wide timeout setters (upstream's `SetPluginRequestTimeout`
/// and friends) apply to adaptations without timeouts of their own, and are
/// read on use: Configure carries the values set after the adaptation was
/// created.
#[tokio::test]
async fn process_wide_timeouts_apply_to_adaptations_without_their_own() {
    use nri_runtime::{self as adaptation, Adaptation, BoxError, Options, SyncCb};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let nri = Adaptation::new(
        "global-runtime",
        "v1",
        |cb: SyncCb| async move {
            cb.call(vec![], vec![]).await?;
            Ok::<_, BoxError>(())
        },
        |_| async { Ok::<_, BoxError>(vec![]) },
        Options::default()
            .socket_path(&socket)
            .and_then(|o| o.plugin_path(dir.path().join("none")))
            .unwrap(),
    )
    .unwrap();
    adaptation::set_plugin_registration_timeout(Duration::from_millis(4321));
    adaptation::set_plugin_request_timeout(Duration::from_millis(1234));
    nri.start().await.unwrap();
    let p = RawPlugin::connect(&socket, idle_methods()).await;
    p.register("global", "10").await.unwrap();
    eventually(PATIENCE, "the plugin synchronized", || {
        p.methods().len() == 2
    })
    .await;
    adaptation::set_plugin_registration_timeout(Duration::from_secs(5));
    adaptation::set_plugin_request_timeout(Duration::from_secs(2));
    let cfg = &p.requests::<ConfigureRequest>("Configure")[0];
    assert_eq!(
        (cfg.registration_timeout, cfg.request_timeout),
        (4321, 1234)
    );
}
