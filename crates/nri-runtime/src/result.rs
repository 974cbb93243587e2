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

// The adaptation driving these results lands separately; until then only
// the tests use them.

use std::collections::{HashMap, HashSet};
use std::fmt;

use protobuf::MessageField;

use nri_api::quote::go_quote;
use nri_api::{
    mark_for_removal, marked_for_removal, CDIDevice, ConflictError, Container, ContainerAdjustment,
    ContainerUpdate, CreateContainerRequest, CreateContainerResponse, Field, Hooks, KeyValue,
    LinuxCPU, LinuxContainer, LinuxContainerAdjustment, LinuxContainerUpdate, LinuxDevice,
    LinuxMemory, LinuxMemoryPolicy, LinuxNamespace, LinuxPids, LinuxRdt, LinuxResources, Mount,
    OwningPlugins, POSIXRlimit, StopContainerResponse, UpdateContainerRequest,
    UpdateContainerResponse,
};

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

// ---------------------------------------------------------------------------
// The three results
// ---------------------------------------------------------------------------

/// The merged outcome of a CreateContainer event so far.
pub struct CreateResult {
    owners: OwningPlugins,
    reply: CreateContainerResponse,
    update_index: HashMap<String, usize>,
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
        }
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

    /// Who set what (tests inspect it; the runtime only needs it for creation).
    #[cfg(test)]
    pub fn owners(&self) -> &OwningPlugins {
        &self.owners
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

    /// Who set what (tests inspect it; the runtime only needs it for creation).
    #[cfg(test)]
    pub fn owners(&self) -> &OwningPlugins {
        &self.owners
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

// ---------------------------------------------------------------------------
// Claims
// ---------------------------------------------------------------------------

/// Claims on behalf of one plugin for one container.
struct Claims<'a> {
    owners: &'a mut OwningPlugins,
    ctr_id: &'a str,
    plugin: &'a str,
}

impl<'a> Claims<'a> {
    fn new(owners: &'a mut OwningPlugins, ctr_id: &'a str, plugin: &'a str) -> Self {
        Claims {
            owners,
            ctr_id,
            plugin,
        }
    }

    fn simple(&mut self, field: Field) -> Result<(), ConflictError> {
        self.owners.claim_simple(self.ctr_id, field, self.plugin)
    }

    /// Claims each field in turn, stopping at the first conflict.
    fn simples(&mut self, fields: impl IntoIterator<Item = Field>) -> Result<(), ConflictError> {
        fields.into_iter().try_for_each(|field| self.simple(field))
    }

    fn key(&mut self, field: Field, key: &str) -> Result<(), ConflictError> {
        self.owners
            .claim_compound(self.ctr_id, field, key, self.plugin)
    }

    fn clear(&mut self, field: Field) {
        self.owners.clear_simple(self.ctr_id, field, self.plugin)
    }

    fn clear_key(&mut self, field: Field, key: &str) {
        self.owners
            .clear_compound(self.ctr_id, field, key, self.plugin)
    }

    fn hooks(&mut self) {
        self.owners.claim_hooks(self.ctr_id, self.plugin)
    }

    fn clear_rdt(&mut self) {
        self.owners.clear_rdt(self.ctr_id, self.plugin)
    }
}

// ---------------------------------------------------------------------------
// Container adjustments (CreateContainer)
// ---------------------------------------------------------------------------

/// Merges one plugin's adjustment into the request's container and the
/// merged reply.
struct Adjuster<'a> {
    claims: Claims<'a>,
    ctr: &'a mut Container,
    reply: &'a mut ContainerAdjustment,
}

