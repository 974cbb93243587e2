//! What went wrong, as the C ABI says it: the status code of every
//! fallible call, and the [`Failure`] that carries one out to the boundary.

use nri_runtime::{CallCause, Error};

/// The result of every fallible call. Numbers are stable and never reused.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum nri_status {
    /// Success.
    Ok = 0,
    /// A NULL or otherwise unusable argument (non-UTF-8 string, bad option
    /// value, a callback table without a required callback).
    InvalidArgument = 1,
    /// Bytes that do not decode as the protobuf message the call expects.
    InvalidMessage = 2,
    /// The adaptation is not started, or it is stopped. Events are refused
    /// then, since builtin validators only run while it is started.
    NotRunning = 3,
    /// A plugin failed the request (its error, a timeout, a broken
    /// connection).
    PluginFailed = 4,
    /// Plugins made conflicting or invalid adjustments.
    Conflict = 5,
    /// A validating plugin rejected the adjustment, or could not be asked.
    Rejected = 6,
    /// The caller's sync callback reported an error during
    /// `nri_adaptation_start`. (An update callback's error goes to the
    /// plugin that asked for the update, not to the caller.)
    CallbackFailed = 7,
    /// Starting the adaptation failed (socket, plugin launch, sync).
    StartFailed = 8,
    /// A bug in nri-rs: a panic was caught at the boundary. The adaptation
    /// stays usable, but the call's outcome is unknown.
    Panic = 9,
    /// A spec (JSON) that is not an OCI runtime spec oci-spec can hold: it
    /// does not parse, or has fields that would be lost.
    InvalidSpec = 10,
    /// The spec generator refused an adjustment or update: a value the OCI
    /// spec cannot hold, an unknown namespace, a mount whose propagation
    /// check failed. The spec given is unchanged.
    SpecRefused = 11,
    /// The caller gave up on the event through its `nri_cancel` (Go's
    /// "context canceled" or "context deadline exceeded"); no plugin is
    /// blamed or dropped for it.
    Canceled = 12,
}

/// A failure on its way out through the boundary.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: nri_status,
    pub(crate) message: String,
    /// The plugin at fault, if one is.
    pub(crate) plugin: Option<String>,
    /// The plugin call the failure carries, if any.
    pub(crate) cause: Option<CallCause>,
    /// Whether the failure is that call's own error, not wrapped.
    pub(crate) is_call_error: bool,
}

impl Failure {
    pub(crate) fn new(status: nri_status, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
            plugin: None,
            cause: None,
            is_call_error: false,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(nri_status::InvalidArgument, message)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let status = match &e {
            Error::InvalidConfig(_) => nri_status::InvalidArgument,
            Error::Plugin { .. }
            | Error::Builtin { .. }
            | Error::Timeout { .. }
            | Error::EventTimeout { .. }
            | Error::RequestFailed { .. }
            | Error::Closed { .. }
            | Error::Transport { .. } => nri_status::PluginFailed,
            Error::Merge(_) => nri_status::Conflict,
            Error::InvalidMessage(_) => nri_status::InvalidMessage,
            Error::Rejected { .. } | Error::PodRejected { .. } | Error::ValidatorFailed { .. } => {
                nri_status::Rejected
            }
            Error::Runtime(_) => nri_status::CallbackFailed,
            Error::Start(_) => nri_status::StartFailed,
            Error::NotRunning => nri_status::NotRunning,
        };
        Failure {
            status,
            message: e.to_string(),
            plugin: e.plugin().map(str::to_string),
            cause: e.call_cause(),
            is_call_error: e.is_call_error(),
        }
    }
}
