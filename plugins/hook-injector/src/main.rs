//! nri-hook-injector: injects OCI hooks into containers from OCI hook
//! configuration files (oci-hooks(5)), the way upstream's Go
//! `hook-injector` does with podman's hook manager: hooks in
//! `/usr/share/containers/oci/hooks.d`, overridden by same-named files in
//! `/etc/containers/oci/hooks.d`, matched against the container's command,
//! its (container and pod) annotations and whether it has bind mounts.
//!
//! Flags: `-idx NN`, `-socket-path PATH`, `-verbose`, `-disableWatch`
//! (upstream's), and nri-rs's `-default-dir DIR` and `-override-dir DIR`
//! to read other directories.

mod hooks;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use log::{error, info};
use nri_stub::api::{Container, ContainerAdjustment, ContainerUpdate, PodSandbox};
use nri_stub::{HandlerResult, Plugin};
use plugin_kit::dump::{creating, dump, message};
use plugin_kit::{Flags, StubOptions};

const DEFAULT_DIR: &str = "/usr/share/containers/oci/hooks.d";
const OVERRIDE_DIR: &str = "/etc/containers/oci/hooks.d";

/// What the directories held when last read: file names, sizes and
/// modification times, to notice changes.
type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

fn fingerprint(dirs: &[PathBuf]) -> Fingerprint {
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let meta = e.metadata().ok();
            out.push((
                e.path(),
                meta.as_ref().map_or(0, |m| m.len()),
                meta.and_then(|m| m.modified().ok()),
            ));
        }
    }
    out.sort();
    out
}

struct Loaded {
    hooks: HashMap<String, hooks::HookConfig>,
    seen: Fingerprint,
}

struct Injector {
    dirs: Vec<PathBuf>,
    watch: bool,
    verbose: bool,
    loaded: Mutex<Loaded>,
}

impl Injector {
    /// Reads the directories; with `strict`, a bad hook file is an error
    /// (at start, as upstream's manager refuses to start).
    fn load(dirs: &[PathBuf], strict: bool) -> Result<Loaded, String> {
        let seen = fingerprint(dirs);
        let read = hooks::read_dirs(dirs);
        if !read.errors.is_empty() {
            if strict && read.fatal {
                return Err(read.errors.join(": "));
            }
            error!("Failed loading hooks: {}", read.errors.join(": "));
        }
        Ok(Loaded {
            hooks: read.hooks,
            seen,
        })
    }

    /// The current hooks: re-read when watching and the directories
    /// changed (upstream watches them with inotify; reading at the next
    /// container gives the same hooks).
    fn current(&self) -> HashMap<String, hooks::HookConfig> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if self.watch && fingerprint(&self.dirs) != loaded.seen {
            if let Ok(fresh) = Injector::load(&self.dirs, false) {
                *loaded = fresh;
            }
        }
        loaded.hooks.clone()
    }
}

#[nri_stub::plugin]
impl Plugin for Injector {
    async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        let name = creating(self.verbose, pod, ctr);
        // Pod annotations override the container's.
        let mut annotations = ctr.annotations.clone();
        annotations.extend(pod.annotations.clone());
        let found = hooks::hooks_for(
            &self.current(),
            &ctr.args,
            &annotations,
            !ctr.mounts.is_empty(),
        )
        .map_err(|e| {
            error!("{name}: failed to generate hooks: {e}");
            format!("hook generation failed: {e}")
        })?;
        let Some(found) = found else {
            info!("{name}: no hooks to inject, ignoring");
            return Ok((ContainerAdjustment::new(), Vec::new()));
        };
        let mut adjust = ContainerAdjustment::new();
        adjust.add_hooks(found);
        if self.verbose {
            dump(&name, "ContainerAdjustment", &message(&adjust));
        } else {
            info!("{name}: OCI hooks injected");
        }
        Ok((adjust, Vec::new()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::new("nri-hook-injector")
        .string("idx", "", "plugin index to register to NRI")
        .string("socket-path", "", "path of the NRI socket file")
        .boolean("verbose", "enable (more) verbose logging")
        .boolean(
            "disableWatch",
            "disable watching hook directories for new hooks",
        )
        .string(
            "default-dir",
            DEFAULT_DIR,
            "directory of default hooks (nri-rs)",
        )
        .string(
            "override-dir",
            OVERRIDE_DIR,
            "directory of hooks overriding default ones (nri-rs)",
        )
        .parse_env_or_exit();
    let verbose = flags.flag("verbose");
    plugin_kit::logging::init(verbose);
    let dirs: Vec<PathBuf> = ["default-dir", "override-dir"]
        .iter()
        .map(|f| PathBuf::from(flags.get(f)))
        .collect();
    let loaded = match Injector::load(&dirs, true) {
        Ok(loaded) => loaded,
        Err(e) => {
            error!("failed to set up hook manager: {e}");
            std::process::exit(1)
        }
    };
    let watch = !flags.flag("disableWatch");
    if watch {
        for dir in &dirs {
            if let Err(e) = std::fs::create_dir_all(dir) {
                error!("failed to create directory {:?}: {e}", dir.display());
                std::process::exit(1)
            }
        }
        let shown: Vec<_> = dirs.iter().map(|d| d.display().to_string()).collect();
        info!("watching directories {:?} for new changes", shown.join(" "));
    }
    let injector = Injector {
        dirs,
        watch,
        verbose,
        loaded: Mutex::new(loaded),
    };
    plugin_kit::run_plugin(StubOptions::from_flags(&flags, "socket-path"), injector).await
}
