//! Which plugin set which part of a container.
//!
//! While the runtime merges plugin replies for one event it records, per
//! container, which plugin claimed each field ([`Field`]). A field is
//! *simple* (one owner, e.g. the memory limit) or *compound* (one owner per
//! key, e.g. per annotation or per mount destination). Validating plugins
//! get the result, an [`OwningPlugins`], to decide whom to blame.
//!
//! The rules are upstream's (`pkg/api/owners.go`):
//!
//! * a claim fails if the field or key already has **any** owner, even the
//!   claiming plugin itself, so one reply setting the same key twice is a
//!   conflict;
//! * the one exception is an owner that is the clear marker `-<plugin>`
//!   left by the claimant: removing and then setting in the same reply is
//!   how a plugin overrides another one;
//! * clearing always succeeds and leaves that marker, so after plugin P
//!   cleared a field any other plugin's claim conflicts with P;
//! * OCI hooks never conflict: their owner accumulates as `a,b,c`.

use std::collections::hash_map::Entry;
use std::fmt;

use protobuf::EnumFull;

use super::quote::go_quote;
use super::removal::{mark_for_removal, marked_for_removal};
use super::{CompoundFieldOwners, Field, FieldOwners, OwningPlugins};

/// Two plugins (or one plugin twice) tried to set the same field or key.
///
/// The message is upstream's, byte for byte:
/// `plugins "<claimant>" and "<owner>" both tried to set <Field> <key>`,
/// where a simple field has an empty key and so leaves a trailing space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictError {
    field: Field,
    key: Option<String>,
    claimant: String,
    owner: String,
}

impl ConflictError {
    /// The contested field.
    pub fn field(&self) -> Field {
        self.field
    }

    /// The contested key of a compound field; `None` for simple fields.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The plugin whose claim failed.
    pub fn claimant(&self) -> &str {
        &self.claimant
    }

    /// The plugin that set (or cleared) the field before.
    pub fn owner(&self) -> &str {
        &self.owner
    }
}

impl fmt::Display for ConflictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "plugins {} and {} both tried to set {} {}",
            go_quote(&self.claimant),
            go_quote(&self.owner),
            self.field.descriptor().name(),
            self.key.as_deref().unwrap_or_default(),
        )
    }
}

impl std::error::Error for ConflictError {}

/// Checks a claim by `plugin` against the `current` owner, if any.
///
/// Returns the plugin to blame: the owner itself, or the plugin that left
/// a clear marker, unless that plugin is the claimant.
fn conflicting_owner<'a>(current: Option<&'a str>, plugin: &str) -> Option<&'a str> {
    let owner = current?;
    match marked_for_removal(owner) {
        Some(clearer) if clearer == plugin => None,
        Some(clearer) => Some(clearer),
        None => Some(owner),
    }
}

impl FieldOwners {
    /// Records `plugin` as the owner of a simple field.
    pub fn claim_simple(&mut self, field: Field, plugin: &str) -> Result<(), ConflictError> {
        let key = field as i32;
        if let Some(owner) = conflicting_owner(self.simple.get(&key).map(String::as_str), plugin) {
            return Err(ConflictError {
                field,
                key: None,
                claimant: plugin.to_string(),
                owner: owner.to_string(),
            });
        }
        self.simple.insert(key, plugin.to_string());
        Ok(())
    }

    /// Records `plugin` as the owner of `key` of a compound field.
    pub fn claim_compound(
        &mut self,
        field: Field,
        key: &str,
        plugin: &str,
    ) -> Result<(), ConflictError> {
        self.claim_compound_keys(field, [key], plugin)
    }

