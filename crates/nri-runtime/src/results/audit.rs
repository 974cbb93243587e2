//! The audit log: one record per event in which a plugin changed something
//! (or a validator refused), naming the container, every field changed and
//! the plugin that changed it, the merged values, the validators' verdicts
//! and who the plugins are.
//!
//! The changes come from the ownership records the merge keeps anyway
//! (`OwningPlugins`), so the log says exactly what the validators were
//! shown. A record is built on the core's thread, then handed to a thread
//! of its own, which renders it, calls the runtime's sink and appends it to
//! the file: a slow sink or disk holds up events only once
//! [`QUEUE`] records wait. Nothing is recorded, and nothing costs, unless
//! the runtime asks for an audit log.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use log::warn;
use protobuf::MessageFull;
use serde::Serialize;
use serde_json::Value;

use nri_api::{ContainerUpdate, OwningPlugins, PodSandbox};

use crate::plugins::identity::PeerIdentity;
use crate::plugins::plugin::Plugin;
use crate::Error;

/// Records that may wait for the audit thread before events wait for it.
const QUEUE: usize = 1024;

/// The default bound of one record's JSON text.
pub const DEFAULT_AUDIT_RECORD_LIMIT: usize = 64 << 10;

/// Where the runtime wants audit records.
pub trait AuditSink: Send + Sync + 'static {
    /// One record, and its JSON text (one line, within the record limit).
    /// Runs on the audit thread, one record at a time, in event order.
    fn record(&self, record: &AuditRecord, json: &str);
}

/// What one audited event did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AuditRecord {
    /// `CreateContainer`, `UpdateContainer`, `StopContainer`, or
    /// `UpdateContainers` (a plugin's own request).
    pub event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<AuditPod>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<AuditContainer>,
    /// `applied`: the runtime got the result; `rejected`: a validator
    /// refused it; `failed`: a conflict or a plugin's error ended the event
    /// (or the runtime failed a plugin's own request); `partial`: the
    /// runtime applied some of a plugin's own updates, not all.
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every field changed, by container, field number, key and plugin.
    pub changes: Vec<AuditChange>,
    /// The merged adjustment of the created container (protobuf JSON,
    /// empty parts left out, environment values redacted unless asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjustment: Option<Value>,
    /// The merged updates of containers, likewise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub updates: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub validators: Vec<AuditVerdict>,
    /// The plugins named in `changes`, with their identities.
    pub plugins: Vec<AuditPlugin>,
    /// What the record limit made it leave out.
    #[serde(skip_serializing_if = "Omitted::is_none")]
    pub omitted: Omitted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditContainer {
    pub id: String,
    pub name: String,
}

