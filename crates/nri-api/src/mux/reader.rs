//! The reader task: the only code that reads from the trunk.
//!
//! It never trusts the peer: a frame length is checked against
//! [`MAX_PAYLOAD`] before anything else, and payloads are moved in bounded
//! chunks straight from a fixed-size read buffer into the owning connection's
//! receive buffer, as far as that connection's byte budget allows. When the
//! budget is used up the task waits for the consumer (backpressure on the
//! trunk) instead of failing. Payloads for ConnIDs that are not open are
//! consumed and dropped without being copied anywhere.

use std::future::poll_fn;
use std::io;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader, ReadHalf};

use super::error::MuxError;
use super::frame::{decode_header, FRAME_HEADER_LEN};
use super::{Shared, Shutdown, MAX_PAYLOAD};

/// Size of the read buffer between the trunk and the connections; it is
/// also the largest chunk moved at a time.
pub(crate) const READ_CHUNK: usize = 64 << 10;

pub(crate) async fn run<T>(shared: Arc<Shared>, trunk: ReadHalf<T>)
where
    T: AsyncRead,
{
    let mut closed = shared.closed_tx.subscribe();
    let mut unblocked = shared.unblock_tx.subscribe();
    tokio::select! {
        biased;
        _ = closed.wait_for(|c| *c) => return,
        _ = unblocked.wait_for(|u| *u) => {}
    }
    let mut trunk = BufReader::with_capacity(shared.opts.read_buffer, trunk);
    let how = tokio::select! {
        biased;
        _ = closed.wait_for(|c| *c) => return,
        res = read_frames(&shared, &mut trunk) => match res {
            Ok(()) => Shutdown::Eof,
            Err(e) => Shutdown::Error(e),
        },
    };
    shared.shutdown(how);
}

/// Demultiplexes frames until the trunk ends. `Ok` means a clean end of file
/// on a frame boundary.
async fn read_frames<R>(shared: &Shared, trunk: &mut BufReader<R>) -> Result<(), MuxError>
where
    R: AsyncRead + Unpin,
{
    loop {
        let mut hdr = [0u8; FRAME_HEADER_LEN];
        let mut got = 0;
        while got < FRAME_HEADER_LEN {
            match trunk.read(&mut hdr[got..]).await {
                Ok(0) if got == 0 => return Ok(()),
                Ok(0) => return Err(MuxError::TruncatedHeader { received: got }),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(MuxError::TrunkRead(e)),
            }
        }
        let (id, len) = decode_header(&hdr);
        if len as usize > MAX_PAYLOAD {
            return Err(MuxError::FrameTooLarge {
                conn: id,
                len,
                max: MAX_PAYLOAD,
            });
        }

        let mut target = shared.lookup(id);
        let mut left = len as usize;
        while left > 0 {
            let room = match &target {
                Some(conn) => match poll_fn(|cx| conn.poll_room(cx)).await {
                    Some(room) => room,
                    None => {
                        // Closed while we waited: drop the rest of the frame.
                        target = None;
                        continue;
                    }
                },
                None => usize::MAX,
            };
            let avail = match trunk.fill_buf().await {
                Ok([]) => {
                    return Err(MuxError::TruncatedPayload {
                        conn: id,
                        len,
                        received: len as usize - left,
                    })
                }
                Ok(avail) => avail,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(MuxError::TrunkRead(e)),
            };
            let n = avail.len().min(left).min(room);
            if let Some(conn) = &target {
                conn.deliver(&avail[..n])?;
            }
            trunk.consume(n);
            left -= n;
        }
    }
}
