//! The default validator: the builtin NRI plugin (`00-default-validator`)
//! that lets a runtime refuse container adjustments it considers unsafe and
//! insist on plugins being present (upstream `plugins/default-validator`).
//!
//! It only looks at a [`ValidateContainerAdjustmentRequest`]: who claimed
//! which field ([`OwningPlugins`]), the pristine container and the plugins
//! taking part. See `docs/validator.md` for the rules, the messages and where
//! this port differs from upstream.

pub mod annotations;
pub mod as_read;
pub mod permissions;

#[cfg(test)]
mod tests;

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use annotations::{parse_go_bool, parse_plugin_list};
use nri_api::quote::go_quote;
use nri_api::security_profile::ProfileType;
use nri_api::{
    Field, OwningPlugins, PluginInstance, PodSandbox, ValidateContainerAdjustmentRequest,
};

pub use annotations::{effective_annotation, ANNOTATION_DOMAIN, REQUIRED_PLUGINS_ANNOTATION};
pub use permissions::{
    field_name, permission_kind, PermissionKind, PluginPermissions, UnknownPermissionKind,
    ANY_PLUGIN,
};

/// Base name the default validator registers under.
pub const DEFAULT_VALIDATOR_NAME: &str = "default-validator";
/// Index the default validator registers under.
pub const DEFAULT_VALIDATOR_INDEX: &str = "00";

/// Configuration of the default validator.
///
/// Keys are read in upstream's YAML spelling (`rejectOCIHookAdjustment`) and
/// in its TOML spelling (`reject_oci_hook_adjustment`); they are written in
/// the YAML one. Missing or null keys take the default, unknown keys are
/// ignored, as with Go's decoders; only the entries of our own
/// `pluginPermissions` refuse unknown keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DefaultValidatorConfig {
    /// Whether the runtime should run the default validator at all. The
    /// validator itself does not look at it.
    #[serde(deserialize_with = "null_as_default")]
    pub enable: bool,
    /// Reject any OCI hook injection.
    #[serde(
        rename = "rejectOCIHookAdjustment",
        alias = "reject_oci_hook_adjustment",
        deserialize_with = "null_as_default"
    )]
    pub reject_oci_hook_adjustment: bool,
    /// Reject seccomp policy changes to containers with the runtime's
    /// default profile.
    #[serde(
        rename = "rejectRuntimeDefaultSeccompAdjustment",
        alias = "reject_runtime_default_seccomp_adjustment",
        deserialize_with = "null_as_default"
    )]
    pub reject_runtime_default_seccomp_adjustment: bool,
    /// Reject seccomp policy changes to unconfined containers (also those
    /// without a profile).
    #[serde(
        rename = "rejectUnconfinedSeccompAdjustment",
        alias = "reject_unconfined_seccomp_adjustment",
        deserialize_with = "null_as_default"
    )]
    pub reject_unconfined_seccomp_adjustment: bool,
    /// Reject seccomp policy changes to containers with a custom
    /// (`LOCALHOST`) profile.
    #[serde(
        rename = "rejectCustomSeccompAdjustment",
        alias = "reject_custom_seccomp_adjustment",
        deserialize_with = "null_as_default"
    )]
    pub reject_custom_seccomp_adjustment: bool,
    /// Reject any Linux namespace adjustment.
    #[serde(
        rename = "rejectNamespaceAdjustment",
        alias = "reject_namespace_adjustment",
        deserialize_with = "null_as_default"
    )]
    pub reject_namespace_adjustment: bool,
    /// Reject any sysctl adjustment.
    #[serde(
        rename = "rejectSysctlAdjustment",
        alias = "reject_sysctl_adjustment",
        deserialize_with = "null_as_default"
    )]
    pub reject_sysctl_adjustment: bool,
    /// Plugins (`name` or `idx-name`) every container requires.
    ///
    /// This applies to all containers, static pods included: annotate those
    /// to tolerate missing plugins (see `tolerate_missing_annotation`), or
    /// they will not start.
    #[serde(
        rename = "requiredPlugins",
        alias = "required_plugins",
        deserialize_with = "null_as_default"
    )]
    pub required_plugins: Vec<String>,
    /// Key of a pod annotation that, when it applies to a container and is
    /// true, waives the required-plugins check. Empty: no such annotation.
    #[serde(
        rename = "tolerateMissingPluginsAnnotation",
        alias = "tolerate_missing_plugins_annotation",
        deserialize_with = "null_as_default"
    )]
    pub tolerate_missing_annotation: String,
    /// Per-plugin permissions, an nri-rs extension. Empty: every plugin may
    /// change everything, as upstream. Otherwise each change must be of a
    /// kind the changing plugin's entry allows (see [`permissions`]).
    /// Written only when non-empty, so upstream configurations round-trip.
    #[serde(
        rename = "pluginPermissions",
        alias = "plugin_permissions",
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub plugin_permissions: Vec<PluginPermissions>,
}

