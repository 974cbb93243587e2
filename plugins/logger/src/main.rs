//! nri-logger: an NRI plugin that logs every pod and container event it
//! sees, and can add or set an annotation and an environment variable on
//! every container it sees created. It takes the same flags and
//! configuration keys as upstream's Go logger, so either can be deployed.
//!
//! Flags (one or two leading dashes): `-idx NN`, `-name NAME`, `-socket PATH`,
//! `-events LIST`, `-log-file PATH`, `-add-annotation KEY`,
//! `-set-annotation KEY`, `-add-env KEY`, `-set-env KEY`.
//!
//! Configuration from the runtime (YAML): `logFile`, `events` (a list),
//! `addAnnotation`, `setAnnotation`, `addEnv`, `setEnv`.

use std::sync::Mutex;

use log::{error, info};
use nri_stub::api::{
    Container, ContainerAdjustment, ContainerUpdate, EventMask, LinuxResources, PodSandbox,
    ValidateContainerAdjustmentRequest,
};
use nri_stub::{ConfigureInfo, HandlerResult, Plugin};
use plugin_kit::config::merge_yaml_in;
use plugin_kit::dump::{dump, message as one, messages as many, optional};
use plugin_kit::logging::Format;
use plugin_kit::{Flags, Parsed, StubOptions};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    log_file: String,
    events: Vec<String>,
    add_annotation: String,
    set_annotation: String,
    add_env: String,
    set_env: String,
}

impl Config {
    /// Parses the runtime's configuration on top of `self` (keys it does
    /// not set keep their values, as unmarshalling into Go's struct does).
    fn updated(&self, text: &str) -> Result<Config, String> {
        merge_yaml_in("configuration from the runtime", self, text, str::to_string)
            .map_err(|e| format!("failed to parse provided configuration: {e}"))
    }
}

struct Logger {
    config: Mutex<Config>,
    /// Subscription from `-events`, used when the runtime gives no config.
    mask: EventMask,
}

impl Logger {
    fn config(&self) -> Config {
        self.config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The value upstream's logger puts into what it adds.
fn tag() -> String {
    format!("logger-pid-{}", std::process::id())
}

#[nri_stub::plugin]
impl Plugin for Logger {
    async fn configure(&self, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        info!(
            "got configuration data: {:?} from runtime {} {}",
            info.config, info.runtime_name, info.runtime_version
        );
        if info.config.is_empty() {
            return Ok(self.mask);
        }
        let old = self.config();
        let new = old.updated(&info.config)?;
        let mask = EventMask::parse(&new.events)
            .map_err(|e| format!("failed to parse events in configuration: {e}"))?;
        if new.log_file != old.log_file && !new.log_file.is_empty() {
            plugin_kit::logging::to_file(&new.log_file)
                .map_err(|e| format!("failed to open log file {:?}: {e}", new.log_file))?;
        }
        *self.config.lock().unwrap_or_else(|p| p.into_inner()) = new;
        Ok(mask)
    }

    async fn synchronize(
        &self,
        pods: Vec<PodSandbox>,
        containers: Vec<Container>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        dump("Synchronize", "pods", &many(&pods));
        dump("Synchronize", "containers", &many(&containers));
        Ok(Vec::new())
    }

    async fn shutdown(&self) {
        info!("Shutdown");
    }

    async fn run_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        dump("RunPodSandbox", "pod", &one(pod));
        Ok(())
    }

    async fn update_pod_sandbox(
        &self,
        pod: &PodSandbox,
        overhead: Option<&LinuxResources>,
        resources: Option<&LinuxResources>,
    ) -> HandlerResult<()> {
        dump("UpdatePodSandbox", "pod", &one(pod));
        dump("UpdatePodSandbox", "overheadResources", &optional(overhead));
        dump("UpdatePodSandbox", "resources", &optional(resources));
        Ok(())
    }

    async fn post_update_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        dump("PostUpdatePodSandbox", "pod", &one(pod));
        Ok(())
    }

