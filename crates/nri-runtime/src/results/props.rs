//! Property tests of the merge, on random replies from several plugins:
//!
//! * (a) the merged result equals a reference model that applies the
//!   replies one by one in index order, written for clarity, not speed
//!   (lists with linear searches, sorted maps, literal copies);
//! * (b) a conflict is found, and reported the same way, whatever order
//!   the replies' map entries come in;
//! * (c) the counted work (see `work.rs`) grows linearly with the replies.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use protobuf::{EnumFull, MessageField};

use super::scale::{work_of, Merge};
use super::*;
use nri_api::{
    Field, HugepageLimit, KeyValue, LinuxContainerUpdate, LinuxNamespace, LinuxNetDevice,
    LinuxPids, Mount, OptionalInt64, POSIXRlimit,
};

const PLUGINS: [&str; 3] = ["00-a", "10-b", "20-c"];

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// Random replies
// ---------------------------------------------------------------------------

/// A key from a small set, so that plugins often meet on the same key;
/// marked for removal one time in three.
fn key(prefix: &'static str) -> impl Strategy<Value = String> {
    (0..4u8, 0..3u8).prop_map(move |(k, remove)| {
        let key = format!("{prefix}{k}");
        if remove == 0 {
            format!("-{key}")
        } else {
            key
        }
    })
}

fn unmarked(prefix: &'static str) -> impl Strategy<Value = String> {
    (0..4u8).prop_map(move |k| format!("{prefix}{k}"))
}

fn value() -> impl Strategy<Value = String> {
    (0..3u8).prop_map(|v| format!("v{v}"))
}

/// One container update: memory limit, hugepage page sizes, unified keys.
#[derive(Debug, Clone)]
struct Upd {
    ctr: String,
    ignore_failure: bool,
    /// `None`: the update carries no resources at all.
    resources: Option<Res>,
}

/// The part of `LinuxResources` the model follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Res {
    limit: Option<i64>,
    hugepages: Vec<String>,
    unified: BTreeMap<String, String>,
    pids: Option<i64>,
}

fn res() -> impl Strategy<Value = Res> {
    (
        proptest::option::weighted(0.3, 1..4i64),
        proptest::collection::vec(unmarked("hp"), 0..2),
        proptest::collection::btree_map(unmarked("u"), value(), 0..2),
    )
        .prop_map(|(limit, hugepages, unified)| Res {
            limit,
            hugepages,
            unified,
            pids: None,
        })
}

fn upd(ctrs: &'static [&'static str]) -> impl Strategy<Value = Upd> {
    (
        proptest::sample::select(ctrs),
        any::<bool>(),
        proptest::option::weighted(0.9, res()),
    )
        .prop_map(|(ctr, ignore_failure, resources)| Upd {
            ctr: ctr.to_string(),
            ignore_failure,
            resources,
        })
}

/// One plugin's CreateContainer reply, in plain form.
#[derive(Debug, Clone, Default)]
struct Adj {
    annotations: Vec<(String, String)>,
    mounts: Vec<(String, String)>,
    env: Vec<(String, String)>,
    namespaces: Vec<(String, String)>,
    sysctl: Vec<(String, String)>,
    rlimits: Vec<String>,
    updates: Vec<Upd>,
}

fn pairs(prefix: &'static str, max: usize) -> impl Strategy<Value = Vec<(String, String)>> {
    proptest::collection::vec((key(prefix), value()), 0..max)
}

fn adj() -> impl Strategy<Value = Adj> {
    (
        pairs("a", 4),
        pairs("/m", 4),
        pairs("E", 4),
        pairs("ns", 4),
        pairs("s", 3),
        proptest::collection::vec(unmarked("R"), 0..2),
        // "c" is the container being created: updating it fails.
        proptest::collection::vec(upd(&["x", "y", "x", "y", "c"]), 0..3),
    )
        .prop_map(
            |(annotations, mounts, env, namespaces, sysctl, rlimits, updates)| Adj {
                annotations,
                mounts,
                env,
                namespaces,
                sysctl,
                rlimits,
                updates,
            },
        )
}

/// The container before any plugin: unmarked entries, namespaces with
/// duplicate types allowed.
#[derive(Debug, Clone, Default)]
struct Ctr {
    annotations: BTreeMap<String, String>,
    mounts: Vec<(String, String)>,
    env: Vec<String>,
    namespaces: Vec<(String, String)>,
}