impl DefaultValidatorConfig {
    /// Parses a configuration given as YAML or JSON with upstream's keys
    /// (`enable`, `rejectOCIHookAdjustment`, `requiredPlugins`,
    /// `tolerateMissingPluginsAnnotation`, ...). Blank text is the default
    /// configuration, which leaves the validator off.
    ///
    /// An error ends with the key path (`invalid type: string "yes",
    /// expected a boolean, at rejectOCIHookAdjustment`). Unknown keys are ignored,
    /// as upstream does, with a warning naming each, except inside a
    /// `pluginPermissions` entry, where they are errors.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        Self::from_yaml_in("default validator config", text)
    }

    /// [`from_yaml`](Self::from_yaml) for text read from `source` (a file
    /// name, say), which the unknown-key warnings name.
    pub fn from_yaml_in(source: &str, text: &str) -> Result<Self, ConfigError> {
        Self::parse(text, &mut |key| {
            log::warn!("{source}: unknown key {} (ignored)", go_quote(&key))
        })
    }

    /// Parses `text`, passing the path of each unknown key to `unknown`.
    fn parse(text: &str, unknown: &mut dyn FnMut(String)) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        nri_yaml::from_str(text, unknown).map_err(|e| ConfigError(e.to_string()))
    }
}

/// Why a default validator configuration does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

/// Reads an explicit null as the type's default, as Go's decoders do.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Why the default validator refused an adjustment.
///
/// Upstream wraps rule violations in `ErrValidation` and returns annotation
/// parse errors unwrapped; the two variants keep that distinction, and the
/// texts are upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// A rule rejected the adjustment. Displays as
    /// `validation error: <violation>`.
    #[error("validation error: {0}")]
    Rejected(Violation),
    /// A pod annotation the validator reads has an invalid value. Displays
    /// as `invalid <key> annotation "<value>": <reason>`.
    #[error("invalid {key} annotation {}: {reason}", go_quote(.value))]
    InvalidAnnotation {
        /// The annotation key as configured, without any scope suffix.
        key: String,
        /// The offending value.
        value: String,
        /// Why it does not parse (the parser's message).
        reason: String,
    },
}

impl ValidationError {
    /// Whether this is a rule violation (upstream: wraps `ErrValidation`).
    pub fn is_violation(&self) -> bool {
        matches!(self, ValidationError::Rejected(_))
    }
}

/// A broken rule, with the plugins responsible.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// Plugins injected OCI hooks. `owners` is the comma-separated list of
    /// the injecting plugins.
    OciHookInjection { owners: String },
    /// A plugin changed the seccomp policy of a container whose profile is
    /// of a restricted kind.
    SeccompPolicyAdjustment {
        owner: String,
        profile: SeccompProfileKind,
    },
    /// Plugins adjusted namespaces: `(namespace type, plugin)` pairs,
    /// sorted by namespace type.
    NamespaceAdjustment { owners: Vec<(String, String)> },
    /// Required plugins are missing, in the order they are required
    /// (configured ones first, then annotated ones).
    RequiredPluginsMissing { missing: Vec<String> },
    /// Plugins adjusted sysctls: one owner per adjusted key, in key order.
    SysctlAdjustment { owners: Vec<String> },
    /// A plugin made a change its permissions do not allow. Of several,
    /// the first by container (the validated one first, then by ID), field
    /// number, key and plugin; `more` counts the others.
    NotPermitted {
        /// The plugin, without any clear marker.
        plugin: String,
        /// The container changed, if it is not the one being validated.
        container: Option<String>,
        /// The `Field` number, possibly one this version does not know.
        field: i32,
        /// The field's kind; `None` if the field is unknown.
        kind: Option<PermissionKind>,
        /// The key of a compound field.
        key: Option<String>,
        /// How many other changes were not permitted.
        more: usize,
    },
    /// A plugin added a mount whose host source lies outside its
    /// `mountSources`. Of several, the first in the adjustment's order;
    /// `more` counts the others.
    MountSourceNotPermitted {
        /// The plugin that owns the mount's destination.
        plugin: String,
        /// Where the mount goes in the container.
        destination: String,
        /// The host path refused.
        source: String,
        /// How many other mounts were refused.
        more: usize,
    },
}

