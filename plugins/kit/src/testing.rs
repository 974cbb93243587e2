//! A runtime inside a plugin's own tests (cargo feature `testing`).
//!
//! [`TestRuntime`] starts nri-rs's runtime core (`nri-runtime`, the code
//! containerd and CRI-O host when they run nri-rs) on a socket in a
//! temporary directory, and connects the plugin to it through
//! [`nri_stub::Stub`], over a real ttrpc connection, as a plugin started by
//! an operator connects. The test then sends pod and container events and
//! reads what came back: the CreateContainer adjustment, the updates and
//! evictions, after the runtime's own merging (and, if configured, the
//! default validator's checks). Nothing of the plugin is mocked: the
//! registration, the subscription its handlers imply, the encoding of each
//! request and reply are those of a real run.
//!
//! In the plugin's `Cargo.toml`:
//!
//! ```toml
//! [dev-dependencies]
//! nri-plugin-kit = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["rt", "macros"] }
//! ```
//!
//! and a test:
//!
//! ```
//! use nri_stub::api::{Container, ContainerAdjustment, ContainerUpdate, PodSandbox};
//! use nri_stub::{HandlerResult, Plugin};
//! use plugin_kit::testing::{container, pod, TestRuntime};
//!
//! struct AddEnv;
//!
//! #[nri_stub::plugin]
//! impl Plugin for AddEnv {
//!     async fn create_container(
//!         &self,
//!         _pod: &PodSandbox,
//!         _ctr: &Container,
//!     ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
//!         let mut adjustment = ContainerAdjustment::new();
//!         adjustment.add_env("HELLO", "world");
//!         Ok((adjustment, Vec::new()))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let runtime = TestRuntime::start(AddEnv).await.unwrap();
//! let pod = pod("default", "web");
//! let ctr = container(&pod, "app");
//! runtime.run_pod_sandbox(&pod).await.unwrap();
//! let created = runtime.create_container(&pod, &ctr).await.unwrap();
//! let env = &created.adjust.env;
//! assert!(env.iter().any(|kv| kv.key == "HELLO" && kv.value == "world"));
//! runtime.stop().await;
//! # }
//! ```
//!
//! The plugin runs on a thread of its own, so a test may use any tokio
//! runtime flavor (or none: see [`TestRuntime::start_blocking`]). The
//! runtime connects the plugin as an external plugin: Configure carries no
//! configuration text (call the plugin's `configure` directly to test
//! that), and `NRI_PLUGIN_NAME`/`NRI_PLUGIN_IDX` are not read (the builder
//! names the plugin, `test` at index `50` unless told otherwise).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nri_runtime::{Adaptation, BoxError, Error, Options, SyncCb};
use nri_stub::api::{
    Container, ContainerState, ContainerUpdate, CreateContainerRequest, CreateContainerResponse,
    LinuxResources, PodSandbox, PostCreateContainerRequest, PostStartContainerRequest,
    PostUpdateContainerRequest, RemoveContainerRequest, RemovePodSandboxRequest,
    RunPodSandboxRequest, StartContainerRequest, StopContainerRequest, StopContainerResponse,
    StopPodSandboxRequest, UpdateContainerRequest, UpdateContainerResponse,
};
use nri_stub::{Plugin, Stub, StubError, StubHandle};

/// How long [`TestRuntimeBuilder::start`] waits for the plugin to be
/// registered and synchronized.
const REGISTRATION_PATIENCE: Duration = Duration::from_secs(20);

/// A pod for a test: `namespace/name`, with an id and uid derived from the
/// name. Other fields are set as on any protobuf message.
pub fn pod(namespace: &str, name: &str) -> PodSandbox {
    PodSandbox {
        id: format!("{name}-id"),
        name: name.to_string(),
        uid: format!("{name}-uid"),
        namespace: namespace.to_string(),
        ..Default::default()
    }
}

/// A container named `name` in `pod`, in state CREATED (as the runtime has
/// it while creating it), with an id derived from the pod's and its name.
pub fn container(pod: &PodSandbox, name: &str) -> Container {
    Container {
        id: format!("{}-{name}-id", pod.name),
        pod_sandbox_id: pod.id.clone(),
        name: name.to_string(),
        state: ContainerState::CONTAINER_CREATED.into(),
        ..Default::default()
    }
}

