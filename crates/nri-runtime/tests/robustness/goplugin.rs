//! Plugins on upstream's Go stub (go/tests/cmd/nri-test-plugin, driven by a
//! JSON script), for the cases where a real plugin meets a limit or goes
//! away. Only what these tests need; the full helper lives with the
//! adaptation tests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::common::Harness;

/// Builds the test plugin once per run (Go caches the build).
fn binary() -> &'static Path {
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
        assert!(status.success(), "go build of nri-test-plugin failed");
        out
    })
}

/// An external Go-stub plugin process; killed when dropped.
pub struct GoPlugin {
    child: Child,
    log: PathBuf,
}

impl Drop for GoPlugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl GoPlugin {
    /// Starts `idx-name` against the harness's socket with `script` (its
    /// `log` is set here). The script goes in a file: it may be megabytes.
    pub fn start(h: &Harness, name: &str, idx: &str, mut script: Value) -> GoPlugin {
        let tag = format!("{idx}-{name}-{}", unique());
        let log = h.dir.path().join(format!("{tag}.jsonl"));
        script["log"] = json!(log);
        let script_path = h.dir.path().join(format!("{tag}.script.json"));
        std::fs::write(&script_path, script.to_string()).unwrap();
        let stderr = std::fs::File::create(h.dir.path().join(format!("{tag}.stderr"))).unwrap();
        let child = Command::new(binary())
            .stderr(stderr)
            .arg("-socket")
            .arg(&h.socket)
            .args(["-name", name, "-idx", idx, "-script"])
            .arg(&script_path)
            .spawn()
            .unwrap();
        GoPlugin { child, log }
    }

    /// (event, container id) of every request the plugin received.
    pub fn calls(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                (field("event"), field("container"))
            })
            .collect()
    }

    /// Whether the plugin received `event` for container `ctr`.
    pub fn saw(&self, event: &str, ctr: &str) -> bool {
        self.calls().iter().any(|(e, c)| e == event && c == ctr)
    }

    /// Kills the process: its connection goes away while no request is
    /// in flight.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unique() -> usize {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
