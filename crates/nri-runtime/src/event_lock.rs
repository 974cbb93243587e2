//! Who may run an event when. By default events run one at a time, as
//! upstream's adaptation lock has them. With pod concurrency
//! ([`Options::pod_concurrency`](crate::Options::pod_concurrency)) the
//! events of one pod still run one at a time and in order, and those of
//! different pods at once. Either way, stopping the adaptation and making a
//! joining plugin active wait until no event runs ([`EventLock::all`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedMutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(crate) struct EventLock {
    /// Held shared by events of a pod, exclusively by the rest.
    all: RwLock<()>,
    /// With pod concurrency: one turn per pod with an event running or
    /// waiting; a pod's entry goes with its last event.
    pods: Option<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

/// An event's hold on the lock, until dropped.
pub(crate) enum EventTurn<'a> {
    Alone {
        _all: RwLockWriteGuard<'a, ()>,
    },
    // Fields drop in order: the pod's turn goes before the shared hold.
    OfPod {
        _pod: PodTurn<'a>,
        _shared: RwLockReadGuard<'a, ()>,
    },
}

pub(crate) struct PodTurn<'a> {
    turn: Option<OwnedMutexGuard<()>>,
    pod: String,
    pods: &'a Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl EventLock {
    pub(crate) fn new(by_pod: bool) -> EventLock {
        EventLock {
            all: RwLock::new(()),
            pods: by_pod.then(Mutex::default),
        }
    }

    /// Whether events of different pods may run at once.
    pub(crate) fn by_pod(&self) -> bool {
        self.pods.is_some()
    }

    /// Waits for an event's turn: after the events of `pod` before it, or,
    /// without pod concurrency or a pod, after every event before it.
    pub(crate) async fn event(&self, pod: Option<&str>) -> EventTurn<'_> {
        let (Some(pods), Some(pod)) = (&self.pods, pod) else {
            return EventTurn::Alone {
                _all: self.all.write().await,
            };
        };
        let shared = self.all.read().await;
        let turn = {
            let mut map = pods.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(map.entry(pod.to_string()).or_default())
        };
        let turn = turn.lock_owned().await;
        EventTurn::OfPod {
            _pod: PodTurn {
                turn: Some(turn),
                pod: pod.to_string(),
                pods,
            },
            _shared: shared,
        }
    }

    /// Waits until no event runs, and holds every later one off.
    pub(crate) async fn all(&self) -> RwLockWriteGuard<'_, ()> {
        self.all.write().await
    }
}

impl Drop for PodTurn<'_> {
    fn drop(&mut self) {
        drop(self.turn.take());
        let mut map = self.pods.lock().unwrap_or_else(|e| e.into_inner());
        // Only the map holds it: no event of this pod runs or waits.
        if map
            .get(&self.pod)
            .is_some_and(|t| Arc::strong_count(t) == 1)
        {
            map.remove(&self.pod);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn held_for<F: std::future::Future>(f: F) -> bool {
        tokio::time::timeout(Duration::from_millis(20), f)
            .await
            .is_err()
    }

    #[tokio::test]
    async fn without_pod_concurrency_events_run_one_at_a_time() {
        let lock = EventLock::new(false);
        let _first = lock.event(Some("a")).await;
        assert!(held_for(lock.event(Some("b"))).await);
    }

    #[tokio::test]
    async fn events_of_different_pods_run_at_once_and_of_one_pod_in_turn() {
        let lock = EventLock::new(true);
        let a = lock.event(Some("a")).await;
        let _b = tokio::time::timeout(Duration::from_millis(20), lock.event(Some("b")))
            .await
            .expect("another pod's event waited");
        assert!(
            held_for(lock.event(Some("a"))).await,
            "a pod's events overlapped"
        );
        assert!(held_for(lock.all()).await, "stop ran during events");
        drop(a);
        let _a = lock.event(Some("a")).await;
    }

    #[tokio::test]
    async fn a_pods_entry_goes_with_its_last_event() {
        let lock = EventLock::new(true);
        drop(lock.event(Some("a")).await);
        let pods = lock.pods.as_ref().unwrap();
        assert!(pods.lock().unwrap().is_empty());
    }
}
