//! One logical connection of the multiplexer: its byte-budgeted receive
//! buffer, its write-side message assembly and the `AsyncRead`/`AsyncWrite`
//! face it shows to ttrpc.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::error::{to_io, MuxError};
use super::frame::{self, Assembler, Framing};
use super::receive::{Budget, MessageScanner};
use super::writer::{Unit, UnitOwner};
use super::{ConnId, Owner, ReceiveLimits, Shared, MAX_PAYLOAD};

/// Receive buffers above this capacity are released when they run empty, so
/// an idle connection does not keep the memory of its largest burst.
const KEEP_CAPACITY: usize = 64 << 10;

/// Why a connection stopped.
#[derive(Clone, Debug)]
pub(crate) enum CloseReason {
    /// `Mux::close` (or the last handle went away): reads return EOF at once.
    Local,
    /// The peer closed the trunk cleanly: buffered bytes, then EOF.
    Eof,
    /// The trunk failed: buffered bytes, then this error.
    Error(Arc<MuxError>),
}

/// State of one connection shared by its [`Conn`] handle, the mux reader
/// task (producer of received bytes) and the mux writer task (consumer of
/// outgoing frames).
pub(crate) struct ConnShared {
    id: ConnId,
    framing: Framing,
    write_limit: usize,
    max_message: usize,
    state: Mutex<ConnState>,
}

#[derive(Default)]
struct ConnState {
    // --- receive side ---
    /// Received bytes not yet read; never longer than `limits.conn_buffer`.
    rbuf: VecDeque<u8>,
    limits: ReceiveLimits,
    /// Where the received bytes stand in ttrpc's messages (ttrpc framing only).
    scanner: MessageScanner,
    /// Charged for the bytes in `rbuf`, if the connection shares one.
    budget: Option<Arc<Budget>>,
    /// High-water mark of `rbuf.len()`.
    peak: usize,
    /// The `Conn` reader waiting for bytes.
    read_waker: Option<Waker>,
    /// The mux reader task waiting for room in `rbuf`.
    feed_waker: Option<Waker>,

    // --- lifecycle ---
    /// The `Conn` handle is gone; the mux no longer routes frames here.
    detached: bool,
    closed: Option<CloseReason>,

    // --- send side ---
    assembler: Assembler,
    /// Bytes (frame headers included) handed to the writer task and not yet on the trunk.
    in_flight: usize,
    write_waker: Option<Waker>,
    drain_waker: Option<Waker>,
    /// Sticky write failure: the outgoing byte stream can no longer be framed.
    write_error: Option<Arc<MuxError>>,
    write_shutdown: bool,
}

impl UnitOwner for ConnShared {
    /// The writer task put `len` bytes of this connection on the trunk.
    fn written(&self, len: usize) {
        let wakers = {
            let mut st = self.lock();
            st.in_flight -= len;
            [st.write_waker.take(), st.drain_waker.take()]
        };
        wakers.into_iter().flatten().for_each(Waker::wake);
    }
}

impl ConnShared {
    pub(crate) fn new(
        id: ConnId,
        framing: Framing,
        opts: &super::Options,
        limits: ReceiveLimits,
        budget: Option<Arc<Budget>>,
    ) -> ConnShared {
        let mut state = ConnState::default();
        state.limits = limits;
        state.budget = budget;
        ConnShared {
            id,
            framing,
            write_limit: opts.write_buffer_limit,
            max_message: opts.max_message_payload,
            state: Mutex::new(state),
        }
    }

