//! "Robust where upstream is not": hostile or broken peers against the Rust
//! adaptation core. Each test shows good plugins keep working while the
//! peer misbehaves, and that the peer is gone within one timeout with fds
//! and tasks back where they were.
//!
//! The tests count the process's fds and the adaptation's tasks, so they run
//! one at a time ([`serial`]).

#[allow(dead_code)]
#[path = "../adaptation/common.rs"]
mod common;
mod event_budget;
mod failure_policy;
#[allow(dead_code)]
#[path = "../adaptation/goprocess.rs"]
mod goprocess;
mod gostub;
mod hostile;
#[allow(dead_code)]
mod peers;
mod stop;
mod syncs;

use std::future::Future;
use std::sync::Mutex;

/// Runs one test on a fresh current-thread runtime, one test at a time.
///
/// The tests count the process's fds, and every tokio runtime has fds of
/// its own (epoll, eventfd, signal socket): a test's runtime must not exist
/// while another test counts, so it is built only once the lock is held
/// (`#[tokio::test]` builds it before the test body runs).
pub fn serial(test: impl Future<Output = ()>) {
    static SERIAL: Mutex<()> = Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(test);
}