    /// [`claim_compound`](Self::claim_compound) for several keys of one
    /// field, in order, stopping at the first conflict; the field's owners
    /// are looked up once.
    pub fn claim_compound_keys<'k>(
        &mut self,
        field: Field,
        keys: impl IntoIterator<Item = &'k str>,
        plugin: &str,
    ) -> Result<(), ConflictError> {
        let mut keys = keys.into_iter().peekable();
        if keys.peek().is_none() {
            // Nothing claimed leaves no trace in the owners.
            return Ok(());
        }
        let owners = &mut self.compound.entry(field as i32).or_default().owners;
        for key in keys {
            // One lookup: a key is most often claimed once.
            match owners.entry(key.to_string()) {
                Entry::Vacant(v) => {
                    v.insert(plugin.to_string());
                }
                Entry::Occupied(mut o) => {
                    if let Some(owner) = conflicting_owner(Some(o.get()), plugin) {
                        return Err(ConflictError {
                            field,
                            key: Some(key.to_string()),
                            claimant: plugin.to_string(),
                            owner: owner.to_string(),
                        });
                    }
                    o.insert(plugin.to_string());
                }
            }
        }
        Ok(())
    }

    /// Whether any key of a compound field has an owner (or a clear
    /// marker): only then can a claim on it conflict.
    pub fn any_compound_owner(&self, field: Field) -> bool {
        self.compound
            .get(&(field as i32))
            .is_some_and(|c| !c.owners.is_empty())
    }

    /// Makes room for `additional` more keys of a compound field, so that
    /// claiming a large reply's keys does not grow the map step by step.
    pub fn reserve_compound(&mut self, field: Field, additional: usize) {
        self.compound
            .entry(field as i32)
            .or_default()
            .owners
            .reserve(additional);
    }

    /// Leaves the clear marker of `plugin` on a simple field, whoever owned it.
    pub fn clear_simple(&mut self, field: Field, plugin: &str) {
        self.simple.insert(field as i32, mark_for_removal(plugin));
    }

    /// Leaves the clear marker of `plugin` on `key` of a compound field.
    pub fn clear_compound(&mut self, field: Field, key: &str, plugin: &str) {
        self.compound
            .entry(field as i32)
            .or_default()
            .owners
            .insert(key.to_string(), mark_for_removal(plugin));
    }

    /// Adds `plugin` to the owners of the OCI hooks; never conflicts.
    pub fn claim_hooks(&mut self, plugin: &str) {
        let key = Field::OciHooks as i32;
        let owners = match self.simple.get(&key) {
            Some(earlier) => format!("{earlier},{plugin}"),
            None => plugin.to_string(),
        };
        self.simple.insert(key, owners);
    }

    /// Clears all three RDT fields, as a `remove` of the RDT settings does.
    pub fn clear_rdt(&mut self, plugin: &str) {
        for field in [
            Field::RdtClosID,
            Field::RdtSchemata,
            Field::RdtEnableMonitoring,
        ] {
            self.clear_simple(field, plugin);
        }
    }

    /// The owner of a simple field: a plugin name, `-<plugin>` if that plugin
    /// cleared it, or `a,b` for the OCI hooks.
    pub fn simple_owner(&self, field: Field) -> Option<&str> {
        self.simple.get(&(field as i32)).map(String::as_str)
    }

    /// The owner of `key` of a compound field.
    pub fn compound_owner(&self, field: Field, key: &str) -> Option<&str> {
        self.compound
            .get(&(field as i32))?
            .owners
            .get(key)
            .map(String::as_str)
    }

    /// Every owned key of a compound field with its owner, in no order.
    pub fn compound_owners(&self, field: Field) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.compound
            .get(&(field as i32))
            .into_iter()
            .flat_map(|c: &CompoundFieldOwners| &c.owners)
            .map(|(key, owner)| (key.as_str(), owner.as_str()))
    }
}

/// The per-container view: every method takes the container ID first and
/// otherwise works like the [`FieldOwners`] method of the same name.
impl OwningPlugins {
    fn container_mut(&mut self, ctr_id: &str) -> &mut FieldOwners {
        self.owners.entry(ctr_id.to_string()).or_default()
    }

    /// The owners recorded for one container.
    pub fn container(&self, ctr_id: &str) -> Option<&FieldOwners> {
        self.owners.get(ctr_id)
    }

