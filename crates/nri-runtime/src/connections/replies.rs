//! The connection on which the runtime answers a plugin's requests (the
//! Runtime service, ConnID 2), with a deadline on its replies.
//!
//! ttrpc-rust's server spawns a task for every request it reads, and that
//! task waits as long as it takes for its reply to be queued. A plugin that
//! sends requests but never reads the replies would thus grow the runtime
//! without bound: tasks, requests and replies pile up behind the full
//! socket (upstream's Go server piles up goroutines the same way). Wrapped
//! in [`Replies`], the connection reads no further request while a reply
//! cannot be queued, which bounds what such a plugin costs, and once no
//! reply could be queued for a whole request timeout the plugin's trunk is
//! closed, which drops the plugin.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use log::warn;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use nri_api::mux::{Conn, Mux};

pub(crate) struct Replies {
    conn: Conn,
    /// The plugin's trunk, closed when replies are stuck for `timeout`.
    mux: Mux,
    timeout: Duration,
    /// Who the connection belongs to, for the log.
    peer: String,
    /// Armed while a reply waits for room; expiring drops the plugin.
    stalled: Option<Pin<Box<Sleep>>>,
    /// The ttrpc reader, held off while a reply is stalled.
    reader: Option<Waker>,
}

impl Replies {
    pub(crate) fn new(conn: Conn, mux: Mux, timeout: Duration, peer: String) -> Replies {
        Replies {
            conn,
            mux,
            timeout,
            peer,
            stalled: None,
            reader: None,
        }
    }

    /// Serves ttrpc on this connection alone (see `Conn::into_ttrpc_listener`).
    pub(crate) fn into_ttrpc_listener(self) -> ttrpc::r#async::transport::Listener {
        use futures::StreamExt;
        ttrpc::r#async::transport::Listener::new(
            futures::stream::once(futures::future::ready(Ok(self)))
                .chain(futures::stream::pending()),
        )
    }

    fn wake_reader(&mut self) {
        if let Some(w) = self.reader.take() {
            w.wake();
        }
    }
}

impl AsyncRead for Replies {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.stalled.is_some() {
            // Another request would only add a task waiting to reply.
            this.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Pin::new(&mut this.conn).poll_read(cx, buf)
    }
}

impl AsyncWrite for Replies {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.conn).poll_write(cx, buf) {
            Poll::Pending => {
                let timeout = this.timeout;
                let stall = this
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                if stall.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                warn!(
                    "closing plugin connection {}: it has not read its replies for {timeout:?}",
                    this.peer
                );
                this.mux.close();
                // Let the reader see the connection end.
                this.stalled = None;
                this.wake_reader();
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "plugin does not read its replies",
                )))
            }
            ready => {
                if this.stalled.take().is_some() {
                    this.wake_reader();
                }
                ready
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_shutdown(cx)
    }
}
