//! Deadlines of calls into modules, kept by one watchdog thread.
//!
//! Compiled code checks the engine's epoch at every function entry and
//! loop back-edge, and calls the store's callback once the epoch passes the
//! store's own mark. The watchdog advances the epoch only when a deadline
//! of a call in progress has passed, so while no call overruns, the thread
//! sleeps and the code never leaves its fast path; every store then reads
//! the clock in its callback, and only the one whose deadline is over
//! stops (see `Plugin::load`'s callback).

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use wasmtime::Engine;

/// The deadlines of the calls in progress, for the engine's watchdog.
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
}

struct Shared {
    /// Each call's deadline, with a number of its own to tell equal ones
    /// apart.
    pending: Mutex<Pending>,
    changed: Condvar,
}

#[derive(Default)]
struct Pending {
    deadlines: BTreeSet<(Instant, u64)>,
    next_id: u64,
}

/// A registered deadline; dropping it ends the registration.
pub(crate) struct Armed<'a> {
    watchdog: &'a Watchdog,
    key: (Instant, u64),
}

impl Watchdog {
    /// Starts the thread that advances `engine`'s epoch.
    pub(crate) fn start(engine: Engine) -> std::io::Result<Watchdog> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            changed: Condvar::new(),
        });
        let theirs = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("nri-wasm-deadline".into())
            .spawn(move || theirs.run(&engine))?;
        Ok(Watchdog { shared })
    }

    /// Registers a call that must end by `at`.
    pub(crate) fn arm(&self, at: Instant) -> Armed<'_> {
        let mut pending = self.shared.lock();
        let key = (at, pending.next_id);
        pending.next_id += 1;
        let earliest = pending.deadlines.first().is_none_or(|first| key < *first);
        pending.deadlines.insert(key);
        drop(pending);
        if earliest {
            self.shared.changed.notify_one();
        }
        Armed {
            watchdog: self,
            key,
        }
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        // Already gone if it passed; the thread wakes for nothing at worst.
        self.watchdog.shared.lock().deadlines.remove(&self.key);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The watchdog's loop; it lives as long as the process (the engine is
    /// the process's, see `Host`).
    fn run(&self, engine: &Engine) {
        let mut pending = self.lock();
        loop {
            let Some(&(earliest, _)) = pending.deadlines.first() else {
                pending = self
                    .changed
                    .wait(pending)
                    .unwrap_or_else(|e| e.into_inner());
                continue;
            };
            let now = Instant::now();
            if earliest > now {
                pending = self
                    .changed
                    .wait_timeout(pending, earliest - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                continue;
            }
            // Passed deadlines are dropped here, so that a call that takes
            // a moment to notice does not make the thread spin meanwhile.
            while pending.deadlines.first().is_some_and(|(at, _)| *at <= now) {
                pending.deadlines.pop_first();
            }
            engine.increment_epoch();
        }
    }
}
