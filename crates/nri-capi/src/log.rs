//! Where the library's log records go: a process-wide callback, since the
//! Rust `log` facade (like upstream's `pkg/log`) is process-wide.

use std::ffi::{c_char, c_void};
use std::sync::RwLock;

use log::{Level, LevelFilter, Log, Metadata, Record};

use super::error::{boundary, nri_error, to_cstring};
use super::status::Failure;

/// Severity of a log record.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum nri_log_level {
    Off = 0,
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

/// Receives one log record: `target` is the Rust module that logged it,
/// `message` the text. Both are valid only during the call. Called from any
/// thread, concurrently; must not call the library.
pub type nri_log_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: nri_log_level,
        target: *const c_char,
        message: *const c_char,
    ),
>;

struct Sink {
    f: unsafe extern "C" fn(*mut c_void, nri_log_level, *const c_char, *const c_char),
    user_data: *mut c_void,
}

// SAFETY: the header documents that the log callback and its user data may
// be used from any thread, concurrently.
unsafe impl Send for Sink {}
// SAFETY: as for Send; the sink is only read, under SINK's lock.
unsafe impl Sync for Sink {}

static SINK: RwLock<Option<Sink>> = RwLock::new(None);

/// Most bytes of one log message handed to the host.
const MAX_MESSAGE: usize = 4096;

struct FfiLogger;

/// Crates whose debug output is not the host's business: the WASM engine
/// and its compiler describe the module they compile, function by
/// function, thousands of lines for one plugin. Their warnings and errors
/// still pass.
const QUIET_TARGETS: [&str; 4] = ["wasmtime", "cranelift", "regalloc2", "wasmparser"];

impl Log for FfiLogger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
            && (m.level() <= Level::Warn
                || !QUIET_TARGETS.iter().any(|t| m.target().starts_with(t)))
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let sink = SINK.read().unwrap_or_else(|e| e.into_inner());
        let Some(sink) = sink.as_ref() else {
            return;
        };
        let level = match record.level() {
            Level::Error => nri_log_level::Error,
            Level::Warn => nri_log_level::Warn,
            Level::Info => nri_log_level::Info,
            Level::Debug => nri_log_level::Debug,
            Level::Trace => nri_log_level::Trace,
        };
        let target = to_cstring(record.target().to_string());
        // Lines may carry what a plugin sent, in our messages and in
        // ttrpc's: the host gets them escaped and bounded.
        let message = to_cstring(nri_api::quote::log_text(
            &record.args().to_string(),
            MAX_MESSAGE,
        ));
        // SAFETY: nri_set_log_callback's contract: `log` is safe to call from
        // any thread with `user_data` until it is replaced, and the SINK read
        // lock held here keeps it from being replaced meanwhile; the
        // NUL-terminated `target` and `message` live until it returns.
        unsafe { (sink.f)(sink.user_data, level, target.as_ptr(), message.as_ptr()) }
    }

    fn flush(&self) {}
}

static LOGGER: FfiLogger = FfiLogger;

/// Sends the library's log records up to `max_level` to `log` (NULL, or
/// `NRI_LOG_LEVEL_OFF`, turns logging off). Process-wide: replaces the
/// previous callback. Fails with `NRI_STATUS_INVALID_ARGUMENT` if the
/// process has another Rust logger installed.
///
/// # Safety
/// `log` is NULL or a function safe to call from any thread with
/// `user_data`, until it is replaced; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_set_log_callback(
    log: nri_log_fn,
    user_data: *mut c_void,
    max_level: u32,
    err: *mut *mut nri_error,
) -> super::status::nri_status {
    boundary(err, || {
        let filter = match max_level {
            0 => LevelFilter::Off,
            1 => LevelFilter::Error,
            2 => LevelFilter::Warn,
            3 => LevelFilter::Info,
            4 => LevelFilter::Debug,
            5 => LevelFilter::Trace,
            n => return Err(Failure::invalid(format!("unknown log level {n}"))),
        };
        install()?;
        *SINK.write().unwrap_or_else(|e| e.into_inner()) = log.map(|f| Sink { f, user_data });
        log::set_max_level(if log.is_some() {
            filter
        } else {
            LevelFilter::Off
        });
        Ok(())
    })
}

/// Installs the forwarding logger once per process.
fn install() -> Result<(), Failure> {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ours = *INSTALLED.get_or_init(|| log::set_logger(&LOGGER).is_ok());
    if ours {
        Ok(())
    } else {
        Err(Failure::invalid(
            "another logger is installed in this process; nri-rs logs go there",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wasm_engines_debug_output_is_dropped_its_warnings_are_not() {
        log::set_max_level(log::LevelFilter::Debug);
        let enabled = |target: &str, level: Level| {
            FfiLogger.enabled(&Metadata::builder().target(target).level(level).build())
        };
        assert!(enabled("nri_runtime::plugins::plugin", Level::Debug));
        assert!(enabled("nri_wasm::abi", Level::Debug));
        assert!(!enabled("wasmparser::validator", Level::Debug));
        assert!(!enabled(
            "wasmtime_internal_cranelift::compiler",
            Level::Info
        ));
        assert!(!enabled(
            "cranelift_codegen::machinst::compile",
            Level::Debug
        ));
        assert!(!enabled("regalloc2::ion", Level::Debug));
        assert!(enabled("wasmtime::runtime::module", Level::Warn));
        assert!(!enabled("nri_runtime::plugins::plugin", Level::Trace));
    }
}
