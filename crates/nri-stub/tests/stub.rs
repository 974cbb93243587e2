//! The Rust stub against a minimal runtime side built from the same pieces
//! (mux + ttrpc), for behaviour the Go interop tests cannot provoke:
//! subscription rules, sync chunk reassembly, StateChange dispatch, handler
//! errors, validation rejections and the on-close callback.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use nri_api::mux::{self, Mux};
use nri_api::{self as api, Event, EventMask};
use nri_stub::{ConfigureInfo, HandlerResult, Plugin, Stub, StubError};
use tokio::sync::mpsc;

/// The runtime end of one plugin connection.
struct FakeRuntime {
    _mux: Mux,
    plugin: api::ttrpc::PluginClient,
    registered: mpsc::UnboundedReceiver<api::RegisterPluginRequest>,
    _server: ttrpc::r#async::Server,
}

struct RuntimeService {
    registered: mpsc::UnboundedSender<api::RegisterPluginRequest>,
}

#[async_trait]
impl api::ttrpc::Runtime for RuntimeService {
    async fn register_plugin(
        &self,
        _ctx: &ttrpc::r#async::TtrpcContext,
        req: api::RegisterPluginRequest,
    ) -> ttrpc::Result<api::Empty> {
        let _ = self.registered.send(req);
        Ok(api::Empty::new())
    }
}

async fn fake_runtime(stream: tokio::net::UnixStream) -> FakeRuntime {
    let mux = Mux::new(stream, mux::Options::default());
    let runtime_conn = mux.open(mux::RUNTIME_SERVICE_CONN).unwrap();
    let plugin_conn = mux.open(mux::PLUGIN_SERVICE_CONN).unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let listener = runtime_conn.into_ttrpc_listener();
    let mut server = ttrpc::r#async::Server::new()
        .add_listener(listener)
        .register_service(api::ttrpc::create_runtime(Arc::new(RuntimeService {
            registered: tx,
        })));
    server.start().await.unwrap();
    let client = ttrpc::r#async::Client::new(ttrpc::r#async::transport::Socket::new(plugin_conn));
    FakeRuntime {
        _mux: mux,
        plugin: api::ttrpc::PluginClient::new(client),
        registered: rx,
        _server: server,
    }
}

fn ctx() -> ttrpc::context::Context {
    ttrpc::context::with_timeout(5_000_000_000)
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
    synced: Mutex<Option<(usize, usize)>>,
    configure_mask: Mutex<EventMask>,
}

/// The plugin under test; the test keeps the `Recorder` to inspect it.
struct Rec(Arc<Recorder>);

impl std::ops::Deref for Rec {
    type Target = Recorder;
    fn deref(&self) -> &Recorder {
        &self.0
    }
}

#[nri_stub::plugin]
impl Plugin for Rec {
    async fn configure(&self, _info: &ConfigureInfo) -> HandlerResult<EventMask> {
        Ok(*self.configure_mask.lock().unwrap())
    }

    async fn synchronize(
        &self,
        pods: Vec<api::PodSandbox>,
        containers: Vec<api::Container>,
    ) -> HandlerResult<Vec<api::ContainerUpdate>> {
        *self.synced.lock().unwrap() = Some((pods.len(), containers.len()));
        Ok(vec![])
    }

    async fn run_pod_sandbox(&self, pod: &api::PodSandbox) -> HandlerResult<()> {
        self.events
            .lock()
            .unwrap()
            .push(format!("RunPodSandbox {}", pod.id));
        Ok(())
    }

    async fn create_container(
        &self,
        _pod: &api::PodSandbox,
        ctr: &api::Container,
    ) -> HandlerResult<(api::ContainerAdjustment, Vec<api::ContainerUpdate>)> {
        if ctr.id == "bad" {
            return Err("refusing container bad".into());
        }
        let mut adjust = api::ContainerAdjustment::new();
        adjust.add_annotation("seen", ctr.id.clone());
        Ok((adjust, vec![]))
    }

    async fn remove_container(
        &self,
        _pod: &api::PodSandbox,
        ctr: &api::Container,
    ) -> HandlerResult<()> {
        self.events
            .lock()
            .unwrap()
            .push(format!("RemoveContainer {}", ctr.id));
        Ok(())
    }

    async fn validate_container_adjustment(
        &self,
        req: &api::ValidateContainerAdjustmentRequest,
    ) -> HandlerResult<()> {
        if req.adjust.annotations.contains_key("forbidden") {
            return Err("annotation forbidden is not allowed".into());
        }
        Ok(())
    }
}

