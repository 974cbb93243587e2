//! `nri-wasm-compile`: compiles WASM NRI plugins into the runtime's
//! compiled-module cache ahead of the runtime, so that the runtime loads
//! them compiled instead of running them on the engine its host lends
//! (go/adaptation: wazero) or compiling them at start (see
//! `nri_wasm::precompile`). Run it as the runtime's user, with the same
//! build of nri-rs, when the plugins are installed or upgraded.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use nri_api::{is_wasm_module, DEFAULT_REGISTRATION_TIMEOUT};
use nri_wasm::{precompile, Precompiled, DEFAULT_CACHE_DIR};

const USAGE: &str = "\
usage: nri-wasm-compile [--cache-dir DIR] [--timeout SECONDS] [--verbose] PATH...

Compiles each WASM plugin module into the compiled-module cache that the
nri-rs runtime reads (default /var/cache/nri/wasm; the runtime's
WithWasmCacheDir / nri_options_set_wasm_cache_dir). A PATH that is a
directory, such as the runtime's plugin directory, stands for the WASM
modules in it; its other files are skipped. Each module is also started
and its plugin interface checked, as the runtime does at load.

  --cache-dir DIR      the runtime's cache directory
  --timeout SECONDS    how long a module's start function may run (default 5,
                       the runtime's registration timeout)
  --verbose            the engine's and the modules' log lines on stderr

Exit status: 0 when every module is in the cache, 1 when one is not,
2 for a usage error.";

struct Args {
    cache_dir: PathBuf,
    timeout: Duration,
    verbose: bool,
    paths: Vec<PathBuf>,
}

fn parse(mut argv: impl Iterator<Item = OsString>) -> Result<Args, String> {
    let mut args = Args {
        cache_dir: PathBuf::from(DEFAULT_CACHE_DIR),
        timeout: DEFAULT_REGISTRATION_TIMEOUT,
        verbose: false,
        paths: Vec::new(),
    };
    while let Some(arg) = argv.next() {
        match arg.to_str() {
            Some("--cache-dir") => {
                let dir = argv.next().ok_or("--cache-dir needs a directory")?;
                if dir.is_empty() {
                    return Err("--cache-dir needs a directory".into());
                }
                args.cache_dir = dir.into();
            }
            Some("--timeout") => {
                let secs = argv
                    .next()
                    .and_then(|s| s.to_str()?.parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .ok_or("--timeout needs a number of seconds above 0")?;
                args.timeout = Duration::from_secs_f64(secs);
            }
            Some("--verbose" | "-v") => args.verbose = true,
            Some("--help" | "-h") => return Err(String::new()),
            Some("--") => args.paths.extend(argv.by_ref().map(PathBuf::from)),
            Some(flag) if flag.starts_with('-') => return Err(format!("unknown flag {flag}")),
            _ => args.paths.push(arg.into()),
        }
    }
    if args.paths.is_empty() {
        return Err("no module or directory given".into());
    }
    Ok(args)
}

/// The modules `path` stands for: itself, or a directory's WASM modules
/// in name order, told apart from its executables as the runtime does.
/// An unreadable directory is an error; so is a file named on the
/// command line that is not a module (compiling it says so).
fn modules(path: &Path) -> Result<Vec<PathBuf>, String> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", path.display()))?;
        let file = entry.path();
        if file.is_file() && is_wasm_module(&file) {
            found.push(file);
        }
    }
    found.sort();
    Ok(found)
}

fn compile(module: &Path, args: &Args) -> Result<Precompiled, String> {
    let wasm = fs::read(module).map_err(|e| e.to_string())?;
    let name = module.file_name().map_or_else(
        || module.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    precompile(&name, &wasm, &args.cache_dir, args.timeout).map_err(|e| e.to_string())
}

/// Log lines on stderr: warnings, or everything with `--verbose`.
struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, meta: &log::Metadata<'_>) -> bool {
        meta.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!(
                "{}: {}",
                record.level().as_str().to_lowercase(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

fn main() -> ExitCode {
    let args = match parse(std::env::args_os().skip(1)) {
        Ok(args) => args,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("nri-wasm-compile: {why}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(if args.verbose {
            log::LevelFilter::Debug
        } else {
            log::LevelFilter::Warn
        });
    }
    let mut failed = false;
    for path in &args.paths {
        let found = match modules(path) {
            Ok(found) => found,
            Err(why) => {
                eprintln!("nri-wasm-compile: {why}");
                failed = true;
                continue;
            }
        };
        if found.is_empty() {
            println!("{}: no WASM modules", path.display());
        }
        for module in found {
            match compile(&module, &args) {
                Ok(Precompiled::Cached(at)) => {
                    println!("{}: already compiled: {}", module.display(), at.display())
                }
                Ok(Precompiled::Compiled { path, took }) => println!(
                    "{}: compiled in {:.1?}: {}",
                    module.display(),
                    took,
                    path.display()
                ),
                Err(why) => {
                    eprintln!("nri-wasm-compile: {}: {why}", module.display());
                    failed = true;
                }
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
