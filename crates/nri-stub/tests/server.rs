//! The stub's Plugin service as a runtime sees it on the wire: raw ttrpc
//! messages written to connection 1, and each answer compared with what
//! ttrpc-rust's server (the stub's server before its own) answers to the
//! same bytes, with the same handlers behind it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use nri_api::envelope::{Header, MESSAGE_TYPE_DATA, MESSAGE_TYPE_RESPONSE};
use nri_api::mux::{self, Conn, Mux, TTRPC_HEADER_LEN, TTRPC_MESSAGE_LENGTH_MAX};
use nri_api::{self as api};
use nri_stub::{HandlerResult, Plugin, Stub};
use protobuf::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, Semaphore};

const SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";

/// What the handlers do, by container id: "wait" waits for a permit of
/// `release`, "sleep" sleeps for a minute, "huge" answers with a reply
/// over ttrpc's limit, "fail" fails; anything else answers at once.
struct Behaviour {
    release: Semaphore,
}

impl Behaviour {
    async fn create(
        &self,
        ctr: &api::Container,
    ) -> HandlerResult<(api::ContainerAdjustment, Vec<api::ContainerUpdate>)> {
        let mut adjust = api::ContainerAdjustment::new();
        match ctr.id.as_str() {
            "wait" => drop(self.release.acquire().await),
            "sleep" => tokio::time::sleep(Duration::from_secs(60)).await,
            "huge" => adjust.add_annotation("huge", "x".repeat(TTRPC_MESSAGE_LENGTH_MAX)),
            "fail" => return Err("refusing container fail".into()),
            _ => {}
        }
        adjust.add_annotation("seen", ctr.id.clone());
        Ok((adjust, vec![]))
    }
}

/// The plugin on the stub.
struct OnStub(Arc<Behaviour>);

#[nri_stub::plugin]
impl Plugin for OnStub {
    async fn create_container(
        &self,
        _pod: &api::PodSandbox,
        ctr: &api::Container,
    ) -> HandlerResult<(api::ContainerAdjustment, Vec<api::ContainerUpdate>)> {
        self.0.create(ctr).await
    }
}

/// The same handler behind ttrpc-rust's server, as the stub served it
/// before: a failure is an `Unknown` status with the handler's words.
struct OnTtrpcRust(Arc<Behaviour>);

#[async_trait]
impl api::ttrpc::Plugin for OnTtrpcRust {
    async fn create_container(
        &self,
        _ctx: &ttrpc::r#async::TtrpcContext,
        req: api::CreateContainerRequest,
    ) -> ttrpc::Result<api::CreateContainerResponse> {
        match self.0.create(&req.container).await {
            Ok((adjust, update)) => Ok(api::CreateContainerResponse {
                adjust: protobuf::MessageField::some(adjust),
                update,
                ..Default::default()
            }),
            Err(e) => Err(ttrpc::Error::RpcStatus(ttrpc::get_status(
                ttrpc::Code::UNKNOWN,
                e.to_string(),
            ))),
        }
    }
}

/// A runtime's end of a plugin connection: connection 1 as raw bytes.
struct Peer {
    conn: Conn,
    _mux: Mux,
    _keep: Box<dyn std::any::Any + Send>,
    behaviour: Arc<Behaviour>,
}

/// The runtime's mux: it may send messages over ttrpc's limit.
fn runtime_mux(stream: tokio::net::UnixStream) -> Mux {
    let lax = mux::Options::default().max_message_payload(2 * TTRPC_MESSAGE_LENGTH_MAX);
    Mux::new(mux::UnixTrunk::new(stream).unwrap(), lax)
}

struct Registrar(mpsc::UnboundedSender<()>);

#[async_trait]
impl api::ttrpc::Runtime for Registrar {
    async fn register_plugin(
        &self,
        _ctx: &ttrpc::r#async::TtrpcContext,
        _req: api::RegisterPluginRequest,
    ) -> ttrpc::Result<api::Empty> {
        let _ = self.0.send(());
        Ok(api::Empty::new())
    }
}

