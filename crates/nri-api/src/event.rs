//! Events and event subscription masks.
//!
//! A plugin subscribes to events with a bit mask where event `e` is bit
//! `e - 1`. The enum numbers are wire values and are not in lifecycle order.

use std::fmt;

use super::Event;

/// Every event a plugin can subscribe to, in wire-number order.
pub const ALL_EVENTS: [Event; 14] = [
    Event::RUN_POD_SANDBOX,
    Event::STOP_POD_SANDBOX,
    Event::REMOVE_POD_SANDBOX,
    Event::CREATE_CONTAINER,
    Event::POST_CREATE_CONTAINER,
    Event::START_CONTAINER,
    Event::POST_START_CONTAINER,
    Event::UPDATE_CONTAINER,
    Event::POST_UPDATE_CONTAINER,
    Event::STOP_CONTAINER,
    Event::REMOVE_CONTAINER,
    Event::UPDATE_POD_SANDBOX,
    Event::POST_UPDATE_POD_SANDBOX,
    Event::VALIDATE_CONTAINER_ADJUSTMENT,
];

impl Event {
    /// The human-friendly name, equal to the Plugin service method name
    /// (`RunPodSandbox`, ...). Used in logs and as the metrics operation.
    pub fn pretty_name(self) -> &'static str {
        match self {
            Event::RUN_POD_SANDBOX => "RunPodSandbox",
            Event::UPDATE_POD_SANDBOX => "UpdatePodSandbox",
            Event::POST_UPDATE_POD_SANDBOX => "PostUpdatePodSandbox",
            Event::STOP_POD_SANDBOX => "StopPodSandbox",
            Event::REMOVE_POD_SANDBOX => "RemovePodSandbox",
            Event::CREATE_CONTAINER => "CreateContainer",
            Event::POST_CREATE_CONTAINER => "PostCreateContainer",
            Event::START_CONTAINER => "StartContainer",
            Event::POST_START_CONTAINER => "PostStartContainer",
            Event::UPDATE_CONTAINER => "UpdateContainer",
            Event::POST_UPDATE_CONTAINER => "PostUpdateContainer",
            Event::STOP_CONTAINER => "StopContainer",
            Event::REMOVE_CONTAINER => "RemoveContainer",
            Event::VALIDATE_CONTAINER_ADJUSTMENT => "ValidateContainerAdjustment",
            Event::UNKNOWN | Event::LAST => "",
        }
    }

    /// The mask bit of this event (0 for `UNKNOWN` and `LAST`).
    pub fn mask_bit(self) -> i32 {
        match self {
            Event::UNKNOWN | Event::LAST => 0,
            e => 1 << (e as i32 - 1),
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pretty_name() {
            "" => write!(f, "unknown({})", *self as i32),
            name => f.write_str(name),
        }
    }
}

/// A set of events, as carried in `ConfigureResponse.events`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EventMask(i32);

/// Error from [`EventMask::parse`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown event {0:?}")]
pub struct UnknownEvent(pub String);

impl EventMask {
    /// The mask of every valid event, `VALIDATE_CONTAINER_ADJUSTMENT` included.
    pub const VALID: EventMask = EventMask((1 << (Event::LAST as i32 - 1)) - 1);
    /// The empty mask.
    pub const EMPTY: EventMask = EventMask(0);

    /// Wraps a raw wire mask as is (it may contain invalid bits).
    pub const fn from_raw(bits: i32) -> Self {
        EventMask(bits)
    }

    /// The raw wire value.
    pub const fn raw(self) -> i32 {
        self.0
    }

    /// A mask with exactly the given events.
    pub fn of(events: &[Event]) -> Self {
        let mut mask = EventMask::EMPTY;
        for &e in events {
            mask.set(e);
        }
        mask
    }

    pub fn set(&mut self, e: Event) -> &mut Self {
        self.0 |= e.mask_bit();
        self
    }

    pub fn clear(&mut self, e: Event) -> &mut Self {
        self.0 &= !e.mask_bit();
        self
    }

