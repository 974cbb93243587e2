//! WASM NRI plugins: WebAssembly modules in the plugin directory that
//! implement NRI's plugin interface as upstream's `pkg/api` generates it
//! for WebAssembly (see [`abi`]), so that a module built for upstream's
//! runtime runs unchanged.
//!
//! Modules are compiled to machine code by wasmtime (Cranelift) and run in
//! the runtime's process, set up so that a module cannot hurt its host:
//!
//! - no signal handler is installed: every bounds check, division and
//!   other trap condition is tested by the generated code, and a trap is
//!   an error value returned to the caller;
//! - each call has a deadline: compiled code checks the engine's epoch,
//!   which a watchdog thread advances only when a call's deadline passes
//!   ([`deadline`]), so a module that loops is stopped there;
//! - each instance's memory is capped ([`Limits::memory`]);
//! - the module sees no files, sockets, arguments or environment ([`wasi`]).
//!
//! A module that traps, exits, runs past its deadline or breaks the
//! interface is dead: every later call fails with [`CallError::Closed`].
//! (Its host, nri-runtime, drops such a plugin as it drops one whose
//! process crashed.)

mod abi;
mod cache;
mod deadline;
mod wasi;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::{Config, Engine, Linker, Module, Store, Trap, UpdateDeadline};

pub use abi::METHODS;
use abi::{Exports, Failure, State};
use cache::{Cache, Entry};
use deadline::Watchdog;
use log::{debug, info, warn};

/// What one instance may use.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Bytes of linear memory: growing past them traps.
    pub memory: usize,
}

/// Where compiled modules are kept unless the runtime says otherwise
/// (FHS's place for data an application can rebuild).
pub const DEFAULT_CACHE_DIR: &str = "/var/cache/nri/wasm";

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

/// The engine all modules of the process are compiled for, its linker,
/// and the watchdog of its calls' deadlines.
struct Host {
    engine: Engine,
    linker: Linker<State>,
    watchdog: Watchdog,
}

static HOST: OnceLock<Result<Host, String>> = OnceLock::new();

fn host() -> Result<&'static Host, LoadError> {
    HOST.get_or_init(|| Host::new().map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(|e| LoadError::Engine(e.clone()))
}

/// When the process first needed the time (WASI's monotonic clock).
pub(crate) fn started() -> Instant {
    static STARTED: OnceLock<Instant> = OnceLock::new();
    *STARTED.get_or_init(Instant::now)
}

/// The most threads one module's compilation uses (a Go module has some
/// 10,000 functions, compiled independently).
const COMPILE_THREADS: usize = 4;

impl Host {
    fn new() -> wasmtime::Result<Host> {
        let mut config = Config::new();
        config
            // The generated code checks every bound itself and never
            // relies on a fault: no signal handler enters the host.
            .signals_based_traps(false)
            // Without fault-based bounds checks, reserved address space
            // and guard pages buy nothing.
            .memory_reservation(0)
            .memory_guard_size(0)
            .memory_init_cow(false)
            // Deadlines: see `deadline`.
            .epoch_interruption(true)
            // The runtime's unwinder never walks through a module's frames
            // (wasmtime returns a host function's panic to its caller), so
            // the code is not registered with it; traps name functions
            // without offsets, which keeps compiled modules smaller.
            .native_unwind_info(false)
            .generate_address_map(false)
            .parallel_compilation(true);
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        wasi::add(&mut linker)?;
        abi::add_host_functions(&mut linker)?;
        let watchdog = Watchdog::start(engine.clone())?;
        Ok(Host {
            engine,
            linker,
            watchdog,
        })
    }

    /// `wasm` compiled: from the cache in `cache_dir` if it has it, else
    /// compiled now and stored there. A cache that cannot be used is
    /// logged and done without.
    fn module(
        &self,
        name: &str,
        wasm: &[u8],
        cache_dir: Option<&Path>,
    ) -> Result<Module, LoadError> {
        let cache = cache_dir.and_then(|dir| match Cache::open(dir) {
            Ok(cache) => Some(cache),
            Err(e) => {
                warn!(
                    "WASM plugin {name}: compiled-module cache {}: {e}; compiling without it",
                    dir.display()
                );
                None
            }
        });
        let entry = cache.as_ref().map(|c| c.entry(&self.engine, wasm));
        if let Some(module) = entry.as_ref().and_then(|e| self.cached(name, e)) {
            return Ok(module);
        }
        let started = Instant::now();
        let module = self.compile(wasm)?;
        info!("WASM plugin {name}: compiled in {:.1?}", started.elapsed());
        if let (Some(cache), Some(entry)) = (&cache, &entry) {
            match entry.store(cache, &module) {
                Ok(()) => debug!(
                    "WASM plugin {name}: compiled module kept in {}",
                    entry.path().display()
                ),
                Err(e) => warn!(
                    "WASM plugin {name}: compiled module not kept in {}: {e}",
                    entry.path().display()
                ),
            }
        }
        Ok(module)
    }

