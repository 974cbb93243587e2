//! The events of `nri_adaptation`: one export per pod and container event,
//! and `nri_adaptation_event`, any of them by number, which a runtime can
//! give up on through an `nri_cancel`. Each blocks the calling thread until
//! the event is done, as the lifecycle calls do (see `adaptation.rs`).

use nri_runtime::block_on_event;
use protobuf::Message;

use super::adaptation::nri_adaptation;
use super::buffer::{bytes, decode, decode_raw, encode, nri_buffer};
use super::cancel::nri_cancel;
use super::error::{boundary, nri_error, nri_status, Failure};
use super::ptr::{Handle, OutSlot};
use nri_api::*;
use nri_runtime::{Adaptation, Error};

/// Decodes the request and runs the event, the body every event export
/// shares.
///
/// # Safety
/// `a` is NULL or a live handle; `req` is valid for reads of `len` bytes,
/// or `len` is 0.
unsafe fn run_event<Req: Message, T>(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    run: impl FnOnce(&Adaptation, Req) -> Result<T, Error>,
) -> Result<T, Failure> {
    // SAFETY: this function's contract: `a` is NULL or a live handle.
    let a = unsafe { nri_adaptation::arg(a) }?;
    // SAFETY: this function's contract: `req` is valid for `len` bytes.
    let req: Req = unsafe { decode_raw(req, len) }?;
    Ok(run(&a.inner, req)?)
}

/// An event plugins only observe, relayed with the caller's bytes
/// ([`Adaptation::relay_encoded`]).
///
/// # Safety
/// `a` is NULL or a live handle; `req` is valid for reads of `len` bytes,
/// or `len` is 0.
unsafe fn run_observed(
    a: *const nri_adaptation,
    event: Event,
    req: *const u8,
    len: usize,
) -> Result<(), Failure> {
    // SAFETY: this function's contract: `a` is NULL or a live handle.
    let a = unsafe { nri_adaptation::arg(a) }?;
    // SAFETY: this function's contract: `req` is valid for `len` bytes.
    let req = unsafe { bytes("request", req, len) }?;
    Ok(block_on_event(a.inner.relay_encoded(event, req.to_vec()))?)
}

/// [`run_observed`] behind the error boundary.
///
/// # Safety
/// As for [`run_observed`]; `err` is NULL or writable.
unsafe fn observed(
    a: *const nri_adaptation,
    event: Event,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: this function's contract is `run_observed`'s.
    boundary(err, || unsafe { run_observed(a, event, req, len) })
}

/// An event with a response: checks the output slot before running it, so
/// a bad slot never loses the outcome of an event that ran.
///
/// # Safety
/// As for [`event`]; `rsp` is NULL or writable.
unsafe fn event_with_response<Req: Message, Rsp: Message>(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    rsp: *mut nri_buffer,
    err: *mut *mut nri_error,
    run: impl FnOnce(&Adaptation, Req) -> Result<Rsp, Error>,
) -> nri_status {
    boundary(err, || {
        // SAFETY: this function's contract: `rsp` is NULL or writable.
        let rsp = unsafe { OutSlot::new("response", rsp) }?;
        // SAFETY: this function's contract is `run_event`'s.
        let r = unsafe { run_event(a, req, len, run) }?;
        rsp.write(encode(&r)?);
        Ok(())
    })
}

