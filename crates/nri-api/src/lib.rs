//! The NRI protocol: message types and ttrpc services generated from
//! `proto/nri.proto`, the helpers plugins and runtimes need on top, and
//! [`mux`], the trunk multiplexer that carries a plugin's two ttrpc sessions
//! over one socket, wire-compatible with upstream's `pkg/net/multiplex`.

#[allow(
    clippy::all,
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unused_imports,
    unused_mut,
    unused_results
)]
mod generated {
    pub mod nri {
        include!(concat!(env!("OUT_DIR"), "/nri.rs"));
    }
    pub mod nri_ttrpc {
        include!(concat!(env!("OUT_DIR"), "/nri_ttrpc.rs"));
    }
}

pub use generated::nri::*;
/// ttrpc clients, server traits and service constructors.
pub mod ttrpc {
    pub use super::generated::nri_ttrpc::*;
}

mod adjust;
pub mod envelope;
pub mod event;
pub mod mux;
pub mod optional;
mod owners;
pub mod plugin;
pub mod quote;
pub mod removal;
pub mod wire;

pub use event::{EventMask, UnknownEvent, ALL_EVENTS};
pub use optional::OptionalValue;
pub use owners::ConflictError;
pub use plugin::{
    check_plugin_index, check_plugin_name, is_wasm_module, parse_plugin_name, PluginNameError,
    DEFAULT_REGISTRATION_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SOCKET_PATH, PLUGIN_IDX_ENV,
    PLUGIN_NAME_ENV, PLUGIN_SOCKET_ENV,
};
pub use removal::{clear_removal_marker, mark_for_removal, marked_for_removal};
