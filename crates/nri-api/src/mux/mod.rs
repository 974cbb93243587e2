//! Trunk multiplexer: several logical connections over one stream socket,
//! wire-compatible with upstream NRI's `pkg/net/multiplex`.
//!
//! An NRI plugin talks to the runtime over a single socket that carries two
//! ttrpc sessions: on [`PLUGIN_SERVICE_CONN`] the plugin serves and the runtime
//! is the client, on [`RUNTIME_SERVICE_CONN`] it is the other way round.
//!
//! # Wire format
//!
//! The trunk is a sequence of frames: an 8-byte header `ConnID u32 BE |
//! payload length u32 BE` followed by that many payload bytes, at most
//! [`MAX_PAYLOAD`] (a ttrpc header plus ttrpc's 4 MiB message limit). ConnID 0
//! is reserved. Opening and closing a ConnID is purely local: nothing goes on
//! the wire, each side simply assumes the other has the same ConnID open, and
//! frames for a ConnID that is not open are dropped.
//!
//! # Why the writer understands ttrpc messages
//!
//! A Go peer reads each mux connection through ttrpc's 4096-byte
//! `bufio.Reader`, and its mux connection returns exactly one frame per `Read`
//! and fails with `ENOMEM` if the frame does not fit the buffer it is given.
//! A frame is therefore only accepted if it is at most 4096 bytes, or if it
//! arrives while ttrpc reads the rest of a large payload directly and fits in
//! that rest. Go's own ttrpc writer (a 4096-byte `bufio.Writer`) produces
//! exactly such frames, and so must we: with [`Framing::Ttrpc`] (the default),
//! a [`Conn`] parses the 10-byte ttrpc headers in the bytes written to it,
//! holds each message until it is complete, and then emits it as
//!
//! * one frame with the ttrpc header and the first `min(len, 4086)` payload
//!   bytes, which fills the Go reader's buffer exactly, and
//! * if payload is left, all of it as one frame (split at [`MAX_PAYLOAD`] only
//!   for messages beyond ttrpc's limit, which are refused by default).
//!
//! Two messages never share a frame, and the frames of one message are written
//! back to back on the trunk. Slicing large messages into many small frames is
//! avoided too: upstream's reader queues at most 256 frames per connection and
//! kills the whole trunk when that queue overflows. Since only complete messages
//! are framed, a ttrpc write that is abandoned half-way never puts a truncated
//! message on the wire. [`Framing::Raw`] is Go's plain `Write` behaviour, for
//! users that do not carry ttrpc.
//!
//! # Why a byte budget instead of a frame queue
//!
//! On the receiving side each connection is a byte stream: frame boundaries
//! mean nothing. Upstream keeps a queue of 256 frames per connection and closes
//! the whole multiplexer when a queue is full, so a burst of tiny frames kills
//! a healthy plugin while a few huge frames may use a gigabyte. Here each
//! connection has a byte budget ([`Options::conn_buffer_limit`]); when it is
//! used up the single reader task stops reading the trunk until the consumer
//! catches up, which pushes back on the peer through the socket. Memory is
//! bounded by bytes, and no amount of legitimate traffic closes a connection.
//! The price is head-of-line blocking: while one connection's consumer stalls
//! with a full budget, the other connection's frames wait behind it.
//!
//! The peer is never trusted: a frame length over [`MAX_PAYLOAD`] closes the
//! multiplexer with [`MuxError::FrameTooLarge`], and payloads are moved in
//! chunks of at most 64 KiB, so the claimed length is never allocated.
//!
//! # Tasks
//!
//! [`Mux::new`] spawns a reader task and a writer task on the current tokio
//! runtime (current-thread or multi-thread). A connection that completes a
//! unit (a ttrpc message, or a raw chunk) while no unit is queued writes it
//! to the trunk itself, on whatever thread it runs, as far as the trunk
//! takes it without waiting: a request then leaves from the thread that
//! made it, without waking the runtime's thread. What the trunk does not
//! take at once, and every unit while others are queued, goes to the writer
//! task, which coalesces queued units into vectored writes; both write
//! under one lock, and only the writer task writes while anything is
//! queued, so units never interleave. Such direct writes are not flushed:
//! the trunk must be one whose writes need no flush (a socket, a pipe,
//! tokio's duplex). Every connection may have at most
//! [`Options::write_buffer_limit`] bytes queued before `poll_write` pushes
//! back. The multiplexer closes when [`Mux::close`] is called, when the
//! trunk ends or fails, or when the last [`Mux`] and [`Conn`] handle is
//! dropped.

