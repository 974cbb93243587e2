//! Request timeouts of single plugins: set by the runtime
//! (`Options::plugin_request_timeout`) or by a pre-installed plugin's
//! runtime drop-in, against the adaptation's when neither is set. And
//! Synchronize's own deadline: by default longer than a request's and
//! growing with the node, else as the runtime or the drop-in set it.

use std::time::Duration;

use serde_json::json;

use crate::common::{container, create_req, pod, Harness, RuntimeState, TestPlugin};
use crate::goprocess::{go_plugin, GoPlugin};

const GLOBAL: Duration = Duration::from_millis(300);
const PATIENT: Duration = Duration::from_secs(3);
/// What each slow plugin takes to answer CreateContainer: over the
/// adaptation's timeout, within the patient one.
const SLOW_MS: u64 = 1000;

async fn wait_for(h: &Harness, names: &[&str]) {
    let deadline = tokio::time::Instant::now() + crate::common::PATIENCE;
    while names.iter().any(|n| !h.nri.has_plugin(n)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "expected {names:?}, have {:?}",
            h.nri.plugins()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// External plugins: one named by `idx-name`, one by name alone, keep
/// their slow replies within their own timeouts; one without stays under
/// the adaptation's and is dropped, as every slow plugin is upstream.
#[tokio::test]
async fn a_plugin_with_its_own_timeout_outlasts_the_adaptations() {
    let h = Harness::start_with(
        |o| {
            o.request_timeout(GLOBAL)
                .plugin_request_timeout("10-patient", PATIENT)
                .and_then(|o| o.plugin_request_timeout("patientgo", PATIENT))
                .unwrap()
        },
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    let slow = TestPlugin {
        delay: Some(Duration::from_millis(SLOW_MS)),
        ..Default::default()
    };
    let rust = h.connect("patient", "10", slow.clone());
    let script = json!({"events": "createcontainer", "delay_ms": {"CreateContainer": SLOW_MS}});
    let go_patient = GoPlugin::start(&h, "patientgo", "20", script.clone());
    let go_hasty = GoPlugin::start(&h, "hasty", "30", script);
    wait_for(&h, &["10-patient", "20-patientgo", "30-hasty"]).await;

    h.nri.create_container(create_req("p", "c1")).await.unwrap();

    assert!(slow.events().contains(&"CreateContainer c1".to_string()));
    assert!(go_patient.saw("CreateContainer", "c1"));
    assert_eq!(
        h.nri.plugins(),
        ["10-patient", "20-patientgo"],
        "only the plugin without a timeout of its own is dropped"
    );
    drop((go_patient, go_hasty));
    rust.stop();
    h.nri.stop().await;
}

/// Pre-installed plugins: the runtime drop-in `<idx>-<name>.runtime.yaml`
/// gives one its timeout; the runtime's own setting wins over a drop-in;
/// a plugin with neither is dropped.
#[tokio::test]
async fn a_pre_installed_plugin_takes_its_timeout_from_its_runtime_drop_in() {
    let h = Harness::start_with(
        |o| {
            o.request_timeout(GLOBAL)
                .plugin_request_timeout("50-overruled", GLOBAL)
                .unwrap()
        },
        RuntimeState::default(),
    )
    .await;
    std::fs::create_dir_all(h.plugin_dir()).unwrap();
    std::fs::create_dir_all(h.config_dir()).unwrap();
    for (name, dropin) in [
        ("30-patient", Some("requestTimeout: 3s\n")),
        ("40-plain", None),
        ("50-overruled", Some("requestTimeout: 3s\n")),
    ] {
        std::os::unix::fs::symlink(go_plugin(), h.plugin_dir().join(name)).unwrap();
        let log = h.dir.path().join(format!("{name}.jsonl"));
        let script = json!({"events": "createcontainer", "delay_ms": {"CreateContainer": SLOW_MS}, "log": log});
        std::fs::write(
            h.config_dir().join(format!("{name}.conf")),
            script.to_string(),
        )
        .unwrap();
        if let Some(text) = dropin {
            std::fs::write(h.config_dir().join(format!("{name}.runtime.yaml")), text).unwrap();
        }
    }
    h.nri.start().await.unwrap();
    assert_eq!(h.nri.plugins(), ["30-patient", "40-plain", "50-overruled"]);

    h.nri.create_container(create_req("p", "c1")).await.unwrap();

    assert_eq!(
        h.nri.plugins(),
        ["30-patient"],
        "the drop-in's timeout keeps 30; 40 has none, 50's is overruled"
    );
    h.nri.stop().await;
}

/// A drop-in with a key the runtime does not know stops the start, naming
/// the file and the key: a misspelled timeout must not silently be the
/// adaptation's.
#[tokio::test]
async fn a_misspelled_runtime_drop_in_stops_the_start() {
    let h = Harness::start().await;
    std::fs::create_dir_all(h.plugin_dir()).unwrap();
    std::fs::create_dir_all(h.config_dir()).unwrap();
    std::os::unix::fs::symlink(go_plugin(), h.plugin_dir().join("30-typo")).unwrap();
    std::fs::write(
        h.config_dir().join("30-typo.runtime.yaml"),
        "requestTimout: 3s\n",
    )
    .unwrap();
    let e = h.nri.start().await.unwrap_err().to_string();
    assert!(
        e.contains("30-typo.runtime.yaml") && e.contains("requestTimout"),
        "{e}"
    );
}

/// What each slow plugin takes to answer Synchronize in the sync tests.
const SLOW_SYNC_MS: u64 = 800;

/// Whether the Go plugin was sent a Synchronize.
fn was_synchronized(p: &GoPlugin) -> bool {
    p.calls().iter().any(|c| c["event"] == "Synchronize")
}

/// By default a Synchronize may take the registration timeout, longer
/// than a request's: a plugin whose sync takes over its request timeout
/// still joins, where upstream drops it.
#[tokio::test]
async fn a_sync_longer_than_a_request_joins_by_default() {
    let h = Harness::start_with(
        |o| {
            o.registration_timeout(Duration::from_millis(1500))
                .request_timeout(GLOBAL)
        },
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    let script = json!({"events": "createcontainer", "delay_ms": {"Synchronize": SLOW_SYNC_MS}});
    let go = GoPlugin::start(&h, "slowsync", "10", script);
    wait_for(&h, &["10-slowsync"]).await;
    assert!(was_synchronized(&go));
    h.nri.create_container(create_req("p", "c1")).await.unwrap();
    assert!(go.saw("CreateContainer", "c1"), "it stays, and gets events");
    h.nri.stop().await;
}

/// The default sync deadline grows by a millisecond per pod and container
/// sent: with 1,000 of them, a sync three times as long as both the
/// registration and the request timeout joins.
#[tokio::test]
async fn the_default_sync_deadline_grows_with_the_node() {
    let state = RuntimeState {
        pods: (0..500).map(|i| pod(&format!("p{i}"))).collect(),
        containers: (0..500)
            .map(|i| container(&format!("p{i}"), &format!("c{i}")))
            .collect(),
        ..Default::default()
    };
    let h = Harness::start_with(
        |o| o.registration_timeout(GLOBAL).request_timeout(GLOBAL),
        state,
    )
    .await;
    h.nri.start().await.unwrap();
    let script = json!({"events": "createcontainer", "delay_ms": {"Synchronize": SLOW_SYNC_MS}});
    let go = GoPlugin::start(&h, "bignode", "10", script);
    wait_for(&h, &["10-bignode"]).await;
    let sync = go
        .calls()
        .into_iter()
        .find(|c| c["event"] == "Synchronize")
        .unwrap();
    assert_eq!(
        (sync["pods"].as_u64(), sync["containers"].as_u64()),
        (Some(500), Some(500))
    );
    h.nri.stop().await;
}

/// A sync timeout the runtime sets is used as is: a sync that the default
/// would let through, and that fits the request timeout, drops the plugin
/// when it takes longer; a plugin's own sync timeout, by `idx-name` or
/// name, wins over the adaptation's.
#[tokio::test]
async fn an_explicit_sync_timeout_is_kept_as_is() {
    let h = Harness::start_with(
        |o| {
            o.sync_timeout(Duration::from_millis(500))
                .and_then(|o| o.plugin_sync_timeout("10-patient", PATIENT))
                .and_then(|o| o.plugin_sync_timeout("patientbyname", PATIENT))
                .unwrap()
        },
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    let script = json!({"events": "createcontainer", "delay_ms": {"Synchronize": SLOW_SYNC_MS}});
    let patient = GoPlugin::start(&h, "patient", "10", script.clone());
    let by_name = GoPlugin::start(&h, "patientbyname", "20", script.clone());
    let hasty = GoPlugin::start(&h, "hasty", "30", script);
    wait_for(&h, &["10-patient", "20-patientbyname"]).await;
    // Syncs take turns: the hasty plugin's may begin last. Once it began,
    // the plugin would have joined within its delay had it been kept.
    let deadline = tokio::time::Instant::now() + crate::common::PATIENCE;
    while !was_synchronized(&hasty) {
        assert!(tokio::time::Instant::now() < deadline, "no sync for hasty");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(SLOW_SYNC_MS + 300)).await;
    assert!(was_synchronized(&patient) && was_synchronized(&by_name));
    assert_eq!(
        h.nri.plugins(),
        ["10-patient", "20-patientbyname"],
        "only the plugin under the adaptation's 500 ms is dropped"
    );
    h.nri.stop().await;
}

/// A pre-installed plugin's runtime drop-in gives it a sync timeout of its
/// own (`syncTimeout`), over the adaptation's; the runtime's setting for
/// the plugin wins over the drop-in.
#[tokio::test]
async fn a_pre_installed_plugin_takes_its_sync_timeout_from_its_runtime_drop_in() {
    let h = Harness::start_with(
        |o| {
            o.sync_timeout(Duration::from_millis(500))
                .and_then(|o| o.plugin_sync_timeout("50-overruled", Duration::from_millis(500)))
                .unwrap()
        },
        RuntimeState::default(),
    )
    .await;
    std::fs::create_dir_all(h.plugin_dir()).unwrap();
    std::fs::create_dir_all(h.config_dir()).unwrap();
    for (name, dropin) in [
        ("30-patient", Some("syncTimeout: 3s\n")),
        ("40-plain", None),
        ("50-overruled", Some("syncTimeout: 3s\n")),
    ] {
        std::os::unix::fs::symlink(go_plugin(), h.plugin_dir().join(name)).unwrap();
        let script =
            json!({"events": "createcontainer", "delay_ms": {"Synchronize": SLOW_SYNC_MS}});
        std::fs::write(
            h.config_dir().join(format!("{name}.conf")),
            script.to_string(),
        )
        .unwrap();
        if let Some(text) = dropin {
            std::fs::write(h.config_dir().join(format!("{name}.runtime.yaml")), text).unwrap();
        }
    }
    h.nri.start().await.unwrap();
    assert_eq!(
        h.nri.plugins(),
        ["30-patient"],
        "the drop-in's sync timeout keeps 30; 40 has none, 50's is overruled"
    );
    h.nri.stop().await;
}