/// Whether `msg` holds nothing but empty messages (and lists of them):
/// how a reply that changes nothing looks after the runtime's merge,
/// which leaves empty sub-messages (`hooks`, `linux.resources.cpu`, ...)
/// and, for UpdateContainer, an empty update in place.
///
/// ```
/// use nri_stub::api::ContainerAdjustment;
///
/// let mut adjust = ContainerAdjustment::new();
/// adjust.hooks.mut_or_insert_default();
/// assert!(plugin_kit::testing::is_empty(&adjust));
/// adjust.add_env("A", "1");
/// assert!(!plugin_kit::testing::is_empty(&adjust));
/// ```
pub fn is_empty<M: protobuf::MessageFull>(msg: &M) -> bool {
    fn empty(value: &serde_json::Value) -> bool {
        match value {
            serde_json::Value::Object(fields) => fields.values().all(empty),
            serde_json::Value::Array(items) => items.iter().all(empty),
            _ => false,
        }
    }
    // Scalars at their defaults and empty lists and maps are left out of
    // the JSON form; what remains must be objects all the way down.
    match protobuf_json_mapping::print_to_string(msg) {
        Ok(text) => serde_json::from_str(&text).is_ok_and(|v| empty(&v)),
        Err(_) => false,
    }
}

/// Options of a [`TestRuntime`].
pub struct TestRuntimeBuilder {
    name: String,
    idx: String,
    pods: Vec<PodSandbox>,
    containers: Vec<Container>,
    validator: Option<String>,
    request_timeout: Duration,
}

impl Default for TestRuntimeBuilder {
    fn default() -> Self {
        TestRuntimeBuilder {
            name: "test".to_string(),
            idx: "50".to_string(),
            pods: Vec::new(),
            containers: Vec::new(),
            validator: None,
            request_timeout: Duration::from_secs(10),
        }
    }
}

impl TestRuntimeBuilder {
    /// The name the plugin registers with (default `test`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The index the plugin registers with (default `50`).
    pub fn idx(mut self, idx: impl Into<String>) -> Self {
        self.idx = idx.into();
        self
    }

    /// The pods and containers the runtime has when the plugin connects:
    /// the plugin's `synchronize` gets them, and what it returns is in
    /// [`TestRuntime::sync_updates`].
    pub fn existing(mut self, pods: Vec<PodSandbox>, containers: Vec<Container>) -> Self {
        self.pods = pods;
        self.containers = containers;
        self
    }

    /// Turns on the runtime's default validator with this configuration
    /// (YAML, upstream's keys, e.g. `enable: true\nrejectOCIHookAdjustment: true`):
    /// CreateContainer then fails as it would on a node that validates.
    pub fn default_validator(mut self, yaml: impl Into<String>) -> Self {
        self.validator = Some(yaml.into());
        self
    }

