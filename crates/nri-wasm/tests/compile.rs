//! `nri-wasm-compile` as a node's setup runs it: on a plugin directory,
//! into a cache a runtime then loads from.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use nri_wasm::{Limits, Plugin};

mod common;
use common::module;

fn run(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nri-wasm-compile"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn compiled(cache: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_plugin_directory_is_compiled_into_the_cache_a_runtime_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    let cache = tmp.path().join("cache");
    fs::create_dir(&plugins).unwrap();
    // Echoes the request's bytes.
    let echo = "(i64.or (i64.shl (i64.extend_i32_u (local.get 0)) (i64.const 32)) \
                (i64.extend_i32_u (local.get 1)))";
    let wasm = module(echo);
    fs::write(plugins.join("10-echo"), &wasm).unwrap();
    fs::write(plugins.join("20-other"), module("(i64.const 0)")).unwrap();
    // What a plugin directory holds besides: executables and notes.
    fs::write(plugins.join("30-shell"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(plugins.join("30-shell"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(plugins.join("README"), "").unwrap();

    let flag = Path::new("--cache-dir");
    let out = run(&[flag, &cache, &plugins]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert_eq!(stdout.matches(": compiled in ").count(), 2, "{stdout}");
    assert!(stdout.contains("10-echo: compiled in"), "{stdout}");
    assert!(
        !stdout.contains("30-shell") && !stdout.contains("README"),
        "{stdout}"
    );
    let files = compiled(&cache);
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(fs::metadata(&cache).unwrap().mode() & 0o777, 0o700);

    // Run again, nothing to do.
    let out = run(&[flag, &cache, &plugins.join("10-echo")]);
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("10-echo: already compiled: "),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(compiled(&cache), files);

    // A runtime's load takes the file as it is (compiling would store a
    // new file under the same name).
    let inodes: Vec<u64> = files
        .iter()
        .map(|f| fs::metadata(f).unwrap().ino())
        .collect();
    let second = Duration::from_secs(1);
    let p = Plugin::load("10-echo", &wasm, &Limits::default(), second, Some(&cache)).unwrap();
    assert_eq!(p.call("CreateContainer", b"hi", second).unwrap(), b"hi");
    let after: Vec<u64> = files
        .iter()
        .map(|f| fs::metadata(f).unwrap().ino())
        .collect();
    assert_eq!(after, inodes);
}

#[test]
fn what_is_not_a_plugin_fails_the_run_and_is_not_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let flag = Path::new("--cache-dir");
    let good = tmp.path().join("10-good");
    fs::write(&good, module("(i64.const 0)")).unwrap();
    let bare = tmp.path().join("20-bare");
    fs::write(&bare, wat::parse_str("(module)").unwrap()).unwrap();
    let script = tmp.path().join("30-script");
    fs::write(&script, "#!/bin/sh\n").unwrap();

    let out = run(&[flag, &cache, &good, &bare, &script]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("20-bare: plugin_api_version is not exported"),
        "{stderr}"
    );
    assert!(stderr.contains("30-script: compile: "), "{stderr}");
    // The good one is still compiled.
    assert!(text(&out.stdout).contains("10-good: compiled in"));
    assert_eq!(compiled(&cache).len(), 1);

    // A cache others may write is refused, not used.
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o777)).unwrap();
    let out = run(&[flag, &cache, &good]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("writable by others"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_usage_error_exits_2() {
    for args in [
        &[][..],
        &[Path::new("--cache-dir")],
        &[Path::new("--frobnicate"), Path::new("x")],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains("usage: nri-wasm-compile"));
    }
}