/// One field (or key of a field) one plugin set or removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditChange {
    pub container: String,
    /// The field's name in the protocol's `Field` enum (`Env`, `MemLimit`).
    pub field: String,
    /// The key of a compound field: an annotation, a mount destination, an
    /// environment variable's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub plugin: String,
    /// The plugin removed it rather than set it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditVerdict {
    pub plugin: String,
    /// `accepted`, `rejected`, `failed` (it could not answer) or
    /// `skipped` (it was gone).
    pub verdict: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditPlugin {
    pub name: String,
    pub origin: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Omitted {
    /// The values (`adjustment`, `updates`) were left out.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub values: bool,
    /// Changes left out, from the end of the list.
    #[serde(skip_serializing_if = "is_zero")]
    pub changes: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Omitted {
    fn is_none(&self) -> bool {
        !self.values && self.changes == 0
    }
}

impl AuditRecord {
    /// The record's JSON text, at most `limit` bytes if leaving out the
    /// values and then changes can make it so: what stays (the container,
    /// the outcome and error, the verdicts and identities, each text at
    /// most 1 KiB) is bounded by the number of plugins, not by what they
    /// send.
    pub fn to_json(&self, limit: usize) -> String {
        let text = |r: &AuditRecord| serde_json::to_string(r).unwrap_or_default();
        let full = text(self);
        if full.len() <= limit {
            return full;
        }
        let mut bounded = self.clone();
        bounded.adjustment = None;
        bounded.updates.clear();
        bounded.omitted.values = true;
        let mut json = text(&bounded);
        // Halving keeps the work at O(size * log(changes)).
        let mut keep = bounded.changes.len();
        while json.len() > limit && keep > 0 {
            keep /= 2;
            bounded.omitted.changes = self.changes.len() - keep;
            bounded.changes.truncate(keep);
            json = text(&bounded);
        }
        json
    }
}

/// How the runtime asked for audit records.
pub(crate) struct AuditConfig {
    pub(crate) sink: Option<Arc<dyn AuditSink>>,
    pub(crate) file: Option<PathBuf>,
    pub(crate) env_values: bool,
    pub(crate) record_limit: usize,
}

impl AuditConfig {
    /// Whether any record would go anywhere.
    pub(crate) fn wants_records(&self) -> bool {
        self.sink.is_some() || self.file.is_some()
    }
}

/// The core's end of the audit log.
pub(crate) struct Auditor {
    queue: Option<tokio::sync::mpsc::Sender<Pending>>,
    thread: Option<std::thread::JoinHandle<()>>,
    env_values: bool,
}

impl Auditor {
    /// Opens the file (appending) and starts the audit thread.
    pub(crate) fn start(cfg: AuditConfig) -> Result<Auditor, Error> {
        let file = match &cfg.file {
            Some(path) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| {
                        Error::InvalidConfig(format!(
                            "failed to open audit log {}: {e}",
                            path.display()
                        ))
                    })?,
            ),
            None => None,
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Pending>(QUEUE);
        let (sink, limit, path) = (cfg.sink, cfg.record_limit, cfg.file);
        let thread = std::thread::Builder::new()
            .name("nri-audit".into())
            .spawn(move || {
                let mut file = file;
                while let Some(pending) = rx.blocking_recv() {
                    let record = pending.render();
                    let json = record.to_json(limit);
                    if let Some(sink) = &sink {
                        sink.record(&record, &json);
                    }
                    if let Some(f) = file.as_mut() {
                        if let Err(e) = writeln!(f, "{json}") {
                            let path = path.as_deref().unwrap_or_else(|| "?".as_ref());
                            warn!("failed to append to audit log {}: {e}", path.display());
                        }
                    }
                }
            })
            .map_err(|e| Error::Start(format!("failed to start the audit thread: {e}")))?;
        Ok(Auditor {
            queue: Some(tx),
            thread: Some(thread),
            env_values: cfg.env_values,
        })
    }

    /// Queues `record`, waiting (without blocking the thread) while the
    /// queue is full.
    pub(crate) async fn submit(&self, record: Pending) {
        if let Some(queue) = &self.queue {
            let _ = queue.send(record).await;
        }
    }

    /// A record of `event` so far: its pod and container.
    pub(crate) fn draft(
        &self,
        event: &'static str,
        pod: Option<&PodSandbox>,
        ctr: Option<(&str, &str)>,
    ) -> Draft {
        Draft {
            record: AuditRecord {
                event,
                pod: pod.map(|p| AuditPod {
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                    uid: p.uid.clone(),
                }),
                container: ctr.map(|(id, name)| AuditContainer {
                    id: id.to_string(),
                    name: name.to_string(),
                }),
                outcome: "applied",
                error: None,
                changes: Vec::new(),
                adjustment: None,
                updates: Vec::new(),
                validators: Vec::new(),
                plugins: Vec::new(),
                omitted: Omitted::default(),
            },
            adjust: None,
            updates: Vec::new(),
            env_values: self.env_values,
        }
    }
}

impl Auditor {
    /// Records updates a plugin made of its own accord (`UpdateContainers`,
    /// or its reply to `Synchronize`), with `outcome` of handing them to
    /// the runtime, if they change anything.
    pub(crate) fn plugin_updates(
        &self,
        event: &'static str,
        plugin: &Plugin,
        updates: Vec<ContainerUpdate>,
        outcome: Result<(), &Error>,
    ) -> Option<Pending> {
        let mut draft = self.draft(event, None, None);
        // The merge's bookkeeping says which fields the updates set.
        let mut merged = crate::results::StopResult::new();
        let rpl = nri_api::StopContainerResponse {
            update: updates,
            ..Default::default()
        };
        if merged.apply(&plugin.name, rpl).is_ok() {
            draft.changes(merged.owners());
            draft.updates(merged.updates());
        }
        draft.worth_it().then(|| draft.finish(outcome, &[plugin]))
    }
}

impl crate::sync::SyncRecorder for Auditor {
    /// The updates were handed to the runtime with its sync: "applied" as
    /// far as the adaptation can tell.
    fn synchronized<'a>(
        &'a self,
        plugin: &'a Plugin,
        updates: &'a [ContainerUpdate],
    ) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            let record = self.plugin_updates("Synchronize", plugin, updates.to_vec(), Ok(()));
            if let Some(record) = record {
                self.submit(record).await;
            }
        })
    }
}