impl Adjuster<'_> {
    /// Upstream's application order; the first error stops the merge.
    fn apply(mut self, adjust: ContainerAdjustment) -> Result<(), ConflictError> {
        let ContainerAdjustment {
            annotations,
            mounts,
            env,
            hooks,
            linux,
            rlimits,
            CDI_devices,
            args,
            ..
        } = adjust;
        self.annotations(annotations)?;
        MOUNTS.merge(
            &mut self.claims,
            mounts,
            &mut self.reply.mounts,
            &mut self.ctr.mounts,
        )?;
        ENV.merge(
            &mut self.claims,
            env,
            &mut self.reply.env,
            &mut self.ctr.env,
        )?;
        self.args(args)?;
        if let Some(hooks) = hooks.into_option() {
            self.hooks(hooks);
        }
        if let Some(linux) = linux.into_option() {
            self.linux(linux)?;
        }
        self.rlimits(rlimits)?;
        self.cdi_devices(CDI_devices)
    }

    fn annotations(&mut self, annotations: HashMap<String, String>) -> Result<(), ConflictError> {
        merge_map(
            &mut self.claims,
            Field::Annotations,
            annotations,
            &mut self.ctr.annotations,
            &mut self.reply.annotations,
            None,
        )
    }

    /// A leading empty argument asks to replace whatever an earlier plugin
    /// set; the command line is then claimed as a whole.
    fn args(&mut self, args: Vec<String>) -> Result<(), ConflictError> {
        let args = match args.split_first() {
            None => return Ok(()),
            Some((first, rest)) if first.is_empty() => {
                self.claims.clear(Field::Args);
                rest.to_vec()
            }
            Some(_) => args,
        };
        self.claims.simple(Field::Args)?;
        self.ctr.args.clone_from(&args);
        self.reply.args = args;
        Ok(())
    }

    /// Hooks are appended, never replaced, and never conflict.
    fn hooks(&mut self, hooks: Hooks) {
        let ctr = self.ctr.hooks.mut_or_insert_default();
        let reply = self.reply.hooks.mut_or_insert_default();
        let Hooks {
            prestart,
            create_runtime,
            create_container,
            start_container,
            poststart,
            poststop,
            ..
        } = hooks;
        let kinds = [
            (prestart, &mut ctr.prestart, &mut reply.prestart),
            (poststart, &mut ctr.poststart, &mut reply.poststart),
            (poststop, &mut ctr.poststop, &mut reply.poststop),
            (
                create_runtime,
                &mut ctr.create_runtime,
                &mut reply.create_runtime,
            ),
            (
                create_container,
                &mut ctr.create_container,
                &mut reply.create_container,
            ),
            (
                start_container,
                &mut ctr.start_container,
                &mut reply.start_container,
            ),
        ];
        let mut injected = false;
        for (new, in_ctr, in_reply) in kinds {
            if !new.is_empty() {
                in_ctr.extend(new.iter().cloned());
                in_reply.extend(new);
                injected = true;
            }
        }
        if injected {
            self.claims.hooks();
        }
    }

    fn linux(&mut self, linux: LinuxContainerAdjustment) -> Result<(), ConflictError> {
        let LinuxContainerAdjustment {
            devices,
            resources,
            cgroups_path,
            oom_score_adj,
            io_priority,
            seccomp_policy,
            namespaces,
            sysctl,
            net_devices,
            scheduler,
            rdt,
            memory_policy,
            ..
        } = linux;
        let claims = &mut self.claims;
        let ctr = self.ctr.linux.mut_or_insert_default();
        let reply = self.reply.linux.mut_or_insert_default();

        DEVICES.merge(claims, devices, &mut reply.devices, &mut ctr.devices)?;
        if let Some(resources) = resources.into_option() {
            adjust_resources(
                claims,
                &resources,
                ctr.resources.mut_or_insert_default(),
                reply.resources.mut_or_insert_default(),
            )?;
        }
        if !cgroups_path.is_empty() {
            claims.simple(Field::CgroupsPath)?;
            ctr.cgroups_path.clone_from(&cgroups_path);
            reply.cgroups_path = cgroups_path;
        }
        replace(
            claims,
            Field::OomScoreAdj,
            oom_score_adj,
            &mut ctr.oom_score_adj,
            &mut reply.oom_score_adj,
        )?;
        replace(
            claims,
            Field::IoPriority,
            io_priority,
            &mut ctr.io_priority,
            &mut reply.io_priority,
        )?;
        replace(
            claims,
            Field::SeccompPolicy,
            seccomp_policy,
            &mut ctr.seccomp_policy,
            &mut reply.seccomp_policy,
        )?;
        adjust_namespaces(
            claims,
            namespaces,
            &mut ctr.namespaces,
            &mut reply.namespaces,
        )?;
        // QUIRK (v0.12.2): markers of sysctls that are only removed land in
        // the reply's annotations (fixed upstream after the tag).
        merge_map(
            claims,
            Field::Sysctl,
            sysctl,
            &mut ctr.sysctl,
            &mut reply.sysctl,
            Some(&mut self.reply.annotations),
        )?;
        // Upstream's marker value is a nil message; an empty one here.
        merge_map(
            claims,
            Field::LinuxNetDevices,
            net_devices,
            &mut ctr.net_devices,
            &mut reply.net_devices,
            None,
        )?;
        replace(
            claims,
            Field::LinuxSched,
            scheduler,
            &mut ctr.scheduler,
            &mut reply.scheduler,
        )?;
        adjust_rdt(claims, rdt, &mut reply.rdt)?;
        adjust_memory_policy(claims, memory_policy, &mut reply.memory_policy)
    }

    /// Rlimits are appended, claimed per type.
    fn rlimits(&mut self, rlimits: Vec<POSIXRlimit>) -> Result<(), ConflictError> {
        for rlimit in rlimits {
            self.claims.key(Field::Rlimits, &rlimit.type_)?;
            self.ctr.rlimits.push(rlimit.clone());
            self.reply.rlimits.push(rlimit);
        }
        Ok(())
    }

    /// CDI devices are only added, claimed per name, and stay out of the
    /// container: the runtime resolves them.
    fn cdi_devices(&mut self, devices: Vec<CDIDevice>) -> Result<(), ConflictError> {
        for device in devices {
            self.claims.key(Field::CdiDevices, &device.name)?;
            self.reply.CDI_devices.push(device);
        }
        Ok(())
    }
}

