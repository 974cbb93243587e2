//! Synchronizing a plugin with the runtime's pods and containers, split into
//! several messages when one would exceed the ttrpc message limit; the
//! runtime's lever to hold synchronization off (`BlockPluginSync`) is in
//! [`lock`], and the callbacks it calls the runtime with in [`callbacks`].

pub(crate) mod callbacks;
pub(crate) mod joining;
pub(crate) mod lock;

pub use lock::PluginSyncBlock;

use std::ops::Range;
use std::sync::Arc;
use std::task::Poll;

use log::warn;
use nri_api::envelope::{field_len, PLUGIN_SERVICE};
use protobuf::rt::WireType;
use protobuf::Message;

use crate::plugins::plugin::{Plugin, SYNCHRONIZE as METHOD};
use crate::Error;
use joining::Joining;
use nri_api::mux::TTRPC_MESSAGE_LENGTH_MAX;
use nri_api::{Container, ContainerUpdate, PodSandbox};

/// Fewest objects per message worth splitting further (upstream's floor).
const MIN_OBJECTS_PER_MESSAGE: usize = 8;

/// The size of the ttrpc request envelope carrying a payload of `payload` bytes.
fn envelope_size(payload: usize) -> usize {
    // service, method, payload, and at most 11 bytes of timeout_nano.
    field_len(PLUGIN_SERVICE.len()) + field_len(METHOD.len()) + field_len(payload) + 11
}

// `SynchronizeRequest`'s fields: `repeated PodSandbox pods`,
// `repeated Container containers`, `bool more`.
use nri_api::wire::field::{
    SYNCHRONIZE_REQUEST_CONTAINERS as CONTAINERS, SYNCHRONIZE_REQUEST_MORE as MORE,
    SYNCHRONIZE_REQUEST_PODS as PODS,
};

/// One encoding per object, in order.
pub(crate) type EncodedObjects = Vec<Vec<u8>>;

/// The runtime's state as synchronizing reads it: each object's encoded
/// size up front, so that the messages can be planned before any is
/// made, then the objects' bytes one message at a time, so that the whole
/// encoded state never has to exist at once.
pub trait StateSource: Sync {
    /// How many pods and containers there are.
    fn counts(&self) -> (usize, usize);
    /// The encoded size of pod `i` (its bytes, without tag and length).
    fn pod_len(&self, i: usize) -> usize;
    /// The encoded size of container `i`.
    fn container_len(&self, i: usize) -> usize;
    /// Appends to `out` the `SynchronizeRequest` fields carrying these
    /// pods, then these containers (without `more`): `len` bytes by the
    /// sizes given, for which `out` has room.
    fn encode(
        &self,
        pods: Range<usize>,
        containers: Range<usize>,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Error>;
}

/// The runtime's state as plugins receive it: each pod and container as its
/// encoded bytes. Synchronizing forwards these bytes into its messages and
/// never decodes them, however many plugins are synchronized.
#[derive(Default)]
pub struct EncodedState<'a> {
    pods: Vec<&'a [u8]>,
    containers: Vec<&'a [u8]>,
}

impl<'a> EncodedState<'a> {
    /// The objects of an encoded `SynchronizeRequest`, found by walking its
    /// top-level fields only: how the C ABI receives the state. Its framing
    /// is checked; the objects' contents are not (the plugins decode them).
    /// `more` and unknown fields are dropped, as decoding would. A pods or
    /// containers field with another wire type than length-delimited is
    /// an unknown field to protobuf decoders (Go's and rust-protobuf's),
    /// so it is skipped here too: `split` accepts whatever they accept.
    pub fn split(buf: &'a [u8]) -> protobuf::Result<Self> {
        let mut state = EncodedState::default();
        let mut is = protobuf::CodedInputStream::from_bytes(buf);
        while let Some(tag) = is.read_raw_tag_or_eof()? {
            let (field, wire_type) = match (tag >> 3, WireType::new(tag & 7)) {
                (0, _) | (_, None) => return Err(malformed(format!("invalid tag {tag}"))),
                (field, Some(wire_type)) => (field, wire_type),
            };
            let list = match (field, wire_type) {
                (PODS, WireType::LengthDelimited) => &mut state.pods,
                (CONTAINERS, WireType::LengthDelimited) => &mut state.containers,
                (_, WireType::StartGroup) => {
                    skip_group(&mut is)?;
                    continue;
                }
                _ => {
                    is.skip_field(wire_type)?;
                    continue;
                }
            };
            let len = is.read_raw_varint32()?;
            let start = is.pos() as usize;
            is.skip_raw_bytes(len)?;
            list.push(&buf[start..start + len as usize]);
        }
        Ok(state)
    }