impl Drop for Auditor {
    /// Delivers what is queued before the adaptation is gone, so the
    /// runtime's sink is never called after it freed the adaptation.
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

/// A record being filled in by an event.
pub(crate) struct Draft {
    record: AuditRecord,
    /// The merged values, rendered on the audit thread.
    adjust: Option<nri_api::ContainerAdjustment>,
    updates: Vec<ContainerUpdate>,
    env_values: bool,
}

/// A record whose values are still protobuf messages: rendering them to
/// JSON is most of a record's cost, and it is the audit thread's.
pub(crate) struct Pending {
    pub(crate) record: AuditRecord,
    adjust: Option<nri_api::ContainerAdjustment>,
    updates: Vec<ContainerUpdate>,
    env_values: bool,
}

impl Pending {
    fn render(mut self) -> AuditRecord {
        let env_values = self.env_values;
        self.record.adjustment = self.adjust.map(|a| values(&a, env_values));
        self.record.updates = self.updates.iter().map(|u| values(u, env_values)).collect();
        self.record
    }
}

/// A message as protobuf JSON in sorted maps, empty parts left out and,
/// unless `env_values`, environment values redacted.
fn values(msg: &impl MessageFull, env_values: bool) -> Value {
    let text = protobuf_json_mapping::print_to_string(msg).unwrap_or_default();
    let mut value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !env_values {
        redact_env(&mut value);
    }
    prune_empty(&mut value);
    value
}

impl Draft {
    /// The changes `owners` records, sorted by container, field number, key.
    pub(crate) fn changes(&mut self, owners: &OwningPlugins) {
        let mut changes = Vec::new();
        let containers: BTreeMap<&String, _> = owners.owners.iter().collect();
        for (ctr, fields) in containers {
            let mut entries: Vec<(i32, Option<&str>, &str)> = fields
                .simple
                .iter()
                .map(|(f, owner)| (*f, None, owner.as_str()))
                .collect();
            for (f, compound) in &fields.compound {
                entries.extend(
                    compound
                        .owners
                        .iter()
                        .map(|(k, owner)| (*f, Some(k.as_str()), owner.as_str())),
                );
            }
            entries.sort();
            for (field, key, owner) in entries {
                // OCI hooks accumulate their owners as `a,b`.
                for plugin in owner.split(',') {
                    let (plugin, removed) = match plugin.strip_prefix('-') {
                        Some(clearer) => (clearer, true),
                        None => (plugin, false),
                    };
                    changes.push(AuditChange {
                        container: ctr.clone(),
                        field: field_name(field),
                        key: key.map(str::to_string),
                        plugin: plugin.to_string(),
                        removed,
                    });
                }
            }
        }
        self.record.changes = changes;
    }

    /// The merged adjustment of the created container.
    pub(crate) fn adjustment(&mut self, adjust: &nri_api::ContainerAdjustment) {
        self.adjust = Some(adjust.clone());
    }

    /// The merged updates.
    pub(crate) fn updates(&mut self, updates: &[ContainerUpdate]) {
        self.updates = updates
            .iter()
            .filter(|u| !u.container_id.is_empty())
            .cloned()
            .collect();
    }

