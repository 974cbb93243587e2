//! Merging plugin replies into the one reply the runtime gets.
//!
//! Plugins answer CreateContainer, UpdateContainer and StopContainer one
//! after the other. Their replies are merged here the way upstream's
//! `pkg/adaptation/result.go` (v0.12.2) merges them, quirks included; see
//! `docs/merge-quirks.md` for each quirk and whether it is matched or fixed.
//!
//! * Every field a plugin sets is claimed in an [`OwningPlugins`]; a second
//!   claim is a conflict that fails the event ([`MergeError`]).
//! * CreateContainer adjustments are also written into the request's
//!   container, so later plugins see the container as adjusted so far.
//! * Container updates are merged per container, in first-seen order.
//! * Evictions are ignored, as upstream ignores them.
//!
//! What a merge changed is also what the audit log records ([`audit`]).

mod adjust;
pub(crate) mod audit;
mod claims;
mod resources;
mod update;
mod work;

use std::collections::HashMap;
use std::fmt;

use protobuf::MessageField;

use nri_api::quote::go_quote;
use nri_api::wire::field::*;
use nri_api::wire::{only_field, only_fields};
use nri_api::{
    ConflictError, Container, ContainerAdjustment, ContainerUpdate, CreateContainerRequest,
    CreateContainerResponse, Hooks, LinuxCPU, LinuxContainer, LinuxContainerAdjustment,
    LinuxMemory, LinuxResources, OwningPlugins, StopContainerResponse, UpdateContainerRequest,
    UpdateContainerResponse, ValidateContainerAdjustmentRequest,
};

use adjust::*;
use claims::*;
use resources::*;
use update::*;
use work::steps;
#[cfg(feature = "fuzzing")]
pub(crate) use work::steps_so_far;

/// Why merging a plugin's reply failed. The message is upstream's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeError(Cause);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Cause {
    Conflict(ConflictError),
    UpdateDuringCreation { plugin: String, ctr_id: String },
}

impl MergeError {
    /// The ownership conflict, if that is what failed.
    #[cfg(test)]
    pub fn as_conflict(&self) -> Option<&ConflictError> {
        match &self.0 {
            Cause::Conflict(conflict) => Some(conflict),
            Cause::UpdateDuringCreation { .. } => None,
        }
    }
}

impl From<ConflictError> for MergeError {
    fn from(conflict: ConflictError) -> Self {
        MergeError(Cause::Conflict(conflict))
    }
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Cause::Conflict(conflict) => conflict.fmt(f),
            Cause::UpdateDuringCreation { plugin, ctr_id } => write!(
                f,
                "plugin {} asked update of {} during creation",
                go_quote(plugin),
                go_quote(ctr_id)
            ),
        }
    }
}

// The conflict is rendered by Display already, so it is not a `source()`.
impl std::error::Error for MergeError {}

/// The merged outcome of a CreateContainer event so far.
pub struct CreateResult {
    owners: OwningPlugins,
    reply: CreateContainerResponse,
    update_index: HashMap<String, usize>,
    reply_only: bool,
}

impl CreateResult {
    /// Normalizes `req.container` exactly like upstream
    /// `collectCreateContainerResult` (fills empty sub-messages and maps)
    /// and pre-initializes the reply.
    pub fn new(req: &mut CreateContainerRequest) -> Self {
        normalize_container(req.container.mut_or_insert_default());
        CreateResult {
            owners: OwningPlugins::default(),
            reply: CreateContainerResponse {
                adjust: MessageField::some(empty_adjustment()),
                ..Default::default()
            },
            update_index: HashMap::new(),
            reply_only: false,
        }
    }

    /// Tells the merge that only its reply will be read: not the container
    /// [`apply`](Self::apply) writes into (a [`stand_in`](Self::stand_in)),
    /// nor [`owners`](Self::owners), and that one plugin at most adjusts
    /// (no validator, no audit log). A plugin's maps (annotations, sysctls,
    /// network devices) then become the reply's without being claimed or
    /// mirrored key by key; the reply is the same.
    pub fn read_by_reply_only(&mut self) {
        self.reply_only = true;
    }

