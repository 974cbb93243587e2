//! WASM plugins from the plugin directory, run in-process by nri-wasm, or,
//! built without the `wasm` feature, refused as upstream built with
//! `nri_no_wasm` refuses them.
//!
//! A module is compiled to machine code when it loads, or taken compiled
//! from the cache directory (`Options::wasm_cache_dir`).
//!
//! A call runs on tokio's blocking pool, never on the core's thread: a
//! module computes for as long as its deadline lets it, and the core's
//! thread serves every other plugin meanwhile.

use std::path::Path;
use std::time::Duration;

/// Whether this build runs WASM plugins.
pub const WASM_SUPPORTED: bool = cfg!(feature = "wasm");

/// A loaded module. Without the feature there is none: the type is empty.
#[cfg(feature = "wasm")]
pub(crate) struct WasmPlugin(std::sync::Arc<nri_wasm::Plugin>);
#[cfg(not(feature = "wasm"))]
pub(crate) enum WasmPlugin {}

/// How a call failed, for the plugin's relay to classify.
#[cfg_attr(not(feature = "wasm"), allow(dead_code))]
pub(crate) enum Failure {
    /// The plugin's handler failed the request: its text.
    Refused(String),
    /// The module died (trap, exit, broken interface, memory cap), in this
    /// call or an earlier one.
    Dead(String),
    /// Interrupted at its deadline.
    Timeout,
}

impl WasmPlugin {
    /// Loads the module at `path`, giving its start function `init_timeout`.
    #[cfg_attr(not(feature = "wasm"), allow(unused_variables))]
    pub(crate) fn load(
        path: &Path,
        name: &str,
        memory_limit: usize,
        init_timeout: Duration,
        cache_dir: Option<&Path>,
    ) -> Result<WasmPlugin, String> {
        #[cfg(feature = "wasm")]
        {
            let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
            let limits = nri_wasm::Limits {
                memory: memory_limit,
            };
            nri_wasm::Plugin::load(name, &bytes, &limits, init_timeout, cache_dir)
                .map(|p| WasmPlugin(std::sync::Arc::new(p)))
                .map_err(|e| e.to_string())
        }
        #[cfg(not(feature = "wasm"))]
        Err("no WASM support".to_string())
    }

    /// Calls `method` with the request's encoding; the reply's encoding.
    #[cfg_attr(not(feature = "wasm"), allow(unused_variables))]
    pub(crate) async fn call(
        &self,
        method: &'static str,
        request: std::sync::Arc<[u8]>,
        timeout: Duration,
    ) -> Result<Vec<u8>, Failure> {
        #[cfg(feature = "wasm")]
        {
            use nri_wasm::CallError;
            let plugin = std::sync::Arc::clone(&self.0);
            let res =
                tokio::task::spawn_blocking(move || plugin.call(method, &request, timeout)).await;
            match res {
                Ok(Ok(reply)) => Ok(reply),
                Ok(Err(CallError::Refused(text))) => Err(Failure::Refused(text)),
                Ok(Err(CallError::Timeout)) => Err(Failure::Timeout),
                Ok(Err(e)) => Err(Failure::Dead(e.to_string())),
                // A panic in the engine: the module is as good as dead.
                Err(e) => Err(Failure::Dead(format!("WASM call failed: {e}"))),
            }
        }
        #[cfg(not(feature = "wasm"))]
        match *self {}
    }
}

/// Where WASM plugins' compiled modules are kept by default.
#[cfg(feature = "wasm")]
pub const DEFAULT_WASM_CACHE_DIR: &str = nri_wasm::DEFAULT_CACHE_DIR;
#[cfg(not(feature = "wasm"))]
pub const DEFAULT_WASM_CACHE_DIR: &str = "/var/cache/nri/wasm";

/// Default bytes of memory per WASM plugin instance.
#[cfg(feature = "wasm")]
pub const DEFAULT_WASM_MEMORY_LIMIT: usize = nri_wasm::DEFAULT_MEMORY_LIMIT;
#[cfg(not(feature = "wasm"))]
pub const DEFAULT_WASM_MEMORY_LIMIT: usize = 512 << 20;