    /// The state of these objects, each encoded once (the Rust API's form).
    pub(crate) fn encode(
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> protobuf::Result<(EncodedObjects, EncodedObjects)> {
        fn each<M: Message>(objs: &[M]) -> protobuf::Result<EncodedObjects> {
            objs.iter().map(M::write_to_bytes).collect()
        }
        Ok((each(pods)?, each(containers)?))
    }

    /// The pods' encodings, in order (fuzzing hook).
    #[cfg(feature = "fuzzing")]
    #[doc(hidden)]
    pub fn pods(&self) -> &[&'a [u8]] {
        &self.pods
    }

    /// The containers' encodings, in order (fuzzing hook).
    #[cfg(feature = "fuzzing")]
    #[doc(hidden)]
    pub fn containers(&self) -> &[&'a [u8]] {
        &self.containers
    }

    /// The `SynchronizeRequest` synchronizing would send for all of these
    /// objects in one message (fuzzing hook).
    #[cfg(feature = "fuzzing")]
    #[doc(hidden)]
    pub fn to_message(&self, more: bool) -> Vec<u8> {
        message(&self.pods, &self.containers, more)
    }

    pub(crate) fn new(pods: &'a [Vec<u8>], containers: &'a [Vec<u8>]) -> Self {
        EncodedState {
            pods: pods.iter().map(Vec::as_slice).collect(),
            containers: containers.iter().map(Vec::as_slice).collect(),
        }
    }
}

impl StateSource for EncodedState<'_> {
    fn counts(&self) -> (usize, usize) {
        (self.pods.len(), self.containers.len())
    }

    fn pod_len(&self, i: usize) -> usize {
        self.pods[i].len()
    }

    fn container_len(&self, i: usize) -> usize {
        self.containers[i].len()
    }

    fn encode(
        &self,
        pods: Range<usize>,
        containers: Range<usize>,
        _len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        put_fields(out, &self.pods[pods], &self.containers[containers]);
        Ok(())
    }
}

/// Skips an unknown top-level group the way decoding a message does: its
/// fields up to its end-group tag, which must come before the input ends.
/// (`CodedInputStream::skip_field` would take the end of the input for
/// the end of the group, which decoding refuses.)
fn skip_group(is: &mut protobuf::CodedInputStream) -> protobuf::Result<()> {
    loop {
        let tag = is
            .read_raw_tag_or_eof()?
            .ok_or_else(|| malformed("group without its end".into()))?;
        match (tag >> 3, WireType::new(tag & 7)) {
            (0, _) | (_, None) => return Err(malformed(format!("invalid tag {tag}"))),
            (_, Some(WireType::EndGroup)) => return Ok(()),
            (_, Some(wire_type)) => is.skip_field(wire_type)?,
        }
    }
}

fn malformed(what: String) -> protobuf::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what).into()
}

/// The encoded `SynchronizeRequest` carrying these objects: byte for byte
/// what encoding the decoded message would give.
#[cfg(any(test, feature = "fuzzing"))]
fn message(pods: &[&[u8]], containers: &[&[u8]], more: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload_size(pods, containers, more));
    put_fields(&mut out, pods, containers);
    if more {
        out.extend(MORE_FIELD);
    }
    out
}

/// `more = true`, encoded: how an intermediate message ends.
const MORE_FIELD: [u8; 2] = [(MORE << 3) as u8, 1];

