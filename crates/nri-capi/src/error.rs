//! The owned error object C callers receive, its accessors, and the panic
//! boundary every export runs inside.

use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use nri_runtime::CallCause;

use super::ptr::{Handle, OutSlot};
use super::status::{nri_status, Failure};

/// What a failure carries of a plugin's call, read with `nri_error_cause`:
/// the error a Go runtime tests for (with `errors.Is` or
/// `status.FromError`) when upstream's error wraps or is that call's.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum nri_cause {
    /// No plugin call: the failure is the library's or the caller's.
    None = 0,
    /// The plugin answered with a status: `nri_error_code` and
    /// `nri_error_cause_message` give it.
    Status = 1,
    /// The plugin did not answer in time (Go's `context.DeadlineExceeded`).
    DeadlineExceeded = 2,
    /// The connection to the plugin was lost (Go's `ttrpc.ErrClosed`).
    Closed = 3,
}

/// An error: a status, a message, and what the failure carries of a
/// plugin and its call. Owned by the caller, released with
/// `nri_error_free`.
pub struct nri_error {
    status: nri_status,
    message: CString,
    plugin: CString,
    cause: Option<CallCause>,
    cause_message: CString,
    is_call_error: bool,
}

impl Handle for nri_error {
    const NAME: &'static str = "error";
}

/// Runs the body of an export: catches panics, and turns a failure into
/// its status and, if `err` is not NULL, an error object in `*err`.
///
/// `err` must be the `err` argument of the export, whose `# Safety`
/// section says "`err` is NULL or writable", or NULL. This is not an
/// `unsafe fn` only because every export's contract has that same clause:
/// an unsafe block at each of the calls would say nothing more.
pub(crate) fn boundary(
    err: *mut *mut nri_error,
    body: impl FnOnce() -> Result<(), Failure>,
) -> nri_status {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return nri_status::Ok,
        Ok(Err(f)) => f,
        Err(panic) => Failure::new(
            nri_status::Panic,
            format!("nri-rs panicked: {}", panic_text(&panic)),
        ),
    };
    let status = failure.status;
    // SAFETY: every export's contract: its `err`, passed here, is NULL or
    // aligned and writable for the call; what it held is not read.
    if let Some(slot) = unsafe { OutSlot::optional(err) } {
        slot.write(nri_error::from(failure).into_raw());
    }
    status
}

impl From<Failure> for nri_error {
    fn from(f: Failure) -> nri_error {
        let cause_message = match &f.cause {
            Some(CallCause::Status { message, .. }) => to_cstring(message.clone()),
            _ => CString::default(),
        };
        nri_error {
            status: f.status,
            message: to_cstring(f.message),
            plugin: to_cstring(f.plugin.unwrap_or_default()),
            cause: f.cause,
            cause_message,
            is_call_error: f.is_call_error,
        }
    }
}

/// Like [`boundary`] for exports that have no way to report an error:
/// a panic is swallowed (and logged) instead of unwinding into C.
pub(crate) fn boundary_void(name: &str, body: impl FnOnce()) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(body)) {
        log::error!("{name}: nri-rs panicked: {}", panic_text(&panic));
    }
}

pub(crate) fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// A C string of `s`, with interior NULs replaced so no text is lost.
pub(crate) fn to_cstring(s: String) -> CString {
    CString::new(s).unwrap_or_else(|e| {
        let s = String::from_utf8_lossy(&e.into_vec()).replace('\0', "\u{FFFD}");
        CString::new(s).expect("NULs were replaced")
    })
}

/// The status of an error. `NRI_STATUS_INVALID_ARGUMENT` for NULL.
///
/// # Safety
/// `err` is NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_error_status(err: *const nri_error) -> nri_status {
    // SAFETY: nri_error_status's contract: `err` is NULL or an error from
    // this library not yet freed.
    match unsafe { nri_error::get(err) } {
        Some(e) => e.status,
        None => nri_status::InvalidArgument,
    }
}

/// The message of an error, NUL-terminated UTF-8, valid until the error is
/// freed. An empty string for NULL.
///
/// # Safety
/// `err` is NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_error_message(err: *const nri_error) -> *const c_char {
    // SAFETY: nri_error_message's contract: `err` is NULL or an error from
    // this library not yet freed.
    match unsafe { nri_error::get(err) } {
        Some(e) => e.message.as_ptr(),
        None => c"".as_ptr(),
    }
}

