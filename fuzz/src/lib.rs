//! The fuzz targets' code. Each `pub fn name(&[u8])` is one target: the
//! libFuzzer binary `fuzz_targets/name.rs` calls it, and so does the
//! stable corpus test (`tests/corpus.rs`) for every file under
//! `corpus/name/`. A target fails by panicking; every check it makes is
//! an `assert!` with the reason.

mod alloc;
mod capi;
mod decode;
mod merge;
mod mux;
mod sync;
mod validator;

pub use capi::capi;
pub use decode::decode;
pub use merge::merge;
pub use mux::{mux_frames, mux_stream};
pub use sync::sync_split;
pub use validator::{validator, validator_yaml};

/// A target's function.
pub type Target = fn(&[u8]);

/// Every target, by name (the name of its binary and corpus directory).
pub const TARGETS: &[(&str, Target)] = &[
    ("mux_frames", mux_frames),
    ("mux_stream", mux_stream),
    ("sync_split", sync_split),
    ("decode", decode),
    ("merge", merge),
    ("validator", validator),
    ("validator_yaml", validator_yaml),
    ("capi", capi),
];

/// Seed inputs for each target, written by `src/bin/nri-fuzz-seeds.rs`.
pub mod seeds;
