//! Bringing up a ttrpc plugin on a fresh connection: the trunk mux, both
//! ttrpc sessions, the registration handshake and Configure.
//!
//! Unlike upstream, a connection that fails any step is closed at once, a
//! plugin may register only once, and only a registered plugin
//! may call `UpdateContainers`.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use async_trait::async_trait;
use log::{info, warn};
use tokio::net::UnixStream;
use tokio::sync::{oneshot, Semaphore};

use crate::connections::replies::Replies;
use crate::error::peer_text;
use crate::plugins::child::Child;
use crate::plugins::client::PluginConn;
use crate::plugins::identity::PeerIdentity;
use crate::plugins::names::NameClaim;
use crate::plugins::plugin::{Origin, Plugin, Transport};
use crate::plugins::timeouts::PluginTimeouts;
use crate::{Core, Error};
use nri_api as api;
use nri_api::mux::{self, Mux};
use nri_api::quote::go_quote;

/// Most unsolicited update requests one plugin may have in flight; more are
/// refused at once rather than queued without bound.
const MAX_UPDATE_REQUESTS_IN_FLIGHT: usize = 4;

/// Largest ttrpc message a connection may send before its plugin has
/// registered: a `RegisterPluginRequest` is a name, an index and a version.
/// A peer announcing more is closed before the message is buffered.
const MAX_UNREGISTERED_MESSAGE: usize = 64 << 10;

/// Bytes that all connections still registering may hold in their receive
/// buffers together (each at most two messages); past it, the connection
/// that would exceed it is closed. Thousands of connections that each send
/// one large frame and wait cost this much, not 4 MiB each.
pub(crate) const UNREGISTERED_BUDGET: usize = 32 << 20;

/// The trunk of a plugin connection is read in chunks of this size; the
/// runtime receives small replies, and an idle connection keeps less.
const READ_BUFFER: usize = 16 << 10;

/// Requests a connection may have refused as out of protocol (registering
/// twice, updating before registering) before it is closed: a peer that
/// keeps at it is broken or hostile, and each refusal costs a reply.
const MAX_REFUSALS: usize = 8;

/// How long a plugin whose registration was refused may keep the connection
/// to read the error.
const REJECTION_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// What the adaptation already knows about a plugin it launched.
pub(crate) struct Launched {
    pub(crate) idx: String,
    pub(crate) base: String,
    pub(crate) config: String,
    /// From the runtime's drop-in for it.
    pub(crate) timeouts: PluginTimeouts,
    pub(crate) concurrent_requests: bool,
    pub(crate) child: Child,
}

/// Registration as reported by the plugin: (name, idx), with its hold on
/// the name when the runtime has an identity policy.
type Registration = Result<(String, String, Option<NameClaim>), String>;

/// Per-connection state of the Runtime service the plugin calls.
struct RuntimeService {
    core: Weak<Core>,
    /// Launched plugins are named by their file; anything they send is accepted.
    check_identity: bool,
    /// The peer's process, as the kernel reported it when it connected.
    identity: Option<PeerIdentity>,
    registered: Mutex<Option<oneshot::Sender<Registration>>>,
    /// Set once the plugin has registered: only then may it call UpdateContainers.
    plugin: OnceLock<Weak<Plugin>>,
    updates_in_flight: Semaphore,
    /// The connection, closed after [`MAX_REFUSALS`] refusals.
    mux: Mux,
    refusals: std::sync::atomic::AtomicUsize,
}

impl RuntimeService {
    /// Checks an external registration against the runtime's identity
    /// policy, if it has one, and takes the name for the plugin.
    fn admit(&self, base: &str, idx: &str) -> Result<Option<NameClaim>, String> {
        let Some(core) = self.core.upgrade() else {
            return Ok(None);
        };
        let Some(policy) = &core.identities else {
            return Ok(None);
        };
        let Some(id) = &self.identity else {
            return Err("plugin identity unknown: the kernel gave no peer credentials".into());
        };
        if !policy.permits(idx, base, id) {
            return Err(format!(
                "plugin {} may not register: no identity rule admits {id}",
                go_quote(&format!("{idx}-{base}"))
            ));
        }
        let who = match id.pid {
            Some(pid) => format!("external:{idx}-{base}[{pid}]"),
            None => format!("external:{idx}-{base}"),
        };
        core.names
            .take(base, idx, who, id, core.plugin_handover)
            .map(Some)
    }

    /// Refuses a request that breaks the protocol, and closes the
    /// connection once it has refused too many.
    fn refuse(&self, code: ttrpc::Code, msg: &str) -> ttrpc::Error {
        let n = 1 + self
            .refusals
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n == MAX_REFUSALS {
            warn!("closing plugin connection: {n} requests refused, the last: {msg}");
            self.mux.close();
        }
        status(code, msg)
    }
}