/// Replaces a whole sub-message (OOM score, I/O priority, seccomp policy,
/// scheduler) in the container and the reply, if the plugin sent one.
fn replace<T: Clone>(
    claims: &mut Claims<'_>,
    field: Field,
    new: MessageField<T>,
    ctr: &mut MessageField<T>,
    reply: &mut MessageField<T>,
) -> Result<(), ConflictError> {
    if new.is_none() {
        return Ok(());
    }
    claims.simple(field)?;
    ctr.clone_from(&new);
    *reply = new;
    Ok(())
}

/// Merges a keyed map (annotations, sysctls, network devices).
///
/// A key `-k` removes `k`. Only when the same reply also sets `k` does the
/// removal clear `k`'s owner, delete it from the container and put the
/// marker (with an empty value) in the reply before the new value.
/// QUIRK: a removal alone only puts its marker in `lone_markers` (default:
/// the reply's map); it deletes nothing from the container or the reply.
fn merge_map<V: Clone + Default>(
    claims: &mut Claims<'_>,
    field: Field,
    incoming: HashMap<String, V>,
    ctr: &mut HashMap<String, V>,
    reply: &mut HashMap<String, V>,
    lone_markers: Option<&mut HashMap<String, V>>,
) -> Result<(), ConflictError> {
    let (removals, mut sets): (Vec<_>, Vec<_>) = incoming
        .into_iter()
        .partition(|(key, _)| marked_for_removal(key).is_some());
    let mut removed: HashSet<String> = removals
        .into_iter()
        .filter_map(|(key, _)| marked_for_removal(&key).map(str::to_string))
        .collect();
    // Upstream walks a Go map, in random order; sorting makes the reported
    // conflict deterministic when several keys conflict.
    sets.sort_unstable_by(|a, b| a.0.cmp(&b.0));

    for (key, value) in sets {
        if removed.remove(&key) {
            claims.clear_key(field, &key);
            ctr.remove(&key);
            reply.insert(mark_for_removal(&key), V::default());
        }
        claims.key(field, &key)?;
        ctr.insert(key.clone(), value.clone());
        reply.insert(key, value);
    }

    let markers = lone_markers.unwrap_or(reply);
    for key in removed {
        markers.insert(mark_for_removal(&key), V::default());
    }
    Ok(())
}