/// Appends the pods and containers fields of a `SynchronizeRequest`.
fn put_fields(out: &mut Vec<u8>, pods: &[&[u8]], containers: &[&[u8]]) {
    for p in pods {
        put_field(out, PODS, p);
    }
    for c in containers {
        put_field(out, CONTAINERS, c);
    }
}

/// Appends a length-delimited field (tag, varint length, bytes).
fn put_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    out.push((field << 3 | 2) as u8);
    let mut len = bytes.len() as u64;
    while len >= 0x80 {
        out.push(len as u8 | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    out.extend_from_slice(bytes);
}

/// The encoded size of a `SynchronizeRequest` holding these objects (field
/// tags below 16: one byte each).
fn payload_size(pods: &[&[u8]], containers: &[&[u8]], more: bool) -> usize {
    pods.iter()
        .chain(containers)
        .map(|o| field_len(o.len()))
        .sum::<usize>()
        + if more { 2 } else { 0 }
}

/// Why synchronizing a plugin failed.
pub(crate) enum SyncError {
    /// The plugin failed it, or could not be sent it.
    Plugin(Error),
    /// The runtime's state could not be encoded: no plugin could be
    /// synchronized with it.
    State(Error),
}

impl From<SyncError> for Error {
    fn from(e: SyncError) -> Error {
        match e {
            SyncError::Plugin(e) | SyncError::State(e) => e,
        }
    }
}

/// Sends the state to `plugin` and returns the updates of its final reply.
/// Everything goes in one message if it fits; otherwise in chunks whose
/// size shrinks as upstream's do ([`Plan`]). Each message is made while
/// the plugin reads the one before, so at most two exist at a time. One
/// deadline, the plugin's sync timeout for the objects sent
/// ([`Plugin::sync_timeout`]), covers all messages.
pub(crate) async fn synchronize(
    plugin: &Plugin,
    state: &dyn StateSource,
    recorder: Option<&dyn SyncRecorder>,
    joining: Option<&Joining>,
) -> Result<Vec<ContainerUpdate>, SyncError> {
    let (pods, ctrs) = state.counts();
    let timeout = plugin.sync_timeout(pods.saturating_add(ctrs));
    let deadline = tokio::time::Instant::now() + timeout;
    let mut plan = Plan::new(state, plugin.message_limit());
    let mut chunk = plan.next().map_err(SyncError::Plugin)?;
    let mut msg = chunk.encode(state).map_err(SyncError::State)?;
    loop {
        if let Some(joining) = joining {
            joining.saw(&msg);
        }
        let send = plugin.send_synchronize(msg, deadline);
        tokio::pin!(send);
        // Its first poll hands the request to the connection's writer, so
        // the plugin reads it while the next message is made here. That
        // one's errors wait for this reply, as they would unpipelined.
        let sent = futures::poll!(send.as_mut());
        let following = if chunk.more {
            Some(plan.next().map_err(SyncError::Plugin).and_then(|next| {
                let msg = next.encode(state).map_err(SyncError::State)?;
                Ok((next, msg))
            }))
        } else {
            None
        };
        let rpl = match sent {
            Poll::Ready(rpl) => rpl,
            Poll::Pending => send.await,
        }
        .map_err(SyncError::Plugin)?;
        let Some(following) = following else {
            if let Some(recorder) = recorder {
                recorder.synchronized(plugin, &rpl.update).await;
            }
            return Ok(rpl.update);
        };
        if !rpl.more || !rpl.update.is_empty() {
            return Err(SyncError::Plugin(Error::Start(
                "plugin does not handle split sync requests".to_string(),
            )));
        }
        (chunk, msg) = following?;
    }
}

/// The messages of one plugin's sync, planned from the objects' sizes
/// alone: upstream's first message carries everything; a message that
/// would exceed the limit is planned again with the counts shrunk
/// ([`smaller_chunks`]); each message carries the next pods and the next
/// containers of those counts, until none remain.
struct Plan {
    /// `pods_at[i]`: the bytes the fields of the first `i` pods take.
    pods_at: Vec<usize>,
    ctrs_at: Vec<usize>,
    /// The first pod and container no message carries yet.
    from: (usize, usize),
    per_msg: (usize, usize),
    limit: usize,
}

/// One message of a sync: which objects it carries, and whether more follow.
#[derive(Debug, PartialEq)]
struct Chunk {
    pods: Range<usize>,
    containers: Range<usize>,
    more: bool,
}

impl Plan {
    fn new(state: &dyn StateSource, limit: usize) -> Plan {
        fn sums(n: usize, len: impl Fn(usize) -> usize) -> Vec<usize> {
            let mut at = Vec::with_capacity(n + 1);
            at.push(0);
            for i in 0..n {
                at.push(at[i] + field_len(len(i)));
            }
            at
        }
        let (pods, ctrs) = state.counts();
        Plan {
            pods_at: sums(pods, |i| state.pod_len(i)),
            ctrs_at: sums(ctrs, |i| state.container_len(i)),
            from: (0, 0),
            per_msg: (pods, ctrs),
            limit,
        }
    }

    /// The first message, then the one after each with `more`.
    fn next(&mut self) -> Result<Chunk, Error> {
        let (p0, c0) = self.from;
        let (pods, ctrs) = (self.pods_at.len() - 1 - p0, self.ctrs_at.len() - 1 - c0);
        loop {
            // Shrinking truncates: a count of 0 would never send that kind
            // of object and loop until the deadline (upstream does), so at
            // least 1.
            let np = self.per_msg.0.max(1).min(pods);
            let nc = self.per_msg.1.max(1).min(ctrs);
            let more = np < pods || nc < ctrs;
            let payload = self.pods_at[p0 + np] - self.pods_at[p0] + self.ctrs_at[c0 + nc]
                - self.ctrs_at[c0]
                + if more { MORE_FIELD.len() } else { 0 };
            let size = envelope_size(payload);
            if size > self.limit {
                self.per_msg = smaller_chunks(np, nc, size)?;
                continue;
            }
            self.from = (p0 + np, c0 + nc);
            return Ok(Chunk {
                pods: p0..p0 + np,
                containers: c0..c0 + nc,
                more,
            });
        }
    }
}

impl Chunk {
    /// This message's bytes, from the state, checked: exactly the objects
    /// planned, of the sizes given, so that what a plugin is sent frames
    /// as the plan says whoever encoded it.
    fn encode(&self, state: &dyn StateSource) -> Result<Vec<u8>, Error> {
        let (pods, ctrs) = (self.pods.clone(), self.containers.clone());
        let len = pods
            .clone()
            .map(|i| field_len(state.pod_len(i)))
            .sum::<usize>()
            + ctrs
                .clone()
                .map(|i| field_len(state.container_len(i)))
                .sum::<usize>();
        let mut msg = Vec::with_capacity(len + MORE_FIELD.len());
        state.encode(pods.clone(), ctrs.clone(), len, &mut msg)?;
        let framed = EncodedState::split(&msg).is_ok_and(|got| {
            got.pods.len() == pods.len()
                && got.containers.len() == ctrs.len()
                && got
                    .pods
                    .iter()
                    .zip(pods.clone())
                    .all(|(o, i)| o.len() == state.pod_len(i))
                && got
                    .containers
                    .iter()
                    .zip(ctrs.clone())
                    .all(|(o, i)| o.len() == state.container_len(i))
                && msg.len() == payload_size(&got.pods, &got.containers, false)
        });
        if !framed {
            return Err(Error::InvalidMessage(format!(
                "invalid SynchronizeRequest: the encoding of pods {pods:?} and containers \
                 {ctrs:?} does not hold those objects at the sizes given for them"
            )));
        }
        if self.more {
            msg.extend(MORE_FIELD);
        }
        Ok(msg)
    }
}

/// Where the updates a plugin asked for in its sync are recorded: the
/// audit log, when the runtime keeps one.
pub(crate) trait SyncRecorder: Send + Sync {
    fn synchronized<'a>(
        &'a self,
        plugin: &'a Plugin,
        updates: &'a [ContainerUpdate],
    ) -> futures::future::BoxFuture<'a, ()>;
}

