//! WASM plugins from the plugin directory, run in-process on the engine the
//! host lent or, with the `compiled-wasm` feature, by nri-wasm; refused as
//! upstream built with `nri_no_wasm` refuses them when neither is there.
//!
//! A module is taken compiled from the cache directory
//! (`Options::wasm_cache_dir`) when it holds it (`compiled-wasm`); else it
//! runs on the engine the host lent (`Options::wasm_engine`), or, when none
//! was lent, it is compiled to machine code as it loads (`compiled-wasm`).
//!
//! A call never runs on the core's thread: a module computes for as long
//! as its deadline lets it, and the core's thread serves every other plugin
//! meanwhile. It runs on the thread of a caller blocked on the event
//! ([`crate::block_on_event`], the C ABI's event calls), else on tokio's
//! blocking pool.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Whether this build runs WASM plugins by itself, compiled (the
/// `compiled-wasm` feature). Without it, only on an engine the host lends.
pub const WASM_SUPPORTED: bool = cfg!(feature = "compiled-wasm");

/// Whether an adaptation runs WASM plugins: on its own engine or on one
/// the host `lent`, unless the host `disabled` them. When it has no engine
/// to run them on, says so as upstream's `New` says it, once per adaptation.
pub(crate) fn enabled(disabled: bool, lent: bool) -> bool {
    if disabled {
        return false;
    }
    if !WASM_SUPPORTED && !lent {
        log::error!("failed to initialize WASM support: WASM support is disabled (at build time)");
        return false;
    }
    true
}

/// A WASM engine the host lends the core for the modules that the
/// compiled-module cache does not hold: go/adaptation lends wazero, the
/// engine upstream runs modules on, so that a node's first start with a
/// module costs what upstream's does rather than a Cranelift compile.
/// Modules the cache holds run compiled, on wasmtime, whatever is lent.
///
/// The engine must implement upstream's plugin interface for WASM
/// (`plugin_<method>`, `malloc`/`free`, `env.log`, API version 1) as
/// nri-wasm does, and give a module no files, arguments or environment.
pub trait WasmEngine: Send + Sync + 'static {
    /// Instantiates `wasm` as plugin `name`, its memory capped at
    /// `memory_limit` bytes, its start function cut off at `init_timeout`,
    /// and checks its interface. Runs on a blocking thread.
    fn load(
        &self,
        name: &str,
        wasm: &[u8],
        memory_limit: usize,
        init_timeout: Duration,
    ) -> Result<Box<dyn WasmModule>, String>;
}

/// A module a [`WasmEngine`] loaded. Called one request at a time, on a
/// blocking thread; dropped when its plugin is.
pub trait WasmModule: Send + Sync {
    /// Calls `method` (a Plugin service method, such as `CreateContainer`)
    /// with the request's encoding; the reply's encoding. The module must
    /// stop at `timeout`.
    fn call(&self, method: &str, request: &[u8], timeout: Duration)
        -> Result<Vec<u8>, WasmFailure>;
}

/// How a call into a WASM module failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WasmFailure {
    /// The plugin's handler failed the request: its text.
    Refused(String),
    /// The module died (trap, exit, broken interface, memory cap), in this
    /// call or an earlier one: it is closed as a plugin that crashed.
    Dead(String),
    /// Interrupted at its deadline.
    Timeout,
}

/// A loaded module.
#[derive(Clone)]
pub(crate) enum WasmPlugin {
    /// Compiled by Cranelift, now or earlier (the cache), run by wasmtime.
    #[cfg(feature = "compiled-wasm")]
    Compiled(Arc<nri_wasm::Plugin>),
    /// Run by the engine the host lent.
    Lent(Arc<dyn WasmModule>),
}

/// What a module is loaded with.
#[cfg_attr(not(feature = "compiled-wasm"), allow(dead_code))]
pub(crate) struct LoadConfig {
    pub(crate) memory_limit: usize,
    pub(crate) init_timeout: Duration,
    pub(crate) cache_dir: Option<std::path::PathBuf>,
    pub(crate) engine: Option<Arc<dyn WasmEngine>>,
}