/// Relays any of the 13 events, given by its NRI `Event` number (1
/// RunPodSandbox ... 13 UpdatePodSandbox ... as `nri_adaptation_wants_event`
/// takes it), and lets the caller give up on it through `cancel` (NULL: it
/// cannot be cancelled): triggered while the event runs, the call returns
/// `NRI_STATUS_CANCELED` with Go's text ("context canceled", "context
/// deadline exceeded"), the event stops where it is (later plugins do not
/// see it) and no plugin is blamed or dropped, as upstream treats a
/// runtime's cancelled context. Events with a response (UpdatePodSandbox,
/// CreateContainer, UpdateContainer, StopContainer) write it to `*rsp`,
/// which must then be writable; for the others `rsp` is not used and may
/// be NULL.
///
/// # Safety
/// `a` is a live handle; `cancel` is NULL or from `nri_cancel_new` and not
/// freed before this returns; `req` holds `len` bytes of the encoded
/// request (NULL if `len` is 0); `rsp` is NULL or writable; `err` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_event(
    a: *const nri_adaptation,
    event: i32,
    cancel: *const nri_cancel,
    req: *const u8,
    len: usize,
    rsp: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: nri_adaptation_event's contract: `a` is a live handle.
        let a = unsafe { nri_adaptation::arg(a) }?;
        // SAFETY: nri_adaptation_event's contract: `cancel` is NULL or live
        // until this returns.
        let cancel = unsafe { nri_cancel::get(cancel) };
        let event = <Event as protobuf::Enum>::from_i32(event)
            .filter(|e| EventMask::VALID.is_set(*e) && *e != Event::VALIDATE_CONTAINER_ADJUSTMENT)
            .ok_or_else(|| Failure::invalid(format!("unknown event {event}")))?;
        let out = if has_response(event) {
            // SAFETY: nri_adaptation_event's contract: `rsp` is NULL or
            // writable.
            Some(unsafe { OutSlot::new("response", rsp) }?)
        } else {
            None
        };
        // SAFETY: nri_adaptation_event's contract: `req` holds `len` bytes.
        let req = unsafe { super::buffer::bytes("request", req, len) }?;
        let relayed = relay(&a.inner, event, req);
        let reply = match cancel {
            None => block_on_event(relayed)?,
            Some(c) => {
                let (relayed, triggered) = (std::pin::pin!(relayed), std::pin::pin!(c.triggered()));
                match block_on_event(futures::future::select(relayed, triggered)) {
                    futures::future::Either::Left((reply, _)) => reply?,
                    futures::future::Either::Right((reason, _)) => return Err(reason.failure()),
                }
            }
        };
        if let (Some(out), Some(reply)) = (out, reply) {
            out.write(reply);
        }
        Ok(())
    })
}

fn has_response(event: Event) -> bool {
    matches!(
        event,
        Event::UPDATE_POD_SANDBOX
            | Event::CREATE_CONTAINER
            | Event::UPDATE_CONTAINER
            | Event::STOP_CONTAINER
    )
}

/// Relays the request of `event` and encodes the response of an event that
/// has one. Requests are decoded only where the core needs the message:
/// UpdateContainer and StopContainer; the others are checked and sent to
/// plugins as the caller encoded them. Dropping the future gives the event
/// up.
async fn relay(a: &Adaptation, event: Event, req: &[u8]) -> Result<Option<nri_buffer>, Failure> {
    let done = |r: Result<(), Error>| r.map(|()| None).map_err(Failure::from);
    let answered = |r: Result<nri_buffer, Failure>| r.map(Some);
    match event {
        Event::UPDATE_POD_SANDBOX => {
            a.relay_encoded(event, req.to_vec()).await?;
            answered(encode(&UpdatePodSandboxResponse::default()))
        }
        Event::CREATE_CONTAINER => answered(Ok(nri_buffer::from_vec(
            a.create_container_wire(req.to_vec()).await?,
        ))),
        Event::UPDATE_CONTAINER => answered(encode(&a.update_container(decode(req)?).await?)),
        Event::STOP_CONTAINER => answered(encode(&a.stop_container(decode(req)?).await?)),
        // The others plugins only observe.
        _ => done(a.relay_encoded(event, req.to_vec()).await),
    }
}

// One export per event, written out (cbindgen does not expand macros).

/// Relays a `RunPodSandboxRequest` to the subscribed plugins.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_run_pod_sandbox(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_run_pod_sandbox's contract: `a` is a live handle,
    // `req` holds `len` bytes (NULL if `len` is 0), `err` is NULL or writable:
    // observed's preconditions.
    unsafe { observed(a, Event::RUN_POD_SANDBOX, req, len, err) }
}

/// Relays an `UpdatePodSandboxRequest`; `*rsp` receives an
/// `UpdatePodSandboxResponse`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `rsp` is writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_update_pod_sandbox(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    rsp: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: nri_adaptation_update_pod_sandbox's contract: `rsp` is
        // writable.
        let rsp = unsafe { OutSlot::new("response", rsp) }?;
        // SAFETY: nri_adaptation_update_pod_sandbox's contract: `a` is a
        // live handle, `req` holds `len` bytes (NULL if `len` is 0):
        // run_observed's preconditions.
        unsafe { run_observed(a, Event::UPDATE_POD_SANDBOX, req, len) }?;
        rsp.write(encode(&UpdatePodSandboxResponse::default())?);
        Ok(())
    })
}

/// Relays a `PostUpdatePodSandboxRequest`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_post_update_pod_sandbox(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_post_update_pod_sandbox's contract: `a` is a live
    // handle, `req` holds `len` bytes (NULL if `len` is 0), `err` is NULL or
    // writable: observed's preconditions.
    unsafe { observed(a, Event::POST_UPDATE_POD_SANDBOX, req, len, err) }
}