/// The plugin at fault (its `idx-name`, or the name upstream's texts use),
/// NUL-terminated, valid until the error is freed. An empty string when no
/// plugin is, and for NULL.
///
/// # Safety
/// `err` is NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_error_plugin(err: *const nri_error) -> *const c_char {
    // SAFETY: nri_error_plugin's contract: `err` is NULL or an error from
    // this library not yet freed.
    match unsafe { nri_error::get(err) } {
        Some(e) => e.plugin.as_ptr(),
        None => c"".as_ptr(),
    }
}

/// The plugin call an error carries (`NRI_CAUSE_NONE` for NULL). Upstream's
/// error is that call's own error when `nri_error_is_call_error` says so,
/// and otherwise wraps it; a runtime rebuilds it from these accessors
/// rather than from the message, whose wording may change.
///
/// # Safety
/// `err` is NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_error_cause(err: *const nri_error) -> nri_cause {
    // SAFETY: nri_error_cause's contract: `err` is NULL or an error from
    // this library not yet freed.
    match unsafe { nri_error::get(err) }.and_then(|e| e.cause.as_ref()) {
        None => nri_cause::None,
        Some(CallCause::Status { .. }) => nri_cause::Status,
        Some(CallCause::DeadlineExceeded) => nri_cause::DeadlineExceeded,
        Some(CallCause::Closed) => nri_cause::Closed,
    }
}

/// The gRPC code of the status an error's cause is (`NRI_CAUSE_STATUS`);
/// -1 for any other cause, and for NULL.
///
/// # Safety
/// `err` is NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_error_code(err: *const nri_error) -> i32 {
    // SAFETY: nri_error_code's contract: `err` is NULL or an error from
    // this library not yet freed.
    match unsafe { nri_error::get(err) }.and_then(|e| e.cause.as_ref()) {
        Some(CallCause::Status { code, .. }) => *code,
        _ => -1,
    }
}

/// The description of the status an error's cause is (`NRI_CAUSE_STATUS`),
/// NUL-terminated, valid until the error is freed; an empty string for any
/// other cause, and for NULL.
///
/// # Safety
/// `err` is NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_error_cause_message(err: *const nri_error) -> *const c_char {
    // SAFETY: nri_error_cause_message's contract: `err` is NULL or an
    // error from this library not yet freed.
    match unsafe { nri_error::get(err) } {
        Some(e) => e.cause_message.as_ptr(),
        None => c"".as_ptr(),
    }
}

/// Whether an error is its cause itself: the plugin call's error as the
/// call gave it, which upstream returns to the runtime unwrapped. False
/// when the error wraps its cause or has none, and for NULL.
///
/// # Safety
/// `err` is NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_error_is_call_error(err: *const nri_error) -> bool {
    // SAFETY: nri_error_is_call_error's contract: `err` is NULL or an
    // error from this library not yet freed.
    unsafe { nri_error::get(err) }.is_some_and(|e| e.is_call_error && e.cause.is_some())
}

/// Releases an error. NULL is a no-op.
///
/// # Safety
/// `err` is NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_error_free(err: *mut nri_error) {
    // SAFETY: nri_error_free's contract: `err` is NULL or an error from
    // this library (`boundary` made it with `into_raw`) not yet freed.
    unsafe { nri_error::free(err) }
}

/// A short description of a status, static and NUL-terminated; "unknown
/// status" for numbers this version does not know.
#[no_mangle]
pub extern "C" fn nri_status_name(status: u32) -> *const c_char {
    let s: &'static std::ffi::CStr = match status {
        0 => c"ok",
        1 => c"invalid argument",
        2 => c"invalid message",
        3 => c"not running",
        4 => c"plugin failed",
        5 => c"conflict",
        6 => c"rejected",
        7 => c"callback failed",
        8 => c"start failed",
        9 => c"panic",
        10 => c"invalid spec",
        11 => c"spec refused",
        12 => c"canceled",
        _ => c"unknown status",
    };
    s.as_ptr()
}

#[cfg(test)]
// Tests call the C ABI as C does, on values they made a line before;
// a SAFETY comment on each call would repeat that.
#[allow(clippy::undocumented_unsafe_blocks)]
mod tests {
    use super::*;
    use nri_runtime::Error;

