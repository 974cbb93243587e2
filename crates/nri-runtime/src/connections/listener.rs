//! The socket external plugins connect to. Handshakes run concurrently, at
//! most `max_pending` at a time, so silent or garbage-talking connections
//! cost good plugins nothing (upstream accepts one connection at a time).

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use log::{info, warn};
use tokio::net::UnixListener;
use tokio::sync::Semaphore;

use crate::error::peer_text;
use crate::{connections::connect, Core, Error};

pub(crate) struct Listener {
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Binds the socket (replacing a stale one) and starts accepting. Must
    /// run on the adaptation's runtime.
    pub(crate) fn start(
        core: Arc<Core>,
        path: &Path,
        max_pending: usize,
    ) -> Result<Listener, Error> {
        let fail = |what: &str, e: std::io::Error| {
            Error::Start(format!("failed to {what} {}: {e}", path.display()))
        };
        let _ = std::fs::remove_file(path);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| fail("create socket directory for", e))?;
            }
        }
        let listener = UnixListener::bind(path).map_err(|e| fail("listen on", e))?;
        // Only the runtime's user may connect, whatever the umask.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| fail("restrict permissions of", e))?;
        info!("accepting NRI plugins on {}", path.display());
        let task = tokio::spawn(accept_loop(core, listener, max_pending));
        Ok(Listener { task })
    }

    pub(crate) fn stop(self) {
        self.task.abort();
    }
}

async fn accept_loop(core: Arc<Core>, listener: UnixListener, max_pending: usize) {
    let pending = Arc::new(Semaphore::new(max_pending));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                warn!("failed to accept plugin connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&pending).try_acquire_owned() else {
            warn!("refusing plugin connection: {max_pending} handshakes already pending");
            continue;
        };
        let task_core = Arc::clone(&core);
        core.spawn(async move {
            let core = task_core;
            let connected = connect::connect(Arc::clone(&core), stream, None).await;
            drop(permit);
            match connected {
                Ok(c) => crate::connections::activate::sync_and_add(core, c).await,
                Err(e) => warn!("failed to start external plugin: {}", peer_text(&e)),
            }
        });
    }
}
