//! How ttrpc plugins arrive: external ones at the socket, pre-installed ones
//! launched from the plugin directory with their drop-ins; the registration
//! handshake that makes a connection a plugin, and the Runtime service that
//! answers its requests.

pub(crate) mod activate;
pub(crate) mod connect;
pub(crate) mod dropin;
pub(crate) mod launch;
pub(crate) mod listener;
pub(crate) mod replies;
