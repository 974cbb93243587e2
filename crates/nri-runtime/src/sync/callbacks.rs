//! What the runtime plugs into the adaptation: its state synchronization and
//! container update functions (its metrics sink and deprecation recorder
//! are in `metrics.rs`).

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::sync::{EncodedState, StateSource, SyncRecorder, SyncTargets};
use crate::threads::runtime::NextStop;
use crate::{BoxError, Error};
use nri_api::{Container, ContainerUpdate, PodSandbox};

/// The runtime's state synchronization (upstream `SyncFn`).
///
/// Called when plugins need the runtime's state: once in
/// [`Adaptation::start`](crate::Adaptation::start) for all pre-installed
/// plugins, then once per plugin that connects later. The runtime must hold
/// its own lock, snapshot its pods and containers, call [`SyncCb::call`],
/// apply the updates it returns, and return an error to reject the
/// plugin(s). It must not call the adaptation's event methods meanwhile.
pub trait SyncFn: Send + Sync + 'static {
    fn sync(&self, cb: SyncCb) -> BoxFuture<'static, Result<(), BoxError>>;
}

impl<F, Fut> SyncFn for F
where
    F: Fn(SyncCb) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    fn sync(&self, cb: SyncCb) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(self(cb))
    }
}

/// The runtime's handler of unsolicited container updates requested by
/// plugins (upstream `UpdateFn`). Returns the updates that failed.
pub trait UpdateFn: Send + Sync + 'static {
    fn update(
        &self,
        updates: Vec<ContainerUpdate>,
    ) -> BoxFuture<'static, Result<Vec<ContainerUpdate>, BoxError>>;
}

impl<F, Fut> UpdateFn for F
where
    F: Fn(Vec<ContainerUpdate>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<ContainerUpdate>, BoxError>> + Send + 'static,
{
    fn update(
        &self,
        updates: Vec<ContainerUpdate>,
    ) -> BoxFuture<'static, Result<Vec<ContainerUpdate>, BoxError>> {
        Box::pin(self(updates))
    }
}

/// Hands the runtime's state to the plugin(s) being synchronized (upstream
/// `SyncCB`). Cheap to clone; usable from any thread.
#[derive(Clone)]
pub struct SyncCb {
    targets: Arc<SyncTargets>,
    recorder: Option<Arc<dyn SyncRecorder>>,
    stop: NextStop,
}

impl SyncCb {
    pub(crate) fn new(
        targets: SyncTargets,
        recorder: Option<Arc<dyn SyncRecorder>>,
        stop: NextStop,
    ) -> SyncCb {
        SyncCb {
            targets: Arc::new(targets),
            recorder,
            stop,
        }
    }

    /// Synchronizes the plugin(s) with these pods and containers and returns
    /// the container updates they asked for, for the runtime to apply.
    pub async fn call(
        &self,
        pods: Vec<PodSandbox>,
        containers: Vec<Container>,
    ) -> Result<Vec<ContainerUpdate>, Error> {
        let (pods, containers) = EncodedState::encode(&pods, &containers).map_err(|e| {
            Error::Runtime(format!("cannot encode the runtime's state: {e}").into())
        })?;
        self.call_encoded(&EncodedState::new(&pods, &containers))
            .await
    }

    /// As [`call`](Self::call), with the state already encoded: how the C
    /// ABI hands it over, so that it is forwarded without being decoded.
    pub async fn call_encoded(
        &self,
        state: &EncodedState<'_>,
    ) -> Result<Vec<ContainerUpdate>, Error> {
        self.call_source(state).await
    }

    /// As [`call`](Self::call), with the state encoded a message at a time
    /// as synchronizing needs it: how the C ABI's `nri_sync_cb_stream`
    /// hands it over, so that the runtime never holds all of it encoded.
    ///
    /// Once the adaptation is stopped it fails with [`Error::NotRunning`]
    /// and reaches no plugin: the runtime's callback may still be running
    /// on its own thread while the adaptation's runtime shuts down, whose
    /// timers must not be touched then (tokio panics).
    pub async fn call_source(
        &self,
        state: &dyn StateSource,
    ) -> Result<Vec<ContainerUpdate>, Error> {
        // Biased: once stopped, `wait` is ready at its first poll, and the
        // sync's timers are never touched.
        let mut stop = self.stop.clone();
        tokio::select! {
            biased;
            () = stop.wait() => Err(Error::NotRunning),
            result = self.targets.synchronize(state, self.recorder.as_deref()) => result,
        }
    }
}

impl std::fmt::Debug for SyncCb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SyncCb")
    }
}
