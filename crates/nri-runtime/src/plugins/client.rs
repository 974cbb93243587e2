//! The runtime's ttrpc client for a plugin's Plugin service, on mux
//! connection 1.
//!
//! ttrpc-rust's client queues every request for a writer task of its own and
//! hands every reply over from its reader task through a channel per call,
//! so each call crosses tasks twice before the mux sees it, and its bytes are
//! copied into a fresh zero-filled buffer on the way. This client encodes a
//! request behind its ttrpc header in one buffer and writes it from the
//! calling task; its one reader task hands each reply to the call waiting
//! for it, which decodes it. A call whose request leaves from the caller's
//! own task is also what taking the event's thread hand-overs out needs
//! (docs/PERFORMANCE.md, "What limits the targets").
//!
//! Errors are ttrpc-rust's, variant and text, so that they are classified
//! as before (`Plugin::ttrpc_error`): a request over ttrpc's limit is
//! refused before anything is written (`Others`: "message length N exceed
//! maximum message size of 4194304"); a reply over it is read, dropped and
//! fails its call with an `InvalidArgument` status of the same words; a
//! status other than OK is `RpcStatus`; a lost connection fails the calls
//! waiting with `Socket` and later calls with `LocalClosed`. Deadlines are
//! the callers' (every call runs under the plugin's request timeout); the
//! request carries its timeout for the plugin, as upstream's does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use log::debug;
use nri_api::envelope::{
    decode_response, discard, encode_request, oversized, read_envelope, Header,
    MESSAGE_TYPE_RESPONSE, PLUGIN_SERVICE,
};
use nri_api::mux::{Conn, TTRPC_HEADER_LEN, TTRPC_MESSAGE_LENGTH_MAX};
use protobuf::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::oneshot;

/// What the reader hands a call: the reply's bytes, or why there are none.
type Reply = ttrpc::Result<Vec<u8>>;

/// A ttrpc client on one plugin's connection 1. Dropping it ends its reader
/// task and gives the connection up.
pub(crate) struct PluginConn {
    shared: Arc<Shared>,
}

struct Shared {
    /// One request is written at a time. A message is taken by the mux in
    /// one write or not at all, so a call given up while it waits here
    /// leaves nothing half-written.
    writer: tokio::sync::Mutex<WriteHalf<Conn>>,
    /// Client streams are odd: 1, 3, 5, ... as ttrpc-rust's and Go's.
    next_stream: AtomicU32,
    calls: Mutex<Calls>,
    /// Dropped with the last handle: the reader task then ends.
    _reader_stop: oneshot::Sender<()>,
}

#[derive(Default)]
struct Calls {
    waiting: HashMap<u32, oneshot::Sender<Reply>>,
    /// The connection is gone: calls from now on fail at once.
    closed: bool,
}