    /// How long the runtime waits for each of the plugin's replies
    /// (default 10 s, generous for loaded test machines).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Starts the runtime, connects `plugin` to it and waits until the
    /// runtime has registered and synchronized it.
    pub async fn start<P: Plugin>(self, plugin: P) -> Result<TestRuntime, BoxError> {
        let dir = TempDir::new()?;
        let state = Arc::new(Mutex::new(RuntimeState {
            pods: self.pods,
            containers: self.containers,
            ..Default::default()
        }));
        let mut options = Options::default()
            .socket_path(dir.0.join("nri.sock"))?
            .plugin_path(dir.0.join("plugins"))?
            .plugin_config_path(dir.0.join("conf.d"))?
            .disable_wasm()
            .request_timeout(self.request_timeout);
        if let Some(yaml) = &self.validator {
            options = options.default_validator_yaml(yaml)?;
        }
        let (sync_state, update_state) = (state.clone(), state.clone());
        let nri = Adaptation::new(
            "nri-rs-test-runtime",
            env!("CARGO_PKG_VERSION"),
            move |cb: SyncCb| {
                let state = sync_state.clone();
                async move {
                    let (pods, containers) = {
                        let s = lock(&state);
                        (s.pods.clone(), s.containers.clone())
                    };
                    let updates = cb.call(pods, containers).await?;
                    lock(&state).sync_updates.extend(updates);
                    Ok::<_, BoxError>(())
                }
            },
            move |updates: Vec<ContainerUpdate>| {
                let state = update_state.clone();
                async move {
                    lock(&state).unsolicited.extend(updates);
                    Ok::<_, BoxError>(Vec::new())
                }
            },
            options,
        )?;
        nri.start().await?;

        // Connected here rather than dialed by the stub, which would take
        // a socket from NRI_PLUGIN_SOCKET first if the test inherited one.
        let connection = std::os::unix::net::UnixStream::connect(dir.0.join("nri.sock"))?;
        let stub = Stub::builder()
            .name(self.name)
            .idx(self.idx)
            .connection(connection)
            .build(plugin)?;
        let handle = stub.handle();
        let full_name = handle.full_name();
        let (done_tx, done_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("nri-test-plugin".to_string())
            .spawn(move || {
                let result = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt.block_on(stub.run()),
                    Err(e) => Err(StubError::Setup(e.to_string())),
                };
                let _ = done_tx.send(result);
            })?;
        let mut runtime = TestRuntime {
            nri,
            handle,
            state,
            thread: Some(thread),
            _dir: dir,
        };

        let deadline = Instant::now() + REGISTRATION_PATIENCE;
        while !runtime.nri.has_plugin(&full_name) {
            if let Ok(result) = done_rx.try_recv() {
                runtime.join();
                let why = match result {
                    Err(e) => e.to_string(),
                    Ok(()) => "it stopped".to_string(),
                };
                return Err(format!("plugin {full_name} did not connect: {why}").into());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "plugin {full_name} was not registered within {REGISTRATION_PATIENCE:?}"
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(runtime)
    }

    /// [`start`](Self::start) for a test that has no async runtime.
    pub fn start_blocking<P: Plugin>(self, plugin: P) -> Result<TestRuntime, BoxError> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(self.start(plugin))
    }
}

/// What the runtime was told by the plugin outside events.
#[derive(Default)]
struct RuntimeState {
    pods: Vec<PodSandbox>,
    containers: Vec<Container>,
    sync_updates: Vec<ContainerUpdate>,
    unsolicited: Vec<ContainerUpdate>,
}

fn lock(state: &Mutex<RuntimeState>) -> std::sync::MutexGuard<'_, RuntimeState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// nri-rs's runtime core with one plugin connected: see the
/// [module documentation](self).
///
/// Each event method sends what the runtime would send for that event
/// and returns what the runtime makes of the plugin's reply: the merged
/// response, or the error the runtime would report (a plugin's handler
/// error fails CreateContainer, UpdateContainer and StopContainer as it
/// would fail them on a node).
pub struct TestRuntime {
    nri: Adaptation,
    handle: StubHandle,
    state: Arc<Mutex<RuntimeState>>,
    thread: Option<JoinHandle<()>>,
    _dir: TempDir,
}

impl TestRuntime {
    /// Starts building a test runtime with other options.
    pub fn builder() -> TestRuntimeBuilder {
        TestRuntimeBuilder::default()
    }

    /// Starts a runtime with `plugin` connected as `50-test`.
    pub async fn start<P: Plugin>(plugin: P) -> Result<TestRuntime, BoxError> {
        TestRuntimeBuilder::default().start(plugin).await
    }

    /// [`start`](Self::start) for a test that has no async runtime.
    pub fn start_blocking<P: Plugin>(plugin: P) -> Result<TestRuntime, BoxError> {
        TestRuntimeBuilder::default().start_blocking(plugin)
    }

    /// The runtime core, for anything the methods here do not cover.
    pub fn adaptation(&self) -> &Adaptation {
        &self.nri
    }

    /// The plugin's stub: its name as the runtime knows it, and
    /// [`StubHandle::update_containers`] to send unsolicited updates.
    pub fn stub(&self) -> &StubHandle {
        &self.handle
    }

    /// The updates the plugin's `synchronize` returned.
    pub fn sync_updates(&self) -> Vec<ContainerUpdate> {
        lock(&self.state).sync_updates.clone()
    }

    /// The unsolicited updates the plugin asked for
    /// (`StubHandle::update_containers`), as the runtime's update
    /// callback received them.
    pub fn unsolicited_updates(&self) -> Vec<ContainerUpdate> {
        lock(&self.state).unsolicited.clone()
    }