fn status(code: ttrpc::Code, msg: impl Into<String>) -> ttrpc::Error {
    ttrpc::Error::RpcStatus(ttrpc::get_status(code, msg.into()))
}

#[async_trait]
impl api::ttrpc::Runtime for RuntimeService {
    async fn register_plugin(
        &self,
        _ctx: &ttrpc::r#async::TtrpcContext,
        req: api::RegisterPluginRequest,
    ) -> ttrpc::Result<api::Empty> {
        let Some(tx) = self
            .registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return Err(self.refuse(
                ttrpc::Code::FAILED_PRECONDITION,
                "plugin already registered",
            ));
        };
        let version = if req.NRI_version.is_empty() {
            "unknown"
        } else {
            &req.NRI_version
        };
        let full_name = format!(
            "{}-{}",
            peer_text(&req.plugin_idx),
            peer_text(&req.plugin_name)
        );
        info!(
            "plugin {full_name} registering, NRI version {}",
            peer_text(&version)
        );
        if let Some(id) = &self.identity {
            info!("plugin {full_name} connected as {}", peer_text(id));
        }
        let mut claim = None;
        if self.check_identity {
            let checked = api::check_plugin_name(&req.plugin_name)
                .map_err(|e| format!("invalid plugin name: {e}"))
                .and_then(|()| {
                    api::check_plugin_index(&req.plugin_idx)
                        .map_err(|e| format!("invalid plugin index: {e}"))
                })
                .and_then(|()| self.admit(&req.plugin_name, &req.plugin_idx));
            match checked {
                Ok(held) => claim = held,
                Err(msg) => {
                    warn!("refusing plugin registration: {}", peer_text(&msg));
                    let _ = tx.send(Err(msg.clone()));
                    // Upstream's handler returns a plain Go error, which Go's
                    // ttrpc server sends as `Unknown` with the error's text.
                    return Err(status(ttrpc::Code::UNKNOWN, msg));
                }
            }
        }
        let _ = tx.send(Ok((req.plugin_name, req.plugin_idx, claim)));
        Ok(api::Empty::default())
    }

    async fn update_containers(
        &self,
        _ctx: &ttrpc::r#async::TtrpcContext,
        req: api::UpdateContainersRequest,
    ) -> ttrpc::Result<api::UpdateContainersResponse> {
        let plugin = self.plugin.get().and_then(Weak::upgrade);
        let (Some(plugin), Some(core)) = (plugin, self.core.upgrade()) else {
            return Err(self.refuse(ttrpc::Code::PERMISSION_DENIED, "plugin is not registered"));
        };
        if plugin.is_closed() {
            return Err(status(ttrpc::Code::UNAVAILABLE, "plugin is closed"));
        }
        let Ok(_permit) = self.updates_in_flight.try_acquire() else {
            return Err(status(
                ttrpc::Code::RESOURCE_EXHAUSTED,
                "too many unsolicited update requests in flight",
            ));
        };
        let audited = core.audit.as_ref().map(|_| req.update.clone());
        // Evictions are ignored, as upstream does.
        let outcome = core.update_fn.update(req.update).await;
        if let (Some(updates), Some(auditor)) = (audited, core.audit.as_ref()) {
            let failure = outcome
                .as_ref()
                .err()
                .map(|e| Error::Runtime(e.to_string().into()));
            let said = failure.as_ref().map_or(Ok(()), Err);
            if let Some(mut pending) =
                auditor.plugin_updates("UpdateContainers", &plugin, updates, said)
            {
                if let Ok(failed) = &outcome {
                    if !failed.is_empty() {
                        pending.record.outcome = "partial";
                        let ids: Vec<&str> =
                            failed.iter().map(|u| u.container_id.as_str()).collect();
                        pending.record.error = Some(crate::results::audit::bounded(format!(
                            "the runtime failed to update {}",
                            ids.join(", ")
                        )));
                    }
                }
                auditor.submit(pending).await;
            }
        }
        match outcome {
            Ok(failed) => Ok(api::UpdateContainersResponse {
                failed,
                ..Default::default()
            }),
            Err(e) => Err(status(ttrpc::Code::UNKNOWN, e.to_string())),
        }
    }
}

