//! The client against a ttrpc-rust server (a real peer) and against a peer
//! written here that answers as a hostile or broken plugin would.

use std::collections::HashMap;
use std::time::Duration;

use nri_api::mux::{self, Conn, Mux, PLUGIN_SERVICE_CONN};
use protobuf::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use ttrpc::r#async::{MethodHandler, Server, Service, TtrpcContext};

use nri_api::envelope::MESSAGE_TYPE_REQUEST;

use super::*;

/// Both ends of a trunk: the runtime's connection 1 and the plugin's,
/// whose mux sends messages over ttrpc's limit too.
fn trunk() -> (Mux, Conn, Mux, Conn) {
    let (a, b) = UnixStream::pair().unwrap();
    let runtime = Mux::new(mux::UnixTrunk::new(a).unwrap(), mux::Options::default());
    let lax = mux::Options::default().max_message_payload(2 * TTRPC_MESSAGE_LENGTH_MAX);
    let plugin = Mux::new(mux::UnixTrunk::new(b).unwrap(), lax);
    let (rc, pc) = (
        runtime.open(PLUGIN_SERVICE_CONN).unwrap(),
        plugin.open(PLUGIN_SERVICE_CONN).unwrap(),
    );
    (runtime, rc, plugin, pc)
}

/// Answers `Echo` with the payload reversed and `Fail` with a status.
struct Handler;

#[async_trait::async_trait]
impl MethodHandler for Handler {
    async fn handler(
        &self,
        ctx: TtrpcContext,
        req: ttrpc::Request,
    ) -> ttrpc::Result<ttrpc::Response> {
        assert_eq!(
            req.timeout_nano, 2_000_000_000,
            "the timeout goes to the plugin"
        );
        assert!(ctx.timeout_nano > 0);
        let mut rsp = ttrpc::Response::new();
        if req.method == "Fail" {
            rsp.set_status(ttrpc::get_status(
                ttrpc::Code::NOT_FOUND,
                "no such container",
            ));
            return Ok(rsp);
        }
        rsp.payload = req.payload.iter().rev().copied().collect();
        Ok(rsp)
    }
}

async fn ttrpc_rust_server(conn: Conn) -> Server {
    let mut methods: HashMap<String, Box<dyn MethodHandler + Send + Sync>> = HashMap::new();
    methods.insert("Echo".into(), Box::new(Handler));
    methods.insert("Fail".into(), Box::new(Handler));
    let service = Service {
        methods,
        streams: HashMap::new(),
    };
    let mut server = Server::new()
        .add_listener(conn.into_ttrpc_listener())
        .register_service(HashMap::from([(PLUGIN_SERVICE.to_string(), service)]));
    server.start().await.unwrap();
    server
}

const TIMEOUT: Duration = Duration::from_secs(2);

#[tokio::test]
async fn a_ttrpc_rust_server_answers_every_call() {
    let (_rm, rc, _pm, pc) = trunk();
    let _server = ttrpc_rust_server(pc).await;
    let client = PluginConn::new(rc);
    // Concurrent calls on one connection each get their own reply.
    let calls = (0..16u8).map(|i| {
        let client = &client;
        async move {
            let payload: Vec<u8> = (0..=i).collect();
            let reply = client.call("Echo", &payload, TIMEOUT).await.unwrap();
            assert_eq!(reply, payload.iter().rev().copied().collect::<Vec<_>>());
        }
    });
    futures::future::join_all(calls).await;
    // An empty payload is left out of the envelope, and still arrives.
    assert_eq!(
        client.call("Echo", &[], TIMEOUT).await.unwrap(),
        Vec::<u8>::new()
    );
    // A status is the plugin's error.
    match client.call("Fail", b"x", TIMEOUT).await {
        Err(ttrpc::Error::RpcStatus(s)) => {
            assert_eq!(s.code(), ttrpc::Code::NOT_FOUND);
            assert_eq!(s.message, "no such container");
        }
        other => panic!("{other:?}"),
    }
    // Typed calls decode the reply.
    let req = nri_api::Empty::new();
    let _: nri_api::Empty = client.unary("Echo", &req, TIMEOUT).await.unwrap();
}