    async fn stop_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        dump("StopPodSandbox", "pod", &one(pod));
        Ok(())
    }

    async fn remove_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        dump("RemovePodSandbox", "pod", &one(pod));
        Ok(())
    }

    async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        dump("CreateContainer", "pod", &one(pod));
        dump("CreateContainer", "container", &one(ctr));
        let cfg = self.config();
        let mut adjust = ContainerAdjustment::new();
        if !cfg.add_annotation.is_empty() {
            adjust.add_annotation(cfg.add_annotation.clone(), tag());
        }
        if !cfg.set_annotation.is_empty() {
            adjust.remove_annotation(&cfg.set_annotation);
            adjust.add_annotation(cfg.set_annotation.clone(), tag());
        }
        if !cfg.add_env.is_empty() {
            adjust.add_env(cfg.add_env.clone(), tag());
        }
        if !cfg.set_env.is_empty() {
            adjust.remove_env(&cfg.set_env);
            adjust.add_env(cfg.set_env.clone(), tag());
        }
        Ok((adjust, Vec::new()))
    }

    async fn post_create_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        dump("PostCreateContainer", "pod", &one(pod));
        dump("PostCreateContainer", "container", &one(ctr));
        Ok(())
    }

    async fn start_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        dump("StartContainer", "pod", &one(pod));
        dump("StartContainer", "container", &one(ctr));
        Ok(())
    }

    async fn post_start_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        dump("PostStartContainer", "pod", &one(pod));
        dump("PostStartContainer", "container", &one(ctr));
        Ok(())
    }

    async fn update_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
        resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        dump("UpdateContainer", "pod", &one(pod));
        dump("UpdateContainer", "container", &one(ctr));
        dump("UpdateContainer", "resources", &optional(resources));
        Ok(Vec::new())
    }

    async fn post_update_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        dump("PostUpdateContainer", "pod", &one(pod));
        dump("PostUpdateContainer", "container", &one(ctr));
        Ok(())
    }

    async fn stop_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        dump("StopContainer", "pod", &one(pod));
        dump("StopContainer", "container", &one(ctr));
        Ok(Vec::new())
    }

    async fn remove_container(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        dump("RemoveContainer", "pod", &one(pod));
        dump("RemoveContainer", "container", &one(ctr));
        Ok(())
    }

    async fn validate_container_adjustment(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> HandlerResult<()> {
        dump("ValidateContainerAdjustment", "request", &one(req));
        Ok(())
    }
}

/// The flags of upstream's logger, plus `-name` and `-socket` (nri-rs).
fn flags() -> Flags {
    Flags::new("nri-logger")
        .string("idx", "", "plugin index to register to NRI")
        .string("name", "", "plugin name to register to NRI (nri-rs)")
        .string("socket-path", "", "path of the NRI socket file")
        .string("socket", "", "same as -socket-path (nri-rs)")
        .string(
            "events",
            "",
            "comma-separated list of events to subscribe for",
        )
        .string("log-file", "", "logfile name, if logging to a file")
        .string("add-annotation", "", "add this annotation to containers")
        .string("set-annotation", "", "set this annotation on containers")
        .string(
            "add-env",
            "",
            "add this environment variable for containers",
        )
        .string(
            "set-env",
            "",
            "set this environment variable for containers",
        )
}

/// The configuration the flags give.
fn flag_config(flags: &Parsed) -> Config {
    Config {
        log_file: flags.get("log-file").to_string(),
        events: Vec::new(),
        add_annotation: flags.get("add-annotation").to_string(),
        set_annotation: flags.get("set-annotation").to_string(),
        add_env: flags.get("add-env").to_string(),
        set_env: flags.get("set-env").to_string(),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    plugin_kit::logging::init_with(Format::Plain, false);
    let flags = flags().parse_env_or_exit();
    let events = flags.get("events").to_string();
    let config = flag_config(&flags);
    if !config.log_file.is_empty() {
        if let Err(e) = plugin_kit::logging::to_file(&config.log_file) {
            eprintln!("failed to open log file {:?}: {e}", config.log_file);
            std::process::exit(1)
        }
    }
    let mask = if events.is_empty() {
        EventMask::EMPTY
    } else {
        match events.parse::<EventMask>() {
            Ok(mask) => mask,
            Err(e) => {
                error!("failed to parse events: {e}");
                std::process::exit(1)
            }
        }
    };
    let mut config = config;
    config.events = events
        .split(',')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();

    let opts = StubOptions {
        name: flags.non_empty("name"),
        idx: flags.non_empty("idx"),
        socket_path: flags.non_empty("socket-path").or(flags.non_empty("socket")),
        exit_on_close: true,
    };
    let logger = Logger {
        config: Mutex::new(config),
        mask,
    };
    plugin_kit::run_plugin(opts, logger).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_accept_go_and_gnu_spelling() {
        let f = flags()
            .parse(args(&[
                "-idx",
                "10",
                "--events=CreateContainer,StopContainer",
                "-add-env",
                "FOO",
            ]))
            .unwrap();
        assert_eq!(f.get("idx"), "10");
        assert_eq!(f.get("events"), "CreateContainer,StopContainer");
        assert_eq!(flag_config(&f).add_env, "FOO");
        assert!(flags().parse(args(&["-bogus"])).is_err());
        assert!(flags().parse(args(&["-idx"])).is_err());
    }

    #[test]
    fn runtime_config_overrides_flags_key_by_key() {
        let base = Config {
            add_env: "FROM_FLAG".into(),
            log_file: "/tmp/a".into(),
            ..Default::default()
        };
        let cfg = base
            .updated("events: [CreateContainer]\nsetAnnotation: foo\n")
            .unwrap();
        assert_eq!(cfg.add_env, "FROM_FLAG");
        assert_eq!(cfg.set_annotation, "foo");
        assert_eq!(cfg.events, ["CreateContainer"]);
        assert!(base
            .updated("[1, 2]")
            .unwrap_err()
            .contains("not a mapping"));
        assert!(base
            .updated("events: {")
            .unwrap_err()
            .starts_with("failed to parse provided configuration"));
    }
}
