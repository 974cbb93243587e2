//! WASM plugins from the plugin directory, written here in WAT on the
//! go-plugin ABI (a Go module built on upstream's pkg/api runs against
//! both runtimes in go/tests/wasm). The tests of modules compiled by the
//! core itself need its `compiled-wasm` feature (`make test-rust` runs
//! them: `cargo test -p nri-runtime --features compiled-wasm`).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use protobuf::Message;

use crate::common::*;

/// A module whose `plugin_create_container` replies with `reply` (an
/// encoded CreateContainerResponse, kept in a data segment at 4096) or, if
/// `trap`, traps. Every other method replies with nothing, which Configure
/// takes as "all events".
fn module(reply: &[u8], trap: bool) -> Vec<u8> {
    let bytes: String = reply.iter().map(|b| format!("\\{b:02x}")).collect();
    let create = if trap {
        "unreachable".to_string()
    } else {
        format!(
            "(i64.or (i64.shl (i64.const 4096) (i64.const 32)) (i64.const {}))",
            reply.len()
        )
    };
    let mut methods = String::new();
    for (_, export) in nri_wasm::METHODS {
        if export != "plugin_create_container" {
            methods.push_str(&format!(
                "(func (export \"{export}\") (param i32 i32) (result i64) (i64.const 0))"
            ));
        }
    }
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") 1)
            (data (i32.const 4096) "{bytes}")
            (global $next (mut i32) (i32.const 8192))
            (func (export "malloc") (param $n i32) (result i32)
                (local $p i32)
                (local.set $p (global.get $next))
                (global.set $next (i32.add (global.get $next) (local.get $n)))
                (local.get $p))
            (func (export "free") (param i32))
            (func (export "plugin_api_version") (result i64) (i64.const 1))
            (func (export "plugin_create_container") (param i32 i32) (result i64) {create})
            {methods})"#
    ))
    .unwrap()
}

fn install(dir: &Path, file: &str, wasm: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(file);
    std::fs::write(&path, wasm).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn annotating(key: &str) -> Vec<u8> {
    let mut rsp = nri_api::CreateContainerResponse::new();
    rsp.adjust
        .mut_or_insert_default()
        .annotations
        .insert(key.into(), "yes".into());
    rsp.write_to_bytes().unwrap()
}

#[cfg(feature = "compiled-wasm")]
/// The handlers of the signals a WASM engine would trap with.
fn trap_handlers() -> Vec<usize> {
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE]
        .iter()
        .map(|&sig| {
            // SAFETY: sigaction with a NULL new action only reads the
            // current one into `old`.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                assert_eq!(libc::sigaction(sig, std::ptr::null(), &mut old), 0);
                old.sa_sigaction
            }
        })
        .collect()
}

#[cfg(feature = "compiled-wasm")]
#[tokio::test]
async fn a_wasm_plugin_is_loaded_configured_and_adjusts_without_signal_handlers() {
    let handlers = trap_handlers();
    let h = Harness::start().await;
    install(
        &h.plugin_dir(),
        "10-wasm",
        &module(&annotating("wasm/seen"), false),
    );
    h.nri.start().await.unwrap();
    assert_eq!(h.nri.plugins(), ["10-wasm"]);
    assert!(!logged("Found WASM plugin").is_empty());
    // Its compiled form is kept for the next start.
    let cache = h.plugin_dir().parent().unwrap().join("wasm-cache");
    let kept: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(!logged("pre-connected-wasm:10-wasm subscribed").is_empty());

    let rsp = h
        .nri
        .create_container(req!(CreateContainerRequest, "p1", "c1"))
        .await
        .unwrap();
    assert_eq!(
        rsp.adjust.annotations.get("wasm/seen").map(String::as_str),
        Some("yes")
    );
    // A trap is found by the compiled code's own checks: the host's
    // handlers (here the Rust runtime's) are left as they were.
    assert_eq!(trap_handlers(), handlers, "a signal handler changed");
    h.nri.stop().await;
}

