//! nri-device-injector: adjusts containers from pod annotations — devices,
//! CDI devices, mounts, network devices, sysctls, I/O priority, scheduling
//! attributes and memory policy — taking the same flags and annotations as
//! upstream's Go `device-injector`, so either can be deployed.
//!
//! Flags: `-idx NN`, `-socket-path PATH`, `-verbose`.

mod inject;

use log::error;
use nri_stub::api::{Container, ContainerAdjustment, ContainerUpdate, PodSandbox};
use nri_stub::{HandlerResult, Plugin};
use plugin_kit::dump::{creating, dump, message};
use plugin_kit::{Flags, StubOptions};

struct Injector {
    verbose: bool,
}

#[nri_stub::plugin]
impl Plugin for Injector {
    async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        let name = creating(self.verbose, pod, ctr);
        let adjust = inject::adjustment(&pod.annotations, &ctr.name, &name).inspect_err(|e| {
            error!("{name}: {e}");
        })?;
        if self.verbose {
            dump(&name, "ContainerAdjustment", &message(&adjust));
        }
        Ok((adjust, Vec::new()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::new("nri-device-injector")
        .string("idx", "", "plugin index to register to NRI")
        .string("socket-path", "", "path of the NRI socket file")
        .boolean("verbose", "enable (more) verbose logging")
        .parse_env_or_exit();
    let verbose = flags.flag("verbose");
    plugin_kit::logging::init(verbose);
    plugin_kit::run_plugin(
        StubOptions::from_flags(&flags, "socket-path"),
        Injector { verbose },
    )
    .await
}