impl PluginConn {
    /// Starts the client on `conn`, its reader task on the current tokio
    /// runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub(crate) fn new(conn: Conn) -> PluginConn {
        let (rd, wr) = tokio::io::split(conn);
        let (stop_tx, stop_rx) = oneshot::channel();
        let shared = Arc::new(Shared {
            writer: tokio::sync::Mutex::new(wr),
            next_stream: AtomicU32::new(1),
            calls: Mutex::new(Calls::default()),
            _reader_stop: stop_tx,
        });
        tokio::spawn(read_replies(Arc::downgrade(&shared), rd, stop_rx));
        PluginConn { shared }
    }

    /// Calls `method` with `payload` (the request, encoded) and returns the
    /// reply's payload. `timeout` goes to the plugin in the request; the
    /// caller bounds the wait.
    pub(crate) async fn call(
        &self,
        method: &str,
        payload: &[u8],
        timeout: Duration,
    ) -> ttrpc::Result<Vec<u8>> {
        let timeout_nano = ttrpc::context::with_duration(timeout).timeout_nano;
        let (tx, rx) = oneshot::channel();
        let waiting = {
            let mut w = self.shared.writer.lock().await;
            // Go's ttrpc server refuses a stream id lower than one it saw
            // ("StreamID cannot be re-used and must increment"): with
            // requests of several pods at once, the id is taken in the
            // order the requests are written.
            let stream = self.shared.next_stream.fetch_add(2, Ordering::Relaxed);
            let message = encode_request(stream, PLUGIN_SERVICE, method, payload, timeout_nano)?;
            let waiting = self.shared.wait_for(stream, tx)?;
            w.write_all(&message)
                .await
                .map_err(|e| ttrpc::Error::Socket(e.to_string()))?;
            waiting
        };
        // The reader took the entry out before answering; a sender dropped
        // unanswered means the connection went.
        let reply = rx.await.map_err(|_| ttrpc::Error::LocalClosed)?;
        waiting.disarm();
        decode_response(&reply?)
    }

    /// [`call`](Self::call) with the request and the reply as messages, as
    /// ttrpc's generated client sends and decodes them.
    pub(crate) async fn unary<Req: Message, Rsp: Message>(
        &self,
        method: &str,
        req: &Req,
        timeout: Duration,
    ) -> ttrpc::Result<Rsp> {
        let payload = req
            .write_to_bytes()
            .map_err(|e| ttrpc::Error::Others(format!("Encoding request {e}")))?;
        let reply = self.call(method, &payload, timeout).await?;
        Rsp::parse_from_bytes(&reply)
            .map_err(|e| ttrpc::Error::Others(format!("Unpack get error {e}")))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a call on `stream`; its entry goes when the guard drops,
    /// unless the call was answered.
    fn wait_for(&self, stream: u32, tx: oneshot::Sender<Reply>) -> ttrpc::Result<Waiting<'_>> {
        let mut calls = self.lock();
        if calls.closed {
            return Err(ttrpc::Error::LocalClosed);
        }
        calls.waiting.insert(stream, tx);
        Ok(Waiting {
            shared: self,
            stream,
            armed: true,
        })
    }

    /// Hands the call on `stream` its reply, if it still waits.
    fn answer(&self, stream: u32, reply: Reply) {
        let Some(tx) = self.lock().waiting.remove(&stream) else {
            debug!("plugin connection: reply for stream {stream}, which no call waits for");
            return;
        };
        // The call may have just been given up: nothing to do then.
        let _ = tx.send(reply);
    }

    /// The connection is gone: every waiting call fails with `why`, and so
    /// do calls made from now on (with `LocalClosed`).
    fn close(&self, why: ttrpc::Error) {
        let waiting = {
            let mut calls = self.lock();
            calls.closed = true;
            std::mem::take(&mut calls.waiting)
        };
        for (_, tx) in waiting {
            let _ = tx.send(Err(why.clone()));
        }
    }
}

/// A call's entry in the waiting map, removed if the call is given up.
struct Waiting<'a> {
    shared: &'a Shared,
    stream: u32,
    armed: bool,
}

impl Waiting<'_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.lock().waiting.remove(&self.stream);
        }
    }
}

/// The reader task: reads the replies and hands each to its call, until
/// the connection ends or the client is dropped.
async fn read_replies(shared: Weak<Shared>, mut rd: ReadHalf<Conn>, stop: oneshot::Receiver<()>) {
    let why = tokio::select! {
        biased;
        _ = stop => return,
        why = read_until_failure(&shared, &mut rd) => why,
    };
    debug!("plugin connection: reading replies ended: {why}");
    if let Some(shared) = shared.upgrade() {
        shared.close(why);
    }
}

/// Reads replies until reading fails; returns why.
async fn read_until_failure(shared: &Weak<Shared>, rd: &mut ReadHalf<Conn>) -> ttrpc::Error {
    let socket = |e: std::io::Error| ttrpc::Error::Socket(e.to_string());
    loop {
        let mut head = [0u8; TTRPC_HEADER_LEN];
        if let Err(e) = rd.read_exact(&mut head).await {
            return socket(e);
        }
        let Header {
            len, stream, kind, ..
        } = Header::parse(&head);
        if len > TTRPC_MESSAGE_LENGTH_MAX {
            // As ttrpc-rust: the body is read and dropped, and the call
            // fails with the status Go's ttrpc would send.
            if let Err(e) = discard(rd, len).await {
                return socket(e);
            }
            let status = ttrpc::get_status(ttrpc::Code::INVALID_ARGUMENT, oversized(len));
            deliver(shared, stream, Err(ttrpc::Error::RpcStatus(status)));
            continue;
        }
        let mut body = Vec::new();
        if let Err(e) = read_envelope(rd, &mut body, len).await {
            return socket(e);
        }
        match kind {
            MESSAGE_TYPE_RESPONSE => deliver(shared, stream, Ok(body)),
            // This client opens no streams, so data for one is not ours;
            // anything else is malformed, as ttrpc-rust's client says.
            _ => deliver(
                shared,
                stream,
                Err(ttrpc::Error::Others(format!(
                    "Receiver got malformed packet (type {kind}, stream {stream})"
                ))),
            ),
        }
    }
}

fn deliver(shared: &Weak<Shared>, stream: u32, reply: Reply) {
    if let Some(shared) = shared.upgrade() {
        shared.answer(stream, reply);
    }
}

#[cfg(test)]
mod tests;
