//! The runtime side of NRI: dispatching events to plugins and merging their replies.

pub(crate) mod result;