    /// The module `entry` holds, if it holds one this engine accepts; a
    /// file that is there but not used is logged.
    fn cached(&self, name: &str, entry: &Entry) -> Option<Module> {
        match entry.load(&self.engine) {
            Ok(Some(module)) => {
                debug!(
                    "WASM plugin {name}: compiled module from {}",
                    entry.path().display()
                );
                Some(module)
            }
            Ok(None) => None,
            Err(e) => {
                warn!(
                    "WASM plugin {name}: compiled module {} not used: {e}",
                    entry.path().display()
                );
                None
            }
        }
    }

    /// Compiles `wasm` on a pool of threads of its own, which ends with
    /// the compilation (a global pool would keep its threads in the
    /// runtime's process for good).
    fn compile(&self, wasm: &[u8]) -> Result<Module, LoadError> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(COMPILE_THREADS);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("nri-wasm-compile-{i}"))
            .build()
            .map_err(|e| LoadError::Engine(e.to_string()))?;
        let module = pool
            .install(|| Module::new(&self.engine, wasm))
            .map_err(|e| LoadError::Compile(format!("{e:#}")));
        drop(pool);
        release_freed_memory();
        module
    }

    /// Runs `f`, the calls it makes into the store's instance ending by
    /// `timeout` from now.
    fn run<R>(
        &self,
        store: &mut Store<State>,
        timeout: Duration,
        f: impl FnOnce(&mut Store<State>) -> R,
    ) -> R {
        let at = Instant::now() + timeout;
        store.data_mut().deadline = Some(at);
        let armed = self.watchdog.arm(at);
        let res = f(store);
        drop(armed);
        store.data_mut().deadline = None;
        res
    }
}

/// Compiling a Go module allocates a few hundred MiB, almost all freed
/// when it ends; glibc keeps freed memory for reuse unless asked to give
/// it back, and the runtime would carry it for good.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A loaded plugin module: one instance, called one request at a time.
pub struct Plugin {
    host: &'static Host,
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
    /// Compiles `wasm` (or takes its compiled form from the cache in
    /// `cache_dir`, see [`DEFAULT_CACHE_DIR`]), instantiates it, runs its
    /// `_initialize` (WASI's reactor start; upstream's start function)
    /// within `init_timeout`, and checks that it implements the
    /// interface. `name` appears in the log lines of its standard output
    /// and error.
    pub fn load(
        name: &str,
        wasm: &[u8],
        limits: &Limits,
        init_timeout: Duration,
        cache_dir: Option<&Path>,
    ) -> Result<Plugin, LoadError> {
        let host = host()?;
        let module = host.module(name, wasm, cache_dir)?;
        Plugin::instantiate(host, &module, name, limits, init_timeout)
    }

    /// As [`Plugin::load`], but only from the cache in `cache_dir`:
    /// `None` when it does not hold `wasm` compiled for this engine (or
    /// cannot be used), so that the caller can run the module some other
    /// way instead of compiling it here.
    pub fn load_compiled(
        name: &str,
        wasm: &[u8],
        limits: &Limits,
        init_timeout: Duration,
        cache_dir: &Path,
    ) -> Result<Option<Plugin>, LoadError> {
        let host = host()?;
        let cache = match Cache::open(cache_dir) {
            Ok(cache) => cache,
            Err(e) => {
                warn!(
                    "WASM plugin {name}: compiled-module cache {}: {e}; not used",
                    cache_dir.display()
                );
                return Ok(None);
            }
        };
        match host.cached(name, &cache.entry(&host.engine, wasm)) {
            Some(module) => {
                Plugin::instantiate(host, &module, name, limits, init_timeout).map(Some)
            }
            None => Ok(None),
        }
    }

