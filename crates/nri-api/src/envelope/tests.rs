use protobuf::Message;

use super::*;

/// An envelope with everything a ttrpc writer may put in one: metadata,
/// and fields this version does not know, in every wire type.
fn rich_request() -> Vec<u8> {
    let mut req = ttrpc::Request::new();
    req.service = "nri.pkg.api.v1alpha1.Plugin".into();
    req.method = "CreateContainer".into();
    req.payload = (0..300u32).map(|i| (i * 7) as u8).collect();
    req.timeout_nano = 2_000_000_000;
    let mut kv = ttrpc::proto::KeyValue::new();
    kv.key = "k".into();
    kv.value = "v".into();
    req.metadata.push(kv);
    let mut bytes = req.write_to_bytes().unwrap();
    let mut os_bytes = Vec::new();
    {
        let mut os = CodedOutputStream::vec(&mut os_bytes);
        os.write_uint64(9, 77).unwrap();
        os.write_fixed32(10, 5).unwrap();
        os.write_fixed64(11, 6).unwrap();
        os.write_string(12, "unknown").unwrap();
        // Field 1 as a varint: an unknown field to rust-protobuf.
        os.write_uint64(1, 3).unwrap();
        // A group, which no ttrpc writes and decoders skip.
        os.write_tag(13, protobuf::rt::WireType::StartGroup)
            .unwrap();
        os.write_uint64(1, 1).unwrap();
        os.write_tag(13, protobuf::rt::WireType::EndGroup).unwrap();
        os.flush().unwrap();
    }
    bytes.extend(os_bytes);
    bytes
}

/// What rust-protobuf's decoding of the same bytes gives, in our terms.
fn reference(bytes: &[u8]) -> Option<(String, String, Vec<u8>, i64)> {
    let req = ttrpc::Request::parse_from_bytes(bytes).ok()?;
    Some((req.service, req.method, req.payload, req.timeout_nano))
}

fn ours(bytes: &[u8]) -> Option<(String, String, Vec<u8>, i64)> {
    let req = Request::parse(bytes).ok()?;
    Some((
        req.service.to_string(),
        req.method.to_string(),
        req.payload.to_vec(),
        req.timeout_nano,
    ))
}

#[test]
fn a_request_decodes_as_rust_protobuf_decodes_it() {
    let bytes = rich_request();
    let expected = reference(&bytes).expect("the reference decodes it");
    assert_eq!(ours(&bytes), Some(expected));
}

#[test]
fn truncated_and_mutated_requests_are_accepted_and_refused_as_by_rust_protobuf() {
    let bytes = rich_request();
    for end in 0..bytes.len() {
        assert_eq!(
            ours(&bytes[..end]),
            reference(&bytes[..end]),
            "cut at {end}"
        );
    }
    let mut differing = 0;
    for at in 0..bytes.len() {
        for value in [
            0x00, 0x01, 0x07, 0x0a, 0x12, 0x1a, 0x20, 0x7f, 0x80, 0xc3, 0xff,
        ] {
            let mut mutated = bytes.clone();
            mutated[at] = value;
            let want = reference(&mutated);
            differing += usize::from(want.is_none());
            assert_eq!(ours(&mutated), want, "byte {at} set to {value:#x}");
        }
    }
    assert!(
        differing > 100,
        "the mutations should refuse some envelopes"
    );
}

#[test]
fn a_field_given_twice_takes_its_last_value() {
    let mut bytes = encode_request(1, "first", "m", b"one", 5).unwrap();
    let tail = encode_request(1, "second", "n", b"", 0).unwrap();
    let mut body = bytes.split_off(TTRPC_HEADER_LEN);
    body.extend_from_slice(&tail[TTRPC_HEADER_LEN..]);
    let req = Request::parse(&body).unwrap();
    assert_eq!(
        (req.service, req.method, req.payload, req.timeout_nano),
        ("second", "n", &b"one"[..], 5)
    );
    assert_eq!(ours(&body), reference(&body));
}

