//! nri-template: the starting point for a new NRI plugin, as upstream's Go
//! `template` sample is. It implements every handler, logs each event and
//! changes nothing; copy it, delete the handlers you do not need (the
//! plugin then no longer subscribes to those events) and fill in the rest.
//!
//! Flags: `-name NAME`, `-idx NN`, `-socket PATH`.
//! Configuration from the runtime (YAML): `cfgParam1`.

use std::sync::Mutex;

use log::info;
use nri_stub::api::{
    Container, ContainerAdjustment, ContainerUpdate, EventMask, LinuxResources, PodSandbox,
};
use nri_stub::{ConfigureInfo, HandlerResult, Plugin};
use plugin_kit::{goyaml, Flags, StubOptions};
use serde::Deserialize;

/// The plugin's configuration. The runtime passes it as text in Configure:
/// the plugin's drop-in file for plugins the runtime launches, or what
/// the runtime's configuration gives for the plugin. Fields are optional
/// (`default`); keys are matched as upstream's Go template matches them.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
struct Config {
    cfg_param1: String,
}

/// The plugin's state. Handlers may run concurrently, so anything they
/// change needs a lock.
#[derive(Default)]
struct Template {
    config: Mutex<Config>,
}

/// `#[nri_stub::plugin]` looks at which handlers this `impl` defines and
/// subscribes the plugin to exactly those events.
#[nri_stub::plugin]
impl Plugin for Template {
    /// Called once the connection is up, before anything else. Returns the
    /// events to subscribe to; `EventMask::EMPTY` means "every event I have
    /// a handler for". An error here makes the runtime drop the plugin.
    async fn configure(&self, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        info!(
            "Connected to {}/{}...",
            info.runtime_name, info.runtime_version
        );
        if info.config.is_empty() {
            return Ok(EventMask::EMPTY);
        }
        let cfg: Config = goyaml::from_str(&info.config)
            .map_err(|e| format!("failed to parse configuration: {e}"))?;
        info!("Got configuration data {cfg:?}...");
        *self.config.lock().unwrap_or_else(|p| p.into_inner()) = cfg;
        Ok(EventMask::EMPTY)
    }

    /// The pods and containers that exist when the plugin connects. The
    /// returned updates are applied to existing containers.
    async fn synchronize(
        &self,
        pods: Vec<PodSandbox>,
        containers: Vec<Container>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        info!(
            "Synchronized state with the runtime ({} pods, {} containers)...",
            pods.len(),
            containers.len()
        );
        Ok(Vec::new())
    }

    /// The runtime is shutting down.
    async fn shutdown(&self) {
        info!("Runtime shutting down...");
    }

