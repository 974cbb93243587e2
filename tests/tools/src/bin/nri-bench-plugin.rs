//! The benchmark plugin on nri-rs's Rust stub (`make bench`, go/bench). Its
//! twin on upstream's Go stub is go/bench/goplugin: same flags, same
//! subscriptions, same replies, so the two stubs are compared on equal work.
//!
//! Usage: nri-bench-plugin -socket PATH -name NAME -idx NN -mode typical|noop|large -slot K [-wait-stdin]
//!
//! * subscribes to the 13 pod and container lifecycle events (and
//!   Synchronize, which every plugin gets);
//! * `typical`: CreateContainer returns an adjustment (env, annotation, a
//!   mount, one CPU and one memory resource field) and UpdateContainer a
//!   solicited update of the container (the same two fields); every field
//!   and key depends on `slot` (0–7), so up to 8 plugins never conflict;
//! * `noop`: every handler returns an empty reply;
//! * `large`: `typical`, and CreateContainer adds 6,000 annotations of 480
//!   bytes and 2,000 environment variables of 100 bytes: a reply of about
//!   3.3 MB, near ttrpc's 4 MiB limit;
//! * `-reconnect`: connect again whenever the runtime goes away (the stub's
//!   reconnect, every 10 ms: the soak times the runtime's recovery, not a
//!   pause of the plugin's); exit only when stdin closes;
//! * `-unsolicited N`: after every N-th CreateContainer, send an
//!   unsolicited update of that container (the slot's resource fields);
//! * `-wait-stdin`: print `waiting`, then read one line from stdin before
//!   connecting, so the caller can time registration without process
//!   start-up;
//! * when the runtime closes the connection or stdin reaches EOF (upstream's
//!   runtime leaves external plugins connected when it stops), prints
//!   `updates=M` (unsolicited updates the runtime took) and `events=N`
//!   (requests handled) to stdout and exits.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once, OnceLock};
use std::time::Duration;

use nri_stub::api::{
    Container, ContainerAdjustment, ContainerUpdate, LinuxResources, Mount, PodSandbox,
};
use nri_stub::{HandlerResult, Plugin, Stub, StubHandle};

struct Bench {
    typical: bool,
    large: bool,
    slot: usize,
    events: Arc<AtomicU64>,
    unsolicited: u64,
    updates: Arc<AtomicU64>,
    stub: Arc<OnceLock<StubHandle>>,
}

/// The fields every replies set: one CPU-ish and one memory-ish resource
/// field per slot, distinct across slots (two plugins setting the same
/// field would be a conflict). Must match go/bench/goplugin.
macro_rules! set_slot_resources {
    ($x:expr, $slot:expr) => {{
        let x = $x;
        match $slot % 8 {
            0 => {
                x.set_linux_cpu_shares(1024);
                x.set_linux_memory_limit(1 << 30);
            }
            1 => {
                x.set_linux_cpu_quota(50_000);
                x.set_linux_memory_reservation(512 << 20);
            }
            2 => {
                x.set_linux_cpu_period(100_000);
                x.set_linux_memory_swap(2 << 30);
            }
            3 => {
                x.set_linux_cpu_realtime_runtime(1000);
                x.set_linux_memory_swappiness(10);
            }
            4 => {
                x.set_linux_cpu_realtime_period(10_000);
                x.set_linux_memory_disable_oom_killer();
            }
            5 => {
                x.set_linux_cpuset_cpus("0-1");
                x.set_linux_memory_use_hierarchy();
            }
            6 => {
                x.set_linux_cpuset_mems("0");
                x.add_linux_hugepage_limit("2MB", 64 << 20);
            }
            _ => {
                x.add_linux_unified("cpu.weight", "100");
                x.add_linux_unified("memory.high", "max");
            }
        }
    }};
}

impl Bench {
    fn count(&self) {
        self.events.fetch_add(1, Ordering::Relaxed);
    }

