//! ttrpc messages as bytes: the 10-byte message header and the
//! `ttrpc.Request` and `ttrpc.Response` envelopes around a method's
//! payload.
//!
//! The runtime's client for a plugin's Plugin service and the stub's server
//! for it write and read these themselves instead of going through
//! ttrpc-rust's connections, which copy every message into fresh
//! zero-filled buffers and hand it between tasks (see the two users' module
//! docs for what that cost). Everything a peer can observe stays as
//! ttrpc-rust and Go's ttrpc make it: the field order of the envelopes, an
//! empty status in a successful response, and the words of the refusal of
//! a message over ttrpc's size limit, which runtimes recognize.

use std::borrow::Cow;

use protobuf::{CodedInputStream, CodedOutputStream, Message};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::mux::{TTRPC_HEADER_LEN, TTRPC_MESSAGE_LENGTH_MAX};

/// The Plugin service's name on the wire, which a request names.
pub const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";

/// A request (the ninth byte of the header).
pub const MESSAGE_TYPE_REQUEST: u8 = 1;
/// A response.
pub const MESSAGE_TYPE_RESPONSE: u8 = 2;
/// Data of a stream; the NRI services have no streams.
pub const MESSAGE_TYPE_DATA: u8 = 3;

/// A ttrpc message header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Length of the envelope that follows.
    pub len: usize,
    /// Odd for the client's streams.
    pub stream: u32,
    /// One of the `MESSAGE_TYPE_*`.
    pub kind: u8,
    pub flags: u8,
}

impl Header {
    pub fn parse(bytes: &[u8; TTRPC_HEADER_LEN]) -> Header {
        let [l0, l1, l2, l3, s0, s1, s2, s3, kind, flags] = *bytes;
        Header {
            len: u32::from_be_bytes([l0, l1, l2, l3]) as usize,
            stream: u32::from_be_bytes([s0, s1, s2, s3]),
            kind,
            flags,
        }
    }

    fn write(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&(self.len as u32).to_be_bytes());
        buf.extend_from_slice(&self.stream.to_be_bytes());
        buf.extend_from_slice(&[self.kind, self.flags]);
    }
}

/// ttrpc's words for a message over its limit, Go's and ttrpc-rust's alike;
/// runtimes recognize them in a plugin's status.
pub fn oversized(len: usize) -> String {
    format!("message length {len} exceed maximum message size of {TTRPC_MESSAGE_LENGTH_MAX}")
}

/// A request message: its header, then the `ttrpc.Request` envelope
/// (service, method, payload, timeout), encoded as rust-protobuf encodes
/// it, in one buffer. Over ttrpc's limit it is refused with ttrpc-rust's
/// error (`Others`, [`oversized`]'s words) before anything is built.
pub fn encode_request(
    stream: u32,
    service: &str,
    method: &str,
    payload: &[u8],
    timeout_nano: i64,
) -> ttrpc::Result<Vec<u8>> {
    let mut len = field_len(service.len()) + field_len(method.len());
    if !payload.is_empty() {
        len += field_len(payload.len());
    }
    if timeout_nano != 0 {
        len += 1 + varint_len(timeout_nano as u64);
    }
    if len > TTRPC_MESSAGE_LENGTH_MAX {
        return Err(ttrpc::Error::Others(oversized(len)));
    }
    let mut buf = Vec::with_capacity(TTRPC_HEADER_LEN + len);
    Header {
        len,
        stream,
        kind: MESSAGE_TYPE_REQUEST,
        flags: 0,
    }
    .write(&mut buf);
    let mut os = CodedOutputStream::vec(&mut buf);
    let encoded = (|| {
        os.write_string(1, service)?;
        os.write_string(2, method)?;
        if !payload.is_empty() {
            os.write_bytes(3, payload)?;
        }
        if timeout_nano != 0 {
            os.write_int64(4, timeout_nano)?;
        }
        os.flush()
    })();
    drop(os);
    encoded.map_err(|e| ttrpc::Error::Others(format!("Encoding request {e}")))?;
    debug_assert_eq!(buf.len(), TTRPC_HEADER_LEN + len);
    Ok(buf)
}

/// The payload of an encoded `ttrpc.Response`, or its status if that is
/// not OK.
pub fn decode_response(bytes: &[u8]) -> ttrpc::Result<Vec<u8>> {
    let rsp = ttrpc::Response::parse_from_bytes(bytes)
        .map_err(|e| ttrpc::Error::Others(format!("Unpack response error {e}")))?;
    if let Some(status) = rsp.status.into_option() {
        if status.code() != ttrpc::Code::OK {
            return Err(ttrpc::Error::RpcStatus(status));
        }
    }
    Ok(rsp.payload)
}

/// A decoded `ttrpc.Request`, borrowing from the bytes it was read from.
/// Its metadata is checked and dropped: nothing in NRI sends or reads any.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub service: &'a str,
    pub method: &'a str,
    pub payload: &'a [u8],
    pub timeout_nano: i64,
}

