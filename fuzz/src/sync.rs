//! `nri_runtime::EncodedState::split`, the C ABI's way of reading the
//! runtime's state without decoding it, against protobuf decoding of the
//! same bytes.

use nri_api::SynchronizeRequest;
use nri_runtime::EncodedState;
use protobuf::Message;

/// Input: an encoded `SynchronizeRequest`, as a runtime hands it over.
///
/// * if protobuf decodes it, `split` accepts it, and the message made of
///   the pieces decodes to the same pods and containers;
/// * if `split` accepts it, every piece is a slice of the input, and the
///   message made of the pieces decodes exactly when the input does (the
///   framing `split` checked is all the two differ in).
pub fn sync_split(data: &[u8]) {
    let decoded = SynchronizeRequest::parse_from_bytes(data);
    let split = EncodedState::split(data);
    let st = match (&decoded, split) {
        // rust-protobuf 3.7 takes a last object whose length runs past the
        // end for a complete one; Go's decoder and split refuse it.
        (Ok(_), Err(_)) if last_field_truncated(data) => return,
        (Ok(_), Err(e)) => panic!("protobuf decodes it, split refuses it: {e}"),
        (Err(_), Err(_)) => return,
        (_, Ok(st)) => st,
    };
    let range = data.as_ptr_range();
    for piece in st.pods().iter().chain(st.containers()) {
        assert!(
            piece.is_empty() || range.contains(&piece.as_ptr()),
            "a piece that is not a slice of the input"
        );
    }
    for more in [false, true] {
        let msg = st.to_message(more);
        let again = SynchronizeRequest::parse_from_bytes(&msg);
        match (&decoded, again) {
            (Ok(want), Ok(got)) => {
                assert!(got.pods == want.pods, "pods differ after split");
                assert!(
                    got.containers == want.containers,
                    "containers differ after split"
                );
                assert_eq!(got.more, more);
            }
            (Ok(_), Err(e)) => panic!("the pieces re-encoded do not decode: {e}"),
            (Err(e), Ok(_)) => panic!("input does not decode ({e}), its pieces re-encoded do"),
            (Err(_), Err(_)) => {}
        }
    }
}

/// Whether the last top-level field is length-delimited and claims more
/// bytes than the input has left.
fn last_field_truncated(data: &[u8]) -> bool {
    let mut is = protobuf::CodedInputStream::from_bytes(data);
    loop {
        let Ok(Some(tag)) = is.read_raw_tag_or_eof() else {
            return false;
        };
        if tag & 7 != 2 {
            match protobuf::rt::WireType::new(tag & 7) {
                Some(w) if is.skip_field(w).is_ok() => continue,
                _ => return false,
            }
        }
        let Ok(len) = is.read_raw_varint64() else {
            return false;
        };
        let left = (data.len() as u64).saturating_sub(is.pos());
        if len > left {
            return true;
        }
        if is.skip_raw_bytes(len as u32).is_err() {
            return false;
        }
    }
}
