//! [`Core`]: what the adaptation, its plugins and their connections share:
//! the runtime's callbacks, the plugin list, the event and sync locks, and
//! the word that says whether it runs and which events its plugins want.

use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use log::info;
use nri_api::*;

use crate::options::{REGISTRATION_TIMEOUT_MS, REQUEST_TIMEOUT_MS};
use crate::plugins::host::Host;
use crate::plugins::plugin::Plugin;
use crate::plugins::timeouts::PluginTimeouts;
use crate::sync::joining::Joining;
use crate::threads::runtime::NextStop;
use crate::{sync, DeprecationRecorder, Error, Metrics, SyncFn, UpdateFn};

/// State shared by the adaptation, its plugins and their connections.
pub(crate) struct Core {
    pub(crate) runtime_name: String,
    pub(crate) runtime_version: String,
    pub(crate) nri_version: String,
    pub(crate) sync_fn: Box<dyn SyncFn>,
    pub(crate) update_fn: Box<dyn UpdateFn>,
    pub(crate) metrics: Arc<dyn Metrics>,
    pub(crate) deprecation: Option<Arc<dyn DeprecationRecorder>>,
    pub(crate) registration_timeout: Option<Duration>,
    pub(crate) request_timeout: Option<Duration>,
    /// [`Options::sync_timeout`](crate::Options::sync_timeout), if set.
    pub(crate) sync_timeout: Option<Duration>,
    pub(crate) event_timeout: Option<Duration>,
    /// Whether stop sends plugins `Shutdown` first ([`Options::shutdown_on_stop`](crate::Options::shutdown_on_stop)).
    pub(crate) shutdown_on_stop: bool,
    /// Timeouts of single plugins, by `idx-name` or name
    /// ([`Options::plugin_request_timeout`](crate::Options::plugin_request_timeout),
    /// [`Options::plugin_sync_timeout`](crate::Options::plugin_sync_timeout)).
    pub(crate) plugin_timeouts: std::collections::HashMap<String, PluginTimeouts>,
    /// Whether a plugin replaces a connected one of its `idx-name`
    /// ([`Options::plugin_handover`](crate::Options::plugin_handover)).
    pub(crate) plugin_handover: bool,
    /// Who may register which names, if the runtime says
    /// ([`Options::plugin_identities`](crate::Options::plugin_identities)).
    pub(crate) identities: Option<crate::IdentityPolicy>,
    /// Where audit records go, if the runtime keeps an audit log.
    pub(crate) audit: Option<Arc<crate::results::audit::Auditor>>,
    /// The names plugins hold (kept only with `identities`).
    pub(crate) names: Arc<crate::plugins::names::Names>,
    /// [`Options::wasm_memory_limit`](crate::Options::wasm_memory_limit).
    pub(crate) wasm_memory_limit: usize,
    /// [`Options::wasm_cache_dir`](crate::Options::wasm_cache_dir).
    pub(crate) wasm_cache_dir: Option<std::path::PathBuf>,
    /// [`Options::wasm_engine`](crate::Options::wasm_engine).
    pub(crate) wasm_engine: Option<std::sync::Arc<dyn crate::WasmEngine>>,
    /// Whether WASM plugins run: built with WASM support, and not turned
    /// off by [`Options::disable_wasm`](crate::Options::disable_wasm).
    pub(crate) wasm_enabled: bool,
    /// Checks a pod's required plugins, when they guard pods
    /// ([`Options::required_plugins_guard_pods`](crate::Options::required_plugins_guard_pods)).
    pub(crate) pod_guard: Option<nri_validator::DefaultValidator>,
    /// The runtime the adaptation's tasks run on; a new one after each
    /// start when the adaptation owns its runtime thread, and none while
    /// stopped then (a handle would keep the ended runtime's fds open).
    pub(crate) handle: RwLock<Option<tokio::runtime::Handle>>,
    /// Bumped by every stop: a task spawned before ends at its next poll,
    /// whichever runtime it runs on.
    pub(crate) epoch: tokio::sync::watch::Sender<u64>,
    /// Whether plugins may be added: false from stop until the next start,
    /// so a handshake or sync that finishes after stop adds nothing.
    /// Written and read under the plugin list's lock.
    pub(crate) accepting: AtomicBool,
    /// Active plugins in invocation order.
    pub(crate) plugins: Mutex<Vec<Arc<Plugin>>>,
    /// Plugins whose sync has begun, and the events kept for them
    /// meanwhile. Locked after `plugins` when both are.
    pub(crate) joining: Mutex<Vec<Arc<Joining>>>,
    /// Serializes events, as upstream's adaptation lock does, or, with pod
    /// concurrency, the events of each pod. Only events, stop and a joining
    /// plugin's activation take it: registration, sync and unsolicited
    /// updates never wait for it.
    pub(crate) events: crate::event_lock::EventLock,
    /// Which plugins take requests of different pods at once (by name or
    /// `idx-name`), with pod concurrency.
    pub(crate) concurrent_plugins: std::collections::HashSet<String>,
    /// Whether the adaptation is running, and the events some active plugin
    /// subscribes to, in one word, so [`Core::wants`] sees both as they were
    /// at one instant. Written only under the plugin list's lock.
    ///
    /// Running is between a successful `start` and `stop`. Events are
    /// refused outside it, since builtin validators only exist while running
    /// and an event let through without them would create an unvalidated
    /// container. Checked under the event lock, which `stop` takes, so an
    /// event either runs entirely before the plugins are closed or not at
    /// all.
    pub(crate) state: AtomicU64,
    pub(crate) sync_lock: sync::lock::SyncLock,
    /// Charged for what connections buffer before their plugin registers.
    pub(crate) unregistered: Arc<nri_api::mux::Budget>,
}