    /// Applies new receive limits; bytes already buffered stay.
    pub(crate) fn set_limits(&self, limits: ReceiveLimits) {
        let waker = {
            let mut st = self.lock();
            st.limits = limits;
            st.feed_waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Stops charging this connection's bytes to its budget.
    pub(crate) fn leave_budget(&self) {
        let mut st = self.lock();
        if let Some(b) = st.budget.take() {
            b.give(st.rbuf.len());
        }
    }

    fn lock(&self) -> MutexGuard<'_, ConnState> {
        // A panic while holding this lock leaves plain data behind; keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ----- called by the mux reader task -----

    /// Waits for room in the receive buffer. `None` means the connection no
    /// longer takes data (its handle is gone or the mux closed): the caller
    /// discards the rest of the frame.
    pub(crate) fn poll_room(&self, cx: &mut Context<'_>) -> Poll<Option<usize>> {
        let mut st = self.lock();
        if st.detached || st.closed.is_some() {
            return Poll::Ready(None);
        }
        let room = st.limits.conn_buffer.saturating_sub(st.rbuf.len());
        if room > 0 {
            Poll::Ready(Some(room))
        } else {
            st.feed_waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    /// Appends received bytes (at most the room `poll_room` reported), or
    /// refuses them, buffering nothing, if they announce a ttrpc message over
    /// the limit or exceed the shared budget: the caller closes the mux.
    pub(crate) fn deliver(&self, data: &[u8]) -> Result<(), MuxError> {
        let mut st = self.lock();
        if st.detached || st.closed.is_some() {
            return Ok(());
        }
        if self.framing == Framing::Ttrpc {
            let max = st.limits.max_message;
            st.scanner
                .scan(data, max)
                .map_err(|len| MuxError::ReceivedMessageTooLarge {
                    conn: self.id,
                    len,
                    max,
                })?;
        }
        if let Some(b) = &st.budget {
            if !b.take(data.len()) {
                return Err(MuxError::BudgetExhausted { limit: b.limit() });
            }
        }
        let need = st.rbuf.len() + data.len();
        let limit = st.limits.conn_buffer;
        debug_assert!(need <= limit);
        if need > st.rbuf.capacity() {
            // Grow geometrically, but never past the limit.
            let target = (2 * st.rbuf.capacity()).clamp(need, limit.max(need));
            let len = st.rbuf.len();
            st.rbuf.reserve_exact(target - len);
        }
        st.rbuf.extend(data);
        st.peak = st.peak.max(st.rbuf.len());
        if let Some(w) = st.read_waker.take() {
            w.wake();
        }
        Ok(())
    }

    // ----- called by the mux -----

    /// The mux closed: wake everybody so they observe `reason`.
    pub(crate) fn mux_closed(&self, reason: CloseReason) {
        let wakers = {
            let mut st = self.lock();
            if st.closed.is_some() {
                return;
            }
            if matches!(reason, CloseReason::Local) {
                st.discard_received();
            }
            st.assembler.clear();
            st.closed = Some(reason);
            st.take_wakers()
        };
        wakers.into_iter().flatten().for_each(Waker::wake);
    }

    fn detach(&self) {
        let waker = {
            let mut st = self.lock();
            st.detached = true;
            st.discard_received();
            st.assembler.clear();
            st.feed_waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Drop for ConnState {
    fn drop(&mut self) {
        self.discard_received();
    }
}

impl ConnState {
    /// Drops the received bytes, returning them to the budget.
    fn discard_received(&mut self) {
        if let Some(b) = &self.budget {
            b.give(self.rbuf.len());
        }
        self.rbuf = VecDeque::new();
    }

    fn take_wakers(&mut self) -> [Option<Waker>; 4] {
        [
            self.read_waker.take(),
            self.feed_waker.take(),
            self.write_waker.take(),
            self.drain_waker.take(),
        ]
    }

    /// The error a write must fail with now, if any.
    fn write_refusal(&self) -> Option<io::Error> {
        if let Some(err) = &self.write_error {
            return Some(to_io(err));
        }
        match &self.closed {
            Some(CloseReason::Error(err)) => return Some(to_io(err)),
            Some(_) => return Some(to_io(&Arc::new(MuxError::Closed))),
            None => {}
        }
        if self.write_shutdown {
            return Some(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "mux connection: write side was shut down",
            ));
        }
        None
    }
}

/// One logical connection of a [`Mux`](super::Mux).
///
/// Reading yields the connection's received bytes as a plain byte stream (frame
/// boundaries carry no meaning). Writing frames the bytes according to the
/// connection's [`Framing`]; complete messages are queued for the trunk at
/// once, `flush` never waits, and [`Conn::drained`] resolves once they are on
/// the trunk. Dropping the `Conn` closes the ConnID locally:
/// later frames for it are dropped and it can be opened again.
///
/// After the mux closes, reads return the bytes already received and then EOF
/// (or the error that closed the mux), and writes fail. A local
/// [`Mux::close`](super::Mux::close) discards received bytes at once.
pub struct Conn {
    shared: Arc<ConnShared>,
    mux: Arc<Shared>,
    _owner: Arc<Owner>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("id", &self.shared.id)
            .field("framing", &self.shared.framing)
            .finish_non_exhaustive()
    }
}

impl Conn {
    pub(crate) fn new(shared: Arc<ConnShared>, mux: Arc<Shared>, owner: Arc<Owner>) -> Conn {
        Conn {
            shared,
            mux,
            _owner: owner,
        }
    }

    /// A ttrpc listener whose only connection is this one, for serving a
    /// ttrpc service on it. ttrpc has no serve-this-connection API, so the
    /// listener yields this stream once and then stays pending, which keeps
    /// ttrpc's accept loop (and with it the connection) alive.
    pub fn into_ttrpc_listener(self) -> ttrpc::r#async::transport::Listener {
        use futures::StreamExt;
        ttrpc::r#async::transport::Listener::new(
            futures::stream::once(futures::future::ready(Ok(self)))
                .chain(futures::stream::pending()),
        )
    }

    /// The ConnID of this connection.
    pub fn id(&self) -> ConnId {
        self.shared.id
    }

    /// The framing policy of the write side.
    pub fn framing(&self) -> Framing {
        self.shared.framing
    }

    /// Received bytes waiting to be read.
    pub fn buffered(&self) -> usize {
        self.shared.lock().rbuf.len()
    }

    /// The largest number of received bytes that were ever waiting to be read;
    /// never above the connection's buffer limit ([`Options::conn_buffer_limit`](super::Options::conn_buffer_limit)
    /// or a later [`Mux::set_receive_limits`](super::Mux::set_receive_limits)).
    pub fn peak_buffered(&self) -> usize {
        self.shared.lock().peak
    }

    /// Bytes the receive buffer has room for without reallocating.
    #[cfg(test)]
    pub(crate) fn buffer_capacity(&self) -> usize {
        self.shared.lock().rbuf.capacity()
    }

    /// Bytes written but not yet on the trunk: an incomplete ttrpc message
    /// plus frames queued for the writer task.
    pub fn unsent(&self) -> usize {
        let st = self.shared.lock();
        st.in_flight + st.assembler.buffered()
    }

    /// Resolves once every complete message written so far is on the trunk
    /// (an incomplete ttrpc message stays buffered and is not waited for).
    /// Fails if the bytes can no longer get there.
    pub async fn drained(&self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_drained(cx)).await
    }

    fn poll_drained(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut st = self.shared.lock();
        if st.in_flight == 0 {
            return Poll::Ready(match &st.write_error {
                Some(err) => Err(to_io(err)),
                None => Ok(()),
            });
        }
        if let Some(err) = st.write_refusal() {
            // Queued bytes will never reach the trunk.
            return Poll::Ready(Err(err));
        }
        st.drain_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Puts one unit on the trunk: written here and now as far as the
    /// socket takes it without waiting, when nothing is queued before it;
    /// what is left goes to the writer task. The caller holds the state
    /// lock.
    fn send(&self, st: &mut ConnState, mut bufs: Vec<Bytes>) -> io::Result<()> {
        let mut trunk = self.mux.trunk();
        trunk.write_now(&mut bufs);
        if bufs.is_empty() {
            return Ok(());
        }
        let len = bufs.iter().map(Bytes::len).sum();
        let unit = Unit::new(bufs, len, self.shared.clone());
        if self.mux.write_tx.send(unit).is_err() {
            return Err(to_io(&Arc::new(MuxError::Closed)));
        }
        trunk.queued();
        st.in_flight += len;
        Ok(())
    }

    fn write_raw(&self, st: &mut ConnState, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(MAX_PAYLOAD);
        let bufs = if n <= KEEP_CAPACITY {
            vec![frame::small_frame(self.shared.id, &buf[..n])]
        } else {
            vec![
                Bytes::copy_from_slice(&frame::encode_header(self.shared.id, n)),
                Bytes::copy_from_slice(&buf[..n]),
            ]
        };
        self.send(st, bufs)?;
        Ok(n)
    }

    /// Feeds bytes to the ttrpc message assembler, queuing every message it
    /// completes. Returns how many bytes were taken (0 means "full, wait").
    fn write_ttrpc(&self, st: &mut ConnState, buf: &[u8]) -> io::Result<usize> {
        let mut taken = 0;
        while taken < buf.len() {
            // A new message starts only while the queue is below its budget;
            // a started message is always accepted to its end.
            if st.assembler.is_idle() && st.in_flight >= self.shared.write_limit {
                break;
            }
            let n = st.assembler.wanted().min(buf.len() - taken);
            let done = st
                .assembler
                .push(&buf[taken..taken + n], self.shared.max_message)
                .map_err(|e| {
                    let err = Arc::new(MuxError::MessageTooLarge {
                        conn: self.shared.id,
                        len: e.len,
                        max: self.shared.max_message,
                    });
                    st.assembler.clear();
                    st.write_error = Some(Arc::clone(&err));
                    to_io(&err)
                })?;
            taken += n;
            if let Some(msg) = done {
                self.send(st, frame::ttrpc_frames(self.shared.id, msg))?;
            }
        }
        Ok(taken)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.mux.forget(self.shared.id, &self.shared);
        self.shared.detach();
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let mut st = self.shared.lock();
        if !st.rbuf.is_empty() {
            let n = st.rbuf.len().min(buf.remaining());
            let (a, b) = st.rbuf.as_slices();
            let from_a = n.min(a.len());
            buf.put_slice(&a[..from_a]);
            buf.put_slice(&b[..n - from_a]);
            st.rbuf.drain(..n);
            if let Some(b) = &st.budget {
                b.give(n);
            }
            if st.rbuf.is_empty() && st.rbuf.capacity() > KEEP_CAPACITY {
                st.rbuf = VecDeque::new();
            }
            let feeder = st.feed_waker.take();
            drop(st);
            if let Some(w) = feeder {
                w.wake();
            }
            return Poll::Ready(Ok(()));
        }
        match &st.closed {
            Some(CloseReason::Local | CloseReason::Eof) => Poll::Ready(Ok(())),
            Some(CloseReason::Error(err)) => Poll::Ready(Err(to_io(err))),
            None => {
                st.read_waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.into_ref().get_ref();
        let mut st = this.shared.lock();
        if let Some(err) = st.write_refusal() {
            return Poll::Ready(Err(err));
        }
        match this.shared.framing {
            Framing::Raw if st.in_flight < this.shared.write_limit => {
                Poll::Ready(this.write_raw(&mut st, buf))
            }
            Framing::Ttrpc if buf.is_empty() => Poll::Ready(Ok(0)),
            Framing::Ttrpc => match this.write_ttrpc(&mut st, buf) {
                Ok(0) => {
                    st.write_waker = Some(cx.waker().clone());
                    Poll::Pending
                }
                res => Poll::Ready(res),
            },
            // The writer task still has a full budget of ours queued.
            Framing::Raw => {
                st.write_waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// Complete messages are already queued for the trunk in order, so there
    /// is nothing to push: flush only reports a failure already known.
    ///
    /// It deliberately does not wait for the writer task. ttrpc-rust's client
    /// races its write (write + flush) against the caller dropping the
    /// request; if the reply arrives while flush still waits for the trunk,
    /// ttrpc declares the write cancelled and closes the whole connection.
    /// A Unix socket's flush is a no-op too. Use [`Conn::drained`] to wait
    /// until the bytes are on the trunk.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let st = self.shared.lock();
        Poll::Ready(match &st.write_error {
            Some(err) => Err(to_io(err)),
            None => Ok(()),
        })
    }

    /// Flushes, then refuses further writes. Nothing goes on the wire and the
    /// read side stays open (ConnIDs have no half-close on the trunk).
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let res = std::task::ready!(self.poll_drained(cx));
        self.shared.lock().write_shutdown = true;
        Poll::Ready(res)
    }
}
