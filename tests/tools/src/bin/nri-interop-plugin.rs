//! A Rust NRI plugin for cross-implementation tests: it records every
//! request it gets as a JSON line, and adjusts and updates containers in
//! ways a test can check on the runtime side.
//!
//! Configuration is JSON, from the runtime's Configure request (launched
//! plugins get it from the runtime's drop-in directory) merged over
//! `--config`:
//!
//! * `record`: file to append one JSON object per request to;
//! * `events`: subscription, in `EventMask::parse` syntax (default: all);
//! * `adjust`: on CreateContainer, add env `NRI_RS_PLUGIN_<name>=<name>` and
//!   annotation `nri-rs.test/<name>=<container id>`;
//! * `annotation_bytes`: also add annotation `nri-rs.test/big` of this size;
//! * `update_on_start`: on StartContainer, request an unsolicited update of
//!   that container (CPU shares 123) and record the outcome.

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use nri_stub::api::{
    Container, ContainerAdjustment, ContainerUpdate, EventMask, LinuxResources, PodSandbox,
    ValidateContainerAdjustmentRequest,
};
use nri_stub::{ConfigureInfo, HandlerResult, Plugin, Stub, StubHandle};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    record: Option<String>,
    events: Option<String>,
    #[serde(default)]
    adjust: bool,
    #[serde(default)]
    annotation_bytes: usize,
    #[serde(default)]
    update_on_start: bool,
}

impl Config {
    /// `over` wins wherever it sets something.
    fn merged(self, over: Config) -> Config {
        Config {
            record: over.record.or(self.record),
            events: over.events.or(self.events),
            adjust: self.adjust || over.adjust,
            annotation_bytes: self.annotation_bytes.max(over.annotation_bytes),
            update_on_start: self.update_on_start || over.update_on_start,
        }
    }
}

/// Appends one JSON line to the record file, if there is one.
fn append_record(path: Option<&str>, lock: &Mutex<()>, entry: Value) {
    let Some(path) = path else { return };
    let _guard = lock.lock().unwrap();
    if let Err(e) = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{entry}\n").as_bytes()))
    {
        eprintln!("nri-interop-plugin: cannot record to {path}: {e}");
    }
}

struct Interop {
    base: Config,
    config: Mutex<Config>,
    name: String,
    handle: OnceLock<StubHandle>,
    record_lock: Arc<Mutex<()>>,
}

impl Interop {
    fn record(&self, entry: Value) {
        let path = self.config.lock().unwrap().record.clone();
        append_record(path.as_deref(), &self.record_lock, entry);
    }

    fn record_pod(&self, event: &str, pod: &PodSandbox) -> HandlerResult<()> {
        self.record(json!({"event": event, "pod": pod.id}));
        Ok(())
    }

    fn record_container(
        &self,
        event: &str,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        self.record(json!({"event": event, "pod": pod.id, "container": ctr.id}));
        Ok(())
    }
}

#[nri_stub::plugin]
impl Plugin for Interop {
    async fn configure(&self, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        let from_runtime: Config = if info.config.trim().is_empty() {
            Config::default()
        } else {
            serde_json::from_str(&info.config).map_err(|e| format!("invalid plugin config: {e}"))?
        };
        let config = self.base.clone().merged(from_runtime);
        let events = match &config.events {
            Some(spec) => spec.parse::<EventMask>()?,
            None => EventMask::EMPTY,
        };
        *self.config.lock().unwrap() = config;
        self.record(json!({
            "event": "Configure",
            "config": info.config,
            "runtime_name": info.runtime_name,
            "runtime_version": info.runtime_version,
            "nri_version": info.nri_version,
            "registration_timeout_ms": self.handle.get().map(|h| h.registration_timeout().as_millis() as u64),
            "request_timeout_ms": self.handle.get().map(|h| h.request_timeout().as_millis() as u64),
        }));
        Ok(events)
    }

    async fn synchronize(
        &self,
        pods: Vec<PodSandbox>,
        containers: Vec<Container>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        let container_ids: Vec<&str> = containers.iter().map(|c| c.id.as_str()).collect();
        self.record(json!({
            "event": "Synchronize",
            "pods": pods.len(),
            "containers": containers.len(),
            "first_container": container_ids.first(),
            "last_container": container_ids.last(),
        }));
        Ok(Vec::new())
    }

    async fn shutdown(&self) {
        self.record(json!({"event": "Shutdown"}));
    }