/// The stub, connected and registered (not configured: the service serves
/// from the start).
async fn stub_peer() -> Peer {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    theirs.set_nonblocking(true).unwrap();
    let mux = runtime_mux(tokio::net::UnixStream::from_std(theirs).unwrap());
    let conn = mux.open(mux::PLUGIN_SERVICE_CONN).unwrap();
    let (tx, mut registered) = mpsc::unbounded_channel();
    let mut server = ttrpc::r#async::Server::new()
        .add_listener(
            mux.open(mux::RUNTIME_SERVICE_CONN)
                .unwrap()
                .into_ttrpc_listener(),
        )
        .register_service(api::ttrpc::create_runtime(Arc::new(Registrar(tx))));
    server.start().await.unwrap();
    let behaviour = Arc::new(Behaviour {
        release: Semaphore::new(0),
    });
    let stub = Arc::new(
        Stub::builder()
            .name("wire")
            .idx("10")
            .connection(ours)
            .build(OnStub(behaviour.clone()))
            .unwrap(),
    );
    let runner = tokio::spawn({
        let stub = stub.clone();
        async move { stub.run().await }
    });
    registered.recv().await.expect("the stub registers");
    Peer {
        conn,
        _mux: mux,
        _keep: Box::new((server, stub, runner)),
        behaviour,
    }
}

/// ttrpc-rust's server with the same handler, on a mux of its own.
async fn ttrpc_rust_peer() -> Peer {
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    let mux = runtime_mux(theirs);
    let conn = mux.open(mux::PLUGIN_SERVICE_CONN).unwrap();
    let plugin_mux = Mux::new(mux::UnixTrunk::new(ours).unwrap(), mux::Options::default());
    let behaviour = Arc::new(Behaviour {
        release: Semaphore::new(0),
    });
    let service = api::ttrpc::create_plugin(Arc::new(OnTtrpcRust(behaviour.clone())));
    let mut server = ttrpc::r#async::Server::new()
        .add_listener(
            plugin_mux
                .open(mux::PLUGIN_SERVICE_CONN)
                .unwrap()
                .into_ttrpc_listener(),
        )
        .register_service(service);
    server.start().await.unwrap();
    Peer {
        conn,
        _mux: mux,
        _keep: Box::new((server, plugin_mux)),
        behaviour,
    }
}

fn create(id: &str) -> Vec<u8> {
    let mut req = api::CreateContainerRequest::new();
    req.container.mut_or_insert_default().id = id.into();
    req.pod.mut_or_insert_default().id = "pod".into();
    req.write_to_bytes().unwrap()
}

/// A request message with a header of our choosing, of any size.
fn message(
    stream: u32,
    kind: u8,
    service: &str,
    method: &str,
    payload: &[u8],
    timeout: Duration,
) -> Vec<u8> {
    let envelope = ttrpc::Request {
        service: service.into(),
        method: method.into(),
        payload: payload.to_vec(),
        timeout_nano: timeout.as_nanos() as i64,
        ..Default::default()
    }
    .write_to_bytes()
    .unwrap();
    framed(stream, kind, &envelope)
}

fn framed(stream: u32, kind: u8, envelope: &[u8]) -> Vec<u8> {
    let mut msg = (envelope.len() as u32).to_be_bytes().to_vec();
    msg.extend(stream.to_be_bytes());
    msg.extend([kind, 0]);
    msg.extend(envelope);
    msg
}

fn request(stream: u32, method: &str, payload: &[u8]) -> Vec<u8> {
    message(stream, 1, SERVICE, method, payload, Duration::from_secs(5))
}

/// An answer, as a runtime reads it.
#[derive(Debug, PartialEq)]
struct Answer {
    stream: u32,
    code: ttrpc::Code,
    message: String,
    /// The annotations of a CreateContainer reply.
    annotations: Vec<(String, String)>,
}