/// How one keyed list of an adjustment is merged: mounts (by destination),
/// devices (by path) and environment variables (by name).
///
/// Entries the plugin removes or sets drop out of the container and new
/// ones are appended; removals also drop earlier plugins' entries from the
/// reply and clear their owners, and every added entry is claimed.
struct KeyedList<T, C> {
    field: Field,
    key: fn(&T) -> &str,
    ctr_key: fn(&C) -> &str,
    to_ctr: fn(&T) -> C,
    /// Whether removal markers of keys not added back reach the reply.
    /// Only mounts do. QUIRK: for env and devices a removal of something
    /// from the original spec never reaches the runtime.
    reply_removals: bool,
}

const MOUNTS: KeyedList<Mount, Mount> = KeyedList {
    field: Field::Mounts,
    key: |m| &m.destination,
    ctr_key: |m| &m.destination,
    to_ctr: Mount::clone,
    reply_removals: true,
};

const DEVICES: KeyedList<LinuxDevice, LinuxDevice> = KeyedList {
    field: Field::Devices,
    key: |d| &d.path,
    ctr_key: |d| &d.path,
    to_ctr: LinuxDevice::clone,
    reply_removals: false,
};

/// The container holds its environment as OCI `NAME=value` strings.
/// Both conversions run for every entry and reply, so they avoid the
/// generic pattern search and `format!` machinery.
const ENV: KeyedList<KeyValue, String> = KeyedList {
    field: Field::Env,
    key: |e| &e.key,
    ctr_key: |e| match e.bytes().position(|b| b == b'=') {
        // An ASCII byte's position is a char boundary.
        Some(at) => &e[..at],
        None => e,
    },
    to_ctr: |e| {
        let mut entry = String::with_capacity(e.key.len() + 1 + e.value.len());
        entry.push_str(&e.key);
        entry.push('=');
        entry.push_str(&e.value);
        entry
    },
    reply_removals: false,
};

impl<T, C> KeyedList<T, C> {
    fn merge(
        &self,
        claims: &mut Claims<'_>,
        items: Vec<T>,
        reply: &mut Vec<T>,
        ctr: &mut Vec<C>,
    ) -> Result<(), ConflictError> {
        if items.is_empty() {
            return Ok(());
        }
        let edits = Edits::split(items, self.key);

        reply.retain(|entry| {
            let key = (self.key)(entry);
            let keep = !edits.removes(key);
            if !keep {
                claims.clear_key(self.field, key);
            }
            keep
        });
        ctr.retain(|entry| !edits.touches((self.ctr_key)(entry)));

        // All claimed before anything is added, so the entries can move
        // into the reply; after a conflict the event fails and the result
        // is dropped, so what was added by then does not matter.
        for entry in &edits.add {
            claims.key(self.field, (self.key)(entry))?;
        }
        ctr.extend(edits.add.iter().map(self.to_ctr));
        reply.extend(edits.add);
        if self.reply_removals {
            reply.extend(edits.lone_removals);
        }
        Ok(())
    }
}