    pub async fn run_pod_sandbox(&self, pod: &PodSandbox) -> Result<(), Error> {
        let req = RunPodSandboxRequest {
            pod: Some(pod.clone()).into(),
            ..Default::default()
        };
        self.nri.run_pod_sandbox(req).await
    }

    pub async fn stop_pod_sandbox(&self, pod: &PodSandbox) -> Result<(), Error> {
        let req = StopPodSandboxRequest {
            pod: Some(pod.clone()).into(),
            ..Default::default()
        };
        self.nri.stop_pod_sandbox(req).await
    }

    pub async fn remove_pod_sandbox(&self, pod: &PodSandbox) -> Result<(), Error> {
        let req = RemovePodSandboxRequest {
            pod: Some(pod.clone()).into(),
            ..Default::default()
        };
        self.nri.remove_pod_sandbox(req).await
    }

    /// The merged adjustment is in the response's `adjust`, updates of
    /// other containers in `update`, evictions in `evict`.
    pub async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<CreateContainerResponse, Error> {
        let req = CreateContainerRequest {
            pod: Some(pod.clone()).into(),
            container: Some(ctr.clone()).into(),
            ..Default::default()
        };
        self.nri.create_container(req).await
    }

    pub async fn post_create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<(), Error> {
        let req = PostCreateContainerRequest {
            pod: Some(pod.clone()).into(),
            container: Some(ctr.clone()).into(),
            ..Default::default()
        };
        self.nri.post_create_container(req).await
    }

    pub async fn start_container(&self, pod: &PodSandbox, ctr: &Container) -> Result<(), Error> {
        let req = StartContainerRequest {
            pod: Some(pod.clone()).into(),
            container: Some(ctr.clone()).into(),
            ..Default::default()
        };
        self.nri.start_container(req).await
    }

    pub async fn post_start_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<(), Error> {
        let req = PostStartContainerRequest {
            pod: Some(pod.clone()).into(),
            container: Some(ctr.clone()).into(),
            ..Default::default()
        };
        self.nri.post_start_container(req).await
    }

    /// `resources` are the new resources the runtime is about to set.
    pub async fn update_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
        resources: Option<&LinuxResources>,
    ) -> Result<UpdateContainerResponse, Error> {
        let req = UpdateContainerRequest {
            pod: Some(pod.clone()).into(),
            container: Some(ctr.clone()).into(),
            linux_resources: resources.cloned().into(),
            ..Default::default()
        };
        self.nri.update_container(req).await
    }

    pub async fn post_update_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<(), Error> {
        let req = PostUpdateContainerRequest {
            pod: Some(pod.clone()).into(),
            container: Some(ctr.clone()).into(),
            ..Default::default()
        };
        self.nri.post_update_container(req).await
    }

    pub async fn stop_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<StopContainerResponse, Error> {
        let req = StopContainerRequest {
            pod: Some(pod.clone()).into(),
            container: Some(ctr.clone()).into(),
            ..Default::default()
        };
        self.nri.stop_container(req).await
    }

    pub async fn remove_container(&self, pod: &PodSandbox, ctr: &Container) -> Result<(), Error> {
        let req = RemoveContainerRequest {
            pod: Some(pod.clone()).into(),
            container: Some(ctr.clone()).into(),
            ..Default::default()
        };
        self.nri.remove_container(req).await
    }

    /// Disconnects the plugin and stops the runtime. Dropping the test
    /// runtime does the same, without waiting for the runtime's tasks.
    pub async fn stop(mut self) {
        self.join();
        self.nri.stop().await;
    }

