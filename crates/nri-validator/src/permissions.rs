//! Per-plugin permissions: which kinds of change each plugin may make, an
//! nri-rs extension of upstream's configuration (`pluginPermissions`).
//!
//! The global `reject*` switches say what nobody may do; permissions say
//! what a given plugin may do. Both must agree for an adjustment to pass.
//! See `docs/validator.md` for the format and the rules.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use protobuf::Enum;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use nri_api::quote::go_quote;
use nri_api::removal::marked_for_removal;
use nri_api::{Field, FieldOwners, Mount, PluginInstance, ValidateContainerAdjustmentRequest};

use crate::Violation;

/// The entry that matches any plugin without an entry of its own.
pub const ANY_PLUGIN: &str = "*";

/// One entry of `pluginPermissions`: what the listed plugins may change.
///
/// Unlike the top-level keys, an entry's keys are strict: a misspelt key
/// could otherwise leave `allow` empty and quietly deny everything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginPermissions {
    /// Plugins as `idx-name`, bare `name`, or [`ANY_PLUGIN`].
    pub plugins: Vec<String>,
    /// The kinds of change these plugins may make; empty allows none.
    pub allow: Vec<PermissionKind>,
    /// If set, the only host paths (and what lies below them) that these
    /// plugins may use as an absolute mount source.
    #[serde(
        rename = "mountSources",
        alias = "mount_sources",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "mount_sources"
    )]
    pub mount_sources: Option<Vec<String>>,
}

/// A kind of change a plugin can be permitted to make. Each [`Field`]
/// belongs to exactly one kind ([`permission_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PermissionKind {
    Annotations,
    Mounts,
    OciHooks,
    /// Devices and CDI devices.
    Devices,
    Env,
    Args,
    /// Cgroup resources, RDT, and the memory policy: the fields a plugin
    /// also sets when it updates other containers.
    Resources,
    CgroupsPath,
    OomScoreAdj,
    Rlimits,
    IoPriority,
    Seccomp,
    Namespaces,
    Sysctls,
    NetDevices,
    Scheduler,
}

impl PermissionKind {
    /// Every kind, in the order of the documentation's table.
    pub const ALL: [PermissionKind; 16] = [
        PermissionKind::Annotations,
        PermissionKind::Mounts,
        PermissionKind::OciHooks,
        PermissionKind::Devices,
        PermissionKind::Env,
        PermissionKind::Args,
        PermissionKind::Resources,
        PermissionKind::CgroupsPath,
        PermissionKind::OomScoreAdj,
        PermissionKind::Rlimits,
        PermissionKind::IoPriority,
        PermissionKind::Seccomp,
        PermissionKind::Namespaces,
        PermissionKind::Sysctls,
        PermissionKind::NetDevices,
        PermissionKind::Scheduler,
    ];

    /// The name the configuration uses (`ociHooks`).
    pub fn name(self) -> &'static str {
        match self {
            PermissionKind::Annotations => "annotations",
            PermissionKind::Mounts => "mounts",
            PermissionKind::OciHooks => "ociHooks",
            PermissionKind::Devices => "devices",
            PermissionKind::Env => "env",
            PermissionKind::Args => "args",
            PermissionKind::Resources => "resources",
            PermissionKind::CgroupsPath => "cgroupsPath",
            PermissionKind::OomScoreAdj => "oomScoreAdj",
            PermissionKind::Rlimits => "rlimits",
            PermissionKind::IoPriority => "ioPriority",
            PermissionKind::Seccomp => "seccomp",
            PermissionKind::Namespaces => "namespaces",
            PermissionKind::Sysctls => "sysctls",
            PermissionKind::NetDevices => "netDevices",
            PermissionKind::Scheduler => "scheduler",
        }
    }
}

