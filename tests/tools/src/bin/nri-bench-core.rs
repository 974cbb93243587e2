//! The runtime-layout experiment of `make bench` (go/bench): the Rust core
//! (`nri_runtime`) driving CreateContainer through external plugins,
//! with its plugin I/O on one of several tokio layouts, so the choice of
//! layout rests on a measurement. go/bench starts this process, starts the
//! plugins against its socket and reads one JSON line of results.
//!
//! Usage: nri-bench-core -layout L -socket PATH -plugins N -request FILE -ops N -warmup N [-validator 1] [-audit FILE] [-thrash KIB]
//!
//! `-validator 1` enables the default validator as go/bench's
//! `benchValidator` does (on, refusing OCI hooks, `bench0` required);
//! `-audit FILE` keeps the audit log in FILE.
//!
//! Layouts (the caller is this process's main thread, which blocks the way
//! the C ABI's callers do):
//! * `dedicated`: the default: a current-thread runtime on a thread of its
//!   own; the caller blocks in `futures::executor::block_on`;
//! * `multi2`, `multi1`: a multi-thread runtime with 2 (1) workers, given
//!   through `Options::runtime`; the caller blocks the same way;
//! * `wire`: `dedicated`, but each event goes in and out encoded
//!   (`create_container_wire`), as the C ABI relays it, with the request
//!   completed as go/adaptation completes it before encoding;
//! * `lent`: `wire`, with the one plugin a WASM module run by an engine
//!   lent to the core (`Options::wasm_engine`), as go/adaptation lends
//!   wazero; here a stand-in engine answers every call with what the
//!   bench's WASM plugin answers, so the event is the core's part alone.
//!   The caller blocks in `block_on_event`, as the C ABI's callers do. With
//!   `-thrash KIB` the stand-in first walks that much memory, to leave the
//!   caches as cold as a real module's run leaves them;
//! * `caller`: a current-thread runtime driven by the calling thread itself
//!   (`Runtime::block_on` per event): no thread hop at all, but nothing
//!   serves plugins between events, so not a layout a runtime can use;
//!   measured as the lower bound.
//!
//! Protocol on stdout: `listening` once plugins may connect, `ready` once
//! all are registered, then one JSON line of results.

use std::io::Write;
use std::time::{Duration, Instant};

use nri_runtime::{Adaptation, BoxError, Options, SyncCb};
use nri_stub::api::{ContainerUpdate, CreateContainerRequest};
use protobuf::Message;

fn cpu_time() -> Duration {
    // SAFETY: rusage is plain integers, for which all zeroes is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

struct Args {
    layout: String,
    socket: String,
    plugins: usize,
    request: String,
    ops: usize,
    warmup: usize,
    validator: bool,
    /// Where the audit log goes, if it is kept.
    audit: Option<String>,
    /// KiB of memory the `lent` layout's module walks per call.
    thrash: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        layout: "dedicated".into(),
        socket: String::new(),
        plugins: 1,
        request: String::new(),
        ops: 1000,
        warmup: 100,
        validator: false,
        audit: None,
        thrash: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag}: missing value"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.trim_start_matches('-') {
            "layout" => a.layout = value,
            "socket" => a.socket = value,
            "plugins" => a.plugins = num(&value)?,
            "request" => a.request = value,
            "ops" => a.ops = num(&value)?,
            "warmup" => a.warmup = num(&value)?,
            "validator" => a.validator = num(&value)? != 0,
            "audit" => a.audit = Some(value),
            "thrash" => a.thrash = num(&value)?,
            f => return Err(format!("unknown flag -{f}")),
        }
    }
    if a.socket.is_empty() || a.request.is_empty() {
        return Err("-socket and -request are required".into());
    }
    Ok(a)
}

/// Runs futures for the caller: how the caller waits for an event.
enum Driver {
    /// Block the calling thread; the core's runtime runs elsewhere.
    Block,
    /// Block the calling thread as the C ABI's event calls do, so that
    /// work of the event that would block a thread runs on it.
    Waiting,
    /// Drive this current-thread runtime from the calling thread.
    Caller(tokio::runtime::Runtime),
}

impl Driver {
    fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        match self {
            Driver::Block => futures::executor::block_on(f),
            Driver::Waiting => nri_runtime::block_on_event(f),
            Driver::Caller(rt) => rt.block_on(f),
        }
    }

    /// Waits a little; a caller-driven runtime serves plugins meanwhile.
    fn pause(&self, d: Duration) {
        match self {
            Driver::Block | Driver::Waiting => std::thread::sleep(d),
            Driver::Caller(rt) => rt.block_on(async { tokio::time::sleep(d).await }),
        }
    }
}

