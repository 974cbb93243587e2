//! One plugin as the adaptation sees it: its identity, its transport (a ttrpc
//! connection, builtin handlers or a WASM module), its subscription, and the
//! relay of one request with timeout, metrics and upstream's error
//! classification.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use crate::error::{is_oversized_message, is_oversized_reply, peer_text};
use crate::plugins::builtin::BuiltinHandlers;
use crate::plugins::child::Child;
use crate::plugins::client::PluginConn;
use crate::plugins::event_budget::EventBudget;
use crate::plugins::host::Host;
use crate::plugins::identity::PeerIdentity;
use crate::plugins::names::NameClaim;
use crate::plugins::request::{Call, Encoding, Request};
use crate::plugins::timeouts::{default_sync_timeout, PluginTimeouts};
use crate::plugins::wasm::{self, WasmPlugin};
use crate::{Deprecation, Error};
use nri_api::mux::Mux;
use nri_api::{self as api, Event, EventMask};
use protobuf::Message;

/// The plugin service's method a state is sent with.
pub(crate) const SYNCHRONIZE: &str = "Synchronize";

/// Where a plugin came from; shown in logs as upstream does
/// (`external:10-foo[1234]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    External,
    Launched,
    Builtin,
    /// A WASM module from the plugin directory.
    Wasm,
}

// One per plugin: boxing the larger variant would save nothing worth having.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Transport {
    Ttrpc {
        /// Its Plugin service, on the mux's connection 1.
        client: PluginConn,
        mux: Mux,
        /// The Runtime service this plugin calls; shut down on close.
        server: Mutex<Option<ttrpc::r#async::Server>>,
        /// The plugin's process, if the adaptation launched it.
        child: Mutex<Option<Child>>,
    },
    Builtin(Arc<dyn BuiltinHandlers>),
    Wasm(WasmPlugin),
}

pub(crate) struct Plugin {
    pub(crate) base: String,
    pub(crate) idx: String,
    /// `idx-base`: the name in ownership records, errors and metrics.
    pub(crate) name: String,
    pub(crate) origin: Origin,
    /// Its process, for a ttrpc plugin (the kernel's word at connect time).
    pub(crate) identity: Option<PeerIdentity>,
    /// Its hold on its name, given up when it closes (only with an
    /// identity policy).
    name_claim: Mutex<Option<NameClaim>>,
    /// Drop-in configuration handed over in Configure.
    pub(crate) config: String,
    /// This plugin's own timeouts, where not the adaptation's: the
    /// runtime's per-plugin settings, else its runtime drop-in's.
    timeouts: PluginTimeouts,
    pub(crate) transport: Transport,
    events: AtomicI32,
    /// The plugin's failure policy, from Configure (unset: both false).
    fail_request: AtomicBool,
    keep_connected: AtomicBool,
    closed: AtomicBool,
    /// Set once the plugin answered Unimplemented to a dedicated RPC that
    /// has a StateChange form; sticky, as upstream.
    state_change: AtomicBool,
    warned: Mutex<HashSet<Event>>,
    /// With pod concurrency, how many requests it may have in hand at
    /// once: one, unless it said it takes requests of different pods at
    /// once. Without it, events run in turn and need none.
    in_hand: Option<tokio::sync::Semaphore>,
    host: Arc<dyn Host>,
}

