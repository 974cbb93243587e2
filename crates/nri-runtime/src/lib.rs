//! The runtime side of NRI (upstream `pkg/adaptation`): launches and accepts
//! plugins, relays pod and container events to them in index order, merges
//! their adjustments and updates, and has validators vet the result.
//!
//! ```no_run
//! # async fn demo() -> Result<(), nri_runtime::Error> {
//! use nri_runtime::{Adaptation, BoxError, Options, SyncCb};
//! use nri_api::ContainerUpdate;
//!
//! let nri = Adaptation::new(
//!     "my-runtime",
//!     "v1.0",
//!     |cb: SyncCb| async move {
//!         // Snapshot pods and containers under the runtime's lock...
//!         let updates = cb.call(vec![], vec![]).await?;
//!         // ...and apply `updates`.
//!         Ok::<_, BoxError>(())
//!     },
//!     |updates: Vec<ContainerUpdate>| async move {
//!         // Apply unsolicited updates; return those that failed.
//!         Ok::<_, BoxError>(Vec::new())
//!     },
//!     Options::default().socket_path("/tmp/nri.sock")?,
//! )?;
//! nri.start().await?;
//! # Ok(()) }
//! ```
//!
//! Threading: all plugin I/O runs on one tokio runtime, by default a
//! current-thread runtime on a thread of its own (a ttrpc round trip is
//! several times cheaper there than on a multi-thread runtime on small
//! machines; see docs/ARCHITECTURE.md). The event methods can be awaited
//! from any runtime and are serialized, as upstream's are.

/// The protocol crate, re-exported: the runtime's API speaks its types.
pub use nri_api as api;
/// The default validator, re-exported for [`Options::default_validator`].
pub use nri_validator as validator;

// Each folder is one concern; the arrows between them go one way (see
// docs/ARCHITECTURE.md, and `make lint`, which checks both the folders'
// rules and that no two modules import each other in a circle).
mod adaptation;
mod connections;
mod core_state;
mod error;
mod event_lock;
mod events;
mod metrics;
mod options;
mod plugins;
mod results;
mod sync;
mod threads;

pub use adaptation::Adaptation;
pub use error::{BoxError, CallCause, Error};
pub use metrics::{Deprecation, DeprecationRecorder, Metrics};
pub use options::{
    set_plugin_registration_timeout, set_plugin_request_timeout, OptionError, Options,
    DEFAULT_PLUGIN_CONFIG_PATH, DEFAULT_PLUGIN_PATH, DEFAULT_SOCKET_PATH, NRI_VERSION,
};
pub use plugins::builtin::{BuiltinHandlers, BuiltinPlugin};
pub use plugins::identity::{IdentityPolicy, PeerIdentity, PolicyError};
pub use plugins::wasm::{
    WasmEngine, WasmFailure, WasmModule, DEFAULT_WASM_CACHE_DIR, DEFAULT_WASM_MEMORY_LIMIT,
    WASM_SUPPORTED,
};
pub use results::audit::{
    AuditChange, AuditContainer, AuditPlugin, AuditPod, AuditRecord, AuditSink, AuditVerdict,
    Omitted, DEFAULT_AUDIT_RECORD_LIMIT,
};
pub use sync::callbacks::{SyncCb, SyncFn, UpdateFn};
pub use sync::{EncodedState, PluginSyncBlock, StateSource};
pub use threads::caller::block_on_event;
pub use threads::runtime::core_threads;

pub(crate) use core_state::Core;

/// Hooks for the fuzz targets in `fuzz/` (cargo feature `fuzzing`): the
/// reply merge the events run, and the step count that bounds its work.
/// Not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::results::{CreateResult, MergeError, StopResult, UpdateResult};

    /// Elementary merge steps counted on this thread so far (see
    /// `result/work.rs`); a merge's work is the difference across it.
    pub fn merge_steps() -> u64 {
        crate::results::steps_so_far()
    }
}
