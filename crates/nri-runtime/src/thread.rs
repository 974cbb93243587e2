//! The thread that runs an adaptation's own tokio runtime.

use crate::Error;

/// The thread running the adaptation's own tokio runtime.
pub(crate) struct RuntimeThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RuntimeThread {
    pub(crate) fn spawn() -> Result<(RuntimeThread, tokio::runtime::Handle), Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::InvalidConfig(format!("tokio runtime: {e}")))?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("nri-adaptation".into())
            .spawn(move || {
                let _ = rt.block_on(stopped);
            })
            .map_err(|e| Error::InvalidConfig(format!("adaptation thread: {e}")))?;
        Ok((
            RuntimeThread {
                stop: Some(stop),
                thread: Some(thread),
            },
            handle,
        ))
    }
}

impl Drop for RuntimeThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            // Never join from the runtime's own thread (a drop from inside a task).
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}