#[test]
fn an_encoded_request_is_a_header_and_the_envelope_rust_protobuf_reads() {
    let msg = encode_request(7, "svc", "Method", b"payload", 42).unwrap();
    let head = Header::parse(msg[..TTRPC_HEADER_LEN].try_into().unwrap());
    assert_eq!(
        head,
        Header {
            len: msg.len() - TTRPC_HEADER_LEN,
            stream: 7,
            kind: MESSAGE_TYPE_REQUEST,
            flags: 0
        }
    );
    let req = ttrpc::Request::parse_from_bytes(&msg[TTRPC_HEADER_LEN..]).unwrap();
    assert_eq!(
        (req.service.as_str(), req.method.as_str()),
        ("svc", "Method")
    );
    assert_eq!(
        (req.payload.as_slice(), req.timeout_nano),
        (&b"payload"[..], 42)
    );
}

#[test]
fn a_request_over_the_limit_is_refused_in_ttrpcs_words() {
    let payload = vec![0u8; TTRPC_MESSAGE_LENGTH_MAX];
    let err = encode_request(1, "s", "m", &payload, 0).unwrap_err();
    let ttrpc::Error::Others(text) = err else {
        panic!("{err:?}")
    };
    assert!(text.starts_with("message length 41943"), "{text}");
    assert!(
        text.ends_with("exceed maximum message size of 4194304"),
        "{text}"
    );
}

fn response_of(msg: &[u8], stream: u32) -> ttrpc::Response {
    let head = Header::parse(msg[..TTRPC_HEADER_LEN].try_into().unwrap());
    assert_eq!(
        (head.stream, head.kind, head.len),
        (stream, MESSAGE_TYPE_RESPONSE, msg.len() - TTRPC_HEADER_LEN)
    );
    ttrpc::Response::parse_from_bytes(&msg[TTRPC_HEADER_LEN..]).unwrap()
}

#[test]
fn a_reply_goes_with_an_empty_status_as_ttrpc_sends_it() {
    let mut reply = crate::CreateContainerResponse::new();
    reply
        .adjust
        .mut_or_insert_default()
        .add_annotation("a", "b");
    let msg = encode_response(3, Ok(&reply));
    let rsp = response_of(&msg, 3);
    // An empty status is on the wire (Go's and ttrpc-rust's servers send
    // one), and it says OK.
    assert_eq!(&msg[TTRPC_HEADER_LEN..TTRPC_HEADER_LEN + 2], &[0x0a, 0x00]);
    assert_eq!(rsp.status.code(), ttrpc::Code::OK);
    assert_eq!(rsp.payload, reply.write_to_bytes().unwrap());
    assert_eq!(
        decode_response(&msg[TTRPC_HEADER_LEN..]).unwrap(),
        rsp.payload
    );
}

#[test]
fn a_failure_goes_as_its_status() {
    let status = ttrpc::get_status(ttrpc::Code::UNKNOWN, "the handler failed");
    let msg = encode_response::<crate::Empty>(5, Err(&status));
    let rsp = response_of(&msg, 5);
    assert_eq!(rsp.status.unwrap(), status);
    assert!(rsp.payload.is_empty());
    let err = decode_response(&msg[TTRPC_HEADER_LEN..]).unwrap_err();
    assert_eq!(err, ttrpc::Error::RpcStatus(status));
}

#[test]
fn a_reply_over_the_limit_is_answered_with_ttrpcs_refusal() {
    let mut reply = crate::CreateContainerResponse::new();
    reply
        .adjust
        .mut_or_insert_default()
        .add_annotation("big", "x".repeat(TTRPC_MESSAGE_LENGTH_MAX));
    let msg = encode_response(9, Ok(&reply));
    let status = response_of(&msg, 9).status.unwrap();
    assert_eq!(status.code(), ttrpc::Code::INVALID_ARGUMENT);
    assert!(
        status.message.starts_with("message length "),
        "{}",
        status.message
    );
    assert!(status
        .message
        .ends_with(" exceed maximum message size of 4194304"));

    let huge = ttrpc::get_status(ttrpc::Code::UNKNOWN, "y".repeat(TTRPC_MESSAGE_LENGTH_MAX));
    let msg = encode_response::<crate::Empty>(11, Err(&huge));
    let status = response_of(&msg, 11).status.unwrap();
    assert_eq!(status.code(), ttrpc::Code::INVALID_ARGUMENT);
}
