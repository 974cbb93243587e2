//! A WASM engine the caller lends the library (`nri_options_set_wasm_engine`):
//! the core runs on it the WASM plugins that its compiled-module cache does
//! not hold, instead of compiling them at start. go/adaptation lends wazero,
//! the engine upstream runs modules on.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use super::callbacks::{nri_free_fn, nri_reply, UserData};
use super::error::to_cstring;
use super::ptr::arg_ref;
use super::status::Failure;
use nri_runtime::{WasmEngine, WasmFailure, WasmModule};

/// How a call into a lent engine's module ended.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum nri_wasm_status {
    /// The reply's data is the reply's encoding.
    Ok = 0,
    /// The plugin's handler failed the request; the reply's error is its
    /// text.
    Refused = 1,
    /// The module trapped, exited, broke the interface or outgrew its
    /// memory, in this call or before; the reply's error says why. The
    /// plugin is closed.
    Dead = 2,
    /// The module was stopped at the call's deadline. The plugin is closed.
    Timeout = 3,
}

/// Loads a module: `wasm` is the module file's `len` bytes, `name` the
/// plugin's (`NN-name`). The engine instantiates it with a memory of at
/// most `memory_limit` bytes, runs its start function for at most
/// `init_timeout_ns`, and checks the plugin interface. On success it sets
/// `*module` to its handle for the module (not NULL); on failure it sets
/// the reply's error. Runs on a blocking thread.
pub type nri_wasm_load_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        name: *const c_char,
        wasm: *const u8,
        len: usize,
        memory_limit: u64,
        init_timeout_ns: u64,
        module: *mut *mut c_void,
        reply: *mut nri_reply,
    ),
>;

/// Calls `method` (a Plugin service method, e.g. "CreateContainer") of a
/// loaded module with the request's encoding (`len` bytes at `request`);
/// the module must stop within `timeout_ns`. The reply's data or error
/// goes with the status it returns, one of `nri_wasm_status` (any other
/// value counts as `NRI_WASM_STATUS_DEAD`). One call at a time per module,
/// on a blocking thread.
pub type nri_wasm_call_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        module: *mut c_void,
        method: *const c_char,
        request: *const u8,
        len: usize,
        timeout_ns: u64,
        reply: *mut nri_reply,
    ) -> u32,
>;

/// Releases a loaded module, once, when its plugin is dropped.
pub type nri_wasm_release_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, module: *mut c_void)>;

/// A WASM engine, for `nri_options_set_wasm_engine`. All three functions
/// are required.
#[repr(C)]
pub struct nri_wasm_engine {
    pub load: nri_wasm_load_fn,
    pub call: nri_wasm_call_fn,
    pub release: nri_wasm_release_fn,
    pub user_data: *mut c_void,
    /// Optional; called with `user_data` once, when the engine is dropped
    /// (after its last module is released).
    pub free_user_data: nri_free_fn,
}

type LoadFn = unsafe extern "C" fn(
    *mut c_void,
    *const c_char,
    *const u8,
    usize,
    u64,
    u64,
    *mut *mut c_void,
    *mut nri_reply,
);
type CallFn = unsafe extern "C" fn(
    *mut c_void,
    *mut c_void,
    *const c_char,
    *const u8,
    usize,
    u64,
    *mut nri_reply,
) -> u32;
type ReleaseFn = unsafe extern "C" fn(*mut c_void, *mut c_void);

struct Functions {
    load: LoadFn,
    call: CallFn,
    release: ReleaseFn,
    data: Arc<UserData>,
}

pub(crate) struct FfiWasmEngine(Arc<Functions>);

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl FfiWasmEngine {
    /// # Safety
    /// `e` is NULL or points to a valid `nri_wasm_engine` for the call.
    pub(crate) unsafe fn from_c(e: *const nri_wasm_engine) -> Result<FfiWasmEngine, Failure> {
        // SAFETY: this function's contract: `e` is NULL or a valid table for
        // the call.
        let e = unsafe { arg_ref("engine", e) }?;
        // Own the user data first, so that its finalizer runs even on error.
        let data = UserData::new(e.user_data, e.free_user_data);
        let missing = |f: &str| Failure::invalid(format!("WASM engine without {f}"));
        Ok(FfiWasmEngine(Arc::new(Functions {
            load: e.load.ok_or_else(|| missing("load"))?,
            call: e.call.ok_or_else(|| missing("call"))?,
            release: e.release.ok_or_else(|| missing("release"))?,
            data,
        })))
    }
}