impl Plugin {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        base: String,
        idx: String,
        origin: Origin,
        identity: Option<PeerIdentity>,
        config: String,
        dropin: PluginTimeouts,
        dropin_concurrent: bool,
        transport: Transport,
        host: Arc<dyn Host>,
    ) -> Plugin {
        let name = format!("{idx}-{base}");
        let timeouts = host.plugin_timeouts(&name, &base).or(dropin);
        // Builtin plugins are the runtime's own code, called at once.
        let in_hand = host
            .requests_at_once(&name, &base, dropin_concurrent)
            .filter(|_| !matches!(transport, Transport::Builtin(_)))
            .map(tokio::sync::Semaphore::new);
        Plugin {
            name,
            timeouts,
            base,
            idx,
            origin,
            identity,
            name_claim: Mutex::new(None),
            config,
            transport,
            events: AtomicI32::new(0),
            fail_request: AtomicBool::new(false),
            keep_connected: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            state_change: AtomicBool::new(false),
            warned: Mutex::new(HashSet::new()),
            in_hand,
            host,
        }
    }

    /// The name used in logs: origin, full name and peer pid.
    pub(crate) fn qualified_name(&self) -> String {
        let origin = self.origin_name();
        match self.identity.as_ref().and_then(|id| id.pid) {
            Some(pid) => format!("{origin}:{}[{pid}]", self.name),
            None => format!("{origin}:{}", self.name),
        }
    }

    /// Makes the plugin the holder of `claim` until it closes.
    pub(crate) fn keep_name(&self, claim: NameClaim) {
        let mut held = self.name_claim.lock().unwrap_or_else(|e| e.into_inner());
        // Closed meanwhile: close() found nothing to give up.
        if !self.is_closed() {
            *held = Some(claim);
        }
    }

    /// Where it came from, as logs name it.
    pub(crate) fn origin_name(&self) -> &'static str {
        match self.origin {
            Origin::External => "external",
            Origin::Launched => "pre-connected",
            Origin::Builtin => "builtin",
            Origin::Wasm => "pre-connected-wasm",
        }
    }

    /// How long a request to this plugin may take: its own timeout if it
    /// has one, else the adaptation's.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.timeouts
            .request
            .unwrap_or_else(|| self.host.request_timeout())
    }

    /// How long a Synchronize carrying `objects` pods and containers may
    /// take, all its messages together: the sync timeout set for this
    /// plugin, else the adaptation's, each as is; else the default, which
    /// grows with `objects` ([`default_sync_timeout`]).
    pub(crate) fn sync_timeout(&self, objects: usize) -> Duration {
        self.timeouts
            .sync
            .or_else(|| self.host.sync_timeout())
            .unwrap_or_else(|| {
                default_sync_timeout(
                    self.host.registration_timeout(),
                    self.request_timeout(),
                    objects,
                )
            })
    }

    pub(crate) fn events(&self) -> EventMask {
        EventMask::from_raw(self.events.load(Ordering::Acquire))
    }

    pub(crate) fn is_validator(&self) -> bool {
        self.events().is_set(Event::VALIDATE_CONTAINER_ADJUSTMENT)
    }

    /// Whether this plugin is sent `event`'s requests now: it subscribed to
    /// the event and is not closed. (A closed plugin never opens again, and
    /// subscriptions are fixed at Configure, so a plugin that will not see
    /// an event now will not later in it either.)
    pub(crate) fn will_see(&self, event: Event) -> bool {
        !self.is_closed() && self.events().is_set(event)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
            || match &self.transport {
                Transport::Ttrpc { mux, .. } => mux.is_closed(),
                Transport::Builtin(_) | Transport::Wasm(_) => false,
            }
    }

    /// Resolves once the plugin's connection is gone (never for builtins).
    pub(crate) async fn gone(&self) {
        match &self.transport {
            Transport::Ttrpc { mux, .. } => {
                mux.closed().await;
            }
            Transport::Builtin(_) | Transport::Wasm(_) => std::future::pending().await,
        }
    }

    /// What tells the core once the plugin's connection is gone, so that
    /// the next event prunes it (and refreshes the plugin count) even when
    /// no plugin takes that event. None for builtin and WASM plugins: they
    /// have no connection to lose, and the core closes them itself. (The
    /// watcher holds the plugin until its connection is gone, which every
    /// way out of the list brings about by closing it.)
    pub(crate) fn connection_watch(
        self: &Arc<Self>,
    ) -> Option<impl std::future::Future<Output = ()> + use<>> {
        if !matches!(self.transport, Transport::Ttrpc { .. }) {
            return None;
        }
        let plugin = Arc::clone(self);
        Some(async move {
            plugin.gone().await;
            plugin.host.note_closed();
        })
    }

    /// The largest Synchronize message this plugin is sent: ttrpc's limit,
    /// except for a WASM module, which is handed the state whole in its
    /// memory, as upstream hands it.
    pub(crate) fn message_limit(&self) -> usize {
        match self.transport {
            Transport::Wasm(_) => usize::MAX,
            _ => nri_api::mux::TTRPC_MESSAGE_LENGTH_MAX,
        }
    }

    pub(crate) fn is_builtin(&self) -> bool {
        matches!(self.transport, Transport::Builtin(_))
    }

    /// Whether this is a builtin validator that reads of the pod and the
    /// container only what `nri_validator::as_read` keeps
    /// ([`BuiltinHandlers::reads_as_read`]).
    pub(crate) fn reads_as_read(&self) -> bool {
        matches!(&self.transport, Transport::Builtin(h) if h.reads_as_read())
    }

    /// Closes the connection and kills a launched process. Idempotent and
    /// non-blocking: teardown that may wait runs in the background.
    pub(crate) fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        drop(
            self.name_claim
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        if let Transport::Ttrpc {
            mux, server, child, ..
        } = &self.transport
        {
            mux.close();
            let server = server.lock().unwrap_or_else(|e| e.into_inner()).take();
            let child = child.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(mut server) = server {
                self.host.spawn_teardown(Box::pin(async move {
                    let _ = server.shutdown().await;
                }));
            }
            if let Some(mut child) = child {
                // Launched plugins get no graceful shutdown, as upstream.
                // Ended by a stop, the task drops the child, which kills it.
                self.host.spawn(Box::pin(async move {
                    let _ = child.kill().await;
                }));
            }
        }
    }

    /// Sends Configure and records the subscription.
    pub(crate) async fn configure(&self) -> Result<(), Error> {
        let host = &self.host;
        let req = api::ConfigureRequest {
            config: self.config.clone(),
            runtime_name: host.runtime_name().to_string(),
            runtime_version: host.runtime_version().to_string(),
            registration_timeout: millis(host.registration_timeout()),
            request_timeout: millis(self.request_timeout()),
            NRI_version: host.nri_version().to_string(),
            ..Default::default()
        };
        let timeout = self.request_timeout();
        let rpl = match &self.transport {
            Transport::Ttrpc { client, .. } => {
                with_timeout(self, "Configure", timeout, async {
                    client
                        .unary("Configure", &req, timeout)
                        .await
                        .map_err(|e| self.ttrpc_error("Configure", e))
                })
                .await
            }
            Transport::Builtin(h) => {
                with_timeout(self, "Configure", timeout, async {
                    let mut rpl = h.configure(req).await.map_err(|e| self.builtin_error(e))?;
                    if rpl.events == 0 {
                        rpl.events = h.implemented_events().raw();
                    }
                    Ok(rpl)
                })
                .await
            }
            Transport::Wasm(w) => match req.write_to_bytes() {
                Ok(bytes) => self.call_wasm(w, "Configure", bytes.into(), timeout).await,
                Err(e) => Err(self.builtin_error(Box::new(e))),
            },
        }
        .map_err(|e| Error::Start(format!("failed to configure plugin: {e}")))?;

        let events = match EventMask::from_raw(rpl.events) {
            m if m.is_empty() => EventMask::VALID,
            m if m.invalid_bits() != 0 => {
                return Err(Error::Start(format!(
                    "failed to configure plugin: invalid plugin events: 0x{:x}",
                    rpl.events
                )))
            }
            m => m,
        };
        self.events.store(events.raw(), Ordering::Release);
        if let Some(policy) = rpl.failure_policy.as_ref() {
            self.fail_request
                .store(policy.fail_request, Ordering::Release);
            self.keep_connected
                .store(policy.keep_connected, Ordering::Release);
        }
        info!(
            "plugin {} subscribed to events {events}",
            self.qualified_name()
        );
        Ok(())
    }

    /// Relays one event request. `Ok(None)`: the plugin is not subscribed,
    /// already closed, or was dropped for a transport failure or timeout
    /// (the event goes on without it). `Err`: the plugin failed the request.
    pub(crate) async fn relay<C: Call>(
        &self,
        req: &Request<C>,
        encoding: &mut Encoding,
        budget: EventBudget,
    ) -> Result<Option<C::Reply>, Error> {
        if !self.will_see(C::EVENT) {
            return Ok(None);
        }
        let op = C::EVENT.pretty_name();
        let _turn = self.turn().await;
        match self.measured(op, self.invoke(req, encoding, budget)).await {
            Ok(rpl) => Ok(Some(rpl)),
            Err(e) => self.failed(op, e),
        }
    }

    /// This plugin's turn for a request, if its requests take turns.
    async fn turn(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        match &self.in_hand {
            // Never closed.
            Some(turns) => turns.acquire().await.ok(),
            None => None,
        }
    }

    /// Runs one plugin call, recording its latency and outcome.
    async fn measured<T>(
        &self,
        op: &str,
        call: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let started = Instant::now();
        let res = call.await;
        let metrics = self.host.metrics();
        metrics.record_plugin_latency(&self.name, op, started.elapsed());
        metrics.record_plugin_invocation(&self.name, op, res.as_ref().err());
        res
    }

    /// What a failed call means for the event, as upstream v0.12.4 decides
    /// it. An error of the plugin's own, or one that is not the plugin's
    /// (a request too large to send, the event's budget, the runtime
    /// giving up), fails the event as it is. A failure to answer (timeout,
    /// lost connection, protocol error) is the plugin's: its failure policy
    /// says whether it is dropped ([`Plugin::drop_for`]) and whether the
    /// event fails or goes on without it (the default). Builtin plugins have
    /// no transport: every error of theirs fails the event.
    fn failed<T>(&self, op: &'static str, e: Error) -> Result<Option<T>, Error> {
        if !e.is_fatal_for_plugin() || self.is_builtin() {
            return Err(e);
        }
        self.drop_for(op, &e);
        if self.fail_request.load(Ordering::Acquire) {
            return Err(Error::RequestFailed {
                plugin: self.name.clone(),
                op,
                reason: Box::new(e),
            });
        }
        Ok(None)
    }

    /// Closes the plugin for a failure to answer, unless its policy keeps
    /// it connected and the failure was a timeout.
    fn drop_for(&self, op: &str, e: &Error) {
        let kept =
            matches!(e, Error::Timeout { .. }) && self.keep_connected.load(Ordering::Acquire);
        if kept {
            warn!(
                "plugin {} failed to handle {op} request, kept by its failure policy: {}",
                self.qualified_name(),
                peer_text(e)
            );
            return;
        }
        warn!(
            "closing plugin {}, failed to handle {op} request: {}",
            self.qualified_name(),
            peer_text(e)
        );
        self.close();
    }

    async fn invoke<C: Call>(
        &self,
        req: &Request<C>,
        encoding: &mut Encoding,
        budget: EventBudget,
    ) -> Result<C::Reply, Error> {
        let op = C::EVENT.pretty_name();
        let request_timeout = self.request_timeout();
        let call = budget.call(request_timeout, op)?;
        self.invoke_within(req, encoding, call.timeout, request_timeout)
            .await
            .map_err(|e| budget.blame(call, e))
    }

    /// Sends `req`, waiting at most `timeout`. The plugin is told `wire`,
    /// the request timeout, whatever an event budget cut `timeout` to, as
    /// upstream's plugins are told their request timeout.
    async fn invoke_within<C: Call>(
        &self,
        req: &Request<C>,
        encoding: &mut Encoding,
        timeout: Duration,
        wire: Duration,
    ) -> Result<C::Reply, Error> {
        let op = C::EVENT.pretty_name();
        let client = match &self.transport {
            Transport::Builtin(h) => {
                let req = req.message()?;
                return with_timeout(self, op, timeout, async {
                    req.via_builtin(Arc::clone(h))
                        .await
                        .map_err(|e| self.builtin_error(e))
                })
                .await;
            }
            Transport::Ttrpc { client, .. } => client,
            Transport::Wasm(w) => {
                let bytes = encoding
                    .of(req)
                    .map_err(|e| self.builtin_error(Box::new(e)))?;
                return self.call_wasm(w, C::METHOD, bytes, timeout).await;
            }
        };
        if self.state_change.load(Ordering::Acquire) {
            if let Some(event) = req.state_change()? {
                return self.send_state_change(client, event, timeout, wire).await;
            }
        }
        let started = tokio::time::Instant::now();
        let res = with_timeout(self, op, timeout, async {
            send_encoded::<C>(client, encoding, req, wire)
                .await
                .map_err(|e| self.ttrpc_error(op, e))
        })
        .await;
        // The StateChange form is made only when it is needed: for the
        // events that have one, it is a copy of the pod and the container.
        let unimplemented = matches!(&res, Err(Error::Plugin { code, .. }) if *code == ttrpc::Code::UNIMPLEMENTED as i32);
        match (
            res,
            unimplemented
                .then(|| req.state_change())
                .transpose()?
                .flatten(),
        ) {
            (Err(Error::Plugin { .. }), Some(event)) => {
                info!(
                    "plugin {} has no {op} RPC, falling back to StateChange",
                    self.qualified_name()
                );
                self.state_change.store(true, Ordering::Release);
                // Both calls are one request: one deadline, as upstream's.
                let spent = started.elapsed();
                let (left, wire_left) = (timeout.saturating_sub(spent), wire.saturating_sub(spent));
                self.send_state_change(client, event, left, wire_left).await
            }
            (res, _) => res,
        }
    }

    async fn send_state_change<R: Default>(
        &self,
        client: &PluginConn,
        event: api::StateChangeEvent,
        timeout: Duration,
        wire: Duration,
    ) -> Result<R, Error> {
        let kind = event.event.enum_value_or_default();
        let op = kind.pretty_name();
        with_timeout(self, op, timeout, async {
            client
                .unary::<_, api::Empty>("StateChange", &event, wire)
                .await
                .map_err(|e| self.ttrpc_error(op, e))
        })
        .await?;
        self.warn_deprecated(kind);
        Ok(R::default())
    }

    fn warn_deprecated(&self, event: Event) {
        let first = self
            .warned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(event);
        if !first {
            return;
        }
        let details = format!(
            "does not implement a dedicated {} RPC call",
            event.pretty_name()
        );
        match self.host.deprecation() {
            Some(rec) => rec.plugin_warning(Deprecation::StateChange, &self.name, &details),
            None => {
                warn!("plugin {} {details}", self.qualified_name());
                warn!(
                    "plugin {} should be updated to a newer NRI stub",
                    self.qualified_name()
                );
            }
        }
    }

    /// Asks a validator about the merged adjustment. Any failure fails the
    /// creation; a transport failure also drops the plugin. A validator
    /// that is already gone (it disconnected while idle, or was dropped
    /// earlier in this event) is skipped, as upstream does: it is not
    /// listed among the plugins in the request either, so the default
    /// validator's required plugins still catch its absence.
    pub(crate) async fn validate(
        &self,
        req: &Request<api::ValidateContainerAdjustmentRequest>,
        encoding: &Encoding,
        budget: EventBudget,
    ) -> Result<(), Error> {
        if self.is_closed() {
            return Ok(());
        }
        let op = Event::VALIDATE_CONTAINER_ADJUSTMENT.pretty_name();
        let mut encoding = encoding.clone();
        let _turn = self.turn().await;
        match self
            .measured(op, self.invoke(req, &mut encoding, budget))
            .await
        {
            Ok(rpl) if !rpl.reject => Ok(()),
            Ok(rpl) => Err(Error::Rejected {
                plugin: self.name.clone(),
                reason: if rpl.reason.is_empty() {
                    "unknown rejection reason".to_string()
                } else {
                    rpl.reason
                },
            }),
            Err(e) => {
                if e.is_fatal_for_plugin() && !self.is_builtin() {
                    self.drop_for(op, &e);
                }
                Err(Error::ValidatorFailed {
                    plugin: self.name.clone(),
                    reason: Box::new(e),
                })
            }
        }
    }

    /// Sends `Shutdown`, waiting at most `timeout` for the answer, which
    /// changes nothing: the runtime is stopping either way.
    pub(crate) async fn shutdown(&self, timeout: Duration) {
        let client = match &self.transport {
            Transport::Ttrpc { client, .. } => client,
            Transport::Wasm(w) => {
                let res: Result<api::Empty, Error> =
                    self.call_wasm(w, "Shutdown", Arc::from([]), timeout).await;
                if let Err(e) = res {
                    debug!(
                        "plugin {} failed Shutdown: {}",
                        self.qualified_name(),
                        peer_text(&e)
                    );
                }
                return;
            }
            Transport::Builtin(_) => return,
        };
        let empty = api::Empty::new();
        let call = client.unary::<_, api::Empty>("Shutdown", &empty, timeout);
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(_)) => debug!("plugin {} acknowledged Shutdown", self.qualified_name()),
            Ok(Err(e)) => debug!(
                "plugin {} failed Shutdown: {}",
                self.qualified_name(),
                peer_text(&e)
            ),
            Err(_) => debug!("plugin {} did not answer Shutdown", self.qualified_name()),
        }
    }

    /// Sends one Synchronize message, given encoded, within `deadline`.
    /// Over ttrpc the bytes go out as they are; a builtin plugin gets them
    /// decoded.
    pub(crate) async fn send_synchronize(
        &self,
        msg: Vec<u8>,
        deadline: tokio::time::Instant,
    ) -> Result<api::SynchronizeResponse, Error> {
        let op = SYNCHRONIZE;
        let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
        let call = with_timeout(self, op, timeout, async {
            match &self.transport {
                Transport::Ttrpc { client, .. } => {
                    // As the generated client does, with the same errors.
                    let rsp = client.call(op, &msg, timeout).await.and_then(|rsp| {
                        api::SynchronizeResponse::parse_from_bytes(&rsp)
                            .map_err(|e| ttrpc::Error::Others(format!("Unpack get error {e}")))
                    });
                    rsp.map_err(|e| self.ttrpc_error(op, e))
                }
                Transport::Builtin(h) => {
                    let req = api::SynchronizeRequest::parse_from_bytes(&msg)
                        .map_err(|e| self.builtin_error(e.into()))?;
                    h.synchronize(req).await.map_err(|e| self.builtin_error(e))
                }
                Transport::Wasm(w) => self.call_wasm(w, op, msg.into(), timeout).await,
            }
        });
        let res = self.measured(op, call).await;
        if let Ok(rpl) = &res {
            let updates = rpl.update.len();
            self.host
                .metrics()
                .record_plugin_adjustments(&self.name, op, None, updates, 0);
        }
        res
    }

    /// Classifies a ttrpc failure. A reply over the size limit is a protocol
    /// violation, as a malformed one is: a transport error, which drops the
    /// plugin. A request over the limit is never sent (ttrpc refuses it
    /// before writing anything) and is not the plugin's fault: the request
    /// fails with Go ttrpc's `ResourceExhausted` and the plugin stays.
    /// A lost connection is Go's `ErrClosed`. (Deadlines are not the
    /// client's: every call runs under `with_timeout`.)
    fn ttrpc_error(&self, op: &'static str, e: ttrpc::Error) -> Error {
        match e {
            ttrpc::Error::RpcStatus(status) if is_oversized_reply(&status) => Error::Transport {
                plugin: self.name.clone(),
                op,
                reason: format!("reply over the size limit: {}", status.message),
            },
            ttrpc::Error::Others(text) if is_oversized_message(&text) => {
                warn!(
                    "{op} request to plugin {} not sent: {text}",
                    self.qualified_name()
                );
                Error::Plugin {
                    plugin: self.name.clone(),
                    code: ttrpc::Code::RESOURCE_EXHAUSTED as i32,
                    message: text,
                }
            }
            ttrpc::Error::RpcStatus(status) => Error::Plugin {
                plugin: self.name.clone(),
                code: status.code.value(),
                message: status.message,
            },
            ttrpc::Error::Socket(_)
            | ttrpc::Error::LocalClosed
            | ttrpc::Error::RemoteClosed
            | ttrpc::Error::Eof => Error::Closed {
                plugin: self.name.clone(),
                op,
                detail: e.to_string(),
            },
            other => Error::Transport {
                plugin: self.name.clone(),
                op,
                reason: other.to_string(),
            },
        }
    }

    /// Calls a WASM plugin. Its module is interrupted at `timeout`; the
    /// timer here is only a backstop. A module that died (trapped, exited,
    /// ran out of its memory) is a plugin that crashed: the request fails,
    /// as upstream fails it, and the plugin is closed, as a crashed
    /// process's is, rather than left to fail every later request.
    async fn call_wasm<R: Message>(
        &self,
        w: &WasmPlugin,
        method: &'static str,
        request: Arc<[u8]>,
        timeout: Duration,
    ) -> Result<R, Error> {
        let backstop = timeout + Duration::from_secs(1);
        let reply = match tokio::time::timeout(backstop, w.call(method, request, timeout)).await {
            Ok(reply) => reply,
            Err(_) => Err(wasm::WasmFailure::Timeout),
        };
        let failed = |message: String| Error::Builtin {
            plugin: self.name.clone(),
            message,
        };
        match reply {
            Ok(bytes) => R::parse_from_bytes(&bytes).map_err(|e| {
                self.close();
                failed(format!("invalid {method} reply: {e}"))
            }),
            Err(wasm::WasmFailure::Refused(text)) => Err(failed(text)),
            Err(wasm::WasmFailure::Dead(why)) => {
                warn!(
                    "closing plugin {}, its module died in {method}: {}",
                    self.qualified_name(),
                    peer_text(&why)
                );
                self.close();
                Err(failed(why))
            }
            Err(wasm::WasmFailure::Timeout) => {
                // Interrupted mid-call, the module cannot be called again,
                // whatever the plugin's failure policy says.
                self.close();
                Err(Error::Timeout {
                    plugin: self.name.clone(),
                    op: method,
                    timeout,
                })
            }
        }
    }

    fn builtin_error(&self, e: crate::BoxError) -> Error {
        Error::Builtin {
            plugin: self.name.clone(),
            message: e.to_string(),
        }
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        debug!("plugin {} released", self.qualified_name());
        if let Transport::Ttrpc { mux, .. } = &self.transport {
            mux.close();
        }
    }
}

