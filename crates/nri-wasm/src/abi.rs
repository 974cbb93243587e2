//! A module's side of the plugin interface, as upstream's pkg/api generates
//! it for WebAssembly (protoc-gen-go-plugin, API version 1):
//!
//! - `plugin_<method>(ptr, len) -> u64` for each of the 19 methods of the
//!   Plugin service: the request's protobuf encoding is at `ptr`, put there
//!   through the module's `malloc`; the result is `ptr << 32 | len` of the
//!   reply's encoding, or of an error text when bit 31 of `len` is set;
//! - `malloc(len) -> ptr` and `free(ptr)`, `memory`, `plugin_api_version`;
//! - the host's `env.log(ptr, len)`, given a `LogRequest`.

use std::time::Instant;

use log::{debug, error, info, warn};
use protobuf::Message;
use wasmtime::{Caller, Extern, Instance, Linker, Memory, ResourceLimiter, Store, TypedFunc};

use nri_api::{log_request::Level, LogRequest};

/// The API version the host implements (upstream's
/// `PluginPluginAPIVersion`).
pub(crate) const API_VERSION: u64 = 1;

/// The Plugin service's methods and the functions a module exports for
/// them, in upstream's order (which is also the order of its checks).
pub const METHODS: [(&str, &str); 18] = [
    ("Configure", "plugin_configure"),
    ("Synchronize", "plugin_synchronize"),
    ("Shutdown", "plugin_shutdown"),
    ("RunPodSandbox", "plugin_run_pod_sandbox"),
    ("UpdatePodSandbox", "plugin_update_pod_sandbox"),
    ("PostUpdatePodSandbox", "plugin_post_update_pod_sandbox"),
    ("StopPodSandbox", "plugin_stop_pod_sandbox"),
    ("RemovePodSandbox", "plugin_remove_pod_sandbox"),
    ("CreateContainer", "plugin_create_container"),
    ("PostCreateContainer", "plugin_post_create_container"),
    ("StartContainer", "plugin_start_container"),
    ("PostStartContainer", "plugin_post_start_container"),
    ("UpdateContainer", "plugin_update_container"),
    ("PostUpdateContainer", "plugin_post_update_container"),
    ("StopContainer", "plugin_stop_container"),
    ("RemoveContainer", "plugin_remove_container"),
    ("StateChange", "plugin_state_change"),
    (
        "ValidateContainerAdjustment",
        "plugin_validate_container_adjustment",
    ),
];

/// Bit 31 of a result's length: the bytes are an error text.
const ERROR_BIT: u32 = 1 << 31;

/// The least memory kept for requests between calls (`Exports::call`),
/// and the most: a larger request gets memory of its own, freed after its
/// call. go/adaptation's lent engine keeps the same.
const REQUEST_MEMORY_MIN: u32 = 16 << 10;
const REQUEST_MEMORY_MAX: u32 = 1 << 20;

/// The most a module's standard output or error line is kept before it is
/// logged anyway, and the most one write may hand over.
const LINE_LIMIT: usize = 4096;
const WRITE_LIMIT: usize = 1 << 20;

/// What a store holds for its one instance.
pub(crate) struct State {
    pub(crate) name: String,
    pub(crate) limits: Cap,
    /// When the call in progress must end; checked whenever the engine's
    /// epoch moves (see `deadline`).
    pub(crate) deadline: Option<Instant>,
    /// Unfinished lines of standard output and error.
    lines: [Vec<u8>; 2],
}

impl State {
    pub(crate) fn new(name: String, memory: usize) -> State {
        State {
            name,
            limits: Cap { memory },
            deadline: None,
            lines: [Vec::new(), Vec::new()],
        }
    }

    /// A write to standard output (1) or error (2): logged at debug level,
    /// a line at a time (upstream discards it; a Go plugin's panic message
    /// is worth having).
    pub(crate) fn output(&mut self, fd: i32, bytes: &[u8]) {
        let stream = if fd == 1 { "stdout" } else { "stderr" };
        let buf = &mut self.lines[usize::from(fd != 1)];
        for &b in bytes {
            if b == b'\n' || buf.len() >= LINE_LIMIT {
                debug!(
                    "WASM plugin {} {stream}: {}",
                    self.name,
                    String::from_utf8_lossy(buf)
                );
                buf.clear();
                if b == b'\n' {
                    continue;
                }
            }
            buf.push(b);
        }
    }
}

/// The mark of a call stopped at its deadline.
#[derive(Debug, thiserror::Error)]
#[error("interrupted at the call's deadline")]
pub(crate) struct Deadline;

/// The mark of a module that ended itself with WASI's `proc_exit`.
#[derive(Debug, thiserror::Error)]
#[error("exit with code {0}")]
pub(crate) struct Exit(pub(crate) i32);

