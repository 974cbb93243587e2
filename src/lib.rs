//! nri-rs: the Node Resource Interface (NRI) of containerd and CRI-O in Rust.
//!
//! * [`api`]: the NRI protocol types and ttrpc services, generated from
//!   `proto/nri.proto`, plus the helpers plugins and runtimes need.
//! * [`mux`]: the trunk multiplexer carrying both ttrpc sessions of a plugin
//!   over one socket, wire-compatible with upstream's `pkg/net/multiplex`.
//! * [`adaptation`]: the runtime side: plugins, events, merging, validation.
//! * [`stub`]: the plugin side, for writing NRI plugins in Rust.
//! * [`spec`]: the OCI spec generator, applying container adjustments and
//!   resource updates to an `oci_spec` runtime spec as upstream's
//!   `pkg/runtime-tools/generate` does.
//! * [`validator`]: the default validator, the builtin plugin that rejects
//!   restricted container adjustments and enforces required plugins.

// Lets `#[nri::plugin]`'s expansion (`::nri::...`) work inside this crate too.
extern crate self as nri;

pub mod adaptation;
pub mod api;
#[allow(non_camel_case_types)]
pub mod ffi;
pub mod mux;
pub mod spec;
pub mod stub;
pub mod validator;

/// Subscribes a [`stub::Plugin`] to the events whose handlers its `impl`
/// block defines. See [`stub::Plugin`].
pub use nri_rs_macros::plugin;