/// Starts the stub on one end of a socketpair and the fake runtime on the
/// other; returns once the stub registered.
async fn connect(
    plugin: Arc<Recorder>,
) -> (
    Arc<Stub<Rec>>,
    FakeRuntime,
    tokio::task::JoinHandle<Result<(), StubError>>,
) {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    theirs.set_nonblocking(true).unwrap();
    let mut runtime = fake_runtime(tokio::net::UnixStream::from_std(theirs).unwrap()).await;
    let stub = Arc::new(
        Stub::builder()
            .name("rec")
            .idx("42")
            .connection(ours)
            .build(Rec(plugin))
            .unwrap(),
    );
    let runner = {
        let stub = stub.clone();
        tokio::spawn(async move { stub.run().await })
    };
    let reg = runtime.registered.recv().await.expect("stub registers");
    assert_eq!(
        (reg.plugin_name.as_str(), reg.plugin_idx.as_str()),
        ("rec", "42")
    );
    assert_eq!(reg.NRI_version, nri_stub::NRI_VERSION);
    (stub, runtime, runner)
}

async fn configure(rt: &FakeRuntime) -> ttrpc::Result<api::ConfigureResponse> {
    let req = api::ConfigureRequest {
        runtime_name: "fake".into(),
        runtime_version: "1".into(),
        registration_timeout: 1234,
        request_timeout: 567,
        ..Default::default()
    };
    rt.plugin.configure(ctx(), &req).await
}

#[tokio::test]
async fn subscription_defaults_to_implemented_handlers_and_timeouts_are_adopted() {
    let rec = Arc::new(Recorder::default());
    let (stub, rt, _runner) = connect(rec.clone()).await;
    let rsp = configure(&rt).await.unwrap();
    let want = EventMask::of(&[
        Event::RUN_POD_SANDBOX,
        Event::CREATE_CONTAINER,
        Event::REMOVE_CONTAINER,
        Event::VALIDATE_CONTAINER_ADJUSTMENT,
    ]);
    assert_eq!(EventMask::from_raw(rsp.events), want);
    assert_eq!(
        stub.handle().registration_timeout(),
        Duration::from_millis(1234)
    );
    assert_eq!(stub.handle().request_timeout(), Duration::from_millis(567));
}

#[tokio::test]
async fn configure_may_narrow_but_not_widen_the_subscription() {
    let rec = Arc::new(Recorder::default());
    *rec.configure_mask.lock().unwrap() = EventMask::of(&[Event::CREATE_CONTAINER]);
    let (_stub, rt, _runner) = connect(rec.clone()).await;
    assert_eq!(
        configure(&rt).await.unwrap().events,
        Event::CREATE_CONTAINER.mask_bit()
    );

    let rec = Arc::new(Recorder::default());
    *rec.configure_mask.lock().unwrap() = EventMask::of(&[Event::STOP_CONTAINER]);
    let (_stub, rt, runner) = connect(rec).await;
    let err = configure(&rt).await.unwrap_err().to_string();
    assert!(err.contains("unhandled events StopContainer"), "{err}");
    // A failed configuration ends the run with that error.
    let result = runner.await.unwrap();
    assert!(matches!(result, Err(StubError::Configure(_))), "{result:?}");
}

#[test]
fn builder_rejects_events_without_handlers() {
    let err = Stub::builder()
        .name("x")
        .idx("01")
        .events(EventMask::of(&[Event::START_CONTAINER]))
        .build(Rec(Arc::new(Recorder::default())))
        .err()
        .expect("StartContainer has no handler");
    assert!(
        err.to_string().contains("unhandled events StartContainer"),
        "{err}"
    );
}

#[tokio::test]
async fn chunked_sync_is_reassembled() {
    let rec = Arc::new(Recorder::default());
    let (_stub, rt, _runner) = connect(rec.clone()).await;
    configure(&rt).await.unwrap();
    for (chunk, more) in [(0, true), (1, true), (2, false)] {
        let req = api::SynchronizeRequest {
            pods: (0..3)
                .map(|i| api::PodSandbox {
                    id: format!("p{chunk}{i}"),
                    ..Default::default()
                })
                .collect(),
            containers: (0..5)
                .map(|i| api::Container {
                    id: format!("c{chunk}{i}"),
                    ..Default::default()
                })
                .collect(),
            more,
            ..Default::default()
        };
        let rsp = rt.plugin.synchronize(ctx(), &req).await.unwrap();
        assert_eq!(rsp.more, more, "intermediate replies echo more");
        assert!(rsp.update.is_empty());
        if more {
            assert!(
                rec.synced.lock().unwrap().is_none(),
                "plugin called before the last chunk"
            );
        }
    }
    assert_eq!(*rec.synced.lock().unwrap(), Some((9, 15)));
}