/// A plugin's keyed list split into additions and removals.
struct Edits<T> {
    /// Entries to add or replace, in the plugin's order.
    add: Vec<T>,
    /// Every key the plugin sets or removes (without the marker): one map,
    /// so that each entry of the container is looked up once. std's
    /// SipHash on purpose: the plugin chooses these keys, and a reply of
    /// colliding keys must not make the merge quadratic.
    touched: HashMap<String, Touch>,
    /// Removal markers of keys not added back: one per key, in order of
    /// first appearance, the last marker winning as in upstream's map.
    lone_removals: Vec<T>,
}

/// What a plugin's list does to one key.
#[derive(Default)]
struct Touch {
    sets: bool,
    /// Where the key's removal marker is among the markers, if it has one.
    marker: Option<usize>,
}

impl<T> Edits<T> {
    fn split(items: Vec<T>, key: fn(&T) -> &str) -> Self {
        let mut add = Vec::new();
        let mut touched: HashMap<String, Touch> = HashMap::new();
        let mut markers: Vec<(String, T)> = Vec::new();
        for item in items {
            let Some(unmarked) = marked_for_removal(key(&item)).map(str::to_string) else {
                touched.entry(key(&item).to_string()).or_default().sets = true;
                add.push(item);
                continue;
            };
            let touch = touched.entry(unmarked.clone()).or_default();
            match touch.marker {
                Some(at) => markers[at].1 = item,
                None => {
                    touch.marker = Some(markers.len());
                    markers.push((unmarked, item));
                }
            }
        }
        let lone_removals = markers
            .into_iter()
            .filter(|(unmarked, _)| !touched[unmarked].sets)
            .map(|(_, marker)| marker)
            .collect();
        Edits {
            add,
            touched,
            lone_removals,
        }
    }

    fn removes(&self, key: &str) -> bool {
        self.touched.get(key).is_some_and(|t| t.marker.is_some())
    }

    /// Whether the plugin removes or (re)sets `key`.
    fn touches(&self, key: &str) -> bool {
        self.touched.contains_key(key)
    }
}

/// Namespaces are added, replaced or removed per type, and every entry,
/// removal markers included, is claimed per type and appended to the reply.
///
/// Upstream rebuilds the container's list from a Go map, so its order is
/// random; here it is kept: replaced in place, new types appended.
fn adjust_namespaces(
    claims: &mut Claims<'_>,
    namespaces: Vec<LinuxNamespace>,
    ctr: &mut Vec<LinuxNamespace>,
    reply: &mut Vec<LinuxNamespace>,
) -> Result<(), ConflictError> {
    if namespaces.is_empty() {
        return Ok(());
    }
    // Upstream's map also collapses duplicate types of the original list.
    for ns in std::mem::take(ctr) {
        upsert_namespace(ctr, ns);
    }
    for ns in namespaces {
        match marked_for_removal(&ns.type_) {
            Some(kind) => {
                claims.key(Field::Namespace, kind)?;
                ctr.retain(|n| n.type_ != kind);
            }
            None => {
                claims.key(Field::Namespace, &ns.type_)?;
                upsert_namespace(ctr, ns.clone());
            }
        }
        reply.push(ns);
    }
    Ok(())
}

fn upsert_namespace(list: &mut Vec<LinuxNamespace>, ns: LinuxNamespace) {
    match list.iter_mut().find(|n| n.type_ == ns.type_) {
        Some(existing) => *existing = ns,
        None => list.push(ns),
    }
}

