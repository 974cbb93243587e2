//! Raw and half-broken peers, built from the mux and ttrpc directly.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use nri_api as api;
use nri_api::mux::{self, Mux};
use protobuf::Message;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use ttrpc::r#async::{MethodHandler, Service, TtrpcContext};

/// Open fds of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Waits until `f` holds, checking every 10 ms, for at most `limit`.
pub async fn eventually(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Requests a raw plugin received: (method, payload).
pub type Seen = Arc<std::sync::Mutex<Vec<(String, Vec<u8>)>>>;

/// Answers one Plugin method with fixed bytes (possibly not protobuf), or
/// refuses it as a ttrpc server refuses a method it does not have.
struct Fixed {
    reply: Option<Vec<u8>>,
    seen: Seen,
}

#[async_trait::async_trait]
impl MethodHandler for Fixed {
    async fn handler(
        &self,
        _: TtrpcContext,
        req: ttrpc::Request,
    ) -> ttrpc::Result<ttrpc::Response> {
        self.seen
            .lock()
            .unwrap()
            .push((req.method.clone(), req.payload.clone()));
        let mut r = ttrpc::Response::new();
        match &self.reply {
            Some(bytes) => r.payload = bytes.clone(),
            // The status ttrpc's server (Rust and Go alike) answers for a
            // method it has no handler for.
            None => {
                r.status = protobuf::MessageField::some(ttrpc::get_status(
                    ttrpc::Code::UNIMPLEMENTED,
                    format!("{} method", req.method),
                ))
            }
        }
        Ok(r)
    }
}

/// A plugin built by hand: each Plugin method answers fixed bytes; methods
/// it is not given are not served at all.
pub struct RawPlugin {
    pub mux: Mux,
    pub runtime: api::ttrpc::RuntimeClient,
    /// Every request its handlers received, in order.
    pub seen: Seen,
    _server: ttrpc::r#async::Server,
}

/// The methods of a raw plugin that registers, subscribes to RunPodSandbox
/// only (which no test sends it) and acknowledges Synchronize.
pub fn idle_methods() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("Configure", configure_reply(&[api::Event::RUN_POD_SANDBOX])),
        ("Synchronize", vec![]),
    ]
}

pub fn configure_reply(events: &[api::Event]) -> Vec<u8> {
    api::ConfigureResponse {
        events: api::EventMask::of(events).raw(),
        ..Default::default()
    }
    .write_to_bytes()
    .unwrap()
}

impl RawPlugin {
    pub async fn connect(socket: &Path, methods: Vec<(&str, Vec<u8>)>) -> RawPlugin {
        let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
        RawPlugin::over(stream, methods).await
    }

