//! A plugin on upstream's Go `pkg/stub` (go/tests/cmd/nri-test-plugin,
//! driven by a JSON script) as a process of its own, for the adaptation and
//! the robustness tests alike.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::common::Harness;

/// The requests a Go test plugin logged, one JSON object each.
pub fn read_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Builds the Go test plugin once per test run (Go caches the build).
pub fn go_plugin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // The workspace root: this crate sits at crates/nri-runtime.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = root.join("target/go-test-plugin/nri-test-plugin");
        let status = Command::new("go")
            .args(["build", "-o"])
            .arg(&out)
            .arg("./cmd/nri-test-plugin")
            .current_dir(root.join("go/tests"))
            .status()
            .expect("go toolchain (see .ci/run)");
        assert!(
            status.success(),
            "building go/tests/cmd/nri-test-plugin failed"
        );
        out
    })
}

/// An external Go plugin process, killed when dropped.
pub struct GoPlugin {
    child: Child,
    pub log: PathBuf,
    /// Where the process's stderr goes.
    pub stderr: PathBuf,
}

impl Drop for GoPlugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Go plugin copied into the harness's directory: a checkout under a
/// directory only its owner may enter (`mktemp -d`) would keep other users
/// from executing the one in `target/`.
pub fn go_plugin_for_others(h: &Harness) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let copy = h.dir.path().join("nri-test-plugin");
    if !copy.exists() {
        std::fs::copy(go_plugin(), &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    copy
}

impl GoPlugin {
    /// Starts `idx-name` against the harness's socket with `script` (its
    /// `log` is set here). The script goes in a file: it may be megabytes.
    /// The same name may be started more than once in one harness.
    pub fn start(h: &Harness, name: &str, idx: &str, script: Value) -> GoPlugin {
        GoPlugin::spawn(h, go_plugin(), name, idx, script, |_| {})
    }

    /// [`start`](Self::start) as another user: the process runs with `uid`
    /// and `gid` (the caller must be root, and the harness's directory and
    /// socket open to them). It runs the copy [`go_plugin_for_others`]
    /// makes, which other users can reach wherever the checkout lies.
    pub fn start_as(
        h: &Harness,
        name: &str,
        idx: &str,
        script: Value,
        uid: u32,
        gid: u32,
    ) -> GoPlugin {
        use std::os::unix::process::CommandExt;
        GoPlugin::spawn(h, &go_plugin_for_others(h), name, idx, script, |cmd| {
            cmd.uid(uid).gid(gid);
        })
    }

    fn spawn(
        h: &Harness,
        bin: &Path,
        name: &str,
        idx: &str,
        mut script: Value,
        setup: impl FnOnce(&mut Command),
    ) -> GoPlugin {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let tag = format!("{idx}-{name}-{}", STARTED.fetch_add(1, Ordering::Relaxed));
        let log = h.dir.path().join(format!("{tag}.jsonl"));
        script["log"] = json!(log);
        let script_path = h.dir.path().join(format!("{tag}.script.json"));
        std::fs::write(&script_path, script.to_string()).unwrap();
        let stderr_path = h.dir.path().join(format!("{tag}.stderr"));
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut cmd = Command::new(bin);
        cmd.stderr(stderr)
            .arg("-socket")
            .arg(&h.socket)
            .args(["-name", name, "-idx", idx, "-script"])
            .arg(&script_path);
        setup(&mut cmd);
        let child = spawn(&mut cmd);
        GoPlugin {
            child,
            log,
            stderr: stderr_path,
        }
    }

    /// Every request the plugin received, as its log records them.
    pub fn calls(&self) -> Vec<Value> {
        read_log(&self.log)
    }

    /// Whether the plugin received `event` for container `ctr`.
    pub fn saw(&self, event: &str, ctr: &str) -> bool {
        self.calls()
            .iter()
            .any(|c| c["event"] == event && c["container"] == ctr)
    }

    /// Kills the process: its connection goes away while no request is
    /// in flight.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }
}

/// Starts `cmd`, waiting out `ETXTBSY`: a test thread copying the plugin
/// for other users holds the copy open for writing, and so, until it
/// execs, does every child another test thread forks meanwhile.
fn spawn(cmd: &mut Command) -> Child {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            started => return started.unwrap(),
        }
    }
}
