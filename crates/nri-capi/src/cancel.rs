//! `nri_cancel`: how a runtime gives up on an event while it runs (upstream:
//! the event's `ctx` is cancelled or its deadline passes). The runtime makes
//! one per call, hands it to `nri_adaptation_event`, and triggers it from
//! any thread; the event then stops where it is and returns
//! `NRI_STATUS_CANCELED`, and no plugin is blamed or dropped for it.

use super::error::{boundary, boundary_void, nri_error};
use super::ptr::{Handle, OutSlot};
use super::status::{nri_status, Failure};

/// Why an event was given up, as Go's context reports it.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum nri_cancel_reason {
    /// The runtime cancelled the call: "context canceled".
    Canceled = 1,
    /// The call's deadline passed: "context deadline exceeded".
    DeadlineExceeded = 2,
}

/// A cancellation signal for one event call. Triggering it is safe from any
/// thread, at any time, any number of times (the first reason counts);
/// freeing it must wait until the call it was given to has returned.
pub struct nri_cancel {
    reason: tokio::sync::watch::Sender<Option<nri_cancel_reason>>,
}

impl Handle for nri_cancel {
    const NAME: &'static str = "cancel";
}

impl nri_cancel {
    /// Resolves with the reason once triggered.
    pub(crate) async fn triggered(&self) -> nri_cancel_reason {
        let mut rx = self.reason.subscribe();
        // The sender is `self`, alive while this borrows it, so waiting
        // cannot fail.
        let reason = rx.wait_for(Option::is_some).await.ok().and_then(|r| *r);
        reason.unwrap_or(nri_cancel_reason::Canceled)
    }
}

impl nri_cancel_reason {
    /// The text of Go's context error for it, which runtimes match on.
    pub(crate) fn failure(self) -> Failure {
        let text = match self {
            nri_cancel_reason::Canceled => "context canceled",
            nri_cancel_reason::DeadlineExceeded => "context deadline exceeded",
        };
        Failure::new(nri_status::Canceled, text)
    }
}

/// Creates a cancellation signal, not yet triggered; `*out` receives it,
/// released with `nri_cancel_free`.
///
/// # Safety
/// `out` is writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_cancel_new(
    out: *mut *mut nri_cancel,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: nri_cancel_new's contract: `out` is writable.
        let out = unsafe { OutSlot::new("out", out) }?;
        let c = nri_cancel {
            reason: tokio::sync::watch::Sender::new(None),
        };
        out.write(c.into_raw());
        Ok(())
    })
}

/// Triggers the signal: the event call it was given to stops and returns
/// `NRI_STATUS_CANCELED` with Go's text for `reason`. Later triggers do
/// nothing. NULL is a no-op.
///
/// # Safety
/// `c` is NULL or from `nri_cancel_new`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_cancel_trigger(c: *const nri_cancel, reason: nri_cancel_reason) {
    boundary_void("nri_cancel_trigger", || {
        // SAFETY: nri_cancel_trigger's contract: `c` is NULL or live.
        if let Some(c) = unsafe { nri_cancel::get(c) } {
            c.reason.send_if_modified(|r| {
                let first = r.is_none();
                if first {
                    *r = Some(reason);
                }
                first
            });
        }
    });
}

/// Releases a cancellation signal; NULL is a no-op. Not while a call that
/// was given it still runs.
///
/// # Safety
/// `c` is NULL or from `nri_cancel_new`, not yet freed, and no call uses it.
#[no_mangle]
pub unsafe extern "C" fn nri_cancel_free(c: *mut nri_cancel) {
    if !c.is_null() {
        boundary_void("nri_cancel_free", || {
            // SAFETY: nri_cancel_free's contract: `c` is live and unused.
            unsafe { nri_cancel::free(c) }
        });
    }
}
