//! nri-default-validator: the default validator of upstream NRI (the rules
//! of `nri_validator`, which a runtime can also run builtin) as an
//! external validating plugin, for runtimes that do not offer the builtin
//! one or to run it with a configuration of its own.
//!
//! Flags: `-name NAME`, `-idx NN`, `-socket-path PATH`, `-config FILE`,
//! `-verbose`. Configuration: the keys of `DefaultValidatorConfig`
//! (`rejectOCIHookAdjustment`, `requiredPlugins`, …), from `-config` and
//! then from the runtime (Configure), the runtime's keys winning.

use std::sync::RwLock;

use log::{error, info};
use nri_stub::api::{EventMask, ValidateContainerAdjustmentRequest};
use nri_stub::{ConfigureInfo, HandlerResult, Plugin};
use nri_validator::{DefaultValidator, DefaultValidatorConfig};
use plugin_kit::config::merge_yaml_in;
use plugin_kit::{Flags, StubOptions};

/// `base` with the keys set in the YAML `text` (either spelling) replaced;
/// errors and warnings name `source` (the `-config` file, or the runtime).
fn updated_from(
    source: &str,
    base: &DefaultValidatorConfig,
    text: &str,
) -> Result<DefaultValidatorConfig, String> {
    merge_yaml_in(source, base, text, canonical_key)
        .map_err(|e| format!("invalid configuration: {e}"))
}

/// The YAML spelling of a configuration key given in either spelling.
fn canonical_key(key: &str) -> String {
    match key {
        "reject_oci_hook_adjustment" => "rejectOCIHookAdjustment",
        "reject_runtime_default_seccomp_adjustment" => "rejectRuntimeDefaultSeccompAdjustment",
        "reject_unconfined_seccomp_adjustment" => "rejectUnconfinedSeccompAdjustment",
        "reject_custom_seccomp_adjustment" => "rejectCustomSeccompAdjustment",
        "reject_namespace_adjustment" => "rejectNamespaceAdjustment",
        "reject_sysctl_adjustment" => "rejectSysctlAdjustment",
        "required_plugins" => "requiredPlugins",
        "tolerate_missing_plugins_annotation" => "tolerateMissingPluginsAnnotation",
        "plugin_permissions" => "pluginPermissions",
        other => other,
    }
    .to_string()
}

struct Validator {
    validator: RwLock<DefaultValidator>,
}

#[nri_stub::plugin]
impl Plugin for Validator {
    async fn configure(&self, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        if !info.config.is_empty() {
            let mut v = self.validator.write().unwrap_or_else(|p| p.into_inner());
            let cfg = updated_from("configuration from the runtime", v.config(), &info.config)
                .inspect_err(|e| error!("{e}"))?;
            info!("configuration from the runtime: {cfg:?}");
            v.set_config(cfg);
        }
        Ok(EventMask::EMPTY)
    }

    async fn validate_container_adjustment(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> HandlerResult<()> {
        let v = self.validator.read().unwrap_or_else(|p| p.into_inner());
        v.validate(req)?;
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::new("nri-default-validator")
        .string(
            "name",
            "default-validator",
            "plugin name to register to NRI",
        )
        .string("idx", "", "plugin index to register to NRI")
        .string("socket-path", "", "path of the NRI socket file")
        .string("config", "", "YAML file with the validator configuration")
        .boolean("verbose", "enable (more) verbose logging")
        .parse_env_or_exit();
    plugin_kit::logging::init(flags.flag("verbose"));
    let mut cfg = DefaultValidatorConfig::default();
    if let Some(path) = flags.non_empty("config") {
        let loaded = std::fs::read_to_string(&path)
            .map_err(|e| format!("failed to read {path:?}: {e}"))
            .and_then(|text| updated_from(&path, &cfg, &text));
        match loaded {
            Ok(c) => cfg = c,
            Err(e) => {
                error!("{e}");
                std::process::exit(1)
            }
        }
    }
    info!("starting with configuration {cfg:?}");
    let validator = Validator {
        validator: RwLock::new(DefaultValidator::new(cfg)),
    };
    let mut opts = StubOptions::from_flags(&flags, "socket-path");
    // A launched plugin is named by the runtime.
    if std::env::var_os(nri_stub::api::PLUGIN_NAME_ENV).is_some() && !flags.is_set("name") {
        opts.name = None;
    }
    plugin_kit::run_plugin(opts, validator).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_in_either_spelling_overrides_key_by_key() {
        let base = updated_from(
            "test",
            &DefaultValidatorConfig::default(),
            "rejectOCIHookAdjustment: true\nrequiredPlugins: [a]\n",
        )
        .unwrap();
        assert!(base.reject_oci_hook_adjustment);
        let cfg = updated_from(
            "test",
            &base,
            "reject_sysctl_adjustment: true\nrequired_plugins: [b, 10-c]\n",
        )
        .unwrap();
        assert!(cfg.reject_oci_hook_adjustment && cfg.reject_sysctl_adjustment);
        assert_eq!(cfg.required_plugins, ["b", "10-c"]);
        assert_eq!(updated_from("test", &cfg, "").unwrap(), cfg);
    }

    #[test]
    fn malformed_configuration() {
        let base = DefaultValidatorConfig::default();
        assert!(updated_from("test", &base, "[1]")
            .unwrap_err()
            .contains("not a mapping"));
        assert!(updated_from("test", &base, "rejectSysctlAdjustment: [").is_err());
        assert!(updated_from("test", &base, "requiredPlugins: 3").is_err());
    }
}
