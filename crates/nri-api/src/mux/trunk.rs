//! A Unix socket as a trunk whose writes never raise `SIGPIPE`.
//!
//! Writing to a socket whose peer has gone raises `SIGPIPE` unless the
//! write asks otherwise (`MSG_NOSIGNAL`). A Rust program ignores the signal
//! from its start, but nri-rs also runs inside Go runtimes, as a static
//! library: there a `SIGPIPE` raised on one of our threads is passed to the
//! default action, which kills the whole process, unless the program
//! happens to catch the signal itself. A plugin that hangs up at the wrong
//! moment must cost its connection, never the runtime; and the library may
//! not install a signal handler in its host. So every write to a plugin
//! socket is a `sendmsg` with `MSG_NOSIGNAL`, which fails with `EPIPE`
//! instead.

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::UnixStream;

/// A [`UnixStream`] for [`Mux::new`](super::Mux::new): reads as the stream
/// does, writes with `MSG_NOSIGNAL`.
#[derive(Debug)]
pub struct UnixTrunk(UnixStream);

impl UnixTrunk {
    pub fn new(stream: UnixStream) -> UnixTrunk {
        UnixTrunk(stream)
    }

    /// Sends as much of `bufs` as the socket takes now.
    fn send(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        // SAFETY: a zeroed msghdr is a valid empty one.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        // IoSlice is ABI-compatible with iovec on Unix (std guarantees it);
        // the kernel only reads through the pointer.
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len().min(libc::c_int::MAX as usize) as _;
        // SAFETY: `msg` points to `bufs`, alive for the call; the fd is the
        // stream's own.
        let n = unsafe { libc::sendmsg(self.0.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl AsyncRead for UnixTrunk {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for UnixTrunk {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            ready!(this.0.poll_write_ready(cx))?;
            // try_io clears the readiness when the socket is full, so the
            // next poll_write_ready waits for room.
            match this.0.try_io(Interest::WRITABLE, || this.send(bufs)) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                done => return Poll::Ready(done),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