/// The kind of seccomp profile a container had before any plugin ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeccompProfileKind {
    /// `UNCONFINED`, or no profile at all.
    Unconfined,
    /// `RUNTIME_DEFAULT`.
    RuntimeDefault,
    /// `LOCALHOST`.
    Custom,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::OciHookInjection { owners } => {
                let noun = if owners.contains(',') {
                    "plugins"
                } else {
                    "plugin"
                };
                write!(
                    f,
                    "{noun} {} attempted restricted OCI hook injection",
                    go_quote(owners)
                )
            }
            // The double spaces are upstream's, kept so reasons compare equal.
            Violation::SeccompPolicyAdjustment { owner, profile } => {
                let kind = match profile {
                    SeccompProfileKind::Unconfined => " unconfined",
                    SeccompProfileKind::RuntimeDefault => "runtime default",
                    SeccompProfileKind::Custom => " custom",
                };
                write!(
                    f,
                    "plugin {owner} attempted restricted {kind} seccomp policy adjustment"
                )
            }
            Violation::NamespaceAdjustment { owners } => {
                let offenders: Vec<String> = owners
                    .iter()
                    .map(|(ns, plugin)| {
                        format!("{} (namespace {})", go_quote(plugin), go_quote(ns))
                    })
                    .collect();
                write!(
                    f,
                    "attempted restricted namespace adjustment by plugin(s) {}",
                    offenders.join(", ")
                )
            }
            Violation::RequiredPluginsMissing { missing } => {
                let noun = if missing.len() == 1 {
                    "plugin"
                } else {
                    "plugins"
                };
                write!(
                    f,
                    "required {noun} {} not present",
                    go_quote(&missing.join(","))
                )
            }
            Violation::SysctlAdjustment { owners } => write!(
                f,
                "attempted restricted sysctl adjustment by plugin(s) {}",
                owners.join(", ")
            ),
            Violation::NotPermitted {
                plugin,
                container,
                field,
                kind,
                key,
                more,
            } => {
                let plugin = go_quote(plugin);
                match (kind, permissions::field_name(*field)) {
                    (Some(kind), Some(name)) => {
                        write!(f, "plugin {plugin} not permitted to adjust {kind}: {name}")?;
                        if let Some(key) = key {
                            write!(f, " {}", go_quote(key))?;
                        }
                        if let Some(container) = container {
                            write!(f, " of container {}", go_quote(container))?;
                        }
                    }
                    _ => write!(
                        f,
                        "plugin {plugin} not permitted to adjust field {field}, unknown to this validator"
                    )?,
                }
                write_more(f, *more)
            }
            Violation::MountSourceNotPermitted {
                plugin,
                destination,
                source,
                more,
            } => {
                write!(
                    f,
                    "plugin {} not permitted to mount {} at {}: source outside its mountSources",
                    go_quote(plugin),
                    go_quote(source),
                    go_quote(destination)
                )?;
                write_more(f, *more)
            }
        }
    }
}

/// The tail of a message that reports one of several refusals.
fn write_more(f: &mut fmt::Formatter<'_>, more: usize) -> fmt::Result {
    if more > 0 {
        write!(f, ", and {more} more not permitted")?;
    }
    Ok(())
}

/// The default validator.
#[derive(Debug, Clone, Default)]
pub struct DefaultValidator {
    cfg: DefaultValidatorConfig,
}

impl DefaultValidator {
    /// A validator applying `cfg`.
    pub fn new(cfg: DefaultValidatorConfig) -> Self {
        Self { cfg }
    }

