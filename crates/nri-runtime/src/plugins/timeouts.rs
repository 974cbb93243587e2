//! The timeouts one plugin may have of its own, and how long its
//! Synchronize may take when nobody said.

use std::time::Duration;

/// Timeouts of one plugin that replace the adaptation's: the runtime's
/// setting for it, else its runtime drop-in's, each timeout on its own.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PluginTimeouts {
    /// Every request's but Synchronize's (whose default deadline it
    /// lengthens if it is the longer of it and the registration timeout).
    pub(crate) request: Option<Duration>,
    /// Synchronize's, as is.
    pub(crate) sync: Option<Duration>,
}

impl PluginTimeouts {
    /// Each timeout of `self`, where set, else `other`'s.
    pub(crate) fn or(self, other: PluginTimeouts) -> PluginTimeouts {
        PluginTimeouts {
            request: self.request.or(other.request),
            sync: self.sync.or(other.sync),
        }
    }
}

/// What each pod and container in the state sent adds to the default
/// sync deadline. Measured on the project's 2-core machines
/// (docs/PERFORMANCE.md, `sync-10000`), an upstream Go-stub plugin took
/// 0.88 s to receive 10,000 containers in 5,000 pods: about 90 µs per
/// container, 60 µs per object. A millisecond is over ten times that, so
/// a plugin that does real work per object, or a loaded node, still fits.
pub(crate) const SYNC_TIME_PER_OBJECT: Duration = Duration::from_millis(1);

/// How long a Synchronize of `objects` pods and containers may take when
/// no sync timeout was set: the registration timeout, or the plugin's
/// request timeout if that is longer, plus [`SYNC_TIME_PER_OBJECT`] for
/// each object, at most what the wire carries (i64 nanoseconds). A
/// plugin joining carries the whole node in that one
/// request, so one event's timeout is the wrong bound for it: upstream
/// uses the request timeout (2 s by default), which real resource-policy
/// plugins miss on big nodes, to be dropped and to reconnect and miss it
/// again.
pub(crate) fn default_sync_timeout(
    registration: Duration,
    request: Duration,
    objects: usize,
) -> Duration {
    let per_object = u32::try_from(objects)
        .ok()
        .and_then(|n| SYNC_TIME_PER_OBJECT.checked_mul(n))
        .unwrap_or(Duration::MAX);
    let longest = Duration::from_nanos(i64::MAX as u64);
    registration
        .max(request)
        .saturating_add(per_object)
        .min(longest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_sync_deadline_grows_by_a_millisecond_an_object() {
        let s = Duration::from_secs;
        assert_eq!(default_sync_timeout(s(5), s(2), 0), s(5));
        assert_eq!(default_sync_timeout(s(5), s(10), 0), s(10));
        // The measured node: 10,000 containers in 5,000 pods.
        assert_eq!(default_sync_timeout(s(5), s(2), 15_000), s(20));
        assert_eq!(
            default_sync_timeout(s(5), s(2), usize::MAX),
            Duration::from_nanos(i64::MAX as u64),
            "what the wire carries"
        );
    }

    #[test]
    fn a_plugins_own_timeouts_win_one_by_one() {
        let ms = |n| Some(Duration::from_millis(n));
        let named = PluginTimeouts {
            request: ms(1),
            sync: None,
        };
        let dropin = PluginTimeouts {
            request: ms(2),
            sync: ms(3),
        };
        assert_eq!(
            named.or(dropin),
            PluginTimeouts {
                request: ms(1),
                sync: ms(3)
            }
        );
        assert_eq!(PluginTimeouts::default().or(dropin), dropin);
    }
}