impl<'a> Request<'a> {
    /// Decodes an envelope as rust-protobuf's generated code decodes a
    /// `ttrpc.Request`: the same bytes are accepted and refused, a field
    /// given twice takes its last value, and a field in a wire type other
    /// than its own is read as an unknown one. Only the strings and the
    /// payload are not copied.
    pub fn parse(bytes: &'a [u8]) -> protobuf::Result<Request<'a>> {
        // Unknown fields are read as decoding reads them, and dropped.
        let mut unknown = protobuf::UnknownFields::new();
        let mut req = Request {
            service: "",
            method: "",
            payload: &[],
            timeout_nano: 0,
        };
        let mut is = CodedInputStream::from_bytes(bytes);
        while let Some(tag) = is.read_raw_tag_or_eof()? {
            match tag {
                // Fields 1-3, length-delimited: service, method, payload.
                10 | 18 | 26 => {
                    let len = is.read_raw_varint32()?;
                    let at = is.pos() as usize;
                    is.skip_raw_bytes(len)?;
                    let field = &bytes[at..at + len as usize];
                    match tag {
                        10 => req.service = utf8(field)?,
                        18 => req.method = utf8(field)?,
                        _ => req.payload = field,
                    }
                }
                // Field 4, varint: the timeout.
                32 => req.timeout_nano = is.read_int64()?,
                // Field 5: metadata, checked as decoding checks it.
                42 => {
                    is.read_message::<ttrpc::proto::KeyValue>()?;
                }
                _ => protobuf::rt::read_unknown_or_skip_group(tag, &mut is, &mut unknown)?,
            }
        }
        Ok(req)
    }
}

fn utf8(bytes: &[u8]) -> protobuf::Result<&str> {
    std::str::from_utf8(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a string that is not UTF-8",
        )
        .into()
    })
}

/// A response message answering `stream`: the header, then the
/// `ttrpc.Response` envelope with `reply` encoded as its payload, or with
/// the status of the failure. A successful response carries an empty
/// status, as ttrpc-rust's and Go's do. One whose envelope would be over
/// ttrpc's limit is answered instead with ttrpc-rust's `InvalidArgument`
/// status in [`oversized`]'s words.
pub fn encode_response<M: Message>(stream: u32, reply: Result<&M, &ttrpc::Status>) -> Vec<u8> {
    let status = match reply {
        Ok(m) => {
            let size = m.compute_size();
            // An empty status, then the payload.
            let len = field_len(0) + field_len(size as usize);
            if len <= TTRPC_MESSAGE_LENGTH_MAX {
                let mut buf = response_buf(stream, len);
                let mut os = CodedOutputStream::vec(&mut buf);
                let encoded = (|| {
                    os.write_raw_bytes(&[0x0a, 0x00])?;
                    os.write_tag(2, protobuf::rt::WireType::LengthDelimited)?;
                    os.write_raw_varint64(size)?;
                    m.write_to_with_cached_sizes(&mut os)?;
                    os.flush()
                })();
                drop(os);
                match encoded {
                    Ok(()) => {
                        debug_assert_eq!(buf.len(), TTRPC_HEADER_LEN + len);
                        return buf;
                    }
                    Err(e) => ttrpc::get_status(
                        ttrpc::Code::UNKNOWN,
                        format!("ttrpc err: Encoding response {e}"),
                    ),
                }
            } else {
                ttrpc::get_status(ttrpc::Code::INVALID_ARGUMENT, oversized(len))
            }
        }
        Err(status) => status.clone(),
    };
    encode_status(stream, &status)
}

/// A response carrying only `status`.
fn encode_status(stream: u32, status: &ttrpc::Status) -> Vec<u8> {
    let status_len = |s: &ttrpc::Status| field_len(s.compute_size() as usize);
    let mut len = status_len(status);
    let mut status = Cow::Borrowed(status);
    if len > TTRPC_MESSAGE_LENGTH_MAX {
        // Only a handler's own status can be this long: say so instead.
        status = Cow::Owned(ttrpc::get_status(
            ttrpc::Code::INVALID_ARGUMENT,
            oversized(len),
        ));
        len = status_len(&status);
    }
    let mut buf = response_buf(stream, len);
    let mut os = CodedOutputStream::vec(&mut buf);
    // Writing to a vector fails only where the message's own sizes
    // disagree, which the generated code's do not.
    let _ = os.write_message(1, &*status).and_then(|()| os.flush());
    drop(os);
    buf
}

/// Reads the `len` bytes of a message's envelope, appending them to `buf`
/// without zero-filling it first.
pub async fn read_envelope<R>(rd: &mut R, buf: &mut Vec<u8>, len: usize) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
{
    let end = buf.len() + len;
    buf.reserve(len);
    while buf.len() < end {
        let left = (end - buf.len()) as u64;
        if (&mut *rd).take(left).read_buf(buf).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(())
}

/// Reads `len` bytes and drops them, 64 KiB at a time: the envelope of a
/// message over the limit, which is never held whole.
pub async fn discard<R>(rd: &mut R, len: usize) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
{
    let mut sink = vec![0u8; len.min(64 << 10)];
    let mut left = len;
    while left > 0 {
        let n = left.min(sink.len());
        rd.read_exact(&mut sink[..n]).await?;
        left -= n;
    }
    Ok(())
}

fn response_buf(stream: u32, len: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(TTRPC_HEADER_LEN + len);
    Header {
        len,
        stream,
        kind: MESSAGE_TYPE_RESPONSE,
        flags: 0,
    }
    .write(&mut buf);
    buf
}

/// Bytes of a length-delimited protobuf field of a one-byte tag (field
/// numbers 1 to 15) holding `len` bytes.
pub fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

fn varint_len(v: u64) -> usize {
    protobuf::rt::compute_raw_varint64_size(v) as usize
}

#[cfg(test)]
mod tests;
