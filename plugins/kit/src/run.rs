//! The `main` every sample plugin shares: build the stub from the usual
//! flags, run it, and exit non-zero with a log line when it stops.

use log::{error, info};
use nri_stub::{Plugin, Stub};

/// The stub options the Go samples take from their flags.
#[derive(Clone, Debug, Default)]
pub struct StubOptions {
    pub name: Option<String>,
    pub idx: Option<String>,
    pub socket_path: Option<String>,
    /// Log and exit with status 1 as soon as the connection to the runtime
    /// is lost (the Go samples that set `WithOnClose` do).
    pub exit_on_close: bool,
}

impl StubOptions {
    /// Takes `-name`, `-idx` and the socket flag (`socket_flag`, which is
    /// `socket-path` or `socket` depending on the Go sample) from `flags`.
    pub fn from_flags(flags: &crate::Parsed, socket_flag: &str) -> Self {
        StubOptions {
            name: flags.non_empty("name"),
            idx: flags.non_empty("idx"),
            socket_path: flags.non_empty(socket_flag),
            exit_on_close: false,
        }
    }
}

/// Runs `plugin` until the runtime goes away, then exits the process:
/// status 1 when the stub could not start or the connection failed, as
/// the Go samples do.
pub async fn run_plugin<P: Plugin>(opts: StubOptions, plugin: P) -> ! {
    let mut builder = Stub::builder();
    if opts.exit_on_close {
        builder = builder.on_close(|| {
            info!("Connection to the runtime lost, exiting...");
            std::process::exit(1)
        });
    }
    if let Some(name) = opts.name {
        builder = builder.name(name);
    }
    if let Some(idx) = opts.idx {
        builder = builder.idx(idx);
    }
    if let Some(path) = opts.socket_path {
        builder = builder.socket_path(path);
    }
    let stub = match builder.build(plugin) {
        Ok(stub) => stub,
        Err(e) => {
            error!("failed to create plugin stub: {e}");
            std::process::exit(1)
        }
    };
    match stub.run().await {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            error!("plugin exited with error {e}");
            std::process::exit(1)
        }
    }
}