    /// Sends an unsolicited update of `ctr`, after the reply.
    fn update_later(&self, ctr: &Container) {
        let Some(stub) = self.stub.get().cloned() else {
            return;
        };
        let mut update = ContainerUpdate::for_container(ctr.id.clone());
        set_slot_resources!(&mut update, self.slot);
        let updates = Arc::clone(&self.updates);
        tokio::spawn(async move {
            if stub
                .update_containers(vec![update], Vec::new())
                .await
                .is_ok()
            {
                updates.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

#[nri_stub::plugin]
impl Plugin for Bench {
    async fn run_pod_sandbox(&self, _pod: &PodSandbox) -> HandlerResult<()> {
        self.count();
        Ok(())
    }

    async fn update_pod_sandbox(
        &self,
        _pod: &PodSandbox,
        _overhead: Option<&LinuxResources>,
        _resources: Option<&LinuxResources>,
    ) -> HandlerResult<()> {
        self.count();
        Ok(())
    }

    async fn post_update_pod_sandbox(&self, _pod: &PodSandbox) -> HandlerResult<()> {
        self.count();
        Ok(())
    }

    async fn stop_pod_sandbox(&self, _pod: &PodSandbox) -> HandlerResult<()> {
        self.count();
        Ok(())
    }

    async fn remove_pod_sandbox(&self, _pod: &PodSandbox) -> HandlerResult<()> {
        self.count();
        Ok(())
    }

    async fn create_container(
        &self,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        let n = self.events.fetch_add(1, Ordering::Relaxed) + 1;
        if self.unsolicited > 0 && n % self.unsolicited == 0 {
            self.update_later(ctr);
        }
        let mut adjust = ContainerAdjustment::new();
        if self.typical {
            let k = self.slot;
            adjust.add_env(format!("BENCH_PLUGIN_{k}"), format!("plugin-{k}"));
            adjust.add_annotation(format!("bench.nri.io/plugin-{k}"), "adjusted");
            adjust.add_mount(Mount {
                destination: format!("/bench/{k}"),
                type_: "bind".into(),
                source: format!("/var/lib/bench/{k}"),
                options: vec!["rbind".into(), "ro".into()],
                ..Default::default()
            });
            set_slot_resources!(&mut adjust, k);
        }
        if self.large {
            let (k, annotation, env) = (self.slot, "a".repeat(480), "e".repeat(100));
            for i in 0..6000 {
                adjust.add_annotation(format!("bench.nri.io/large-{k}-{i}"), annotation.as_str());
            }
            for i in 0..2000 {
                adjust.add_env(format!("BENCH_LARGE_{k}_{i}"), env.as_str());
            }
        }
        Ok((adjust, Vec::new()))
    }

    async fn post_create_container(
        &self,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> HandlerResult<()> {
        self.count();
        Ok(())
    }

    async fn start_container(&self, _pod: &PodSandbox, _ctr: &Container) -> HandlerResult<()> {
        self.count();
        Ok(())
    }

    async fn post_start_container(&self, _pod: &PodSandbox, _ctr: &Container) -> HandlerResult<()> {
        self.count();
        Ok(())
    }

    async fn update_container(
        &self,
        _pod: &PodSandbox,
        ctr: &Container,
        _resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.count();
        if !self.typical {
            return Ok(Vec::new());
        }
        let mut update = ContainerUpdate::for_container(ctr.id.clone());
        set_slot_resources!(&mut update, self.slot);
        Ok(vec![update])
    }

    async fn post_update_container(
        &self,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> HandlerResult<()> {
        self.count();
        Ok(())
    }

    async fn stop_container(
        &self,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.count();
        Ok(Vec::new())
    }

    async fn remove_container(&self, _pod: &PodSandbox, _ctr: &Container) -> HandlerResult<()> {
        self.count();
        Ok(())
    }

    async fn synchronize(
        &self,
        _pods: Vec<PodSandbox>,
        _containers: Vec<Container>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        Ok(Vec::new())
    }
}

struct Args {
    socket: String,
    name: String,
    idx: String,
    typical: bool,
    large: bool,
    slot: usize,
    wait_stdin: bool,
    reconnect: bool,
    unsolicited: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        socket: nri_stub::api::DEFAULT_SOCKET_PATH.to_string(),
        name: "bench".into(),
        idx: "10".into(),
        typical: true,
        large: false,
        slot: 0,
        wait_stdin: false,
        reconnect: false,
        unsolicited: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let flag = flag.trim_start_matches('-').to_string();
        if flag == "wait-stdin" || flag == "reconnect" {
            a.wait_stdin |= flag == "wait-stdin";
            a.reconnect |= flag == "reconnect";
            continue;
        }
        let value = it.next().ok_or(format!("-{flag}: missing value"))?;
        match flag.as_str() {
            "socket" => a.socket = value,
            "name" => a.name = value,
            "idx" => a.idx = value,
            "mode" => {
                (a.typical, a.large) = match value.as_str() {
                    "typical" => (true, false),
                    "noop" => (false, false),
                    "large" => (true, true),
                    m => return Err(format!("unknown mode {m:?}")),
                }
            }
            "slot" => a.slot = value.parse().map_err(|e| format!("-slot: {e}"))?,
            "unsolicited" => {
                a.unsolicited = value.parse().map_err(|e| format!("-unsolicited: {e}"))?
            }
            f => return Err(format!("unknown flag -{f}")),
        }
    }
    Ok(a)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("nri-bench-plugin: {e}");
            std::process::exit(2);
        }
    };
    if args.wait_stdin {
        println!("waiting");
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    let events = Arc::new(AtomicU64::new(0));
    let updates = Arc::new(AtomicU64::new(0));
    // Report once and exit: on stdin EOF or when the connection closes.
    static REPORT: Once = Once::new();
    let report = {
        let (events, updates) = (Arc::clone(&events), Arc::clone(&updates));
        let who = format!("{}-{}", args.idx, args.name);
        move |code: i32, why: &str| {
            REPORT.call_once(|| {
                eprintln!("nri-bench-plugin {who}: exiting: {why}");
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "updates={}", updates.load(Ordering::Relaxed));
                let _ = writeln!(out, "events={}", events.load(Ordering::Relaxed));
                let _ = out.flush();
            });
            std::process::exit(code);
        }
    };
    // Launched by the runtime, the plugin has its name, index and socket
    // from the environment, no stdin to watch, and ends with its connection.
    let launched = std::env::var_os(nri_stub::api::PLUGIN_NAME_ENV).is_some();
    if !launched {
        let report = report.clone();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut sink);
            report(0, "stdin closed");
        });
    }
    let handle = Arc::new(OnceLock::new());
    let plugin = Bench {
        typical: args.typical,
        large: args.large,
        slot: args.slot,
        events: Arc::clone(&events),
        unsolicited: args.unsolicited,
        updates,
        stub: Arc::clone(&handle),
    };
    let mut builder = Stub::builder().socket_path(&args.socket);
    if !launched {
        builder = builder.name(args.name).idx(args.idx);
    }
    if args.reconnect {
        builder = builder.reconnect(Duration::from_millis(10));
    }
    let stub = builder.build(plugin).unwrap_or_else(|e| {
        eprintln!("nri-bench-plugin: {e}");
        std::process::exit(1);
    });
    let _ = handle.set(stub.handle());
    if let Err(e) = stub.run().await {
        report(1, &e.to_string());
    }
    report(0, "connection closed");
}
