//! The OCI spec generator: applies an NRI [`ContainerAdjustment`] or a
//! resource update to an [`oci_spec::runtime::Spec`], the way upstream's
//! `pkg/runtime-tools/generate` applies them to a runtime-spec Go struct.
//!
//! ```
//! use nri_api::ContainerAdjustment;
//! use nri_spec::Generator;
//! # let mut spec: nri_spec::oci_spec::runtime::Spec = Default::default();
//!
//! let mut adjust = ContainerAdjustment::new();
//! adjust.add_env("HELLO", "world");
//! adjust.set_linux_memory_limit(1 << 30);
//!
//! let generator = Generator::builder().build();
//! let adjusted = generator.adjust(&mut spec, &adjust)?;
//! assert!(adjusted.pending_cdi_devices.is_empty());
//! # Ok::<(), nri_spec::SpecError>(())
//! ```
//!
//! Every adjustable field of NRI v0.12 is covered, in upstream's order:
//! annotations, environment, arguments, hooks, CDI devices, devices (with
//! their device cgroup rules), cgroups path, OOM score, I/O priority,
//! scheduler, seccomp, namespaces, sysctl, network devices, memory policy,
//! resources (then block I/O class, RDT class, RDT fields), mounts, rlimits.
//! Keys marked `-key` remove what they name (see [`nri_api::removal`]).
//!
//! An adjustment is applied to a copy of the spec that replaces the spec
//! only when every step succeeded: a refused adjustment ([`SpecError`])
//! leaves the spec as it was.
//!
//! What differs from upstream, and why, is in `docs/spec.md`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use oci_spec::runtime::{LinuxBlockIo, LinuxIntelRdt, LinuxResources as OciLinuxResources, Spec};

use nri_api::{ContainerAdjustment, LinuxResources, OptionalValue};

mod convert;
mod error;
mod init;
pub mod json;
mod linux;
mod mounts;
mod process;
mod resources;
#[cfg(test)]
mod tests;

pub use error::{BoxError, SpecError};
/// The oci-spec crate the generator works on, so callers name the same
/// version.
pub use oci_spec;
pub use resources::resources_to_oci;

/// A pids limit meaning "unlimited": it leaves the spec's limit as it is.
pub const UNLIMITED_PIDS_LIMIT: i64 = -1;

/// Filters (or rejects) a key-value map: labels or annotations.
pub type MapFilter =
    dyn Fn(&HashMap<String, String>) -> Result<HashMap<String, String>, BoxError> + Send + Sync;
/// Resolves a class name to settings; `None` clears the settings.
pub type ClassResolver<T> = dyn Fn(&str) -> Result<Option<T>, BoxError> + Send + Sync;
/// Resolves a block I/O class name; `None` clears the block I/O settings.
pub type BlockIoResolver = ClassResolver<LinuxBlockIo>;
/// Resolves an RDT class name; `None` clears the RDT settings.
pub type RdtResolver = ClassResolver<LinuxIntelRdt>;
/// Checks, and may adjust, the spec's resources after an adjustment has
/// been applied to them (`None`: the spec has no resources section).
pub type ResourceChecker =
    dyn Fn(Option<&mut OciLinuxResources>) -> Result<(), BoxError> + Send + Sync;
/// Injects CDI devices, given by fully qualified name, into the spec.
pub type CdiInjector = dyn Fn(&mut Spec, &[String]) -> Result<(), BoxError> + Send + Sync;
/// Checks that a mount source (a host path) has one of the accepted
/// propagations (`rshared`, `rslave`).
pub type PropagationChecker = dyn Fn(&str, &[&str]) -> Result<(), BoxError> + Send + Sync;

/// What an applied adjustment leaves for the caller to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Adjusted {
    /// The adjustment's CDI devices (fully qualified names, in order) when
    /// no [`GeneratorBuilder::cdi_injector`] is set: the caller injects
    /// them. Empty when an injector took them.
    pub pending_cdi_devices: Vec<String>,
}

/// Applies NRI adjustments and resource updates to OCI specs. Built by
/// [`Generator::builder`]; cheap to clone and shareable between threads.
#[derive(Clone)]
pub struct Generator {
    label_filter: Option<Arc<MapFilter>>,
    annotation_filter: Option<Arc<MapFilter>>,
    blockio_resolver: Option<Arc<BlockIoResolver>>,
    rdt_resolver: Option<Arc<RdtResolver>>,
    resource_checker: Option<Arc<ResourceChecker>>,
    cdi_injector: Option<Arc<CdiInjector>>,
    propagation_checker: Option<Arc<PropagationChecker>>,
}

