//! What loading and running modules leaves in the host process: no signal
//! handler of the engine's, and no compiler thread. In a test binary of its
//! own, so that no other test's module is being compiled meanwhile.

use std::time::{Duration, Instant};

use nri_wasm::{CallError, Limits, Plugin};

mod common;
use common::module;

/// The handlers of the signals a JIT engine would catch for its traps.
fn handlers() -> Vec<(i32, usize)> {
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE]
        .into_iter()
        .map(|sig| {
            // SAFETY: sigaction is plain data; all zeroes is a valid value.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: a null new action only reads the current one into
            // `old`, a valid sigaction.
            let r = unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) };
            assert_eq!(r, 0);
            (sig, old.sa_sigaction)
        })
        .collect()
}

fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

#[test]
fn traps_need_no_signal_handler_and_compiling_leaves_no_thread() {
    let before = handlers();
    let second = Duration::from_secs(1);
    // An access past the end of memory and a division by zero: faults a
    // signal-based engine lets the hardware catch.
    for (body, what) in [
        ("(i64.load (i32.const 0x7ffffff0))", "out of bounds"),
        (
            "(i64.extend_i32_u (i32.div_u (i32.const 1) (local.get 1)))",
            "divide by zero",
        ),
    ] {
        let p = Plugin::load("10-test", &module(body), &Limits::default(), second, None).unwrap();
        match p.call("CreateContainer", b"", second) {
            Err(CallError::Crashed(why)) => assert!(why.contains(what), "{why}"),
            other => panic!("{body}: {other:?}"),
        }
    }
    assert_eq!(handlers(), before, "a signal handler was installed");
    // The compiler's threads end with each compilation (not joined: give
    // them a moment).
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<_> = thread_names()
            .into_iter()
            .filter(|n| n.starts_with("nri-wasm-compil"))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < until, "compiler threads left: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