mod conn;
mod error;
mod frame;
mod reader;
mod receive;
mod trunk;
mod writer;

#[cfg(test)]
mod tests;

/// The framing code for the fuzz targets in `fuzz/` (cargo feature
/// `fuzzing`); not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use super::frame::{
        decode_header, encode_header, ttrpc_frames, ttrpc_payload_len, Assembler, OversizedMessage,
        FIRST_FRAME_PAYLOAD, GO_BUFIO_SIZE,
    };
}

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};

use conn::{CloseReason, ConnShared};

pub use conn::Conn;
pub use error::MuxError;
pub use frame::{Framing, FRAME_HEADER_LEN, TTRPC_HEADER_LEN, TTRPC_MESSAGE_LENGTH_MAX};
pub use receive::Budget;
pub use trunk::UnixTrunk;

/// Identifies a logical connection on the trunk.
pub type ConnId = u32;

/// ConnID 0 is reserved and cannot be opened.
pub const RESERVED_CONN: ConnId = 0;
/// The runtime is the ttrpc client, the plugin serves the `Plugin` service.
pub const PLUGIN_SERVICE_CONN: ConnId = 1;
/// The plugin is the ttrpc client, the runtime serves the `Runtime` service.
pub const RUNTIME_SERVICE_CONN: ConnId = 2;

/// Largest frame payload: a ttrpc header plus the largest ttrpc message,
/// `10 + (4 << 20)` = 4,194,314 bytes.
pub const MAX_PAYLOAD: usize = TTRPC_HEADER_LEN + TTRPC_MESSAGE_LENGTH_MAX;

/// What each connection accepts from the peer: see
/// [`Options::received_message_limit`] and [`Options::conn_buffer_limit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiveLimits {
    /// Largest ttrpc payload a peer may announce on a [`Framing::Ttrpc`]
    /// connection.
    pub max_message: usize,
    /// Most received bytes a connection buffers before the reader waits.
    pub conn_buffer: usize,
}

impl Default for ReceiveLimits {
    fn default() -> Self {
        ReceiveLimits {
            max_message: usize::MAX,
            conn_buffer: 2 * MAX_PAYLOAD,
        }
    }
}

/// Settings of a [`Mux`].
#[derive(Clone, Debug)]
pub struct Options {
    blocked_read: bool,
    receive: ReceiveLimits,
    receive_budget: Option<Arc<Budget>>,
    read_buffer: usize,
    write_buffer_limit: usize,
    max_message_payload: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            blocked_read: false,
            receive: ReceiveLimits::default(),
            receive_budget: None,
            read_buffer: reader::READ_CHUNK,
            write_buffer_limit: MAX_PAYLOAD,
            max_message_payload: TTRPC_MESSAGE_LENGTH_MAX,
        }
    }
}

impl Options {
    /// Start with the trunk reader blocked until [`Mux::unblock`] is called, so
    /// that frames arriving before the connections are opened are not dropped.
    /// The runtime side uses this.
    pub fn blocked_read(mut self, blocked: bool) -> Self {
        self.blocked_read = blocked;
        self
    }

    /// Most received bytes a connection buffers before the reader waits for the
    /// consumer (default `2 * MAX_PAYLOAD`; at least 1).
    pub fn conn_buffer_limit(mut self, bytes: usize) -> Self {
        self.receive.conn_buffer = bytes.max(1);
        self
    }

    /// Largest ttrpc payload the peer may announce on a [`Framing::Ttrpc`]
    /// connection (default: no limit beyond [`MAX_PAYLOAD`] frames). A
    /// larger header closes the multiplexer with
    /// [`MuxError::ReceivedMessageTooLarge`] before any of its payload is
    /// buffered.
    pub fn received_message_limit(mut self, bytes: usize) -> Self {
        self.receive.max_message = bytes;
        self
    }