/// What is done with a joining plugin as soon as it has answered its
/// Synchronize, within the runtime's sync: replaying what it missed and
/// making it active, so that the runtime's changes after its snapshot reach
/// it as events.
pub(crate) type OnSynchronized = Box<
    dyn Fn(Arc<Joining>) -> futures::future::BoxFuture<'static, Result<(), Error>> + Send + Sync,
>;

/// The plugins a [`SyncCb`](crate::SyncCb) synchronizes, and how their
/// failures count.
pub(crate) enum SyncTargets {
    /// A plugin that connected on its own: its failure is the sync's
    /// failure. The hook runs as soon as it answered.
    External(Arc<Joining>, OnSynchronized),
    /// The plugins started together: one that fails is closed, and the
    /// others go on.
    Started(Vec<Arc<Plugin>>),
}

impl SyncTargets {
    pub(crate) async fn synchronize(
        &self,
        state: &dyn StateSource,
        recorder: Option<&dyn SyncRecorder>,
    ) -> Result<Vec<ContainerUpdate>, Error> {
        let plugins = match self {
            SyncTargets::External(joining, then) => {
                let updates = synchronize(&joining.plugin, state, recorder, Some(joining)).await?;
                then(Arc::clone(joining)).await?;
                return Ok(updates);
            }
            SyncTargets::Started(plugins) => plugins,
        };
        let mut updates = Vec::new();
        for p in plugins {
            match synchronize(p, state, recorder, None).await {
                Ok(u) => updates.extend(u),
                Err(SyncError::Plugin(e)) => {
                    warn!(
                        "failed to synchronize plugin {}: {}",
                        p.qualified_name(),
                        crate::error::peer_text(&e)
                    );
                    p.close();
                }
                // Not this plugin's doing, and no other plugin's sync
                // would go better.
                Err(SyncError::State(e)) => return Err(e),
            }
        }
        Ok(updates)
    }
}

