//! Threads that wait for an event and do nothing else meanwhile: the C
//! ABI's callers, blocked in each event call. What an event would hand to
//! another thread only to wait for it (a WASM module's call) can run on
//! such a thread instead, which saves two thread wake-ups and, for a module
//! on the engine the host lent, a callback into the host from a thread the
//! host did not create.

use std::cell::Cell;
use std::future::Future;

thread_local! {
    static WAITING: Cell<bool> = const { Cell::new(false) };
}

/// Runs an event's future to its end on the calling thread, which blocks
/// until then; work of the event that would block a thread may run on this
/// one. For a caller with nothing else to do meanwhile: never from an
/// async task.
pub fn block_on_event<F: Future>(f: F) -> F::Output {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            WAITING.with(|w| w.set(self.0));
        }
    }
    let _restore = Restore(WAITING.with(|w| w.replace(true)));
    futures::executor::block_on(f)
}

/// Whether the current thread is one that [`block_on_event`] blocks.
pub(crate) fn caller_waits() -> bool {
    WAITING.with(|w| w.get())
}