    /// `module` instantiated and started, its interface checked.
    fn instantiate(
        host: &'static Host,
        module: &Module,
        name: &str,
        limits: &Limits,
        init_timeout: Duration,
    ) -> Result<Plugin, LoadError> {
        let mut store = Store::new(&host.engine, State::new(name.to_string(), limits.memory));
        store.limiter(|s| &mut s.limits);
        // Past the epoch's next step, the store asks whether its call's
        // deadline is over: only then does the call end.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| match ctx.data().deadline {
            Some(at) if Instant::now() >= at => Err(abi::Deadline.into()),
            _ => Ok(UpdateDeadline::Continue(1)),
        });
        let instance = host
            .linker
            .instantiate(&mut store, module)
            .map_err(|e| LoadError::Link(format!("{e:#}")))?;
        if let Some(init) = instance.get_func(&mut store, "_initialize") {
            let init = init
                .typed::<(), ()>(&store)
                .map_err(|e| LoadError::Init(e.to_string()))?;
            match host.run(&mut store, init_timeout, |s| init.call(s, ())) {
                Ok(()) => {}
                // Exiting with 0 is a normal end of a start function.
                Err(e) if exit_status(&e) == Some(0) => {}
                Err(e) => {
                    return Err(LoadError::Init(match exit_status(&e) {
                        Some(code) => format!("unexpected exit_code: {code}"),
                        None => describe(&e),
                    }))
                }
            }
        }
        let exports = host
            .run(&mut store, init_timeout, |s| Exports::find(s, &instance))
            .map_err(LoadError::Interface)?;
        Ok(Plugin {
            host,
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
    /// at most `timeout`, plus the wait for a call already in progress.
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
        let res = self.host.run(&mut inst.store, timeout, |store| {
            inst.exports.call(store, index, request)
        });
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

/// What [`precompile`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precompiled {
    /// The cache already held the module, compiled by this engine.
    Cached(PathBuf),
    /// Compiled now, in `took`, and stored.
    Compiled { path: PathBuf, took: Duration },
}

/// Why [`precompile`] failed.
#[derive(Debug, thiserror::Error)]
pub enum PrecompileError {
    /// The module would not load as a plugin either.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The cache directory or file could not be used.
    #[error("compiled-module cache {}: {source}", .path.display())]
    Cache { path: PathBuf, source: io::Error },
}

/// Puts `wasm`'s compiled form into the cache in `cache_dir`, where
/// [`Plugin::load`] and [`Plugin::load_compiled`] with that directory
/// find it, so that a runtime need not compile the module at start (a Go
/// module takes some 10 s of CPU and a few hundred MiB) nor run it on
/// another engine. Meant for a node's setup, in
/// a process of its own and as the runtime's user: the cache trusts
/// only files of the process's own user.
///
/// The module is also instantiated and started, as [`Plugin::load`]
/// does, and stored only if it implements the plugin interface. Unlike a
/// runtime's load, a cache that cannot be used is an error.
pub fn precompile(
    name: &str,
    wasm: &[u8],
    cache_dir: &Path,
    init_timeout: Duration,
) -> Result<Precompiled, PrecompileError> {
    let host = host()?;
    let cache = Cache::open(cache_dir).map_err(|source| PrecompileError::Cache {
        path: cache_dir.to_path_buf(),
        source,
    })?;
    let entry = cache.entry(&host.engine, wasm);
    let (module, done) = match host.cached(name, &entry) {
        Some(module) => (module, Precompiled::Cached(entry.path().to_path_buf())),
        None => {
            let started = Instant::now();
            let module = host.compile(wasm)?;
            let done = Precompiled::Compiled {
                path: entry.path().to_path_buf(),
                took: started.elapsed(),
            };
            (module, done)
        }
    };
    Plugin::instantiate(host, &module, name, &Limits::default(), init_timeout)?;
    if let Precompiled::Compiled { .. } = done {
        entry
            .store(&cache, &module)
            .map_err(|source| PrecompileError::Cache {
                path: entry.path().to_path_buf(),
                source,
            })?;
    }
    Ok(done)
}

/// The code a module exited with through WASI's `proc_exit`.
fn exit_status(e: &wasmtime::Error) -> Option<i32> {
    e.downcast_ref::<abi::Exit>().map(|exit| exit.0)
}

/// A failure's text: an exit as upstream's engine words it, a trap with
/// the engine's description.
fn describe(e: &wasmtime::Error) -> String {
    if let Some(code) = exit_status(e) {
        return format!("module closed with exit_code({code})");
    }
    if e.downcast_ref::<abi::MemoryLimit>().is_some() {
        return "wasm trap: memory limit reached".to_string();
    }
    match e.downcast_ref::<Trap>() {
        Some(trap) => format!("wasm trap: {trap}"),
        None => format!("{e:#}"),
    }
}

#[cfg(test)]
mod tests;
