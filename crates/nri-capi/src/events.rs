//! The events of `nri_adaptation`: `nri_adaptation_event`, the one entry
//! point for every pod and container event, which a runtime can give up on
//! through an `nri_cancel`. It blocks the calling thread until the event is
//! done, as the lifecycle calls do (see `adaptation.rs`). The export per
//! event that came before it stays, as the header's stability rule asks,
//! as a deprecated call of it.

use nri_runtime::block_on_event;

use super::adaptation::nri_adaptation;
use super::buffer::{decode, encode, nri_buffer};
use super::cancel::nri_cancel;
use super::error::{boundary, nri_error};
use super::ptr::{Handle, OutSlot};
use super::status::{nri_status, Failure};
use nri_api::*;
use nri_runtime::{Adaptation, Error};

/// The NRI events `nri_adaptation_event` relays, by their protocol numbers
/// (the `Event` enum of nri.proto), for C callers to name them.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum nri_event {
    RunPodSandbox = 1,
    StopPodSandbox = 2,
    RemovePodSandbox = 3,
    CreateContainer = 4,
    PostCreateContainer = 5,
    StartContainer = 6,
    PostStartContainer = 7,
    UpdateContainer = 8,
    PostUpdateContainer = 9,
    StopContainer = 10,
    RemoveContainer = 11,
    UpdatePodSandbox = 12,
    PostUpdatePodSandbox = 13,
}

/// Relays any of the 13 events, given by its `nri_event` number (the NRI
/// `Event` enum's, as `nri_adaptation_wants_event` takes it), and lets the
/// caller give up on it through `cancel` (NULL: it cannot be cancelled):
/// triggered while the event runs, the call returns `NRI_STATUS_CANCELED`
/// with Go's text ("context canceled", "context deadline exceeded"), the
/// event stops where it is (later plugins do not see it) and no plugin is
/// blamed or dropped, as upstream treats a runtime's cancelled context.
/// Events with a response (UpdatePodSandbox, CreateContainer,
/// UpdateContainer, StopContainer) write it to `*rsp`, which must then be
/// writable; for the others `rsp` is not used and may be NULL.
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

// The export per event of 0.1.0, kept by the header's stability rule:
// each is `nri_adaptation_event` with its event and no cancellation,
// written out because cbindgen does not expand macros.

/// `nri_adaptation_event` with `NRI_EVENT_RUN_POD_SANDBOX` and no
/// cancellation.
///
/// # Safety
/// As for `nri_adaptation_event`.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_run_pod_sandbox(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::RunPodSandbox as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation and no response.
    unsafe {
        nri_adaptation_event(
            a,
            event,
            std::ptr::null(),
            req,
            len,
            std::ptr::null_mut(),
            err,
        )
    }
}

/// `nri_adaptation_event` with `NRI_EVENT_UPDATE_POD_SANDBOX` and no
/// cancellation; `*rsp` receives a `UpdatePodSandboxResponse`.
///
/// # Safety
/// As for `nri_adaptation_event`; `rsp` is writable.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_update_pod_sandbox(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    rsp: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::UpdatePodSandbox as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation.
    unsafe { nri_adaptation_event(a, event, std::ptr::null(), req, len, rsp, err) }
}

/// `nri_adaptation_event` with `NRI_EVENT_POST_UPDATE_POD_SANDBOX` and no
/// cancellation.
///
/// # Safety
/// As for `nri_adaptation_event`.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_post_update_pod_sandbox(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::PostUpdatePodSandbox as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation and no response.
    unsafe {
        nri_adaptation_event(
            a,
            event,
            std::ptr::null(),
            req,
            len,
            std::ptr::null_mut(),
            err,
        )
    }
}

/// `nri_adaptation_event` with `NRI_EVENT_STOP_POD_SANDBOX` and no
/// cancellation.
///
/// # Safety
/// As for `nri_adaptation_event`.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_stop_pod_sandbox(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::StopPodSandbox as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation and no response.
    unsafe {
        nri_adaptation_event(
            a,
            event,
            std::ptr::null(),
            req,
            len,
            std::ptr::null_mut(),
            err,
        )
    }
}

/// `nri_adaptation_event` with `NRI_EVENT_REMOVE_POD_SANDBOX` and no
/// cancellation.
///
/// # Safety
/// As for `nri_adaptation_event`.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_remove_pod_sandbox(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::RemovePodSandbox as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation and no response.
    unsafe {
        nri_adaptation_event(
            a,
            event,
            std::ptr::null(),
            req,
            len,
            std::ptr::null_mut(),
            err,
        )
    }
}

/// `nri_adaptation_event` with `NRI_EVENT_CREATE_CONTAINER` and no
/// cancellation; `*rsp` receives a `CreateContainerResponse`.
///
/// # Safety
/// As for `nri_adaptation_event`; `rsp` is writable.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_create_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    rsp: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::CreateContainer as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation.
    unsafe { nri_adaptation_event(a, event, std::ptr::null(), req, len, rsp, err) }
}

