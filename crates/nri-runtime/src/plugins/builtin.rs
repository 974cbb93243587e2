//! Builtin plugins: NRI plugins living in the runtime's process (upstream
//! `pkg/adaptation/builtin`). They skip registration, are configured and
//! synchronized like the others, and are never dropped by a transport.

use async_trait::async_trait;

use crate::BoxError;
use nri_api::*;

/// The handlers of a builtin plugin. Every method has a default that
/// answers "nothing to do"; [`implemented_events`](Self::implemented_events)
/// says which events the plugin wants when `configure` leaves the choice to
/// the adaptation (returns 0 events), as upstream derives it from the
/// handlers that are set.
#[async_trait]
pub trait BuiltinHandlers: Send + Sync + 'static {
    /// The events this plugin handles.
    fn implemented_events(&self) -> EventMask;

    async fn configure(&self, _req: ConfigureRequest) -> Result<ConfigureResponse, BoxError> {
        Ok(ConfigureResponse::default())
    }
    async fn synchronize(&self, _req: SynchronizeRequest) -> Result<SynchronizeResponse, BoxError> {
        Ok(SynchronizeResponse::default())
    }
    async fn run_pod_sandbox(&self, _req: RunPodSandboxRequest) -> Result<(), BoxError> {
        Ok(())
    }
    async fn update_pod_sandbox(
        &self,
        _req: UpdatePodSandboxRequest,
    ) -> Result<UpdatePodSandboxResponse, BoxError> {
        Ok(UpdatePodSandboxResponse::default())
    }
    async fn post_update_pod_sandbox(
        &self,
        _req: PostUpdatePodSandboxRequest,
    ) -> Result<(), BoxError> {
        Ok(())
    }
    async fn stop_pod_sandbox(&self, _req: StopPodSandboxRequest) -> Result<(), BoxError> {
        Ok(())
    }
    async fn remove_pod_sandbox(&self, _req: RemovePodSandboxRequest) -> Result<(), BoxError> {
        Ok(())
    }
    async fn create_container(
        &self,
        _req: CreateContainerRequest,
    ) -> Result<CreateContainerResponse, BoxError> {
        Ok(CreateContainerResponse::default())
    }
    async fn post_create_container(
        &self,
        _req: PostCreateContainerRequest,
    ) -> Result<(), BoxError> {
        Ok(())
    }
    async fn start_container(&self, _req: StartContainerRequest) -> Result<(), BoxError> {
        Ok(())
    }
    async fn post_start_container(&self, _req: PostStartContainerRequest) -> Result<(), BoxError> {
        Ok(())
    }
    async fn update_container(
        &self,
        _req: UpdateContainerRequest,
    ) -> Result<UpdateContainerResponse, BoxError> {
        Ok(UpdateContainerResponse::default())
    }
    async fn post_update_container(
        &self,
        _req: PostUpdateContainerRequest,
    ) -> Result<(), BoxError> {
        Ok(())
    }
    async fn stop_container(
        &self,
        _req: StopContainerRequest,
    ) -> Result<StopContainerResponse, BoxError> {
        Ok(StopContainerResponse::default())
    }
    async fn remove_container(&self, _req: RemoveContainerRequest) -> Result<(), BoxError> {
        Ok(())
    }
    /// An error rejects the adjustment, with the error's text as the reason.
    async fn validate_container_adjustment(
        &self,
        _req: ValidateContainerAdjustmentRequest,
    ) -> Result<(), BoxError> {
        Ok(())
    }
    /// Validation of a request the validator only reads, done at once:
    /// `Some(verdict)` is taken in place of
    /// [`validate_container_adjustment`](Self::validate_container_adjustment),
    /// which is then not called, and the request (the pod and the
    /// container, which the runtime would otherwise copy for the call) is
    /// not copied. `None`, the default, means "call the other".
    fn validate_borrowed(
        &self,
        _req: &ValidateContainerAdjustmentRequest,
    ) -> Option<Result<(), BoxError>> {
        None
    }
    /// Whether this validator reads of the request's pod and pristine
    /// container only what [`nri_validator::as_read`] keeps: the pod's
    /// name, namespace and annotations, the container's ID, name and
    /// seccomp profile. Then the runtime may hand it the two as read,
    /// taken from the CreateContainer request as the runtime encoded it,
    /// instead of decoding them whole for it. `false`, the default, means
    /// the validator is given both whole.
    fn reads_as_read(&self) -> bool {
        false
    }
}

/// A builtin plugin: its name, its index and its handlers.
#[derive(Clone)]
pub struct BuiltinPlugin {
    pub base: String,
    pub index: String,
    pub handlers: std::sync::Arc<dyn BuiltinHandlers>,
}

impl BuiltinPlugin {
    pub fn new(
        base: impl Into<String>,
        index: impl Into<String>,
        handlers: impl BuiltinHandlers,
    ) -> BuiltinPlugin {
        BuiltinPlugin {
            base: base.into(),
            index: index.into(),
            handlers: std::sync::Arc::new(handlers),
        }
    }
}

impl std::fmt::Debug for BuiltinPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BuiltinPlugin({}-{})", self.index, self.base)
    }
}

/// The default validator as a builtin plugin (`00-default-validator`).
struct DefaultValidatorPlugin(nri_validator::DefaultValidator);

#[async_trait]
impl BuiltinHandlers for DefaultValidatorPlugin {
    fn implemented_events(&self) -> EventMask {
        EventMask::of(&[Event::VALIDATE_CONTAINER_ADJUSTMENT])
    }

    async fn validate_container_adjustment(
        &self,
        req: ValidateContainerAdjustmentRequest,
    ) -> Result<(), BoxError> {
        Ok(self.0.validate(&req)?)
    }

    fn validate_borrowed(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Option<Result<(), BoxError>> {
        Some(self.0.validate(req).map_err(Into::into))
    }

    // nri-validator's tests hold its verdicts on a whole pod and container
    // to those on the two as read.
    fn reads_as_read(&self) -> bool {
        true
    }
}

/// The builtin default validator for `cfg`, or `None` when it is not
/// enabled (upstream `validator.GetDefaultValidator`).
pub(crate) fn default_validator(
    cfg: nri_validator::DefaultValidatorConfig,
) -> Option<BuiltinPlugin> {
    use nri_validator::{DefaultValidator, DEFAULT_VALIDATOR_INDEX, DEFAULT_VALIDATOR_NAME};
    cfg.enable.then(|| {
        BuiltinPlugin::new(
            DEFAULT_VALIDATOR_NAME,
            DEFAULT_VALIDATOR_INDEX,
            DefaultValidatorPlugin(DefaultValidator::new(cfg)),
        )
    })
}
