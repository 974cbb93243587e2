//! Synchronizing a plugin with the runtime's pods and containers, split into
//! several messages when one would exceed the ttrpc message limit, and the
//! runtime's lever to hold synchronization off (`BlockPluginSync`).

use std::sync::Arc;

use protobuf::Message;
use tokio::sync::{OwnedRwLockReadGuard, RwLock};

use super::plugin::Plugin;
use super::Error;
use crate::api::{Container, ContainerUpdate, PodSandbox, SynchronizeRequest};

/// The largest ttrpc request envelope a peer accepts (both Go and Rust ttrpc).
pub(crate) const MAX_TTRPC_MESSAGE: usize = 4 << 20;

/// Fewest objects per message worth splitting further (upstream's floor).
const MIN_OBJECTS_PER_MESSAGE: usize = 8;

const SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";
const METHOD: &str = "Synchronize";

/// Bytes of a length-delimited protobuf field holding `len` bytes.
fn field_size(len: usize) -> usize {
    1 + protobuf::rt::compute_raw_varint64_size(len as u64) as usize + len
}

/// The size of the ttrpc request envelope carrying `req`.
#[cfg(test)]
fn envelope_size(req: &SynchronizeRequest) -> usize {
    envelope_size_for(req.compute_size() as usize)
}

/// The size of the ttrpc request envelope carrying a payload of `payload` bytes.
fn envelope_size_for(payload: usize) -> usize {
    // service, method, payload, and at most 11 bytes of timeout_nano.
    field_size(SERVICE.len()) + field_size(METHOD.len()) + field_size(payload) + 11
}

/// The encoded size of a `SynchronizeRequest` whose repeated fields hold
/// objects of these encoded sizes (field tags below 16: one byte each).
fn payload_size(pods: &[usize], ctrs: &[usize], more: bool) -> usize {
    pods.iter()
        .chain(ctrs)
        .map(|&n| field_size(n))
        .sum::<usize>()
        + if more { 2 } else { 0 }
}

/// Sends the state to `plugin` and returns the updates of its final reply.
/// Everything goes in one message if it fits; otherwise in chunks whose
/// size shrinks as upstream's does. One deadline covers all messages.
///
/// Each object is sized once and a chunk's size is added up from those
/// sizes, so no message is built only to find it too large; a chunk's
/// objects are moved into its message, never copied.
pub(crate) async fn synchronize(
    plugin: &Plugin,
    pods: Vec<PodSandbox>,
    containers: Vec<Container>,
    timeout: std::time::Duration,
) -> Result<Vec<ContainerUpdate>, Error> {
    let deadline = tokio::time::Instant::now() + timeout;
    let pod_sizes: Vec<usize> = pods.iter().map(|p| p.compute_size() as usize).collect();
    let ctr_sizes: Vec<usize> = containers
        .iter()
        .map(|c| c.compute_size() as usize)
        .collect();
    let (mut pod_sizes, mut ctr_sizes) = (&pod_sizes[..], &ctr_sizes[..]);
    let mut pods = pods.into_iter();
    let mut ctrs = containers.into_iter();
    let (mut pods_per_msg, mut ctrs_per_msg) = (pod_sizes.len(), ctr_sizes.len());
    loop {
        // Shrinking truncates: a count of 0 would never send that kind of
        // object and loop until the deadline (upstream does), so at least 1.
        let np = pods_per_msg.max(1).min(pod_sizes.len());
        let nc = ctrs_per_msg.max(1).min(ctr_sizes.len());
        let more = np < pod_sizes.len() || nc < ctr_sizes.len();
        let size = envelope_size_for(payload_size(&pod_sizes[..np], &ctr_sizes[..nc], more));
        if size > MAX_TTRPC_MESSAGE {
            (pods_per_msg, ctrs_per_msg) = smaller_chunks(np, nc, size)?;
            continue;
        }
        let req = SynchronizeRequest {
            pods: pods.by_ref().take(np).collect(),
            containers: ctrs.by_ref().take(nc).collect(),
            more,
            ..Default::default()
        };
        (pod_sizes, ctr_sizes) = (&pod_sizes[np..], &ctr_sizes[nc..]);
        let rpl = plugin.send_synchronize(&req, deadline).await?;
        if !req.more {
            return Ok(rpl.update);
        }
        if !rpl.more || !rpl.update.is_empty() {
            return Err(Error::Start(
                "plugin does not handle split sync requests".to_string(),
            ));
        }
    }
}