    pub fn is_set(self, e: Event) -> bool {
        let bit = e.mask_bit();
        bit != 0 && self.0 & bit != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Bits outside [`EventMask::VALID`], if any.
    pub fn invalid_bits(self) -> i32 {
        self.0 & !Self::VALID.0
    }

    pub fn union(self, other: EventMask) -> EventMask {
        EventMask(self.0 | other.0)
    }

    /// The events in this mask, in wire-number order.
    pub fn events(self) -> impl Iterator<Item = Event> {
        ALL_EVENTS.into_iter().filter(move |e| self.is_set(*e))
    }

    /// Parses comma-separated, case-insensitive event names as upstream's
    /// `ParseEventMask` does: the pretty names, `all`, `pod`/`podsandbox`
    /// (every pod event) and `container` (every event whose name contains
    /// "container", which includes `ValidateContainerAdjustment`). The
    /// special words must match exactly; plain names are trimmed.
    pub fn parse<S: AsRef<str>>(specs: &[S]) -> Result<EventMask, UnknownEvent> {
        let mut mask = EventMask::EMPTY;
        for spec in specs {
            for name in spec.as_ref().to_lowercase().split(',') {
                match name {
                    "all" => mask = mask.union(EventMask::VALID),
                    "pod" | "podsandbox" => mask = mask.union(Self::matching("pod")),
                    "container" => mask = mask.union(Self::matching("container")),
                    _ => {
                        let event = ALL_EVENTS
                            .into_iter()
                            .find(|e| e.pretty_name().eq_ignore_ascii_case(name.trim()))
                            .ok_or_else(|| UnknownEvent(name.to_string()))?;
                        mask.set(event);
                    }
                }
            }
        }
        Ok(mask)
    }

    fn matching(word: &str) -> EventMask {
        let mut mask = EventMask::EMPTY;
        for e in ALL_EVENTS {
            if e.pretty_name().to_lowercase().contains(word) {
                mask.set(e);
            }
        }
        mask
    }
}

impl std::str::FromStr for EventMask {
    type Err = UnknownEvent;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EventMask::parse(&[s])
    }
}

impl fmt::Display for EventMask {
    /// Comma-separated pretty names, then `unknown(0x..)` for stray bits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        for e in self.events() {
            write!(f, "{sep}{e}")?;
            sep = ",";
        }
        let rest = self.invalid_bits();
        if rest != 0 {
            write!(f, "{sep}unknown(0x{rest:x})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_bits_follow_wire_numbers() {
        assert_eq!(Event::RUN_POD_SANDBOX.mask_bit(), 0x1);
        assert_eq!(Event::CREATE_CONTAINER.mask_bit(), 0x8);
        assert_eq!(Event::VALIDATE_CONTAINER_ADJUSTMENT.mask_bit(), 0x2000);
        assert_eq!(EventMask::VALID.raw(), 0x3fff);
        assert_eq!(Event::UNKNOWN.mask_bit(), 0);
    }

    #[test]
    fn parse_special_words() {
        let all = EventMask::parse(&["all"]).unwrap();
        assert_eq!(all, EventMask::VALID);
        let pod = EventMask::parse(&["pod"]).unwrap();
        assert_eq!(pod, EventMask::parse(&["PodSandbox"]).unwrap());
        assert_eq!(pod.events().count(), 5);
        assert!(pod.is_set(Event::UPDATE_POD_SANDBOX));
        let ctr = EventMask::parse(&["container"]).unwrap();
        assert_eq!(ctr.events().count(), 9);
        assert!(ctr.is_set(Event::VALIDATE_CONTAINER_ADJUSTMENT));
        assert!(!ctr.is_set(Event::RUN_POD_SANDBOX));
    }

    #[test]
    fn parse_names_case_insensitive_and_trimmed() {
        let m = EventMask::parse(&["runpodsandbox, CreateContainer", "StopContainer"]).unwrap();
        assert_eq!(
            m,
            EventMask::of(&[
                Event::RUN_POD_SANDBOX,
                Event::CREATE_CONTAINER,
                Event::STOP_CONTAINER
            ])
        );
        // Special words are not trimmed, as upstream.
        assert_eq!(
            EventMask::parse(&[" all"]),
            Err(UnknownEvent(" all".into()))
        );
        assert_eq!(
            EventMask::parse(&["createcontainer,bogus"])
                .unwrap_err()
                .to_string(),
            "unknown event \"bogus\""
        );
    }

    #[test]
    fn display() {
        let mut m = EventMask::of(&[Event::CREATE_CONTAINER, Event::RUN_POD_SANDBOX]);
        assert_eq!(m.to_string(), "RunPodSandbox,CreateContainer");
        m = EventMask::from_raw(m.raw() | 0x10000);
        assert_eq!(
            m.to_string(),
            "RunPodSandbox,CreateContainer,unknown(0x10000)"
        );
        assert_eq!(Event::LAST.to_string(), "unknown(15)");
    }

    #[test]
    fn set_clear() {
        let mut m = EventMask::EMPTY;
        m.set(Event::STOP_CONTAINER).set(Event::REMOVE_CONTAINER);
        m.clear(Event::STOP_CONTAINER);
        assert!(!m.is_set(Event::STOP_CONTAINER));
        assert!(m.is_set(Event::REMOVE_CONTAINER));
    }
}
