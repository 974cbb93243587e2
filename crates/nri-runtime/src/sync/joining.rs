//! A plugin on its way in: from the moment its sync begins until it is
//! active, the events it subscribes to are kept for it ([`Joining`]), since
//! runtime calls no longer wait for its sync (`lock.rs`). Once it has
//! answered its Synchronize they are replayed to it, in order, but for
//! what its snapshot already told it: each pod and container reaches it
//! once, in the snapshot or as events, whichever way the runtime's state
//! and the events interleaved.
//!
//! A replayed event is news, not a question: the call it came from has
//! been answered, so what the plugin replies (a CreateContainer's
//! adjustment, an update) is logged and dropped. A plugin that wants to
//! change what it missed does so as it does for its snapshot, with
//! updates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use log::{debug, info};
use nri_api::wire::{decode_fields, only_field};
use nri_api::*;
use protobuf::Message;

use crate::plugins::event_budget::EventBudget;
use crate::plugins::plugin::Plugin;
use crate::plugins::request::{for_request_of, Call, Encoding, Request};
use crate::sync::EncodedState;
use crate::Error;

/// Most events kept for one joining plugin, and most bytes of their
/// requests. A plugin whose sync waits long on a busy node passes them;
/// it is then refused, and connects again.
pub(crate) const MAX_MISSED_EVENTS: usize = 16_384;
pub(crate) const MAX_MISSED_BYTES: usize = 64 << 20;

pub(crate) struct Joining {
    pub(crate) plugin: Arc<Plugin>,
    missed: Mutex<Missed>,
    known: Mutex<Known>,
}

#[derive(Default)]
struct Missed {
    events: Vec<(Event, Arc<[u8]>)>,
    bytes: usize,
    overflowed: bool,
}

/// What the plugin has been told of each pod and container, from its
/// snapshot and the events replayed to it so far: how far along its
/// lifecycle it is ([`Stage`]).
#[derive(Default)]
struct Known {
    pods: HashMap<String, Stage>,
    containers: HashMap<String, Stage>,
}

/// Lifecycle steps in order; an event is replayed only if it moves an
/// object past what the plugin knows of it.
type Stage = u8;
const CREATED: Stage = 1;
const POST_CREATED: Stage = 2;
const STARTED: Stage = 3;
const POST_STARTED: Stage = 4;
const STOPPED: Stage = 5;

impl Joining {
    pub(crate) fn new(plugin: Arc<Plugin>) -> Joining {
        Joining {
            plugin,
            missed: Mutex::default(),
            known: Mutex::default(),
        }
    }

    /// Whether the plugin takes `event`: then the event keeps its request.
    pub(crate) fn wants(&self, event: Event) -> bool {
        self.plugin.will_see(event)
    }

    /// Keeps an event that ran while the plugin was joining.
    pub(crate) fn missed(&self, event: Event, request: &Arc<[u8]>) {
        if !self.wants(event) {
            return;
        }
        let mut missed = self.missed.lock().unwrap_or_else(|e| e.into_inner());
        if missed.overflowed {
            return;
        }
        if missed.events.len() == MAX_MISSED_EVENTS
            || missed.bytes + request.len() > MAX_MISSED_BYTES
        {
            missed.overflowed = true;
            missed.events = Vec::new();
            return;
        }
        missed.bytes += request.len();
        missed.events.push((event, Arc::clone(request)));
    }

    /// Notes the objects of one Synchronize message sent to the plugin.
    pub(crate) fn saw(&self, msg: &[u8]) {
        let Ok(state) = EncodedState::split(msg) else {
            return;
        };
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        for pod in &state.pods {
            if let Some(id) = only_field(pod, 1).and_then(|b| std::str::from_utf8(b).ok()) {
                known.pods.insert(id.to_string(), CREATED);
            }
        }
        for ctr in &state.containers {
            let Ok(c) = decode_fields::<Container>(ctr, &[1, 4]) else {
                continue;
            };
            let stage = match c.state.enum_value_or_default() {
                ContainerState::CONTAINER_RUNNING | ContainerState::CONTAINER_PAUSED => {
                    POST_STARTED
                }
                ContainerState::CONTAINER_STOPPED => STOPPED,
                ContainerState::CONTAINER_CREATED | ContainerState::CONTAINER_UNKNOWN => {
                    POST_CREATED
                }
            };
            known.containers.insert(c.id, stage);
        }
    }

