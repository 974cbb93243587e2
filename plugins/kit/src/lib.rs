//! What nri-rs's sample plugins share, so that each plugin's own crate is
//! only its logic: Go-style command-line flags ([`flags`]), a logrus-like
//! stderr logger ([`logging`]), annotation lookup ([`annotations`]), YAML
//! decoding with the semantics of upstream's Go samples ([`goyaml`]),
//! object dumps for `-verbose` ([`dump`]) and the common `main` ([`run`]).

pub mod annotations;
pub mod config;
pub mod dump;
pub mod flags;
pub mod goyaml;
pub mod logging;
pub mod run;

pub use annotations::{container_name, lookup_annotation};
pub use flags::{Flags, Parsed};
pub use run::{run_plugin, StubOptions};
