//! Merging one plugin's `ContainerAdjustment` of a CreateContainer into
//! the reply, and into the request's container for the plugins after it.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use protobuf::MessageField;

use nri_api::{
    mark_for_removal, marked_for_removal, CDIDevice, ConflictError, Container, ContainerAdjustment,
    Field, Hooks, KeyValue, LinuxContainerAdjustment, LinuxDevice, LinuxMemoryPolicy,
    LinuxNamespace, LinuxPids, LinuxRdt, LinuxResources, Mount, POSIXRlimit,
};

use super::*;

/// Merges one plugin's adjustment into the request's container and the
/// merged reply.
pub(super) struct Adjuster<'a> {
    pub(super) claims: Claims<'a>,
    pub(super) ctr: &'a mut Container,
    pub(super) reply: &'a mut ContainerAdjustment,
    /// Nothing reads `ctr` or the claims after this merge
    /// ([`CreateResult::read_by_reply_only`]).
    pub(super) reply_only: bool,
}

impl Adjuster<'_> {
    /// Upstream's application order; the first error stops the merge.
    pub(super) fn apply(mut self, adjust: ContainerAdjustment) -> Result<(), ConflictError> {
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

    pub(super) fn annotations(
        &mut self,
        annotations: HashMap<String, String>,
    ) -> Result<(), ConflictError> {
        merge_map(
            &mut self.claims,
            Field::Annotations,
            annotations,
            &mut self.ctr.annotations,
            &mut self.reply.annotations,
            self.reply_only,
        )
    }

    /// A leading empty argument asks to replace whatever an earlier plugin
    /// set; the command line is then claimed as a whole.
    pub(super) fn args(&mut self, args: Vec<String>) -> Result<(), ConflictError> {
        let args = match args.split_first() {
            None => return Ok(()),
            Some((first, rest)) if first.is_empty() => {
                self.claims.clear(Field::Args);
                rest.to_vec()
            }
            Some(_) => args,
        };
        self.claims.simple(Field::Args)?;
        steps(2 * args.len());
        self.ctr.args.clone_from(&args);
        self.reply.args = args;
        Ok(())
    }

    /// Hooks are appended, never replaced, and never conflict.
    pub(super) fn hooks(&mut self, hooks: Hooks) {
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
                steps(2 * new.len());
                in_ctr.extend(new.iter().cloned());
                in_reply.extend(new);
                injected = true;
            }
        }
        if injected {
            self.claims.hooks();
        }
    }

    pub(super) fn linux(&mut self, linux: LinuxContainerAdjustment) -> Result<(), ConflictError> {
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
        let reply_only = self.reply_only;
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
            reply_only,
        )?;
        // Markers of sysctls that are only removed stay in the reply's
        // sysctls, as upstream does since v0.12.3 (v0.12.2 put them in the
        // annotations).
        merge_map(
            claims,
            Field::Sysctl,
            sysctl,
            &mut ctr.sysctl,
            &mut reply.sysctl,
            reply_only,
        )?;
        // Upstream's marker value is a nil message; an empty one here.
        merge_map(
            claims,
            Field::LinuxNetDevices,
            net_devices,
            &mut ctr.net_devices,
            &mut reply.net_devices,
            reply_only,
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
    pub(super) fn rlimits(&mut self, rlimits: Vec<POSIXRlimit>) -> Result<(), ConflictError> {
        for rlimit in rlimits {
            steps(1);
            self.claims.key(Field::Rlimits, &rlimit.type_)?;
            self.ctr.rlimits.push(rlimit.clone());
            self.reply.rlimits.push(rlimit);
        }
        Ok(())
    }

    /// CDI devices are only added, claimed per name, and stay out of the
    /// container: the runtime resolves them.
    pub(super) fn cdi_devices(&mut self, devices: Vec<CDIDevice>) -> Result<(), ConflictError> {
        for device in devices {
            steps(1);
            self.claims.key(Field::CdiDevices, &device.name)?;
            self.reply.CDI_devices.push(device);
        }
        Ok(())
    }
}