    async fn run_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        info!("Started pod {}/{}...", pod.namespace, pod.name);
        Ok(())
    }

    async fn stop_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        info!("Stopped pod {}/{}...", pod.namespace, pod.name);
        Ok(())
    }

    async fn remove_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        info!("Removed pod {}/{}...", pod.namespace, pod.name);
        Ok(())
    }

    /// The container is about to be created. Because it does not exist
    /// yet, this event allows the largest set of changes to its
    /// configuration, including ones that are immutable later: see the
    /// builders on `ContainerAdjustment` (`add_env`, `add_mount`,
    /// `add_device`, `set_linux_cpu_shares`, …). Updates to other, existing
    /// containers may be returned too (`ContainerUpdate::for_container`).
    async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        info!(
            "Creating container {}/{}/{}...",
            pod.namespace, pod.name, ctr.name
        );
        let adjustment = ContainerAdjustment::new();
        let updates = Vec::new();
        Ok((adjustment, updates))
    }

    async fn post_create_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        info!(
            "Created container {}/{}/{}...",
            pod.namespace, pod.name, ctr.name
        );
        Ok(())
    }

    async fn start_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        info!(
            "Starting container {}/{}/{}...",
            pod.namespace, pod.name, ctr.name
        );
        Ok(())
    }

    async fn post_start_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        info!(
            "Started container {}/{}/{}...",
            pod.namespace, pod.name, ctr.name
        );
        Ok(())
    }

    /// The container's resources are about to be updated. The returned
    /// updates may change this update (an update for this container) and
    /// update other containers.
    async fn update_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
        _resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        info!(
            "Updating container {}/{}/{}...",
            pod.namespace, pod.name, ctr.name
        );
        Ok(Vec::new())
    }

    async fn post_update_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        info!(
            "Updated container {}/{}/{}...",
            pod.namespace, pod.name, ctr.name
        );
        Ok(())
    }

    /// The container has stopped; the remaining containers may be updated.
    async fn stop_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        info!(
            "Stopped container {}/{}/{}...",
            pod.namespace, pod.name, ctr.name
        );
        Ok(Vec::new())
    }

    async fn remove_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        info!(
            "Removed container {}/{}/{}...",
            pod.namespace, pod.name, ctr.name
        );
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // Go-style flags, as the Go samples take them.
    let flags = Flags::new("nri-template")
        .string("name", "", "plugin name to register to NRI")
        .string("idx", "", "plugin index to register to NRI")
        .string("socket", "", "path to the plugin socket")
        .parse_env_or_exit();
    plugin_kit::logging::init(false);

    // Name and index: from the flags, else from the runtime (launched
    // plugins get NRI_PLUGIN_NAME/NRI_PLUGIN_IDX), else from the file name
    // (NN-name). The socket: given, else the one the runtime handed over,
    // else /var/run/nri/nri.sock. `run_plugin` builds the stub
    // (`nri_stub::Stub::builder()`), serves the runtime until the
    // connection goes away and exits: status 1 on failure, and at once
    // when the connection is lost (`exit_on_close`), as upstream's template.
    let mut opts = StubOptions::from_flags(&flags, "socket");
    opts.exit_on_close = true;
    plugin_kit::run_plugin(opts, Template::default()).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use plugin_kit::testing::{container, is_empty, pod, TestRuntime};

    /// The plugin as a runtime sees it: connected to a runtime in this
    /// process (nri-rs's runtime core) over a real connection, through a
    /// pod's and a container's whole lifecycle. The template changes
    /// nothing, so every reply is empty; a plugin made from it checks its
    /// adjustments here.
    #[tokio::test(flavor = "current_thread")]
    async fn a_runtime_gets_no_changes_through_a_whole_lifecycle() {
        let existing = pod("kube-system", "dns");
        let runtime = TestRuntime::builder()
            .name("template")
            .existing(
                vec![existing.clone()],
                vec![container(&existing, "coredns")],
            )
            .start(Template::default())
            .await
            .unwrap();
        assert!(runtime.adaptation().has_plugin("50-template"));
        assert!(runtime.sync_updates().is_empty());

        let pod = pod("default", "web");
        let ctr = container(&pod, "app");
        runtime.run_pod_sandbox(&pod).await.unwrap();
        let created = runtime.create_container(&pod, &ctr).await.unwrap();
        // The runtime's merge leaves empty messages in place; a plugin
        // that adjusts checks its fields (`created.adjust.env`, ...).
        assert!(is_empty(&created), "{created:?}");
        runtime.post_create_container(&pod, &ctr).await.unwrap();
        runtime.start_container(&pod, &ctr).await.unwrap();
        runtime.post_start_container(&pod, &ctr).await.unwrap();
        let resources = LinuxResources::default();
        let updated = runtime
            .update_container(&pod, &ctr, Some(&resources))
            .await
            .unwrap();
        assert!(is_empty(&updated), "{updated:?}");
        runtime.post_update_container(&pod, &ctr).await.unwrap();
        let stopped = runtime.stop_container(&pod, &ctr).await.unwrap();
        assert!(is_empty(&stopped), "{stopped:?}");
        runtime.remove_container(&pod, &ctr).await.unwrap();
        runtime.stop_pod_sandbox(&pod).await.unwrap();
        runtime.remove_pod_sandbox(&pod).await.unwrap();
        assert!(runtime.unsolicited_updates().is_empty());
        runtime.stop().await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn configuration_is_parsed_and_bad_configuration_rejected() {
        let t = Template::default();
        let info = |config: &str| ConfigureInfo {
            config: config.to_string(),
            ..Default::default()
        };
        assert_eq!(t.configure(&info("")).await.unwrap(), EventMask::EMPTY);
        t.configure(&info("cfgParam1: hello\nunknown: 1\n"))
            .await
            .unwrap();
        assert_eq!(t.config.lock().unwrap().cfg_param1, "hello");
        let err = t.configure(&info("cfgParam1: [")).await.unwrap_err();
        assert!(err.to_string().starts_with("failed to parse configuration"));
        assert!(t.configure(&info("- a list")).await.is_err());
    }

    #[test]
    fn subscribes_to_the_events_upstreams_template_handles() {
        let events = Template::default().implemented_events().to_string();
        for e in [
            "RunPodSandbox",
            "CreateContainer",
            "UpdateContainer",
            "RemoveContainer",
        ] {
            assert!(events.contains(e), "{events}");
        }
        assert!(!events.contains("UpdatePodSandbox"), "{events}");
        assert!(!events.contains("ValidateContainerAdjustment"), "{events}");
    }
}