/// The next per-message counts after a message of `size` bytes carrying
/// `pods` + `ctrs` objects was too large.
fn smaller_chunks(pods: usize, ctrs: usize, size: usize) -> Result<(usize, usize), Error> {
    if pods + ctrs <= MIN_OBJECTS_PER_MESSAGE {
        return Err(Error::Start(
            "failed to synchronize plugin with split messages".to_string(),
        ));
    }
    let factor = (TTRPC_MESSAGE_LENGTH_MAX as f64 / size as f64).min(0.9);
    let (p, c) = (
        (pods as f64 * factor) as usize,
        (ctrs as f64 * factor) as usize,
    );
    // Upstream then slices 4 pods even if fewer remain; the caller clamps.
    Ok(if p + c < MIN_OBJECTS_PER_MESSAGE {
        (4, 4)
    } else {
        (p, c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_api::SynchronizeRequest;

    #[test]
    fn chunks_shrink_by_at_most_ninety_percent() {
        assert_eq!(
            smaller_chunks(100, 1000, 2 * TTRPC_MESSAGE_LENGTH_MAX).unwrap(),
            (50, 500)
        );
        assert_eq!(
            smaller_chunks(100, 1000, TTRPC_MESSAGE_LENGTH_MAX + 1).unwrap(),
            (90, 900)
        );
    }

    #[test]
    fn chunks_never_go_below_four_and_four() {
        assert_eq!(
            smaller_chunks(2, 10, 100 * TTRPC_MESSAGE_LENGTH_MAX).unwrap(),
            (4, 4)
        );
        let err = smaller_chunks(4, 4, 2 * TTRPC_MESSAGE_LENGTH_MAX).unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to synchronize plugin with split messages"
        );
    }

    fn state() -> (Vec<PodSandbox>, Vec<Container>) {
        let pods = (0..3)
            .map(|i| PodSandbox {
                id: format!("pod-{i}").repeat(40 * i + 1),
                ..Default::default()
            })
            .collect();
        let ctrs = (0..5)
            .map(|i| Container {
                id: "c".repeat(100 * i),
                pod_sandbox_id: "pod-0".into(),
                args: vec!["x".repeat(200); i],
                ..Default::default()
            })
            .collect();
        (pods, ctrs)
    }

    #[test]
    fn a_message_is_what_encoding_the_request_gives() {
        let (pods, ctrs) = state();
        let (p, c) = EncodedState::encode(&pods, &ctrs).unwrap();
        let st = EncodedState::new(&p, &c);
        for more in [false, true] {
            let want = SynchronizeRequest {
                pods: pods.clone(),
                containers: ctrs.clone(),
                more,
                ..Default::default()
            }
            .write_to_bytes()
            .unwrap();
            let got = message(&st.pods, &st.containers, more);
            assert_eq!(got, want);
            assert_eq!(payload_size(&st.pods, &st.containers, more), want.len());
        }
    }

    #[test]
    fn split_finds_every_object_without_decoding_it() {
        let (pods, ctrs) = state();
        let mut buf = SynchronizeRequest {
            pods: pods.clone(),
            containers: ctrs.clone(),
            more: true,
            ..Default::default()
        }
        .write_to_bytes()
        .unwrap();
        // An unknown varint field and an unknown length-delimited one.
        buf.extend([9 << 3, 42, 10 << 3 | 2, 2, b'h', b'i']);
        let st = EncodedState::split(&buf).unwrap();
        assert_eq!((st.pods.len(), st.containers.len()), (3, 5));
        let again = SynchronizeRequest::parse_from_bytes(&message(&st.pods, &st.containers, false))
            .unwrap();
        assert_eq!(again.pods, pods);
        assert_eq!(again.containers, ctrs);
        assert!(!again.more);
        // Objects are slices of the caller's buffer, not copies.
        let range = buf.as_ptr_range();
        assert!(st
            .pods
            .iter()
            .chain(&st.containers)
            .all(|o| range.contains(&o.as_ptr())));
    }

    #[test]
    fn split_refuses_broken_framing() {
        let (pods, ctrs) = state();
        let good = SynchronizeRequest {
            pods,
            containers: ctrs,
            ..Default::default()
        }
        .write_to_bytes()
        .unwrap();
        for (what, bad) in [
            ("truncated", good[..good.len() - 1].to_vec()),
            ("length past the end", vec![(PODS as u8 * 8) | 2, 100, 1, 2]),
            ("a varint pods field cut short", vec![PODS as u8 * 8, 0x80]),
            ("field number 0", vec![2, 0]),
            ("unterminated varint", vec![0xff; 11]),
        ] {
            assert!(EncodedState::split(&bad).is_err(), "{what} accepted");
        }
        assert!(EncodedState::split(&[]).unwrap().pods.is_empty());
    }

    /// Found by the `sync_split` fuzz target: protobuf decoding takes a
    /// pods or containers field of another wire type for an unknown
    /// field, and split refused the whole state for it.
    #[test]
    fn split_skips_a_known_field_of_another_wire_type_as_decoding_does() {
        let (pods, _) = state();
        let mut buf = SynchronizeRequest {
            pods: pods.clone(),
            ..Default::default()
        }
        .write_to_bytes()
        .unwrap();
        // pods as a varint, containers as a fixed32 and as a fixed64.
        buf.extend([PODS as u8 * 8, 1, (CONTAINERS as u8 * 8) | 5, 1, 2, 3, 4]);
        buf.extend([(CONTAINERS as u8 * 8) | 1, 1, 2, 3, 4, 5, 6, 7, 8]);
        let decoded = SynchronizeRequest::parse_from_bytes(&buf).unwrap();
        let st = EncodedState::split(&buf).unwrap();
        assert_eq!((st.pods.len(), st.containers.len()), (3, 0));
        let again = SynchronizeRequest::parse_from_bytes(&message(&st.pods, &st.containers, false))
            .unwrap();
        assert_eq!(again.pods, decoded.pods);
        assert!(again.containers.is_empty() && decoded.containers.is_empty());
    }

    /// Found by the `sync_split` fuzz target (the input `k`: field 13 opens
    /// a group and the input ends): decoding refuses a group without its
    /// end, split took the end of the input for it.
    #[test]
    fn split_refuses_an_unknown_group_without_its_end_as_decoding_does() {
        let (pods, _) = state();
        let good = SynchronizeRequest {
            pods,
            ..Default::default()
        }
        .write_to_bytes()
        .unwrap();
        let open = |field: u8| (field << 3) | 3;
        let close = |field: u8| (field << 3) | 4;
        for (what, tail, ok) in [
            ("only the start", vec![open(13)], false),
            ("a field, no end", vec![open(13), 8, 1], false),
            (
                "a nested group ended by the input",
                vec![open(13), open(14), close(14)],
                false,
            ),
            ("a stray end", vec![close(13)], false),
            ("a whole group", vec![open(13), 8, 1, close(13)], true),
            (
                "nested groups",
                vec![open(13), open(14), close(14), close(13)],
                true,
            ),
        ] {
            let buf = [&good[..], &tail].concat();
            let decoded = SynchronizeRequest::parse_from_bytes(&buf);
            assert_eq!(decoded.is_ok(), ok, "{what}: decoding");
            assert_eq!(EncodedState::split(&buf).is_ok(), ok, "{what}: split");
        }
    }

    /// Found by the `sync_split` fuzz target: rust-protobuf 3.7 decodes a
    /// message whose last object claims more bytes than are left as if
    /// the object ended there (Go's decoder says "unexpected EOF"). Split
    /// keeps refusing it: forwarding a cut object would hand the plugin
    /// bytes that do not frame.
    #[test]
    fn split_refuses_a_last_object_cut_short_that_rust_protobuf_takes() {
        let cut = [(PODS as u8 * 8) | 2, 42, 8, 1, 8, 2];
        assert!(
            SynchronizeRequest::parse_from_bytes(&cut).is_ok(),
            "rust-protobuf now refuses a cut-short object: the fuzz target's exception can go"
        );
        assert!(EncodedState::split(&cut).is_err());
    }

    /// Upstream's chunking as nri-rs did it before plans: each message made
    /// whole, then measured, its counts shrunk while it is too large.
    fn chunks_by_making_each(st: &EncodedState<'_>, limit: usize) -> Vec<Chunk> {
        let (total_p, total_c) = (st.pods.len(), st.containers.len());
        let (mut p0, mut c0) = (0, 0);
        let (mut pp, mut pc) = (total_p, total_c);
        let mut out = Vec::new();
        loop {
            let np = pp.max(1).min(total_p - p0);
            let nc = pc.max(1).min(total_c - c0);
            let more = p0 + np < total_p || c0 + nc < total_c;
            let msg = message(&st.pods[p0..p0 + np], &st.containers[c0..c0 + nc], more);
            let size = envelope_size(msg.len());
            if size > limit {
                match smaller_chunks(np, nc, size) {
                    Ok(counts) => (pp, pc) = counts,
                    Err(_) => return out,
                }
                continue;
            }
            out.push(Chunk {
                pods: p0..p0 + np,
                containers: c0..c0 + nc,
                more,
            });
            (p0, c0) = (p0 + np, c0 + nc);
            if !more {
                return out;
            }
        }
    }

    fn planned(st: &EncodedState<'_>, limit: usize) -> Vec<Chunk> {
        let mut plan = Plan::new(st, limit);
        let mut out = Vec::new();
        while let Ok(chunk) = plan.next() {
            let more = chunk.more;
            out.push(chunk);
            if !more {
                break;
            }
        }
        out
    }

    #[test]
    fn a_plan_from_sizes_is_the_chunking_of_whole_messages() {
        // Objects of uneven sizes (a few above 127 bytes, whose length
        // takes two bytes), limits from "everything fits" down to "nothing
        // splits small enough".
        let objects = |n: usize, seed: usize| -> Vec<Vec<u8>> {
            (0..n).map(|i| vec![7; (i * 37 + seed) % 300]).collect()
        };
        let mut split = 0;
        for (pods, ctrs) in [(0, 0), (1, 0), (0, 3), (40, 0), (7, 90), (60, 60), (3, 200)] {
            let (p, c) = (objects(pods, 5), objects(ctrs, 11));
            let st = EncodedState::new(&p, &c);
            let whole = envelope_size(payload_size(&st.pods, &st.containers, false));
            for limit in [
                usize::MAX,
                whole,
                whole - 1,
                whole / 2,
                whole / 5,
                2_000,
                700,
                100,
            ] {
                let want = chunks_by_making_each(&st, limit);
                assert_eq!(
                    planned(&st, limit),
                    want,
                    "{pods} pods, {ctrs} containers, limit {limit}"
                );
                split += usize::from(want.len() > 1);
                // Every chunk is sent whole: what the plan says it holds.
                for chunk in &want {
                    let msg = chunk.encode(&st).unwrap();
                    let again = message(
                        &st.pods[chunk.pods.clone()],
                        &st.containers[chunk.containers.clone()],
                        chunk.more,
                    );
                    assert_eq!(msg, again);
                }
            }
        }
        assert!(split >= 10, "only {split} states were split");
    }

    /// How a lying encoder changes a message's bytes.
    type Garble = fn(&mut Vec<u8>);

    /// A state whose encoder does not give what its sizes promise.
    struct Lying<'a> {
        honest: EncodedState<'a>,
        garble: Garble,
    }

    impl StateSource for Lying<'_> {
        fn counts(&self) -> (usize, usize) {
            self.honest.counts()
        }
        fn pod_len(&self, i: usize) -> usize {
            self.honest.pod_len(i)
        }
        fn container_len(&self, i: usize) -> usize {
            self.honest.container_len(i)
        }
        fn encode(
            &self,
            pods: Range<usize>,
            containers: Range<usize>,
            len: usize,
            out: &mut Vec<u8>,
        ) -> Result<(), Error> {
            self.honest.encode(pods, containers, len, out)?;
            (self.garble)(out);
            Ok(())
        }
    }

    #[test]
    fn a_message_that_does_not_hold_what_the_sizes_say_is_refused() {
        let (pods, ctrs) = state();
        let (p, c) = EncodedState::encode(&pods, &ctrs).unwrap();
        let garbles: [(&str, Garble); 6] = [
            ("one byte short", |m| {
                m.pop();
            }),
            ("an unknown field after the objects", |m| {
                m.extend([9 << 3, 1])
            }),
            ("`more` set by the encoder", |m| m.extend(MORE_FIELD)),
            ("the last container left out", |m| {
                let n = m.len() - field_len(400);
                m.truncate(n);
            }),
            ("an object one byte longer, the next shorter", |m| {
                // pod 0 is 6 bytes ("pod-0"), pod 1 46: move a byte.
                assert_eq!(&m[..2], [(PODS as u8) << 3 | 2, 7]);
                m[1] = 8;
                m[10] -= 1;
            }),
            ("garbage", |m| m.iter_mut().for_each(|b| *b = 0xff)),
        ];
        for (what, garble) in garbles {
            let lying = Lying {
                honest: EncodedState::new(&p, &c),
                garble,
            };
            let chunk = Plan::new(&lying, usize::MAX).next().unwrap();
            let err = chunk.encode(&lying).expect_err(what);
            assert!(
                matches!(&err, Error::InvalidMessage(m) if m.contains("does not hold those objects")),
                "{what}: {err}"
            );
        }
        // And the honest one passes.
        let st = EncodedState::new(&p, &c);
        Plan::new(&st, usize::MAX)
            .next()
            .unwrap()
            .encode(&st)
            .unwrap();
    }

    #[test]
    fn envelope_size_bounds_the_ttrpc_request() {
        for n in [0, 100, 5000, 300_000] {
            let req = ttrpc::Request {
                service: PLUGIN_SERVICE.into(),
                method: METHOD.into(),
                payload: vec![7; n],
                timeout_nano: i64::MAX,
                ..Default::default()
            };
            let len = req.write_to_bytes().unwrap().len();
            assert!(len <= envelope_size(n), "{len} > {}", envelope_size(n));
            assert!(len + 11 >= envelope_size(n));
        }
    }
}
