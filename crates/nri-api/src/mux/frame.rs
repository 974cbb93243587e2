//! Trunk frame layout and the two framing policies (ttrpc-aware and raw).
//!
//! Everything here is pure: it turns bytes into frames and back, with no I/O.

use bytes::{BufMut, Bytes, BytesMut};

use super::{ConnId, MAX_PAYLOAD};

/// Length of a trunk frame header: `ConnID u32 BE | payload length u32 BE`.
pub const FRAME_HEADER_LEN: usize = 8;

/// Length of a ttrpc message header: `length u32 BE | stream_id u32 BE | type u8 | flags u8`.
pub const TTRPC_HEADER_LEN: usize = 10;

/// Largest ttrpc message payload ttrpc itself sends or accepts (`4 << 20`).
pub const TTRPC_MESSAGE_LENGTH_MAX: usize = 4 << 20;

/// Size of the buffered reader and writer a Go ttrpc peer puts on top of its
/// mux connection (`bufio.NewReader`/`bufio.NewWriter`, 4096 bytes each).
pub const GO_BUFIO_SIZE: usize = 4096;

/// Payload bytes that travel in the first frame of a ttrpc message, after the
/// 10-byte ttrpc header: the first frame then fills Go's 4096-byte buffer exactly.
pub const FIRST_FRAME_PAYLOAD: usize = GO_BUFIO_SIZE - TTRPC_HEADER_LEN;

/// How a [`Conn`](super::Conn) cuts the bytes written to it into trunk frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Framing {
    /// The written bytes are a stream of ttrpc messages. Each complete message
    /// goes out the way a Go ttrpc peer writes it (see the module docs): one
    /// frame with the header and the first 4086 payload bytes, then the rest
    /// of the payload as one frame (split only at [`MAX_PAYLOAD`]). Partial
    /// messages stay buffered until they are complete.
    #[default]
    Ttrpc,
    /// Every write becomes frames of at most [`MAX_PAYLOAD`] bytes, like Go's
    /// generic `conn.Write`. A zero-length write sends a header-only frame.
    Raw,
}

/// Encodes a trunk frame header.
pub fn encode_header(id: ConnId, len: usize) -> [u8; FRAME_HEADER_LEN] {
    debug_assert!(len <= MAX_PAYLOAD);
    let mut hdr = [0u8; FRAME_HEADER_LEN];
    hdr[..4].copy_from_slice(&id.to_be_bytes());
    hdr[4..].copy_from_slice(&(len as u32).to_be_bytes());
    hdr
}

/// Decodes a trunk frame header into `(conn id, claimed payload length)`.
pub fn decode_header(hdr: &[u8; FRAME_HEADER_LEN]) -> (ConnId, u32) {
    let id = u32::from_be_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
    let len = u32::from_be_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
    (id, len)
}

/// The payload length a ttrpc message header announces.
pub fn ttrpc_payload_len(hdr: &[u8]) -> usize {
    u32::from_be_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize
}

/// One frame with a small payload, header and payload in one buffer.
pub fn small_frame(id: ConnId, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(FRAME_HEADER_LEN + payload.len());
    out.put_slice(&encode_header(id, payload.len()));
    out.put_slice(payload);
    out.freeze()
}

/// Cuts one complete ttrpc message (10-byte header + payload) into the
/// buffers to put on the trunk, in order, frame headers included.
///
/// * first frame: the ttrpc header and the first `min(len, 4086)` payload
///   bytes (copied together with its frame header into one small buffer);
/// * then the remaining payload, if any, as one frame, or as several frames
///   of [`MAX_PAYLOAD`] bytes when it is larger than that (never with the
///   default message limit). These reference `msg` without copying.
pub fn ttrpc_frames(id: ConnId, mut msg: Bytes) -> Vec<Bytes> {
    debug_assert!(msg.len() >= TTRPC_HEADER_LEN);
    let first = msg.split_to(msg.len().min(TTRPC_HEADER_LEN + FIRST_FRAME_PAYLOAD));
    let mut out = Vec::with_capacity(1 + 2 * msg.len().div_ceil(MAX_PAYLOAD));
    out.push(small_frame(id, &first));
    while !msg.is_empty() {
        let chunk = msg.split_to(msg.len().min(MAX_PAYLOAD));
        out.push(Bytes::copy_from_slice(&encode_header(id, chunk.len())));
        out.push(chunk);
    }
    out
}

/// Why an [`Assembler`] gave up on the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OversizedMessage {
    /// Payload length the ttrpc header announced.
    pub len: usize,
}

/// Collects written bytes until they form one complete ttrpc message.
///
/// Only the message being assembled is held: as soon as it is complete it is
/// handed out, so two messages never share a frame.
#[derive(Debug, Default)]
pub struct Assembler {
    buf: BytesMut,
    /// Total size (header + payload) of the current message, once its header is in.
    total: Option<usize>,
}

impl Assembler {
    /// True if no byte of a message is buffered.
    pub fn is_idle(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes buffered for the incomplete message.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// How many more bytes end the current header or message.
    pub fn wanted(&self) -> usize {
        match self.total {
            None => TTRPC_HEADER_LEN - self.buf.len(),
            Some(total) => total - self.buf.len(),
        }
    }

    /// Appends at most [`wanted`](Self::wanted) bytes; returns the finished
    /// message if these bytes complete one. `max_payload` bounds the payload a
    /// header may announce.
    pub fn push(
        &mut self,
        data: &[u8],
        max_payload: usize,
    ) -> Result<Option<Bytes>, OversizedMessage> {
        debug_assert!(data.len() <= self.wanted());
        self.buf.extend_from_slice(data);
        if self.total.is_none() && self.buf.len() == TTRPC_HEADER_LEN {
            let len = ttrpc_payload_len(&self.buf);
            if len > max_payload {
                return Err(OversizedMessage { len });
            }
            // Bounded by `max_payload`, so reserving the whole message is fine.
            self.buf.reserve(len);
            self.total = Some(TTRPC_HEADER_LEN + len);
        }
        match self.total {
            Some(total) if self.buf.len() == total => {
                self.total = None;
                Ok(Some(self.buf.split().freeze()))
            }
            _ => Ok(None),
        }
    }

    /// Drops whatever is buffered.
    pub fn clear(&mut self) {
        self.buf = BytesMut::new();
        self.total = None;
    }
}
