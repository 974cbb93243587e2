//! Plugins as the adaptation sees them, whatever they are: a ttrpc peer, a
//! builtin or a WASM module. One plugin's identity and subscription, and the
//! relay of one request to it with its timeout, metrics and upstream's
//! error classification. Nothing here knows the core: a plugin asks what
//! it needs of its [`host::Host`].

pub(crate) mod builtin;
pub(crate) mod child;
pub(crate) mod client;
pub(crate) mod event_budget;
pub(crate) mod host;
pub(crate) mod identity;
pub(crate) mod names;
pub(crate) mod plugin;
pub(crate) mod request;
pub(crate) mod timeouts;
pub(crate) mod wasm;