    /// Charges every connection's buffered bytes to `budget`, shared with
    /// other multiplexers, until [`Mux::leave_budget`]. Bytes that would
    /// exceed it close the multiplexer receiving them with
    /// [`MuxError::BudgetExhausted`].
    pub fn receive_budget(mut self, budget: Arc<Budget>) -> Self {
        self.receive_budget = Some(budget);
        self
    }

    /// Size of the buffer the trunk is read through (default 64 KiB; at
    /// least one frame header). Smaller costs more reads for large
    /// messages and less memory per idle multiplexer.
    pub fn read_buffer(mut self, bytes: usize) -> Self {
        self.read_buffer = bytes.max(FRAME_HEADER_LEN);
        self
    }

    /// Bytes a connection may have queued for the trunk before a new message
    /// (ttrpc framing) or write (raw framing) waits (default `MAX_PAYLOAD`).
    /// A ttrpc message that has started is always taken to its end.
    pub fn write_buffer_limit(mut self, bytes: usize) -> Self {
        self.write_buffer_limit = bytes.max(1);
        self
    }

    /// Largest ttrpc payload a [`Framing::Ttrpc`] connection accepts for
    /// sending (default ttrpc's own limit, 4 MiB). A larger message fails the
    /// write with [`MuxError::MessageTooLarge`] and the connection's write side
    /// stays failed, since its byte stream can no longer be framed.
    pub fn max_message_payload(mut self, bytes: usize) -> Self {
        self.max_message_payload = bytes.min(u32::MAX as usize);
        self
    }
}

/// A trunk multiplexer. Cheap to clone; all clones share one trunk.
#[derive(Clone)]
pub struct Mux {
    shared: Arc<Shared>,
    owner: Arc<Owner>,
}

impl std::fmt::Debug for Mux {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mux")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Mux {
    /// Multiplexes `trunk`, spawning the reader and writer tasks on the
    /// current tokio runtime. `trunk`'s writes must need no flush (see
    /// "Tasks" in the module docs).
    ///
    /// # Panics
    ///
    /// Panics if called outside a tokio runtime.
    pub fn new<T>(trunk: T, opts: Options) -> Mux
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (rd, wr) = tokio::io::split(trunk);
        let (write_tx, write_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(MuxState {
                receive: opts.receive,
                budget: opts.receive_budget.clone(),
                ..MuxState::default()
            }),
            closed_tx: watch::Sender::new(false),
            unblock_tx: watch::Sender::new(!opts.blocked_read),
            write_tx,
            trunk: Mutex::new(writer::Trunk::new(Box::pin(wr))),
            opts,
        });
        tokio::spawn(reader::run(Arc::clone(&shared), rd));
        tokio::spawn(writer::run(Arc::clone(&shared), write_rx));
        let owner = Arc::new(Owner(Arc::clone(&shared)));
        Mux { shared, owner }
    }

    /// Lets a reader started with [`Options::blocked_read`] go. Idempotent.
    pub fn unblock(&self) {
        self.shared.unblock_tx.send_replace(true);
    }

    /// Opens `id` with [`Framing::Ttrpc`].
    pub fn open(&self, id: ConnId) -> Result<Conn, MuxError> {
        self.open_with(id, Framing::Ttrpc)
    }

    /// Opens `id` with the given framing. Fails for ConnID 0, for an ID that is
    /// already open (drop its [`Conn`] first) and once the mux is closed.
    pub fn open_with(&self, id: ConnId, framing: Framing) -> Result<Conn, MuxError> {
        if id == RESERVED_CONN {
            return Err(MuxError::Reserved(id));
        }
        let conn = {
            let mut st = self.shared.lock();
            if st.closed {
                return Err(MuxError::Closed);
            }
            if st.conns.contains_key(&id) {
                return Err(MuxError::AlreadyOpen(id));
            }
            let conn = Arc::new(ConnShared::new(
                id,
                framing,
                &self.shared.opts,
                st.receive,
                st.budget.clone(),
            ));
            st.conns.insert(id, Arc::clone(&conn));
            conn
        };
        Ok(Conn::new(
            conn,
            Arc::clone(&self.shared),
            Arc::clone(&self.owner),
        ))
    }

    /// Changes what every connection, open or opened later, accepts from the
    /// peer from now on. Bytes already buffered stay, even beyond a lower
    /// buffer limit.
    pub fn set_receive_limits(&self, limits: ReceiveLimits) {
        let mut st = self.shared.lock();
        st.receive = limits;
        for conn in st.conns.values() {
            conn.set_limits(limits);
        }
    }

    /// Stops charging received bytes to the shared budget and returns what
    /// the connections hold to it.
    pub fn leave_budget(&self) {
        let mut st = self.shared.lock();
        st.budget = None;
        for conn in st.conns.values() {
            conn.leave_budget();
        }
    }

    /// Closes the multiplexer, all its connections and the trunk. Idempotent.
    /// Bytes queued for the trunk but not yet written are dropped.
    pub fn close(&self) {
        self.shared.shutdown(Shutdown::Local);
    }

    /// True once the multiplexer is closed, for whatever reason.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }

    /// Why the multiplexer closed: `None` while open and after a clean close
    /// (local close or end of file on a frame boundary).
    pub fn error(&self) -> Option<Arc<MuxError>> {
        self.shared.lock().reason.clone()
    }

    /// Resolves when the multiplexer has closed, with the error that closed it
    /// (`None` for a clean close).
    pub async fn closed(&self) -> Option<Arc<MuxError>> {
        let mut rx = self.shared.closed_tx.subscribe();
        // The sender lives in `shared`, which we hold, so this cannot fail.
        let _ = rx.wait_for(|c| *c).await;
        self.error()
    }
}

