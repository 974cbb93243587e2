//! The runtime's lever to hold synchronization off ([`PluginSyncBlock`],
//! upstream's `BlockPluginSync`) and the gate behind it.
//!
//! Upstream's lock is a writer-preferring RWMutex: a plugin that connects
//! while one CRI call holds a block (a StopContainer holds it for its whole
//! grace period) waits for the write side, and every later call's block
//! waits behind it: the whole node stalls until the first call ends. Here
//! a sync waits only for the blocks taken before it began, a grace period
//! in the RCU sense. Blocks taken meanwhile go ahead; what their events
//! tell the joining plugin is kept for it (`joining.rs`). Only once the
//! grace period is over and the plugin is actually being synchronized do
//! new blocks wait, as upstream's do, until it is active: runtimes (and
//! upstream's own tests) take a block as the barrier after which a plugin
//! that has answered its Synchronize is registered.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;

use crate::Error;

/// Most plugins that may wait for their turn to synchronize; a plugin
/// arriving when this many wait is refused.
pub(crate) const MAX_WAITING_SYNCS: usize = 64;

/// Which blocks are held, and whether a sync is past its grace period.
#[derive(Default)]
struct Gate {
    /// The period new blocks belong to; a sync beginning ends it.
    epoch: u64,
    /// Blocks held, by the period they were taken in.
    held: BTreeMap<u64, usize>,
    /// A plugin is being synchronized: new blocks wait.
    syncing: bool,
}

/// The gate behind [`PluginSyncBlock`]: runtimes hold blocks across CRI
/// operations; a sync waits for those held when it began.
///
/// Syncs take turns, so at most one is past its grace period at a time,
/// and a runtime call waits for at most that one.
pub(crate) struct SyncLock {
    gate: Arc<watch::Sender<Gate>>,
    turn: tokio::sync::Mutex<()>,
    waiting: tokio::sync::Semaphore,
}

impl Default for SyncLock {
    fn default() -> Self {
        SyncLock {
            gate: Arc::new(watch::Sender::new(Gate::default())),
            turn: tokio::sync::Mutex::new(()),
            waiting: tokio::sync::Semaphore::new(MAX_WAITING_SYNCS),
        }
    }
}

/// A sync's turn: held from before it begins until the plugin is active.
pub(crate) struct SyncTurn<'a> {
    gate: &'a watch::Sender<Gate>,
    syncing: bool,
    _turn: tokio::sync::MutexGuard<'a, ()>,
    _waiting: tokio::sync::SemaphorePermit<'a>,
}

impl SyncLock {
    /// A block; it waits only while a plugin is being synchronized. It
    /// counts from the call on, waiting or not, so the next sync's grace
    /// period waits for it: a runtime call waits for at most one sync,
    /// however many plugins queue to synchronize.
    pub(crate) async fn block(&self) -> PluginSyncBlock {
        let mut epoch = 0;
        self.gate.send_modify(|g| {
            epoch = g.epoch;
            *g.held.entry(epoch).or_default() += 1;
        });
        let held = Held {
            gate: Arc::clone(&self.gate),
            epoch,
        };
        let mut seen = self.gate.subscribe();
        let _ = seen.wait_for(|g| !g.syncing).await;
        PluginSyncBlock(Some(held))
    }

    pub(crate) fn block_blocking(&self) -> PluginSyncBlock {
        futures::executor::block_on(self.block())
    }

    /// Waits for this sync's turn; refused at once if [`MAX_WAITING_SYNCS`]
    /// syncs are waiting already.
    pub(crate) async fn turn(&self) -> Result<SyncTurn<'_>, Error> {
        let waiting = self.waiting.try_acquire().map_err(|_| {
            Error::Start(format!(
                "{MAX_WAITING_SYNCS} plugins are already waiting to synchronize"
            ))
        })?;
        let turn = self.turn.lock().await;
        Ok(SyncTurn {
            gate: &self.gate,
            syncing: false,
            _turn: turn,
            _waiting: waiting,
        })
    }

    /// Blocks held now (for tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.gate.borrow().held.values().sum()
    }
}

