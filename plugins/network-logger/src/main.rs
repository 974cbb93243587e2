//! nri-network-logger: logs each pod's network namespace and IP addresses
//! as pods start, stop and go away (and all pods at synchronization), as
//! upstream's Go `network-logger` does. It changes nothing.
//!
//! Flags: `-idx NN`, `-socket PATH`.

use log::info;
use nri_stub::api::{Container, ContainerUpdate, PodSandbox};
use nri_stub::{HandlerResult, Plugin};
use plugin_kit::{Flags, StubOptions};

/// The pod's network namespace path, `<host-network>` without one.
fn network_namespace(pod: &PodSandbox) -> &str {
    pod.linux
        .namespaces
        .iter()
        .find(|ns| ns.type_ == "network")
        .map_or("<host-network>", |ns| ns.path.as_str())
}

/// IP addresses as Go's `%v` prints a string slice: `[a b]`.
fn ips(pod: &PodSandbox) -> String {
    format!("[{}]", pod.ips.join(" "))
}

struct NetworkLogger;

#[nri_stub::plugin]
impl Plugin for NetworkLogger {
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
        for pod in &pods {
            info!(
                "pod {}/{}: namespace={} ips={}",
                pod.namespace,
                pod.name,
                network_namespace(pod),
                ips(pod)
            );
        }
        Ok(Vec::new())
    }

    async fn shutdown(&self) {
        info!("Runtime shutting down...");
    }

    async fn run_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        info!(
            "Started pod {}/{}: namespace={} ips={}",
            pod.namespace,
            pod.name,
            network_namespace(pod),
            ips(pod)
        );
        Ok(())
    }

    async fn stop_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        info!(
            "Stopped pod {}/{}: ips={}",
            pod.namespace,
            pod.name,
            ips(pod)
        );
        Ok(())
    }

    async fn remove_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        info!(
            "Removed pod {}/{}: ips={}",
            pod.namespace,
            pod.name,
            ips(pod)
        );
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::new("nri-network-logger")
        .string("idx", "", "plugin index to register to NRI")
        .string("socket", "", "path to NRI socket")
        .parse_env_or_exit();
    plugin_kit::logging::init(false);
    plugin_kit::run_plugin(StubOptions::from_flags(&flags, "socket"), NetworkLogger).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_stub::api::LinuxNamespace;

    #[test]
    fn namespace_and_ips_as_upstream_prints_them() {
        let mut pod = PodSandbox {
            ips: vec!["10.0.0.2".into(), "fd00::2".into()],
            ..Default::default()
        };
        assert_eq!(network_namespace(&pod), "<host-network>");
        assert_eq!(ips(&pod), "[10.0.0.2 fd00::2]");
        pod.linux
            .mut_or_insert_default()
            .namespaces
            .push(LinuxNamespace {
                type_: "network".into(),
                path: "/var/run/netns/cni-1".into(),
                ..Default::default()
            });
        assert_eq!(network_namespace(&pod), "/var/run/netns/cni-1");
        assert_eq!(ips(&PodSandbox::default()), "[]");
    }
}