/// Options of a [`Generator`], upstream's `With*` options as methods.
#[derive(Clone)]
pub struct GeneratorBuilder(Generator);

impl Default for GeneratorBuilder {
    fn default() -> Self {
        let host: Option<Arc<PropagationChecker>> = if cfg!(target_os = "linux") {
            Some(Arc::new(mounts::check_host_propagation))
        } else {
            None
        };
        GeneratorBuilder(Generator {
            label_filter: None,
            annotation_filter: None,
            blockio_resolver: None,
            rdt_resolver: None,
            resource_checker: None,
            cdi_injector: None,
            propagation_checker: host,
        })
    }
}

impl GeneratorBuilder {
    /// Filters or rejects labels (upstream's `WithLabelFilter`). Upstream's
    /// `Adjust` never applies it; [`Generator::filter_labels`] does.
    pub fn label_filter<F>(mut self, f: F) -> Self
    where
        F: Fn(&HashMap<String, String>) -> Result<HashMap<String, String>, BoxError>
            + Send
            + Sync
            + 'static,
    {
        self.0.label_filter = Some(Arc::new(f));
        self
    }

    /// Filters or rejects the annotations of an adjustment before they are
    /// applied (upstream's `WithAnnotationFilter`). The filter sees keys
    /// with their removal markers.
    pub fn annotation_filter<F>(mut self, f: F) -> Self
    where
        F: Fn(&HashMap<String, String>) -> Result<HashMap<String, String>, BoxError>
            + Send
            + Sync
            + 'static,
    {
        self.0.annotation_filter = Some(Arc::new(f));
        self
    }

    /// Resolves block I/O classes (upstream's `WithBlockIOResolver`).
    /// Without it, block I/O classes are ignored.
    pub fn blockio_resolver<F>(mut self, f: F) -> Self
    where
        F: Fn(&str) -> Result<Option<LinuxBlockIo>, BoxError> + Send + Sync + 'static,
    {
        self.0.blockio_resolver = Some(Arc::new(f));
        self
    }

    /// Resolves RDT classes (upstream's `WithRdtResolver`). Without it, RDT
    /// classes are ignored.
    pub fn rdt_resolver<F>(mut self, f: F) -> Self
    where
        F: Fn(&str) -> Result<Option<LinuxIntelRdt>, BoxError> + Send + Sync + 'static,
    {
        self.0.rdt_resolver = Some(Arc::new(f));
        self
    }

    /// Checks (and may adjust) the resources once an adjustment has been
    /// applied to them, rejecting what the runtime cannot honour
    /// (upstream's `WithResourceChecker`).
    pub fn resource_checker<F>(mut self, f: F) -> Self
    where
        F: Fn(Option<&mut OciLinuxResources>) -> Result<(), BoxError> + Send + Sync + 'static,
    {
        self.0.resource_checker = Some(Arc::new(f));
        self
    }

    /// Injects an adjustment's CDI devices into the spec, at upstream's
    /// point in the order (upstream's `WithCDIDeviceInjector`). Without it
    /// the names come back in [`Adjusted::pending_cdi_devices`].
    pub fn cdi_injector<F>(mut self, f: F) -> Self
    where
        F: Fn(&mut Spec, &[String]) -> Result<(), BoxError> + Send + Sync + 'static,
    {
        self.0.cdi_injector = Some(Arc::new(f));
        self
    }

    /// Replaces the check that a mount asking for `rshared` or `rslave`
    /// propagation has a host source with that propagation. The default,
    /// as upstream, reads `/proc/self/mountinfo` on Linux and checks nothing
    /// elsewhere.
    pub fn propagation_checker<F>(mut self, f: F) -> Self
    where
        F: Fn(&str, &[&str]) -> Result<(), BoxError> + Send + Sync + 'static,
    {
        self.0.propagation_checker = Some(Arc::new(f));
        self
    }

    /// Turns off the mount propagation check (a runtime that checks mounts
    /// itself, or runs where the host's mount table is not its own).
    pub fn no_propagation_check(mut self) -> Self {
        self.0.propagation_checker = None;
        self
    }

    pub fn build(self) -> Generator {
        self.0
    }
}

impl Default for Generator {
    fn default() -> Self {
        GeneratorBuilder::default().build()
    }
}

impl fmt::Debug for Generator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generator")
            .field("label_filter", &self.label_filter.is_some())
            .field("annotation_filter", &self.annotation_filter.is_some())
            .field("blockio_resolver", &self.blockio_resolver.is_some())
            .field("rdt_resolver", &self.rdt_resolver.is_some())
            .field("resource_checker", &self.resource_checker.is_some())
            .field("cdi_injector", &self.cdi_injector.is_some())
            .field("propagation_checker", &self.propagation_checker.is_some())
            .finish()
    }
}

