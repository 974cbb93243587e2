//! nri-v010-adapter: runs NRI v0.1.0 one-shot plugins from NRI events, as
//! upstream's Go `v010-adapter` does: a pod's start and stop and a
//! container's start and stop become v0.1.0 `create` and `delete` requests
//! to the plugins listed in `/etc/nri/conf.json` (found in `PATH` and
//! `/opt/nri/bin`).
//!
//! Flags: `-idx NN`, `-socket PATH` (upstream's), and nri-rs's `-conf FILE`
//! and `-bin-dir DIR` for other locations.

mod v1;

use std::collections::BTreeMap;
use std::path::PathBuf;

use log::{error, info};
use nri_stub::api::{
    Container, ContainerUpdate, EventMask, LinuxNamespace, LinuxResources, PodSandbox,
};
use nri_stub::{ConfigureInfo, HandlerResult, Plugin};
use plugin_kit::{Flags, StubOptions};
use v1::{Client, Spec, State};

struct Adapter {
    client: Client,
}

fn sandbox(pod: &PodSandbox) -> (&str, BTreeMap<String, String>) {
    (
        pod.id.as_str(),
        pod.labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// The spec of a pod or container: its annotations and, if it has a linux
/// part, its namespaces, resources and cgroups path.
fn spec(
    annotations: &std::collections::HashMap<String, String>,
    linux: Option<(&[LinuxNamespace], Option<&LinuxResources>, &str)>,
) -> Spec {
    let (namespaces, resources, cgroups_path) = linux.unwrap_or((&[], None, ""));
    Spec::new(annotations, namespaces, resources, cgroups_path)
}

fn pod_spec(pod: &PodSandbox) -> Spec {
    let linux = pod.linux.as_ref();
    spec(
        &pod.annotations,
        linux.map(|l| {
            (
                &l.namespaces[..],
                l.resources.as_ref(),
                l.cgroups_path.as_str(),
            )
        }),
    )
}

fn container_spec(ctr: &Container) -> Spec {
    let linux = ctr.linux.as_ref();
    spec(
        &ctr.annotations,
        linux.map(|l| {
            (
                &l.namespaces[..],
                l.resources.as_ref(),
                l.cgroups_path.as_str(),
            )
        }),
    )
}

impl Adapter {
    /// Runs the v0.1.0 plugins; a failure is logged with `what` first.
    async fn invoke(
        &self,
        state: State,
        (id, pid): (&str, u32),
        spec: Spec,
        pod: &PodSandbox,
        what: &str,
    ) -> Result<(), String> {
        self.client
            .invoke(state, id, pid, spec, sandbox(pod))
            .await
            .map(|_| ())
            .inspect_err(|e| error!("{what}: {e}"))
    }
}

#[nri_stub::plugin]
impl Plugin for Adapter {
    async fn configure(&self, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        info!(
            "Connected to {}/{}...",
            info.runtime_name, info.runtime_version
        );
        Ok(EventMask::EMPTY)
    }

    async fn shutdown(&self) {
        info!("Runtime shutting down...");
    }

    async fn run_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        info!("Started pod {}/{}...", pod.namespace, pod.name);
        let who = (pod.id.as_str(), pod.pid);
        Ok(self
            .invoke(State::Create, who, pod_spec(pod), pod, "nri invoke failed")
            .await?)
    }

    async fn stop_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        info!("Stopped pod {}/{}...", pod.namespace, pod.name);
        let what = format!("Failed to delete nri for {:?}", pod.id);
        let who = (pod.id.as_str(), pod.pid);
        Ok(self
            .invoke(State::Delete, who, pod_spec(pod), pod, &what)
            .await?)
    }

    async fn start_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        info!(
            "Starting container {}/{}/{}...",
            pod.namespace, pod.name, ctr.name
        );
        self.client
            .invoke(
                State::Create,
                &ctr.id,
                ctr.pid,
                container_spec(ctr),
                sandbox(pod),
            )
            .await
            .map_err(|e| {
                error!("nri invoke failed: {e}");
                e
            })?;
        Ok(())
    }

    async fn stop_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        info!(
            "Stopped container {}/{}/{}...",
            pod.namespace, pod.name, ctr.name
        );
        // As upstream: a failure is logged, the stop goes on.
        if let Err(e) = self
            .client
            .invoke(
                State::Delete,
                &ctr.id,
                ctr.pid,
                container_spec(ctr),
                sandbox(pod),
            )
            .await
        {
            error!("Failed to delete nri for {:?}: {e}", ctr.id);
        }
        Ok(Vec::new())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::new("nri-v010-adapter")
        .string("idx", "", "plugin index to register to NRI")
        .string("socket", "", "path to NRI socket")
        .string(
            "conf",
            v1::DEFAULT_CONF_PATH,
            "NRI v0.1.0 configuration (nri-rs)",
        )
        .string(
            "bin-dir",
            v1::DEFAULT_BINARY_PATH,
            "directory of NRI v0.1.0 plugins, after PATH (nri-rs)",
        )
        .parse_env_or_exit();
    plugin_kit::logging::init(false);
    let adapter = Adapter {
        client: Client {
            conf_path: PathBuf::from(flags.get("conf")),
            bin_dir: PathBuf::from(flags.get("bin-dir")),
        },
    };
    plugin_kit::run_plugin(StubOptions::from_flags(&flags, "socket"), adapter).await
}
