//! ttrpc 0.10 sessions in both directions over one trunk, the way NRI uses it.

use std::collections::HashMap;
use std::sync::Arc;

use super::{mux_pair, pattern};
use crate::mux::{Conn, Mux, Options, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use ttrpc::r#async::transport::Socket;
use ttrpc::r#async::{Client, MethodHandler, Server, Service, TtrpcContext};

/// Answers with the request payload reversed, prefixed by a tag.
struct Echo {
    tag: &'static [u8],
}

#[async_trait::async_trait]
impl MethodHandler for Echo {
    async fn handler(
        &self,
        _ctx: TtrpcContext,
        req: ttrpc::Request,
    ) -> ttrpc::Result<ttrpc::Response> {
        let mut payload = self.tag.to_vec();
        payload.extend(req.payload.iter().rev());
        let mut resp = ttrpc::Response::new();
        resp.payload = payload;
        Ok(resp)
    }
}

fn echo_service(tag: &'static [u8]) -> HashMap<String, Service> {
    let mut methods: HashMap<String, Box<dyn MethodHandler + Send + Sync>> = HashMap::new();
    methods.insert("Echo".to_string(), Box::new(Echo { tag }));
    let service = Service {
        methods,
        streams: HashMap::new(),
    };
    HashMap::from([("test.Echo".to_string(), service)])
}

/// A ttrpc server on an already-connected mux connection.
async fn serve(conn: Conn, tag: &'static [u8]) -> Server {
    let mut server = Server::new()
        .add_listener(conn.into_ttrpc_listener())
        .register_service(echo_service(tag));
    server.start().await.expect("server start");
    server
}

async fn call(client: &Client, payload: Vec<u8>) -> Vec<u8> {
    let mut req = ttrpc::Request::new();
    req.set_service("test.Echo".to_string());
    req.set_method("Echo".to_string());
    req.set_timeout_nano(10_000_000_000);
    req.payload = payload;
    client.request(req).await.expect("ttrpc call").payload
}

fn expected(tag: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = tag.to_vec();
    out.extend(payload.iter().rev());
    out
}

/// Runtime and plugin sides wired like NRI: the runtime blocks its reader
/// until its own server is up.
async fn nri_like_setup() -> (Mux, Mux, Client, Client, Server, Server) {
    let (runtime, plugin) = mux_pair(Options::default().blocked_read(true), Options::default());
    // Plugin: serves the "plugin" service on conn 1, calls the runtime on conn 2.
    let plugin_server = serve(plugin.open(PLUGIN_SERVICE_CONN).unwrap(), b"plugin:").await;
    let to_runtime = Client::new(Socket::new(plugin.open(RUNTIME_SERVICE_CONN).unwrap()));
    // Runtime: calls the plugin on conn 1, serves the "runtime" service on conn 2.
    let to_plugin = Client::new(Socket::new(runtime.open(PLUGIN_SERVICE_CONN).unwrap()));
    let runtime_server = serve(runtime.open(RUNTIME_SERVICE_CONN).unwrap(), b"runtime:").await;
    runtime.unblock();
    (
        runtime,
        plugin,
        to_plugin,
        to_runtime,
        runtime_server,
        plugin_server,
    )
}

async fn both_directions_small_and_large() {
    let (runtime, plugin, to_plugin, to_runtime, mut rs, mut ps) = nri_like_setup().await;

    let small = b"hello".to_vec();
    assert_eq!(
        call(&to_plugin, small.clone()).await,
        expected(b"plugin:", &small)
    );
    assert_eq!(
        call(&to_runtime, small.clone()).await,
        expected(b"runtime:", &small)
    );

    let large = pattern(42, (1 << 20) + 12_345);
    assert_eq!(
        call(&to_plugin, large.clone()).await,
        expected(b"plugin:", &large)
    );
    assert_eq!(
        call(&to_runtime, large.clone()).await,
        expected(b"runtime:", &large)
    );

    // Many concurrent calls of mixed sizes, both ways at once.
    let to_plugin = Arc::new(to_plugin);
    let to_runtime = Arc::new(to_runtime);
    let mut calls = Vec::new();
    for i in 0..24usize {
        let len = [0, 1, 4086, 4087, 70_000, 300_000][i % 6];
        let payload = pattern(i as u8, len);
        let (client, tag) = if i % 2 == 0 {
            (Arc::clone(&to_plugin), &b"plugin:"[..])
        } else {
            (Arc::clone(&to_runtime), &b"runtime:"[..])
        };
        calls.push(tokio::spawn(async move {
            assert_eq!(
                call(&client, payload.clone()).await,
                expected(tag, &payload)
            );
        }));
    }
    for c in calls {
        c.await.unwrap();
    }
    assert!(!runtime.is_closed() && !plugin.is_closed());

    rs.shutdown().await.unwrap();
    ps.shutdown().await.unwrap();
    runtime.close();
    assert!(
        plugin.closed().await.is_none(),
        "plugin side sees a clean EOF"
    );
}

#[tokio::test]
async fn ttrpc_both_directions_current_thread() {
    both_directions_small_and_large().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttrpc_both_directions_multi_thread() {
    both_directions_small_and_large().await;
}

#[tokio::test]
async fn ttrpc_client_fails_when_the_trunk_goes_away() {
    let (runtime, plugin, to_plugin, _to_runtime, _rs, _ps) = nri_like_setup().await;
    assert_eq!(call(&to_plugin, b"x".to_vec()).await, b"plugin:x");
    plugin.close();
    assert!(runtime.closed().await.is_none());
    let mut req = ttrpc::Request::new();
    req.set_service("test.Echo".to_string());
    req.set_method("Echo".to_string());
    req.set_timeout_nano(5_000_000_000);
    assert!(to_plugin.request(req).await.is_err());
}