fn ctr() -> impl Strategy<Value = Ctr> {
    (
        proptest::collection::btree_map(unmarked("a"), value(), 0..3),
        proptest::collection::vec((unmarked("/m"), value()), 0..3),
        proptest::collection::vec((unmarked("E"), value()), 0..3),
        proptest::collection::vec((unmarked("ns"), value()), 0..4),
    )
        .prop_map(|(annotations, mounts, env, namespaces)| Ctr {
            annotations,
            mounts,
            env: env.into_iter().map(|(k, v)| format!("{k}={v}")).collect(),
            namespaces,
        })
}

// ---------------------------------------------------------------------------
// Plain form to messages and back
// ---------------------------------------------------------------------------

fn to_map(pairs: &[(String, String)]) -> HashMap<String, String> {
    pairs.iter().cloned().collect()
}

fn to_resources(r: &Res) -> LinuxResources {
    let mut out = LinuxResources::default();
    if let Some(limit) = r.limit {
        out.memory.mut_or_insert_default().limit = MessageField::some(OptionalInt64 {
            value: limit,
            ..Default::default()
        });
    }
    out.hugepage_limits = r
        .hugepages
        .iter()
        .map(|page_size| HugepageLimit {
            page_size: page_size.clone(),
            limit: 1,
            ..Default::default()
        })
        .collect();
    out.unified = r.unified.clone().into_iter().collect();
    if let Some(limit) = r.pids {
        out.pids = MessageField::some(LinuxPids {
            limit,
            ..Default::default()
        });
    }
    out
}

fn from_resources(r: &LinuxResources) -> Res {
    Res {
        limit: r
            .memory
            .as_ref()
            .and_then(|m| m.limit.as_ref())
            .map(|l| l.value),
        hugepages: r
            .hugepage_limits
            .iter()
            .map(|h| h.page_size.clone())
            .collect(),
        unified: r.unified.clone().into_iter().collect(),
        pids: r.pids.as_ref().map(|p| p.limit),
    }
}

fn to_update(u: &Upd) -> ContainerUpdate {
    ContainerUpdate {
        container_id: u.ctr.clone(),
        ignore_failure: u.ignore_failure,
        linux: match &u.resources {
            None => MessageField::none(),
            Some(r) => MessageField::some(LinuxContainerUpdate {
                resources: MessageField::some(to_resources(r)),
                ..Default::default()
            }),
        },
        ..Default::default()
    }
}

/// An accumulated update in plain form: container, flag, resources.
type Merged = (String, bool, Res);

fn from_update(u: &ContainerUpdate) -> Merged {
    let resources = u
        .linux
        .as_ref()
        .and_then(|l| l.resources.as_ref())
        .map(from_resources)
        .unwrap_or_default();
    (u.container_id.clone(), u.ignore_failure, resources)
}

fn to_reply(a: &Adj) -> CreateContainerResponse {
    let linux = LinuxContainerAdjustment {
        namespaces: a
            .namespaces
            .iter()
            .map(|(type_, path)| LinuxNamespace {
                type_: type_.clone(),
                path: path.clone(),
                ..Default::default()
            })
            .collect(),
        sysctl: to_map(&a.sysctl),
        ..Default::default()
    };
    let adjust = ContainerAdjustment {
        annotations: to_map(&a.annotations),
        mounts: a
            .mounts
            .iter()
            .map(|(destination, source)| Mount {
                destination: destination.clone(),
                source: source.clone(),
                ..Default::default()
            })
            .collect(),
        env: a
            .env
            .iter()
            .map(|(key, value)| KeyValue {
                key: key.clone(),
                value: value.clone(),
                ..Default::default()
            })
            .collect(),
        rlimits: a
            .rlimits
            .iter()
            .map(|type_| POSIXRlimit {
                type_: type_.clone(),
                ..Default::default()
            })
            .collect(),
        linux: MessageField::some(linux),
        ..Default::default()
    };
    CreateContainerResponse {
        adjust: MessageField::some(adjust),
        update: a.updates.iter().map(to_update).collect(),
        ..Default::default()
    }
}

fn to_container(c: &Ctr) -> Container {
    let mut ctr = Container {
        id: "c".to_string(),
        annotations: c.annotations.clone().into_iter().collect(),
        mounts: c
            .mounts
            .iter()
            .map(|(destination, source)| Mount {
                destination: destination.clone(),
                source: source.clone(),
                ..Default::default()
            })
            .collect(),
        env: c.env.clone(),
        ..Default::default()
    };
    ctr.linux.mut_or_insert_default().namespaces = c
        .namespaces
        .iter()
        .map(|(type_, path)| LinuxNamespace {
            type_: type_.clone(),
            path: path.clone(),
            ..Default::default()
        })
        .collect();
    ctr
}

