//! The thread that runs an adaptation's own tokio runtime.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::Error;

/// Threads of the adaptations' own runtimes alive in this process.
static LIVE_THREADS: AtomicUsize = AtomicUsize::new(0);

/// How many threads the adaptations' own runtimes have running in this
/// process: each runtime's thread and its blocking pool, counted as they
/// start and end. For leak checks: counting threads by name would count
/// a host's threads too (a Go runtime thread started from within a
/// callback inherits the name of the thread it was started on).
pub fn core_threads() -> usize {
    LIVE_THREADS.load(Ordering::Acquire)
}

/// Counts the current thread as the core's while it lives.
struct Counted;

impl Counted {
    fn start() -> Counted {
        LIVE_THREADS.fetch_add(1, Ordering::AcqRel);
        Counted
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        LIVE_THREADS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The name of every thread of the adaptation's own runtime.
pub(crate) const THREAD_NAME: &str = "nri-adaptation";

/// How long stopping waits for runtime callbacks still running.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The thread running the adaptation's own tokio runtime.
pub(crate) struct RuntimeThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RuntimeThread {
    pub(crate) fn spawn() -> Result<(RuntimeThread, tokio::runtime::Handle), Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            // Its blocking pool too: threads of the core are ours to count.
            .thread_name(THREAD_NAME)
            .on_thread_start(|| {
                LIVE_THREADS.fetch_add(1, Ordering::AcqRel);
            })
            .on_thread_stop(|| {
                LIVE_THREADS.fetch_sub(1, Ordering::AcqRel);
            })
            .build()
            .map_err(|e| Error::InvalidConfig(format!("tokio runtime: {e}")))?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                let _counted = Counted::start();
                let _ = rt.block_on(stopped);
                // Dropping every task closes its connections; a runtime
                // callback still running on the blocking pool gets a
                // moment to return, and its thread is left behind if not.
                rt.shutdown_timeout(SHUTDOWN_GRACE);
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

/// Resolves once the adaptation is stopped after it was made. Needs no
/// runtime: it is how a runtime callback's thread learns that the
/// adaptation's runtime is going away, before touching its timers.
#[derive(Clone)]
pub(crate) struct NextStop {
    epoch: tokio::sync::watch::Receiver<u64>,
    started: u64,
}

impl NextStop {
    /// The stop after epoch `started` of the adaptation's `epoch`.
    pub(crate) fn new(epoch: tokio::sync::watch::Receiver<u64>, started: u64) -> NextStop {
        NextStop { epoch, started }
    }

    pub(crate) async fn wait(&mut self) {
        let started = self.started;
        // An error means the sender, the Core, is gone: stopped for good.
        let _ = self.epoch.wait_for(|e| *e != started).await;
    }
}
