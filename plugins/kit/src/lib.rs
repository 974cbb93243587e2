//! Helpers for NRI plugins written with [`nri_stub`], so that a plugin's
//! own crate holds only its logic. nri-rs's sample plugins use it, and so
//! may any plugin written outside nri-rs:
//!
//! * [`flags`]: command lines parsed as Go's `flag` package parses them, so
//!   deployments written for Go plugins start Rust ones unchanged;
//! * [`logging`]: a logrus-like stderr logger;
//! * [`annotations`]: effective-annotation lookup for a container or pod;
//! * [`goyaml`]: YAML decoding with the semantics of the Go plugins
//!   (`sigs.k8s.io/yaml`), and [`config`] for configuration updated key by
//!   key;
//! * [`dump`]: object dumps for `-verbose`;
//! * [`run`]: the common `main`: a stub built from the flags, served until
//!   the runtime goes away, and the exit status;
//! * `testing` (cargo feature `testing`, for dev-dependencies): a runtime
//!   in the plugin's own tests, which the plugin connects to over a real
//!   connection: send pod and container events, read the merged replies.
//!
//! A plugin's `main` is then a few lines:
//!
//! ```no_run
//! # use nri_stub::Plugin;
//! # #[derive(Default)]
//! # struct MyPlugin;
//! # #[nri_stub::plugin]
//! # impl Plugin for MyPlugin {}
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() {
//!     let flags = plugin_kit::Flags::new("my-plugin")
//!         .string("name", "", "plugin name to register to NRI")
//!         .string("idx", "", "plugin index to register to NRI")
//!         .string("socket", "", "path to the NRI socket")
//!         .parse_env_or_exit();
//!     plugin_kit::logging::init(false);
//!     let opts = plugin_kit::StubOptions::from_flags(&flags, "socket");
//!     plugin_kit::run_plugin(opts, MyPlugin::default()).await
//! }
//! ```

pub mod annotations;
pub mod config;
pub mod dump;
pub mod flags;
pub mod goyaml;
pub mod logging;
pub mod run;
#[cfg(feature = "testing")]
pub mod testing;

pub use annotations::{container_name, lookup_annotation};
pub use flags::{Flags, Parsed};
pub use run::{run_plugin, StubOptions};
