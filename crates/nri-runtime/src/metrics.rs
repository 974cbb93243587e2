//! What the adaptation reports about its plugins as they work: metrics
//! and the use of deprecated features. Plugins report here while events
//! run, so these traits sit below everything that handles plugins.

use std::time::Duration;

use nri_api::ContainerAdjustment;

use crate::Error;

/// Plugin metrics (upstream `Metrics`). `plugin` is the full `idx-name`,
/// `op` the event's pretty name or `Synchronize`. Called while events are
/// dispatched, from the adaptation's thread or, for an event that waits
/// for one plugin, from the thread polling the event: keep it quick.
pub trait Metrics: Send + Sync + 'static {
    /// Every relayed call, failed ones included; not unsubscribed events.
    fn record_plugin_invocation(&self, _plugin: &str, _op: &str, _err: Option<&Error>) {}
    fn record_plugin_latency(&self, _plugin: &str, _op: &str, _latency: Duration) {}
    fn record_plugin_adjustments(
        &self,
        _plugin: &str,
        _op: &str,
        _adjust: Option<&ContainerAdjustment>,
        _updates: usize,
        _evicts: usize,
    ) {
    }
    /// The number of active plugins, after every event and registration.
    fn update_plugin_count(&self, _count: usize) {}
}

/// The default metrics sink: records nothing.
pub(crate) struct NoMetrics;
impl Metrics for NoMetrics {}

/// A deprecated NRI feature a plugin still uses (upstream `Deprecation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Deprecation {
    /// The plugin has no dedicated RPC for an event and gets `StateChange`.
    StateChange = 1,
}

impl std::fmt::Display for Deprecation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Deprecation::StateChange => f.write_str("deprecated StateChange"),
        }
    }
}

/// Told about plugins using deprecated features (upstream
/// `DeprecationRecorder`), once per plugin, feature and event, where the
/// event runs (see [`Metrics`]).
pub trait DeprecationRecorder: Send + Sync + 'static {
    fn plugin_warning(&self, deprecation: Deprecation, plugin: &str, details: &str);
}
