//! The errors the adaptation hands back to the runtime.
//!
//! Texts follow upstream `pkg/adaptation` wherever a runtime or a test might
//! match on them; plugin errors and merge conflicts pass through unwrapped.

use std::time::Duration;

/// A boxed error from a runtime callback or a builtin plugin handler.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error of the NRI adaptation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `New()` was given an unusable argument.
    #[error("failed to create NRI adaptation, {0}")]
    InvalidConfig(String),
    /// A plugin handler failed the request (a ttrpc error status), or the
    /// request was too large to send (`ResourceExhausted`, as Go's ttrpc
    /// reports it; the plugin is not at fault and stays). The text is what
    /// Go's ttrpc prints for a status: `rpc error: code = C desc = M`.
    #[error("rpc error: code = {} desc = {message}", grpc_code_name(*.code))]
    Plugin {
        plugin: String,
        /// The status's gRPC code.
        code: i32,
        message: String,
    },
    /// A builtin plugin handler returned an error; passed through as is.
    #[error("{message}")]
    Builtin { plugin: String, message: String },
    /// Plugins made conflicting or invalid adjustments.
    #[error("{0}")]
    Merge(String),
    /// A validating plugin rejected the merged adjustment.
    #[error("validator {plugin:?} rejected container adjustment, reason: {reason}")]
    Rejected { plugin: String, reason: String },
    /// The default validator refused a pod sandbox: a required plugin was
    /// absent or dropped ([`Options::required_plugins_guard_pods`](crate::Options::required_plugins_guard_pods);
    /// upstream checks containers only).
    #[error("validator {plugin:?} rejected pod sandbox, reason: {reason}")]
    PodRejected { plugin: String, reason: String },
    /// A validating plugin could not be asked; `reason` is why (since
    /// v0.12.4 upstream wraps it, so a runtime can test for its cause).
    #[error("validator plugin {plugin} failed: {reason}")]
    ValidatorFailed { plugin: String, reason: Box<Error> },
    /// A plugin did not answer within the request timeout. The text is Go's
    /// `context.DeadlineExceeded`, the error upstream's ttrpc call returns
    /// and upstream wraps (`validator plugin P failed: context deadline
    /// exceeded`; `closing plugin P, failed to handle OP request: context
    /// deadline exceeded` in the log); the fields say who, what and how long.
    #[error("context deadline exceeded")]
    Timeout {
        plugin: String,
        op: &'static str,
        timeout: Duration,
    },
    /// The event's time budget ([`Options::event_timeout`](crate::Options::event_timeout))
    /// ran out before or during a plugin's call; no plugin is dropped for it.
    #[error("{op} exceeded the NRI event time budget of {budget:?}")]
    EventTimeout { op: &'static str, budget: Duration },
    /// A plugin whose failure policy says `fail_request` failed to answer.
    #[error("plugin {plugin} failed to handle {op} request: {reason}")]
    RequestFailed {
        plugin: String,
        op: &'static str,
        reason: Box<Error>,
    },
    /// The connection to a plugin was lost, or was gone, during a call. The
    /// text is Go's `ttrpc.ErrClosed`, the error upstream's call returns
    /// then and wraps (`plugin P failed to handle OP request: ttrpc:
    /// closed`); `detail` is what ttrpc-rust said.
    #[error("ttrpc: closed")]
    Closed {
        plugin: String,
        op: &'static str,
        detail: String,
    },
    /// The plugin broke the protocol (a reply it could not have sent, one
    /// over the size limit, bytes that do not decode).
    #[error("plugin {plugin}: {op} failed: {reason}")]
    Transport {
        plugin: String,
        op: &'static str,
        reason: String,
    },
    /// A request given encoded did not decode, or a response could not be
    /// encoded ([`Adaptation::create_container_wire`](crate::Adaptation::create_container_wire)).
    #[error("{0}")]
    InvalidMessage(String),
    /// The runtime's sync callback failed while starting.
    #[error("{0}")]
    Runtime(BoxError),
    /// Starting the adaptation failed.
    #[error("{0}")]
    Start(String),
    /// The adaptation is stopped (or was never started).
    #[error("NRI adaptation is not running")]
    NotRunning,
}

/// The error of a plugin's call that upstream's errors carry, for a
/// runtime to test for (Go's `errors.Is`, `status.FromError`) rather than
/// to read in a text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallCause {
    /// The plugin answered with a status: its gRPC code and description.
    Status { code: i32, message: String },
    /// The plugin did not answer in time (Go's `context.DeadlineExceeded`).
    DeadlineExceeded,
    /// The connection was lost (Go's `ttrpc.ErrClosed`).
    Closed,
}

impl Error {
    /// The plugin call this error carries, if any: the call's own error
    /// (a status, a timeout, a lost connection), or the one a failed
    /// request or an unreachable validator wraps. Rejections, conflicts
    /// and the event's own time budget carry none, as upstream's do not.
    pub fn call_cause(&self) -> Option<CallCause> {
        match self {
            Error::Plugin { code, message, .. } => Some(CallCause::Status {
                code: *code,
                message: message.clone(),
            }),
            Error::Timeout { .. } => Some(CallCause::DeadlineExceeded),
            Error::Closed { .. } => Some(CallCause::Closed),
            Error::RequestFailed { reason, .. } | Error::ValidatorFailed { reason, .. } => {
                reason.call_cause()
            }
            _ => None,
        }
    }

    /// Whether this error is a plugin call's own error, not wrapped:
    /// upstream returns such an error to the runtime as the call gave it.
    pub fn is_call_error(&self) -> bool {
        matches!(
            self,
            Error::Plugin { .. } | Error::Timeout { .. } | Error::Closed { .. }
        )
    }

