//! Unit tests of the multiplexer, and the helpers they share.
//!
//! Tests observe conditions instead of sleeping: a "sentinel" frame on another
//! ConnID proves the reader task has processed everything sent before it.

mod alloc;
mod framing;
mod lifecycle;
mod oracle;
mod receive;
mod stream;
mod ttrpc_e2e;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;

use super::frame::{decode_header, encode_header, FRAME_HEADER_LEN};
use super::{ConnId, Mux, Options};

/// Deterministic, position-dependent test bytes (catch reordering and loss).
pub(crate) fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u64)
                .wrapping_mul(31)
                .wrapping_add(seed as u64 * 7 + (i >> 8) as u64) as u8
        })
        .collect()
}

/// A complete ttrpc message: 10-byte header + `payload`.
pub(crate) fn ttrpc_msg(stream_id: u32, msg_type: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&stream_id.to_be_bytes());
    out.push(msg_type);
    out.push(0);
    out.extend_from_slice(payload);
    out
}

/// A test-side view of the far end of a trunk, speaking raw frames.
pub(crate) struct RawPeer<S> {
    pub io: S,
}

impl<S: AsyncRead + AsyncWrite + Unpin> RawPeer<S> {
    pub async fn send_frame(&mut self, id: ConnId, payload: &[u8]) {
        let mut buf = Vec::with_capacity(FRAME_HEADER_LEN + payload.len());
        buf.extend_from_slice(&encode_header(id, payload.len()));
        buf.extend_from_slice(payload);
        self.io.write_all(&buf).await.expect("peer write");
    }

    /// Sends a header claiming `len` bytes without any payload.
    pub async fn send_header(&mut self, id: ConnId, len: u32) {
        let mut hdr = [0u8; FRAME_HEADER_LEN];
        hdr[..4].copy_from_slice(&id.to_be_bytes());
        hdr[4..].copy_from_slice(&len.to_be_bytes());
        self.io.write_all(&hdr).await.expect("peer write");
    }

    /// Reads one frame; `None` at a clean end of file.
    pub async fn recv_frame(&mut self) -> Option<(ConnId, Vec<u8>)> {
        let mut hdr = [0u8; FRAME_HEADER_LEN];
        match self.io.read_exact(&mut hdr).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
            Err(e) => panic!("peer read: {e}"),
        }
        let (id, len) = decode_header(&hdr);
        let mut payload = vec![0u8; len as usize];
        self.io
            .read_exact(&mut payload)
            .await
            .expect("peer payload");
        Some((id, payload))
    }

    /// Reads frames until their payloads add up to `total` bytes.
    pub async fn recv_frames(&mut self, total: usize) -> Vec<(ConnId, Vec<u8>)> {
        let mut got = 0;
        let mut frames = Vec::new();
        while got < total {
            let f = self.recv_frame().await.expect("trunk ended early");
            got += f.1.len();
            frames.push(f);
        }
        assert_eq!(got, total, "frames overshoot the expected byte count");
        frames
    }
}

/// A mux on one end of a socket pair, the test driving the other end by hand.
pub(crate) fn mux_and_peer(opts: Options) -> (Mux, RawPeer<UnixStream>) {
    let (a, b) = UnixStream::pair().expect("socketpair");
    (Mux::new(a, opts), RawPeer { io: b })
}

/// Two muxes talking to each other over a socket pair.
pub(crate) fn mux_pair(a: Options, b: Options) -> (Mux, Mux) {
    let (x, y) = UnixStream::pair().expect("socketpair");
    (Mux::new(x, a), Mux::new(y, b))
}

/// Reads exactly `len` bytes from a connection.
pub(crate) async fn read_n<R: AsyncRead + Unpin>(r: &mut R, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).await.expect("conn read");
    buf
}