    /// The configuration in use.
    pub fn config(&self) -> &DefaultValidatorConfig {
        &self.cfg
    }

    /// Replaces the configuration.
    pub fn set_config(&mut self, cfg: DefaultValidatorConfig) {
        self.cfg = cfg;
    }

    /// Checks a container adjustment. The checks run in upstream's order,
    /// OCI hooks, seccomp, namespaces, required plugins, sysctl, then the
    /// plugin permissions, and the first failure is returned.
    pub fn validate(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<(), ValidationError> {
        log::debug!(
            "validating adjustment of container {}/{}/{}",
            req.pod.namespace,
            req.pod.name,
            req.container.name
        );
        self.validate_rules(req)
            .inspect_err(|err| log::error!("rejecting adjustment: {err}"))
    }

    fn validate_rules(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<(), ValidationError> {
        let violation = self
            .check_oci_hooks(req)
            .or_else(|| self.check_seccomp_policy(req))
            .or_else(|| self.check_namespaces(req));
        let violation = match violation {
            Some(violation) => Some(violation),
            // The only check that can also fail on a malformed annotation.
            None => self.check_required_plugins(req)?,
        };
        // Permissions come last so that, whatever they say, upstream's
        // checks report exactly what upstream would.
        let violation = violation
            .or_else(|| self.check_sysctl(req))
            .or_else(|| permissions::check(&self.cfg.plugin_permissions, req));
        match violation {
            Some(violation) => Err(ValidationError::Rejected(violation)),
            None => Ok(()),
        }
    }

    fn check_oci_hooks(&self, req: &ValidateContainerAdjustmentRequest) -> Option<Violation> {
        if req.adjust.is_none() || !self.cfg.reject_oci_hook_adjustment {
            return None;
        }
        let owners = req
            .owners
            .simple_owner(&req.container.id, Field::OciHooks)?;
        Some(Violation::OciHookInjection {
            owners: owners.to_string(),
        })
    }

    fn check_seccomp_policy(&self, req: &ValidateContainerAdjustmentRequest) -> Option<Violation> {
        if req.adjust.is_none() {
            return None;
        }
        let owner = req
            .owners
            .simple_owner(&req.container.id, Field::SeccompPolicy)?;
        let profile = pristine_seccomp_profile(req)?;
        let rejected = match profile {
            SeccompProfileKind::Unconfined => self.cfg.reject_unconfined_seccomp_adjustment,
            SeccompProfileKind::RuntimeDefault => {
                self.cfg.reject_runtime_default_seccomp_adjustment
            }
            SeccompProfileKind::Custom => self.cfg.reject_custom_seccomp_adjustment,
        };
        rejected.then(|| Violation::SeccompPolicyAdjustment {
            owner: owner.to_string(),
            profile,
        })
    }

    fn check_namespaces(&self, req: &ValidateContainerAdjustmentRequest) -> Option<Violation> {
        if req.adjust.is_none() || !self.cfg.reject_namespace_adjustment {
            return None;
        }
        let mut owners: Vec<(String, String)> = req
            .owners
            .compound_owners(&req.container.id, Field::Namespace)
            .map(|(ns, plugin)| (ns.to_string(), plugin.to_string()))
            .collect();
        if owners.is_empty() {
            return None;
        }
        // Upstream lists them in Go's random map order.
        owners.sort();
        Some(Violation::NamespaceAdjustment { owners })
    }

    fn check_sysctl(&self, req: &ValidateContainerAdjustmentRequest) -> Option<Violation> {
        if !self.cfg.reject_sysctl_adjustment {
            return None;
        }
        let linux = req.adjust.as_ref()?.linux.as_ref()?;
        // Upstream walks the keys in Go's random map order.
        let mut keys: Vec<&String> = linux.sysctl.keys().collect();
        keys.sort();
        let owners: Vec<String> = keys
            .into_iter()
            .filter_map(|key| sysctl_owner(&req.owners, &req.container.id, key))
            .collect();
        (!owners.is_empty()).then_some(Violation::SysctlAdjustment { owners })
    }

    /// `Ok(None)` if all required plugins are present or missing ones are
    /// tolerated; an error if an annotation is malformed.
    fn check_required_plugins(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<Option<Violation>, ValidationError> {
        let pod = req.pod.get_or_default();
        let container = req.container.name.as_str();
        self.missing_plugins(&req.plugins, |key| {
            effective_annotation(pod, key, container)
        })
    }

    /// Checks that the plugins required of a pod sandbox are among
    /// `plugins`: the configured ones and those its annotations name, in
    /// their pod-wide forms (`<key>/pod` or `<key>`), unless its toleration
    /// annotation says otherwise. Upstream checks only containers; this
    /// serves runtimes that guard pods too. The texts are the container
    /// check's.
    pub fn check_pod_required_plugins(
        &self,
        pod: &PodSandbox,
        plugins: &[PluginInstance],
    ) -> Result<(), ValidationError> {
        match self.missing_plugins(plugins, |key| pod_annotation(pod, key))? {
            Some(violation) => Err(ValidationError::Rejected(violation)),
            None => Ok(()),
        }
    }

    /// The required plugins not among `plugins`, unless missing ones are
    /// tolerated; `annotation` finds an annotation's value in scope.
    fn missing_plugins<'a>(
        &self,
        plugins: &[PluginInstance],
        annotation: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Option<Violation>, ValidationError> {
        let tolerate = self.cfg.tolerate_missing_annotation.as_str();
        if !tolerate.is_empty() {
            if let Some(value) = annotation(tolerate) {
                let tolerated = parse_go_bool(value)
                    .map_err(|reason| invalid_annotation(tolerate, value, reason))?;
                if tolerated {
                    return Ok(None);
                }
            }
        }
        let mut required = self.cfg.required_plugins.clone();
        if let Some(value) = annotation(REQUIRED_PLUGINS_ANNOTATION) {
            let annotated = parse_plugin_list(value)
                .map_err(|reason| invalid_annotation(REQUIRED_PLUGINS_ANNOTATION, value, reason))?;
            required.extend(annotated);
        }
        let missing: Vec<String> = required
            .into_iter()
            .filter(|name| !plugin_present(plugins, name))
            .collect();
        Ok((!missing.is_empty()).then_some(Violation::RequiredPluginsMissing { missing }))
    }
}

/// A pod annotation in its pod-wide forms, `<key>/pod` first.
fn pod_annotation<'a>(pod: &'a PodSandbox, key: &str) -> Option<&'a str> {
    pod.annotations
        .get(&format!("{key}/pod"))
        .or_else(|| pod.annotations.get(key))
        .map(String::as_str)
}

fn invalid_annotation(key: &str, value: &str, reason: String) -> ValidationError {
    ValidationError::InvalidAnnotation {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    }
}

/// The kind of the container's seccomp profile before any plugin ran, or
/// `None` for a profile type this version does not know (never rejected,
/// as upstream).
fn pristine_seccomp_profile(
    req: &ValidateContainerAdjustmentRequest,
) -> Option<SeccompProfileKind> {
    // A container without a profile runs unconfined.
    let Some(profile) = req.container.linux.seccomp_profile.as_ref() else {
        return Some(SeccompProfileKind::Unconfined);
    };
    match profile.profile_type.enum_value() {
        Ok(ProfileType::UNCONFINED) => Some(SeccompProfileKind::Unconfined),
        Ok(ProfileType::RUNTIME_DEFAULT) => Some(SeccompProfileKind::RuntimeDefault),
        Ok(ProfileType::LOCALHOST) => Some(SeccompProfileKind::Custom),
        Err(_) => None,
    }
}

/// The plugin that claimed sysctl `key` of container `ctr_id`.
fn sysctl_owner(owners: &OwningPlugins, ctr_id: &str, key: &str) -> Option<String> {
    owners
        .compound_owners(ctr_id, Field::Sysctl)
        .find(|(k, _)| *k == key)
        .map(|(_, owner)| owner.to_string())
}

/// Whether `name` is a plugin taking part, by base name or as `idx-name`
/// (upstream's `GetPluginMap`).
fn plugin_present(plugins: &[PluginInstance], name: &str) -> bool {
    plugins.iter().any(|p| {
        p.name == name
            || name
                .strip_prefix(p.index.as_str())
                .and_then(|rest| rest.strip_prefix('-'))
                == Some(p.name.as_str())
    })
}
