//! A test oracle that reads frames the way a Go ttrpc peer behind upstream's
//! mux does, to prove our frames are acceptable to it.
//!
//! Emulated stack, bottom up:
//! * upstream mux `conn.Read(buf)`: returns exactly one queued frame, and
//!   fails with `ENOMEM` if the frame is longer than the buffer's capacity;
//! * Go `bufio.Reader` of 4096 bytes (ttrpc's `newChannel`): a read into an
//!   empty buffer with `len(p) >= 4096` goes straight to the conn, otherwise
//!   the buffer is refilled with one conn read;
//! * ttrpc `readMessage`: `io.ReadFull` of the 10-byte header, then
//!   `io.ReadFull` of the payload into a buffer of exactly its length.
//!
//! It also counts frames per message, since upstream queues at most 256.

use std::collections::VecDeque;

use super::super::frame::{ttrpc_payload_len, GO_BUFIO_SIZE, TTRPC_HEADER_LEN};

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum GoError {
    /// `syscall.ENOMEM`: a frame larger than the read buffer.
    Enomem { frame: usize, cap: usize },
    /// No frames left.
    Eof,
}

pub(crate) struct GoReader {
    frames: VecDeque<Vec<u8>>,
    buf: Vec<u8>,
    r: usize,
    w: usize,
    frames_read: usize,
}

impl GoReader {
    /// `frames`: payloads of the frames of one ConnID, in trunk order.
    pub fn new(frames: impl IntoIterator<Item = Vec<u8>>) -> GoReader {
        GoReader {
            frames: frames.into_iter().collect(),
            buf: vec![0; GO_BUFIO_SIZE],
            r: 0,
            w: 0,
            frames_read: 0,
        }
    }

    /// Upstream mux `conn.Read` with a buffer of capacity `cap`.
    fn conn_read(&mut self, cap: usize) -> Result<Vec<u8>, GoError> {
        let frame = self.frames.pop_front().ok_or(GoError::Eof)?;
        self.frames_read += 1;
        if frame.len() > cap {
            return Err(GoError::Enomem {
                frame: frame.len(),
                cap,
            });
        }
        Ok(frame)
    }

    /// `bufio.Reader.Read`.
    fn bufio_read(&mut self, p: &mut [u8]) -> Result<usize, GoError> {
        if p.is_empty() {
            return Ok(0);
        }
        if self.r == self.w {
            if p.len() >= self.buf.len() {
                // Large read into an empty buffer: straight from the conn.
                let frame = self.conn_read(p.len())?;
                p[..frame.len()].copy_from_slice(&frame);
                return Ok(frame.len());
            }
            self.r = 0;
            self.w = 0;
            let frame = self.conn_read(self.buf.len())?;
            self.buf[..frame.len()].copy_from_slice(&frame);
            self.w = frame.len();
            if self.w == 0 {
                return Ok(0);
            }
        }
        let n = p.len().min(self.w - self.r);
        p[..n].copy_from_slice(&self.buf[self.r..self.r + n]);
        self.r += n;
        Ok(n)
    }

    /// `io.ReadFull` over the bufio reader.
    fn read_full(&mut self, p: &mut [u8]) -> Result<(), GoError> {
        let mut got = 0;
        while got < p.len() {
            got += self.bufio_read(&mut p[got..])?;
        }
        Ok(())
    }

    /// ttrpc `readMessage`: returns the header, the payload and how many
    /// frames the message took.
    pub fn read_message(&mut self) -> Result<([u8; TTRPC_HEADER_LEN], Vec<u8>, usize), GoError> {
        let before = self.frames_read;
        let mut hdr = [0u8; TTRPC_HEADER_LEN];
        self.read_full(&mut hdr)?;
        let mut payload = vec![0u8; ttrpc_payload_len(&hdr)];
        self.read_full(&mut payload)?;
        Ok((hdr, payload, self.frames_read - before))
    }

    /// True if every frame was consumed and the buffer is empty.
    pub fn is_drained(&self) -> bool {
        self.frames.is_empty() && self.r == self.w
    }
}

#[test]
fn oracle_rejects_a_single_large_frame() {
    // One frame per message fails as soon as header + payload exceed 4096.
    let msg = super::ttrpc_msg(1, 1, &[7u8; 4087]);
    let mut go = GoReader::new([msg]);
    assert_eq!(
        go.read_message().unwrap_err(),
        GoError::Enomem {
            frame: 4097,
            cap: 4096
        }
    );
}

#[test]
fn oracle_accepts_go_style_frames() {
    let payload = super::pattern(3, 10_000);
    let msg = super::ttrpc_msg(5, 2, &payload);
    let (first, rest) = msg.split_at(4096);
    let mut go = GoReader::new([first.to_vec(), rest.to_vec()]);
    let (hdr, got, frames) = go.read_message().unwrap();
    assert_eq!(&hdr[..], &msg[..10]);
    assert_eq!(got, payload);
    assert_eq!(frames, 2);
    assert!(go.is_drained());
}

#[test]
fn oracle_follows_bufio_direct_and_buffered_reads() {
    // 4096 + a rest of 4097 bytes: the rest arrives in a direct read. Fine.
    let msg = super::ttrpc_msg(1, 1, &[0u8; 4086 + 4097]);
    let (a, b) = msg.split_at(4096);
    assert!(GoReader::new([a.to_vec(), b.to_vec()])
        .read_message()
        .is_ok());
    // A short first frame followed by a large rest: the rest is still read
    // directly into the payload buffer. Fine too.
    let msg = super::ttrpc_msg(1, 1, &[0u8; 6000]);
    let (a, b) = msg.split_at(100);
    assert!(GoReader::new([a.to_vec(), b.to_vec()])
        .read_message()
        .is_ok());
    // A first frame over 4096 bytes lands in the 4096-byte buffer: ENOMEM.
    let (a, b) = msg.split_at(5000);
    assert_eq!(
        GoReader::new([a.to_vec(), b.to_vec()])
            .read_message()
            .unwrap_err(),
        GoError::Enomem {
            frame: 5000,
            cap: 4096
        }
    );
    // A rest under 4096 bytes is read through the buffer; a frame holding
    // the rest plus the next message's start would not fit the payload read.
    let mut two = super::ttrpc_msg(1, 1, &[0u8; 4090]);
    two.extend(super::ttrpc_msg(3, 1, &[0u8; 8000]));
    let (a, b) = two.split_at(4096);
    let mut go = GoReader::new([a.to_vec(), b.to_vec()]);
    assert!(matches!(go.read_message(), Err(GoError::Enomem { .. })));
}