/// Runs a plugin call under the request timeout. The deadline also bounds
/// the write of the request: a plugin that stops reading costs one timeout.
///
/// A failure that comes in after the deadline is the timeout too. A plugin
/// told the same timeout may answer "deadline exceeded" itself, always a
/// little after the runtime's own deadline (its clock starts when the
/// request arrives); which of the two the call sees first depends only on
/// which thread runs first, and the plugin's failure policy must not.
async fn with_timeout<T>(
    plugin: &Plugin,
    op: &'static str,
    timeout: Duration,
    call: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let deadline = tokio::time::Instant::now() + timeout;
    let timed_out = || Error::Timeout {
        plugin: plugin.name.clone(),
        op,
        timeout,
    };
    match tokio::time::timeout_at(deadline, call).await {
        Ok(Err(_)) if tokio::time::Instant::now() >= deadline => Err(timed_out()),
        Ok(res) => res,
        Err(_) => Err(timed_out()),
    }
}

/// Upstream sends timeouts as whole milliseconds (`Duration.Milliseconds()`).
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Sends `req` as the generated ttrpc client would, with the same errors,
/// but with its bytes from `encoding`, which made them at most once for
/// every plugin of the event.
async fn send_encoded<C: Call>(
    client: &PluginConn,
    encoding: &mut Encoding,
    req: &Request<C>,
    wire: Duration,
) -> ttrpc::Result<C::Reply> {
    let payload = encoding
        .of(req)
        .map_err(|e| ttrpc::Error::Others(format!("Encoding request {e}")))?;
    let reply = client.call(C::METHOD, &payload, wire).await?;
    C::Reply::parse_from_bytes(&reply)
        .map_err(|e| ttrpc::Error::Others(format!("Unpack get error {e}")))
}