impl fmt::Debug for GeneratorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("GeneratorBuilder").field(&self.0).finish()
    }
}

impl Generator {
    pub fn builder() -> GeneratorBuilder {
        GeneratorBuilder::default()
    }

    /// Applies `adjust` to `spec`. On error `spec` is unchanged.
    pub fn adjust(
        &self,
        spec: &mut Spec,
        adjust: &ContainerAdjustment,
    ) -> Result<Adjusted, SpecError> {
        let mut work = spec.clone();
        let adjusted = self.apply(&mut work, adjust)?;
        *spec = work;
        Ok(adjusted)
    }

    /// Applies a resource update (a `ContainerUpdate`'s resources, or the
    /// resources a runtime settled on for `UpdateContainer`) to `spec`: the
    /// resources step of [`adjust`](Self::adjust), including the resource
    /// checker and the block I/O and RDT classes. On error `spec` is
    /// unchanged.
    pub fn update_resources(
        &self,
        spec: &mut Spec,
        update: &LinuxResources,
    ) -> Result<(), SpecError> {
        let mut work = spec.clone();
        self.apply_resources(&mut work, update)?;
        *spec = work;
        Ok(())
    }

    /// Runs the label filter (identity when none is set).
    pub fn filter_labels(
        &self,
        labels: &HashMap<String, String>,
    ) -> Result<HashMap<String, String>, SpecError> {
        match &self.label_filter {
            Some(f) => f(labels).map_err(SpecError::LabelFilter),
            None => Ok(labels.clone()),
        }
    }

    fn apply(&self, spec: &mut Spec, adjust: &ContainerAdjustment) -> Result<Adjusted, SpecError> {
        let annotations = match &self.annotation_filter {
            Some(f) => Cow::Owned(f(&adjust.annotations).map_err(SpecError::AnnotationFilter)?),
            None => Cow::Borrowed(&adjust.annotations),
        };
        linux::adjust_keyed(
            spec.annotations_mut(),
            annotations.iter().map(|(k, v)| (k, v.clone())),
        );
        process::adjust_env(spec, &adjust.env);
        process::adjust_args(spec, &adjust.args);
        process::adjust_hooks(spec, &adjust.hooks);
        let adjusted = self.inject_cdi_devices(spec, adjust)?;

        let linux = adjust.linux.as_ref();
        if let Some(l) = linux {
            linux::adjust_devices(spec, &l.devices)?;
            linux::adjust_cgroups_path(spec, &l.cgroups_path);
            process::adjust_oom_score_adj(spec, &l.oom_score_adj)?;
            process::adjust_io_priority(spec, &l.io_priority)?;
            process::adjust_scheduler(spec, &l.scheduler)?;
            linux::adjust_seccomp(spec, &l.seccomp_policy)?;
            linux::adjust_namespaces(spec, &l.namespaces)?;
            linux::adjust_sysctl(spec, &l.sysctl);
            linux::adjust_net_devices(spec, &l.net_devices);
            linux::adjust_memory_policy(spec, &l.memory_policy)?;
            if let Some(r) = l.resources.as_ref() {
                self.apply_resources(spec, r)?;
            }
            resources::adjust_rdt(spec, &l.rdt);
        }

        mounts::adjust_mounts(spec, &adjust.mounts, self.propagation_checker.as_deref())?;
        process::adjust_rlimits(spec, &adjust.rlimits)?;
        Ok(adjusted)
    }

    fn apply_resources(&self, spec: &mut Spec, r: &LinuxResources) -> Result<(), SpecError> {
        resources::adjust_resources(spec, r, self.resource_checker.as_deref())?;
        resources::adjust_blockio_class(
            spec,
            r.blockio_class.value(),
            self.blockio_resolver.as_deref(),
        )?;
        resources::adjust_rdt_class(spec, r.rdt_class.value(), self.rdt_resolver.as_deref())
    }

    fn inject_cdi_devices(
        &self,
        spec: &mut Spec,
        adjust: &ContainerAdjustment,
    ) -> Result<Adjusted, SpecError> {
        let devices: Vec<String> = adjust.CDI_devices.iter().map(|d| d.name.clone()).collect();
        match &self.cdi_injector {
            Some(inject) if !devices.is_empty() => {
                inject(spec, &devices)
                    .map_err(|cause| SpecError::CdiInjection { devices, cause })?;
                Ok(Adjusted::default())
            }
            _ => Ok(Adjusted {
                pending_cdi_devices: devices,
            }),
        }
    }
}
