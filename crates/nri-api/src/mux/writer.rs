//! The writer task: the only code that writes to the trunk.
//!
//! Connections hand it *units*: all the frames of one ttrpc message (or of
//! one raw write chunk). A unit is written completely before the next one
//! starts, so frames of one message are contiguous on the trunk. Units that
//! are already queued are coalesced into vectored writes.

use std::io::{self, IoSlice};
use std::sync::Arc;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncWrite, AsyncWriteExt, WriteHalf};
use tokio::sync::mpsc::UnboundedReceiver;

use super::conn::ConnShared;
use super::error::MuxError;
use super::Shared;

/// Most units written in one go, and most slices per vectored write.
const MAX_BATCH: usize = 64;
const MAX_SLICES: usize = 64;

/// Frames to put on the trunk back to back, and whom to credit when done.
pub(crate) struct Unit {
    bufs: Vec<Bytes>,
    len: usize,
    owner: Arc<ConnShared>,
}

impl Unit {
    pub(crate) fn new(bufs: Vec<Bytes>, len: usize, owner: Arc<ConnShared>) -> Unit {
        Unit { bufs, len, owner }
    }
}

pub(crate) async fn run<T>(
    shared: Arc<Shared>,
    mut trunk: WriteHalf<T>,
    mut rx: UnboundedReceiver<Unit>,
) where
    T: AsyncWrite,
{
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
            Ok(()) => batch.drain(..).for_each(|u| u.owner.written(u.len)),
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
            let slices: Vec<IoSlice<'_>> = bufs[next..]
                .iter()
                .take(MAX_SLICES)
                .map(|b| IoSlice::new(b))
                .collect();
            w.write_vectored(&slices).await?
        } else {
            w.write(&bufs[next]).await?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
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
    }
    if flush {
        w.flush().await?;
    }
    Ok(())
}
