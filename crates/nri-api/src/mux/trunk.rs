//! A Unix socket as a trunk: woken only when there is something to read
//! (or room it waits for), and whose writes never raise `SIGPIPE`.
//!
//! *Wake-ups.* tokio registers a socket for reading and writing at once,
//! edge-triggered. On a Unix stream socket every read by the peer frees
//! room in our send buffer, and the kernel then wakes everyone polling the
//! socket for writing, whether they wait for room or not: each request or
//! reply read by the other side would wake this side's thread once more,
//! for nothing. Measured on the bench plugin, that was one of its two
//! blocking `epoll_wait`s per event. So the socket is registered for
//! reading only, and a write goes straight to the socket; only when the
//! socket is full is a second descriptor of it registered for writing,
//! until a write succeeds again.
//!
//! *`SIGPIPE`.* Writing to a socket whose peer has gone raises `SIGPIPE`
//! unless the write asks otherwise (`MSG_NOSIGNAL`). A Rust program
//! ignores the signal from its start, but nri-rs also runs inside Go
//! runtimes, as a static library: there a `SIGPIPE` raised on one of our
//! threads is passed to the default action, which kills the whole process,
//! unless the program happens to catch the signal itself. A plugin that
//! hangs up at the wrong moment must cost its connection, never the
//! runtime; and the library may not install a signal handler in its host.
//! So every write to a plugin socket is a `sendmsg` with `MSG_NOSIGNAL`,
//! which fails with `EPIPE` instead.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::UnixStream;

/// A Unix stream socket for [`Mux::new`](super::Mux::new).
#[derive(Debug)]
pub struct UnixTrunk {
    /// The socket, registered for reading only.
    socket: AsyncFd<OwnedFd>,
    /// A duplicate of the socket registered for writing, while a write
    /// waits for room.
    room: Option<AsyncFd<OwnedFd>>,
}

impl UnixTrunk {
    /// Takes `stream` over from tokio's registration. Fails only if the
    /// socket cannot be registered again.
    pub fn new(stream: UnixStream) -> io::Result<UnixTrunk> {
        UnixTrunk::from_std(stream.into_std()?)
    }

    /// A trunk on a socket tokio does not know yet; it is made
    /// non-blocking. Must be called within a tokio runtime.
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixTrunk> {
        stream.set_nonblocking(true)?;
        Ok(UnixTrunk {
            socket: register(OwnedFd::from(stream), Interest::READABLE)?,
            room: None,
        })
    }

    fn fd(&self) -> RawFd {
        self.socket.get_ref().as_raw_fd()
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
        // socket's own.
        let n = unsafe { libc::sendmsg(self.fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Receives into `buf`'s unfilled part.
    fn recv(fd: RawFd, buf: &mut ReadBuf<'_>) -> io::Result<usize> {
        // SAFETY: only the kernel writes to these bytes, and it never
        // de-initializes any.
        let unfilled = unsafe { buf.unfilled_mut() };
        // SAFETY: the kernel writes at most `unfilled.len()` bytes into
        // memory we own; uninitialized bytes may be written to.
        let n = unsafe { libc::recv(fd, unfilled.as_mut_ptr().cast(), unfilled.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        // SAFETY: the kernel initialized the first `n` bytes.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Ok(n)
    }

    /// Starts watching for room: a duplicate of the socket registered for
    /// writing. Registering reports room that came since the write that
    /// found the socket full, so none is missed.
    fn watch_room(&mut self) -> io::Result<()> {
        let dup = self.socket.get_ref().try_clone()?;
        self.room = Some(register(dup, Interest::WRITABLE)?);
        Ok(())
    }
}

/// Registers `fd` with the current runtime's reactor for `interest`.
fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the OwnedFd moves into the AsyncFd, which keeps it open and
    // gives back the same descriptor until it is dropped.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(|e| e.into_parts().1)
}

impl AsyncRead for UnixTrunk {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let mut ready = ready!(this.socket.poll_read_ready(cx))?;
            let wanted = buf.remaining();
            match ready.try_io(|fd| Self::recv(fd.as_raw_fd(), buf)) {
                Ok(Ok(n)) => {
                    // A short read emptied the socket: wait for the next
                    // arrival rather than find out with a failed read (as
                    // tokio's own streams do; the readiness is kept if an
                    // arrival was reported meanwhile).
                    if n > 0 && n < wanted {
                        ready.clear_ready();
                    }
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Nothing there: the readiness is cleared; wait again.
                Err(_would_block) => continue,
            }
        }
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
            let Some(room) = &this.room else {
                match this.send(bufs) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => this.watch_room()?,
                    done => return Poll::Ready(done),
                }
                continue;
            };
            let mut ready = ready!(room.poll_write_ready(cx))?;
            match ready.try_io(|_| this.send(bufs)) {
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(done) => {
                    // Written (or failed for good): stop watching.
                    drop(ready);
                    this.room = None;
                    return Poll::Ready(done);
                }
                // Still full: the readiness is cleared; wait again.
                Err(_would_block) => continue,
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // SAFETY: shutdown(2) on our own descriptor.
        let rc = unsafe { libc::shutdown(self.fd(), libc::SHUT_WR) };
        Poll::Ready(if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests;