/// RDT goes to the reply only. `remove` clears all RDT owners and resets
/// the reply to a bare removal, dropping earlier plugins' values; each field
/// sent afterwards is claimed and cancels the removal.
fn adjust_rdt(
    claims: &mut Claims<'_>,
    rdt: MessageField<LinuxRdt>,
    reply: &mut MessageField<LinuxRdt>,
) -> Result<(), ConflictError> {
    // QUIRK: upstream's nil check tests the wrong variable, so the reply's
    // RDT becomes an empty message whenever a plugin sends `linux` at all.
    let merged = reply.mut_or_insert_default();
    let Some(rdt) = rdt.into_option() else {
        return Ok(());
    };
    if rdt.remove {
        claims.clear_rdt();
        *merged = LinuxRdt {
            remove: true,
            ..Default::default()
        };
    }
    if rdt.clos_id.is_some() {
        claims.simple(Field::RdtClosID)?;
        merged.clos_id = rdt.clos_id;
        merged.remove = false;
    }
    if rdt.schemata.is_some() {
        claims.simple(Field::RdtSchemata)?;
        merged.schemata = rdt.schemata;
        merged.remove = false;
    }
    if rdt.enable_monitoring.is_some() {
        claims.simple(Field::RdtEnableMonitoring)?;
        merged.enable_monitoring = rdt.enable_monitoring;
        merged.remove = false;
    }
    Ok(())
}

/// The memory policy goes to the reply only.
fn adjust_memory_policy(
    claims: &mut Claims<'_>,
    policy: MessageField<LinuxMemoryPolicy>,
    reply: &mut MessageField<LinuxMemoryPolicy>,
) -> Result<(), ConflictError> {
    if policy.is_none() {
        return Ok(());
    }
    claims.simple(Field::MemoryPolicy)?;
    *reply = policy;
    Ok(())
}