/// `nri_adaptation_event` with `NRI_EVENT_POST_CREATE_CONTAINER` and no
/// cancellation.
///
/// # Safety
/// As for `nri_adaptation_event`.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_post_create_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::PostCreateContainer as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation and no response.
    unsafe {
        nri_adaptation_event(
            a,
            event,
            std::ptr::null(),
            req,
            len,
            std::ptr::null_mut(),
            err,
        )
    }
}

/// `nri_adaptation_event` with `NRI_EVENT_START_CONTAINER` and no
/// cancellation.
///
/// # Safety
/// As for `nri_adaptation_event`.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_start_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::StartContainer as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation and no response.
    unsafe {
        nri_adaptation_event(
            a,
            event,
            std::ptr::null(),
            req,
            len,
            std::ptr::null_mut(),
            err,
        )
    }
}

/// `nri_adaptation_event` with `NRI_EVENT_POST_START_CONTAINER` and no
/// cancellation.
///
/// # Safety
/// As for `nri_adaptation_event`.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_post_start_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::PostStartContainer as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation and no response.
    unsafe {
        nri_adaptation_event(
            a,
            event,
            std::ptr::null(),
            req,
            len,
            std::ptr::null_mut(),
            err,
        )
    }
}

/// `nri_adaptation_event` with `NRI_EVENT_UPDATE_CONTAINER` and no
/// cancellation; `*rsp` receives a `UpdateContainerResponse`.
///
/// # Safety
/// As for `nri_adaptation_event`; `rsp` is writable.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_update_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    rsp: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::UpdateContainer as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation.
    unsafe { nri_adaptation_event(a, event, std::ptr::null(), req, len, rsp, err) }
}

/// `nri_adaptation_event` with `NRI_EVENT_POST_UPDATE_CONTAINER` and no
/// cancellation.
///
/// # Safety
/// As for `nri_adaptation_event`.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_post_update_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::PostUpdateContainer as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation and no response.
    unsafe {
        nri_adaptation_event(
            a,
            event,
            std::ptr::null(),
            req,
            len,
            std::ptr::null_mut(),
            err,
        )
    }
}

/// `nri_adaptation_event` with `NRI_EVENT_STOP_CONTAINER` and no
/// cancellation; `*rsp` receives a `StopContainerResponse`.
///
/// # Safety
/// As for `nri_adaptation_event`; `rsp` is writable.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_stop_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    rsp: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::StopContainer as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation.
    unsafe { nri_adaptation_event(a, event, std::ptr::null(), req, len, rsp, err) }
}

/// `nri_adaptation_event` with `NRI_EVENT_REMOVE_CONTAINER` and no
/// cancellation.
///
/// # Safety
/// As for `nri_adaptation_event`.
#[deprecated(note = "use nri_adaptation_event")]
#[no_mangle]
pub unsafe extern "C" fn nri_adaptation_remove_container(
    a: *const nri_adaptation,
    req: *const u8,
    len: usize,
    err: *mut *mut nri_error,
) -> nri_status {
    let event = nri_event::RemoveContainer as i32;
    // SAFETY: this function's contract is nri_adaptation_event's, with no
    // cancellation and no response.
    unsafe {
        nri_adaptation_event(
            a,
            event,
            std::ptr::null(),
            req,
            len,
            std::ptr::null_mut(),
            err,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nri_event_has_the_protocols_numbers() {
        use nri_event::*;
        let pairs = [
            (RunPodSandbox, Event::RUN_POD_SANDBOX),
            (StopPodSandbox, Event::STOP_POD_SANDBOX),
            (RemovePodSandbox, Event::REMOVE_POD_SANDBOX),
            (CreateContainer, Event::CREATE_CONTAINER),
            (PostCreateContainer, Event::POST_CREATE_CONTAINER),
            (StartContainer, Event::START_CONTAINER),
            (PostStartContainer, Event::POST_START_CONTAINER),
            (UpdateContainer, Event::UPDATE_CONTAINER),
            (PostUpdateContainer, Event::POST_UPDATE_CONTAINER),
            (StopContainer, Event::STOP_CONTAINER),
            (RemoveContainer, Event::REMOVE_CONTAINER),
            (UpdatePodSandbox, Event::UPDATE_POD_SANDBOX),
            (PostUpdatePodSandbox, Event::POST_UPDATE_POD_SANDBOX),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours as i32, theirs as i32, "{ours:?}");
        }
        // Every event the entry point relays has its name.
        let relayed = (1..Event::LAST as i32)
            .filter(|&n| n != Event::VALIDATE_CONTAINER_ADJUSTMENT as i32)
            .count();
        assert_eq!(pairs.len(), relayed);
    }
}
