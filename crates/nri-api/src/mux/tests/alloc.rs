//! Proves the reader never allocates what a frame header claims.
//!
//! A global allocator wrapper records, per thread and only while enabled, the
//! largest single allocation. The tests run on a current-thread runtime, so
//! the mux tasks run on the test thread and are covered.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use super::{mux_and_peer, read_n};
use crate::mux::{Options, MAX_PAYLOAD};

struct Tracking;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = ENABLED.try_with(|on| {
        if on.get() {
            let _ = LARGEST.try_with(|m| m.set(m.get().max(size)));
        }
    });
}

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: our caller's obligations for `alloc` are System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: our caller's obligations for `alloc_zeroed` are System's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System (every allocation here does), with
        // this layout, as our caller guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as for `dealloc`, and `new_size` is our caller's, valid.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// Runs `f` with tracking on and returns the largest allocation it made.
async fn largest_allocation<F: std::future::Future<Output = ()>>(f: F) -> usize {
    LARGEST.with(|m| m.set(0));
    ENABLED.with(|on| on.set(true));
    f.await;
    ENABLED.with(|on| on.set(false));
    LARGEST.with(|m| m.get())
}

const SMALL: usize = 1 << 20;

#[tokio::test]
async fn four_gib_claim_is_refused_without_allocating_it() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let _conn = mux.open(1).unwrap();
    let largest = largest_allocation(async {
        peer.send_header(1, u32::MAX).await;
        assert!(mux.closed().await.is_some());
    })
    .await;
    assert!(largest < SMALL, "largest allocation {largest} bytes");
}

#[tokio::test]
async fn large_legit_frame_is_moved_in_small_chunks() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    let largest = largest_allocation(async {
        // Frames for an ID that is not open are skipped without buffering.
        peer.send_frame(2, &[1u8; 200_000]).await;
        // Claim the maximum, deliver only a little: nothing may be sized by the claim.
        peer.send_header(1, MAX_PAYLOAD as u32).await;
        tokio::io::AsyncWriteExt::write_all(&mut peer.io, &[9u8; 100])
            .await
            .unwrap();
        assert_eq!(read_n(&mut conn, 100).await, [9u8; 100]);
    })
    .await;
    assert!(largest < SMALL, "largest allocation {largest} bytes");
    assert!(!mux.is_closed());
}
