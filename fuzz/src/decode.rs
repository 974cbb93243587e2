//! Every decoder of bytes a plugin sends the runtime: the ttrpc envelopes,
//! the plugin's requests to the Runtime service and its replies to each
//! event, and the checks the runtime makes on what they carry.

use nri_api::*;
use protobuf::Message;

/// Parses `bytes` as `M`; what parses must survive re-encoding unchanged.
fn roundtrip<M: Message + PartialEq>(bytes: &[u8]) -> Option<M> {
    let msg = M::parse_from_bytes(bytes).ok()?;
    let again = msg.write_to_bytes().expect("encoding a decoded message");
    assert_eq!(
        msg.compute_size() as usize,
        again.len(),
        "{}: computed size differs from the encoding",
        M::NAME
    );
    let back = M::parse_from_bytes(&again).expect("decoding a re-encoded message");
    assert!(back == msg, "{}: changed by re-encoding", M::NAME);
    Some(msg)
}

/// A plugin's request to the runtime (the Runtime service's methods).
fn requests(bytes: &[u8]) {
    if let Some(req) = roundtrip::<RegisterPluginRequest>(bytes) {
        // What the runtime checks of a registration.
        let _ = check_plugin_name(&req.plugin_name);
        let _ = check_plugin_index(&req.plugin_idx);
        let full = format!("{}-{}", req.plugin_idx, req.plugin_name);
        let _ = parse_plugin_name(&full);
    }
    if let Some(req) = roundtrip::<UpdateContainersRequest>(bytes) {
        for u in &req.update {
            let _ = u.container_id.len();
        }
    }
    roundtrip::<LogRequest>(bytes);
}

/// A plugin's reply to each request the runtime sends it.
fn replies(bytes: &[u8]) {
    if let Some(rsp) = roundtrip::<ConfigureResponse>(bytes) {
        let mask = EventMask::from_raw(rsp.events);
        let _ = (mask.invalid_bits(), mask.events().count(), mask.is_empty());
    }
    roundtrip::<SynchronizeResponse>(bytes);
    roundtrip::<Empty>(bytes);
    roundtrip::<UpdatePodSandboxResponse>(bytes);
    roundtrip::<CreateContainerResponse>(bytes);
    roundtrip::<UpdateContainerResponse>(bytes);
    roundtrip::<StopContainerResponse>(bytes);
    roundtrip::<ValidateContainerAdjustmentResponse>(bytes);
    roundtrip::<UpdateContainersResponse>(bytes);
}

/// The runtime's requests as the C ABI takes them: the check that lets the
/// core forward them undecoded must accept nothing that decoding (within
/// the input) refuses.
fn runtime_requests(bytes: &[u8]) {
    fn agrees<M: protobuf::MessageFull>(bytes: &[u8]) {
        assert_eq!(
            nri_api::wire::check::<M>(bytes).is_ok(),
            nri_api::wire::decode_within::<M>(bytes).is_ok(),
            "{}: the check and decoding disagree",
            M::NAME
        );
    }
    agrees::<CreateContainerRequest>(bytes);
    pod_kept_encoded(bytes);
    agrees::<RunPodSandboxRequest>(bytes);
    agrees::<StartContainerRequest>(bytes);
    agrees::<UpdatePodSandboxRequest>(bytes);
}

/// A CreateContainer request with its pod kept encoded, as the core keeps
/// it when several plugins take the event: the leading pods split off and
/// checked, the rest decoded, the pods merged back in for a plugin that
/// needs the message. That must be decoding the whole, or fail as it does.
fn pod_kept_encoded(bytes: &[u8]) {
    use nri_api::wire::{field::CREATE_CONTAINER_REQUEST_POD, split_leading};
    let Some((pods, rest)) =
        split_leading::<CreateContainerRequest>(bytes, CREATE_CONTAINER_REQUEST_POD)
    else {
        return; // the core decodes the whole request then
    };
    let whole = CreateContainerRequest::parse_from_bytes(bytes);
    let mut split = CreateContainerRequest::parse_from_bytes(rest);
    if let Ok(m) = &mut split {
        m.merge_from_bytes(pods).expect("checked pods merge");
    }
    match (whole, split) {
        (Ok(w), Ok(s)) => assert!(w == s, "the pod kept encoded changes the request"),
        (Err(w), Err(s)) => assert_eq!(w.to_string(), s.to_string()),
        (w, s) => panic!("whole: {w:?}; pod kept encoded: {s:?}"),
    }
}

/// Input: any bytes, parsed as every message a plugin may send and as the
/// ttrpc envelopes around them (whose payloads are parsed in turn). No
/// panic; whatever parses re-encodes to the same message.
pub fn decode(data: &[u8]) {
    requests(data);
    runtime_requests(data);
    replies(data);
    if let Some(req) = roundtrip::<::ttrpc::Request>(data) {
        requests(&req.payload);
    }
    if let Some(rsp) = roundtrip::<::ttrpc::Response>(data) {
        replies(&rsp.payload);
        let _ = rsp.status.message.len();
    }
}