/// Relays a `StopPodSandboxRequest`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_stop_pod_sandbox(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_stop_pod_sandbox's contract: `a` is a live handle,
    // `req` holds `len` bytes (NULL if `len` is 0), `err` is NULL or writable:
    // observed's preconditions.
    unsafe { observed(a, Event::STOP_POD_SANDBOX, req, len, err) }
}

/// Relays a `RemovePodSandboxRequest`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_remove_pod_sandbox(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_remove_pod_sandbox's contract: `a` is a live
    // handle, `req` holds `len` bytes (NULL if `len` is 0), `err` is NULL or
    // writable: observed's preconditions.
    unsafe { observed(a, Event::REMOVE_POD_SANDBOX, req, len, err) }
}

/// Collects the plugins' adjustments of a new container, merged and
/// validated; `*rsp` receives a `CreateContainerResponse`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `rsp` is writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_create_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    rsp: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: nri_adaptation_create_container's contract: `rsp` is writable.
        let rsp = unsafe { OutSlot::new("response", rsp) }?;
        // SAFETY: nri_adaptation_create_container's contract: `a` is a live handle.
        let a = unsafe { nri_adaptation::arg(a) }?;
        // SAFETY: nri_adaptation_create_container's contract: `req` holds
        // `len` bytes (NULL if `len` is 0).
        let bytes = unsafe { bytes(CreateContainerRequest::NAME, req, len) }?;
        // Decoded and answered where the event runs (on this thread for
        // one plugin); plugins get the caller's bytes as they are (see
        // `create_container_wire`).
        let r = block_on_event(a.inner.create_container_wire(bytes.to_vec()))?;
        rsp.write(nri_buffer::from_vec(r));
        Ok(())
    })
}

/// Relays a `PostCreateContainerRequest`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_post_create_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_post_create_container's contract: `a` is a live
    // handle, `req` holds `len` bytes (NULL if `len` is 0), `err` is NULL or
    // writable: observed's preconditions.
    unsafe { observed(a, Event::POST_CREATE_CONTAINER, req, len, err) }
}

/// Relays a `StartContainerRequest`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_start_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_start_container's contract: `a` is a live handle,
    // `req` holds `len` bytes (NULL if `len` is 0), `err` is NULL or writable:
    // observed's preconditions.
    unsafe { observed(a, Event::START_CONTAINER, req, len, err) }
}

/// Relays a `PostStartContainerRequest`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_post_start_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_post_start_container's contract: `a` is a live
    // handle, `req` holds `len` bytes (NULL if `len` is 0), `err` is NULL or
    // writable: observed's preconditions.
    unsafe { observed(a, Event::POST_START_CONTAINER, req, len, err) }
}

/// Collects the plugins' updates; `*rsp` receives an
/// `UpdateContainerResponse`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `rsp` is writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_update_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    rsp: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_update_container's contract: `a` is a live handle,
    // `req` holds `len` bytes (NULL if `len` is 0), `rsp` is writable, `err` is
    // NULL or writable: event_with_response's preconditions.
    unsafe {
        event_with_response(a, req, len, rsp, err, |a, r: UpdateContainerRequest| {
            block_on_event(a.update_container(r))
        })
    }
}

/// Relays a `PostUpdateContainerRequest`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_post_update_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_post_update_container's contract: `a` is a live
    // handle, `req` holds `len` bytes (NULL if `len` is 0), `err` is NULL or
    // writable: observed's preconditions.
    unsafe { observed(a, Event::POST_UPDATE_CONTAINER, req, len, err) }
}

/// Collects the plugins' updates of other containers; `*rsp` receives a
/// `StopContainerResponse`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `rsp` is writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_stop_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    rsp: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_stop_container's contract: `a` is a live handle,
    // `req` holds `len` bytes (NULL if `len` is 0), `rsp` is writable, `err` is
    // NULL or writable: event_with_response's preconditions.
    unsafe {
        event_with_response(a, req, len, rsp, err, |a, r: StopContainerRequest| {
            block_on_event(a.stop_container(r))
        })
    }
}

/// Relays a `RemoveContainerRequest`.
///
/// # Safety
/// `a` is a live handle; `req` holds `len` bytes of the encoded request
/// (NULL if `len` is 0); `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_remove_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    // SAFETY: nri_adaptation_remove_container's contract: `a` is a live handle,
    // `req` holds `len` bytes (NULL if `len` is 0), `err` is NULL or writable:
    // observed's preconditions.
    unsafe { observed(a, Event::REMOVE_CONTAINER, req, len, err) }
}