    async fn run_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        self.record_pod("RunPodSandbox", pod)
    }

    async fn update_pod_sandbox(
        &self,
        pod: &PodSandbox,
        _overhead: Option<&LinuxResources>,
        _resources: Option<&LinuxResources>,
    ) -> HandlerResult<()> {
        self.record_pod("UpdatePodSandbox", pod)
    }

    async fn post_update_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        self.record_pod("PostUpdatePodSandbox", pod)
    }

    async fn stop_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        self.record_pod("StopPodSandbox", pod)
    }

    async fn remove_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        self.record_pod("RemovePodSandbox", pod)
    }

    async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        self.record_container("CreateContainer", pod, ctr)?;
        let config = self.config.lock().unwrap().clone();
        let mut adjust = ContainerAdjustment::new();
        if config.adjust {
            adjust.add_env(format!("NRI_RS_PLUGIN_{}", self.name), self.name.clone());
            adjust.add_annotation(format!("nri-rs.test/{}", self.name), ctr.id.clone());
        }
        if config.annotation_bytes > 0 {
            adjust.add_annotation("nri-rs.test/big", "x".repeat(config.annotation_bytes));
        }
        Ok((adjust, Vec::new()))
    }

    async fn post_create_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.record_container("PostCreateContainer", pod, ctr)
    }

    async fn start_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.record_container("StartContainer", pod, ctr)?;
        if self.config.lock().unwrap().update_on_start {
            if let Some(handle) = self.handle.get().cloned() {
                let id = ctr.id.clone();
                let record_to = self.config.lock().unwrap().record.clone();
                let lock = self.record_lock.clone();
                // Asked from another task: the runtime may still hold the
                // lock of the event being delivered.
                tokio::spawn(async move {
                    let mut update = ContainerUpdate::for_container(id.clone());
                    update.set_linux_cpu_shares(123);
                    let entry = match handle.update_containers(vec![update], vec![]).await {
                        Ok(failed) => {
                            json!({"event": "UpdateContainersResult", "container": id, "failed": failed.len()})
                        }
                        Err(e) => {
                            json!({"event": "UpdateContainersResult", "container": id, "error": e.to_string()})
                        }
                    };
                    append_record(record_to.as_deref(), &lock, entry);
                });
            }
        }
        Ok(())
    }

    async fn post_start_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.record_container("PostStartContainer", pod, ctr)
    }

    async fn update_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
        _resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.record_container("UpdateContainer", pod, ctr)?;
        Ok(Vec::new())
    }

    async fn post_update_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.record_container("PostUpdateContainer", pod, ctr)
    }

    async fn stop_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.record_container("StopContainer", pod, ctr)?;
        Ok(Vec::new())
    }

    async fn remove_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.record_container("RemoveContainer", pod, ctr)
    }

    async fn validate_container_adjustment(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> HandlerResult<()> {
        self.record(json!({"event": "ValidateContainerAdjustment", "container": req.container.id}));
        Ok(())
    }
}

fn usage() -> ! {
    eprintln!("usage: nri-interop-plugin [--socket PATH] [--name NAME] [--idx NN] [--config JSON] [--reconnect-ms N]");
    std::process::exit(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut builder = Stub::builder();
    let mut base = Config::default();
    let mut name_arg = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--socket" => builder = builder.socket_path(value()),
            "--name" => {
                let name = value();
                name_arg = Some(name.clone());
                builder = builder.name(name);
            }
            "--idx" => builder = builder.idx(value()),
            "--config" => {
                base = serde_json::from_str(&value()).unwrap_or_else(|e| {
                    eprintln!("nri-interop-plugin: invalid --config: {e}");
                    std::process::exit(2)
                })
            }
            "--reconnect-ms" => {
                let ms: u64 = value().parse().unwrap_or_else(|_| usage());
                builder = builder.reconnect(std::time::Duration::from_millis(ms));
            }
            _ => usage(),
        }
    }
    let name = name_arg
        .or_else(|| std::env::var(nri_stub::api::PLUGIN_NAME_ENV).ok())
        .unwrap_or_else(|| "interop".to_string());
    let plugin = Interop {
        config: Mutex::new(base.clone()),
        base,
        name,
        handle: OnceLock::new(),
        record_lock: Arc::new(Mutex::new(())),
    };
    let stub = match builder.build(plugin) {
        Ok(stub) => stub,
        Err(e) => {
            eprintln!("nri-interop-plugin: {e}");
            std::process::exit(1)
        }
    };
    // The plugin needs the handle for unsolicited updates; hand it over
    // through the Arc the stub keeps.
    stub.plugin().handle.set(stub.handle()).ok();
    let stop = stub.handle();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop.stop();
        }
    });
    if let Err(e) = stub.run().await {
        eprintln!("nri-interop-plugin: {e}");
        std::process::exit(1)
    }
}