// ---------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------

/// Ownership as a plain list of ((container, field, key), owner); a simple
/// field has the key "".
#[derive(Debug, Default)]
struct Owners(Vec<((String, Field, String), String)>);

impl Owners {
    fn get(&self, ctr: &str, field: Field, key: &str) -> Option<&String> {
        self.0
            .iter()
            .find(|((c, f, k), _)| c == ctr && *f == field && k == key)
            .map(|(_, owner)| owner)
    }

    fn set(&mut self, ctr: &str, field: Field, key: &str, owner: String) {
        self.0
            .retain(|((c, f, k), _)| !(c == ctr && *f == field && k == key));
        self.0
            .push(((ctr.to_string(), field, key.to_string()), owner));
    }

    /// A claim fails on any owner but the claimant's own clear marker; the
    /// one to blame is the owner, or the plugin that cleared.
    fn claim(&mut self, ctr: &str, field: Field, key: &str, plugin: &str) -> Result<(), String> {
        if let Some(owner) = self.get(ctr, field, key) {
            if *owner != format!("-{plugin}") {
                let blamed = owner.strip_prefix('-').unwrap_or(owner);
                return Err(format!(
                    "plugins \"{plugin}\" and \"{blamed}\" both tried to set {} {key}",
                    field.descriptor().name()
                ));
            }
        }
        self.set(ctr, field, key, plugin.to_string());
        Ok(())
    }

    fn clear(&mut self, ctr: &str, field: Field, key: &str, plugin: &str) {
        self.set(ctr, field, key, format!("-{plugin}"));
    }
}

/// What the model computes: the container, the reply, the owners.
#[derive(Debug, Default)]
struct Model {
    owners: Owners,
    ctr: Ctr,
    ctr_sysctl: BTreeMap<String, String>,
    ctr_rlimits: Vec<String>,
    annotations: BTreeMap<String, String>,
    mounts: Vec<(String, String)>,
    env: Vec<(String, String)>,
    namespaces: Vec<(String, String)>,
    sysctl: BTreeMap<String, String>,
    rlimits: Vec<String>,
    updates: Vec<Merged>,
}

fn removal(key: &str) -> Option<&str> {
    key.strip_prefix('-')
}

impl Model {
    fn create(ctr: Ctr, replies: &[(&str, Adj)]) -> Result<Model, String> {
        let mut m = Model {
            ctr,
            ..Default::default()
        };
        for (plugin, adj) in replies {
            m.apply(plugin, adj)?;
        }
        Ok(m)
    }

