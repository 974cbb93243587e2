//! WASM NRI plugins: WebAssembly modules in the plugin directory that
//! implement NRI's plugin interface as upstream's `pkg/api` generates it
//! for WebAssembly (see [`abi`]), so that a module built for upstream's
//! runtime runs unchanged.
//!
//! Modules run in the runtime's process on wasmi, an interpreter, so that
//! a module cannot hurt its host:
//!
//! - nothing is compiled to machine code and no signal handler is
//!   installed: a trap is an error value of the interpreter;
//! - each call has a deadline: it runs on fuel handed out in slices, and
//!   between slices the clock is read, so a module that loops is stopped
//!   within a slice of its deadline;
//! - each instance's memory is capped ([`Limits::memory`]);
//! - the module sees no files, sockets, arguments or environment ([`wasi`]).
//!
//! A module that traps, exits, runs past its deadline or breaks the
//! interface is dead: every later call fails with [`CallError::Closed`].
//! (Its host, nri-runtime, drops such a plugin as it drops one whose
//! process crashed.)

mod abi;
mod wasi;

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use wasmi::{Config, Engine, Linker, Module, Store, StoreLimitsBuilder, TrapCode};

pub use abi::METHODS;
use abi::{Exports, Failure, State};

/// What one instance may use.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Bytes of linear memory: growing past them traps.
    pub memory: usize,
}

/// 512 MiB: several times what a Go plugin synchronizing thousands of
/// containers needs, and a bound on what a runaway module can take.
pub const DEFAULT_MEMORY_LIMIT: usize = 512 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: DEFAULT_MEMORY_LIMIT,
        }
    }
}

/// Why a module could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The engine could not be set up.
    #[error("WASM engine: {0}")]
    Engine(String),
    /// Not a valid module, or not one for this engine's features.
    #[error("compile: {0}")]
    Compile(String),
    /// It imports what the host does not offer.
    #[error("instantiate: {0}")]
    Link(String),
    /// Its `_initialize` failed.
    #[error("initialize: {0}")]
    Init(String),
    /// It does not implement the plugin interface (upstream's texts, such
    /// as `plugin_configure is not exported`).
    #[error("{0}")]
    Interface(String),
}

/// Why a call gave no reply.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The plugin's handler failed the request: its error text.
    #[error("{0}")]
    Refused(String),
    /// The module trapped, exited or broke the interface during this call;
    /// it is dead from now on.
    #[error("{0}")]
    Crashed(String),
    /// The call ran past its deadline and was interrupted; the module is
    /// dead from now on.
    #[error("WASM plugin call exceeded its deadline")]
    Timeout,
    /// The module died in an earlier call.
    #[error("module closed: {0}")]
    Closed(String),
    /// No such method in the plugin interface.
    #[error("no WASM plugin method {0:?}")]
    UnknownMethod(String),
}

/// The engine all modules of the process are prepared for, with its
/// linker.
struct Host {
    engine: Engine,
    linker: Linker<State>,
}

static HOST: OnceLock<Result<Host, String>> = OnceLock::new();

fn host() -> Result<&'static Host, LoadError> {
    HOST.get_or_init(|| Host::new().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| LoadError::Engine(e.clone()))
}

/// When the process first needed the time (WASI's monotonic clock).
pub(crate) fn started() -> Instant {
    static STARTED: OnceLock<Instant> = OnceLock::new();
    *STARTED.get_or_init(Instant::now)
}

/// Fuel for one slice of a call: about a few milliseconds of the
/// interpreter's work, so the clock is read often enough for a deadline
/// to hold to within that, and seldom enough to cost nothing measurable.
const FUEL_SLICE: u64 = 2_000_000;

impl Host {
    fn new() -> Result<Host, wasmi::Error> {
        let mut config = Config::default();
        config.consume_fuel(true);
        // Translated whole at load: a function translated on its first
        // call would be charged to that call's fuel, and a slice running
        // out in the middle of a translation is a trap, not a pause.
        config.compilation_mode(wasmi::CompilationMode::Eager);
        let engine = Engine::new(&config);
        let mut linker = Linker::new(&engine);
        wasi::add(&mut linker)?;
        abi::add_host_functions(&mut linker)?;
        Ok(Host { engine, linker })
    }
}