/// Resources of an adjustment go to both the container and the reply.
/// Cgroup device rules are appended without ownership.
fn adjust_resources(
    claims: &mut Claims<'_>,
    new: &LinuxResources,
    ctr: &mut LinuxResources,
    reply: &mut LinuxResources,
) -> Result<(), ConflictError> {
    merge_resources(claims, new, &mut [&mut *ctr, &mut *reply])?;
    for target in [&mut *ctr, &mut *reply] {
        target.devices.extend(new.devices.iter().cloned());
    }
    if let Some(pids) = new.pids.as_ref() {
        claims.simple(Field::PidsLimit)?;
        for target in [ctr, reply] {
            target.pids = MessageField::some(LinuxPids {
                limit: pids.limit,
                ..Default::default()
            });
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Resources, shared by adjustments and updates
// ---------------------------------------------------------------------------

/// Claims what `new` sets among memory, CPU, hugepage limits, unified
/// cgroup v2 settings and the block I/O and RDT classes, and writes it over
/// each of `targets`. Upstream's claim order decides which conflict is
/// reported.
fn merge_resources(
    claims: &mut Claims<'_>,
    new: &LinuxResources,
    targets: &mut [&mut LinuxResources],
) -> Result<(), ConflictError> {
    if let Some(memory) = new.memory.as_ref() {
        claims.simples(memory_fields(memory))?;
        for target in targets.iter_mut() {
            overlay_memory(target.memory.mut_or_insert_default(), memory);
        }
    }
    if let Some(cpu) = new.cpu.as_ref() {
        claims.simples(cpu_fields(cpu))?;
        for target in targets.iter_mut() {
            overlay_cpu(target.cpu.mut_or_insert_default(), cpu);
        }
    }
    // Hugepage limits are appended, claimed per page size.
    for limit in &new.hugepage_limits {
        claims.key(Field::HugepageLimits, &limit.page_size)?;
        for target in targets.iter_mut() {
            target.hugepage_limits.push(limit.clone());
        }
    }
    // Sorted for a deterministic conflict; upstream walks a Go map.
    let mut unified: Vec<_> = new.unified.iter().collect();
    unified.sort_unstable();
    for (key, value) in unified {
        claims.key(Field::CgroupsUnified, key)?;
        for target in targets.iter_mut() {
            target.unified.insert(key.clone(), value.clone());
        }
    }
    if new.blockio_class.is_some() {
        claims.simple(Field::BlockioClass)?;
        for target in targets.iter_mut() {
            target.blockio_class.clone_from(&new.blockio_class);
        }
    }
    if new.rdt_class.is_some() {
        claims.simple(Field::RdtClass)?;
        for target in targets.iter_mut() {
            target.rdt_class.clone_from(&new.rdt_class);
        }
    }
    Ok(())
}

/// The memory fields `m` sets, in upstream's claim order.
fn memory_fields(m: &LinuxMemory) -> impl Iterator<Item = Field> {
    [
        (m.limit.is_some(), Field::MemLimit),
        (m.reservation.is_some(), Field::MemReservation),
        (m.swap.is_some(), Field::MemSwapLimit),
        (m.kernel.is_some(), Field::MemKernelLimit),
        (m.kernel_tcp.is_some(), Field::MemTCPLimit),
        (m.swappiness.is_some(), Field::MemSwappiness),
        (m.disable_oom_killer.is_some(), Field::MemDisableOomKiller),
        (m.use_hierarchy.is_some(), Field::MemUseHierarchy),
    ]
    .into_iter()
    .filter_map(|(set, field)| set.then_some(field))
}

/// The CPU fields `c` sets, in upstream's claim order. The cpuset strings
/// count as set only when non-empty.
fn cpu_fields(c: &LinuxCPU) -> impl Iterator<Item = Field> {
    [
        (c.shares.is_some(), Field::CPUShares),
        (c.quota.is_some(), Field::CPUQuota),
        (c.period.is_some(), Field::CPUPeriod),
        (c.realtime_runtime.is_some(), Field::CPURealtimeRuntime),
        (c.realtime_period.is_some(), Field::CPURealtimePeriod),
        (!c.cpus.is_empty(), Field::CPUSetCPUs),
        (!c.mems.is_empty(), Field::CPUSetMems),
    ]
    .into_iter()
    .filter_map(|(set, field)| set.then_some(field))
}

fn overlay<T: Clone>(target: &mut MessageField<T>, new: &MessageField<T>) {
    if new.is_some() {
        target.clone_from(new);
    }
}

fn overlay_memory(target: &mut LinuxMemory, new: &LinuxMemory) {
    overlay(&mut target.limit, &new.limit);
    overlay(&mut target.reservation, &new.reservation);
    overlay(&mut target.swap, &new.swap);
    overlay(&mut target.kernel, &new.kernel);
    overlay(&mut target.kernel_tcp, &new.kernel_tcp);
    overlay(&mut target.swappiness, &new.swappiness);
    overlay(&mut target.disable_oom_killer, &new.disable_oom_killer);
    overlay(&mut target.use_hierarchy, &new.use_hierarchy);
}

fn overlay_cpu(target: &mut LinuxCPU, new: &LinuxCPU) {
    overlay(&mut target.shares, &new.shares);
    overlay(&mut target.quota, &new.quota);
    overlay(&mut target.period, &new.period);
    overlay(&mut target.realtime_runtime, &new.realtime_runtime);
    overlay(&mut target.realtime_period, &new.realtime_period);
    if !new.cpus.is_empty() {
        target.cpus.clone_from(&new.cpus);
    }
    if !new.mems.is_empty() {
        target.mems.clone_from(&new.mems);
    }
}

// ---------------------------------------------------------------------------
// Container updates
// ---------------------------------------------------------------------------

/// The event whose replies carry the updates.
enum Event<'a> {
    /// A container being created may not be updated.
    Create {
        ctr_id: &'a str,
    },
    /// The updated container's own update is kept apart (it goes last in
    /// the reply) and starts from, then replaces, the request's resources.
    Update {
        ctr_id: &'a str,
        merged: &'a mut Option<ContainerUpdate>,
        resources: &'a mut MessageField<LinuxResources>,
    },
    Stop,
}

/// Merges one plugin's container updates into one update per container.
struct UpdateMerge<'a> {
    owners: &'a mut OwningPlugins,
    plugin: &'a str,
    /// Updates of other containers, in first-seen order.
    list: &'a mut Vec<ContainerUpdate>,
    /// Container ID → position in `list`.
    index: &'a mut HashMap<String, usize>,
    event: Event<'a>,
}

impl UpdateMerge<'_> {
    fn merge(mut self, updates: Vec<ContainerUpdate>) -> Result<(), MergeError> {
        for update in updates {
            if let Event::Create { ctr_id } = self.event {
                if update.container_id == ctr_id {
                    return Err(MergeError(Cause::UpdateDuringCreation {
                        plugin: self.plugin.to_string(),
                        ctr_id: update.container_id,
                    }));
                }
            }
            // Whether a failure is swallowed is up to this update alone, not
            // to the flag accumulated over plugins.
            if let Err(conflict) = self.merge_one(&update) {
                if !update.ignore_failure {
                    return Err(conflict.into());
                }
            }
        }
        Ok(())
    }

    /// Merges on a copy and commits only on success; claims made before a
    /// failure stay, as does the (maybe still empty) accumulated entry.
    fn merge_one(&mut self, update: &ContainerUpdate) -> Result<(), ConflictError> {
        let UpdateMerge {
            owners,
            plugin,
            list,
            index,
            event,
        } = self;
        let ctr_id = update.container_id.as_str();
        let (merged, request) = accumulated(event, list, index, ctr_id, update.ignore_failure);
        let Some(new) = update.linux.as_ref().and_then(|l| l.resources.as_ref()) else {
            return Ok(());
        };
        let mut resources = match &request {
            Some(request) => LinuxResources::clone(request),
            None => LinuxResources::clone(&merged.linux.resources),
        };

        let mut claims = Claims::new(owners, ctr_id, plugin);
        merge_resources(&mut claims, new, &mut [&mut resources])?;
        // QUIRK (pids): upstream checks the copy's pids, not the update's:
        // a requested pids limit is dropped, and a pids limit in the
        // UpdateContainer request is claimed by every plugin updating it.
        if resources.pids.is_some() {
            claims.simple(Field::PidsLimit)?;
        }

        if let Some(request) = request {
            *request = MessageField::some(resources.clone());
        }
        merged.linux.mut_or_insert_default().resources = MessageField::some(resources);
        Ok(())
    }
}