    /// Whether `req` has every part [`new`](Self::new) would add, so that
    /// `new` leaves it as it is (and its encoding stays its encoding).
    pub fn is_normalized(req: &CreateContainerRequest) -> bool {
        let Some(ctr) = req.container.as_ref() else {
            return false;
        };
        let resources = ctr.linux.as_ref().and_then(|l| l.resources.as_ref());
        ctr.hooks.is_some() && resources.is_some_and(|r| r.memory.is_some() && r.cpu.is_some())
    }

    /// The container's ID, if the encoded request `bytes` (checked) has
    /// every part [`new`](Self::new) would add, each once, so that decoding
    /// and normalizing it would leave its encoding as it is.
    pub fn normalized_container_id(bytes: &[u8]) -> Option<String> {
        let ctr = only_field(bytes, CREATE_CONTAINER_REQUEST_CONTAINER)?;
        let [id, hooks, linux] = only_fields(ctr, [CONTAINER_ID, CONTAINER_HOOKS, CONTAINER_LINUX]);
        hooks?;
        let resources = only_field(linux?, LINUX_CONTAINER_RESOURCES)?;
        let [memory, cpu] = only_fields(resources, [LINUX_RESOURCES_MEMORY, LINUX_RESOURCES_CPU]);
        memory.and(cpu)?;
        std::str::from_utf8(id?).ok().map(str::to_string)
    }

    /// A stand-in for the request's container, normalized, holding only its
    /// ID: what [`apply`](Self::apply) writes into when no later plugin is
    /// to see the adjusted container.
    pub fn stand_in(ctr_id: String) -> CreateContainerRequest {
        let mut req = CreateContainerRequest {
            container: MessageField::some(Container {
                id: ctr_id,
                ..Default::default()
            }),
            ..Default::default()
        };
        normalize_container(req.container.mut_or_insert_default());
        req
    }

    /// Merges one plugin's reply (`plugin` is the full `idx-base` name),
    /// writing adjustments into `req.container` as upstream does. On error
    /// nothing more is merged and the event must fail.
    pub fn apply(
        &mut self,
        req: &mut CreateContainerRequest,
        plugin: &str,
        rpl: CreateContainerResponse,
    ) -> Result<(), MergeError> {
        // Evictions (`rpl.evict`) are deliberately ignored, as upstream does.
        let CreateContainerResponse { adjust, update, .. } = rpl;
        let container = req.container.mut_or_insert_default();
        let ctr_id = container.id.clone();
        if let Some(adjust) = adjust.into_option() {
            Adjuster {
                claims: Claims::new(&mut self.owners, &ctr_id, plugin),
                ctr: container,
                reply: self.reply.adjust.mut_or_insert_default(),
                reply_only: self.reply_only,
            }
            .apply(adjust)?;
        }
        UpdateMerge {
            owners: &mut self.owners,
            plugin,
            list: &mut self.reply.update,
            index: &mut self.update_index,
            event: Event::Create { ctr_id: &ctr_id },
        }
        .merge(update)
    }

    /// Who set what, for validation.
    pub fn owners(&self) -> &OwningPlugins {
        &self.owners
    }

    /// The merged reply so far (for the validation request).
    pub fn response(&self) -> &CreateContainerResponse {
        &self.reply
    }

    /// Moves the merged adjustment, updates and ownership records into a
    /// validation request, which validators read instead of copies;
    /// [`take_back`](Self::take_back) returns them. Nothing is merged in
    /// between.
    pub fn lend_to(&mut self, v: &mut ValidateContainerAdjustmentRequest) {
        v.adjust = std::mem::take(&mut self.reply.adjust);
        v.update = std::mem::take(&mut self.reply.update);
        v.owners = MessageField::some(std::mem::take(&mut self.owners));
    }

    /// Takes back what [`lend_to`](Self::lend_to) moved into `v`.
    pub fn take_back(&mut self, v: &mut ValidateContainerAdjustmentRequest) {
        self.reply.adjust = std::mem::take(&mut v.adjust);
        self.reply.update = std::mem::take(&mut v.update);
        self.owners = v.owners.take().unwrap_or_default();
    }

    /// The merged reply: the adjustment is always present and fully
    /// pre-initialized; empty parts mean "unchanged".
    pub fn into_response(self) -> CreateContainerResponse {
        self.reply
    }
}

/// The merged outcome of an UpdateContainer event so far.
pub struct UpdateResult {
    owners: OwningPlugins,
    others: Vec<ContainerUpdate>,
    update_index: HashMap<String, usize>,
    target: Option<ContainerUpdate>,
}

