//! Pre-installed plugins: discovery in the plugin directory, configuration
//! drop-ins, and launching a plugin with its end of a socketpair on fd 3.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use log::warn;

use crate::connections::connect::Launched;
use crate::connections::dropin::{self, RuntimeDropin};
use crate::plugins::child;
use crate::Error;
use nri_api as api;

/// An executable found in the plugin directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Discovered {
    pub(crate) idx: String,
    pub(crate) base: String,
    pub(crate) path: PathBuf,
    pub(crate) config: String,
    /// The runtime's own drop-in for it ([`dropin`](crate::connections::dropin)).
    pub(crate) runtime: RuntimeDropin,
}

/// Lists the plugins in `dir` in file-name order with their drop-in
/// configuration. A missing directory means no plugins. As upstream, an
/// executable whose name is not `NN-name` fails the whole discovery.
pub(crate) fn discover(dir: &Path, dropin_dir: &Path) -> Result<Vec<Discovered>, Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::Start(format!(
                "failed to discover plugins in {}: {e}",
                dir.display()
            )))
        }
    };
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() || meta.permissions().mode() & 0o111 == 0 {
            continue;
        }
        files.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
        ));
    }
    files.sort();

    let mut found = Vec::with_capacity(files.len());
    for (name, path) in files {
        let (idx, base) = api::parse_plugin_name(&name).map_err(|e| {
            Error::Start(format!(
                "failed to discover plugins in {}: {e}",
                dir.display()
            ))
        })?;
        let config = read_dropin(dropin_dir, idx, base)?;
        let runtime = dropin::read(dropin_dir, idx, base)?;
        found.push(Discovered {
            idx: idx.to_string(),
            base: base.to_string(),
            path,
            config,
            runtime,
        });
    }
    Ok(found)
}

/// The plugin's configuration: `<dropin>/<idx>-<base>.conf`, else
/// `<dropin>/<base>.conf`, else empty.
fn read_dropin(dropin_dir: &Path, idx: &str, base: &str) -> Result<String, Error> {
    Ok(
        dropin::read_named(dropin_dir, idx, base, ".conf", "configuration")?
            .map(|(_, bytes)| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default(),
    )
}

/// Starts the plugin process with the peer end of a socketpair as fd 3 and
/// exactly three environment variables, as upstream does. Returns our end.
pub(crate) fn launch(d: &Discovered) -> Result<(tokio::net::UnixStream, Launched), Error> {
    let fail = |e: std::io::Error| {
        Error::Start(format!("failed to launch plugin {}: {e}", d.path.display()))
    };
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(fail)?;
    let theirs: OwnedFd = theirs.into();
    let fd = theirs.as_raw_fd();

    let mut cmd = std::process::Command::new(&d.path);
    cmd.env_clear()
        .env(api::PLUGIN_NAME_ENV, &d.base)
        .env(api::PLUGIN_IDX_ENV, &d.idx)
        .env(api::PLUGIN_SOCKET_ENV, "3")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if fd == 3 {
                // dup2 would be a no-op and leave close-on-exec set.
                let flags = libc::fcntl(3, libc::F_GETFD);
                if flags < 0 || libc::fcntl(3, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Killed and reaped when dropped, without a signal handler (child.rs).
    let child = child::spawn(&mut cmd).map_err(fail)?;
    drop(theirs);

    ours.set_nonblocking(true).map_err(fail)?;
    let stream = tokio::net::UnixStream::from_std(ours).map_err(fail)?;
    Ok((
        stream,
        Launched {
            idx: d.idx.clone(),
            base: d.base.clone(),
            config: d.config.clone(),
            timeouts: d.runtime.timeouts,
            concurrent_requests: d.runtime.concurrent_requests,
            child,
        },
    ))
}

/// Logs why a discovered plugin is skipped.
pub(crate) fn skip(d: &Discovered, why: &dyn std::fmt::Display) {
    warn!(
        "failed to initialize/start pre-installed NRI plugin {}-{}: {why}",
        d.idx, d.base
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn exe(dir: &Path, name: &str) {
        let p = dir.join(name);
        fs::write(&p, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn discovery_sorts_skips_and_reads_dropins() {
        let plugins = tempfile::tempdir().unwrap();
        let conf = tempfile::tempdir().unwrap();
        exe(plugins.path(), "20-b");
        exe(plugins.path(), "10-a");
        fs::write(plugins.path().join("30-not-executable"), "").unwrap();
        fs::create_dir(plugins.path().join("40-dir")).unwrap();
        fs::write(conf.path().join("10-a.conf"), "specific").unwrap();
        fs::write(conf.path().join("a.conf"), "generic").unwrap();
        fs::write(conf.path().join("b.conf"), "generic-b").unwrap();

        let found = discover(plugins.path(), conf.path()).unwrap();
        let summary: Vec<_> = found
            .iter()
            .map(|d| (d.idx.as_str(), d.base.as_str(), d.config.as_str()))
            .collect();
        assert_eq!(summary, [("10", "a", "specific"), ("20", "b", "generic-b")]);
    }

    #[test]
    fn a_missing_directory_means_no_plugins() {
        let conf = tempfile::tempdir().unwrap();
        let found = discover(&conf.path().join("nope"), conf.path()).unwrap();
        assert!(found.is_empty());
    }

    #[test]
    fn one_badly_named_executable_fails_discovery() {
        let plugins = tempfile::tempdir().unwrap();
        exe(plugins.path(), "10-good");
        exe(plugins.path(), "bad");
        let err = discover(plugins.path(), plugins.path()).unwrap_err();
        assert!(err.to_string().contains("idx-pluginname expected"), "{err}");
    }
}