/// The accumulated update for `ctr_id`, created on first sight, with
/// `ignore_failure` ANDed over every plugin touching it; for the
/// UpdateContainer target also the request's resources.
fn accumulated<'m>(
    event: &'m mut Event<'_>,
    list: &'m mut Vec<ContainerUpdate>,
    index: &mut HashMap<String, usize>,
    ctr_id: &str,
    ignore_failure: bool,
) -> (
    &'m mut ContainerUpdate,
    Option<&'m mut MessageField<LinuxResources>>,
) {
    let (merged, request) = match event {
        Event::Update {
            ctr_id: target,
            merged,
            resources,
        } if *target == ctr_id => (
            merged.get_or_insert_with(|| fresh_update(ctr_id, ignore_failure)),
            Some(&mut **resources),
        ),
        _ => {
            let at = *index.entry(ctr_id.to_string()).or_insert_with(|| {
                list.push(fresh_update(ctr_id, ignore_failure));
                list.len() - 1
            });
            (&mut list[at], None)
        }
    };
    merged.ignore_failure &= ignore_failure;
    (merged, request)
}

/// A container's update as first created: empty memory, CPU, hugepage
/// limits and unified settings.
fn fresh_update(ctr_id: &str, ignore_failure: bool) -> ContainerUpdate {
    ContainerUpdate {
        container_id: ctr_id.to_string(),
        linux: MessageField::some(LinuxContainerUpdate {
            resources: MessageField::some(LinuxResources {
                memory: MessageField::some(LinuxMemory::default()),
                cpu: MessageField::some(LinuxCPU::default()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ignore_failure,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
