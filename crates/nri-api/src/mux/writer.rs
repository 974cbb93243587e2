//! Writing the trunk: by the connection that has a unit when nothing is
//! queued before it, else by the writer task.
//!
//! Connections make *units*: all the frames of one ttrpc message (or of one
//! raw write chunk). A unit is written completely before the next one
//! starts, so frames of one message are contiguous on the trunk. A
//! connection writes its unit itself, on its own thread, as far as the
//! socket takes it without waiting, if no unit is queued; the rest, and
//! every unit while others are queued, goes to the writer task, which
//! coalesces queued units into vectored writes. Both write under the
//! [`Trunk`] lock, and a connection writes only while the writer task has
//! nothing, so units never interleave.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedReceiver;

use super::error::MuxError;
use super::Shared;

/// Most units written in one go, and most slices per vectored write.
const MAX_BATCH: usize = 64;
const MAX_SLICES: usize = 64;

/// Who is credited once a unit is on the trunk: the connection that queued
/// it, which then has that much more room to write.
pub(crate) trait UnitOwner: Send + Sync {
    fn written(&self, len: usize);
}

/// Frames to put on the trunk back to back, and whom to credit when done.
pub(crate) struct Unit {
    bufs: Vec<Bytes>,
    len: usize,
    owner: Arc<dyn UnitOwner>,
}

impl Unit {
    pub(crate) fn new(bufs: Vec<Bytes>, len: usize, owner: Arc<dyn UnitOwner>) -> Unit {
        Unit { bufs, len, owner }
    }
}

/// The trunk's write side.
pub(crate) struct Trunk {
    /// `None` once the mux closed: dropping it closes the trunk's write half.
    w: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    /// Units handed to the writer task and not yet all on the trunk.
    queued: usize,
}

impl Trunk {
    pub(crate) fn new(w: Pin<Box<dyn AsyncWrite + Send>>) -> Trunk {
        Trunk {
            w: Some(w),
            queued: 0,
        }
    }

    /// Writes the front of `bufs` now, without waiting, if nothing is
    /// queued before it, and drops from `bufs` what was written. A write
    /// that fails leaves the rest to the writer task, which meets the same
    /// failure and closes the mux (not here: the caller holds a
    /// connection's lock, which closing takes).
    pub(crate) fn write_now(&mut self, bufs: &mut Vec<Bytes>) {
        let Some(w) = self.w.as_mut().filter(|_| self.queued == 0) else {
            return;
        };
        let mut cx = Context::from_waker(Waker::noop());
        let mut next = 0;
        while next < bufs.len() {
            let slices = io_slices(&bufs[next..]);
            let n = match w.as_mut().poll_write_vectored(&mut cx, &slices) {
                Poll::Ready(Ok(n)) if n > 0 => n,
                _ => break,
            };
            next = advance(bufs, next, n);
        }
        bufs.drain(..next);
    }

    /// A unit went to the writer task.
    pub(crate) fn queued(&mut self) {
        self.queued += 1;
    }

    /// The writer task put `units` queued units on the trunk.
    fn unqueued(&mut self, units: usize) {
        self.queued -= units;
    }

    pub(crate) fn close(&mut self) {
        self.w = None;
    }
}

/// The first buffers of `bufs`, as many as one vectored write takes.
fn io_slices(bufs: &[Bytes]) -> Vec<IoSlice<'_>> {
    bufs.iter()
        .take(MAX_SLICES)
        .map(|b| IoSlice::new(b))
        .collect()
}

/// Drops `n` written bytes from the front of `bufs[next..]`; returns the
/// index of the first buffer with bytes left.
fn advance(bufs: &mut [Bytes], mut next: usize, n: usize) -> usize {
    let mut left = n;
    while left > 0 {
        let b = &mut bufs[next];
        let step = left.min(b.len());
        b.advance(step);
        left -= step;
        if b.is_empty() {
            next += 1;
        }
    }
    while next < bufs.len() && bufs[next].is_empty() {
        next += 1;
    }
    next
}

/// The writer task's view of the trunk: each poll takes the lock.
struct Locked<'a>(&'a Mutex<Trunk>);

impl Locked<'_> {
    fn poll_with<R>(
        &self,
        f: impl FnOnce(Pin<&mut (dyn AsyncWrite + Send)>) -> Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match t.w.as_mut() {
            Some(w) => f(w.as_mut()),
            None => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }
}

impl AsyncWrite for Locked<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_with(|w| w.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_with(|w| w.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_with(|w| w.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_with(|w| w.poll_shutdown(cx))
    }
}

pub(crate) async fn run(shared: Arc<Shared>, mut rx: UnboundedReceiver<Unit>) {
    let mut trunk = Locked(&shared.trunk);
    let mut closed = shared.closed_tx.subscribe();
    let mut batch: Vec<Unit> = Vec::with_capacity(MAX_BATCH);
    loop {
        let first = tokio::select! {
            biased;
            _ = closed.wait_for(|c| *c) => return,
            unit = rx.recv() => match unit {
                Some(unit) => unit,
                None => return,
            },
        };
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(unit) => batch.push(unit),
                Err(_) => break,
            }
        }
        let res = tokio::select! {
            biased;
            _ = closed.wait_for(|c| *c) => return,
            res = write_batch(&mut trunk, &batch, rx.is_empty()) => res,
        };
        match res {
            Ok(()) => {
                // The connections may write themselves again once nothing
                // of theirs waits here.
                shared.trunk().unqueued(batch.len());
                batch.drain(..).for_each(|u| u.owner.written(u.len));
            }
            Err(e) => {
                shared.shutdown(super::Shutdown::Error(MuxError::TrunkWrite(e)));
                return;
            }
        }
    }
}

/// Writes all buffers of `batch` in order, then flushes the trunk if nothing
/// else is waiting.
async fn write_batch<W>(w: &mut W, batch: &[Unit], flush: bool) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut bufs: Vec<Bytes> = batch
        .iter()
        .flat_map(|u| u.bufs.iter().cloned())
        .filter(|b| !b.is_empty())
        .collect();
    let mut next = 0;
    while next < bufs.len() {
        let n = if w.is_write_vectored() {
            w.write_vectored(&io_slices(&bufs[next..])).await?
        } else {
            w.write(&bufs[next]).await?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        next = advance(&mut bufs, next, n);
    }
    if flush {
        w.flush().await?;
    }
    Ok(())
}
