//! The runtime's lever to hold synchronization off ([`PluginSyncBlock`],
//! upstream's `BlockPluginSync`) and the lock behind it.

use std::sync::Arc;

use tokio::sync::{OwnedRwLockReadGuard, RwLock};

use crate::Error;

/// Most plugins that may wait for their turn to synchronize; a plugin
/// arriving when this many wait is refused.
pub(crate) const MAX_WAITING_SYNCS: usize = 64;

/// The lock behind [`PluginSyncBlock`]: runtimes hold it shared across CRI
/// operations; synchronizing a new plugin takes it exclusively.
///
/// Syncs take turns before they ask for the lock, so at most one of them
/// waits for it or holds it. The lock is fair: had every waiting sync asked
/// for it, a runtime call arriving behind twenty plugins that never answer
/// Synchronize would wait for twenty timeouts; now it waits for one sync.
pub(crate) struct SyncLock {
    lock: Arc<RwLock<()>>,
    turn: tokio::sync::Mutex<()>,
    waiting: tokio::sync::Semaphore,
}

impl Default for SyncLock {
    fn default() -> Self {
        SyncLock {
            lock: Arc::default(),
            turn: tokio::sync::Mutex::new(()),
            waiting: tokio::sync::Semaphore::new(MAX_WAITING_SYNCS),
        }
    }
}

/// A sync's exclusive hold of the [`SyncLock`].
pub(crate) struct SyncTurn<'a> {
    _lock: tokio::sync::OwnedRwLockWriteGuard<()>,
    _turn: tokio::sync::MutexGuard<'a, ()>,
    _waiting: tokio::sync::SemaphorePermit<'a>,
}

impl SyncLock {
    pub(crate) async fn block(&self) -> PluginSyncBlock {
        PluginSyncBlock(Some(Arc::clone(&self.lock).read_owned().await))
    }

    pub(crate) fn block_blocking(&self) -> PluginSyncBlock {
        PluginSyncBlock(Some(futures::executor::block_on(
            Arc::clone(&self.lock).read_owned(),
        )))
    }

    /// Waits for this sync's turn, then for the lock; refused at once if
    /// [`MAX_WAITING_SYNCS`] syncs are waiting already.
    pub(crate) async fn exclusive(&self) -> Result<SyncTurn<'_>, Error> {
        let waiting = self.waiting.try_acquire().map_err(|_| {
            Error::Start(format!(
                "{MAX_WAITING_SYNCS} plugins are already waiting to synchronize"
            ))
        })?;
        let turn = self.turn.lock().await;
        let lock = Arc::clone(&self.lock).write_owned().await;
        Ok(SyncTurn {
            _lock: lock,
            _turn: turn,
            _waiting: waiting,
        })
    }
}

/// Holds off the synchronization of newly connecting plugins until
/// [`unblock`](Self::unblock)ed or dropped (upstream `PluginSyncBlock`).
#[must_use = "dropping the block releases it at once"]
pub struct PluginSyncBlock(Option<OwnedRwLockReadGuard<()>>);

impl PluginSyncBlock {
    /// Releases the block; later calls do nothing.
    pub fn unblock(&mut self) {
        self.0.take();
    }
}

impl std::fmt::Debug for PluginSyncBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PluginSyncBlock")
            .field(&self.0.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn syncs_take_turns_and_only_so_many_may_wait() {
        let lock = Arc::new(SyncLock::default());
        let first = lock.exclusive().await.unwrap();
        let mut waiting = Vec::new();
        for _ in 1..MAX_WAITING_SYNCS {
            let l = Arc::clone(&lock);
            waiting.push(tokio::spawn(async move {
                let _turn = l.exclusive().await.unwrap();
            }));
        }
        while lock.waiting.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        let refused = lock.exclusive().await.err().expect("one too many");
        assert_eq!(
            refused.to_string(),
            format!("{MAX_WAITING_SYNCS} plugins are already waiting to synchronize")
        );
        // A runtime call is next after the sync holding the lock, however
        // many syncs wait.
        let l = Arc::clone(&lock);
        let block = tokio::spawn(async move { l.block().await });
        tokio::task::yield_now().await;
        drop(first);
        let _block = block.await.unwrap();
        assert!(waiting.iter().all(|w| !w.is_finished()));
        drop(_block);
        for w in waiting {
            w.await.unwrap();
        }
        assert_eq!(lock.waiting.available_permits(), MAX_WAITING_SYNCS);
    }

    #[tokio::test]
    async fn a_sync_waits_for_blocks_and_new_blocks_wait_for_the_sync() {
        let lock = SyncLock::default();
        let mut block = lock.block().await;
        let lock = Arc::new(lock);
        let l2 = Arc::clone(&lock);
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let sync = tokio::spawn(async move {
            let _g = l2.exclusive().await.unwrap();
            tx.send(()).unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        });
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "sync ran while blocked");
        block.unblock();
        block.unblock();
        sync.await.unwrap();
        let _b = lock.block().await;
    }
}
