//! Which connection holds which plugin name, when the runtime has an
//! identity policy ([`Options::plugin_identities`]).
//!
//! A name is a plugin's base name: the default validator's required
//! plugins are met by `name` whatever the index, so `99-foo` must not be
//! able to stand in for `10-foo`. Every plugin holds its name from its
//! registration (an external plugin) or its start (the others) until it is
//! closed. Only an external plugin's registration is checked; builtin,
//! pre-installed and WASM plugins are the runtime's own configuration.
//!
//! [`Options::plugin_identities`]: crate::Options::plugin_identities

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nri_api::quote::go_quote;

use crate::plugins::identity::PeerIdentity;

/// The holders of each name.
#[derive(Default)]
pub(crate) struct Names {
    held: Mutex<HashMap<String, Vec<Holder>>>,
    next: AtomicU64,
}

struct Holder {
    claim: u64,
    idx: String,
    /// How logs name the holder (`external:10-foo[42]`).
    who: String,
    identity: Option<PeerIdentity>,
}

/// A held name; dropping it gives the name up.
pub(crate) struct NameClaim {
    names: Arc<Names>,
    base: String,
    claim: u64,
}

impl Drop for NameClaim {
    fn drop(&mut self) {
        let mut held = self.names.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(holders) = held.get_mut(&self.base) {
            holders.retain(|h| h.claim != self.claim);
            if holders.is_empty() {
                held.remove(&self.base);
            }
        }
    }
}

impl Names {
    /// Takes `base` for a plugin the runtime configured; never refused.
    pub(crate) fn hold(
        self: &Arc<Self>,
        base: &str,
        idx: &str,
        who: String,
        identity: Option<PeerIdentity>,
    ) -> NameClaim {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        self.add(&mut held, base, idx, who, identity)
    }

    /// Takes `base` for an external plugin, unless a live plugin holds it.
    /// With `handover`, a new instance may take it from holders of the same
    /// `idx-name` and the same principal, which it is about to replace.
    pub(crate) fn take(
        self: &Arc<Self>,
        base: &str,
        idx: &str,
        who: String,
        identity: &PeerIdentity,
        handover: bool,
    ) -> Result<NameClaim, String> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(other) = held.get(base).and_then(|holders| {
            holders.iter().find(|h| {
                let successor = handover
                    && h.idx == idx
                    && h.identity
                        .as_ref()
                        .is_some_and(|i| i.same_principal(identity));
                !successor
            })
        }) {
            return Err(format!(
                "plugin name {} is held by {}",
                go_quote(base),
                other.who
            ));
        }
        Ok(self.add(&mut held, base, idx, who, Some(identity.clone())))
    }

    fn add(
        self: &Arc<Self>,
        held: &mut HashMap<String, Vec<Holder>>,
        base: &str,
        idx: &str,
        who: String,
        identity: Option<PeerIdentity>,
    ) -> NameClaim {
        let claim = self.next.fetch_add(1, Ordering::Relaxed);
        held.entry(base.to_string()).or_default().push(Holder {
            claim,
            idx: idx.to_string(),
            who,
            identity,
        });
        NameClaim {
            names: Arc::clone(self),
            base: base.to_string(),
            claim,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32) -> PeerIdentity {
        let mut id = PeerIdentity::of_runtime();
        id.uid = uid;
        id
    }

    #[test]
    fn a_held_name_is_refused_whatever_the_index() {
        let names = Arc::new(Names::default());
        let _first = names
            .take("foo", "10", "a".into(), &peer(0), false)
            .unwrap();
        let err = names
            .take("foo", "99", "b".into(), &peer(0), false)
            .err()
            .unwrap();
        assert_eq!(err, "plugin name \"foo\" is held by a");
        assert!(names.take("bar", "10", "c".into(), &peer(0), false).is_ok());
    }

    #[test]
    fn a_name_given_up_can_be_taken() {
        let names = Arc::new(Names::default());
        drop(
            names
                .take("foo", "10", "a".into(), &peer(0), false)
                .unwrap(),
        );
        assert!(names.take("foo", "10", "b".into(), &peer(1), false).is_ok());
    }

    #[test]
    fn handover_is_only_for_the_same_principal_and_idx_name() {
        let names = Arc::new(Names::default());
        let old = names.take("foo", "10", "a".into(), &peer(0), true).unwrap();
        assert!(names.take("foo", "10", "x".into(), &peer(7), true).is_err());
        assert!(names.take("foo", "20", "y".into(), &peer(0), true).is_err());
        let new = names.take("foo", "10", "b".into(), &peer(0), true).unwrap();
        // The old instance leaving must not free the new one's name.
        drop(old);
        assert!(names.take("foo", "10", "z".into(), &peer(7), true).is_err());
        drop(new);
        assert!(names.take("foo", "10", "z".into(), &peer(7), true).is_ok());
    }

    #[test]
    fn a_runtime_configured_holder_cannot_be_succeeded() {
        let names = Arc::new(Names::default());
        let _builtin = names.hold("default-validator", "00", "builtin".into(), None);
        let err = names
            .take("default-validator", "00", "x".into(), &peer(0), true)
            .err()
            .unwrap();
        assert!(err.contains("held by builtin"), "{err}");
    }
}