#[test]
fn requests_are_encoded_as_ttrpc_rust_encodes_them() {
    for (payload, timeout_nano) in [(vec![], 0), (vec![1, 2, 3], 5), (vec![7; 300], i64::MAX)] {
        let msg =
            encode_request(9, PLUGIN_SERVICE, "CreateContainer", &payload, timeout_nano).unwrap();
        let want = ttrpc::Request {
            service: PLUGIN_SERVICE.into(),
            method: "CreateContainer".into(),
            payload: payload.clone(),
            timeout_nano,
            ..Default::default()
        }
        .write_to_bytes()
        .unwrap();
        let (head, body) = msg.split_at(TTRPC_HEADER_LEN);
        assert_eq!(body, &want[..]);
        assert_eq!(head[..4], (want.len() as u32).to_be_bytes());
        assert_eq!(head[4..8], 9u32.to_be_bytes());
        assert_eq!(head[8..], [MESSAGE_TYPE_REQUEST, 0]);
    }
}

/// The plugin's side, by hand: reads one request.
async fn read_request(pc: &mut Conn) -> (u32, ttrpc::Request) {
    let mut head = [0u8; TTRPC_HEADER_LEN];
    pc.read_exact(&mut head).await.unwrap();
    let len = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
    let mut body = vec![0; len];
    pc.read_exact(&mut body).await.unwrap();
    let stream = u32::from_be_bytes(head[4..8].try_into().unwrap());
    (stream, ttrpc::Request::parse_from_bytes(&body).unwrap())
}

/// The plugin's side, by hand: a message of type `kind` whose body is a
/// `ttrpc.Response` carrying `payload`.
fn response(stream: u32, kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut rsp = ttrpc::Response::new();
    rsp.payload = payload.to_vec();
    let body = rsp.write_to_bytes().unwrap();
    let mut msg = (body.len() as u32).to_be_bytes().to_vec();
    msg.extend_from_slice(&stream.to_be_bytes());
    msg.extend_from_slice(&[kind, 0]);
    msg.extend_from_slice(&body);
    msg
}

#[tokio::test]
async fn replies_in_any_order_reach_their_calls() {
    let (_rm, rc, _pm, mut pc) = trunk();
    let client = PluginConn::new(rc);
    let first = client.call("Echo", b"first", TIMEOUT);
    let second = client.call("Echo", b"second", TIMEOUT);
    let plugin = async {
        let (s1, r1) = read_request(&mut pc).await;
        let (s2, r2) = read_request(&mut pc).await;
        assert_eq!((s1 % 2, s2 % 2), (1, 1), "client streams are odd");
        // A reply for a stream nobody waits for is dropped.
        pc.write_all(&response(1001, MESSAGE_TYPE_RESPONSE, b"stray"))
            .await
            .unwrap();
        pc.write_all(&response(s2, MESSAGE_TYPE_RESPONSE, &r2.payload))
            .await
            .unwrap();
        pc.write_all(&response(s1, MESSAGE_TYPE_RESPONSE, &r1.payload))
            .await
            .unwrap();
    };
    let (a, b, ()) = tokio::join!(first, second, plugin);
    assert_eq!(a.unwrap(), b"first");
    assert_eq!(b.unwrap(), b"second");
}

#[tokio::test]
async fn a_reply_over_the_limit_fails_its_call_only() {
    let (_rm, rc, _pm, mut pc) = trunk();
    let client = PluginConn::new(rc);
    let big = vec![b'x'; TTRPC_MESSAGE_LENGTH_MAX + 1];
    let call = client.call("Echo", b"a", TIMEOUT);
    let plugin = async {
        let (s, _) = read_request(&mut pc).await;
        let msg = response(s, MESSAGE_TYPE_RESPONSE, &big);
        pc.write_all(&msg).await.unwrap();
        msg.len() - TTRPC_HEADER_LEN
    };
    let (res, len) = tokio::join!(call, plugin);
    match res {
        Err(ttrpc::Error::RpcStatus(s)) => {
            assert_eq!(s.code(), ttrpc::Code::INVALID_ARGUMENT);
            assert_eq!(s.message, oversized(len));
            assert!(crate::error::is_oversized_reply(&s));
        }
        other => panic!("{other:?}"),
    }
    // The connection goes on.
    let call = client.call("Echo", b"b", TIMEOUT);
    let plugin = async {
        let (s, r) = read_request(&mut pc).await;
        pc.write_all(&response(s, MESSAGE_TYPE_RESPONSE, &r.payload))
            .await
            .unwrap();
    };
    assert_eq!(tokio::join!(call, plugin).0.unwrap(), b"b");
}

