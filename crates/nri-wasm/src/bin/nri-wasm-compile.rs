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

const USAGE: &str =
    "usage: nri-wasm-compile [--cache-dir DIR] [--timeout SECONDS] [--verbose] [--] PATH...";

const HELP: &str = "\
usage: nri-wasm-compile [--cache-dir DIR] [--timeout SECONDS] [--verbose] [--] PATH...

Compiles WASM NRI plugins ahead of the runtime into the compiled-module
cache that an nri-rs runtime built with compiled WASM reads, so that the
runtime loads them compiled rather than running them on the engine its
host lends (go/adaptation: wazero) or compiling them when it starts.
Each PATH is a module, or a directory (such as the runtime's plugin
directory, /opt/nri/plugins by default) that stands for the WASM modules
in it, told apart from its executables and other files, which are
skipped. Each module is also started and its plugin interface checked,
as the runtime does when it loads one.

Run it as the runtime's user (the cache is trusted only when that user
owns it and nobody else may write it), with the same build of nri-rs as
the runtime: the files hold machine code for this engine's version and
configuration, and a runtime of another build ignores them.

Options:
  --cache-dir DIR      the runtime's cache directory (default
                       /var/cache/nri/wasm; the runtime's WithWasmCacheDir,
                       nri_options_set_wasm_cache_dir). Created mode 0700
                       if missing; refused if another user owns it or
                       others may write to it.
  --timeout SECONDS    how long a module's start function may run, above 0,
                       fractions allowed (default 5, the runtime's
                       registration timeout)
  -v, --verbose        the engine's and the modules' log lines on stderr
                       (without it, only warnings)
  -h, --help           this text, on stdout
  --                   the arguments after it are paths, even if they
                       start with '-'

What it writes: into DIR, one file per module, named by the SHA-256 of
the module's bytes and of the engine's build, ending in .cwasm (written
aside, then renamed whole). A module already there is left as it is. Files
no runtime has loaded for 30 days are removed when a new one is stored.
On stdout, one line per module: \"PATH: compiled in TIME: FILE\" or
\"PATH: already compiled: FILE\", and \"DIR: no WASM modules\" for a
directory without any. Errors go to stderr.

Exit status:
  0  every module given is in the cache (a directory without modules too)
  1  a module could not be read, compiled, started or checked, or a
     directory could not be read; the others are still compiled
  2  usage error (unknown flag, missing value, no PATH)

Example (the runtime's defaults, as root for a runtime running as root):
  nri-wasm-compile --cache-dir /var/cache/nri/wasm /opt/nri/plugins";

struct Args {
    cache_dir: PathBuf,
    timeout: Duration,
    verbose: bool,
    paths: Vec<PathBuf>,
}

/// Why the command line does not give a run: `--help`, or an error.
#[derive(Debug, PartialEq)]
enum Usage {
    Help,
    Error(String),
}

impl From<&str> for Usage {
    fn from(why: &str) -> Usage {
        Usage::Error(why.to_string())
    }
}

fn parse(mut argv: impl Iterator<Item = OsString>) -> Result<Args, Usage> {
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
            Some("--help" | "-h") => return Err(Usage::Help),
            Some("--") => args.paths.extend(argv.by_ref().map(PathBuf::from)),
            Some(flag) if flag.starts_with('-') => {
                return Err(Usage::Error(format!("unknown flag {flag}")))
            }
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
        Err(Usage::Help) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(Usage::Error(why)) => {
            eprintln!("nri-wasm-compile: {why}");
            eprintln!("{USAGE}");
            eprintln!("(nri-wasm-compile --help says more)");
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, Usage> {
        parse(list.iter().map(OsString::from))
    }

    #[test]
    fn help_is_asked_for_with_either_flag() {
        assert_eq!(args(&["--help"]).err(), Some(Usage::Help));
        assert_eq!(args(&["-h", "x"]).err(), Some(Usage::Help));
        assert!(matches!(args(&[]), Err(Usage::Error(_))));
    }

    #[test]
    fn help_names_every_flag_the_parser_takes_exit_codes_and_an_example() {
        let source = include_str!("nri-wasm-compile.rs");
        let parser =
            &source[source.find("fn parse(").unwrap()..source.find("fn modules(").unwrap()];
        let mut flags = 0;
        for quoted in parser.split('"').skip(1).step_by(2) {
            if quoted.starts_with('-') && !quoted.contains(' ') {
                assert!(HELP.contains(quoted), "--help does not name {quoted}");
                flags += 1;
            }
        }
        assert!(flags >= 7, "found {flags} flags in parse");
        for want in [
            "Exit status:",
            "  0  ",
            "  1  ",
            "  2  ",
            "Example",
            ".cwasm",
        ] {
            assert!(HELP.contains(want), "--help has no {want:?}");
        }
        assert!(HELP.starts_with(USAGE));
        assert!(HELP.contains(DEFAULT_CACHE_DIR));
        assert_eq!(
            DEFAULT_REGISTRATION_TIMEOUT,
            Duration::from_secs(5),
            "--help gives 5 s"
        );
    }
}
