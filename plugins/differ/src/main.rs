//! nri-differ: shows what the plugins in a chain change. It registers
//! itself at several plugin indices (by default 0 and 99) over one socket;
//! each instance remembers the pod and container it saw, and the next one
//! logs how they changed in between — i.e. what the plugins with indices
//! between them did. As upstream's Go `differ`.
//!
//! Flags: `-indices LIST` (default `0,99`), `-verbose-level N` (0–3),
//! `-yaml`, `-log-file PATH`, `-socket-path PATH`.

mod diff;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use log::{debug, error, info};
use nri_stub::api::{Container, ContainerAdjustment, ContainerUpdate, LinuxResources, PodSandbox};
use nri_stub::{HandlerResult, Plugin, Stub};
use plugin_kit::dump::{message, messages};
use plugin_kit::Flags;
use serde_json::Value;

#[derive(Clone, Debug)]
struct Config {
    verbose_level: i64,
    yaml: bool,
}

/// One instance's place in the chain and what it saw, oldest first.
#[derive(Debug, Default)]
struct Index {
    prev: Option<i32>,
    next: Option<i32>,
    seen: VecDeque<Seen>,
}

#[derive(Clone, Debug)]
struct Seen {
    pod: Option<Value>,
    container: Option<Value>,
}

type Chain = Arc<Mutex<BTreeMap<i32, Index>>>;

/// The chain for `-indices`: at least two, in the given order. Like
/// upstream, an index that is not a number counts as 0.
fn parse_indices(list: &str) -> Result<Vec<i32>, String> {
    if !list.contains(',') {
        return Err("There must be at least two index given.".into());
    }
    Ok(list.split(',').map(|s| s.parse().unwrap_or(0)).collect())
}

fn chain(indices: &[i32]) -> BTreeMap<i32, Index> {
    let mut map = BTreeMap::new();
    let mut prev = None;
    for &idx in indices {
        map.insert(
            idx,
            Index {
                prev,
                ..Default::default()
            },
        );
        if let Some(p) = prev {
            if let Some(e) = map.get_mut(&p) {
                e.next = Some(idx);
            }
        }
        prev = Some(idx);
    }
    map
}

struct Differ {
    idx: i32,
    cfg: Config,
    chain: Chain,
}

impl Differ {
    fn name(&self) -> String {
        format!("[{:02}]", self.idx)
    }

    fn dump(&self, prefix: &str, tag: &str, value: &Value) {
        let yaml = plugin_kit::goyaml::to_string(value);
        info!("{} {prefix}: {tag}:", self.name());
        for line in yaml.trim().lines() {
            info!("{} {prefix}:    {line}", self.name());
        }
    }

    fn report(&self, api: &str, obj: &str, before: &Value, after: &Value) {
        let idx = self.idx;
        if self.cfg.yaml {
            let a = plugin_kit::goyaml::to_string(before);
            let b = plugin_kit::goyaml::to_string(after);
            match diff::line_diff(&a, &b) {
                None => info!("[{idx}] {api}: {obj}: <no changes>"),
                Some(d) => info!("[{idx}] {api}: {obj}: {d}"),
            }
            return;
        }
        if self.cfg.verbose_level > 1 {
            info!("[{idx}] Original values for {obj}");
            self.dump(api, obj, before);
        }
        let changes = diff::diff(before, after);
        if changes.is_empty() {
            info!("[{idx}] {api}: {obj}: <no changes>");
            return;
        }
        for c in &changes {
            info!(
                "[{idx}] {api}: {obj}: {}: [{}]: From: {} -> To: {}",
                c.kind.as_str(),
                c.path.join(" "),
                diff::show(&c.from),
                diff::show(&c.to)
            );
        }
        if self.cfg.verbose_level > 1 {
            info!("[{idx}] Values after changes for {obj}");
            self.dump(api, obj, after);
        }
    }

    fn differ(&self, api: &str, pod: &PodSandbox, ctr: Option<&Container>) {
        let seen = Seen {
            pod: Some(message(pod)),
            container: ctr.map(message),
        };
        let mut chain = self.chain.lock().unwrap_or_else(|p| p.into_inner());
        let (prev, next) = match chain.get(&self.idx) {
            Some(e) => (e.prev, e.next),
            None => return,
        };
        let Some(prev) = prev else {
            // The first instance: remember for the next one.
            if self.cfg.verbose_level > 0 {
                self.dump(api, "pod", seen.pod.as_ref().unwrap_or(&Value::Null));
                if let Some(c) = &seen.container {
                    self.dump(api, "container", c);
                }
            }
            if let Some(e) = chain.get_mut(&self.idx) {
                e.seen.push_back(seen);
            }
            return;
        };
        let Some(before) = chain.get_mut(&prev).and_then(|e| e.seen.pop_front()) else {
            debug!(
                "[{}] {api}: skipping nil element, plugin startup not yet finished",
                self.idx
            );
            return;
        };
        if let (Some(b), Some(a)) = (&before.pod, &seen.pod) {
            self.report(api, "pod", b, a);
        }
        if let (Some(b), Some(a)) = (&before.container, &seen.container) {
            self.report(api, "container", b, a);
        }
        if next.is_some() {
            if let Some(e) = chain.get_mut(&self.idx) {
                e.seen.push_back(seen);
            }
        }
    }
}

#[nri_stub::plugin]
impl Plugin for Differ {
    async fn synchronize(
        &self,
        pods: Vec<PodSandbox>,
        containers: Vec<Container>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        if self.cfg.verbose_level > 2 {
            self.dump("Synchronize", "pods", &messages(&pods));
            self.dump("Synchronize", "containers", &messages(&containers));
        }
        Ok(Vec::new())
    }

