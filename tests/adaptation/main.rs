//! The Rust adaptation core hosting real plugins over real sockets: Rust
//! stub plugins in-process, upstream Go stub plugins as processes, and
//! hostile peers speaking raw bytes.

mod common;
mod goplugin;
mod lifecycle;