impl Peer {
    async fn send(&mut self, msg: &[u8]) {
        self.conn.write_all(msg).await.unwrap();
    }

    async fn answer(&mut self) -> Answer {
        let read = async {
            let mut head = [0u8; TTRPC_HEADER_LEN];
            self.conn.read_exact(&mut head).await.unwrap();
            let head = Header::parse(&head);
            assert_eq!(head.kind, MESSAGE_TYPE_RESPONSE);
            let mut body = vec![0u8; head.len];
            self.conn.read_exact(&mut body).await.unwrap();
            let rsp = ttrpc::Response::parse_from_bytes(&body).unwrap();
            let status = rsp.status.clone().unwrap_or_default();
            let annotations = if status.code() == ttrpc::Code::OK {
                let reply = api::CreateContainerResponse::parse_from_bytes(&rsp.payload).unwrap();
                let mut a: Vec<_> = reply.adjust.annotations.clone().into_iter().collect();
                a.sort();
                a
            } else {
                vec![]
            };
            Answer {
                stream: head.stream,
                code: status.code(),
                message: status.message,
                annotations,
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("an answer")
    }
}

/// Sends `msg` to both servers and returns the two answers.
async fn both(stub: &mut Peer, reference: &mut Peer, msg: &[u8]) -> (Answer, Answer) {
    stub.send(msg).await;
    reference.send(msg).await;
    (stub.answer().await, reference.answer().await)
}

#[tokio::test]
async fn answers_are_ttrpc_rusts_for_good_and_bad_requests() {
    let (mut stub, mut reference) = (stub_peer().await, ttrpc_rust_peer().await);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a request", request(1, "CreateContainer", &create("quick"))),
        (
            "a failing handler",
            request(3, "CreateContainer", &create("fail")),
        ),
        ("an unknown method", request(5, "Frobnicate", b"")),
        (
            "an unknown service",
            message(7, 1, "x.Y", "CreateContainer", b"", Duration::ZERO),
        ),
        (
            "an undecodable request",
            request(9, "CreateContainer", b"\x0a\xff"),
        ),
        ("an undecodable envelope", framed(11, 1, b"\x0a\x05ab")),
        (
            "an even stream",
            request(12, "CreateContainer", &create("quick")),
        ),
        (
            "data for a stream",
            message(
                13,
                MESSAGE_TYPE_DATA,
                SERVICE,
                "CreateContainer",
                b"",
                Duration::ZERO,
            ),
        ),
        (
            "a reply over the limit",
            request(15, "CreateContainer", &create("huge")),
        ),
        (
            "a request's timeout",
            message(
                17,
                1,
                SERVICE,
                "CreateContainer",
                &create("sleep"),
                Duration::from_millis(50),
            ),
        ),
        (
            "a request over the limit",
            request(
                19,
                "CreateContainer",
                &vec![0u8; TTRPC_MESSAGE_LENGTH_MAX + 1],
            ),
        ),
        (
            "a request after all that",
            request(21, "CreateContainer", &create("last")),
        ),
    ];
    for (what, msg) in cases {
        let (ours, theirs) = both(&mut stub, &mut reference, &msg).await;
        assert_eq!(ours, theirs, "{what}");
    }
}

#[tokio::test]
async fn a_waiting_handler_does_not_hold_up_the_next_request() {
    let mut stub = stub_peer().await;
    stub.send(&request(1, "CreateContainer", &create("wait")))
        .await;
    stub.send(&request(3, "CreateContainer", &create("quick")))
        .await;
    let first = stub.answer().await;
    assert_eq!((first.stream, first.code), (3, ttrpc::Code::OK));
    stub.behaviour.release.add_permits(1);
    let second = stub.answer().await;
    assert_eq!((second.stream, second.code), (1, ttrpc::Code::OK));
    assert_eq!(
        second.annotations,
        [("seen".to_string(), "wait".to_string())]
    );
}