    /// Stops the plugin's stub and waits for its thread.
    fn join(&mut self) {
        self.handle.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for TestRuntime {
    fn drop(&mut self) {
        self.join();
    }
}

/// A directory of its own under the system's temporary directory, removed
/// when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("nri-test-runtime-{}-{n}", std::process::id()));
        std::fs::create_dir_all(path.join("plugins"))?;
        std::fs::create_dir_all(path.join("conf.d"))?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use nri_stub::api::{ContainerAdjustment, Hook, Hooks};
    use nri_stub::HandlerResult;

    use super::*;

    /// Adjusts by container name: `bad` fails, `hooked` gets an OCI hook,
    /// anything else an annotation. Stopping a container hands its CPU to
    /// `other`; synchronizing updates every existing container.
    struct Picky;

    #[nri_stub::plugin]
    impl Plugin for Picky {
        async fn synchronize(
            &self,
            _pods: Vec<PodSandbox>,
            containers: Vec<Container>,
        ) -> HandlerResult<Vec<ContainerUpdate>> {
            Ok(containers
                .iter()
                .map(|c| {
                    let mut u = ContainerUpdate::for_container(c.id.clone());
                    u.set_linux_cpu_shares(256);
                    u
                })
                .collect())
        }

        async fn create_container(
            &self,
            _pod: &PodSandbox,
            ctr: &Container,
        ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
            let mut adjust = ContainerAdjustment::new();
            match ctr.name.as_str() {
                "bad" => return Err("no bad containers".into()),
                "hooked" => adjust.add_hooks(Hooks {
                    prestart: vec![Hook {
                        path: "/bin/true".to_string(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                _ => adjust.add_annotation("picky", "yes"),
            }
            Ok((adjust, Vec::new()))
        }

        async fn stop_container(
            &self,
            pod: &PodSandbox,
            _ctr: &Container,
        ) -> HandlerResult<Vec<ContainerUpdate>> {
            let mut update = ContainerUpdate::for_container(container(pod, "other").id);
            update.set_linux_cpu_shares(2048);
            Ok(vec![update])
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn replies_come_back_merged_and_errors_fail_the_request() {
        let web = pod("default", "web");
        let other = container(&web, "other");
        let runtime = TestRuntime::builder()
            .name("picky")
            .idx("10")
            .existing(vec![web.clone()], vec![other.clone()])
            .start(Picky)
            .await
            .unwrap();
        assert!(runtime.adaptation().has_plugin("10-picky"));
        assert_eq!(runtime.stub().full_name(), "10-picky");
        let synced = runtime.sync_updates();
        assert_eq!(synced.len(), 1);
        assert_eq!(synced[0].container_id, other.id);

        let app = container(&web, "app");
        let created = runtime.create_container(&web, &app).await.unwrap();
        assert_eq!(created.adjust.annotations.get("picky").unwrap(), "yes");
        let err = runtime
            .create_container(&web, &container(&web, "bad"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no bad containers"), "{err}");

        let stopped = runtime.stop_container(&web, &app).await.unwrap();
        assert_eq!(stopped.update.len(), 1);
        assert_eq!(stopped.update[0].container_id, other.id);

        let mut update = ContainerUpdate::for_container(other.id.clone());
        update.set_linux_cpu_shares(1024);
        let failed = runtime
            .stub()
            .update_containers(vec![update], Vec::new())
            .await
            .unwrap();
        assert!(failed.is_empty());
        assert_eq!(runtime.unsolicited_updates().len(), 1);
        runtime.stop().await;
    }

    #[test]
    fn the_default_validator_rejects_as_on_a_node() {
        let runtime = TestRuntime::builder()
            .default_validator("enable: true\nrejectOCIHookAdjustment: true\n")
            .start_blocking(Picky)
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let web = pod("default", "web");
        let hooked = container(&web, "hooked");
        let err = rt
            .block_on(runtime.create_container(&web, &hooked))
            .unwrap_err();
        assert!(err.to_string().contains("OCI hook"), "{err}");
        let plain = rt
            .block_on(runtime.create_container(&web, &container(&web, "app")))
            .unwrap();
        assert_eq!(plain.adjust.annotations.get("picky").unwrap(), "yes");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_plugin_that_cannot_start_is_reported() {
        struct Nothing;
        #[nri_stub::plugin]
        impl Plugin for Nothing {}
        let err = TestRuntime::start(Nothing).await.err().unwrap();
        assert!(err.to_string().contains("does not implement any"), "{err}");
    }

    #[test]
    fn empty_replies_are_told_apart() {
        let mut adjust = ContainerAdjustment::new();
        adjust
            .linux
            .mut_or_insert_default()
            .resources
            .mut_or_insert_default();
        assert!(is_empty(&adjust));
        adjust.add_annotation("a", "b");
        assert!(!is_empty(&adjust));
        let mut update = ContainerUpdate::for_container("c");
        assert!(!is_empty(&update));
        update.container_id.clear();
        assert!(is_empty(&update));
    }
}
