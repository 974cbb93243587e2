//! Why an adjustment was refused.

/// A boxed error from a caller-supplied option (filter, resolver, checker,
/// injector).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An adjustment or update the generator refused. The spec it was given is
/// left as it was.
///
/// Texts follow upstream's where upstream has one, and carry the cause, so
/// `to_string()` alone says everything (there is no separate `source()`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The label filter rejected the labels ([`Generator::filter_labels`](super::Generator::filter_labels)).
    #[error("failed to filter labels: {0}")]
    LabelFilter(BoxError),
    /// The annotation filter rejected the adjustment's annotations.
    #[error("failed to adjust annotations in OCI Spec: {0}")]
    AnnotationFilter(BoxError),
    /// The CDI device injector failed.
    #[error("failed to inject CDI devices {devices:?}: {cause}")]
    CdiInjection {
        devices: Vec<String>,
        cause: BoxError,
    },
    /// The resource checker rejected the adjusted resources.
    #[error("failed to adjust resources in OCI Spec: {0}")]
    ResourceCheck(BoxError),
    /// The block I/O class resolver failed.
    #[error("failed to adjust BlockIO class in OCI Spec: {cause}")]
    BlockIoClass { class: String, cause: BoxError },
    /// The RDT class resolver failed.
    #[error("failed to adjust RDT class in OCI Spec: {cause}")]
    RdtClass { class: String, cause: BoxError },
    /// A mount asks for shared or slave propagation its host source does
    /// not have (or the host's mount table could not be read).
    #[error("failed to adjust mounts in OCI Spec: {cause}")]
    MountPropagation {
        destination: String,
        cause: BoxError,
    },
    /// A namespace type other than the eight runtime-spec names.
    #[error("unrecognized namespace {0:?}")]
    UnknownNamespace(String),
    /// A value the OCI spec (as oci-spec models it) has no representation
    /// for: an unknown enum string or number, or a name oci-spec spells
    /// differently from runtime-spec. Upstream writes such values into the
    /// spec unchecked; see `docs/spec.md`.
    #[error("cannot apply {field} {value:?}: not representable in the OCI spec (oci-spec 0.10)")]
    Unsupported { field: &'static str, value: String },
    /// oci-spec refused to build a value.
    #[error("cannot apply the adjustment: {0}")]
    Oci(#[from] oci_spec::OciSpecError),
    /// A number outside the range of the OCI spec field it goes to.
    #[error("cannot apply {field} {value}: out of range for the OCI spec field")]
    OutOfRange { field: &'static str, value: String },
}

impl SpecError {
    pub(super) fn unsupported(field: &'static str, value: impl Into<String>) -> Self {
        SpecError::Unsupported {
            field,
            value: value.into(),
        }
    }

    pub(super) fn out_of_range(field: &'static str, value: impl ToString) -> Self {
        SpecError::OutOfRange {
            field,
            value: value.to_string(),
        }
    }
}