#[cfg(feature = "compiled-wasm")]
#[tokio::test]
async fn a_wasm_plugin_that_traps_fails_that_request_and_is_dropped() {
    let h = Harness::start().await;
    install(
        &h.plugin_dir(),
        "10-good",
        &module(&annotating("good"), false),
    );
    install(&h.plugin_dir(), "20-bad", &module(&[], true));
    h.nri.start().await.unwrap();
    assert_eq!(h.nri.plugins(), ["10-good", "20-bad"]);

    let err = h
        .nri
        .create_container(req!(CreateContainerRequest, "p1", "c1"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unreachable"), "{err}");
    assert_eq!(
        h.nri.plugins(),
        ["10-good"],
        "the crashed plugin is dropped"
    );
    let rsp = h
        .nri
        .create_container(req!(CreateContainerRequest, "p1", "c2"))
        .await
        .unwrap();
    assert_eq!(
        rsp.adjust.annotations.get("good").map(String::as_str),
        Some("yes")
    );
    h.nri.stop().await;
}

#[cfg(feature = "compiled-wasm")]
#[tokio::test]
async fn a_file_that_is_not_a_plugin_module_is_skipped_at_start() {
    let h = Harness::start().await;
    install(
        &h.plugin_dir(),
        "10-empty",
        &wat::parse_str("(module)").unwrap(),
    );
    install(
        &h.plugin_dir(),
        "20-good",
        &module(&annotating("good"), false),
    );
    h.nri.start().await.unwrap();
    assert_eq!(h.nri.plugins(), ["20-good"]);
    assert!(
        !logged("load WASM plugin").is_empty()
            && !logged("plugin_api_version is not exported").is_empty(),
        "the refusal is logged with its reason"
    );
    h.nri.stop().await;
}

/// An engine the host lends the core: it records what it loads, and its
/// modules answer CreateContainer as `create` says.
struct Lent {
    loaded: std::sync::Mutex<Vec<String>>,
    create: Result<Vec<u8>, nri_runtime::WasmFailure>,
    /// The threads CreateContainer ran on.
    threads: std::sync::Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>,
    /// Its modules' reply to Configure: empty subscribes to all events.
    configure: Vec<u8>,
}

struct LentModule(
    Result<Vec<u8>, nri_runtime::WasmFailure>,
    std::sync::Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>,
    Vec<u8>,
);

impl nri_runtime::WasmEngine for Lent {
    fn load(
        &self,
        name: &str,
        wasm: &[u8],
        _memory_limit: usize,
        _init_timeout: std::time::Duration,
    ) -> Result<Box<dyn nri_runtime::WasmModule>, String> {
        assert!(wasm.starts_with(b"\0asm"), "handed the module file");
        self.loaded.lock().unwrap().push(name.to_string());
        Ok(Box::new(LentModule(
            self.create.clone(),
            std::sync::Arc::clone(&self.threads),
            self.configure.clone(),
        )))
    }
}

impl nri_runtime::WasmModule for LentModule {
    fn call(
        &self,
        method: &str,
        _request: &[u8],
        _timeout: std::time::Duration,
    ) -> Result<Vec<u8>, nri_runtime::WasmFailure> {
        match method {
            "CreateContainer" => {
                self.1.lock().unwrap().push(std::thread::current().id());
                self.0.clone()
            }
            "Configure" => Ok(self.2.clone()),
            _ => Ok(Vec::new()),
        }
    }
}

/// An engine whose modules subscribe to all events.
fn lent(create: Result<Vec<u8>, nri_runtime::WasmFailure>) -> std::sync::Arc<Lent> {
    lent_configured(create, Vec::new())
}

/// An engine whose modules answer Configure with `configure`.
fn lent_configured(
    create: Result<Vec<u8>, nri_runtime::WasmFailure>,
    configure: Vec<u8>,
) -> std::sync::Arc<Lent> {
    std::sync::Arc::new(Lent {
        loaded: Default::default(),
        create,
        threads: Default::default(),
        configure,
    })
}

async fn annotation_of_create(h: &Harness, ctr: &str) -> Option<String> {
    let rsp = h
        .nri
        .create_container(req!(CreateContainerRequest, "p1", ctr))
        .await
        .unwrap();
    rsp.adjust.annotations.keys().next().cloned()
}

#[tokio::test]
async fn a_module_the_cache_lacks_runs_on_the_lent_engine_and_is_not_compiled() {
    let engine = lent(Ok(annotating("lent")));
    let e = std::sync::Arc::clone(&engine);
    let h = Harness::start_with(move |o| o.wasm_engine(e), RuntimeState::default()).await;
    install(
        &h.plugin_dir(),
        "10-wasm",
        &module(&annotating("compiled"), false),
    );
    h.nri.start().await.unwrap();
    assert_eq!(h.nri.plugins(), ["10-wasm"]);
    assert_eq!(*engine.loaded.lock().unwrap(), ["10-wasm"]);
    assert_eq!(
        annotation_of_create(&h, "c1").await.as_deref(),
        Some("lent")
    );
    let cache = h.plugin_dir().parent().unwrap().join("wasm-cache");
    let kept = std::fs::read_dir(&cache).map_or(0, |d| d.count());
    assert_eq!(kept, 0, "nothing compiled, nothing kept");
    h.nri.stop().await;
}

#[cfg(feature = "compiled-wasm")]
#[tokio::test]
async fn a_module_the_cache_holds_runs_compiled_whatever_engine_is_lent() {
    let engine = lent(Ok(annotating("lent")));
    let e = std::sync::Arc::clone(&engine);
    let h = Harness::start_with(move |o| o.wasm_engine(e), RuntimeState::default()).await;
    let wasm = module(&annotating("compiled"), false);
    install(&h.plugin_dir(), "10-wasm", &wasm);
    let cache = h.plugin_dir().parent().unwrap().join("wasm-cache");
    nri_wasm::precompile("10-wasm", &wasm, &cache, std::time::Duration::from_secs(2)).unwrap();
    h.nri.start().await.unwrap();
    assert_eq!(h.nri.plugins(), ["10-wasm"]);
    assert!(
        engine.loaded.lock().unwrap().is_empty(),
        "the lent engine was used"
    );
    assert_eq!(
        annotation_of_create(&h, "c1").await.as_deref(),
        Some("compiled")
    );
    h.nri.stop().await;
}

#[tokio::test]
async fn a_lent_module_that_dies_or_times_out_is_dropped_and_one_that_refuses_is_kept() {
    use nri_runtime::WasmFailure;
    // As for a compiled module: a death fails the request, a refusal fails
    // it and keeps the plugin, a timeout drops the plugin as an external
    // plugin's would be.
    for (failure, fails, kept) in [
        (
            WasmFailure::Dead("wasm trap: unreachable".into()),
            true,
            false,
        ),
        (WasmFailure::Refused("no, thanks".into()), true, true),
        (WasmFailure::Timeout, false, false),
    ] {
        let e = lent(Err(failure.clone()));
        let h = Harness::start_with(move |o| o.wasm_engine(e), RuntimeState::default()).await;
        install(&h.plugin_dir(), "10-wasm", &module(&[], false));
        h.nri.start().await.unwrap();
        assert_eq!(h.nri.plugins(), ["10-wasm"]);
        let res = h
            .nri
            .create_container(req!(CreateContainerRequest, "p1", "c1"))
            .await;
        match (&failure, res) {
            (WasmFailure::Dead(why) | WasmFailure::Refused(why), Err(err)) => {
                assert!(err.to_string().contains(why.as_str()), "{failure:?}: {err}")
            }
            (_, res) => assert_eq!(res.is_err(), fails, "{failure:?}: {res:?}"),
        }
        let left: &[&str] = if kept { &["10-wasm"] } else { &[] };
        assert_eq!(h.nri.plugins(), left, "{failure:?}");
        h.nri.stop().await;
    }
}

#[tokio::test]
async fn a_caller_blocked_on_the_event_runs_the_module_itself() {
    let engine = lent(Ok(annotating("lent")));
    let e = std::sync::Arc::clone(&engine);
    let h = Harness::start_with(move |o| o.wasm_engine(e), RuntimeState::default()).await;
    install(&h.plugin_dir(), "10-wasm", &module(&[], false));
    h.nri.start().await.unwrap();
    // Awaited by a task: the module runs on a thread of the core's.
    assert_eq!(
        annotation_of_create(&h, "c1").await.as_deref(),
        Some("lent")
    );
    // A thread blocked on the event (as the C ABI's callers are) runs it.
    let nri = std::sync::Arc::clone(&h.nri);
    let caller = tokio::task::spawn_blocking(move || {
        nri_runtime::block_on_event(nri.create_container(req!(CreateContainerRequest, "p1", "c2")))
            .unwrap();
        std::thread::current().id()
    })
    .await
    .unwrap();
    let threads = engine.threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 2);
    assert_ne!(
        threads[0],
        std::thread::current().id(),
        "the task's thread blocked"
    );
    assert_eq!(
        threads[1], caller,
        "the blocked caller did not run the module"
    );
    h.nri.stop().await;
}

/// A request the runtime encoded wrongly is refused before the module is
/// called. The check is not redundant with the module's own decoding: a
/// module built on upstream's pkg/api answers bytes it cannot decode with
/// 0, which both hosts read as an empty reply, so an unchecked request
/// would pass the plugin by as if it had nothing to adjust.
#[tokio::test]
async fn a_malformed_request_is_refused_before_a_wasm_plugin_sees_it() {
    // Subscribed to CreateContainer alone (not a validator too, as "all
    // events" would make it): the core then keeps the request encoded.
    let mut configure = nri_api::ConfigureResponse::new();
    configure.events = nri_api::EventMask::of(&[nri_api::Event::CREATE_CONTAINER]).raw();
    let engine = lent_configured(Ok(annotating("lent")), configure.write_to_bytes().unwrap());
    let e = std::sync::Arc::clone(&engine);
    let h = Harness::start_with(move |o| o.wasm_engine(e), RuntimeState::default()).await;
    install(&h.plugin_dir(), "10-wasm", &module(&[], false));
    h.nri.start().await.unwrap();
    let good = req!(CreateContainerRequest, "p1", "c1")
        .write_to_bytes()
        .unwrap();
    // The container's length runs past the end (the core cannot find its
    // ID without decoding, which refuses it); a name that is not UTF-8,
    // the pod's or the container's, in a request whose container's ID the
    // core finds in the bytes as they are (then only the check refuses).
    let mut cut = good.clone();
    cut.truncate(good.len() - 1);
    let not_utf8 = |pod_name: &str, ctr_name: &str| {
        let mut r = req!(CreateContainerRequest, "p1", "c2");
        r.pod.mut_or_insert_default().name = pod_name.into();
        let c = r.container.mut_or_insert_default();
        c.name = ctr_name.into();
        // As go/adaptation normalizes a container before encoding it: the
        // core then takes its ID from the bytes without decoding them.
        c.hooks = protobuf::MessageField::some(Default::default());
        let res = c
            .linux
            .mut_or_insert_default()
            .resources
            .mut_or_insert_default();
        res.memory = protobuf::MessageField::some(Default::default());
        res.cpu = protobuf::MessageField::some(Default::default());
        let mut b = r.write_to_bytes().unwrap();
        let marks: Vec<usize> = (0..b.len()).filter(|&i| b[i] == 0x7f).collect();
        assert_eq!(marks.len(), 1);
        b[marks[0]] = 0xff;
        b
    };
    for bad in [cut, not_utf8("p\u{7f}", "c"), not_utf8("p", "c\u{7f}")] {
        let err = h.nri.create_container_wire(bad).await.unwrap_err();
        assert!(
            err.to_string().contains("invalid CreateContainerRequest"),
            "{err}"
        );
    }
    assert!(
        engine.threads.lock().unwrap().is_empty(),
        "the module was handed a malformed request"
    );
    // The plugin is not blamed for the runtime's bytes.
    assert_eq!(h.nri.plugins(), ["10-wasm"]);
    assert!(h.nri.create_container_wire(good).await.is_ok());
    assert_eq!(engine.threads.lock().unwrap().len(), 1);
    h.nri.stop().await;
}

/// Turned off as upstream's `nri_no_wasm` build does: a module is refused
/// with that build's words, on no engine, and nothing is compiled.
#[tokio::test]
async fn with_wasm_disabled_a_module_is_refused_on_every_engine() {
    let engine = lent(Ok(annotating("lent")));
    let e = std::sync::Arc::clone(&engine);
    let h = Harness::start_with(
        move |o| o.wasm_engine(e).disable_wasm(),
        RuntimeState::default(),
    )
    .await;
    install(
        &h.plugin_dir(),
        "10-wasm",
        &module(&annotating("compiled"), false),
    );
    h.nri.start().await.unwrap();
    assert!(h.nri.plugins().is_empty(), "{:?}", h.nri.plugins());
    assert!(engine.loaded.lock().unwrap().is_empty());
    assert!(
        !logged("can't load WASM plugin").is_empty() && !logged("no WASM support").is_empty(),
        "the refusal is logged with upstream's words"
    );
    let cache = h.plugin_dir().parent().unwrap().join("wasm-cache");
    let kept = std::fs::read_dir(&cache).map_or(0, |d| d.count());
    assert_eq!(kept, 0, "nothing compiled");
    h.nri.stop().await;
}

/// Built without `compiled-wasm` and lent no engine, the core has nothing
/// to run a module on: it says so as upstream built with `nri_no_wasm`
/// says it, and refuses the module with that build's words.
#[cfg(not(feature = "compiled-wasm"))]
#[tokio::test]
async fn without_compiled_wasm_or_a_lent_engine_a_module_is_refused() {
    let h = Harness::start().await;
    install(
        &h.plugin_dir(),
        "10-wasm",
        &module(&annotating("compiled"), false),
    );
    assert!(!logged("WASM support is disabled (at build time)").is_empty());
    h.nri.start().await.unwrap();
    assert!(h.nri.plugins().is_empty(), "{:?}", h.nri.plugins());
    assert!(
        !logged("can't load WASM plugin").is_empty() && !logged("no WASM support").is_empty(),
        "the refusal is logged with upstream's words"
    );
    h.nri.stop().await;
}
