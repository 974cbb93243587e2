//! The Rust adaptation core hosting real plugins over real sockets: Rust
//! stub plugins in-process, upstream Go stub plugins as processes, and
//! hand-built peers speaking raw ttrpc.

mod audit;
mod common;
mod concurrency;
mod encoded;
mod fallback;
mod goplugin;
#[allow(dead_code)]
mod goprocess;
mod handshake;
mod identity;
mod joining;
mod lifecycle;
mod metrics;
#[allow(dead_code)]
#[path = "../robustness/peers.rs"]
mod peers;
mod timeouts;
mod validator;
mod wasm;