impl fmt::Display for PermissionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not one of [`PermissionKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown permission kind {}; known kinds: {}", go_quote(.0), known_kinds())]
pub struct UnknownPermissionKind(pub String);

fn known_kinds() -> String {
    let names: Vec<&str> = PermissionKind::ALL.iter().map(|k| k.name()).collect();
    names.join(", ")
}

impl FromStr for PermissionKind {
    type Err = UnknownPermissionKind;

    /// Names match exactly, case included, so that a typo is an error
    /// rather than a near miss that grants or denies something.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PermissionKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownPermissionKind(s.to_string()))
    }
}

impl Serialize for PermissionKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for PermissionKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(de::Error::custom)
    }
}

/// The kind of change a field belongs to; `None` only for `Field::None`,
/// which names no field.
///
/// The match has no catch-all on purpose: a field added to the proto does
/// not compile here until someone decides its kind.
pub fn permission_kind(field: Field) -> Option<PermissionKind> {
    use PermissionKind as K;
    Some(match field {
        Field::None => return None,
        Field::Annotations => K::Annotations,
        Field::Mounts => K::Mounts,
        Field::OciHooks => K::OciHooks,
        Field::Devices | Field::CdiDevices => K::Devices,
        Field::Env => K::Env,
        Field::Args => K::Args,
        Field::MemLimit
        | Field::MemReservation
        | Field::MemSwapLimit
        | Field::MemKernelLimit
        | Field::MemTCPLimit
        | Field::MemSwappiness
        | Field::MemDisableOomKiller
        | Field::MemUseHierarchy
        | Field::CPUShares
        | Field::CPUQuota
        | Field::CPUPeriod
        | Field::CPURealtimeRuntime
        | Field::CPURealtimePeriod
        | Field::CPUSetCPUs
        | Field::CPUSetMems
        | Field::PidsLimit
        | Field::HugepageLimits
        | Field::BlockioClass
        | Field::RdtClass
        | Field::CgroupsUnified
        | Field::RdtClosID
        | Field::RdtSchemata
        | Field::RdtEnableMonitoring
        | Field::MemoryPolicy => K::Resources,
        Field::CgroupsPath => K::CgroupsPath,
        Field::OomScoreAdj => K::OomScoreAdj,
        Field::Rlimits => K::Rlimits,
        Field::IoPriority => K::IoPriority,
        Field::SeccompPolicy => K::Seccomp,
        Field::Namespace => K::Namespaces,
        Field::Sysctl => K::Sysctls,
        Field::LinuxNetDevices => K::NetDevices,
        Field::LinuxSched => K::Scheduler,
    })
}

/// Reads `mountSources`, refusing entries that could never match as
/// intended: a relative root has no fixed place on the host.
fn mount_sources<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    let Some(roots) = Option::<Vec<String>>::deserialize(deserializer)? else {
        return Ok(None);
    };
    for root in &roots {
        if !root.starts_with('/') {
            return Err(de::Error::custom(format!(
                "mount source {} is not an absolute path",
                go_quote(root)
            )));
        }
        if clean_absolute(root).is_none() {
            return Err(de::Error::custom(format!(
                "mount source {} climbs above /",
                go_quote(root)
            )));
        }
    }
    Ok(Some(roots))
}

/// The components of an absolute path after lexical cleaning, or `None`
/// if a `..` would climb above `/`. Go's `path.Clean` stops at `/`
/// instead; we refuse, since a source written that way is suspect.
fn clean_absolute(path: &str) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            name => parts.push(name),
        }
    }
    Some(parts)
}

/// Whether `source` lies at or below one of `roots`, by whole components,
/// so that `/opt/hooks2` is not below `/opt/hooks`.
fn source_permitted(source: &str, roots: &[String]) -> bool {
    let Some(source) = clean_absolute(source) else {
        return false;
    };
    roots.iter().any(|root| {
        root.starts_with('/') && clean_absolute(root).is_some_and(|r| source.starts_with(&r))
    })
}

/// Finds each plugin's entry once per request: a request names few
/// plugins but may record many changes by each.
struct Entries<'a> {
    entries: &'a [PluginPermissions],
    /// `idx-name` to `name`, from the plugins taking part.
    bare: HashMap<String, &'a str>,
    cache: HashMap<&'a str, Option<&'a PluginPermissions>>,
}

impl<'a> Entries<'a> {
    fn new(entries: &'a [PluginPermissions], plugins: &'a [PluginInstance]) -> Self {
        let bare = plugins
            .iter()
            .map(|p| (format!("{}-{}", p.index, p.name), p.name.as_str()))
            .collect();
        Self {
            entries,
            bare,
            cache: HashMap::new(),
        }
    }

    fn lookup(&mut self, plugin: &'a str) -> Option<&'a PluginPermissions> {
        if let Some(found) = self.cache.get(plugin) {
            return *found;
        }
        let bare = match self.bare.get(plugin) {
            Some(name) => *name,
            None => plugin.split_once('-').map_or(plugin, |(_, name)| name),
        };
        let listing = |name: &str| {
            self.entries
                .iter()
                .find(|e| e.plugins.iter().any(|p| p == name))
        };
        let found = listing(plugin)
            .or_else(|| listing(bare))
            .or_else(|| listing(ANY_PLUGIN));
        self.cache.insert(plugin, found);
        found
    }
}

/// One recorded change, ordered so that the first denied one is the same
/// whatever order the request's maps iterate in: the validated container
/// before others, then by container ID, field number, key and plugin.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Change<'a> {
    other_container: bool,
    container: &'a str,
    field: i32,
    key: Option<&'a str>,
    plugin: &'a str,
}

/// The permission check: `None` if every recorded change is allowed to
/// the plugin that made it and every mount source is within bounds.
pub(crate) fn check(
    entries: &[PluginPermissions],
    req: &ValidateContainerAdjustmentRequest,
) -> Option<Violation> {
    if entries.is_empty() {
        return None;
    }
    let mut lookup = Entries::new(entries, &req.plugins);
    check_kinds(&mut lookup, req).or_else(|| check_mount_sources(&mut lookup, req))
}

fn check_kinds<'a>(
    lookup: &mut Entries<'a>,
    req: &'a ValidateContainerAdjustmentRequest,
) -> Option<Violation> {
    let mut first: Option<Change<'a>> = None;
    let mut denied = 0usize;
    let ctr_id = req.container.id.as_str();
    for (container, owners) in &req.owners.owners {
        for change in changes(container, ctr_id, owners) {
            if permitted(lookup, &change) {
                continue;
            }
            denied += 1;
            if first.as_ref().is_none_or(|f| change < *f) {
                first = Some(change);
            }
        }
    }
    let first = first?;
    Some(Violation::NotPermitted {
        plugin: first.plugin.to_string(),
        container: first.other_container.then(|| first.container.to_string()),
        field: first.field,
        kind: kind_of(first.field),
        key: first.key.map(str::to_string),
        more: denied - 1,
    })
}

/// Every change recorded for one container, one per plugin: a clear
/// marker counts as a change by the plugin that cleared, and each plugin
/// in the OCI hooks' owner list made a change of its own.
fn changes<'a>(
    container: &'a str,
    ctr_id: &str,
    owners: &'a FieldOwners,
) -> impl Iterator<Item = Change<'a>> + 'a {
    let other_container = container != ctr_id;
    let change = move |field: i32, key: Option<&'a str>, plugin: &'a str| Change {
        other_container,
        container,
        field,
        key,
        plugin: marked_for_removal(plugin).unwrap_or(plugin),
    };
    let simple = owners.simple.iter().flat_map(move |(&field, owner)| {
        let plugins: Vec<&str> = if field == Field::OciHooks as i32 {
            owner.split(',').collect()
        } else {
            vec![owner.as_str()]
        };
        plugins.into_iter().map(move |p| change(field, None, p))
    });
    let compound = owners.compound.iter().flat_map(move |(&field, keys)| {
        keys.owners
            .iter()
            .map(move |(key, owner)| change(field, Some(key.as_str()), owner))
    });
    simple.chain(compound)
}

fn kind_of(field: i32) -> Option<PermissionKind> {
    Field::from_i32(field).and_then(permission_kind)
}

fn permitted<'a>(lookup: &mut Entries<'a>, change: &Change<'a>) -> bool {
    // A field this version cannot name has no kind anyone was granted.
    let Some(kind) = kind_of(change.field) else {
        return false;
    };
    lookup
        .lookup(change.plugin)
        .is_some_and(|entry| entry.allow.contains(&kind))
}

/// Checks the source of each mount the adjustment adds against the
/// `mountSources` of the plugin that owns its destination. Walking the
/// mounts (not the owners) visits each mount once and needs no index.
fn check_mount_sources<'a>(
    lookup: &mut Entries<'a>,
    req: &'a ValidateContainerAdjustmentRequest,
) -> Option<Violation> {
    let adjust = req.adjust.as_ref()?;
    let ctr_id = req.container.id.as_str();
    let mut first: Option<(&str, &Mount)> = None;
    let mut denied = 0usize;
    for mount in &adjust.mounts {
        // Removals name no source; other sources are not host paths.
        if marked_for_removal(&mount.destination).is_some() || !mount.source.starts_with('/') {
            continue;
        }
        // An unowned mount has nobody to check; the runtime claims every
        // mount it merges.
        let Some(owner) = req
            .owners
            .compound_owner(ctr_id, Field::Mounts, &mount.destination)
        else {
            continue;
        };
        let plugin = marked_for_removal(owner).unwrap_or(owner);
        // No entry, or no `mounts`: the kind check has already refused.
        let Some(roots) = lookup.lookup(plugin).and_then(|e| e.mount_sources.as_ref()) else {
            continue;
        };
        if !source_permitted(&mount.source, roots) {
            denied += 1;
            first.get_or_insert((plugin, mount));
        }
    }
    let (plugin, mount) = first?;
    Some(Violation::MountSourceNotPermitted {
        plugin: plugin.to_string(),
        destination: mount.destination.clone(),
        source: mount.source.clone(),
        more: denied - 1,
    })
}

/// The name of a field number, as the proto spells it, if this version
/// knows it.
pub fn field_name(field: i32) -> Option<String> {
    use protobuf::EnumFull;
    Field::from_i32(field).map(|f| f.descriptor().name().to_string())
}