    /// A raw plugin on an already connected trunk.
    pub async fn over<T>(trunk: T, methods: Vec<(&str, Vec<u8>)>) -> RawPlugin
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        RawPlugin::refusing(trunk, methods, &[]).await
    }

    /// A raw plugin that also has handlers for `refused`, which answer
    /// Unimplemented, so that those requests are seen.
    pub async fn refusing<T>(trunk: T, methods: Vec<(&str, Vec<u8>)>, refused: &[&str]) -> RawPlugin
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        let mux = Mux::new(trunk, mux::Options::default());
        let seen = Seen::default();
        let mut handlers: HashMap<String, Box<dyn MethodHandler + Send + Sync>> = HashMap::new();
        let answers = methods.into_iter().map(|(m, bytes)| (m, Some(bytes)));
        for (name, reply) in answers.chain(refused.iter().map(|m| (*m, None))) {
            let seen = Arc::clone(&seen);
            handlers.insert(name.to_string(), Box::new(Fixed { reply, seen }));
        }
        let service = Service {
            methods: handlers,
            streams: HashMap::new(),
        };
        let mut server = ttrpc::r#async::Server::new()
            .add_listener(
                mux.open(mux::PLUGIN_SERVICE_CONN)
                    .unwrap()
                    .into_ttrpc_listener(),
            )
            .register_service(HashMap::from([(
                "nri.pkg.api.v1alpha1.Plugin".to_string(),
                service,
            )]));
        server.start().await.unwrap();
        let client = ttrpc::r#async::Client::new(ttrpc::r#async::transport::Socket::new(
            mux.open(mux::RUNTIME_SERVICE_CONN).unwrap(),
        ));
        RawPlugin {
            mux,
            runtime: api::ttrpc::RuntimeClient::new(client),
            seen,
            _server: server,
        }
    }

    pub async fn register(&self, name: &str, idx: &str) -> ttrpc::Result<api::Empty> {
        self.register_as(name, idx, "").await
    }

    /// Registers, telling the runtime `nri_version` as the plugin's NRI version.
    pub async fn register_as(
        &self,
        name: &str,
        idx: &str,
        nri_version: &str,
    ) -> ttrpc::Result<api::Empty> {
        let req = api::RegisterPluginRequest {
            plugin_name: name.into(),
            plugin_idx: idx.into(),
            NRI_version: nri_version.into(),
            ..Default::default()
        };
        self.runtime
            .register_plugin(ttrpc::context::with_timeout(2_000_000_000), &req)
            .await
    }

    pub async fn update(&self) -> ttrpc::Result<api::UpdateContainersResponse> {
        update_via(&self.runtime).await
    }

    /// The requests received for `method`, decoded.
    pub fn requests<M: Message>(&self, method: &str) -> Vec<M> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, payload)| M::parse_from_bytes(payload).unwrap())
            .collect()
    }

    /// The methods of every request received, in order.
    pub fn methods(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(m, _)| m.clone())
            .collect()
    }
}