/// Closes the multiplexer when the last user handle ([`Mux`] or [`Conn`]) is
/// gone; the tasks only hold [`Shared`].
pub(crate) struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.shutdown(Shutdown::Local);
    }
}

/// How the multiplexer ends.
pub(crate) enum Shutdown {
    Local,
    Eof,
    Error(MuxError),
}

/// State shared by the handles and the two tasks.
pub(crate) struct Shared {
    state: Mutex<MuxState>,
    /// Flips to `true` once, when the multiplexer closes.
    closed_tx: watch::Sender<bool>,
    /// `true` once the reader may run.
    unblock_tx: watch::Sender<bool>,
    write_tx: mpsc::UnboundedSender<writer::Unit>,
    /// The trunk's write side: the writer task's, and a connection's that
    /// writes a unit itself while nothing is queued before it.
    trunk: Mutex<writer::Trunk>,
    opts: Options,
}

#[derive(Default)]
struct MuxState {
    conns: HashMap<ConnId, Arc<ConnShared>>,
    /// For connections opened from now on.
    receive: ReceiveLimits,
    budget: Option<Arc<Budget>>,
    closed: bool,
    reason: Option<Arc<MuxError>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, MuxState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The trunk's write side. Never taken while holding it: a
    /// connection's state lock may be held around it, not the other way.
    pub(crate) fn trunk(&self) -> MutexGuard<'_, writer::Trunk> {
        self.trunk.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The open connection for `id`, if any.
    pub(crate) fn lookup(&self, id: ConnId) -> Option<Arc<ConnShared>> {
        self.lock().conns.get(&id).cloned()
    }

    /// Unregisters `conn` (if `id` still maps to it).
    pub(crate) fn forget(&self, id: ConnId, conn: &Arc<ConnShared>) {
        let mut st = self.lock();
        if st.conns.get(&id).is_some_and(|c| Arc::ptr_eq(c, conn)) {
            st.conns.remove(&id);
        }
    }

    /// Closes everything once; later calls do nothing.
    pub(crate) fn shutdown(&self, how: Shutdown) {
        let (reason, conn_reason) = match how {
            Shutdown::Local => (None, CloseReason::Local),
            Shutdown::Eof => (None, CloseReason::Eof),
            Shutdown::Error(e) => {
                let e = Arc::new(e);
                (Some(Arc::clone(&e)), CloseReason::Error(e))
            }
        };
        let conns = {
            let mut st = self.lock();
            if st.closed {
                return;
            }
            if let Some(e) = &reason {
                log::debug!("nri mux: closing: {e}");
            }
            st.closed = true;
            st.reason = reason;
            std::mem::take(&mut st.conns)
        };
        for conn in conns.values() {
            conn.mux_closed(conn_reason.clone());
        }
        // Stops both tasks; dropping the trunk's halves closes the trunk.
        self.closed_tx.send_replace(true);
        self.trunk().close();
    }
}