    #[test]
    fn failures_reach_the_caller_as_status_and_message() {
        let mut err: *mut nri_error = std::ptr::null_mut();
        let st = boundary(&mut err, || Err(Failure::invalid("bad\0thing")));
        assert_eq!(st, nri_status::InvalidArgument);
        assert!(!err.is_null());
        unsafe {
            assert_eq!(nri_error_status(err), nri_status::InvalidArgument);
            let msg = std::ffi::CStr::from_ptr(nri_error_message(err));
            assert_eq!(msg.to_str().unwrap(), "bad\u{FFFD}thing");
            nri_error_free(err);
        }
    }

    #[test]
    fn panics_become_a_status_and_success_writes_nothing() {
        let mut err: *mut nri_error = std::ptr::null_mut();
        assert_eq!(boundary(&mut err, || Ok(())), nri_status::Ok);
        assert!(err.is_null());
        let st = boundary(&mut err, || panic!("boom"));
        assert_eq!(st, nri_status::Panic);
        unsafe {
            let msg = std::ffi::CStr::from_ptr(nri_error_message(err));
            assert_eq!(msg.to_str().unwrap(), "nri-rs panicked: boom");
            nri_error_free(err);
        }
        // No error slot: still only a status.
        assert_eq!(
            boundary(std::ptr::null_mut(), || Err(Failure::invalid("x"))),
            nri_status::InvalidArgument
        );
    }

    /// Reads what an error object says of its cause.
    unsafe fn cause_of(err: *const nri_error) -> (nri_cause, i32, String, String, bool) {
        let text = |p| {
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_str()
                .unwrap()
                .to_string()
        };
        unsafe {
            (
                nri_error_cause(err),
                nri_error_code(err),
                text(nri_error_cause_message(err)),
                text(nri_error_plugin(err)),
                nri_error_is_call_error(err),
            )
        }
    }

    fn error_of(e: Error) -> *mut nri_error {
        let mut err: *mut nri_error = std::ptr::null_mut();
        boundary(&mut err, || Err(e.into()));
        assert!(!err.is_null());
        err
    }

    #[test]
    fn a_plugin_calls_error_crosses_as_fields_not_text() {
        use std::time::Duration;
        let status = error_of(Error::Plugin {
            plugin: "10-p".into(),
            code: 7,
            message: "denied".into(),
        });
        let timeout = Error::Timeout {
            plugin: "20-v".into(),
            op: "ValidateContainerAdjustment",
            timeout: Duration::from_secs(2),
        };
        let validator = error_of(Error::ValidatorFailed {
            plugin: "20-v".into(),
            reason: Box::new(timeout),
        });
        let failed = error_of(Error::RequestFailed {
            plugin: "30-q".into(),
            op: "CreateContainer",
            reason: Box::new(Error::Closed {
                plugin: "30-q".into(),
                op: "CreateContainer",
                detail: "eof".into(),
            }),
        });
        let merge = error_of(Error::Merge("conflict".into()));
        unsafe {
            assert_eq!(
                cause_of(status),
                (nri_cause::Status, 7, "denied".into(), "10-p".into(), true)
            );
            assert_eq!(
                cause_of(validator),
                (
                    nri_cause::DeadlineExceeded,
                    -1,
                    "".into(),
                    "20-v".into(),
                    false
                )
            );
            assert_eq!(
                cause_of(failed),
                (nri_cause::Closed, -1, "".into(), "30-q".into(), false)
            );
            assert_eq!(
                cause_of(merge),
                (nri_cause::None, -1, "".into(), "".into(), false)
            );
            assert_eq!(
                cause_of(std::ptr::null()),
                (nri_cause::None, -1, "".into(), "".into(), false)
            );
            for e in [status, validator, failed, merge] {
                nri_error_free(e);
            }
        }
    }

    #[test]
    fn adaptation_errors_map_to_their_status() {
        let f = Failure::from(Error::Merge("conflict".into()));
        assert_eq!(f.status, nri_status::Conflict);
        assert_eq!(
            Failure::from(Error::NotRunning).status,
            nri_status::NotRunning
        );
        let name = |s: nri_status| {
            unsafe { std::ffi::CStr::from_ptr(nri_status_name(s as u32)) }
                .to_str()
                .unwrap()
        };
        assert_eq!(name(nri_status::Rejected), "rejected");
        assert_eq!(name(nri_status::Canceled), "canceled");
    }
}
