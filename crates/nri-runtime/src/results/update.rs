//! Merging plugins' container updates: per container, in first-seen order.

use std::collections::HashMap;

use protobuf::MessageField;

use nri_api::{
    ConflictError, ContainerUpdate, Field, LinuxCPU, LinuxContainerUpdate, LinuxMemory,
    LinuxResources, OwningPlugins,
};

use super::*;

/// The event whose replies carry the updates.
pub(super) enum Event<'a> {
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
pub(super) struct UpdateMerge<'a> {
    pub(super) owners: &'a mut OwningPlugins,
    pub(super) plugin: &'a str,
    /// Updates of other containers, in first-seen order.
    pub(super) list: &'a mut Vec<ContainerUpdate>,
    /// Container ID → position in `list`.
    pub(super) index: &'a mut HashMap<String, usize>,
    pub(super) event: Event<'a>,
}

impl UpdateMerge<'_> {
    pub(super) fn merge(mut self, updates: Vec<ContainerUpdate>) -> Result<(), MergeError> {
        let mut target_changed = false;
        let outcome = self.merge_all(updates, &mut target_changed);
        // Also after a failure, so the result stays as merged so far.
        if target_changed {
            self.copy_target_resources();
        }
        outcome
    }

    fn merge_all(
        &mut self,
        updates: Vec<ContainerUpdate>,
        target_changed: &mut bool,
    ) -> Result<(), MergeError> {
        steps(updates.len());
        for update in updates {
            if let Event::Create { ctr_id } = self.event {
                if update.container_id == ctr_id {
                    return Err(MergeError(Cause::UpdateDuringCreation {
                        plugin: self.plugin.to_string(),
                        ctr_id: update.container_id,
                    }));
                }
            }
            match self.merge_one(&update) {
                Ok(changed) => *target_changed |= changed,
                // Whether a failure is swallowed is up to this update alone,
                // not to the flag accumulated over plugins.
                Err(conflict) if !update.ignore_failure => return Err(conflict.into()),
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Merges one update. Upstream merges on a copy and keeps it only on
    /// success; here every claim is made first and then the accumulated
    /// resources are written in place, which ends the same without copying
    /// them per update (a copy per update is quadratic when one reply
    /// updates a container many times). Claims made before a failure stay,
    /// as does the (maybe still empty) accumulated entry.
    ///
    /// Returns whether the UpdateContainer request's resources changed:
    /// the target's merged update then needs a copy of them, taken once
    /// per reply by [`Self::copy_target_resources`].
    pub(super) fn merge_one(&mut self, update: &ContainerUpdate) -> Result<bool, ConflictError> {
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
            return Ok(false);
        };

        let mut claims = Claims::new(owners, ctr_id, plugin);
        claim_resources(&mut claims, new)?;
        // QUIRK (pids): upstream checks the copy's pids, not the update's:
        // a requested pids limit is dropped, and a pids limit in the
        // UpdateContainer request is claimed by every plugin updating it.
        // Merging never writes pids, so the copy's are the base's.
        let base_has_pids = match &request {
            Some(request) => request.pids.is_some(),
            None => merged.linux.resources.pids.is_some(),
        };
        if base_has_pids {
            claims.simple(Field::PidsLimit)?;
        }

        Ok(match request {
            Some(request) => {
                write_resources(new, request.mut_or_insert_default());
                true
            }
            None => {
                let resources = merged
                    .linux
                    .mut_or_insert_default()
                    .resources
                    .mut_or_insert_default();
                write_resources(new, resources);
                false
            }
        })
    }

    /// The UpdateContainer target's merged update holds a copy of the
    /// request's resources as they are after its last successful update.
    fn copy_target_resources(&mut self) {
        if let Event::Update {
            merged: Some(merged),
            resources,
            ..
        } = &mut self.event
        {
            steps(size(resources));
            merged.linux.mut_or_insert_default().resources =
                MessageField::some(LinuxResources::clone(resources));
        }
    }
}

/// The accumulated update for `ctr_id`, created on first sight, with
/// `ignore_failure` ANDed over every plugin touching it; for the
/// UpdateContainer target also the request's resources.
pub(super) fn accumulated<'m>(
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
pub(super) fn fresh_update(ctr_id: &str, ignore_failure: bool) -> ContainerUpdate {
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

/// The elements of `r`'s collections, the steps of copying it.
fn size(r: &LinuxResources) -> usize {
    r.hugepage_limits.len() + r.unified.len() + r.devices.len()
}