/// Asks for one unsolicited update of container "victim".
pub async fn update_via(
    runtime: &api::ttrpc::RuntimeClient,
) -> ttrpc::Result<api::UpdateContainersResponse> {
    let req = api::UpdateContainersRequest {
        update: vec![api::ContainerUpdate {
            container_id: "victim".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    runtime
        .update_containers(ttrpc::context::with_timeout(2_000_000_000), &req)
        .await
}

/// A well-behaved plugin answering every event, to show the others don't
/// hurt it.
pub fn good_plugin() -> crate::common::TestPlugin {
    crate::common::TestPlugin::adjusting(|_| {
        let mut a = api::ContainerAdjustment::default();
        a.add_annotation("good", "yes");
        Ok((a, vec![]))
    })
}

pub async fn good_plugin_still_adjusts(h: &crate::common::Harness, ctr: &str) {
    let rsp = h
        .nri
        .create_container(crate::common::create_req("pod", ctr))
        .await
        .expect("creation with the good plugin");
    assert_eq!(
        crate::common::annotation(&rsp, "good"),
        Some("yes"),
        "the good plugin's adjustment is there"
    );
}

/// Answers a Plugin method: the reply payload for (method, how many times
/// it was called before).
pub type Answer = Box<dyn Fn(&str, usize) -> Vec<u8> + Send + Sync>;

/// A plugin whose Plugin service is answered by hand, one request at a
/// time, with every reply put on the trunk the way a Go peer frames it
/// (see [`go_frames`]), whatever its size.
pub struct GoFramedPlugin {
    pub mux: Mux,
    pub runtime: api::ttrpc::RuntimeClient,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for GoFramedPlugin {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl GoFramedPlugin {
    pub async fn connect(socket: &Path, name: &str, idx: &str, answer: Answer) -> GoFramedPlugin {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
        let mux = Mux::new(stream, mux::Options::default());
        // Raw framing: each write is cut at the largest frame only, as Go's mux does.
        let mut conn = mux
            .open_with(mux::PLUGIN_SERVICE_CONN, mux::Framing::Raw)
            .unwrap();
        let server = tokio::spawn(async move {
            let mut calls: HashMap<String, usize> = HashMap::new();
            loop {
                let mut header = [0u8; 10];
                if conn.read_exact(&mut header).await.is_err() {
                    return;
                }
                let len = u32::from_be_bytes(header[..4].try_into().unwrap()) as usize;
                let stream_id = u32::from_be_bytes(header[4..8].try_into().unwrap());
                let mut body = vec![0u8; len];
                if conn.read_exact(&mut body).await.is_err() {
                    return;
                }
                let req = ttrpc::Request::parse_from_bytes(&body).unwrap();
                let n = calls.entry(req.method.clone()).or_default();
                let mut rsp = ttrpc::Response::new();
                rsp.payload = answer(&req.method, *n);
                *n += 1;
                let msg = ttrpc_message(2, stream_id, &rsp.write_to_bytes().unwrap());
                // ttrpc's bufio.Writer flushes its first 4096 bytes, then
                // writes the rest in one go.
                let (first, rest) = msg.split_at(msg.len().min(4096));
                if conn.write_all(first).await.is_err() || conn.write_all(rest).await.is_err() {
                    return;
                }
            }
        });
        let client = ttrpc::r#async::Client::new(ttrpc::r#async::transport::Socket::new(
            mux.open(mux::RUNTIME_SERVICE_CONN).unwrap(),
        ));
        let plugin = GoFramedPlugin {
            mux,
            runtime: api::ttrpc::RuntimeClient::new(client),
            server,
        };
        let req = api::RegisterPluginRequest {
            plugin_name: name.into(),
            plugin_idx: idx.into(),
            ..Default::default()
        };
        plugin
            .runtime
            .register_plugin(ttrpc::context::with_timeout(2_000_000_000), &req)
            .await
            .unwrap();
        plugin
    }
}

/// A ttrpc request message (10-byte header + envelope) as a peer writes it.
pub fn ttrpc_request(method: &str, payload: &impl Message, stream_id: u32) -> Vec<u8> {
    let service = match method {
        "RegisterPlugin" | "UpdateContainers" => "nri.pkg.api.v1alpha1.Runtime",
        _ => "nri.pkg.api.v1alpha1.Plugin",
    };
    let mut envelope = ttrpc::Request::new();
    envelope.set_service(service.into());
    envelope.set_method(method.into());
    envelope.payload = payload.write_to_bytes().unwrap();
    envelope.set_timeout_nano(2_000_000_000);
    ttrpc_message(1, stream_id, &envelope.write_to_bytes().unwrap())
}

/// A ttrpc message: `length | stream id | type | flags` and the body.
pub fn ttrpc_message(kind: u8, stream_id: u32, body: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(10 + body.len());
    msg.extend((body.len() as u32).to_be_bytes());
    msg.extend(stream_id.to_be_bytes());
    msg.extend([kind, 0]);
    msg.extend(body);
    msg
}

/// The trunk frames a Go peer writes for one ttrpc message: ttrpc's
/// 4096-byte `bufio.Writer` flushes the header and the first 4086 bytes,
/// then hands the rest to the mux in one `Write`, which cuts it at the
/// largest frame payload (upstream `pkg/net/multiplex`, `mux.write`).
pub fn go_frames(conn: mux::ConnId, msg: &[u8]) -> Vec<u8> {
    let (first, mut rest) = msg.split_at(msg.len().min(4096));
    let mut out = Vec::with_capacity(msg.len() + 64);
    for part in std::iter::once(first).chain(std::iter::from_fn(|| {
        (!rest.is_empty()).then(|| {
            let (part, tail) = rest.split_at(rest.len().min(mux::MAX_PAYLOAD));
            rest = tail;
            part
        })
    })) {
        out.extend(conn.to_be_bytes());
        out.extend((part.len() as u32).to_be_bytes());
        out.extend(part);
    }
    out
}

/// A trunk whose reading can be switched off for good: the peer then stops
/// reading what the runtime sends while its own writes go on.
pub struct Deafened {
    inner: tokio::net::UnixStream,
    deaf: Arc<AtomicBool>,
}

impl Deafened {
    pub fn new(inner: tokio::net::UnixStream) -> (Deafened, Arc<AtomicBool>) {
        let deaf = Arc::new(AtomicBool::new(false));
        let stream = Deafened {
            inner,
            deaf: Arc::clone(&deaf),
        };
        (stream, deaf)
    }
}

impl AsyncRead for Deafened {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.deaf.load(Ordering::Acquire) {
            // Never woken again: this reader is gone for good.
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Deafened {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