/// Replaces a whole sub-message (OOM score, I/O priority, seccomp policy,
/// scheduler) in the container and the reply, if the plugin sent one.
pub(super) fn replace<T: Clone>(
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

/// From how many keys of one reply the maps they go into are grown once,
/// up front, rather than as they fill: for a few keys that costs more than
/// it saves (an owners' lookup more), for thousands it saves rehashing
/// every key several times.
const RESERVE_FROM: usize = 32;

/// Merges a keyed map (annotations, sysctls, network devices).
///
/// A key `-k` removes `k`. Only when the same reply also sets `k` does the
/// removal clear `k`'s owner, delete it from the container and put the
/// marker (with an empty value) in the reply before the new value.
/// QUIRK: a removal alone only puts its marker in the reply; it deletes
/// nothing from the container or the reply.
///
/// With `reply_only` (nothing reads `ctr` or the claims after this merge,
/// [`CreateResult::read_by_reply_only`]) a map without removals going into
/// a reply that has none of the field yet is the reply's as it is: moved,
/// not claimed, copied and mirrored key by key, which is most of the work
/// of a reply with thousands of keys. (No claim could conflict: the keys of
/// one map are distinct. A removal's marker gets an empty value, so a map
/// with one takes the full merge.)
pub(super) fn merge_map<V: Clone + Default>(
    claims: &mut Claims<'_>,
    field: Field,
    incoming: HashMap<String, V>,
    ctr: &mut HashMap<String, V>,
    reply: &mut HashMap<String, V>,
    reply_only: bool,
) -> Result<(), ConflictError> {
    if incoming.is_empty() {
        return Ok(());
    }
    steps(incoming.len());
    if reply_only && reply.is_empty() && incoming.keys().all(|k| marked_for_removal(k).is_none()) {
        *reply = incoming;
        return Ok(());
    }
    let (removals, mut sets): (Vec<_>, Vec<_>) = incoming
        .into_iter()
        .partition(|(key, _)| marked_for_removal(key).is_some());
    let mut removed: HashSet<String> = removals
        .into_iter()
        .filter_map(|(key, _)| marked_for_removal(&key).map(str::to_string))
        .collect();
    // Upstream walks a Go map, in random order; sorting makes the reported
    // conflict deterministic when several keys conflict. Nothing else
    // depends on the order, and no key can conflict while no key of the
    // field has an owner (the keys of one reply are distinct): then the
    // sort is skipped, which is most of merging a large reply.
    if claims.may_conflict(field) {
        sets.sort_unstable_by(|a, b| {
            steps(1);
            a.0.cmp(&b.0)
        });
    }
    if sets.len() >= RESERVE_FROM {
        claims.reserve_keys(field, sets.len());
        ctr.reserve(sets.len());
        reply.reserve(sets.len());
    }

    // A key the reply both removes and sets loses its owner first; then
    // all keys are claimed, in order, before any is set (a conflict fails
    // the event, and the result is dropped).
    if !removed.is_empty() {
        steps(sets.len());
        for (key, _) in &sets {
            if removed.remove(key) {
                claims.clear_key(field, key);
                ctr.remove(key);
                reply.insert(mark_for_removal(key), V::default());
            }
        }
    }
    claims.keys(field, sets.iter().map(|(key, _)| key.as_str()))?;
    steps(sets.len());
    for (key, value) in sets {
        ctr.insert(key.clone(), value.clone());
        reply.insert(key, value);
    }

    steps(removed.len());
    for key in removed {
        reply.insert(mark_for_removal(&key), V::default());
    }
    Ok(())
}

/// How one keyed list of an adjustment is merged: mounts (by destination),
/// devices (by path) and environment variables (by name).
///
/// Entries the plugin removes or sets drop out of the container and new
/// ones are appended; removals also drop earlier plugins' entries from the
/// reply and clear their owners, and every added entry is claimed.
pub(super) struct KeyedList<T, C> {
    pub(super) field: Field,
    pub(super) key: fn(&T) -> &str,
    pub(super) ctr_key: fn(&C) -> &str,
    pub(super) to_ctr: fn(&T) -> C,
    /// Whether removal markers of keys not added back reach the reply.
    /// Only mounts do. QUIRK: for env and devices a removal of something
    /// from the original spec never reaches the runtime.
    pub(super) reply_removals: bool,
}

pub(super) const MOUNTS: KeyedList<Mount, Mount> = KeyedList {
    field: Field::Mounts,
    key: |m| &m.destination,
    ctr_key: |m| &m.destination,
    to_ctr: Mount::clone,
    reply_removals: true,
};

pub(super) const DEVICES: KeyedList<LinuxDevice, LinuxDevice> = KeyedList {
    field: Field::Devices,
    key: |d| &d.path,
    ctr_key: |d| &d.path,
    to_ctr: LinuxDevice::clone,
    reply_removals: false,
};

/// The container holds its environment as OCI `NAME=value` strings.
/// Both conversions run for every entry and reply, so they avoid the
/// generic pattern search and `format!` machinery.
pub(super) const ENV: KeyedList<KeyValue, String> = KeyedList {
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
    pub(super) fn merge(
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

        steps(reply.len() + ctr.len());
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
        steps(edits.add.len());
        if edits.add.len() >= RESERVE_FROM {
            claims.reserve_keys(self.field, edits.add.len());
        }
        claims.keys(self.field, edits.add.iter().map(self.key))?;
        ctr.extend(edits.add.iter().map(self.to_ctr));
        reply.extend(edits.add);
        if self.reply_removals {
            reply.extend(edits.lone_removals);
        }
        Ok(())
    }
}

/// A plugin's keyed list split into additions and removals.
pub(super) struct Edits<T> {
    /// Entries to add or replace, in the plugin's order.
    pub(super) add: Vec<T>,
    /// Every key the plugin sets or removes (without the marker), so that
    /// each entry of the container is looked up once.
    pub(super) touched: Touched,
    /// Removal markers of keys not added back: one per key, in order of
    /// first appearance, the last marker winning as in upstream's map.
    pub(super) lone_removals: Vec<T>,
}

/// What a plugin's list does to one key.
#[derive(Default)]
pub(super) struct Touch {
    pub(super) sets: bool,
    /// Where the key's removal marker is among the markers, if it has one.
    pub(super) marker: Option<usize>,
}

impl<T> Edits<T> {
    pub(super) fn split(items: Vec<T>, key: fn(&T) -> &str) -> Self {
        let mut add = Vec::new();
        let mut touched = Touched::default();
        let mut markers: Vec<(String, T)> = Vec::new();
        steps(items.len());
        for item in items {
            let Some(unmarked) = marked_for_removal(key(&item)).map(str::to_string) else {
                touched.entry(key(&item)).sets = true;
                add.push(item);
                continue;
            };
            let touch = touched.entry(&unmarked);
            match touch.marker {
                Some(at) => markers[at].1 = item,
                None => {
                    touch.marker = Some(markers.len());
                    markers.push((unmarked, item));
                }
            }
        }
        steps(markers.len());
        let lone_removals = markers
            .into_iter()
            .filter(|(unmarked, _)| !touched.get(unmarked).is_some_and(|t| t.sets))
            .map(|(_, marker)| marker)
            .collect();
        Edits {
            add,
            touched,
            lone_removals,
        }
    }

    pub(super) fn removes(&self, key: &str) -> bool {
        self.touched.get(key).is_some_and(|t| t.marker.is_some())
    }

    /// Whether the plugin removes or (re)sets `key`.
    pub(super) fn touches(&self, key: &str) -> bool {
        self.touched.get(key).is_some()
    }
}

/// The keys of one plugin's list and what it does to each.
///
/// Nearly every reply touches a handful of keys, while the container has
/// dozens of entries that are each looked up: up to `FEW` keys are compared
/// directly (at most `FEW` comparisons per entry, so still linear), which
/// costs far less than hashing every entry. Beyond that a map takes over,
/// with std's SipHash on purpose: the plugin chooses these keys, and a
/// reply of colliding keys must not make the merge quadratic.
pub(super) enum Touched {
    Few(Vec<(String, Touch)>),
    Many(HashMap<String, Touch>),
}

impl Touched {
    const FEW: usize = 8;

    /// The key's entry, added if it is new.
    fn entry(&mut self, key: &str) -> &mut Touch {
        if let Touched::Few(few) = self {
            if few.len() == Self::FEW && !few.iter().any(|(k, _)| k == key) {
                *self = Touched::Many(std::mem::take(few).into_iter().collect());
            }
        }
        match self {
            Touched::Few(few) => {
                let at = match few.iter().position(|(k, _)| k == key) {
                    Some(at) => at,
                    None => {
                        few.push((key.to_string(), Touch::default()));
                        few.len() - 1
                    }
                };
                &mut few[at].1
            }
            Touched::Many(many) => many.entry(key.to_string()).or_default(),
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&Touch> {
        match self {
            Touched::Few(few) => few.iter().find(|(k, _)| k == key).map(|(_, t)| t),
            Touched::Many(many) => many.get(key),
        }
    }
}

impl Default for Touched {
    fn default() -> Self {
        Touched::Few(Vec::new())
    }
}

/// Namespaces are added, replaced or removed per type, and every entry,
/// removal markers included, is claimed per type and appended to the reply.
///
/// Upstream rebuilds the container's list from a Go map, so its order is
/// random; here it is kept: replaced in place, new types appended.
///
/// With `reply_only` (nothing reads `ctr` or the claims after this merge,
/// [`CreateResult::read_by_reply_only`]) a list going into a reply that has
/// no namespaces yet becomes the reply's as it is, unless two of its
/// entries have the same type: only that could conflict, and then the full
/// merge reports it.
pub(super) fn adjust_namespaces(
    claims: &mut Claims<'_>,
    mut namespaces: Vec<LinuxNamespace>,
    ctr: &mut Vec<LinuxNamespace>,
    reply: &mut Vec<LinuxNamespace>,
    reply_only: bool,
) -> Result<(), ConflictError> {
    if namespaces.is_empty() {
        return Ok(());
    }
    if reply_only && reply.is_empty() && distinct_types(&namespaces) {
        *reply = namespaces;
        return Ok(());
    }
    // Every type is claimed first, in one pass over the owners; the claims
    // take one type at a time and stop at a conflict, so `reached` then
    // counts the entries before it and the conflicting one.
    steps(namespaces.len());
    if namespaces.len() >= RESERVE_FROM {
        claims.reserve_keys(Field::Namespace, namespaces.len());
    }
    let mut reached = 0;
    let outcome = claims.keys(
        Field::Namespace,
        namespaces.iter().map(|ns| {
            reached += 1;
            marked_for_removal(&ns.type_).unwrap_or(&ns.type_)
        }),
    );
    let claimed = if outcome.is_ok() {
        namespaces.len()
    } else {
        reached - 1
    };
    namespaces.truncate(claimed);

    // Also after a conflict, so the container holds what was merged so far.
    // Upstream's map also collapses duplicate types of the original list.
    let mut by_type = NamespacesByType::collapse(std::mem::take(ctr), claimed);
    steps(claimed);
    for ns in &mut namespaces {
        match marked_for_removal(&ns.type_) {
            Some(kind) => by_type.remove(kind),
            None => by_type.upsert_copy(ns),
        }
    }
    *ctr = by_type.into_list();
    if reply.is_empty() {
        *reply = namespaces;
    } else {
        reply.append(&mut namespaces);
    }
    outcome
}

/// Whether no two entries of `namespaces` claim the same type.
fn distinct_types(namespaces: &[LinuxNamespace]) -> bool {
    steps(namespaces.len());
    let mut seen = HashSet::with_capacity(namespaces.len());
    namespaces
        .iter()
        .all(|ns| seen.insert(marked_for_removal(&ns.type_).unwrap_or(&ns.type_)))
}

/// A container's namespaces, one per type, in list order, each type found
/// by a hash lookup rather than a scan of the list.
struct NamespacesByType {
    /// The entries without their type, which is their key in `at` (so it
    /// is not copied twice). Removed entries leave a hole, so that later
    /// positions stay valid.
    slots: Vec<Option<LinuxNamespace>>,
    /// Type → its position in `slots`. SipHash, as for `Edits::touched`.
    at: HashMap<String, usize>,
}

impl NamespacesByType {
    /// One entry per type at the type's first position, holding its last
    /// value, as upstream's map collapses duplicates; room for `more`.
    fn collapse(list: Vec<LinuxNamespace>, more: usize) -> Self {
        let mut by_type = NamespacesByType {
            slots: Vec::with_capacity(list.len() + more),
            at: HashMap::with_capacity(list.len() + more),
        };
        for mut ns in list {
            steps(1);
            let kind = std::mem::take(&mut ns.type_);
            by_type.put(kind, ns);
        }
        by_type
    }

    /// Replaces the entry of type `kind` in place, or appends `ns` (its
    /// type taken out).
    fn put(&mut self, kind: String, ns: LinuxNamespace) {
        match self.at.entry(kind) {
            Entry::Occupied(at) => self.slots[*at.get()] = Some(ns),
            Entry::Vacant(at) => {
                at.insert(self.slots.len());
                self.slots.push(Some(ns));
            }
        }
    }

    /// [`put`](Self::put)s a copy of `ns`, which the reply keeps.
    fn upsert_copy(&mut self, ns: &mut LinuxNamespace) {
        // The rest of `ns` copied without its type, then the type once.
        let kind = std::mem::take(&mut ns.type_);
        let copy = ns.clone();
        ns.type_ = kind;
        self.put(ns.type_.clone(), copy);
    }

    /// Drops the entry of type `kind`; a type re-added later goes last.
    fn remove(&mut self, kind: &str) {
        if let Some(at) = self.at.remove(kind) {
            self.slots[at] = None;
        }
    }

    fn into_list(mut self) -> Vec<LinuxNamespace> {
        steps(self.slots.len() + self.at.len());
        // Each entry left has its type in `at`, and each type an entry.
        for (kind, at) in self.at {
            if let Some(ns) = &mut self.slots[at] {
                ns.type_ = kind;
            }
        }
        self.slots.into_iter().flatten().collect()
    }
}

/// RDT goes to the reply only. `remove` clears all RDT owners and resets
/// the reply to a bare removal, dropping earlier plugins' values; each field
/// sent afterwards is claimed and cancels the removal.
pub(super) fn adjust_rdt(
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
pub(super) fn adjust_memory_policy(
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
pub(super) fn adjust_resources(
    claims: &mut Claims<'_>,
    new: &LinuxResources,
    ctr: &mut LinuxResources,
    reply: &mut LinuxResources,
) -> Result<(), ConflictError> {
    merge_resources(claims, new, &mut [&mut *ctr, &mut *reply])?;
    for target in [&mut *ctr, &mut *reply] {
        steps(new.devices.len());
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
