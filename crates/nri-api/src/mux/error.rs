//! Errors of the multiplexer.

use std::io;
use std::sync::Arc;

use super::ConnId;

/// Why an operation on the multiplexer failed or why the trunk went away.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum MuxError {
    /// ConnID 0 is reserved and cannot be opened.
    #[error("ConnID {0} is reserved")]
    Reserved(ConnId),
    /// The ConnID already has an open [`Conn`](super::Conn).
    #[error("ConnID {0} is already open")]
    AlreadyOpen(ConnId),
    /// The multiplexer has been closed.
    #[error("multiplexer is closed")]
    Closed,
    /// The peer sent a frame header announcing more than [`MAX_PAYLOAD`](super::MAX_PAYLOAD) bytes.
    #[error("frame for conn {conn} claims {len} bytes, limit is {max}")]
    FrameTooLarge {
        /// ConnID in the offending header.
        conn: ConnId,
        /// Payload length the header claims.
        len: u32,
        /// The limit.
        max: usize,
    },
    /// The trunk reached end of file inside a frame header.
    #[error("trunk closed mid-frame: got {received} of 8 header bytes")]
    TruncatedHeader {
        /// Header bytes that did arrive.
        received: usize,
    },
    /// The trunk reached end of file inside a frame payload.
    #[error(
        "trunk closed mid-frame: frame for conn {conn} of {len} bytes ended after {received} bytes"
    )]
    TruncatedPayload {
        /// ConnID of the frame.
        conn: ConnId,
        /// Payload length the header announced.
        len: u32,
        /// Payload bytes that did arrive.
        received: usize,
    },
    /// Reading from the trunk failed.
    #[error("failed to read from trunk: {0}")]
    TrunkRead(#[source] io::Error),
    /// Writing to the trunk failed.
    #[error("failed to write to trunk: {0}")]
    TrunkWrite(#[source] io::Error),
    /// A ttrpc message written to a [`Conn`](super::Conn) is larger than the
    /// configured limit ([`Options::max_message_payload`](super::Options::max_message_payload)).
    #[error("ttrpc message on conn {conn} has a {len}-byte payload, limit is {max}")]
    MessageTooLarge {
        /// ConnID written to.
        conn: ConnId,
        /// Payload length the ttrpc header announced.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The peer announced a ttrpc message larger than the receiving
    /// connection accepts ([`Options::received_message_limit`](super::Options::received_message_limit)).
    #[error("peer announced a {len}-byte ttrpc message on conn {conn}, limit is {max}")]
    ReceivedMessageTooLarge {
        /// ConnID of the connection.
        conn: ConnId,
        /// Payload length the ttrpc header announced.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Received bytes would exceed the budget shared with other
    /// multiplexers ([`Options::receive_budget`](super::Options::receive_budget)).
    #[error("received bytes exceed the shared budget of {limit} bytes")]
    BudgetExhausted {
        /// The budget's limit.
        limit: usize,
    },
}

impl MuxError {
    /// The [`io::ErrorKind`] this error maps to when a [`Conn`](super::Conn) reports it.
    pub fn io_kind(&self) -> io::ErrorKind {
        match self {
            MuxError::Reserved(_) | MuxError::AlreadyOpen(_) => io::ErrorKind::InvalidInput,
            MuxError::Closed => io::ErrorKind::BrokenPipe,
            MuxError::FrameTooLarge { .. } => io::ErrorKind::InvalidData,
            MuxError::TruncatedHeader { .. } | MuxError::TruncatedPayload { .. } => {
                io::ErrorKind::UnexpectedEof
            }
            MuxError::TrunkRead(e) | MuxError::TrunkWrite(e) => e.kind(),
            MuxError::MessageTooLarge { .. } => io::ErrorKind::InvalidInput,
            MuxError::ReceivedMessageTooLarge { .. } => io::ErrorKind::InvalidData,
            MuxError::BudgetExhausted { .. } => io::ErrorKind::OutOfMemory,
        }
    }
}

/// Wraps a shared mux error into an [`io::Error`] for the `AsyncRead`/`AsyncWrite` side.
/// The original is reachable through [`io::Error::get_ref`] as an `Arc<MuxError>`.
pub(crate) fn to_io(err: &Arc<MuxError>) -> io::Error {
    io::Error::new(err.io_kind(), Arc::clone(err))
}