    pub fn claim_simple(
        &mut self,
        ctr_id: &str,
        field: Field,
        plugin: &str,
    ) -> Result<(), ConflictError> {
        self.container_mut(ctr_id).claim_simple(field, plugin)
    }

    pub fn claim_compound(
        &mut self,
        ctr_id: &str,
        field: Field,
        key: &str,
        plugin: &str,
    ) -> Result<(), ConflictError> {
        self.container_mut(ctr_id)
            .claim_compound(field, key, plugin)
    }

    pub fn claim_compound_keys<'k>(
        &mut self,
        ctr_id: &str,
        field: Field,
        keys: impl IntoIterator<Item = &'k str>,
        plugin: &str,
    ) -> Result<(), ConflictError> {
        let mut keys = keys.into_iter().peekable();
        if keys.peek().is_none() {
            return Ok(());
        }
        self.container_mut(ctr_id)
            .claim_compound_keys(field, keys, plugin)
    }

    pub fn clear_simple(&mut self, ctr_id: &str, field: Field, plugin: &str) {
        self.container_mut(ctr_id).clear_simple(field, plugin)
    }

    pub fn clear_compound(&mut self, ctr_id: &str, field: Field, key: &str, plugin: &str) {
        self.container_mut(ctr_id)
            .clear_compound(field, key, plugin)
    }

    pub fn any_compound_owner(&self, ctr_id: &str, field: Field) -> bool {
        self.container(ctr_id)
            .is_some_and(|owners| owners.any_compound_owner(field))
    }

    pub fn reserve_compound(&mut self, ctr_id: &str, field: Field, additional: usize) {
        self.container_mut(ctr_id)
            .reserve_compound(field, additional)
    }

    pub fn claim_hooks(&mut self, ctr_id: &str, plugin: &str) {
        self.container_mut(ctr_id).claim_hooks(plugin)
    }

    pub fn clear_rdt(&mut self, ctr_id: &str, plugin: &str) {
        self.container_mut(ctr_id).clear_rdt(plugin)
    }

    pub fn simple_owner(&self, ctr_id: &str, field: Field) -> Option<&str> {
        self.container(ctr_id)?.simple_owner(field)
    }

    pub fn compound_owner(&self, ctr_id: &str, field: Field, key: &str) -> Option<&str> {
        self.container(ctr_id)?.compound_owner(field, key)
    }

    pub fn compound_owners(
        &self,
        ctr_id: &str,
        field: Field,
    ) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.container(ctr_id)
            .into_iter()
            .flat_map(move |owners| owners.compound_owners(field))
    }

    /// The comma-separated plugins that injected OCI hooks.
    pub fn hooks_owner(&self, ctr_id: &str) -> Option<&str> {
        self.simple_owner(ctr_id, Field::OciHooks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(err: ConflictError) -> String {
        err.to_string()
    }

    // The cases of upstream's TestSimpleClaims.
    #[test]
    fn simple_claims() {
        let mut o = OwningPlugins::default();
        o.claim_hooks("ctr0", "test0");
        o.claim_simple("ctr0", Field::MemLimit, "test0").unwrap();
        o.claim_simple("ctr1", Field::MemLimit, "test0").unwrap();
        let err = o
            .claim_simple("ctr0", Field::MemLimit, "test1")
            .unwrap_err();
        assert_eq!(
            message(err),
            r#"plugins "test1" and "test0" both tried to set MemLimit "#
        );

        o.claim_simple("ctr0", Field::CPUShares, "test0").unwrap();
        o.claim_simple("ctr1", Field::CPUShares, "test0").unwrap();
        assert!(o.claim_simple("ctr0", Field::CPUShares, "test1").is_err());

        o.claim_simple("ctr0", Field::Args, "test0").unwrap();
        assert!(o.claim_simple("ctr0", Field::Args, "test1").is_err());
        o.clear_simple("ctr0", Field::Args, "test1");
        o.claim_simple("ctr0", Field::Args, "test1").unwrap();
        o.clear_simple("ctr0", Field::Args, "test1");
        let err = o.claim_simple("ctr0", Field::Args, "test0").unwrap_err();
        assert_eq!(err.owner(), "test1", "the clearer is blamed");
        assert_eq!(
            message(err),
            r#"plugins "test0" and "test1" both tried to set Args "#
        );
    }

    // The cases of upstream's TestCompoundClaims.
    #[test]
    fn compound_claims() {
        let mut o = OwningPlugins::default();
        o.claim_compound("ctr0", Field::Env, "VAR0", "test0")
            .unwrap();
        o.claim_compound("ctr0", Field::Env, "VAR1", "test0")
            .unwrap();
        o.claim_compound("ctr1", Field::Env, "VAR0", "test1")
            .unwrap();
        let err = o
            .claim_compound("ctr0", Field::Env, "VAR1", "test1")
            .unwrap_err();
        assert_eq!(err.key(), Some("VAR1"));
        assert_eq!(
            message(err),
            r#"plugins "test1" and "test0" both tried to set Env VAR1"#
        );

        o.clear_compound("ctr0", Field::Env, "VAR1", "test1");
        o.claim_compound("ctr0", Field::Env, "VAR1", "test1")
            .unwrap();
        o.clear_compound("ctr0", Field::Env, "VAR1", "test0");
        let err = o
            .claim_compound("ctr0", Field::Env, "VAR1", "test1")
            .unwrap_err();
        assert_eq!(
            message(err),
            r#"plugins "test1" and "test0" both tried to set Env VAR1"#
        );

        assert_eq!(Field::Annotations.descriptor().name(), "Annotations");
    }

    // The case of upstream's TestAccumulatingOwnership.
    #[test]
    fn hooks_accumulate() {
        let mut o = OwningPlugins::default();
        for plugin in ["plugin0", "plugin1", "plugin2"] {
            o.claim_hooks("ctr0", plugin);
        }
        assert_eq!(o.hooks_owner("ctr0"), Some("plugin0,plugin1,plugin2"));
        assert_eq!(o.hooks_owner("ctr1"), None);
    }

    #[test]
    fn a_plugin_conflicts_with_itself() {
        let mut o = OwningPlugins::default();
        o.claim_compound("c", Field::Mounts, "/x", "00-a").unwrap();
        let err = o
            .claim_compound("c", Field::Mounts, "/x", "00-a")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"plugins "00-a" and "00-a" both tried to set Mounts /x"#
        );
        o.claim_simple("c", Field::LinuxSched, "00-a").unwrap();
        let err = o.claim_simple("c", Field::LinuxSched, "00-a").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"plugins "00-a" and "00-a" both tried to set LinuxSched "#
        );
    }

    #[test]
    fn a_field_may_conflict_once_a_key_of_it_has_an_owner() {
        let mut o = OwningPlugins::default();
        assert!(!o.any_compound_owner("c", Field::Env));
        // Room made, another field claimed: still nobody owns a key.
        o.reserve_compound("c", Field::Env, 100);
        o.claim_compound("c", Field::Mounts, "/x", "00-a").unwrap();
        assert!(!o.any_compound_owner("c", Field::Env));
        assert!(!o.any_compound_owner("other", Field::Mounts));
        assert!(o.any_compound_owner("c", Field::Mounts));
        // A clear marker counts: another plugin's claim conflicts with it.
        o.clear_compound("c", Field::Env, "K", "00-a");
        assert!(o.any_compound_owner("c", Field::Env));
        // An owner is replaced in place by the clearer's own claim.
        o.claim_compound("c", Field::Env, "K", "00-a").unwrap();
        assert_eq!(o.compound_owner("c", Field::Env, "K"), Some("00-a"));
        assert!(o.claim_compound("c", Field::Env, "K", "01-b").is_err());
    }

    #[test]
    fn keys_are_claimed_in_order_up_to_the_first_conflict() {
        let mut o = OwningPlugins::default();
        o.claim_compound_keys("c", Field::Env, [], "00-a").unwrap();
        assert!(o.container("c").is_none(), "nothing claimed, nothing kept");
        o.claim_compound("c", Field::Env, "B", "00-a").unwrap();
        let err = o
            .claim_compound_keys("c", Field::Env, ["A", "B", "C"], "01-b")
            .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("B"));
        assert_eq!(o.compound_owner("c", Field::Env, "A"), Some("01-b"));
        assert_eq!(o.compound_owner("c", Field::Env, "C"), None);
    }

    #[test]
    fn only_the_clearer_may_claim_a_cleared_field() {
        let mut o = OwningPlugins::default();
        o.claim_simple("c", Field::CgroupsPath, "00-a").unwrap();
        o.clear_simple("c", Field::CgroupsPath, "10-b");
        assert_eq!(o.simple_owner("c", Field::CgroupsPath), Some("-10-b"));
        let err = o.claim_simple("c", Field::CgroupsPath, "20-c").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"plugins "20-c" and "10-b" both tried to set CgroupsPath "#
        );
        o.claim_simple("c", Field::CgroupsPath, "10-b").unwrap();
        assert_eq!(o.simple_owner("c", Field::CgroupsPath), Some("10-b"));
        // Once claimed, the marker is gone: claiming again conflicts.
        assert!(o.claim_simple("c", Field::CgroupsPath, "10-b").is_err());
    }

    #[test]
    fn clear_rdt_clears_all_rdt_fields() {
        let mut o = OwningPlugins::default();
        o.claim_simple("c", Field::RdtClosID, "00-a").unwrap();
        o.claim_simple("c", Field::RdtSchemata, "00-a").unwrap();
        o.clear_rdt("c", "10-b");
        for field in [
            Field::RdtClosID,
            Field::RdtSchemata,
            Field::RdtEnableMonitoring,
        ] {
            assert_eq!(o.simple_owner("c", field), Some("-10-b"));
            o.claim_simple("c", field, "10-b").unwrap();
        }
    }

    #[test]
    fn field_names_and_qualifiers_follow_the_enum() {
        let mut o = OwningPlugins::default();
        let cases = [
            (Field::LinuxNetDevices, "eth0", "LinuxNetDevices eth0"),
            (Field::HugepageLimits, "2MB", "HugepageLimits 2MB"),
            (
                Field::CgroupsUnified,
                "memory.high",
                "CgroupsUnified memory.high",
            ),
            (
                Field::CdiDevices,
                "vendor.com/dev=0",
                "CdiDevices vendor.com/dev=0",
            ),
            (Field::Namespace, "net", "Namespace net"),
        ];
        for (field, key, want) in cases {
            o.claim_compound("c", field, key, "00-a").unwrap();
            let err = o.claim_compound("c", field, key, "10-b").unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(r#"plugins "10-b" and "00-a" both tried to set {want}"#)
            );
        }
        let err = {
            o.claim_simple("c", Field::MemTCPLimit, "00-a").unwrap();
            o.claim_simple("c", Field::MemTCPLimit, "10-b").unwrap_err()
        };
        assert!(err.to_string().ends_with("set MemTCPLimit "));
    }

    #[test]
    fn readers() {
        let mut o = OwningPlugins::default();
        o.claim_compound("c", Field::Annotations, "a", "00-x")
            .unwrap();
        o.claim_compound("c", Field::Annotations, "b", "10-y")
            .unwrap();
        o.clear_compound("c", Field::Annotations, "b", "20-z");
        let mut owners: Vec<_> = o.compound_owners("c", Field::Annotations).collect();
        owners.sort();
        assert_eq!(owners, [("a", "00-x"), ("b", "-20-z")]);
        assert_eq!(o.compound_owner("c", Field::Annotations, "a"), Some("00-x"));
        assert_eq!(o.compound_owner("c", Field::Annotations, "zz"), None);
        assert_eq!(o.compound_owner("other", Field::Annotations, "a"), None);
        assert_eq!(o.compound_owners("other", Field::Mounts).count(), 0);
        assert_eq!(o.compound_owners("c", Field::Mounts).count(), 0);
        assert_eq!(o.simple_owner("c", Field::MemLimit), None);
        assert!(o.container("c").is_some());
    }
}