impl WasmPlugin {
    /// Loads the module at `path`: compiled from the cache if it holds it;
    /// else on the engine the host lent, if it lent one; else compiled now
    /// (and kept in the cache). Without `compiled-wasm`, on the lent engine.
    pub(crate) fn load(path: &Path, name: &str, cfg: &LoadConfig) -> Result<WasmPlugin, String> {
        #[cfg(feature = "compiled-wasm")]
        {
            let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
            let limits = nri_wasm::Limits {
                memory: cfg.memory_limit,
            };
            let cache_dir = cfg.cache_dir.as_deref();
            let compiled = |p: nri_wasm::Plugin| WasmPlugin::Compiled(Arc::new(p));
            let Some(engine) = &cfg.engine else {
                return nri_wasm::Plugin::load(name, &bytes, &limits, cfg.init_timeout, cache_dir)
                    .map(compiled)
                    .map_err(|e| e.to_string());
            };
            if let Some(dir) = cache_dir {
                let cached =
                    nri_wasm::Plugin::load_compiled(name, &bytes, &limits, cfg.init_timeout, dir)
                        .map_err(|e| e.to_string())?;
                if let Some(p) = cached {
                    return Ok(compiled(p));
                }
            }
            log::debug!(
                "WASM plugin {name}: not in the compiled-module cache, run on the host's engine"
            );
            engine
                .load(name, &bytes, cfg.memory_limit, cfg.init_timeout)
                .map(|m| WasmPlugin::Lent(Arc::from(m)))
        }
        #[cfg(not(feature = "compiled-wasm"))]
        {
            // No compiled modules: the cache is not looked at.
            let Some(engine) = &cfg.engine else {
                return Err("no WASM support".to_string());
            };
            let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
            engine
                .load(name, &bytes, cfg.memory_limit, cfg.init_timeout)
                .map(|m| WasmPlugin::Lent(Arc::from(m)))
        }
    }

    /// Calls `method` with the request's encoding; the reply's encoding.
    pub(crate) async fn call(
        &self,
        method: &'static str,
        request: Arc<[u8]>,
        timeout: Duration,
    ) -> Result<Vec<u8>, WasmFailure> {
        // A caller blocked on this event runs the module itself; the
        // core's thread must not block, so there it runs on tokio's
        // blocking pool.
        if crate::threads::caller::caller_waits() {
            return self.call_here(method, &request, timeout);
        }
        let w = self.clone();
        tokio::task::spawn_blocking(move || w.call_here(method, &request, timeout))
            .await
            .unwrap_or_else(|e| Err(WasmFailure::Dead(format!("WASM call failed: {e}"))))
    }
}

impl WasmPlugin {
    /// Calls the module on this thread, blocking it for as long as the
    /// module runs.
    fn call_here(
        &self,
        method: &str,
        request: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, WasmFailure> {
        let call = std::panic::AssertUnwindSafe(|| match self {
            #[cfg(feature = "compiled-wasm")]
            WasmPlugin::Compiled(plugin) => compiled_call(plugin, method, request, timeout),
            WasmPlugin::Lent(module) => module.call(method, request, timeout),
        });
        // A panic in the engine: the module is as good as dead.
        std::panic::catch_unwind(call)
            .unwrap_or_else(|_| Err(WasmFailure::Dead("WASM call failed: panic".to_string())))
    }
}

#[cfg(feature = "compiled-wasm")]
fn compiled_call(
    plugin: &nri_wasm::Plugin,
    method: &str,
    request: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, WasmFailure> {
    use nri_wasm::CallError;
    plugin.call(method, request, timeout).map_err(|e| match e {
        CallError::Refused(text) => WasmFailure::Refused(text),
        CallError::Timeout => WasmFailure::Timeout,
        e => WasmFailure::Dead(e.to_string()),
    })
}

/// Where WASM plugins' compiled modules are kept by default.
#[cfg(feature = "compiled-wasm")]
pub const DEFAULT_WASM_CACHE_DIR: &str = nri_wasm::DEFAULT_CACHE_DIR;
#[cfg(not(feature = "compiled-wasm"))]
pub const DEFAULT_WASM_CACHE_DIR: &str = "/var/cache/nri/wasm";

/// Default bytes of memory per WASM plugin instance.
#[cfg(feature = "compiled-wasm")]
pub const DEFAULT_WASM_MEMORY_LIMIT: usize = nri_wasm::DEFAULT_MEMORY_LIMIT;
#[cfg(not(feature = "compiled-wasm"))]
pub const DEFAULT_WASM_MEMORY_LIMIT: usize = 512 << 20;
