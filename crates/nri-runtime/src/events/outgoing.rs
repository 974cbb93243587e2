//! [`Outgoing`]: a request and its bytes as an event sends them to its
//! plugins in turn. (Apart from `call.rs`, which plugins import: this
//! imports them.)

use std::future::Future;
use std::sync::Arc;

use crate::plugins::event_budget::EventBudget;
use crate::plugins::plugin::Plugin;
use crate::plugins::request::{Call, Encoding, Request};
use crate::Error;

/// A request on its way to an event's plugins, one after the other, with
/// its bytes, which every plugin is sent until one's reply changes the
/// request. Held together, the two cannot be paired wrongly, and a flow
/// says where a reply makes the bytes stale.
pub(crate) struct Outgoing<C> {
    req: Request<C>,
    encoding: Encoding,
}

impl<C: Call> Outgoing<C> {
    /// `req`, to be encoded when a plugin first needs its bytes.
    pub(crate) fn new(req: Request<C>) -> Self {
        Outgoing {
            req,
            encoding: Encoding::default(),
        }
    }

    /// `req` with `bytes`, the runtime's encoding of it, sent as they are.
    pub(crate) fn with_bytes(req: Request<C>, bytes: Arc<[u8]>) -> Self {
        Outgoing {
            req,
            encoding: Encoding::given(bytes),
        }
    }

    /// Relays the request to `p` (see [`Plugin::relay`]). Not an `async
    /// fn`: the plugin's future is handed on as it is, with no state
    /// machine of its own around it.
    pub(crate) fn relay<'a>(
        &'a mut self,
        p: &'a Plugin,
        budget: EventBudget,
    ) -> impl Future<Output = Result<Option<C::Reply>, Error>> + 'a {
        p.relay(&self.req, &mut self.encoding, budget)
    }

    pub(crate) fn request(&self) -> &Request<C> {
        &self.req
    }

    /// The request, to be changed: by a plugin's reply only after
    /// [`stale`](Self::stale), otherwise only as its bytes hold it already
    /// (normalized), since they stay.
    pub(crate) fn request_mut(&mut self) -> &mut Request<C> {
        &mut self.req
    }

    /// A plugin's reply changes the request: the next plugin is sent it
    /// encoded anew.
    pub(crate) fn stale(&mut self) {
        self.encoding.stale();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_api::{Container, StopContainerRequest};
    use protobuf::Message;

    impl<C: Call> Outgoing<C> {
        /// What the next plugin over ttrpc would be sent.
        fn bytes(&mut self) -> Arc<[u8]> {
            self.encoding.of(&self.req).unwrap()
        }
    }

    fn request(id: &str) -> StopContainerRequest {
        StopContainerRequest {
            container: protobuf::MessageField::some(Container {
                id: id.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    // The fast paths rest on this: bytes given are what plugins are sent,
    // never encoded again, until a reply changes the request.
    #[test]
    fn given_bytes_are_sent_until_stale() {
        let given: Arc<[u8]> = request("as-given").write_to_bytes().unwrap().into();
        let mut out = Outgoing::with_bytes(Request::Decoded(request("as-given")), given.clone());
        assert!(Arc::ptr_eq(&out.bytes(), &given));
        let Request::Decoded(r) = out.request_mut() else {
            unreachable!()
        };
        r.container.mut_or_insert_default().id = "changed".into();
        assert!(Arc::ptr_eq(&out.bytes(), &given));
        out.stale();
        let sent = out.bytes();
        assert_eq!(&*sent, &request("changed").write_to_bytes().unwrap()[..]);
        assert!(Arc::ptr_eq(&out.bytes(), &sent), "encoded once");
    }
}
