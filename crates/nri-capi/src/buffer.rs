//! Bytes across the boundary: borrowed `(ptr, len)` views in, owned
//! `nri_buffer`s out, and the protobuf (de)coding of NRI messages.

use std::ffi::{c_char, CStr};

use protobuf::Message;

use super::status::{nri_status, Failure};

/// Bytes owned by the library (an encoded protobuf message). Release with
/// `nri_buffer_free`. An empty buffer has `data == NULL` and `len == 0`.
#[repr(C)]
pub struct nri_buffer {
    pub data: *mut u8,
    pub len: usize,
}

impl nri_buffer {
    pub(crate) const EMPTY: nri_buffer = nri_buffer {
        data: std::ptr::null_mut(),
        len: 0,
    };

    pub(crate) fn from_vec(v: Vec<u8>) -> nri_buffer {
        if v.is_empty() {
            return nri_buffer::EMPTY;
        }
        let b = v.into_boxed_slice();
        let len = b.len();
        nri_buffer {
            data: Box::into_raw(b).cast(),
            len,
        }
    }
}

/// Releases the bytes of `buf` and sets it to the empty buffer, so freeing
/// twice is harmless. NULL and empty buffers are no-ops.
///
/// # Safety
/// `buf` is NULL or points to a buffer filled by this library (or empty).
#[no_mangle]
pub unsafe extern "C" fn nri_buffer_free(buf: *mut nri_buffer) {
    // SAFETY: nri_buffer_free's contract: `buf` is NULL or points to a
    // buffer (aligned, initialized, the caller's alone during the call).
    let Some(buf) = (unsafe { buf.as_mut() }) else {
        return;
    };
    if !buf.data.is_null() {
        let slice = std::ptr::slice_from_raw_parts_mut(buf.data, buf.len);
        // SAFETY: nri_buffer_free's contract: the buffer was filled by this
        // library, so a non-NULL `data` with its `len` is a Box<[u8]> from
        // `from_vec`; it is emptied below, so it is rebuilt only once.
        drop(unsafe { Box::from_raw(slice) });
    }
    *buf = nri_buffer::EMPTY;
}

/// The bytes of a borrowed `(ptr, len)` view. NULL is allowed for `len == 0`;
/// otherwise it is "`what` is NULL but its length is `len`".
///
/// # Safety
/// `ptr` is valid for reads of `len` bytes (one allocation) and those bytes
/// are not changed for `'a`, or `len` is 0.
pub(crate) unsafe fn bytes<'a>(
    what: &str,
    ptr: *const u8,
    len: usize,
) -> Result<&'a [u8], Failure> {
    // SAFETY: this function's contract, which is slice_arg's for u8 (which
    // needs no alignment).
    unsafe { super::ptr::slice_arg(what, ptr, len) }
}

/// Decodes `bytes` as the message `M`.
pub(crate) fn decode<M: Message>(bytes: &[u8]) -> Result<M, Failure> {
    M::parse_from_bytes(bytes).map_err(|e| {
        Failure::new(
            nri_status::InvalidMessage,
            format!("invalid {}: {e}", M::NAME),
        )
    })
}

/// Decodes a borrowed `(ptr, len)` view as the message `M`.
///
/// # Safety
/// As for [`bytes`].
pub(crate) unsafe fn decode_raw<M: Message>(ptr: *const u8, len: usize) -> Result<M, Failure> {
    // SAFETY: this function's contract is `bytes`'s: `ptr` is valid for
    // reads of `len` bytes, or `len` is 0.
    decode(unsafe { bytes(M::NAME, ptr, len) }?)
}

/// Encodes `msg` into an owned buffer.
pub(crate) fn encode<M: Message>(msg: &M) -> Result<nri_buffer, Failure> {
    msg.write_to_bytes().map(nri_buffer::from_vec).map_err(|e| {
        Failure::new(
            nri_status::InvalidMessage,
            format!("cannot encode {}: {e}", M::NAME),
        )
    })
}

/// A borrowed NUL-terminated UTF-8 string argument: "`what` is NULL" or
/// "`what` is not UTF-8" when it is not one.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string, valid for reads up to and
/// including its NUL and not changed or freed for `'a`.
pub(crate) unsafe fn str_arg<'a>(what: &str, s: *const c_char) -> Result<&'a str, Failure> {
    if s.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: this function's contract: `s` (not NULL, checked above) is
    // NUL-terminated and neither freed nor changed for 'a.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

#[cfg(test)]
// Tests call the C ABI as C does, on values they made a line before;
// a SAFETY comment on each call would repeat that.
#[allow(clippy::undocumented_unsafe_blocks)]
mod tests {
    use super::*;
    use nri_api::CreateContainerRequest;

    #[test]
    fn buffers_round_trip_and_free_twice_safely() {
        let mut req = CreateContainerRequest::new();
        req.container.mut_or_insert_default().id = "c1".into();
        let mut buf = encode(&req).unwrap();
        assert!(buf.len > 0);
        let back: CreateContainerRequest = unsafe { decode_raw(buf.data, buf.len) }.unwrap();
        assert_eq!(back.container.id, "c1");
        unsafe {
            nri_buffer_free(&mut buf);
            assert!(buf.data.is_null() && buf.len == 0);
            nri_buffer_free(&mut buf);
            nri_buffer_free(std::ptr::null_mut());
        }
    }

    #[test]
    fn empty_messages_are_empty_buffers_and_null_views() {
        let buf = encode(&CreateContainerRequest::new()).unwrap();
        assert!(buf.data.is_null() && buf.len == 0);
        let m: CreateContainerRequest = unsafe { decode_raw(std::ptr::null(), 0) }.unwrap();
        assert!(m.container.is_none());
        let e = unsafe { bytes("request", std::ptr::null(), 3) }.unwrap_err();
        assert_eq!(e.status, nri_status::InvalidArgument);
        assert_eq!(e.message, "request is NULL but its length is 3");
    }

    #[test]
    fn garbage_is_an_invalid_message() {
        let junk = [0xffu8, 0xff, 0xff];
        let e =
            unsafe { decode_raw::<CreateContainerRequest>(junk.as_ptr(), junk.len()) }.unwrap_err();
        assert_eq!(e.status, nri_status::InvalidMessage);
        assert!(
            e.message.starts_with("invalid CreateContainerRequest: "),
            "{}",
            e.message
        );
    }
}