impl WasmEngine for FfiWasmEngine {
    fn load(
        &self,
        name: &str,
        wasm: &[u8],
        memory_limit: usize,
        init_timeout: Duration,
    ) -> Result<Box<dyn WasmModule>, String> {
        let f = &self.0;
        let name = to_cstring(name.to_string());
        let mut module: *mut c_void = std::ptr::null_mut();
        let mut reply = nri_reply::default();
        // SAFETY: calls `load` of nri_options_set_wasm_engine's table (a
        // valid nri_wasm_engine, by its contract) as nri_wasm_load_fn
        // documents, with its user data; `name`, `wasm`, `module` and
        // `reply` live until it returns.
        unsafe {
            (f.load)(
                f.data.ptr,
                name.as_ptr(),
                wasm.as_ptr(),
                wasm.len(),
                memory_limit as u64,
                nanos(init_timeout),
                &mut module,
                &mut reply,
            )
        };
        let result = reply.into_result().map_err(|e| e.to_string());
        match (result, module.is_null()) {
            (Ok(_), false) => Ok(Box::new(FfiWasmModule {
                engine: Arc::clone(f),
                module,
            })),
            (Ok(_), true) => Err("the WASM engine loaded no module".to_string()),
            (Err(e), null) => {
                if !null {
                    // A handle with an error: the engine's to take back.
                    // SAFETY: `module` is the handle `load` just set.
                    unsafe { (f.release)(f.data.ptr, module) };
                }
                Err(e)
            }
        }
    }
}

/// A module of a lent engine; released when dropped.
struct FfiWasmModule {
    engine: Arc<Functions>,
    module: *mut c_void,
}

// SAFETY: the header documents that an engine's functions may be called
// from any thread; the library never dereferences `module`.
unsafe impl Send for FfiWasmModule {}
// SAFETY: as for Send; the core makes one call at a time per module.
unsafe impl Sync for FfiWasmModule {}

impl WasmModule for FfiWasmModule {
    fn call(
        &self,
        method: &str,
        request: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, WasmFailure> {
        let f = &self.engine;
        let method = to_cstring(method.to_string());
        let mut reply = nri_reply::default();
        // SAFETY: calls `call` of nri_options_set_wasm_engine's table as
        // nri_wasm_call_fn documents, with its user data and the handle its
        // `load` returned (not yet released); `method`, `request` and
        // `reply` live until it returns.
        let status = unsafe {
            (f.call)(
                f.data.ptr,
                self.module,
                method.as_ptr(),
                request.as_ptr(),
                request.len(),
                nanos(timeout),
                &mut reply,
            )
        };
        let text = |r: Result<Vec<u8>, nri_runtime::BoxError>| match r {
            Err(e) => e.to_string(),
            Ok(_) => "the WASM engine gave no reason".to_string(),
        };
        const OK: u32 = nri_wasm_status::Ok as u32;
        const REFUSED: u32 = nri_wasm_status::Refused as u32;
        const TIMEOUT: u32 = nri_wasm_status::Timeout as u32;
        match status {
            OK => reply
                .into_result()
                .map_err(|e| WasmFailure::Dead(e.to_string())),
            REFUSED => Err(WasmFailure::Refused(text(reply.into_result()))),
            TIMEOUT => Err(WasmFailure::Timeout),
            _ => Err(WasmFailure::Dead(text(reply.into_result()))),
        }
    }
}

impl Drop for FfiWasmModule {
    fn drop(&mut self) {
        // SAFETY: `release` of the table `module` came from, called once,
        // as nri_wasm_release_fn documents.
        unsafe { (self.engine.release)(self.engine.data.ptr, self.module) }
    }
}