/// The core's warnings and errors, on stderr: why a plugin did not start.
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            eprintln!("nri-bench-core: {}: {}", r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

fn main() -> Result<(), BoxError> {
    if log::set_logger(&StderrLog).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    let args = parse_args()?;
    let mut req = CreateContainerRequest::parse_from_bytes(&std::fs::read(&args.request)?)?;
    if args.layout == "wire" || args.layout == "lent" {
        // What go/adaptation adds before it encodes a request.
        let ctr = req.container.mut_or_insert_default();
        ctr.hooks.mut_or_insert_default();
        let res = ctr
            .linux
            .mut_or_insert_default()
            .resources
            .mut_or_insert_default();
        res.memory.mut_or_insert_default();
        res.cpu.mut_or_insert_default();
    }
    let wire = req.write_to_bytes()?;

    // Kept alive until the end: the runtime the layout names, if not the default.
    let mut _owned: Option<tokio::runtime::Runtime> = None;
    let mut opts = Options::default()
        .socket_path(&args.socket)?
        .plugin_path("/nonexistent/nri-bench/plugins")?
        .plugin_config_path("/nonexistent/nri-bench/conf.d")?;
    if args.validator {
        opts = opts.default_validator(nri_runtime::validator::DefaultValidatorConfig {
            enable: true,
            reject_oci_hook_adjustment: true,
            required_plugins: vec!["bench0".into()],
            ..Default::default()
        });
    }
    if let Some(file) = &args.audit {
        opts = opts.audit_file(file)?;
    }
    // The lent layout's module, in a plugin directory of its own.
    let _plugin_dir = match args.layout.as_str() {
        "lent" => {
            let dir = std::env::temp_dir().join(format!("nri-bench-lent-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            // Only the magic number and version: the stand-in reads no further.
            // Executable, as the plugin directory's plugins must be.
            let module = dir.join("10-lent");
            std::fs::write(&module, b"\0asm\x01\0\0\0")?;
            std::fs::set_permissions(&module, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
            opts = opts
                .plugin_path(&dir)?
                .wasm_cache_dir(None)
                .wasm_engine(std::sync::Arc::new(lent::Engine {
                    thrash: args.thrash,
                }));
            Some(RemoveOnDrop(dir))
        }
        _ => None,
    };
    let driver = match args.layout.as_str() {
        "dedicated" | "wire" => Driver::Block,
        "lent" => Driver::Waiting,
        "multi2" | "multi1" => {
            let workers = if args.layout == "multi2" { 2 } else { 1 };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()?;
            opts = opts.runtime(rt.handle().clone());
            _owned = Some(rt);
            Driver::Block
        }
        "caller" => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            opts = opts.runtime(rt.handle().clone());
            Driver::Caller(rt)
        }
        l => return Err(format!("unknown layout {l:?}").into()),
    };

    let nri = Adaptation::new(
        "nri-bench-core",
        "0.1.0",
        |cb: SyncCb| async move {
            cb.call(vec![], vec![]).await?;
            Ok::<_, BoxError>(())
        },
        |_updates: Vec<ContainerUpdate>| async { Ok::<_, BoxError>(Vec::new()) },
        opts,
    )?;
    driver.run(nri.start())?;
    println!("listening");
    std::io::stdout().flush()?;

    let deadline = Instant::now() + Duration::from_secs(30);
    // The default validator is one of the plugins.
    let wanted = match args.layout.as_str() {
        "lent" => 1,
        _ => args.plugins,
    } + usize::from(args.validator);
    while nri.plugins().len() < wanted {
        if Instant::now() > deadline {
            return Err(format!(
                "{} of {} plugins registered",
                nri.plugins().len(),
                args.plugins
            )
            .into());
        }
        driver.pause(Duration::from_millis(5));
    }
    println!("ready");
    std::io::stdout().flush()?;

    // One event's input: the request, decoded or encoded as the layout
    // takes it; copied before the measured loop, outside the measurement.
    let input = || match args.layout.as_str() {
        "wire" | "lent" => Err(wire.clone()),
        _ => Ok(req.clone()),
    };
    let event = |input: Result<CreateContainerRequest, Vec<u8>>| -> Result<(), BoxError> {
        match input {
            Ok(r) => drop(std::hint::black_box(driver.run(nri.create_container(r))?)),
            Err(bytes) => drop(std::hint::black_box(
                driver.run(nri.create_container_wire(bytes))?,
            )),
        }
        Ok(())
    };
    for _ in 0..args.warmup {
        event(input())?;
    }
    let inputs: Vec<_> = (0..args.ops).map(|_| input()).collect();
    let lent = args.layout == "lent";
    let mut lat = Vec::with_capacity(args.ops);
    // The lent layout's core part: before the module's call, and after.
    let (mut before, mut after) = (Vec::new(), Vec::new());
    let mut module = Duration::ZERO;
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    for i in inputs {
        // A lent module's caller has just encoded the request: its bytes
        // are in the caches, whatever the module's run left there.
        if let (Err(bytes), true) = (&i, lent) {
            std::hint::black_box(bytes.iter().fold(0u8, |a, b| a ^ b));
        }
        let started = Instant::now();
        event(i)?;
        let ended = Instant::now();
        lat.push((ended - started).as_secs_f64() * 1e6);
        if let Some((called, returned)) = lent.then(lent::last_call).flatten() {
            before.push((called - started).as_secs_f64() * 1e6);
            after.push((ended - returned).as_secs_f64() * 1e6);
            module += returned - called;
        }
    }
    let wall = t0.elapsed();
    let cpu = cpu_time() - cpu0;
    driver.run(nri.stop());
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    before.sort_by(|a, b| a.partial_cmp(b).unwrap());
    after.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{{\"layout\":\"{}\",\"ops\":{},\"p50_us\":{:.2},\"p99_us\":{:.2},\"mean_us\":{:.2},\"cpu_us_per_op\":{:.2},\"module_us_per_op\":{:.2},\"core_before_p50_us\":{:.2},\"core_after_p50_us\":{:.2}}}",
        args.layout,
        args.ops,
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        wall.as_secs_f64() * 1e6 / args.ops.max(1) as f64,
        cpu.as_secs_f64() * 1e6 / args.ops.max(1) as f64,
        module.as_secs_f64() * 1e6 / args.ops.max(1) as f64,
        percentile(&before, 0.5),
        percentile(&after, 0.5),
    );
    std::io::stdout().flush()?;
    Ok(())
}

struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `lent` layout's engine.
mod lent {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use nri_runtime::{WasmEngine, WasmFailure, WasmModule};
    use nri_stub::api::{
        ConfigureResponse, ContainerAdjustment, CreateContainerResponse, Event, Hook, Hooks, Mount,
    };
    use protobuf::Message;

    static LAST_CALL: Mutex<Option<(Instant, Instant)>> = Mutex::new(None);

    /// When the last CreateContainer call into the module began and ended.
    pub fn last_call() -> Option<(Instant, Instant)> {
        LAST_CALL.lock().unwrap().take()
    }

    pub struct Engine {
        pub thrash: usize,
    }

    impl WasmEngine for Engine {
        fn load(
            &self,
            _name: &str,
            _wasm: &[u8],
            _memory_limit: usize,
            _init_timeout: Duration,
        ) -> Result<Box<dyn WasmModule>, String> {
            Ok(Box::new(Module {
                reply: reply().write_to_bytes().map_err(|e| e.to_string())?,
                memory: Mutex::new(vec![1u8; self.thrash << 10]),
            }))
        }
    }

    /// What go/tests/wasm/plugin answers CreateContainer with in the bench.
    fn reply() -> CreateContainerResponse {
        let mut adj = ContainerAdjustment::default();
        adj.add_annotation("wasm-test/bench", "events=1");
        adj.add_env("WASM_TEST_BENCH", "app");
        adj.add_mount(Mount {
            destination: "/wasm-test/bench".into(),
            source: "/tmp/wasm-test".into(),
            type_: "bind".into(),
            options: vec!["bind".into(), "ro".into()],
            ..Default::default()
        });
        adj.add_hooks(Hooks {
            prestart: vec![Hook {
                path: "/bin/true".into(),
                args: vec!["true".into(), "bench".into()],
                ..Default::default()
            }],
            ..Default::default()
        });
        CreateContainerResponse {
            adjust: protobuf::MessageField::some(adj),
            ..Default::default()
        }
    }

    struct Module {
        reply: Vec<u8>,
        memory: Mutex<Vec<u8>>,
    }

    impl WasmModule for Module {
        fn call(
            &self,
            method: &str,
            request: &[u8],
            _timeout: Duration,
        ) -> Result<Vec<u8>, WasmFailure> {
            match method {
                "CreateContainer" => {}
                // Subscribed to CreateContainer alone, as a plugin that
                // does not validate (one subscribed to everything would).
                "Configure" => {
                    let rsp = ConfigureResponse {
                        events: Event::CREATE_CONTAINER.mask_bit(),
                        ..Default::default()
                    };
                    return rsp
                        .write_to_bytes()
                        .map_err(|e| WasmFailure::Dead(e.to_string()));
                }
                _ => return Ok(Vec::new()),
            }
            // Walk the memory a cache line at a time, as a module's run
            // would, and read the request as a module copies it in; or,
            // with no memory to walk, answer at once, so that callgrind
            // counts the core's instructions alone.
            let started = Instant::now();
            let mut memory = self.memory.lock().unwrap();
            if !memory.is_empty() {
                for b in memory.iter_mut().step_by(64) {
                    *b = b.wrapping_add(1);
                }
                std::hint::black_box(&memory);
                std::hint::black_box(request.iter().fold(0u8, |a, b| a ^ b));
            }
            *LAST_CALL.lock().unwrap() = Some((started, Instant::now()));
            Ok(self.reply.clone())
        }
    }
}
