//! The Plugin ttrpc service of one connection: turns runtime requests into
//! calls of the [`Plugin`] handlers.

use std::sync::{Arc, Mutex};

use log::{debug, error, info};
use tokio::sync::oneshot;

use super::plugin::{ConfigureInfo, HandlerError, Plugin};
use super::Shared;
use crate::api::{self, Event, EventMask};

/// Outcome of the runtime's Configure request, awaited by `Stub::start`.
pub(crate) type Configured = Result<EventMask, String>;

pub(crate) struct Service<P: Plugin> {
    plugin: Arc<P>,
    shared: Arc<Shared>,
    /// Subscription asked for with `StubBuilder::events`, if any.
    requested: Option<EventMask>,
    configured: Mutex<Option<oneshot::Sender<Configured>>>,
    /// Chunks of a split Synchronize, collected until the last one.
    sync: Mutex<Option<(Vec<api::PodSandbox>, Vec<api::Container>)>>,
}

impl<P: Plugin> Service<P> {
    pub(crate) fn new(
        plugin: Arc<P>,
        shared: Arc<Shared>,
        requested: Option<EventMask>,
        configured: oneshot::Sender<Configured>,
    ) -> Self {
        Service {
            plugin,
            shared,
            requested,
            configured: Mutex::new(Some(configured)),
            sync: Mutex::new(None),
        }
    }

    async fn do_configure(&self, req: &api::ConfigureRequest) -> Result<EventMask, String> {
        let info = ConfigureInfo {
            config: req.config.clone(),
            runtime_name: req.runtime_name.clone(),
            runtime_version: req.runtime_version.clone(),
            nri_version: req.NRI_version.clone(),
        };
        let implemented = self.plugin.implemented_events();
        let mut events = self
            .plugin
            .configure(&info)
            .await
            .map_err(|e| format!("plugin configuration failed: {e}"))?;
        if events.is_empty() {
            events = self.requested.unwrap_or(implemented);
        }
        let extra = EventMask::from_raw(events.raw() & !implemented.raw());
        if !extra.is_empty() {
            return Err(format!(
                "internal error: unhandled events {extra} (0x{:x})",
                extra.raw()
            ));
        }
        Ok(events)
    }
}

/// A handler failure as the runtime sees it: a plain error (code Unknown),
/// as a Go plugin returning an error produces.
fn handler_failure(err: HandlerError) -> ttrpc::Error {
    ttrpc::Error::RpcStatus(ttrpc::get_status(ttrpc::Code::UNKNOWN, err.to_string()))
}

