//! The two kinds of thread an adaptation runs on: its own runtime's thread,
//! and the caller's thread that waits in an event.

pub(crate) mod caller;
pub(crate) mod runtime;