/// The mark of a memory grown past its cap.
#[derive(Debug, thiserror::Error)]
#[error("memory limit reached")]
pub(crate) struct MemoryLimit;

/// What one instance may hold: one memory of at most `memory` bytes, one
/// table of any size (upstream sets no bound on tables either), and no
/// further instance.
pub(crate) struct Cap {
    memory: usize,
}

impl ResourceLimiter for Cap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // An error, not a refusal: a Go module treats a failed grow as
        // out of memory and spins on; trapping ends the module at once.
        if desired > self.memory {
            return Err(MemoryLimit.into());
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(true)
    }

    fn instances(&self) -> usize {
        1
    }

    fn memories(&self) -> usize {
        1
    }
}

pub(crate) fn memory(caller: &mut Caller<'_, State>) -> Option<Memory> {
    match caller.get_export("memory") {
        Some(Extern::Memory(m)) => Some(m),
        _ => None,
    }
}

/// The bytes an iovec array (`n` pairs of offset and length at `iovs`)
/// points at: `EFAULT` (21) if any lies outside memory.
pub(crate) fn gather(caller: &mut Caller<'_, State>, iovs: i32, n: i32) -> Result<Vec<u8>, i32> {
    const EFAULT: i32 = 21;
    let mem = memory(caller).ok_or(EFAULT)?;
    let data = mem.data(&*caller);
    let word = |at: usize| -> Result<usize, i32> {
        let b = data.get(at..at + 4).ok_or(EFAULT)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let mut out = Vec::new();
    for i in 0..n.max(0) as usize {
        let at = iovs as u32 as usize + 8 * i;
        let (ptr, len) = (word(at)?, word(at + 4)?);
        let bytes = data
            .get(ptr..ptr.checked_add(len).ok_or(EFAULT)?)
            .ok_or(EFAULT)?;
        let room = WRITE_LIMIT.saturating_sub(out.len());
        out.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
    Ok(out)
}

/// Adds the host's functions (`env.log`).
pub(crate) fn add_host_functions(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "log",
        |mut c: Caller<'_, State>, ptr: i32, len: i32| -> wasmtime::Result<i64> {
            let mem = memory(&mut c).ok_or_else(|| wasmtime::Error::msg("no memory exported"))?;
            let (ptr, len) = (ptr as u32 as usize, len as u32 as usize);
            let bytes = mem
                .data(&c)
                .get(ptr..ptr.saturating_add(len))
                .ok_or_else(|| {
                    wasmtime::Error::msg(format!("Memory.Read({ptr}, {len}) out of range"))
                })?;
            let req = LogRequest::parse_from_bytes(bytes)
                .map_err(|e| wasmtime::Error::msg(format!("log request: {e}")))?;
            // As upstream logs it: the message alone, at its level.
            match req.level.enum_value_or_default() {
                Level::LEVEL_INFO => info!("{}", req.msg),
                Level::LEVEL_WARN => warn!("{}", req.msg),
                Level::LEVEL_ERROR => error!("{}", req.msg),
                _ => debug!("{}", req.msg),
            }
            // The reply, an empty message, encodes to nothing: no pointer.
            Ok(0)
        },
    )?;
    Ok(())
}

/// The exports of a module that implements the interface.
pub(crate) struct Exports {
    memory: Memory,
    malloc: TypedFunc<u32, u32>,
    free: TypedFunc<u32, ()>,
    methods: Vec<TypedFunc<(u32, u32), u64>>,
    /// Memory the module allocated for requests, kept from one call to
    /// the next: its address and size (see `call`).
    requests: Option<(u32, u32)>,
}

/// Why a module's function could not give a reply.
pub(crate) enum Failure {
    /// The module ran, and its reply is an error text.
    Refused(String),
    /// The module trapped, exited, or broke the interface.
    Broken(wasmtime::Error),
}

impl From<wasmtime::Error> for Failure {
    fn from(e: wasmtime::Error) -> Self {
        Failure::Broken(e)
    }
}

