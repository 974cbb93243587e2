//! [`Claims`]: which plugin set which field, and the conflicts a second
//! claim makes.

use nri_api::{ConflictError, Field, OwningPlugins};

/// Claims on behalf of one plugin for one container.
pub(super) struct Claims<'a> {
    pub(super) owners: &'a mut OwningPlugins,
    pub(super) ctr_id: &'a str,
    pub(super) plugin: &'a str,
}

impl<'a> Claims<'a> {
    pub(super) fn new(owners: &'a mut OwningPlugins, ctr_id: &'a str, plugin: &'a str) -> Self {
        Claims {
            owners,
            ctr_id,
            plugin,
        }
    }

    pub(super) fn simple(&mut self, field: Field) -> Result<(), ConflictError> {
        self.owners.claim_simple(self.ctr_id, field, self.plugin)
    }

    /// Claims each field in turn, stopping at the first conflict.
    pub(super) fn simples(
        &mut self,
        fields: impl IntoIterator<Item = Field>,
    ) -> Result<(), ConflictError> {
        fields.into_iter().try_for_each(|field| self.simple(field))
    }

    pub(super) fn key(&mut self, field: Field, key: &str) -> Result<(), ConflictError> {
        self.owners
            .claim_compound(self.ctr_id, field, key, self.plugin)
    }

    /// Claims `keys` of `field` in order, stopping at the first conflict.
    pub(super) fn keys<'k>(
        &mut self,
        field: Field,
        keys: impl IntoIterator<Item = &'k str>,
    ) -> Result<(), ConflictError> {
        self.owners
            .claim_compound_keys(self.ctr_id, field, keys, self.plugin)
    }

    /// Whether a claim on a key of `field` can conflict: only if some key
    /// of it already has an owner.
    pub(super) fn may_conflict(&self, field: Field) -> bool {
        self.owners.any_compound_owner(self.ctr_id, field)
    }

    /// Makes room for `additional` claims on keys of `field`.
    pub(super) fn reserve_keys(&mut self, field: Field, additional: usize) {
        self.owners.reserve_compound(self.ctr_id, field, additional)
    }

    pub(super) fn clear(&mut self, field: Field) {
        self.owners.clear_simple(self.ctr_id, field, self.plugin)
    }

    pub(super) fn clear_key(&mut self, field: Field, key: &str) {
        self.owners
            .clear_compound(self.ctr_id, field, key, self.plugin)
    }

    pub(super) fn hooks(&mut self) {
        self.owners.claim_hooks(self.ctr_id, self.plugin)
    }

    pub(super) fn clear_rdt(&mut self) {
        self.owners.clear_rdt(self.ctr_id, self.plugin)
    }
}