#[tokio::test]
async fn handler_errors_validation_and_state_change() {
    let rec = Arc::new(Recorder::default());
    let (_stub, rt, _runner) = connect(rec.clone()).await;
    configure(&rt).await.unwrap();

    let ok = rt
        .plugin
        .create_container(
            ctx(),
            &api::CreateContainerRequest {
                container: protobuf::MessageField::some(api::Container {
                    id: "c1".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        ok.adjust.annotations.get("seen").map(String::as_str),
        Some("c1")
    );

    let err = rt
        .plugin
        .create_container(
            ctx(),
            &api::CreateContainerRequest {
                container: protobuf::MessageField::some(api::Container {
                    id: "bad".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("refusing container bad"), "{err}");

    let mut adjust = api::ContainerAdjustment::new();
    adjust.add_annotation("forbidden", "1");
    let rsp = rt
        .plugin
        .validate_container_adjustment(
            ctx(),
            &api::ValidateContainerAdjustmentRequest {
                adjust: protobuf::MessageField::some(adjust),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(rsp.reject);
    assert_eq!(rsp.reason, "annotation forbidden is not allowed");

    // The deprecated StateChange path reaches the same handlers.
    rt.plugin
        .state_change(
            ctx(),
            &api::StateChangeEvent {
                event: Event::REMOVE_CONTAINER.into(),
                container: protobuf::MessageField::some(api::Container {
                    id: "c9".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(*rec.events.lock().unwrap(), ["RemoveContainer c9"]);
}

#[tokio::test]
async fn runtime_going_away_calls_on_close_and_ends_run() {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    theirs.set_nonblocking(true).unwrap();
    let mut rt = fake_runtime(tokio::net::UnixStream::from_std(theirs).unwrap()).await;
    let closed = Arc::new(AtomicUsize::new(0));
    let stub = {
        let closed = closed.clone();
        Arc::new(
            Stub::builder()
                .name("rec")
                .idx("42")
                .connection(ours)
                .on_close(move || {
                    closed.fetch_add(1, Ordering::SeqCst);
                })
                .build(Rec(Arc::new(Recorder::default())))
                .unwrap(),
        )
    };
    let runner = {
        let stub = stub.clone();
        tokio::spawn(async move { stub.run().await })
    };
    rt.registered.recv().await.unwrap();
    configure(&rt).await.unwrap();
    drop(rt);
    let result = tokio::time::timeout(Duration::from_secs(10), runner)
        .await
        .expect("run returns")
        .unwrap();
    assert!(matches!(result, Err(StubError::Closed(_))), "{result:?}");
    assert_eq!(closed.load(Ordering::SeqCst), 1);
    assert!(matches!(
        stub.handle().update_containers(vec![], vec![]).await,
        Err(StubError::NoService)
    ));
}

#[tokio::test]
async fn unreachable_socket_is_a_clear_error() {
    let stub = Stub::builder()
        .name("x")
        .idx("01")
        .socket_path("/nonexistent/nri.sock")
        .build(Rec(Arc::new(Recorder::default())))
        .unwrap();
    let err = stub.start().await.unwrap_err().to_string();
    assert!(
        err.starts_with("failed to connect to NRI service at /nonexistent/nri.sock"),
        "{err}"
    );
}

#[tokio::test]
async fn reconnects_after_the_runtime_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nri.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let closed = Arc::new(AtomicUsize::new(0));
    let stub = {
        let closed = closed.clone();
        Arc::new(
            Stub::builder()
                .name("rec")
                .idx("42")
                .socket_path(&path)
                .reconnect(Duration::from_millis(10))
                .on_close(move || {
                    closed.fetch_add(1, Ordering::SeqCst);
                })
                .build(Rec(Arc::new(Recorder::default())))
                .unwrap(),
        )
    };
    let runner = {
        let stub = stub.clone();
        tokio::spawn(async move { stub.run().await })
    };

    let (first, _) = listener.accept().await.unwrap();
    let mut rt = fake_runtime(first).await;
    rt.registered.recv().await.expect("first registration");
    configure(&rt).await.unwrap();
    drop(rt);

    let (second, _) = listener.accept().await.unwrap();
    let mut rt = fake_runtime(second).await;
    let reg = rt
        .registered
        .recv()
        .await
        .expect("registers again after reconnecting");
    assert_eq!(reg.plugin_name, "rec");
    configure(&rt).await.unwrap();
    assert_eq!(closed.load(Ordering::SeqCst), 1);

    stub.handle().stop();
    assert!(runner.await.unwrap().is_ok(), "a stopped stub returns Ok");
}

#[tokio::test]
async fn stop_interrupts_a_runtime_that_never_configures() {
    let rec = Arc::new(Recorder::default());
    let (stub, _rt, runner) = connect(rec).await;
    // Registered, but the runtime never sends Configure.
    stub.handle().stop();
    let result = runner.await.unwrap();
    assert!(
        result.is_ok(),
        "stop during the handshake must end run cleanly: {result:?}"
    );
}