/// Runs the handshake on `stream`. On any failure the connection is closed
/// and a launched process killed before returning.
pub(crate) async fn connect(
    core: Arc<Core>,
    stream: UnixStream,
    launched: Option<Launched>,
) -> Result<Arc<Plugin>, Error> {
    // The credentials of a socketpair name whoever created it (the host),
    // so a launched plugin's identity is read from its process.
    let identity = match &launched {
        Some(l) => Some(PeerIdentity::of_child(l.child.pid())),
        None => PeerIdentity::of_socket(&stream),
    };
    let pid = identity.as_ref().and_then(|id| id.pid);
    let origin = if launched.is_some() {
        Origin::Launched
    } else {
        Origin::External
    };
    let unregistered = mux::Options::default()
        .blocked_read(true)
        .read_buffer(READ_BUFFER)
        .received_message_limit(MAX_UNREGISTERED_MESSAGE)
        .conn_buffer_limit(2 * (mux::TTRPC_HEADER_LEN + MAX_UNREGISTERED_MESSAGE))
        .receive_budget(Arc::clone(&core.unregistered));
    let setup = |e: &dyn std::fmt::Display| Error::Start(format!("plugin connection setup: {e}"));
    let mux = Mux::new(
        mux::UnixTrunk::new(stream).map_err(|e| setup(&e))?,
        unregistered,
    );

    let client = PluginConn::new(mux.open(mux::PLUGIN_SERVICE_CONN).map_err(|e| setup(&e))?);
    let (registered_tx, registered_rx) = oneshot::channel();
    let service = Arc::new(RuntimeService {
        core: Arc::downgrade(&core),
        check_identity: launched.is_none(),
        identity: identity.clone(),
        registered: Mutex::new(Some(registered_tx)),
        plugin: OnceLock::new(),
        updates_in_flight: Semaphore::new(MAX_UPDATE_REQUESTS_IN_FLIGHT),
        mux: mux.clone(),
        refusals: Default::default(),
    });
    let runtime_conn = Replies::new(
        mux.open(mux::RUNTIME_SERVICE_CONN).map_err(|e| setup(&e))?,
        mux.clone(),
        core.request_timeout(),
        pid.map_or_else(|| "(unknown pid)".to_string(), |pid| format!("[{pid}]")),
    );
    let mut server = ttrpc::r#async::Server::new()
        .add_listener(runtime_conn.into_ttrpc_listener())
        .register_service(api::ttrpc::create_runtime(service.clone()));
    server.start().await.map_err(|e| setup(&e))?;
    mux.unblock();

    let timeout = core.registration_timeout();
    let registration = tokio::select! {
        r = registered_rx => r.unwrap_or_else(|_| Err("registration dropped".to_string())),
        _ = mux.closed() => Err("connection closed".to_string()),
        _ = tokio::time::sleep(timeout) => Err("plugin registration timed out".to_string()),
    };
    if registration.is_ok() {
        mux.set_receive_limits(mux::ReceiveLimits::default());
        mux.leave_budget();
    }
    let (base, idx, config, dropin, concurrent, child, claim) = match (registration, launched) {
        (Ok((name, idx, claim)), None) => (
            name,
            idx,
            String::new(),
            Default::default(),
            false,
            None,
            claim,
        ),
        (Ok(_), Some(l)) => {
            let claim = core.identities.as_ref().map(|_| {
                let who = format!("pre-connected:{}-{}[{}]", l.idx, l.base, l.child.pid());
                core.names.hold(&l.base, &l.idx, who, identity.clone())
            });
            let concurrent = l.concurrent_requests;
            (
                l.base,
                l.idx,
                l.config,
                l.timeouts,
                concurrent,
                Some(l.child),
                claim,
            )
        }
        (Err(reason), launched) => {
            // Let a rejected plugin read why before the connection goes;
            // it normally hangs up itself right away.
            let _ = server.shutdown().await;
            let _ = tokio::time::timeout(REJECTION_GRACE, mux.closed()).await;
            if let Some(mut l) = launched {
                let _ = l.child.kill().await;
            }
            return Err(Error::Start(format!("failed to register plugin: {reason}")));
        }
    };

    let plugin = Arc::new(Plugin::new(
        base,
        idx,
        origin,
        identity,
        config,
        dropin,
        concurrent,
        Transport::Ttrpc {
            client,
            mux: mux.clone(),
            server: Mutex::new(Some(server)),
            child: Mutex::new(child),
        },
        core.clone(),
    ));
    if let Some(claim) = claim {
        plugin.keep_name(claim);
    }
    watch_connection(&core, &plugin, mux);
    // Registered: from now on the plugin may ask for updates. Not later: a
    // stub may do so as soon as it has answered Synchronize, before the
    // runtime's sync callback has returned.
    let _ = service.plugin.set(Arc::downgrade(&plugin));
    if let Err(e) = plugin.configure().await {
        warn!("plugin {}: {}", plugin.qualified_name(), peer_text(&e));
        plugin.close();
        return Err(e);
    }
    Ok(plugin)
}

/// Marks the plugin closed as soon as its connection goes away, so the next
/// event skips it instead of waiting for a timeout.
fn watch_connection(core: &Core, plugin: &Arc<Plugin>, mux: Mux) {
    let weak = Arc::downgrade(plugin);
    core.spawn(async move {
        let reason = mux.closed().await;
        if let Some(plugin) = weak.upgrade() {
            match reason {
                Some(e) => info!("plugin {} disconnected: {e}", plugin.qualified_name()),
                None => info!("plugin {} disconnected", plugin.qualified_name()),
            }
            plugin.close();
        }
    });
}