/// Most requests a plugin that takes them concurrently has in hand at once.
/// Upstream's stub closes its whole connection once 256 frames wait for
/// its server (`pkg/net/multiplex`, `readQueueLen`), which a burst of pods
/// would reach; a quarter of that leaves room for the rest of its traffic.
pub(crate) const MAX_REQUESTS_AT_ONCE: usize = 64;

/// The bit of [`Core::state`] saying the adaptation is running; the low 32
/// bits are an [`EventMask`].
pub(crate) const RUNNING: u64 = 1 << 63;

/// The bit of [`Core::state`] saying a plugin in the list is closed: the
/// next event must enter the core, whoever takes it, to prune the plugin
/// and refresh the plugin count, as upstream does at the end of every
/// event.
const PRUNE_PENDING: u64 = 1 << 62;

/// The bit of [`Core::state`] saying a plugin is joining: events keep
/// their requests for it (its events are in the word's mask, so that
/// none skips the core).
const JOINING: u64 = 1 << 61;

impl Core {
    pub(crate) fn handle(&self) -> Option<tokio::runtime::Handle> {
        self.handle
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn set_handle(&self, handle: Option<tokio::runtime::Handle>) {
        *self.handle.write().unwrap_or_else(|e| e.into_inner()) = handle;
    }

    /// Lets plugins be added again (at start).
    pub(crate) fn accept_plugins(&self) {
        let _plugins = self.lock_plugins();
        self.accepting.store(true, Ordering::Release);
    }

    /// Sends every connected plugin `Shutdown`, all at once, waiting at
    /// most one request timeout in all; what a plugin answers, or whether
    /// it answers, changes nothing.
    pub(crate) async fn shut_down_plugins(&self) {
        let plugins: Vec<_> = self
            .snapshot()
            .into_iter()
            .filter(|p| !p.is_builtin() && !p.is_closed())
            .collect();
        if plugins.is_empty() {
            return;
        }
        let timeout = self.request_timeout();
        let all = futures::future::join_all(plugins.iter().map(|p| p.shutdown(timeout)));
        if tokio::time::timeout(timeout, all).await.is_err() {
            info!("not every plugin answered Shutdown within {timeout:?}");
        }
    }

    /// Ends every task spawned so far and every plugin: nothing started
    /// before this call adds a plugin after it.
    pub(crate) fn stop_all(&self) {
        {
            let _plugins = self.lock_plugins();
            self.accepting.store(false, Ordering::Release);
        }
        self.epoch.send_modify(|e| *e += 1);
        self.close_all();
        let joining = {
            let plugins = self.lock_plugins();
            let joining = std::mem::take(&mut *self.lock_joining());
            self.publish_events(&plugins);
            joining
        };
        for j in joining {
            j.plugin.close();
        }
    }

    pub(crate) fn registration_timeout(&self) -> Duration {
        self.registration_timeout.unwrap_or_else(|| {
            Duration::from_millis(REGISTRATION_TIMEOUT_MS.load(Ordering::Relaxed))
        })
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
            .unwrap_or_else(|| Duration::from_millis(REQUEST_TIMEOUT_MS.load(Ordering::Relaxed)))
    }

    /// Spawns a task that ends with the next stop, if not before; once
    /// stopped without a runtime, `f` is dropped unrun.
    pub(crate) fn spawn<F>(&self, f: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Some(handle) = self.handle() else { return };
        let mut stopped = self.next_stop();
        handle.spawn(async move {
            tokio::select! {
                () = f => {}
                () = stopped.wait() => {}
            }
        });
    }

    /// Spawns teardown that a stop must not cut short: it runs to its end,
    /// or until the adaptation's own runtime shuts down (which drops it
    /// without polling it again). ttrpc-rust's server shutdown is such
    /// teardown: dropped while it waits for its listener, the listener's
    /// task panics when it answers.
    pub(crate) fn spawn_teardown<F>(&self, f: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if let Some(handle) = self.handle() {
            handle.spawn(f);
        }
    }

    /// The next stop from now on.
    pub(crate) fn next_stop(&self) -> NextStop {
        let mut epoch = self.epoch.subscribe();
        let started = *epoch.borrow_and_update();
        NextStop::new(epoch, started)
    }

    /// Takes the event lock for one event of `pod`, if the adaptation is
    /// running.
    pub(crate) async fn serialize_event(
        &self,
        pod: Option<&str>,
    ) -> Result<crate::event_lock::EventTurn<'_>, Error> {
        let guard = self.events.event(pod).await;
        if !self.is_running() {
            return Err(Error::NotRunning);
        }
        Ok(guard)
    }

