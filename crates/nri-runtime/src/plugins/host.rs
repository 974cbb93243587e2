//! [`Host`]: what a plugin asks of the adaptation that hosts it. The core
//! implements it; a plugin sees nothing else of the core, so everything
//! about plugins sits below the core in the module graph.

use std::time::Duration;

use futures::future::BoxFuture;

use super::timeouts::PluginTimeouts;
use crate::{DeprecationRecorder, Metrics};

pub(crate) trait Host: Send + Sync {
    /// Who the runtime is, as Configure tells a plugin.
    fn runtime_name(&self) -> &str;
    fn runtime_version(&self) -> &str;
    fn nri_version(&self) -> &str;

    /// The adaptation's timeouts (a plugin's own, if it has any, come
    /// from [`Host::plugin_timeouts`]).
    fn registration_timeout(&self) -> Duration;
    fn request_timeout(&self) -> Duration;
    /// The sync timeout the runtime set, if it did (else each sync gets
    /// the default deadline, [`default_sync_timeout`](super::timeouts::default_sync_timeout)).
    fn sync_timeout(&self) -> Option<Duration>;

    /// The runtime's settings for one plugin's timeouts, each by its
    /// `idx-name` or else its name.
    fn plugin_timeouts(&self, name: &str, base: &str) -> PluginTimeouts;

    fn metrics(&self) -> &dyn Metrics;
    fn deprecation(&self) -> Option<&dyn DeprecationRecorder>;

    /// Runs `task` until it ends or the adaptation stops.
    fn spawn(&self, task: BoxFuture<'static, ()>);
    /// Runs teardown that a stop must not cut short.
    fn spawn_teardown(&self, task: BoxFuture<'static, ()>);

    /// A plugin's connection is gone: the next event must prune it.
    fn note_closed(&self);

    /// How many requests a plugin may have in hand at once, when events
    /// of different pods run at once (None when events run in turn): one,
    /// unless the runtime or the plugin's runtime drop-in (`says`) says it
    /// takes them concurrently.
    fn requests_at_once(&self, name: &str, base: &str, says: bool) -> Option<usize>;
}