impl Exports {
    /// Finds the exports, with upstream's texts for what is missing, and
    /// checks the module's API version.
    pub(crate) fn find(store: &mut Store<State>, instance: &Instance) -> Result<Exports, String> {
        let version = instance
            .get_func(&mut *store, "plugin_api_version")
            .ok_or("plugin_api_version is not exported")?
            .typed::<(), u64>(&*store)
            .map_err(|_| "invalid plugin_api_version signature")?;
        let version = version
            .call(&mut *store, ())
            .map_err(|e| format!("plugin_api_version: {}", crate::describe(&e)))?;
        if version != API_VERSION {
            return Err(format!(
                "API version mismatch, host: {API_VERSION}, plugin: {version}"
            ));
        }
        let mut methods = Vec::with_capacity(METHODS.len());
        for (_, export) in &METHODS {
            let f = instance
                .get_func(&mut *store, export)
                .ok_or_else(|| format!("{export} is not exported"))?;
            let f = f
                .typed::<(u32, u32), u64>(&*store)
                .map_err(|e| format!("{export}: {e}"))?;
            methods.push(f);
        }
        let typed = |store: &mut Store<State>, name: &str| {
            instance
                .get_func(&mut *store, name)
                .ok_or_else(|| format!("{name} is not exported"))
        };
        let malloc = typed(store, "malloc")?
            .typed::<u32, u32>(&*store)
            .map_err(|e| format!("malloc: {e}"))?;
        let free = typed(store, "free")?
            .typed::<u32, ()>(&*store)
            .map_err(|e| format!("free: {e}"))?;
        let memory = instance
            .get_memory(&mut *store, "memory")
            .ok_or("memory is not exported")?;
        Ok(Exports {
            memory,
            malloc,
            free,
            methods,
            requests: None,
        })
    }

    /// The index of `method` among the callable ones.
    pub(crate) fn method(name: &str) -> Option<usize> {
        METHODS.iter().position(|(m, _)| *m == name)
    }

    /// Calls method `index` with `request` as upstream's host code does:
    /// the request copied into memory the module allocated, the reply
    /// copied out and then freed. Unlike upstream's host, the request's
    /// memory is kept for the next request that fits (`request_memory`)
    /// rather than freed after each call: the module's malloc and free are
    /// work in the module (a Go module allocates, and later collects, a
    /// buffer the request's size) for nothing it can tell apart, as the
    /// host owns that memory until it frees it.
    pub(crate) fn call(
        &mut self,
        store: &mut Store<State>,
        index: usize,
        request: &[u8],
    ) -> Result<Vec<u8>, Failure> {
        let len = u32::try_from(request.len())
            .map_err(|_| wasmtime::Error::msg("request larger than a module's memory"))?;
        let (mut ptr, mut kept) = (0, false);
        if len != 0 {
            (ptr, kept) = self.request_memory(store, len)?;
            self.memory
                .write(&mut *store, ptr as usize, request)
                .map_err(|_| {
                    wasmtime::Error::msg(format!(
                        "Memory.Write({ptr}, {len}) out of range of memory size {}",
                        self.memory.data_size(&*store)
                    ))
                })?;
        }
        let result = self.methods[index].call(&mut *store, (ptr, len));
        if ptr != 0 && !kept && result.is_ok() {
            self.free.call(&mut *store, ptr)?;
        }
        let result = result?;
        let (at, mut size) = ((result >> 32) as u32, result as u32);
        let refused = size & ERROR_BIT != 0;
        size &= !ERROR_BIT;
        let mut reply = vec![0; size as usize];
        self.memory
            .read(&*store, at as usize, &mut reply)
            .map_err(|_| {
                wasmtime::Error::msg(format!(
                    "Memory.Read({at}, {size}) out of range of memory size {}",
                    self.memory.data_size(&*store)
                ))
            })?;
        if at != 0 {
            self.free.call(&mut *store, at)?;
        }
        if refused {
            return Err(Failure::Refused(
                String::from_utf8_lossy(&reply).into_owned(),
            ));
        }
        Ok(reply)
    }

    /// Memory the module allocated for a request of `len` bytes, and
    /// whether it is kept for later requests (else the caller frees it
    /// after the call). A request larger than the memory kept replaces it
    /// with more: the next power of two, at least [`REQUEST_MEMORY_MIN`].
    /// One larger than [`REQUEST_MEMORY_MAX`] gets memory of its own.
    fn request_memory(
        &mut self,
        store: &mut Store<State>,
        len: u32,
    ) -> Result<(u32, bool), Failure> {
        if let Some((at, size)) = self.requests {
            if len <= size {
                return Ok((at, true));
            }
        }
        if len > REQUEST_MEMORY_MAX {
            return Ok((self.malloc.call(&mut *store, len)?, false));
        }
        let want = len.next_power_of_two().max(REQUEST_MEMORY_MIN);
        if let Some((at, _)) = self.requests.take() {
            self.free.call(&mut *store, at)?;
        }
        match self.malloc.call(&mut *store, want)? {
            // A module's malloc may answer 0 when it has no memory: this
            // request then gets what the module can give it, as upstream's
            // host would ask for.
            0 => Ok((self.malloc.call(&mut *store, len)?, false)),
            at => {
                self.requests = Some((at, want));
                Ok((at, true))
            }
        }
    }
}