    /// Whether `event` would wait for more than one plugin that is not
    /// builtin (a validating one included, for CreateContainer), as the
    /// plugin list stands now.
    pub(crate) fn waits_for_several(&self, event: Event) -> bool {
        let validates = event == Event::CREATE_CONTAINER;
        self.lock_plugins()
            .iter()
            .filter(|p| p.origin != crate::plugins::plugin::Origin::Builtin)
            .filter(|p| {
                p.will_see(event) || (validates && p.will_see(Event::VALIDATE_CONTAINER_ADJUSTMENT))
            })
            .nth(1)
            .is_some()
    }

    /// The active plugins, for one event.
    pub(crate) fn snapshot(&self) -> Vec<Arc<Plugin>> {
        self.lock_plugins().clone()
    }

    pub(crate) fn lock_plugins(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Plugin>>> {
        self.plugins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `event` must reach the core now. False only while running
    /// with no plugin subscribed to it (for CreateContainer, no validator
    /// either) and no closed plugin left to prune: the event's outcome is
    /// then known without running it, and a caller may skip it, as
    /// upstream costs nothing without plugins. One load of a word published
    /// with the plugin list, so running, the subscriptions and a pending
    /// prune are seen as they were at one instant.
    pub(crate) fn wants(&self, event: Event) -> bool {
        let state = self.state.load(Ordering::Acquire);
        let mask = EventMask::from_raw(state as u32 as i32);
        state & RUNNING == 0
            || state & PRUNE_PENDING != 0
            || !EventMask::VALID.is_set(event)
            || mask.is_set(event)
            || (event == Event::CREATE_CONTAINER
                && mask.is_set(Event::VALIDATE_CONTAINER_ADJUSTMENT))
            // Guarded pods are checked even when no plugin sees them.
            || (event == Event::RUN_POD_SANDBOX && self.pod_guard.is_some())
    }

    pub(crate) fn is_running(&self) -> bool {
        self.state.load(Ordering::Acquire) & RUNNING != 0
    }

    /// Republishes [`Core::state`]; `plugins` is the locked list.
    pub(crate) fn publish(&self, plugins: &[Arc<Plugin>], running: bool) {
        let joining = self.lock_joining();
        let events = plugins
            .iter()
            .chain(joining.iter().map(|j| &j.plugin))
            .fold(0u32, |m, p| m | p.events().raw() as u32);
        let running = if running { RUNNING } else { 0 };
        let prune = if plugins.iter().any(|p| p.is_closed()) {
            PRUNE_PENDING
        } else {
            0
        };
        let joining = if joining.is_empty() { 0 } else { JOINING };
        self.state.store(
            u64::from(events) | running | prune | joining,
            Ordering::Release,
        );
    }

    fn lock_joining(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Joining>>> {
        self.joining.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Events from now on keep their requests for `plugin`, until
    /// [`Core::stop_joining`].
    pub(crate) fn start_joining(&self, plugin: &Arc<Plugin>) -> Arc<Joining> {
        let joining = Arc::new(Joining::new(Arc::clone(plugin)));
        let plugins = self.lock_plugins();
        self.lock_joining().push(Arc::clone(&joining));
        self.publish_events(&plugins);
        joining
    }

    pub(crate) fn stop_joining(&self, joining: &Arc<Joining>) {
        let plugins = self.lock_plugins();
        self.lock_joining().retain(|j| !Arc::ptr_eq(j, joining));
        self.publish_events(&plugins);
    }

    /// The plugins joining now, for an event to keep its request for.
    pub(crate) fn joining(&self) -> Vec<Arc<Joining>> {
        if self.state.load(Ordering::Acquire) & JOINING == 0 {
            return Vec::new();
        }
        self.lock_joining().clone()
    }

    /// Republishes [`Core::state`] once a plugin's connection is gone, so
    /// that [`PRUNE_PENDING`] says whether a closed plugin is still in the
    /// list: [`Core::publish`] is the one place that works it out.
    pub(crate) fn note_closed(&self) {
        let plugins = self.lock_plugins();
        self.publish_events(&plugins);
    }

    /// Republishes the events after the locked list `plugins` changed.
    pub(crate) fn publish_events(&self, plugins: &[Arc<Plugin>]) {
        self.publish(plugins, self.is_running());
    }

    pub(crate) fn set_running(&self, running: bool) {
        let plugins = self.lock_plugins();
        self.publish(&plugins, running);
    }

    /// Adds plugins, keeping index order (stable: equal indices keep their
    /// arrival order, which upstream leaves unspecified).
    /// After a stop, they are closed instead.
    pub(crate) fn add_plugins(&self, new: impl IntoIterator<Item = Arc<Plugin>>) {
        let new: Vec<_> = new.into_iter().collect();
        let count = {
            let mut plugins = self.lock_plugins();
            if !self.accepting.load(Ordering::Acquire) {
                drop(plugins);
                for p in new {
                    info!("plugin {} arrived after stop", p.qualified_name());
                    p.close();
                }
                return;
            }
            plugins.extend(new.iter().cloned());
            plugins.sort_by(|a, b| a.idx.cmp(&b.idx));
            self.publish_events(&plugins);
            plugins.len()
        };
        for watch in new.iter().filter_map(Plugin::connection_watch) {
            self.spawn(watch);
        }
        self.metrics.update_plugin_count(count);
    }

    /// Makes a synchronized external plugin active; once only, a plugin
    /// in the list already (activated within the runtime's sync) stays.
    /// With handover and `replace`, the other connected plugins of its
    /// `idx-name` leave the list in the same step, so each event sees
    /// exactly one of them; they are returned for the caller to retire.
    /// (Within the sync nothing is replaced: the sync may still fail, and
    /// the old instance must then stay.) A plugin gone by now is not added.
    pub(crate) fn activate(&self, plugin: &Arc<Plugin>, replace: bool) -> Activation {
        let (added, replaced, count) = {
            let mut plugins = self.lock_plugins();
            if !self.accepting.load(Ordering::Acquire) {
                drop(plugins);
                info!("plugin {} arrived after stop", plugin.qualified_name());
                plugin.close();
                return Activation::Stopped;
            }
            if plugin.is_closed() {
                return Activation::Gone;
            }
            let mut replaced = Vec::new();
            if self.plugin_handover && replace {
                let (old, kept): (Vec<_>, Vec<_>) = plugins.drain(..).partition(|p| {
                    !p.is_builtin() && p.name == plugin.name && !Arc::ptr_eq(p, plugin)
                });
                *plugins = kept;
                replaced = old;
            }
            let added = !plugins.iter().any(|p| Arc::ptr_eq(p, plugin));
            if added {
                plugins.push(Arc::clone(plugin));
                plugins.sort_by(|a, b| a.idx.cmp(&b.idx));
            }
            self.publish_events(&plugins);
            (added, replaced, plugins.len())
        };
        if let Some(watch) = added.then(|| plugin.connection_watch()).flatten() {
            self.spawn(watch);
        }
        self.metrics.update_plugin_count(count);
        Activation::Active { added, replaced }
    }

    /// Drops closed plugins; called after every event, as upstream does.
    pub(crate) fn prune_closed(&self) {
        let (closed, count) = {
            let mut plugins = self.lock_plugins();
            let (closed, open): (Vec<_>, Vec<_>) = plugins.drain(..).partition(|p| p.is_closed());
            *plugins = open;
            self.publish_events(&plugins);
            (closed, plugins.len())
        };
        for p in closed {
            info!("removing closed plugin {}", p.qualified_name());
            p.close();
        }
        self.metrics.update_plugin_count(count);
    }

    pub(crate) fn close_all(&self) {
        let plugins = {
            let mut plugins = self.lock_plugins();
            let all = std::mem::take(&mut *plugins);
            self.publish_events(&plugins);
            all
        };
        for p in plugins {
            p.close();
        }
        self.metrics.update_plugin_count(0);
    }
}

impl Host for Core {
    fn runtime_name(&self) -> &str {
        &self.runtime_name
    }

    fn runtime_version(&self) -> &str {
        &self.runtime_version
    }

    fn nri_version(&self) -> &str {
        &self.nri_version
    }

    fn registration_timeout(&self) -> Duration {
        Core::registration_timeout(self)
    }

    fn request_timeout(&self) -> Duration {
        Core::request_timeout(self)
    }

    fn sync_timeout(&self) -> Option<Duration> {
        self.sync_timeout
    }

    fn plugin_timeouts(&self, name: &str, base: &str) -> PluginTimeouts {
        let of = |key: &str| self.plugin_timeouts.get(key).copied().unwrap_or_default();
        of(name).or(of(base))
    }

    fn metrics(&self) -> &dyn Metrics {
        &*self.metrics
    }

    fn deprecation(&self) -> Option<&dyn DeprecationRecorder> {
        self.deprecation.as_deref()
    }

    fn spawn(&self, task: futures::future::BoxFuture<'static, ()>) {
        Core::spawn(self, task);
    }

    fn spawn_teardown(&self, task: futures::future::BoxFuture<'static, ()>) {
        Core::spawn_teardown(self, task);
    }

    fn note_closed(&self) {
        Core::note_closed(self);
    }

    fn requests_at_once(&self, name: &str, base: &str, says: bool) -> Option<usize> {
        if !self.events.by_pod() {
            return None;
        }
        let concurrent = says
            || self.concurrent_plugins.contains(name)
            || self.concurrent_plugins.contains(base);
        Some(if concurrent { MAX_REQUESTS_AT_ONCE } else { 1 })
    }
}

/// What [`Core::activate`] did.
pub(crate) enum Activation {
    /// The plugin is in the list (`added`: it joined it now); `replaced`
    /// left it (handover).
    Active {
        added: bool,
        replaced: Vec<Arc<Plugin>>,
    },
    /// The plugin's connection is gone: it was not added.
    Gone,
    /// The adaptation is stopped: the plugin was closed.
    Stopped,
}