    /// The plugin at fault (its `idx-name`, or its name where upstream's
    /// texts use that), if one is.
    pub fn plugin(&self) -> Option<&str> {
        match self {
            Error::Plugin { plugin, .. }
            | Error::Builtin { plugin, .. }
            | Error::Rejected { plugin, .. }
            | Error::PodRejected { plugin, .. }
            | Error::ValidatorFailed { plugin, .. }
            | Error::Timeout { plugin, .. }
            | Error::RequestFailed { plugin, .. }
            | Error::Closed { plugin, .. }
            | Error::Transport { plugin, .. } => Some(plugin),
            _ => None,
        }
    }

    /// Transport failures and timeouts drop the plugin but let the event go
    /// on (upstream's "fatal" errors: closed, protocol, deadline exceeded).
    pub(crate) fn is_fatal_for_plugin(&self) -> bool {
        matches!(
            self,
            Error::Timeout { .. } | Error::Closed { .. } | Error::Transport { .. }
        )
    }
}

/// Most bytes of a peer's text (a name, an error it sent) a log line carries.
const LOGGED_PEER_TEXT: usize = 512;

/// What a log line may say of something a plugin chose: escaped and
/// bounded (see [`nri_api::quote::log_text`]).
pub(crate) fn peer_text(text: &dyn std::fmt::Display) -> String {
    nri_api::quote::log_text(&text.to_string(), LOGGED_PEER_TEXT)
}

/// Whether `text` is ttrpc-rust's report of a message over its 4 MiB limit
/// (`message length N exceed maximum message size of M`, the same words as
/// Go's ttrpc). ttrpc-rust gives it in two forms: as `Error::Others` when it
/// refuses to send a request, before anything is written; and as an
/// `InvalidArgument` status when it has read and discarded a reply.
pub(crate) fn is_oversized_message(text: &str) -> bool {
    text.strip_prefix("message length ")
        .and_then(|rest| rest.split_once(" exceed maximum message size of "))
        .is_some_and(|(len, max)| len.parse::<u64>().is_ok() && max.parse::<u64>().is_ok())
}

/// Whether a ttrpc status says that a reply was over the size limit: the
/// status ttrpc-rust's client makes for a reply it read and discarded, or
/// the one a ttrpc-rust server sends in place of a reply too large to send.
pub(crate) fn is_oversized_reply(status: &ttrpc::Status) -> bool {
    status.code.value() == ttrpc::Code::INVALID_ARGUMENT as i32
        && (is_oversized_message(&status.message)
            || (status.message.starts_with("response payload ")
                && status.message.contains(" bytes exceeds safe limit ")))
}

/// Go's `codes.Code.String()` for a ttrpc status code, so errors read the
/// same as upstream's.
pub(crate) fn grpc_code_name(code: i32) -> String {
    const NAMES: [&str; 17] = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("Code({code})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_errors_read_like_go_status_errors() {
        let e = Error::Plugin {
            plugin: "10-foo".into(),
            code: 2,
            message: "boom".into(),
        };
        assert_eq!(e.to_string(), "rpc error: code = Unknown desc = boom");
        assert_eq!(grpc_code_name(12), "Unimplemented");
        assert_eq!(grpc_code_name(99), "Code(99)");
        assert_eq!(grpc_code_name(-1), "Code(-1)");
    }

    #[test]
    fn ttrpcs_refusal_to_send_an_oversized_request_is_recognized() {
        // What ttrpc-rust's client does with a request over the limit, before
        // anything is written: the same check, the same words.
        let req = ttrpc::Request {
            payload: vec![0; 4 << 20],
            ..Default::default()
        };
        let Err(ttrpc::Error::Others(text)) = ttrpc::proto::Message::new_request(1, req) else {
            panic!("ttrpc accepted a request over 4 MiB");
        };
        assert!(is_oversized_message(&text), "{text}");
        assert!(!is_oversized_message(
            "message length x exceed maximum message size of 4"
        ));
        assert!(!is_oversized_message("channel closed"));
    }

    #[test]
    fn only_size_statuses_say_a_reply_was_oversized() {
        let status = |code, msg: &str| ttrpc::get_status(code, msg);
        let read = "message length 5242960 exceed maximum message size of 4194304";
        assert!(is_oversized_reply(&status(
            ttrpc::Code::INVALID_ARGUMENT,
            read
        )));
        let sent = "response payload 5242960 bytes exceeds safe limit 4194304 bytes (after transform overhead)";
        assert!(is_oversized_reply(&status(
            ttrpc::Code::INVALID_ARGUMENT,
            sent
        )));
        // A plugin's own errors are not.
        assert!(!is_oversized_reply(&status(
            ttrpc::Code::RESOURCE_EXHAUSTED,
            read
        )));
        assert!(!is_oversized_reply(&status(
            ttrpc::Code::INVALID_ARGUMENT,
            "bad container"
        )));
    }

    #[test]
    fn only_transport_errors_and_timeouts_are_fatal() {
        let t = Error::Timeout {
            plugin: "p".into(),
            op: "CreateContainer",
            timeout: Duration::from_secs(2),
        };
        assert!(t.is_fatal_for_plugin());
        // The texts upstream's runtime reports for a plugin that timed out.
        assert_eq!(t.to_string(), "context deadline exceeded");
        let v = Error::ValidatorFailed {
            plugin: "10-v".into(),
            reason: Box::new(t),
        };
        assert_eq!(
            v.to_string(),
            "validator plugin 10-v failed: context deadline exceeded"
        );
        assert!(!Error::Merge("x".into()).is_fatal_for_plugin());
        let r = Error::Rejected {
            plugin: "00-v".into(),
            reason: "no".into(),
        };
        assert_eq!(
            r.to_string(),
            "validator \"00-v\" rejected container adjustment, reason: no"
        );
    }
}
