//! The audit log: its records checked field by field against what the
//! runtime got back, through the sink and the JSON-lines file.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nri_runtime::api::{self, ContainerAdjustment, Mount};
use nri_runtime::validator::{DefaultValidatorConfig, PermissionKind, PluginPermissions};
use nri_runtime::{AuditRecord, AuditSink, Options};
use serde_json::{json, Value};

use crate::common::*;
use crate::goprocess::GoPlugin;

/// Keeps every record and its JSON text.
#[derive(Default, Clone)]
struct Records(Arc<Mutex<Vec<(AuditRecord, String)>>>);

impl AuditSink for Records {
    fn record(&self, record: &AuditRecord, json: &str) {
        self.0
            .lock()
            .unwrap()
            .push((record.clone(), json.to_string()));
    }
}

impl Records {
    /// Waits for the `n`th record (they arrive from the audit thread).
    async fn nth(&self, n: usize) -> (AuditRecord, Value) {
        tokio::time::timeout(PATIENCE, async {
            loop {
                if let Some((r, json)) = self.0.lock().unwrap().get(n - 1) {
                    return (r.clone(), serde_json::from_str(json).unwrap());
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("no audit record")
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// The resource plugin sets a memory limit, an annotation, a secret and
/// a log level; the storage plugin mounts a volume and removes the level.
fn resource_plugin() -> TestPlugin {
    TestPlugin::adjusting(|_| {
        let mut adj = ContainerAdjustment::default();
        adj.set_linux_memory_limit(1 << 30);
        adj.add_annotation("policy", "gold");
        adj.add_env("TOKEN", "s3cr3t");
        adj.add_env("LEVEL", "debug");
        Ok((adj, vec![]))
    })
}

fn storage_plugin() -> TestPlugin {
    TestPlugin::adjusting(|_| {
        let mut adj = ContainerAdjustment::default();
        adj.add_mount(Mount {
            destination: "/data".into(),
            source: "/srv/data".into(),
            type_: "bind".into(),
            options: vec!["rbind".into()],
            ..Default::default()
        });
        adj.remove_env("LEVEL");
        Ok((adj, vec![]))
    })
}

async fn audited(tweak: impl FnOnce(Options) -> Options) -> (Harness, Records) {
    let records = Records::default();
    let sink = records.clone();
    let h = Harness::start_with(
        move |o| tweak(o.audit_sink(Arc::new(sink))),
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    (h, records)
}

fn change(field: &str, key: Option<&str>, plugin: &str, removed: bool) -> Value {
    let mut c = json!({"container": "c", "field": field, "plugin": plugin});
    if let Some(k) = key {
        c["key"] = json!(k);
    }
    if removed {
        c["removed"] = json!(true);
    }
    c
}

#[tokio::test]
async fn a_creation_is_recorded_field_by_field_as_merged() {
    let validator = DefaultValidatorConfig {
        enable: true,
        ..Default::default()
    };
    let (h, records) = audited(|o| o.default_validator(validator)).await;
    h.connect("resources", "10", resource_plugin());
    h.connect("storage", "20", storage_plugin());
    h.wait_plugins(3).await;

    let rsp = h.nri.create_container(create_req("p", "c")).await.unwrap();
    let (record, json) = records.nth(1).await;
    assert_eq!(record.event, "CreateContainer");
    assert_eq!(
        json["pod"],
        json!({"namespace": "default", "name": "p-name", "uid": "p-uid"})
    );
    assert_eq!(json["container"], json!({"id": "c", "name": "c-name"}));
    assert_eq!(json["outcome"], "applied");

    // Every change the runtime got, with the plugin that made it, sorted
    // by field number (Annotations 1, Mounts 2, Env 6, MemLimit 8), then key.
    assert_eq!(
        json["changes"],
        json!([
            change("Annotations", Some("policy"), "10-resources", false),
            change("Mounts", Some("/data"), "20-storage", false),
            change("Env", Some("LEVEL"), "20-storage", true),
            change("Env", Some("TOKEN"), "10-resources", false),
            change("MemLimit", None, "10-resources", false),
        ])
    );
    // The values are the merged adjustment's, the secret's value excepted.
    let adj = rsp.adjust.get_or_default();
    assert_eq!(json["adjustment"]["annotations"], json!({"policy": "gold"}));
    assert_eq!(
        adj.annotations.get("policy").map(String::as_str),
        Some("gold")
    );
    assert_eq!(
        json["adjustment"]["mounts"],
        json!([{"destination": "/data", "source": "/srv/data", "type": "bind", "options": ["rbind"]}])
    );
    assert_eq!(adj.mounts[0].source, "/srv/data");
    let env: Vec<(&str, &str)> = adj
        .env
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str()))
        .collect();
    assert_eq!(env, [("TOKEN", "s3cr3t")]);
    assert_eq!(
        json["adjustment"]["env"],
        json!([{"key": "TOKEN", "value": "(redacted)"}])
    );
    assert!(!records.0.lock().unwrap()[0].1.contains("s3cr3t"));
    assert_eq!(
        json["adjustment"]["linux"]["resources"]["memory"]["limit"],
        json!({"value": (1i64 << 30).to_string()})
    );
    assert_eq!(
        adj.linux.resources.memory.limit.as_ref().map(|l| l.value),
        Some(1 << 30)
    );
    assert_eq!(
        json["validators"],
        json!([{"plugin": "00-default-validator", "verdict": "accepted"}])
    );
    // Who the plugins are: these stubs run in this process.
    let me = std::process::id() as i32;
    let plugins = json["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 2);
    for (p, name) in plugins.iter().zip(["10-resources", "20-storage"]) {
        assert_eq!(p["name"], name);
        assert_eq!(p["origin"], "external");
        assert_eq!(p["pid"], me);
    }

    // One event, one record; an event no plugin changed, none.
    h.nri
        .stop_container(api::StopContainerRequest {
            pod: protobuf::MessageField::some(pod("p")),
            container: protobuf::MessageField::some(container("p", "c")),
            ..Default::default()
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(records.len(), 1);
}

#[tokio::test]
async fn a_refused_adjustment_is_recorded_with_the_verdict() {
    let validator = DefaultValidatorConfig {
        enable: true,
        plugin_permissions: vec![PluginPermissions {
            plugins: vec!["resources".into()],
            allow: vec![PermissionKind::Annotations, PermissionKind::Resources],
            mount_sources: None,
        }],
        ..Default::default()
    };
    let (h, records) = audited(|o| o.default_validator(validator).audit_env_values(true)).await;
    h.connect("resources", "10", resource_plugin());
    h.wait_plugins(2).await;

    let err = creation_error(&h, create_req("p", "c")).await;
    let (record, json) = records.nth(1).await;
    assert_eq!(json["outcome"], "rejected");
    assert_eq!(record.error.as_deref(), Some(err.as_str()));
    let verdict = &json["validators"][0];
    assert_eq!(verdict["plugin"], "00-default-validator");
    assert_eq!(verdict["verdict"], "rejected");
    assert_eq!(
        verdict["reason"],
        "validation error: plugin \"10-resources\" not permitted to adjust env: Env \"LEVEL\", \
         and 1 more not permitted"
    );
    // Asked for, the values of the environment are kept.
    assert_eq!(
        json["adjustment"]["env"],
        json!([{"key": "TOKEN", "value": "s3cr3t"}, {"key": "LEVEL", "value": "debug"}])
    );
}

#[tokio::test]
async fn a_record_stays_within_its_limit() {
    let (h, records) = audited(|o| o.audit_record_limit(1024).unwrap()).await;
    h.connect(
        "many",
        "10",
        TestPlugin::adjusting(|_| {
            let mut adj = ContainerAdjustment::default();
            for i in 0..200 {
                adj.add_annotation(format!("key-{i:03}"), "x".repeat(100));
            }
            Ok((adj, vec![]))
        }),
    );
    h.wait_plugins(1).await;
    h.nri.create_container(create_req("p", "c")).await.unwrap();
    let (_, json) = records.nth(1).await;
    let text = records.0.lock().unwrap()[0].1.clone();
    assert!(text.len() <= 1024, "{} bytes", text.len());
    assert_eq!(json["omitted"]["values"], true);
    let kept = json["changes"].as_array().unwrap().len();
    assert!(kept > 0);
    assert_eq!(json["omitted"]["changes"], 200 - kept);
    // The ones kept are the first, in order.
    assert_eq!(json["changes"][0]["key"], "key-000");
}

#[tokio::test]
async fn the_file_gets_one_json_line_per_audited_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let file = path.clone();
    let (h, records) = audited(move |o| o.audit_file(file).unwrap()).await;
    h.connect("resources", "10", resource_plugin());
    h.wait_plugins(1).await;
    for id in ["c1", "c2"] {
        h.nri.create_container(create_req("p", id)).await.unwrap();
    }
    records.nth(2).await;
    // The sink is called before the line is written.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    for (line, (_, json)) in lines.iter().zip(records.0.lock().unwrap().iter()) {
        assert_eq!(line, json, "the file has the sink's text");
    }
}

#[tokio::test]
async fn a_plugins_own_update_is_recorded() {
    let (h, records) = audited(|o| o).await;
    let _go = GoPlugin::start(
        &h,
        "updater",
        "30",
        json!({"events": "runpodsandbox", "unsolicited": {"after_ms": 0, "update": [{"container_id": "c9", "linux": {"resources": {"cpu": {"shares": {"value": 512}}}}}]}}),
    );
    let (record, json) = records.nth(1).await;
    assert_eq!(record.event, "UpdateContainers");
    assert_eq!(json["outcome"], "applied");
    assert_eq!(
        json["changes"],
        json!([{"container": "c9", "field": "CPUShares", "plugin": "30-updater"}])
    );
    assert_eq!(json["updates"][0]["containerId"], "c9");
    assert_eq!(json["plugins"][0]["name"], "30-updater");
    let shares = &json["updates"][0]["linux"]["resources"]["cpu"]["shares"];
    assert_eq!(shares, &json!({"value": "512"}));
}

#[tokio::test]
async fn updates_in_a_synchronize_reply_are_recorded() {
    let (h, records) = audited(|o| o).await;
    let _go = GoPlugin::start(
        &h,
        "syncer",
        "40",
        json!({"events": "runpodsandbox", "replies": {"Synchronize": {"update": [{"container_id": "c7", "linux": {"resources": {"cpu": {"shares": {"value": 44}}}}}]}}}),
    );
    h.wait_plugins(1).await;
    let (record, json) = records.nth(1).await;
    assert_eq!(record.event, "Synchronize");
    assert_eq!(
        json["changes"],
        json!([{"container": "c7", "field": "CPUShares", "plugin": "40-syncer"}])
    );
    // The plugin is active within the sync; the sync function hands the
    // runtime its updates a moment later.
    crate::peers::eventually(PATIENCE, "the runtime got the updates", || {
        h.state
            .lock()
            .unwrap()
            .sync_updates
            .first()
            .is_some_and(|u| u.container_id == "c7")
    })
    .await;
}

#[tokio::test]
async fn a_validators_long_reason_does_not_break_the_limit() {
    let (h, records) = audited(|o| o.audit_record_limit(8192).unwrap()).await;
    h.connect("resources", "10", resource_plugin());
    let reason = "no ".repeat(40_000);
    let _v = GoPlugin::start(
        &h,
        "wordy",
        "90",
        json!({"events": "validatecontaineradjustment", "validate": {"reject": true, "reason": reason}}),
    );
    h.wait_plugins(2).await;
    creation_error(&h, create_req("p", "c")).await;
    let (_, json) = records.nth(1).await;
    let text = records.0.lock().unwrap()[0].1.clone();
    assert!(text.len() <= 8192, "{} bytes", text.len());
    assert_eq!(json["outcome"], "rejected");
    let said = json["validators"][0]["reason"].as_str().unwrap();
    assert!(
        said.len() <= (1 << 10) + 3 && said.ends_with('…'),
        "{} bytes",
        said.len()
    );
}