impl UpdateResult {
    /// Normalizes `req.linux_resources` like upstream
    /// `collectUpdateContainerResult` (fills empty memory and CPU).
    pub fn new(req: &mut UpdateContainerRequest) -> Self {
        let resources = req.linux_resources.mut_or_insert_default();
        resources.memory.mut_or_insert_default();
        resources.cpu.mut_or_insert_default();
        UpdateResult {
            owners: OwningPlugins::default(),
            others: Vec::new(),
            update_index: HashMap::new(),
            target: None,
        }
    }

    /// Merges one plugin's reply. An update of the request's own container
    /// starts from the request's resources, and on success replaces them,
    /// so later plugins see them.
    pub fn apply(
        &mut self,
        req: &mut UpdateContainerRequest,
        plugin: &str,
        rpl: UpdateContainerResponse,
    ) -> Result<(), MergeError> {
        // Evictions (`rpl.evict`) are deliberately ignored, as upstream does.
        UpdateMerge {
            owners: &mut self.owners,
            plugin,
            list: &mut self.others,
            index: &mut self.update_index,
            event: Event::Update {
                ctr_id: &req.container.id,
                merged: &mut self.target,
                resources: &mut req.linux_resources,
            },
        }
        .merge(rpl.update)
    }

    /// Who set what (for the audit log).
    pub fn owners(&self) -> &OwningPlugins {
        &self.owners
    }

    /// The merged updates so far, the target's last (for the audit log).
    pub fn updates(&self) -> Vec<ContainerUpdate> {
        let mut all = self.others.clone();
        all.extend(self.target.clone());
        all
    }

    /// The other containers' updates in first-seen order, then the updated
    /// container's own merged update, always last.
    ///
    /// Upstream puts a nil pointer last when no plugin updated the container
    /// (so the list is never empty); here that element is
    /// `ContainerUpdate::default()`, recognizable by its empty container ID.
    pub fn into_response(self) -> UpdateContainerResponse {
        let mut update = self.others;
        update.push(self.target.unwrap_or_default());
        UpdateContainerResponse {
            update,
            ..Default::default()
        }
    }
}

/// The merged outcome of a StopContainer event so far.
#[derive(Default)]
pub struct StopResult {
    owners: OwningPlugins,
    reply: StopContainerResponse,
    update_index: HashMap<String, usize>,
}

impl StopResult {
    /// An empty result: a StopContainer request has nothing to normalize.
    pub fn new() -> Self {
        Self::default()
    }

    /// Merges one plugin's updates of other containers.
    pub fn apply(&mut self, plugin: &str, rpl: StopContainerResponse) -> Result<(), MergeError> {
        UpdateMerge {
            owners: &mut self.owners,
            plugin,
            list: &mut self.reply.update,
            index: &mut self.update_index,
            event: Event::Stop,
        }
        .merge(rpl.update)
    }

    /// Who set what (for the audit log).
    pub fn owners(&self) -> &OwningPlugins {
        &self.owners
    }

    /// The merged updates so far (for the audit log).
    pub fn updates(&self) -> &[ContainerUpdate] {
        &self.reply.update
    }

    /// The merged updates, in first-seen order.
    pub fn into_response(self) -> StopContainerResponse {
        self.reply
    }
}

/// Gives the container every sub-message and collection upstream fills
/// before the first plugin call, so merging can write into them.
fn normalize_container(ctr: &mut Container) {
    ctr.hooks.mut_or_insert_default();
    let linux: &mut LinuxContainer = ctr.linux.mut_or_insert_default();
    let resources = linux.resources.mut_or_insert_default();
    resources.memory.mut_or_insert_default();
    resources.cpu.mut_or_insert_default();
}

/// The reply adjustment before any plugin answered: every part present and
/// empty, as upstream returns it.
fn empty_adjustment() -> ContainerAdjustment {
    ContainerAdjustment {
        hooks: MessageField::some(Hooks::default()),
        linux: MessageField::some(LinuxContainerAdjustment {
            resources: MessageField::some(LinuxResources {
                memory: MessageField::some(LinuxMemory::default()),
                cpu: MessageField::some(LinuxCPU::default()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod scale;
#[cfg(test)]
mod tests;