    /// What the validators said (see [`verdicts`]).
    pub(crate) fn set_verdicts(&mut self, verdicts: Vec<AuditVerdict>) {
        self.record.validators = verdicts;
    }

    /// Whether the record is worth writing: a plugin changed something, or
    /// a validator refused.
    pub(crate) fn worth_it(&self) -> bool {
        !self.record.changes.is_empty()
            || self
                .record
                .validators
                .iter()
                .any(|v| v.verdict != "accepted")
    }

    /// The record, with `outcome` and the identities of the plugins
    /// named, taken from `plugins`; its values still to be rendered.
    pub(crate) fn finish(mut self, outcome: Result<(), &Error>, plugins: &[&Plugin]) -> Pending {
        let r = &mut self.record;
        match outcome {
            Ok(()) => r.outcome = "applied",
            Err(e @ Error::Rejected { .. }) => {
                r.outcome = "rejected";
                r.error = Some(bounded(e.to_string()));
            }
            Err(e) => {
                r.outcome = "failed";
                r.error = Some(bounded(e.to_string()));
            }
        }
        let mut named: Vec<&str> = r.changes.iter().map(|c| c.plugin.as_str()).collect();
        named.sort_unstable();
        named.dedup();
        r.plugins = named
            .into_iter()
            .map(|name| audit_plugin(name, plugins.iter().find(|p| p.name == name).copied()))
            .collect();
        Pending {
            record: self.record,
            adjust: self.adjust,
            updates: self.updates,
            env_values: self.env_values,
        }
    }
}

/// What each validator said, in plugin order.
pub(crate) fn verdicts(
    validators: &[Arc<Plugin>],
    said: &[Result<(), Error>],
) -> Vec<AuditVerdict> {
    validators
        .iter()
        .zip(said)
        .map(|(v, said)| {
            let (verdict, reason) = match said {
                Ok(()) if v.is_closed() => ("skipped", None),
                Ok(()) => ("accepted", None),
                Err(Error::Rejected { reason, .. }) => ("rejected", Some(bounded(reason.clone()))),
                Err(e) => ("failed", Some(bounded(e.to_string()))),
            };
            AuditVerdict {
                plugin: v.name.clone(),
                verdict,
                reason,
            }
        })
        .collect()
}

fn audit_plugin(name: &str, plugin: Option<&Plugin>) -> AuditPlugin {
    let id: Option<&PeerIdentity> = plugin.and_then(|p| p.identity.as_ref());
    AuditPlugin {
        name: name.to_string(),
        origin: plugin.map_or("unknown", |p| p.origin_name()),
        uid: id.map(|i| i.uid),
        gid: id.map(|i| i.gid),
        pid: id.and_then(|i| i.pid),
        executable: id
            .and_then(|i| i.executable.as_ref())
            .map(|e| e.display().to_string()),
        pod_uid: id.and_then(|i| i.pod_uid.clone()),
    }
}

/// Most bytes of one error or reason in a record: a plugin writes them,
/// and the record limit must not depend on its restraint.
const MAX_TEXT: usize = 1 << 10;

/// `text`, cut to [`MAX_TEXT`] bytes at a character boundary.
pub(crate) fn bounded(mut text: String) -> String {
    if text.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// A `Field` number's name; a number this version does not know, as is.
fn field_name(field: i32) -> String {
    nri_validator::field_name(field).unwrap_or_else(|| field.to_string())
}

/// Replaces the values of every `env` list's entries (`{"key", "value"}`).
fn redact_env(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k == "env" {
                    if let Value::Array(entries) = v {
                        for e in entries.iter_mut().filter_map(Value::as_object_mut) {
                            if let Some(val) = e.get_mut("value") {
                                *val = Value::String("(redacted)".into());
                            }
                        }
                    }
                } else {
                    redact_env(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_env),
        _ => {}
    }
}

/// Drops empty objects and lists, so a record shows only what was set.
fn prune_empty(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.values_mut().for_each(prune_empty);
            map.retain(|_, v| !is_empty(v));
        }
        Value::Array(items) => items.iter_mut().for_each(prune_empty),
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Null => true,
        _ => false,
    }
}