    async fn shutdown(&self) {
        info!("{} Shutdown", self.name());
    }

    async fn run_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        self.differ("RunPodSandbox", pod, None);
        Ok(())
    }

    async fn stop_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        self.differ("StopPodSandbox", pod, None);
        Ok(())
    }

    async fn remove_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        self.differ("RemovePodSandbox", pod, None);
        Ok(())
    }

    async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        self.differ("CreateContainer", pod, Some(ctr));
        Ok((ContainerAdjustment::new(), Vec::new()))
    }

    async fn post_create_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.differ("PostCreateContainer", pod, Some(ctr));
        Ok(())
    }

    async fn start_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.differ("StartContainer", pod, Some(ctr));
        Ok(())
    }

    async fn post_start_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.differ("PostStartContainer", pod, Some(ctr));
        Ok(())
    }

    async fn update_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
        _resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.differ("UpdateContainer", pod, Some(ctr));
        Ok(Vec::new())
    }

    async fn post_update_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.differ("PostUpdateContainer", pod, Some(ctr));
        Ok(())
    }

    async fn stop_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.differ("StopContainer", pod, Some(ctr));
        Ok(Vec::new())
    }

    async fn remove_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.differ("RemoveContainer", pod, Some(ctr));
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::new("nri-differ")
        .string("log-file", "", "logfile name, if logging to a file")
        .string(
            "verbose-level",
            "0",
            "Print extra information: 0 only the changes, 1 also the original data at the \
             first index, 2 original and changed data with the difference, 3 everything received",
        )
        .string(
            "indices",
            "0,99",
            "Comma separated list of indices where to install the differ plugin to monitor the changes",
        )
        .boolean("yaml", "Print the diff in yaml")
        .string("socket-path", "", "path of the NRI socket file")
        .parse_env_or_exit();
    plugin_kit::logging::init(false);
    let verbose_level = match flags.get("verbose-level").parse::<i64>() {
        Ok(v) => v,
        Err(_) => {
            eprintln!(
                "invalid value {:?} for flag -verbose-level: parse error",
                flags.get("verbose-level")
            );
            std::process::exit(2)
        }
    };
    if let Some(path) = flags.non_empty("log-file") {
        if let Err(e) = plugin_kit::logging::to_file(&path) {
            error!("failed to open log file {path:?}: {e}");
            std::process::exit(1)
        }
    }
    let indices = match parse_indices(flags.get("indices")) {
        Ok(i) => i,
        Err(e) => {
            error!("{e}");
            std::process::exit(1)
        }
    };
    let cfg = Config {
        verbose_level,
        yaml: flags.flag("yaml"),
    };
    let chain: Chain = Arc::new(Mutex::new(chain(&indices)));
    let mut tasks = Vec::new();
    for idx in indices {
        let mut builder = Stub::builder().idx(format!("{idx:02}")).on_close(|| {
            info!("Connection to the runtime lost, exiting...");
            std::process::exit(1)
        });
        if let Some(path) = flags.non_empty("socket-path") {
            builder = builder.socket_path(path);
        }
        let differ = Differ {
            idx,
            cfg: cfg.clone(),
            chain: Arc::clone(&chain),
        };
        let stub = match builder.build(differ) {
            Ok(stub) => stub,
            Err(e) => {
                error!("Failed to create plugin stub: {e}");
                std::process::exit(1)
            }
        };
        tasks.push(async move {
            if let Err(e) = stub.run().await {
                error!("Plugin exited with error {e}");
                std::process::exit(1)
            }
        });
    }
    futures_join_all(tasks).await;
}

/// Runs the stubs side by side until all return.
async fn futures_join_all<F: std::future::Future<Output = ()> + 'static>(tasks: Vec<F>) {
    let set = tokio::task::LocalSet::new();
    set.run_until(async move {
        let handles: Vec<_> = tasks.into_iter().map(tokio::task::spawn_local).collect();
        for h in handles {
            let _ = h.await;
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices() {
        assert_eq!(parse_indices("0,99").unwrap(), [0, 99]);
        assert_eq!(parse_indices("45,x,80").unwrap(), [45, 0, 80]);
        assert!(parse_indices("10").is_err());
        let c = chain(&[5, 15, 25]);
        assert_eq!((c[&5].prev, c[&5].next), (None, Some(15)));
        assert_eq!((c[&15].prev, c[&15].next), (Some(5), Some(25)));
        assert_eq!((c[&25].prev, c[&25].next), (Some(15), None));
    }

    #[test]
    fn later_instance_sees_what_the_earlier_one_saw() {
        let chain: Chain = Arc::new(Mutex::new(chain(&[5, 15])));
        let cfg = Config {
            verbose_level: 0,
            yaml: false,
        };
        let first = Differ {
            idx: 5,
            cfg: cfg.clone(),
            chain: Arc::clone(&chain),
        };
        let last = Differ {
            idx: 15,
            cfg,
            chain: Arc::clone(&chain),
        };
        let pod = PodSandbox::default();
        let mut ctr = Container {
            name: "c".into(),
            ..Default::default()
        };
        first.differ("CreateContainer", &pod, Some(&ctr));
        assert_eq!(chain.lock().unwrap()[&5].seen.len(), 1);
        ctr.env.push("A=1".into());
        last.differ("CreateContainer", &pod, Some(&ctr));
        assert!(chain.lock().unwrap()[&5].seen.is_empty());
        // Nothing remembered: skipped, no panic.
        last.differ("StartContainer", &pod, Some(&ctr));
    }
}