impl SyncTurn<'_> {
    /// Begins the sync: waits until every block taken before this call is
    /// released, then holds new blocks off until the turn is dropped.
    /// Blocks taken while it waits are not waited for.
    pub(crate) async fn grace_period(&mut self) {
        let mut fence = 0;
        self.gate.send_modify(|g| {
            g.epoch += 1;
            fence = g.epoch;
        });
        let mut seen = self.gate.subscribe();
        let _ = seen
            .wait_for(|g| g.held.range(..fence).next().is_none())
            .await;
        self.gate.send_modify(|g| g.syncing = true);
        self.syncing = true;
    }
}

impl Drop for SyncTurn<'_> {
    fn drop(&mut self) {
        if self.syncing {
            self.gate.send_modify(|g| g.syncing = false);
        }
    }
}

/// A block counted in the gate until dropped.
struct Held {
    gate: Arc<watch::Sender<Gate>>,
    epoch: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        let epoch = self.epoch;
        self.gate.send_modify(|g| {
            if let Some(n) = g.held.get_mut(&epoch) {
                *n -= 1;
                if *n == 0 {
                    g.held.remove(&epoch);
                }
            }
        });
    }
}

/// Holds off the synchronization of newly connecting plugins until
/// [`unblock`](Self::unblock)ed or dropped (upstream `PluginSyncBlock`).
/// A plugin that connects meanwhile waits to synchronize; runtime calls
/// that take a block after it connected do not wait for it.
#[must_use = "dropping the block releases it at once"]
pub struct PluginSyncBlock(Option<Held>);

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
    use std::time::Duration;

    /// Whether `f` is still pending after the other tasks had their go.
    async fn pending<F: std::future::Future + Unpin>(f: &mut F) -> bool {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        futures::poll!(f).is_pending()
    }

    #[tokio::test]
    async fn a_block_taken_while_a_sync_waits_for_earlier_blocks_does_not_wait() {
        let lock = Arc::new(SyncLock::default());
        let early = lock.block().await;
        let l = Arc::clone(&lock);
        let (began, began_rx) = tokio::sync::oneshot::channel();
        let sync = tokio::spawn(async move {
            let mut turn = l.turn().await.unwrap();
            {
                let grace = turn.grace_period();
                tokio::pin!(grace);
                assert!(futures::poll!(grace.as_mut()).is_pending());
                began.send(()).unwrap();
                grace.await;
            }
            drop(turn);
        });
        began_rx.await.unwrap();
        // Upstream's lock would hold this behind the waiting sync.
        let late = tokio::time::timeout(Duration::from_millis(100), lock.block())
            .await
            .expect("a later block waited for the sync");
        assert_eq!(lock.held(), 2);
        // The sync ends its grace period with the early block, not the
        // late one.
        drop(early);
        sync.await.unwrap();
        drop(late);
        assert_eq!(lock.held(), 0);
    }

    #[tokio::test]
    async fn blocks_wait_while_a_plugin_is_synchronized_and_go_on_after() {
        let lock = SyncLock::default();
        let mut turn = lock.turn().await.unwrap();
        turn.grace_period().await;
        let mut block = Box::pin(lock.block());
        assert!(pending(&mut block).await, "a block went ahead of a sync");
        drop(turn);
        let mut block = block.await;
        block.unblock();
        block.unblock();
        assert_eq!(lock.held(), 0);
    }

    #[tokio::test]
    async fn syncs_take_turns_and_only_so_many_may_wait() {
        let lock = Arc::new(SyncLock::default());
        let first = lock.turn().await.unwrap();
        let mut waiting = Vec::new();
        for _ in 1..MAX_WAITING_SYNCS {
            let l = Arc::clone(&lock);
            waiting.push(tokio::spawn(async move {
                let mut turn = l.turn().await.unwrap();
                turn.grace_period().await;
            }));
        }
        while lock.waiting.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        let refused = lock.turn().await.err().expect("one too many");
        assert_eq!(
            refused.to_string(),
            format!("{MAX_WAITING_SYNCS} plugins are already waiting to synchronize")
        );
        drop(first);
        for w in waiting {
            w.await.unwrap();
        }
        assert_eq!(lock.waiting.available_permits(), MAX_WAITING_SYNCS);
        // Every sync gave the gate back.
        let _block = lock.block().await;
    }
}