/// The Plugin service's methods, called by the server (`server.rs`) with
/// the decoded request.
impl<P: Plugin> Service<P> {
    pub(crate) async fn configure(
        &self,
        req: api::ConfigureRequest,
    ) -> ttrpc::Result<api::ConfigureResponse> {
        info!(
            "configuring plugin {} for runtime {}/{} (NRI version {})",
            self.shared.full_name(),
            req.runtime_name,
            req.runtime_version,
            req.NRI_version
        );
        // Timeouts are adopted even when zero, as upstream's stub does.
        self.shared.adopt_configuration(&req);
        let result = self.do_configure(&req).await;
        if let Some(tx) = self
            .configured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = tx.send(result.clone());
        }
        match result {
            Ok(events) => {
                info!(
                    "subscribing plugin {} to events {events}",
                    self.shared.full_name()
                );
                Ok(api::ConfigureResponse {
                    events: events.raw(),
                    failure_policy: self.shared.failure_policy.clone().into(),
                    ..Default::default()
                })
            }
            Err(msg) => {
                error!("{msg}");
                Err(ttrpc::Error::RpcStatus(ttrpc::get_status(
                    ttrpc::Code::UNKNOWN,
                    msg,
                )))
            }
        }
    }

    pub(crate) async fn synchronize(
        &self,
        req: api::SynchronizeRequest,
    ) -> ttrpc::Result<api::SynchronizeResponse> {
        let api::SynchronizeRequest {
            pods,
            containers,
            more,
            ..
        } = req;
        let (pods, containers) = {
            let mut parts = self.sync.lock().unwrap_or_else(|p| p.into_inner());
            let (all_pods, all_containers) = parts.get_or_insert_with(Default::default);
            all_pods.extend(pods);
            all_containers.extend(containers);
            if more {
                debug!(
                    "collected sync chunk, {} pods and {} containers so far",
                    all_pods.len(),
                    all_containers.len()
                );
                // Intermediate chunks are acknowledged by echoing `more`.
                return Ok(api::SynchronizeResponse {
                    more: true,
                    ..Default::default()
                });
            }
            parts.take().unwrap_or_default()
        };
        let update = self
            .plugin
            .synchronize(pods, containers)
            .await
            .map_err(handler_failure)?;
        Ok(api::SynchronizeResponse {
            update,
            more: false,
            ..Default::default()
        })
    }

    pub(crate) async fn shutdown(&self, _req: api::Empty) -> ttrpc::Result<api::Empty> {
        self.plugin.shutdown().await;
        Ok(api::Empty::new())
    }

    pub(crate) async fn run_pod_sandbox(
        &self,
        req: api::RunPodSandboxRequest,
    ) -> ttrpc::Result<api::RunPodSandboxResponse> {
        self.plugin
            .run_pod_sandbox(&req.pod)
            .await
            .map_err(handler_failure)?;
        Ok(Default::default())
    }

    pub(crate) async fn update_pod_sandbox(
        &self,
        req: api::UpdatePodSandboxRequest,
    ) -> ttrpc::Result<api::UpdatePodSandboxResponse> {
        self.plugin
            .update_pod_sandbox(
                &req.pod,
                req.overhead_linux_resources.as_ref(),
                req.linux_resources.as_ref(),
            )
            .await
            .map_err(handler_failure)?;
        Ok(Default::default())
    }

    pub(crate) async fn post_update_pod_sandbox(
        &self,
        req: api::PostUpdatePodSandboxRequest,
    ) -> ttrpc::Result<api::PostUpdatePodSandboxResponse> {
        self.plugin
            .post_update_pod_sandbox(&req.pod)
            .await
            .map_err(handler_failure)?;
        Ok(Default::default())
    }

    pub(crate) async fn stop_pod_sandbox(
        &self,
        req: api::StopPodSandboxRequest,
    ) -> ttrpc::Result<api::StopPodSandboxResponse> {
        self.plugin
            .stop_pod_sandbox(&req.pod)
            .await
            .map_err(handler_failure)?;
        Ok(Default::default())
    }

    pub(crate) async fn remove_pod_sandbox(
        &self,
        req: api::RemovePodSandboxRequest,
    ) -> ttrpc::Result<api::RemovePodSandboxResponse> {
        self.plugin
            .remove_pod_sandbox(&req.pod)
            .await
            .map_err(handler_failure)?;
        Ok(Default::default())
    }

    pub(crate) async fn create_container(
        &self,
        req: api::CreateContainerRequest,
    ) -> ttrpc::Result<api::CreateContainerResponse> {
        let (adjust, update) = self
            .plugin
            .create_container(&req.pod, &req.container)
            .await
            .map_err(handler_failure)?;
        Ok(api::CreateContainerResponse {
            adjust: protobuf::MessageField::some(adjust),
            update,
            ..Default::default()
        })
    }

    pub(crate) async fn post_create_container(
        &self,
        req: api::PostCreateContainerRequest,
    ) -> ttrpc::Result<api::PostCreateContainerResponse> {
        self.plugin
            .post_create_container(&req.pod, &req.container)
            .await
            .map_err(handler_failure)?;
        Ok(Default::default())
    }

    pub(crate) async fn start_container(
        &self,
        req: api::StartContainerRequest,
    ) -> ttrpc::Result<api::StartContainerResponse> {
        self.plugin
            .start_container(&req.pod, &req.container)
            .await
            .map_err(handler_failure)?;
        Ok(Default::default())
    }

    pub(crate) async fn post_start_container(
        &self,
        req: api::PostStartContainerRequest,
    ) -> ttrpc::Result<api::PostStartContainerResponse> {
        self.plugin
            .post_start_container(&req.pod, &req.container)
            .await
            .map_err(handler_failure)?;
        Ok(Default::default())
    }

    pub(crate) async fn update_container(
        &self,
        req: api::UpdateContainerRequest,
    ) -> ttrpc::Result<api::UpdateContainerResponse> {
        let update = self
            .plugin
            .update_container(&req.pod, &req.container, req.linux_resources.as_ref())
            .await
            .map_err(handler_failure)?;
        Ok(api::UpdateContainerResponse {
            update,
            ..Default::default()
        })
    }

    pub(crate) async fn post_update_container(
        &self,
        req: api::PostUpdateContainerRequest,
    ) -> ttrpc::Result<api::PostUpdateContainerResponse> {
        self.plugin
            .post_update_container(&req.pod, &req.container)
            .await
            .map_err(handler_failure)?;
        Ok(Default::default())
    }

    pub(crate) async fn stop_container(
        &self,
        req: api::StopContainerRequest,
    ) -> ttrpc::Result<api::StopContainerResponse> {
        let update = self
            .plugin
            .stop_container(&req.pod, &req.container)
            .await
            .map_err(handler_failure)?;
        Ok(api::StopContainerResponse {
            update,
            ..Default::default()
        })
    }

    pub(crate) async fn remove_container(
        &self,
        req: api::RemoveContainerRequest,
    ) -> ttrpc::Result<api::RemoveContainerResponse> {
        self.plugin
            .remove_container(&req.pod, &req.container)
            .await
            .map_err(handler_failure)?;
        Ok(Default::default())
    }

    /// Runtimes fall back to StateChange for plugins that lack a dedicated
    /// method; a stub serving every method never needs it, but answers it
    /// for completeness with the same handlers.
    pub(crate) async fn state_change(
        &self,
        evt: api::StateChangeEvent,
    ) -> ttrpc::Result<api::Empty> {
        let (pod, ctr) = (&evt.pod, &evt.container);
        let result = match evt.event.enum_value_or(Event::UNKNOWN) {
            Event::RUN_POD_SANDBOX => self.plugin.run_pod_sandbox(pod).await,
            Event::POST_UPDATE_POD_SANDBOX => self.plugin.post_update_pod_sandbox(pod).await,
            Event::STOP_POD_SANDBOX => self.plugin.stop_pod_sandbox(pod).await,
            Event::REMOVE_POD_SANDBOX => self.plugin.remove_pod_sandbox(pod).await,
            Event::POST_CREATE_CONTAINER => self.plugin.post_create_container(pod, ctr).await,
            Event::START_CONTAINER => self.plugin.start_container(pod, ctr).await,
            Event::POST_START_CONTAINER => self.plugin.post_start_container(pod, ctr).await,
            Event::POST_UPDATE_CONTAINER => self.plugin.post_update_container(pod, ctr).await,
            Event::REMOVE_CONTAINER => self.plugin.remove_container(pod, ctr).await,
            _ => Ok(()),
        };
        result.map_err(handler_failure)?;
        Ok(api::Empty::new())
    }

    pub(crate) async fn validate_container_adjustment(
        &self,
        req: api::ValidateContainerAdjustmentRequest,
    ) -> ttrpc::Result<api::ValidateContainerAdjustmentResponse> {
        // A rejection is an answer, not a failed request.
        Ok(
            match self.plugin.validate_container_adjustment(&req).await {
                Ok(()) => Default::default(),
                Err(reason) => api::ValidateContainerAdjustmentResponse {
                    reject: true,
                    reason: reason.to_string(),
                    ..Default::default()
                },
            },
        )
    }
}