/// The next per-message counts after a message of `size` bytes carrying
/// `pods` + `ctrs` objects was too large.
fn smaller_chunks(pods: usize, ctrs: usize, size: usize) -> Result<(usize, usize), Error> {
    if pods + ctrs <= MIN_OBJECTS_PER_MESSAGE {
        return Err(Error::Start(
            "failed to synchronize plugin with split messages".to_string(),
        ));
    }
    let factor = (MAX_TTRPC_MESSAGE as f64 / size as f64).min(0.9);
    let (p, c) = (
        (pods as f64 * factor) as usize,
        (ctrs as f64 * factor) as usize,
    );
    // Upstream then slices 4 pods even if fewer remain; the caller clamps.
    Ok(if p + c < MIN_OBJECTS_PER_MESSAGE {
        (4, 4)
    } else {
        (p, c)
    })
}

/// The lock behind [`PluginSyncBlock`]: runtimes hold it shared across CRI
/// operations; synchronizing a new plugin takes it exclusively.
#[derive(Default)]
pub(crate) struct SyncLock(Arc<RwLock<()>>);

impl SyncLock {
    pub(crate) async fn block(&self) -> PluginSyncBlock {
        PluginSyncBlock(Some(Arc::clone(&self.0).read_owned().await))
    }

    pub(crate) fn block_blocking(&self) -> PluginSyncBlock {
        PluginSyncBlock(Some(futures::executor::block_on(
            Arc::clone(&self.0).read_owned(),
        )))
    }

    pub(crate) async fn exclusive(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        Arc::clone(&self.0).write_owned().await
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

    #[test]
    fn chunks_shrink_by_at_most_ninety_percent() {
        assert_eq!(
            smaller_chunks(100, 1000, 2 * MAX_TTRPC_MESSAGE).unwrap(),
            (50, 500)
        );
        assert_eq!(
            smaller_chunks(100, 1000, MAX_TTRPC_MESSAGE + 1).unwrap(),
            (90, 900)
        );
    }

    #[test]
    fn chunks_never_go_below_four_and_four() {
        assert_eq!(
            smaller_chunks(2, 10, 100 * MAX_TTRPC_MESSAGE).unwrap(),
            (4, 4)
        );
        let err = smaller_chunks(4, 4, 2 * MAX_TTRPC_MESSAGE).unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to synchronize plugin with split messages"
        );
    }

    #[test]
    fn payload_size_is_the_encoded_size() {
        let pods: Vec<PodSandbox> = (0..3)
            .map(|i| PodSandbox {
                id: format!("pod-{i}").repeat(40 * i + 1),
                ..Default::default()
            })
            .collect();
        let ctrs: Vec<Container> = (0..5)
            .map(|i| Container {
                id: "c".repeat(100 * i),
                pod_sandbox_id: "pod-0".into(),
                args: vec!["x".repeat(200); i],
                ..Default::default()
            })
            .collect();
        for more in [false, true] {
            let req = SynchronizeRequest {
                pods: pods.clone(),
                containers: ctrs.clone(),
                more,
                ..Default::default()
            };
            let pod_sizes: Vec<usize> = pods.iter().map(|p| p.compute_size() as usize).collect();
            let ctr_sizes: Vec<usize> = ctrs.iter().map(|c| c.compute_size() as usize).collect();
            assert_eq!(
                payload_size(&pod_sizes, &ctr_sizes, more),
                req.write_to_bytes().unwrap().len()
            );
            assert_eq!(
                envelope_size_for(payload_size(&pod_sizes, &ctr_sizes, more)),
                envelope_size(&req)
            );
        }
    }

    #[test]
    fn envelope_size_accounts_for_the_ttrpc_request() {
        let req = SynchronizeRequest::default();
        let empty = envelope_size(&req);
        assert!(empty > SERVICE.len() + METHOD.len());
        let big = SynchronizeRequest {
            containers: vec![Container {
                id: "x".repeat(1000),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(envelope_size(&big) > empty + 1000);
    }

    #[tokio::test]
    async fn a_sync_waits_for_blocks_and_new_blocks_wait_for_the_sync() {
        let lock = SyncLock::default();
        let mut block = lock.block().await;
        let lock = Arc::new(lock);
        let l2 = Arc::clone(&lock);
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let sync = tokio::spawn(async move {
            let _g = l2.exclusive().await;
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
