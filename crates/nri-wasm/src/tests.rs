//! Modules written here in WAT, each breaking one rule of the interface or
//! of good behaviour, against the host. The Go module built on upstream's
//! pkg/api is tested against both runtimes in go/tests/wasm.

use std::time::{Duration, Instant};

use super::*;

/// A plugin module whose `plugin_create_container` body is `create`; the
/// other methods reply with nothing. `malloc` hands out memory from a bump
/// pointer; `free` does nothing. Both count their calls (`$mallocs`,
/// `$frees`). `extra` adds fields to the module.
fn module(create: &str, extra: &str) -> Vec<u8> {
    module_of(1, create, extra)
}

/// [`module`] with `pages` of memory.
fn module_of(pages: u32, create: &str, extra: &str) -> Vec<u8> {
    let mut methods = String::new();
    for (_, export) in METHODS {
        if export != "plugin_create_container" {
            methods.push_str(&format!(
                "(func (export \"{export}\") (param i32 i32) (result i64) (i64.const 0))\n"
            ));
        }
    }
    let text = format!(
        r#"(module
            (import "env" "log" (func $log (param i32 i32) (result i64)))
            (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
            (memory (export "memory") {pages})
            (global $next (mut i32) (i32.const 1024))
            (global $mallocs (mut i32) (i32.const 0))
            (global $frees (mut i32) (i32.const 0))
            (func (export "malloc") (param $n i32) (result i32)
                (local $p i32)
                (global.set $mallocs (i32.add (global.get $mallocs) (i32.const 1)))
                (local.set $p (global.get $next))
                (global.set $next (i32.add (global.get $next) (local.get $n)))
                (local.get $p))
            (func (export "free") (param i32)
                (global.set $frees (i32.add (global.get $frees) (i32.const 1))))
            (func (export "plugin_api_version") (result i64) (i64.const 1))
            (func (export "plugin_create_container") (param $ptr i32) (param $len i32) (result i64)
                {create})
            {methods}
            {extra}
        )"#
    );
    wat::parse_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn load(wasm: &[u8]) -> Result<Plugin, LoadError> {
    Plugin::load(
        "10-test",
        wasm,
        &Limits::default(),
        Duration::from_secs(5),
        None,
    )
}

const SECOND: Duration = Duration::from_secs(1);

/// `ptr << 32 | len` of the request's own bytes: an echo.
const ECHO: &str = "(i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len)))";

#[test]
fn a_call_hands_the_request_over_and_the_reply_back() {
    let p = load(&module(ECHO, "")).unwrap();
    for request in [&b"some encoded request"[..], b"", b"\x00\x01\x02"] {
        assert_eq!(p.call("CreateContainer", request, SECOND).unwrap(), request);
    }
    assert_eq!(p.call("RunPodSandbox", b"x", SECOND).unwrap(), b"");
    assert!(matches!(
        p.call("NoSuchMethod", b"", SECOND),
        Err(CallError::UnknownMethod(_))
    ));
}

#[test]
fn requests_of_any_size_arrive_whole() {
    // 4 MiB: the bump allocator never frees, and the memory kept for
    // requests grows to 32 KiB, besides the one of 2 MiB that is not kept.
    let p = load(&module_of(64, ECHO, "")).unwrap();
    for (i, len) in [5, 20_000, 5, 40_000, 2 << 20, 5, 20_000]
        .into_iter()
        .enumerate()
    {
        let request: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
        let reply = p.call("CreateContainer", &request, SECOND).unwrap();
        assert!(
            reply == request,
            "request {i} of {len} bytes came back otherwise"
        );
    }
}

#[test]
fn request_memory_is_kept_for_the_requests_that_fit() {
    // Each call answers with the module's counts of malloc and free calls
    // so far, two i32s at address 0 (which is not freed).
    let counts = "(i32.store (i32.const 0) (global.get $mallocs)) \
                  (i32.store (i32.const 4) (global.get $frees)) \
                  (i64.const 8)";
    let p = load(&module_of(64, counts, "")).unwrap();
    let steps = [
        (100, (1, 0)),     // 16 KiB allocated, and kept
        (100, (1, 0)),     // the same memory
        (20_000, (2, 1)),  // replaced by 32 KiB
        (2 << 20, (3, 1)), // over 1 MiB: memory of its own...
        (10, (3, 2)),      // ...freed after its call; the 32 KiB kept
        (0, (3, 2)),       // an empty request is no memory at all
    ];
    for (len, (mallocs, frees)) in steps {
        let reply = p.call("CreateContainer", &vec![7; len], SECOND).unwrap();
        let count = |at: usize| u32::from_le_bytes(reply[at..at + 4].try_into().unwrap());
        assert_eq!(
            (count(0), count(4)),
            (mallocs, frees),
            "request of {len} bytes"
        );
    }
}

#[test]
fn bit_31_of_the_length_makes_the_reply_an_error_text() {
    let refuse = "(i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) \
                  (i64.or (i64.extend_i32_u (local.get $len)) (i64.const 0x80000000)))";
    let p = load(&module(refuse, "")).unwrap();
    match p.call("CreateContainer", b"no, thanks", SECOND) {
        Err(CallError::Refused(text)) => assert_eq!(text, "no, thanks"),
        other => panic!("{other:?}"),
    }
    // A refusal is the handler's answer, not a crash: it may be called again.
    assert!(matches!(
        p.call("CreateContainer", b"again", SECOND),
        Err(CallError::Refused(_))
    ));
}

#[test]
fn a_trap_kills_the_module_and_later_calls_fail_at_once() {
    let p = load(&module("unreachable", "")).unwrap();
    match p.call("CreateContainer", b"x", SECOND) {
        Err(CallError::Crashed(why)) => assert!(why.contains("unreachable"), "{why}"),
        other => panic!("{other:?}"),
    }
    match p.call("RunPodSandbox", b"x", SECOND) {
        Err(CallError::Closed(why)) => assert!(why.contains("unreachable"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn proc_exit_closes_the_module_with_its_code() {
    let p = load(&module("(call $exit (i32.const 4)) (i64.const 0)", "")).unwrap();
    match p.call("CreateContainer", b"x", SECOND) {
        Err(CallError::Crashed(why)) => assert_eq!(why, "module closed with exit_code(4)"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_loop_is_cut_off_at_the_deadline() {
    let p = load(&module("(loop $l (br $l)) (i64.const 0)", "")).unwrap();
    let started = Instant::now();
    let res = p.call("CreateContainer", b"x", Duration::from_millis(200));
    let took = started.elapsed();
    assert!(matches!(res, Err(CallError::Timeout)), "{res:?}");
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(matches!(
        p.call("CreateContainer", b"x", SECOND),
        Err(CallError::Closed(_))
    ));
}

#[test]
fn deadlines_of_concurrent_calls_do_not_cut_each_other_short() {
    // Two modules loop, one with a 600 ms deadline, the other with a 50 ms
    // one that ends meanwhile: each call keeps its own.
    let looping = module("(loop $l (br $l)) (i64.const 0)", "");
    let short = load(&looping).unwrap();
    let long = load(&looping).unwrap();
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            let started = Instant::now();
            let _ = long.call("CreateContainer", b"", Duration::from_millis(600));
            started.elapsed()
        });
        let _ = short.call("CreateContainer", b"", Duration::from_millis(50));
        let long_took = t.join().unwrap();
        assert!(long_took >= Duration::from_millis(600), "{long_took:?}");
    });
}

#[test]
fn memory_is_capped() {
    let grow = "(drop (memory.grow (i32.const 1000))) (i64.const 0)"; // 64 MiB
    let p = Plugin::load(
        "10-test",
        &module(grow, ""),
        &Limits { memory: 16 << 20 },
        SECOND,
        None,
    )
    .unwrap();
    match p.call("CreateContainer", b"", SECOND) {
        Err(CallError::Crashed(why)) => assert!(why.contains("memory"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn replies_outside_memory_are_refused_not_read() {
    // A reply said to be 2 GiB - 1 long at offset 0, and one past the end.
    for lie in ["(i64.const 0x7fffffff)", "(i64.const 0x0001000000000010)"] {
        let p = load(&module(lie, "")).unwrap();
        match p.call("CreateContainer", b"x", SECOND) {
            Err(CallError::Crashed(why)) => assert!(why.contains("out of range"), "{why}"),
            other => panic!("{lie}: {other:?}"),
        }
    }
}

#[test]
fn malloc_returning_nonsense_fails_the_call() {
    let wasm = wat::parse_str(format!(
        r#"(module
            (memory (export "memory") 1)
            (func (export "malloc") (param i32) (result i32) (i32.const 0xfffffff0))
            (func (export "free") (param i32))
            (func (export "plugin_api_version") (result i64) (i64.const 1))
            {})"#,
        METHODS
            .iter()
            .map(|(_, e)| format!(
                "(func (export \"{e}\") (param i32 i32) (result i64) (i64.const 0))"
            ))
            .collect::<String>()
    ))
    .unwrap();
    let p = load(&wasm).unwrap();
    match p.call("CreateContainer", b"request", SECOND) {
        Err(CallError::Crashed(why)) => assert!(why.contains("Memory.Write"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn modules_that_do_not_implement_the_interface_are_refused_at_load() {
    let err = |wasm: &[u8]| load(wasm).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err(b"\0asm\x01\0\0\0garbage").starts_with("compile:"));
    assert_eq!(
        err(&wat::parse_str("(module)").unwrap()),
        "plugin_api_version is not exported"
    );
    assert_eq!(
        err(&wat::parse_str(
            r#"(module (func (export "plugin_api_version") (result i64) (i64.const 2)))"#
        )
        .unwrap()),
        "API version mismatch, host: 1, plugin: 2"
    );
    assert_eq!(
        err(&wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "plugin_api_version") (result i64) (i64.const 1)))"#).unwrap()),
        "plugin_configure is not exported"
    );
    // Imports the host does not have.
    assert!(
        err(&wat::parse_str(r#"(module (import "env" "spawn" (func)))"#).unwrap())
            .starts_with("instantiate:")
    );
}

#[test]
fn a_start_function_that_loops_is_cut_off_at_load() {
    let wasm = module(ECHO, r#"(func (export "_initialize") (loop $l (br $l)))"#);
    let started = Instant::now();
    let err = Plugin::load(
        "10-test",
        &wasm,
        &Limits::default(),
        Duration::from_millis(200),
        None,
    )
    .err()
    .unwrap();
    assert!(matches!(err, LoadError::Init(_)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn the_host_log_function_takes_a_log_request() {
    use protobuf::Message;
    let req = nri_api::LogRequest {
        msg: "hello from a module".into(),
        level: nri_api::log_request::Level::LEVEL_INFO.into(),
        ..Default::default()
    };
    // Log the request handed in, then echo it.
    let create = format!("(drop (call $log (local.get $ptr) (local.get $len))) {ECHO}");
    let p = load(&module(&create, "")).unwrap();
    let bytes = req.write_to_bytes().unwrap();
    assert_eq!(p.call("CreateContainer", &bytes, SECOND).unwrap(), bytes);
    // Not a LogRequest: the host function fails, and the call with it.
    assert!(matches!(
        p.call("CreateContainer", b"\xff\xff\xff", SECOND),
        Err(CallError::Crashed(_))
    ));
}

mod cache {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::time::SystemTime;

    use super::*;

    fn load_cached(wasm: &[u8], dir: &Path) -> Plugin {
        Plugin::load("10-test", wasm, &Limits::default(), SECOND, Some(dir)).unwrap()
    }

    /// The compiled modules in `dir`.
    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
    }

    fn age(path: &Path, days: u64) {
        age_by(path, Duration::from_secs(days * 24 * 3600));
    }

    fn age_by(path: &Path, by: Duration) {
        let then = SystemTime::now() - by;
        fs::File::options()
            .append(true)
            .open(path)
            .unwrap()
            .set_modified(then)
            .unwrap();
    }

    fn modified(path: &Path) -> SystemTime {
        fs::metadata(path).unwrap().modified().unwrap()
    }

    #[test]
    fn a_module_is_compiled_once_and_loaded_from_the_cache_after() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("created/on/demand");
        let wasm = module(ECHO, "");
        load_cached(&wasm, &dir);
        let stored = files(&dir);
        assert_eq!(stored.len(), 1, "{stored:?}");
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&stored[0]), 0o600);
        // Loaded from the file: its use moves its modification time.
        age(&stored[0], 2);
        let before = modified(&stored[0]);
        let p = load_cached(&wasm, &dir);
        assert!(modified(&stored[0]) > before);
        assert_eq!(p.call("CreateContainer", b"hi", SECOND).unwrap(), b"hi");
        // Another module is another file.
        load_cached(&module("(i64.const 0)", ""), &dir);
        assert_eq!(files(&dir).len(), 2);
    }

    #[test]
    fn a_damaged_or_foreign_file_is_compiled_again_not_run() {
        let tmp = tempfile::tempdir().unwrap();
        let wasm = module(ECHO, "");
        load_cached(&wasm, tmp.path());
        let file = files(tmp.path()).remove(0);
        let good = fs::read(&file).unwrap();

        // Cut short: refused by the engine, compiled again, replaced.
        fs::write(&file, &good[..good.len() / 2]).unwrap();
        let p = load_cached(&wasm, tmp.path());
        assert_eq!(p.call("CreateContainer", b"x", SECOND).unwrap(), b"x");
        assert_eq!(fs::read(&file).unwrap().len(), good.len());

        // Writable by others: not read, but compiled again and replaced by
        // a file of the process's own.
        fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
        load_cached(&wasm, tmp.path());
        let meta = fs::metadata(&file).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_directory_others_may_write_is_not_used() {
        let tmp = tempfile::tempdir().unwrap();
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let p = load_cached(&module(ECHO, ""), tmp.path());
        assert_eq!(p.call("CreateContainer", b"x", SECOND).unwrap(), b"x");
        assert!(files(tmp.path()).is_empty());
    }

    #[test]
    fn modules_unused_for_a_month_are_removed_when_another_is_stored() {
        let tmp = tempfile::tempdir().unwrap();
        let old = tmp.path().join("0".repeat(64) + ".cwasm");
        let recent = tmp.path().join("1".repeat(64) + ".cwasm");
        let other = tmp.path().join("notes.txt");
        for f in [&old, &recent, &other] {
            fs::write(f, b"").unwrap();
            age(f, 31);
        }
        age(&recent, 29);
        load_cached(&module(ECHO, ""), tmp.path());
        assert!(!old.exists());
        assert!(recent.exists() && other.exists());
        assert_eq!(files(tmp.path()).len(), 3);
    }

    #[test]
    fn what_a_process_left_aside_when_it_died_does_not_stop_a_store() {
        let wasm = module(ECHO, "");
        let probe = tempfile::tempdir().unwrap();
        load_cached(&wasm, probe.path());
        let name = files(probe.path())[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();

        let tmp = tempfile::tempdir().unwrap();
        let left = |pid: u32, seq: u64| tmp.path().join(format!("{name}.tmp-{pid}-{seq}"));
        // The names this process's next stores would write, as an earlier
        // process with the same pid would have left them.
        let pid = std::process::id();
        for seq in 0..64 {
            fs::write(left(pid, seq), b"cut short").unwrap();
        }
        // Another process's, from hours ago and from now.
        let (stale, recent) = (left(1, 0), left(2, 0));
        fs::write(&stale, b"cut short").unwrap();
        fs::write(&recent, b"being written").unwrap();
        age_by(&stale, Duration::from_secs(2 * 3600));

        load_cached(&wasm, tmp.path());
        assert!(tmp.path().join(&name).exists(), "not stored");
        assert!(!stale.exists());
        assert!(recent.exists());
        let ours = (0..64).filter(|&seq| left(pid, seq).exists()).count();
        assert_eq!(
            ours, 63,
            "the store should have replaced one of this pid's leftovers"
        );
        let p = load_cached(&wasm, tmp.path());
        assert_eq!(p.call("CreateContainer", b"x", SECOND).unwrap(), b"x");
    }

    fn inode(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(path).unwrap().ino()
    }

    #[test]
    fn a_precompiled_module_is_what_a_load_then_finds() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        let wasm = module(ECHO, "");
        let done = precompile("10-test", &wasm, &dir, SECOND).unwrap();
        let Precompiled::Compiled { path, .. } = &done else {
            panic!("{done:?}");
        };
        assert_eq!(files(&dir), std::slice::from_ref(path));
        assert_eq!(
            precompile("10-test", &wasm, &dir, SECOND).unwrap(),
            Precompiled::Cached(path.clone())
        );
        // A load takes that file: compiling again would store a new one
        // under the same name.
        let ino = inode(path);
        age(path, 2);
        let before = modified(path);
        let p = load_cached(&wasm, &dir);
        assert_eq!(inode(path), ino);
        assert!(modified(path) > before);
        assert_eq!(p.call("CreateContainer", b"x", SECOND).unwrap(), b"x");
        // And the other way round: what a load stored, precompile finds.
        let other = module("(i64.const 0)", "");
        load_cached(&other, &dir);
        assert!(matches!(
            precompile("20-other", &other, &dir, SECOND).unwrap(),
            Precompiled::Cached(_)
        ));
        assert_eq!(files(&dir).len(), 2);
    }

    #[test]
    fn precompile_stores_only_plugins_and_only_in_a_trusted_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let no_malloc = wat::parse_str(
            r#"(module (memory (export "memory") 1)
                (func (export "plugin_api_version") (result i64) (i64.const 1)))"#,
        )
        .unwrap();
        match precompile("10-test", &no_malloc, tmp.path(), SECOND) {
            Err(PrecompileError::Load(LoadError::Interface(text))) => {
                assert!(text.ends_with("is not exported"), "{text}")
            }
            other => panic!("{other:?}"),
        }
        match precompile("10-test", b"not a module", tmp.path(), SECOND) {
            Err(PrecompileError::Load(LoadError::Compile(_))) => {}
            other => panic!("{other:?}"),
        }
        assert!(files(tmp.path()).is_empty());

        // Where a runtime would compile without the cache, precompiling
        // has nothing to do: it fails.
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o777)).unwrap();
        match precompile("10-test", &module(ECHO, ""), tmp.path(), SECOND) {
            Err(e @ PrecompileError::Cache { .. }) => {
                assert!(e.to_string().contains("writable by others"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        assert!(files(tmp.path()).is_empty());
    }
}
