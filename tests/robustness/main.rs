//! "Robust where upstream is not": hostile or broken peers against the Rust
//! adaptation core. Each test shows good plugins keep working while the
//! peer misbehaves, and that the peer is gone within one timeout with fds
//! and tasks back where they were.
//!
//! The tests count the process's fds and the adaptation's tasks, so they run
//! one at a time (`SERIAL`).

#[allow(dead_code)]
mod common;
mod hostile;
mod peers;

use std::sync::LazyLock;

/// Serializes the tests of this binary: fd counts are process-wide.
pub static SERIAL: LazyLock<tokio::sync::Mutex<()>> = LazyLock::new(|| tokio::sync::Mutex::new(()));
