//! What a connection accepts from the peer before it is buffered: a bound on
//! the ttrpc messages it announces, and a byte budget shared by many
//! multiplexers.
//!
//! Both exist for peers that are not trusted yet. The runtime gives a fresh
//! plugin connection a registration-sized message limit and charges its
//! buffered bytes to a budget shared by every connection still registering,
//! so a thousand connections that each send one large frame and wait cost a
//! bounded amount of memory instead of 4 MiB each, and then lifts both once
//! the plugin has registered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::frame::{ttrpc_payload_len, TTRPC_HEADER_LEN};

/// Bytes that several connections may hold in their receive buffers
/// together. A delivery that would exceed it closes the multiplexer of the
/// connection receiving it with
/// [`MuxError::BudgetExhausted`](super::MuxError::BudgetExhausted).
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    used: AtomicUsize,
}

impl Budget {
    /// A budget of `limit` bytes, to share through
    /// [`Options::receive_budget`](super::Options::receive_budget).
    pub fn new(limit: usize) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes currently charged.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Charges `n` bytes, or refuses without charging anything.
    pub(crate) fn take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    /// Returns `n` charged bytes.
    pub(crate) fn give(&self, n: usize) {
        if n > 0 {
            self.used.fetch_sub(n, Ordering::AcqRel);
        }
    }
}

/// Follows the ttrpc message boundaries in a connection's received bytes,
/// so a header announcing too much is refused before its payload arrives.
#[derive(Default)]
pub(crate) struct MessageScanner {
    header: [u8; TTRPC_HEADER_LEN],
    header_got: usize,
    payload_left: usize,
}

impl MessageScanner {
    /// Scans the next received bytes. `Err` carries the payload length of a
    /// header announcing more than `max`; the scanner is then spent (the
    /// multiplexer closes).
    pub(crate) fn scan(&mut self, mut data: &[u8], max: usize) -> Result<(), usize> {
        while !data.is_empty() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(data.len());
                self.payload_left -= n;
                data = &data[n..];
                continue;
            }
            let n = (TTRPC_HEADER_LEN - self.header_got).min(data.len());
            self.header[self.header_got..self.header_got + n].copy_from_slice(&data[..n]);
            self.header_got += n;
            data = &data[n..];
            if self.header_got == TTRPC_HEADER_LEN {
                self.header_got = 0;
                let len = ttrpc_payload_len(&self.header);
                if len > max {
                    return Err(len);
                }
                self.payload_left = len;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(len: u32) -> Vec<u8> {
        let mut h = len.to_be_bytes().to_vec();
        h.extend([0, 0, 0, 1, 1, 0]);
        h
    }

    #[test]
    fn the_scanner_follows_messages_split_anywhere() {
        let mut wire = Vec::new();
        for len in [0u32, 5, 100, 3] {
            wire.extend(header(len));
            wire.extend(vec![0xee; len as usize]);
        }
        wire.extend(header(101));
        for chunk in [1, 3, 7, 64, wire.len()] {
            let mut s = MessageScanner::default();
            let mut res = Ok(());
            for piece in wire.chunks(chunk) {
                res = s.scan(piece, 100);
                if res.is_err() {
                    break;
                }
            }
            assert_eq!(res, Err(101), "chunks of {chunk}");
        }
    }

    #[test]
    fn payload_bytes_that_look_like_headers_are_not_headers() {
        let mut s = MessageScanner::default();
        let mut wire = header(20);
        wire.extend(header(0xffff_ffff));
        wire.extend([0; 10]);
        wire.extend(header(1));
        wire.push(0);
        assert_eq!(s.scan(&wire, 20), Ok(()));
    }

    #[test]
    fn a_budget_refuses_what_would_exceed_it_and_takes_back_what_is_returned() {
        let b = Budget::new(10);
        assert!(b.take(6));
        assert!(!b.take(5));
        assert_eq!(b.used(), 6);
        assert!(b.take(4));
        b.give(6);
        assert!(b.take(5));
        assert_eq!(b.used(), 9);
        assert!(!b.take(usize::MAX));
    }
}