    /// Replays the events kept so far, and those kept meanwhile, until
    /// none is left. Fails if too many were kept, or if the plugin failed
    /// to answer one.
    pub(crate) async fn catch_up(&self) -> Result<(), Error> {
        loop {
            let events = {
                let mut missed = self.missed.lock().unwrap_or_else(|e| e.into_inner());
                if missed.overflowed {
                    return Err(Error::Start(format!(
                        "more than {MAX_MISSED_EVENTS} events or {MAX_MISSED_BYTES} bytes \
                         of requests ran while the plugin waited to synchronize"
                    )));
                }
                missed.bytes = 0;
                std::mem::take(&mut missed.events)
            };
            if events.is_empty() {
                return Ok(());
            }
            for (event, request) in events {
                if self.news(event, &request) {
                    self.replay(event, request).await?;
                }
            }
        }
    }

    /// Whether `event` tells the plugin something it does not know, noting
    /// that it now does.
    fn news(&self, event: Event, request: &[u8]) -> bool {
        let id = |field| {
            only_field(request, field)
                .and_then(|o| only_field(o, 1))
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or_default()
                .to_string()
        };
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let (objects, id, step) = match event {
            Event::RUN_POD_SANDBOX => (&mut known.pods, id(1), Some(CREATED)),
            Event::UPDATE_POD_SANDBOX | Event::POST_UPDATE_POD_SANDBOX => {
                (&mut known.pods, id(1), None)
            }
            Event::STOP_POD_SANDBOX => (&mut known.pods, id(1), Some(STOPPED)),
            Event::REMOVE_POD_SANDBOX => return known.pods.remove(&id(1)).is_some(),
            Event::CREATE_CONTAINER => (&mut known.containers, id(2), Some(CREATED)),
            Event::POST_CREATE_CONTAINER => (&mut known.containers, id(2), Some(POST_CREATED)),
            Event::START_CONTAINER => (&mut known.containers, id(2), Some(STARTED)),
            Event::POST_START_CONTAINER => (&mut known.containers, id(2), Some(POST_STARTED)),
            Event::UPDATE_CONTAINER | Event::POST_UPDATE_CONTAINER => {
                (&mut known.containers, id(2), None)
            }
            Event::STOP_CONTAINER => (&mut known.containers, id(2), Some(STOPPED)),
            Event::REMOVE_CONTAINER => return known.containers.remove(&id(2)).is_some(),
            _ => return false,
        };
        match (objects.get_mut(&id), step) {
            // The object's first news is its creation; an object the
            // plugin never heard of is no news after that.
            (None, Some(CREATED)) => {
                objects.insert(id, CREATED);
                true
            }
            (None, _) => false,
            (Some(_), None) => true,
            (Some(known), Some(step)) if step > *known => {
                *known = step;
                true
            }
            (Some(_), Some(_)) => false,
        }
    }

    async fn replay(&self, event: Event, request: Arc<[u8]>) -> Result<(), Error> {
        let p = &self.plugin;
        let said = for_request_of!(event, |T| send::<T>(p, request).await, Ok(false));
        match said {
            Ok(true) => info!(
                "plugin {} answered a {} it was told of after the fact: \
                 its changes are dropped",
                p.qualified_name(),
                event.pretty_name()
            ),
            Ok(false) => {}
            // Its failure policy has spoken: a plugin dropped for it is
            // closed, and its join fails; another error only costs it
            // this event, as it would have live.
            Err(e) if p.is_closed() => return Err(e),
            Err(e) => debug!(
                "plugin {} failed a replayed {}: {e}",
                p.qualified_name(),
                event.pretty_name()
            ),
        }
        Ok(())
    }
}

/// Relays a kept request to `p`; whether it asked for a change.
async fn send<C: Call>(p: &Plugin, request: Arc<[u8]>) -> Result<bool, Error> {
    let mut encoding = Encoding::given(Arc::clone(&request));
    let req = Request::<C>::Encoded(request);
    let reply = p
        .relay(&req, &mut encoding, EventBudget::start(None))
        .await?;
    Ok(reply.is_some_and(|r| r.compute_size() > 0))
}

/// The bytes an event keeps for the plugins `joining`, made by `bytes`
/// only if one of them takes `event`.
pub(crate) fn kept(
    joining: &[Arc<Joining>],
    event: Event,
    bytes: impl FnOnce() -> Option<Arc<[u8]>>,
) -> Option<Arc<[u8]>> {
    if joining.iter().any(|j| j.wants(event)) {
        bytes()
    } else {
        None
    }
}

/// A request's bytes, to keep.
pub(crate) fn bytes_of<C: Call>(req: &Request<C>) -> Option<Arc<[u8]>> {
    Encoding::default().of(req).ok()
}
