//! The optional time budget of a whole event ([`Options::event_timeout`]):
//! each plugin call gets the request timeout or what is left of the
//! event's budget, whichever is less.
//!
//! A call cut short by the budget is not its plugin's fault (it was within
//! its own request timeout): the event fails with
//! [`Error::EventTimeout`] and the plugin stays. Without a budget every
//! call gets the request timeout, as upstream, and K plugins answering
//! just in time make an event K timeouts long.
//!
//! [`Options::event_timeout`]: crate::Options::event_timeout

use std::time::Duration;

use tokio::time::Instant;

use crate::Error;

/// An event's budget, from the moment it started.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EventBudget {
    until: Option<(Instant, Duration)>,
}

/// How long one plugin call may take, and whether the budget set that.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallTimeout {
    pub(crate) timeout: Duration,
    by_budget: bool,
}

impl EventBudget {
    /// The budget of an event starting now: `budget`, if the runtime set
    /// one.
    pub(crate) fn start(budget: Option<Duration>) -> EventBudget {
        EventBudget {
            until: budget.map(|b| (Instant::now() + b, b)),
        }
    }

    /// The timeout of the next plugin call of `op`; an error once the
    /// budget is spent.
    pub(crate) fn call(
        &self,
        request_timeout: Duration,
        op: &'static str,
    ) -> Result<CallTimeout, Error> {
        let Some((until, budget)) = self.until else {
            return Ok(CallTimeout {
                timeout: request_timeout,
                by_budget: false,
            });
        };
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::EventTimeout { op, budget });
        }
        Ok(CallTimeout {
            timeout: left.min(request_timeout),
            by_budget: left < request_timeout,
        })
    }

    /// What a call's error means for the event: a timeout the budget set
    /// is the event's, not the plugin's.
    pub(crate) fn blame(&self, call: CallTimeout, e: Error) -> Error {
        match (e, self.until) {
            (Error::Timeout { op, .. }, Some((_, budget))) if call.by_budget => {
                Error::EventTimeout { op, budget }
            }
            (e, _) => e,
        }
    }
}
