//! Raw and half-broken peers, built from the mux and ttrpc directly.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use nri::api;
use nri::mux::{self, Mux};
use protobuf::Message;
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

/// Answers one Plugin method with fixed bytes (possibly not protobuf).
struct Fixed(Vec<u8>);

#[async_trait::async_trait]
impl MethodHandler for Fixed {
    async fn handler(&self, _: TtrpcContext, _: ttrpc::Request) -> ttrpc::Result<ttrpc::Response> {
        let mut r = ttrpc::Response::new();
        r.payload = self.0.clone();
        Ok(r)
    }
}

/// A plugin built by hand: each Plugin method answers fixed bytes.
pub struct RawPlugin {
    pub mux: Mux,
    pub runtime: api::ttrpc::RuntimeClient,
    _server: ttrpc::r#async::Server,
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
        let mux = Mux::new(stream, mux::Options::default());
        let mut handlers: HashMap<String, Box<dyn MethodHandler + Send + Sync>> = HashMap::new();
        for (name, bytes) in methods {
            handlers.insert(name.to_string(), Box::new(Fixed(bytes)));
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
            _server: server,
        }
    }

    pub async fn register(&self, name: &str, idx: &str) -> ttrpc::Result<api::Empty> {
        let req = api::RegisterPluginRequest {
            plugin_name: name.into(),
            plugin_idx: idx.into(),
            ..Default::default()
        };
        self.runtime
            .register_plugin(ttrpc::context::with_timeout(2_000_000_000), &req)
            .await
    }

    pub async fn update(&self) -> ttrpc::Result<api::UpdateContainersResponse> {
        update_via(&self.runtime).await
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
        rsp.adjust.annotations.get("good").map(String::as_str),
        Some("yes"),
        "the good plugin's adjustment is there"
    );
}