    fn apply(&mut self, plugin: &str, adj: &Adj) -> Result<(), String> {
        let annotations: BTreeMap<_, _> = adj.annotations.iter().cloned().collect();
        let mut ctr_annotations = std::mem::take(&mut self.ctr.annotations);
        let mut reply = std::mem::take(&mut self.annotations);
        let done = self.map(
            plugin,
            Field::Annotations,
            annotations,
            &mut ctr_annotations,
            &mut reply,
        );
        self.ctr.annotations = ctr_annotations;
        self.annotations = reply;
        done?;
        self.mounts(plugin, &adj.mounts)?;
        self.env(plugin, &adj.env)?;
        self.namespaces(plugin, &adj.namespaces)?;
        let sysctl: BTreeMap<_, _> = adj.sysctl.iter().cloned().collect();
        let mut ctr_sysctl = std::mem::take(&mut self.ctr_sysctl);
        let mut reply = std::mem::take(&mut self.sysctl);
        let done = self.map(plugin, Field::Sysctl, sysctl, &mut ctr_sysctl, &mut reply);
        (self.ctr_sysctl, self.sysctl) = (ctr_sysctl, reply);
        done?;
        for rlimit in &adj.rlimits {
            self.owners.claim("c", Field::Rlimits, rlimit, plugin)?;
            self.ctr_rlimits.push(rlimit.clone());
            self.rlimits.push(rlimit.clone());
        }
        for u in &adj.updates {
            if u.ctr == "c" {
                return Err(format!(
                    "plugin \"{plugin}\" asked update of \"c\" during creation"
                ));
            }
            let at = match self.updates.iter().position(|(c, ..)| *c == u.ctr) {
                Some(at) => at,
                None => {
                    self.updates
                        .push((u.ctr.clone(), u.ignore_failure, Res::default()));
                    self.updates.len() - 1
                }
            };
            self.updates[at].1 &= u.ignore_failure;
            let Some(new) = &u.resources else { continue };
            let base = self.updates[at].2.clone();
            match update_copy(&mut self.owners, &u.ctr, plugin, base, new) {
                Ok(copy) => self.updates[at].2 = copy,
                Err(e) if !u.ignore_failure => return Err(e),
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// `-k` removes k; only together with k in the same reply does it clear
    /// k's owner, delete k from the container and leave its marker before
    /// the new value. A lone removal only leaves its marker (in `lone`, by
    /// default the reply). Sets go in key order.
    fn map(
        &mut self,
        plugin: &str,
        field: Field,
        incoming: BTreeMap<String, String>,
        ctr: &mut BTreeMap<String, String>,
        reply: &mut BTreeMap<String, String>,
    ) -> Result<(), String> {
        let mut removed: BTreeSet<String> = incoming
            .keys()
            .filter_map(|k| removal(k))
            .map(str::to_string)
            .collect();
        for (k, v) in incoming.iter().filter(|(k, _)| removal(k).is_none()) {
            if removed.remove(k) {
                self.owners.clear("c", field, k, plugin);
                ctr.remove(k);
                reply.insert(format!("-{k}"), String::new());
            }
            self.owners.claim("c", field, k, plugin)?;
            ctr.insert(k.clone(), v.clone());
            reply.insert(k.clone(), v.clone());
        }
        for k in removed {
            reply.insert(format!("-{k}"), String::new());
        }
        Ok(())
    }

    /// Keyed lists: removed keys leave the reply (clearing their owners);
    /// removed and re-set keys leave the container; additions are claimed,
    /// then appended to both. Returns the additions.
    fn list_edit<C>(
        owners: &mut Owners,
        plugin: &str,
        field: Field,
        items: &[(String, String)],
        reply: &mut Vec<(String, String)>,
        ctr: &mut Vec<C>,
        ctr_key: impl Fn(&C) -> &str,
    ) -> Result<Vec<(String, String)>, String> {
        let removed: Vec<&str> = items.iter().filter_map(|(k, _)| removal(k)).collect();
        let adds: Vec<(String, String)> = items
            .iter()
            .filter(|(k, _)| removal(k).is_none())
            .cloned()
            .collect();
        reply.retain(|(k, _)| {
            let drop = removed.contains(&k.as_str());
            if drop {
                owners.clear("c", field, k, plugin);
            }
            !drop
        });
        ctr.retain(|c| {
            let k = ctr_key(c);
            !removed.contains(&k) && !adds.iter().any(|(a, _)| a == k)
        });
        for (k, _) in &adds {
            owners.claim("c", field, k, plugin)?;
        }
        reply.extend(adds.iter().cloned());
        Ok(adds)
    }

    fn mounts(&mut self, plugin: &str, items: &[(String, String)]) -> Result<(), String> {
        if items.is_empty() {
            return Ok(());
        }
        let adds = Self::list_edit(
            &mut self.owners,
            plugin,
            Field::Mounts,
            items,
            &mut self.mounts,
            &mut self.ctr.mounts,
            |(k, _)| k,
        )?;
        self.ctr.mounts.extend(adds.iter().cloned());
        // Markers of keys not re-added: one per key, at its first marker's
        // position, with its last marker's value.
        let mut markers: Vec<(String, String)> = Vec::new();
        for (k, v) in items {
            let Some(unmarked) = removal(k) else { continue };
            if adds.iter().any(|(a, _)| a == unmarked) {
                continue;
            }
            match markers.iter_mut().find(|(m, _)| m == k) {
                Some(marker) => marker.1 = v.clone(),
                None => markers.push((k.clone(), v.clone())),
            }
        }
        self.mounts.extend(markers);
        Ok(())
    }

    fn env(&mut self, plugin: &str, items: &[(String, String)]) -> Result<(), String> {
        if items.is_empty() {
            return Ok(());
        }
        let adds = Self::list_edit(
            &mut self.owners,
            plugin,
            Field::Env,
            items,
            &mut self.env,
            &mut self.ctr.env,
            |e| e.split('=').next().unwrap_or_default(),
        )?;
        self.ctr
            .env
            .extend(adds.iter().map(|(k, v)| format!("{k}={v}")));
        Ok(())
    }

    fn namespaces(&mut self, plugin: &str, items: &[(String, String)]) -> Result<(), String> {
        if items.is_empty() {
            return Ok(());
        }
        let upsert = |list: &mut Vec<(String, String)>, ns: (String, String)| match list
            .iter_mut()
            .find(|(t, _)| *t == ns.0)
        {
            Some(existing) => *existing = ns,
            None => list.push(ns),
        };
        let mut list = Vec::new();
        for ns in std::mem::take(&mut self.ctr.namespaces) {
            upsert(&mut list, ns);
        }
        let mut outcome = Ok(());
        for (type_, path) in items {
            match removal(type_) {
                Some(kind) => {
                    outcome = self.owners.claim("c", Field::Namespace, kind, plugin);
                    if outcome.is_err() {
                        break;
                    }
                    list.retain(|(t, _)| t != kind);
                }
                None => {
                    outcome = self.owners.claim("c", Field::Namespace, type_, plugin);
                    if outcome.is_err() {
                        break;
                    }
                    upsert(&mut list, (type_.clone(), path.clone()));
                }
            }
            self.namespaces.push((type_.clone(), path.clone()));
        }
        self.ctr.namespaces = list;
        outcome
    }
}

/// Upstream's update merge: on a copy of `base`, claiming as it goes; the
/// copy is kept only if every claim succeeds.
fn update_copy(
    owners: &mut Owners,
    ctr: &str,
    plugin: &str,
    base: Res,
    new: &Res,
) -> Result<Res, String> {
    let mut copy = base;
    if let Some(limit) = new.limit {
        owners.claim(ctr, Field::MemLimit, "", plugin)?;
        copy.limit = Some(limit);
    }
    for hp in &new.hugepages {
        owners.claim(ctr, Field::HugepageLimits, hp, plugin)?;
        copy.hugepages.push(hp.clone());
    }
    for (k, v) in &new.unified {
        owners.claim(ctr, Field::CgroupsUnified, k, plugin)?;
        copy.unified.insert(k.clone(), v.clone());
    }
    if copy.pids.is_some() {
        owners.claim(ctr, Field::PidsLimit, "", plugin)?;
    }
    Ok(copy)
}

/// Every ownership record of the model is the real one, and the real one
/// has no others.
fn same_owners(model: &Owners, real: &OwningPlugins) -> Result<(), TestCaseError> {
    const COMPOUND: [Field; 8] = [
        Field::Annotations,
        Field::Mounts,
        Field::Env,
        Field::Namespace,
        Field::Sysctl,
        Field::Rlimits,
        Field::HugepageLimits,
        Field::CgroupsUnified,
    ];
    for ((ctr, field, key), owner) in &model.0 {
        let got = if COMPOUND.contains(field) {
            real.compound_owner(ctr, *field, key)
        } else {
            real.simple_owner(ctr, *field)
        };
        prop_assert_eq!(got, Some(owner.as_str()), "{} {:?} {}", ctr, field, key);
    }
    for ctr in ["c", "t", "x", "y"] {
        for field in COMPOUND {
            let model_count = model
                .0
                .iter()
                .filter(|((c, f, _), _)| c == ctr && *f == field)
                .count();
            prop_assert_eq!(real.compound_owners(ctr, field).count(), model_count);
        }
        for field in [Field::MemLimit, Field::PidsLimit] {
            let model_owner = model.get(ctr, field, "").map(String::as_str);
            prop_assert_eq!(real.simple_owner(ctr, field), model_owner);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// (a) The merge equals the model
// ---------------------------------------------------------------------------

fn plugins_and_adjs() -> impl Strategy<Value = Vec<Adj>> {
    proptest::collection::vec(adj(), 1..=PLUGINS.len())
}

fn pairs_of<V: Clone>(
    map: &HashMap<String, V>,
    f: impl Fn(&V) -> String,
) -> BTreeMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), f(v))).collect()
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn create_merge_equals_the_model(ctr in ctr(), adjs in plugins_and_adjs()) {
        let replies: Vec<(&str, Adj)> = PLUGINS.iter().copied().zip(adjs).collect();
        let expected = Model::create(ctr.clone(), &replies);

        let mut req = CreateContainerRequest {
            container: MessageField::some(to_container(&ctr)),
            ..Default::default()
        };
        let mut result = CreateResult::new(&mut req);
        let outcome = replies
            .iter()
            .try_for_each(|(plugin, adj)| result.apply(&mut req, plugin, to_reply(adj)));

        let m = match (expected, outcome) {
            (Err(want), Err(got)) => {
                prop_assert_eq!(got.to_string(), want);
                return Ok(());
            }
            (Ok(m), Ok(())) => m,
            (want, got) => {
                return Err(TestCaseError::fail(format!("model {want:?}, merge {got:?}")));
            }
        };
        same_owners(&m.owners, result.owners())?;

        let c = &req.container;
        prop_assert_eq!(pairs_of(&c.annotations, String::clone), m.ctr.annotations);
        let mounts: Vec<_> = c.mounts.iter().map(|x| (x.destination.clone(), x.source.clone())).collect();
        prop_assert_eq!(mounts, m.ctr.mounts);
        prop_assert_eq!(&c.env, &m.ctr.env);
        let namespaces: Vec<_> = c.linux.namespaces.iter().map(|n| (n.type_.clone(), n.path.clone())).collect();
        prop_assert_eq!(namespaces, m.ctr.namespaces);
        prop_assert_eq!(pairs_of(&c.linux.sysctl, String::clone), m.ctr_sysctl);
        let rlimits: Vec<_> = c.rlimits.iter().map(|r| r.type_.clone()).collect();
        prop_assert_eq!(rlimits, m.ctr_rlimits);

        let rpl = result.into_response();
        let a = &rpl.adjust;
        prop_assert_eq!(pairs_of(&a.annotations, String::clone), m.annotations);
        let mounts: Vec<_> = a.mounts.iter().map(|x| (x.destination.clone(), x.source.clone())).collect();
        prop_assert_eq!(mounts, m.mounts);
        let env: Vec<_> = a.env.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
        prop_assert_eq!(env, m.env);
        let namespaces: Vec<_> = a.linux.namespaces.iter().map(|n| (n.type_.clone(), n.path.clone())).collect();
        prop_assert_eq!(namespaces, m.namespaces);
        prop_assert_eq!(pairs_of(&a.linux.sysctl, String::clone), m.sysctl);
        let rlimits: Vec<_> = a.rlimits.iter().map(|r| r.type_.clone()).collect();
        prop_assert_eq!(rlimits, m.rlimits);
        let updates: Vec<_> = rpl.update.iter().map(from_update).collect();
        prop_assert_eq!(updates, m.updates);
    }

    /// UpdateContainer of "t": its updates start from the request's
    /// resources and replace them on success; the reply lists the others
    /// in first-seen order, then the target's merged update.
    #[test]
    fn update_merge_equals_the_model(
        request in res(),
        pids in proptest::option::weighted(0.3, 1..9i64),
        replies in proptest::collection::vec(
            proptest::collection::vec(upd(&["t", "x", "t", "y"]), 0..4), 1..=PLUGINS.len()),
    ) {
        let request = Res { pids, ..request };
        // The model.
        let mut owners = Owners::default();
        let mut base = request.clone();
        let mut target: Option<Merged> = None;
        let mut others: Vec<Merged> = Vec::new();
        let mut failure = None;
        'plugins: for (plugin, updates) in PLUGINS.iter().zip(&replies) {
            for u in updates {
                let entry = if u.ctr == "t" {
                    target.get_or_insert_with(|| ("t".to_string(), u.ignore_failure, Res::default()))
                } else {
                    let at = match others.iter().position(|(c, ..)| *c == u.ctr) {
                        Some(at) => at,
                        None => {
                            others.push((u.ctr.clone(), u.ignore_failure, Res::default()));
                            others.len() - 1
                        }
                    };
                    &mut others[at]
                };
                entry.1 &= u.ignore_failure;
                let Some(new) = &u.resources else { continue };
                let from = if u.ctr == "t" { base.clone() } else { entry.2.clone() };
                match update_copy(&mut owners, &u.ctr, plugin, from, new) {
                    Ok(copy) => {
                        if u.ctr == "t" {
                            base = copy.clone();
                        }
                        entry.2 = copy;
                    }
                    Err(e) if !u.ignore_failure => {
                        failure = Some(e);
                        break 'plugins;
                    }
                    Err(_) => {}
                }
            }
        }

        // The merge.
        let mut req = UpdateContainerRequest {
            container: MessageField::some(Container { id: "t".to_string(), ..Default::default() }),
            linux_resources: MessageField::some(to_resources(&request)),
            ..Default::default()
        };
        let mut result = UpdateResult::new(&mut req);
        let outcome = PLUGINS.iter().zip(&replies).try_for_each(|(plugin, updates)| {
            let rpl = UpdateContainerResponse {
                update: updates.iter().map(to_update).collect(),
                ..Default::default()
            };
            result.apply(&mut req, plugin, rpl)
        });
        match (failure, outcome) {
            (Some(want), Err(got)) => {
                prop_assert_eq!(got.to_string(), want);
                return Ok(());
            }
            (None, Ok(())) => {}
            (want, got) => return Err(TestCaseError::fail(format!("model {want:?}, merge {got:?}"))),
        }
        same_owners(&owners, result.owners())?;
        prop_assert_eq!(from_resources(&req.linux_resources), base);
        let mut got: Vec<_> = result.into_response().update.iter().map(from_update).collect();
        let last = got.pop();
        prop_assert_eq!(got, others);
        let last = last.filter(|(id, ..)| !id.is_empty());
        prop_assert_eq!(last, target);
    }
}

// ---------------------------------------------------------------------------
// (b) Conflicts, whatever the order of map entries
// ---------------------------------------------------------------------------

/// Per plugin, the keys it sets in annotations, unified, sysctl and
/// network devices (the merge's order of these fields).
type MapKeys = Vec<[BTreeSet<String>; 4]>;

const MAP_FIELDS: [Field; 4] = [
    Field::Annotations,
    Field::CgroupsUnified,
    Field::Sysctl,
    Field::LinuxNetDevices,
];

fn map_keys() -> impl Strategy<Value = MapKeys> {
    let keys = || proptest::collection::btree_set(unmarked("k"), 0..4);
    proptest::collection::vec([keys(), keys(), keys(), keys()], 2..=PLUGINS.len())
}

/// The reply of plugin `p`, its map entries inserted in the order `order`
/// gives (each map is also built anew, with its own random hasher).
fn map_reply(keys: &[BTreeSet<String>; 4], order: &[u32]) -> CreateContainerResponse {
    let shuffled = |set: &BTreeSet<String>| {
        let mut keys: Vec<(u32, &String)> = set
            .iter()
            .enumerate()
            .map(|(i, k)| (order[i % order.len()], k))
            .collect();
        keys.sort();
        keys.into_iter().map(|(_, k)| k.clone()).collect::<Vec<_>>()
    };
    let resources = LinuxResources {
        unified: shuffled(&keys[1])
            .into_iter()
            .map(|k| (k, "1".to_string()))
            .collect(),
        ..Default::default()
    };
    let linux = LinuxContainerAdjustment {
        resources: MessageField::some(resources),
        sysctl: shuffled(&keys[2])
            .into_iter()
            .map(|k| (k, "1".to_string()))
            .collect(),
        net_devices: shuffled(&keys[3])
            .into_iter()
            .map(|k| (k, LinuxNetDevice::default()))
            .collect(),
        ..Default::default()
    };
    CreateContainerResponse {
        adjust: MessageField::some(ContainerAdjustment {
            annotations: shuffled(&keys[0])
                .into_iter()
                .map(|k| (k, "v".to_string()))
                .collect(),
            linux: MessageField::some(linux),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The first conflict in merge order: plugins in index order, fields in
/// the merge's order, keys sorted; blamed is the earlier plugin that set
/// the key.
fn first_conflict(keys: &MapKeys) -> Option<String> {
    for (p, fields) in keys.iter().enumerate() {
        for (f, set) in fields.iter().enumerate() {
            for key in set {
                if let Some(owner) = keys[..p]
                    .iter()
                    .position(|earlier| earlier[f].contains(key))
                {
                    return Some(format!(
                        "plugins \"{}\" and \"{}\" both tried to set {} {key}",
                        PLUGINS[p],
                        PLUGINS[owner],
                        MAP_FIELDS[f].descriptor().name()
                    ));
                }
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(config(300))]

    /// One plugin's merge into a stand-in that only its reply reads (as
    /// one plugin without validators is merged) answers as its merge into
    /// the container itself.
    #[test]
    fn a_merge_read_by_its_reply_only_answers_the_same(ctr in ctr(), adj in adj()) {
        let mut req = CreateContainerRequest {
            container: MessageField::some(to_container(&ctr)),
            ..Default::default()
        };
        let mut result = CreateResult::new(&mut req);
        let full = result
            .apply(&mut req, PLUGINS[0], to_reply(&adj))
            .map(|()| result.into_response());

        let mut stand_in = CreateResult::stand_in(req.container.id.clone());
        let mut result = CreateResult::new(&mut stand_in);
        result.read_by_reply_only();
        let short = result
            .apply(&mut stand_in, PLUGINS[0], to_reply(&adj))
            .map(|()| result.into_response());

        match (full, short) {
            (Ok(want), Ok(got)) => prop_assert_eq!(got, want),
            (Err(want), Err(got)) => prop_assert_eq!(got.to_string(), want.to_string()),
            (want, got) => {
                return Err(TestCaseError::fail(format!("full {want:?}, reply only {got:?}")));
            }
        }
    }
}

proptest! {
    #![proptest_config(config(150))]

    #[test]
    fn conflicts_do_not_depend_on_map_order(
        keys in map_keys(),
        orders in proptest::collection::vec(proptest::collection::vec(any::<u32>(), 1..6), 4),
    ) {
        let want = first_conflict(&keys);
        for order in &orders {
            let mut req = CreateContainerRequest {
                container: MessageField::some(Container { id: "c".to_string(), ..Default::default() }),
                ..Default::default()
            };
            let mut result = CreateResult::new(&mut req);
            let outcome = PLUGINS.iter().zip(&keys).try_for_each(|(plugin, keys)| {
                result.apply(&mut req, plugin, map_reply(keys, order))
            });
            prop_assert_eq!(outcome.err().map(|e| e.to_string()), want.clone());
        }
    }
}

// ---------------------------------------------------------------------------
// (c) Work grows linearly
// ---------------------------------------------------------------------------

/// How many entries per unit of size a random reply has of each repeated
/// field, and whether it also removes as many of the container's.
#[derive(Debug, Clone)]
struct Shape {
    per_field: [usize; 9],
    removes: bool,
    plugins: usize,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        proptest::array::uniform9(0..3usize),
        any::<bool>(),
        1..=PLUGINS.len(),
    )
        .prop_map(|(per_field, removes, plugins)| Shape {
            per_field,
            removes,
            plugins,
        })
}

/// A CreateContainer merge of `shape` at size `n`: distinct keys
/// everywhere, so it never conflicts.
fn shaped(shape: &Shape, n: usize) -> Merge {
    let [annotations, mounts, env, namespaces, sysctl, unified, hugepages, rlimits, updates] =
        shape.per_field.map(|k| k * n);
    let mut ctr = Ctr::default();
    let keys = |prefix: &str, count: usize| -> Vec<String> {
        (0..count).map(|i| format!("{prefix}{i}")).collect()
    };
    if shape.removes {
        ctr.mounts = keys("/old", mounts)
            .into_iter()
            .map(|k| (k, "s".into()))
            .collect();
        ctr.env = keys("OLD", env)
            .into_iter()
            .map(|k| format!("{k}=x"))
            .collect();
        ctr.namespaces = keys("old", namespaces)
            .into_iter()
            .map(|k| (k, "p".into()))
            .collect();
    }
    let replies = PLUGINS[..shape.plugins]
        .iter()
        .map(|plugin| {
            let own = |prefix: &str, count: usize| keys(&format!("{plugin}{prefix}"), count);
            let with_removals = |prefix: &str, old: &str, count: usize| {
                let mut items: Vec<(String, String)> = own(prefix, count)
                    .into_iter()
                    .map(|k| (k, "v".into()))
                    .collect();
                if shape.removes && *plugin == PLUGINS[0] {
                    items.extend(
                        keys(old, count)
                            .into_iter()
                            .map(|k| (format!("-{k}"), "v".into())),
                    );
                }
                items
            };
            let adj = Adj {
                annotations: own("a", annotations)
                    .into_iter()
                    .map(|k| (k, "v".into()))
                    .collect(),
                mounts: with_removals("/m", "/old", mounts),
                env: with_removals("E", "OLD", env),
                namespaces: with_removals("ns", "old", namespaces),
                sysctl: own("s", sysctl)
                    .into_iter()
                    .map(|k| (k, "1".into()))
                    .collect(),
                rlimits: own("R", rlimits),
                updates: own("ctr", updates)
                    .into_iter()
                    .map(|ctr| Upd {
                        ctr,
                        ignore_failure: false,
                        resources: Some(Res::default()),
                    })
                    .collect(),
            };
            let mut rpl = to_reply(&adj);
            let resources = rpl
                .adjust
                .mut_or_insert_default()
                .linux
                .mut_or_insert_default()
                .resources
                .mut_or_insert_default();
            *resources = to_resources(&Res {
                hugepages: own("hp", hugepages),
                unified: own("u", unified)
                    .into_iter()
                    .map(|k| (k, "1".into()))
                    .collect(),
                ..Default::default()
            });
            (plugin.to_string(), rpl)
        })
        .collect();
    let req = CreateContainerRequest {
        container: MessageField::some(to_container(&ctr)),
        ..Default::default()
    };
    Merge::Create(req, replies)
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn work_grows_linearly(shape in shape(), n in 100..400usize) {
        let small = work_of(shaped(&shape, n));
        let large = work_of(shaped(&shape, 4 * n));
        for (what, s, l) in [
            ("steps", small.steps, large.steps),
            ("allocations", small.allocs, large.allocs),
            ("bytes", small.bytes, large.bytes),
        ] {
            prop_assert!(l <= 6 * s.max(1), "{}: {} at n={}, {} at 4n", what, s, n, l);
        }
    }
}