/// A loaded plugin module: one instance, called one request at a time.
pub struct Plugin {
    instance: Mutex<Instance>,
}

struct Instance {
    store: Store<State>,
    exports: Exports,
    /// Why the module is dead, once it is.
    dead: Option<String>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("nri_wasm::Plugin")
    }
}

impl Plugin {
    /// Prepares and instantiates `wasm`, runs its `_initialize` (WASI's
    /// reactor start; upstream's start function) within `init_timeout`,
    /// and checks that it implements the interface. `name` appears in
    /// the log lines of its standard output and error.
    pub fn load(
        name: &str,
        wasm: &[u8],
        limits: &Limits,
        init_timeout: Duration,
    ) -> Result<Plugin, LoadError> {
        let host = host()?;
        let module =
            Module::new(&host.engine, wasm).map_err(|e| LoadError::Compile(e.to_string()))?;
        let limits = StoreLimitsBuilder::new()
            .memory_size(limits.memory)
            .instances(1)
            .memories(1)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(&host.engine, State::new(name.to_string(), limits));
        store.limiter(|s| &mut s.limits);
        let instance = host
            .linker
            .instantiate_and_start(&mut store, &module)
            .map_err(|e| LoadError::Link(e.to_string()))?;
        if let Some(init) = instance.get_func(&store, "_initialize") {
            let init = init
                .typed::<(), ()>(&store)
                .map_err(|e| LoadError::Init(e.to_string()))?;
            store.data_mut().deadline = Some(Instant::now() + init_timeout);
            match abi::run(&mut store, &init, ()) {
                Ok(()) => {}
                // Exiting with 0 is a normal end of a start function.
                Err(e) if e.i32_exit_status() == Some(0) => {}
                Err(e) => {
                    return Err(LoadError::Init(match e.i32_exit_status() {
                        Some(code) => format!("unexpected exit_code: {code}"),
                        None => describe(&e),
                    }))
                }
            }
        }
        let exports = Exports::find(&mut store, &instance).map_err(LoadError::Interface)?;
        Ok(Plugin {
            instance: Mutex::new(Instance {
                store,
                exports,
                dead: None,
            }),
        })
    }

    /// Calls `method` (a Plugin service method name, such as
    /// `CreateContainer`) with the request's encoding and returns the
    /// reply's encoding. Blocks for as long as the module runs, which is
    /// at most `timeout` and one slice of fuel, plus the wait for a call
    /// already in progress.
    pub fn call(
        &self,
        method: &str,
        request: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, CallError> {
        let index =
            Exports::method(method).ok_or_else(|| CallError::UnknownMethod(method.to_string()))?;
        let mut guard = self.instance.lock().unwrap_or_else(|e| e.into_inner());
        let inst = &mut *guard;
        if let Some(why) = &inst.dead {
            return Err(CallError::Closed(why.clone()));
        }
        inst.store.data_mut().deadline = Some(Instant::now() + timeout);
        let res = inst.exports.call(&mut inst.store, index, request);
        inst.store.data_mut().deadline = None;
        match res {
            Ok(reply) => Ok(reply),
            Err(Failure::Refused(text)) => Err(CallError::Refused(text)),
            Err(Failure::Broken(e)) => {
                let why = describe(&e);
                inst.dead = Some(why.clone());
                Err(if e.downcast_ref::<abi::Deadline>().is_some() {
                    CallError::Timeout
                } else {
                    CallError::Crashed(why)
                })
            }
        }
    }
}

/// A failure's text: an exit as upstream's engine words it, a trap with
/// the interpreter's description.
fn describe(e: &wasmi::Error) -> String {
    if let Some(code) = e.i32_exit_status() {
        return format!("module closed with exit_code({code})");
    }
    if let Some(TrapCode::GrowthOperationLimited) = e.as_trap_code() {
        return "wasm trap: memory limit reached".to_string();
    }
    match e.as_trap_code() {
        Some(code) => format!("wasm trap: {code}"),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests;
