//! The runtime-layout experiment of `make bench` (go/bench): the Rust core
//! (`nri_runtime`) driving CreateContainer through external plugins,
//! with its plugin I/O on one of several tokio layouts, so the choice of
//! layout rests on a measurement. go/bench starts this process, starts the
//! plugins against its socket and reads one JSON line of results.
//!
//! Usage: nri-bench-core -layout L -socket PATH -plugins N -request FILE -ops N -warmup N [-validator 1] [-audit FILE]
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
    /// Drive this current-thread runtime from the calling thread.
    Caller(tokio::runtime::Runtime),
}

impl Driver {
    fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        match self {
            Driver::Block => futures::executor::block_on(f),
            Driver::Caller(rt) => rt.block_on(f),
        }
    }

    /// Waits a little; a caller-driven runtime serves plugins meanwhile.
    fn pause(&self, d: Duration) {
        match self {
            Driver::Block => std::thread::sleep(d),
            Driver::Caller(rt) => rt.block_on(async { tokio::time::sleep(d).await }),
        }
    }
}

fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let mut req = CreateContainerRequest::parse_from_bytes(&std::fs::read(&args.request)?)?;
    if args.layout == "wire" {
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
        .socket_path(&args.socket)
        .plugin_path("/nonexistent/nri-bench/plugins")
        .plugin_config_path("/nonexistent/nri-bench/conf.d");
    if args.validator {
        opts = opts.default_validator(nri_runtime::validator::DefaultValidatorConfig {
            enable: true,
            reject_oci_hook_adjustment: true,
            required_plugins: vec!["bench0".into()],
            ..Default::default()
        });
    }
    if let Some(file) = &args.audit {
        opts = opts.audit_file(file);
    }
    let driver = match args.layout.as_str() {
        "dedicated" | "wire" => Driver::Block,
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
    let wanted = args.plugins + usize::from(args.validator);
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
        "wire" => Err(wire.clone()),
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
    let mut lat = Vec::with_capacity(args.ops);
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    for i in inputs {
        let started = Instant::now();
        event(i)?;
        lat.push(started.elapsed().as_secs_f64() * 1e6);
    }
    let wall = t0.elapsed();
    let cpu = cpu_time() - cpu0;
    driver.run(nri.stop());
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{{\"layout\":\"{}\",\"ops\":{},\"p50_us\":{:.2},\"p99_us\":{:.2},\"mean_us\":{:.2},\"cpu_us_per_op\":{:.2}}}",
        args.layout,
        args.ops,
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        wall.as_secs_f64() * 1e6 / args.ops.max(1) as f64,
        cpu.as_secs_f64() * 1e6 / args.ops.max(1) as f64,
    );
    std::io::stdout().flush()?;
    Ok(())
}