#[tokio::test]
async fn a_request_over_the_limit_is_never_sent() {
    let (_rm, rc, _pm, mut pc) = trunk();
    let client = PluginConn::new(rc);
    let big = vec![0u8; TTRPC_MESSAGE_LENGTH_MAX];
    match client.call("Echo", &big, TIMEOUT).await {
        Err(ttrpc::Error::Others(text)) => {
            assert!(crate::error::is_oversized_message(&text), "{text}");
            let len = ttrpc::Request {
                service: PLUGIN_SERVICE.into(),
                method: "Echo".into(),
                payload: big.clone(),
                timeout_nano: ttrpc::context::with_duration(TIMEOUT).timeout_nano,
                ..Default::default()
            }
            .compute_size() as usize;
            assert_eq!(text, oversized(len));
        }
        other => panic!("{other:?}"),
    }
    // Nothing reached the plugin: the next thing it reads is the next call.
    let call = client.call("Echo", b"next", TIMEOUT);
    let plugin = async {
        let (s, r) = read_request(&mut pc).await;
        assert_eq!(r.payload, b"next");
        pc.write_all(&response(s, MESSAGE_TYPE_RESPONSE, &r.payload))
            .await
            .unwrap();
    };
    assert_eq!(tokio::join!(call, plugin).0.unwrap(), b"next");
}

#[tokio::test]
async fn a_call_given_up_leaves_nothing_waiting() {
    let (_rm, rc, _pm, mut pc) = trunk();
    let client = PluginConn::new(rc);
    let given_up = tokio::time::timeout(
        Duration::from_millis(50),
        client.call("Echo", b"late", TIMEOUT),
    )
    .await;
    assert!(given_up.is_err());
    assert!(client.shared.lock().waiting.is_empty());
    // Its late reply is dropped; the next call gets its own.
    let (late, _) = read_request(&mut pc).await;
    pc.write_all(&response(late, MESSAGE_TYPE_RESPONSE, b"late"))
        .await
        .unwrap();
    let call = client.call("Echo", b"now", TIMEOUT);
    let plugin = async {
        let (s, r) = read_request(&mut pc).await;
        pc.write_all(&response(s, MESSAGE_TYPE_RESPONSE, &r.payload))
            .await
            .unwrap();
    };
    assert_eq!(tokio::join!(call, plugin).0.unwrap(), b"now");
}

#[tokio::test]
async fn a_lost_connection_fails_waiting_and_later_calls() {
    let (_rm, rc, pm, mut pc) = trunk();
    let client = PluginConn::new(rc);
    let call = client.call("Echo", b"a", TIMEOUT);
    let plugin = async {
        read_request(&mut pc).await;
        pm.close();
    };
    let (res, ()) = tokio::join!(call, plugin);
    assert!(matches!(res, Err(ttrpc::Error::Socket(_))), "{res:?}");
    let later = client.call("Echo", b"b", TIMEOUT).await;
    assert!(matches!(later, Err(ttrpc::Error::LocalClosed)), "{later:?}");
}

#[tokio::test]
async fn a_malformed_reply_fails_its_call() {
    let (_rm, rc, _pm, mut pc) = trunk();
    let client = PluginConn::new(rc);
    let call = client.call("Echo", b"a", TIMEOUT);
    let plugin = async {
        let (s, _) = read_request(&mut pc).await;
        // A request where a response belongs; then bytes that are no Response.
        pc.write_all(&response(s, MESSAGE_TYPE_REQUEST, b""))
            .await
            .unwrap();
    };
    let (res, ()) = tokio::join!(call, plugin);
    assert!(
        matches!(res, Err(ttrpc::Error::Others(ref t)) if t.starts_with("Receiver got malformed packet")),
        "{res:?}"
    );
    let call = client.call("Echo", b"b", TIMEOUT);
    let plugin = async {
        let (s, _) = read_request(&mut pc).await;
        let mut msg = 4u32.to_be_bytes().to_vec();
        msg.extend_from_slice(&s.to_be_bytes());
        msg.extend_from_slice(&[MESSAGE_TYPE_RESPONSE, 0, 0xff, 0xff, 0xff, 0xff]);
        pc.write_all(&msg).await.unwrap();
    };
    let (res, ()) = tokio::join!(call, plugin);
    assert!(
        matches!(res, Err(ttrpc::Error::Others(ref t)) if t.starts_with("Unpack response error")),
        "{res:?}"
    );
}

#[tokio::test]
async fn dropping_the_client_ends_its_task_and_the_connection() {
    let (rm, rc, pm, _pc) = trunk();
    let client = PluginConn::new(rc);
    // The client is the connection's last user once the mux handle goes:
    // dropping it closes the mux, its reader task included.
    drop(rm);
    assert!(!pm.is_closed());
    drop(client);
    // The trunk's other side sees the end: its own mux closes.
    tokio::time::timeout(Duration::from_secs(5), pm.closed())
        .await
        .expect("the runtime's side of the trunk closed");
}
