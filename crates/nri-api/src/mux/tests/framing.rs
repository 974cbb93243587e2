//! What our writers put on the trunk, checked byte by byte.

use std::collections::HashMap;
use std::io::Read;

use tokio::io::AsyncWriteExt;

use super::oracle::GoReader;
use super::{mux_and_peer, pattern, ttrpc_msg};
use crate::mux::frame::{decode_header, encode_header, ttrpc_payload_len};
use crate::mux::{Framing, MuxError, Options, MAX_PAYLOAD};

#[test]
fn constants_match_upstream() {
    assert_eq!(MAX_PAYLOAD, 4_194_314);
    assert_eq!(crate::mux::PLUGIN_SERVICE_CONN, 1);
    assert_eq!(crate::mux::RUNTIME_SERVICE_CONN, 2);
}

#[test]
fn header_layout_is_conn_id_then_length_big_endian() {
    assert_eq!(encode_header(1, 0x0004_0302), [0, 0, 0, 1, 0, 4, 3, 2]);
    assert_eq!(
        encode_header(0xA1B2_C3D4, MAX_PAYLOAD),
        [0xA1, 0xB2, 0xC3, 0xD4, 0x00, 0x40, 0x00, 0x0A]
    );
    assert_eq!(decode_header(&[0, 0, 0, 2, 0, 0, 0x10, 0]), (2, 4096));
    assert_eq!(decode_header(&[0xFF; 8]), (u32::MAX, u32::MAX));
}

#[tokio::test]
async fn raw_zero_length_write_emits_a_header_only_frame() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open_with(7, Framing::Raw).unwrap();
    assert_eq!(conn.write(&[]).await.unwrap(), 0);
    conn.flush().await.unwrap();
    let mut raw = [0u8; 8];
    tokio::io::AsyncReadExt::read_exact(&mut peer.io, &mut raw)
        .await
        .unwrap();
    assert_eq!(raw, [0, 0, 0, 7, 0, 0, 0, 0]);
}

#[tokio::test]
async fn raw_large_write_is_split_into_max_payload_frames() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open_with(3, Framing::Raw).unwrap();
    let data = pattern(1, 3 * MAX_PAYLOAD + 123);
    let expected = data.clone();
    let writer = tokio::spawn(async move {
        conn.write_all(&data).await.unwrap();
        conn.flush().await.unwrap();
        conn
    });
    let frames = peer.recv_frames(expected.len()).await;
    let sizes: Vec<usize> = frames.iter().map(|f| f.1.len()).collect();
    assert_eq!(sizes, [MAX_PAYLOAD, MAX_PAYLOAD, MAX_PAYLOAD, 123]);
    assert!(frames.iter().all(|f| f.0 == 3));
    assert_eq!(frames.concat_payloads(), expected);
    drop(writer.await.unwrap());
}

trait Payloads {
    fn concat_payloads(&self) -> Vec<u8>;
}

impl Payloads for Vec<(u32, Vec<u8>)> {
    fn concat_payloads(&self) -> Vec<u8> {
        self.iter().flat_map(|f| f.1.iter().copied()).collect()
    }
}

/// How a test writes a ttrpc message into a `Conn`.
#[derive(Clone, Copy, Debug)]
enum Pattern {
    /// ttrpc 0.10's `write_message_buffered`: header + first ≤4086 payload
    /// bytes, then the rest, then flush.
    TtrpcRust,
    /// Everything in one `write_all`.
    Whole,
    /// Dribbles of this many bytes.
    Chunks(usize),
}

async fn write_pattern(conn: &mut crate::mux::Conn, msg: &[u8], how: Pattern) {
    match how {
        Pattern::TtrpcRust => {
            let split = msg.len().min(4096);
            conn.write_all(&msg[..split]).await.unwrap();
            conn.write_all(&msg[split..]).await.unwrap();
        }
        Pattern::Whole => conn.write_all(msg).await.unwrap(),
        Pattern::Chunks(n) => {
            for chunk in msg.chunks(n) {
                conn.write_all(chunk).await.unwrap();
            }
        }
    }
    conn.flush().await.unwrap();
}

/// Writes one message of `payload_len` bytes and returns the frame sizes seen
/// on the trunk, after checking the Go oracle reads the message back intact.
async fn frames_for(payload_len: usize, how: Pattern, opts: Options) -> Vec<usize> {
    let (mux, mut peer) = mux_and_peer(opts);
    let mut conn = mux.open(1).unwrap();
    let msg = ttrpc_msg(3, 1, &pattern(payload_len as u8, payload_len));
    let total = msg.len();
    let sent = msg.clone();
    let writer = tokio::spawn(async move {
        write_pattern(&mut conn, &sent, how).await;
        conn
    });
    let frames = peer.recv_frames(total).await;
    let _conn = writer.await.unwrap();
    assert!(frames.iter().all(|f| f.0 == 1));
    let sizes = frames.iter().map(|f| f.1.len()).collect();

    let mut go = GoReader::new(frames.into_iter().map(|f| f.1));
    let (hdr, payload, _) = go.read_message().unwrap_or_else(|e| {
        panic!("Go reader rejects a {payload_len}-byte message: {e:?}");
    });
    assert_eq!(&hdr[..], &msg[..10]);
    assert_eq!(payload, &msg[10..]);
    assert!(go.is_drained());
    sizes
}

#[tokio::test]
async fn ttrpc_frames_follow_the_go_writer_for_every_boundary() {
    // (payload length, expected frame payload sizes on the trunk)
    let cases: &[(usize, &[usize])] = &[
        (0, &[10]),
        (1, &[11]),
        (4085, &[4095]),
        (4086, &[4096]),
        (4087, &[4096, 1]),
        (8182, &[4096, 4096]),
        (8183, &[4096, 4097]),
        (100_000, &[4096, 95_914]),
        (4 << 20, &[4096, 4_190_218]),
    ];
    for &(len, expected) in cases {
        let mut patterns = vec![Pattern::TtrpcRust, Pattern::Whole, Pattern::Chunks(65_536)];
        if len < 10_000 {
            patterns.extend([
                Pattern::Chunks(1),
                Pattern::Chunks(7),
                Pattern::Chunks(4096),
            ]);
        }
        for how in patterns {
            let sizes = frames_for(len, how, Options::default()).await;
            assert_eq!(sizes, expected, "payload {len}, written as {how:?}");
        }
    }
}

#[tokio::test]
async fn ttrpc_message_beyond_max_payload_is_split_at_max_payload() {
    // Only possible with a raised message limit; ttrpc itself refuses these.
    let opts = Options::default().max_message_payload(3 * MAX_PAYLOAD);
    let len = 2 * MAX_PAYLOAD + 5;
    let sizes = frames_for(len, Pattern::Whole, opts).await;
    assert_eq!(sizes, [4096, MAX_PAYLOAD, len - 4086 - MAX_PAYLOAD]);
}

#[tokio::test]
async fn ttrpc_message_over_the_limit_fails_the_write_and_stays_failed() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    // A good message first: it must still go out.
    let good = ttrpc_msg(1, 1, b"ok");
    conn.write_all(&good).await.unwrap();
    // Header announcing 4 MiB + 1.
    let bad_hdr = &ttrpc_msg(3, 1, &[])[..];
    let mut bad = bad_hdr.to_vec();
    bad[..4].copy_from_slice(&((4u32 << 20) + 1).to_be_bytes());
    let err = conn.write_all(&bad).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    let inner = err
        .get_ref()
        .unwrap()
        .downcast_ref::<std::sync::Arc<MuxError>>();
    assert!(
        matches!(
            inner.map(|e| &**e),
            Some(MuxError::MessageTooLarge {
                conn: 1,
                len: 4_194_305,
                max: 4_194_304
            })
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "ttrpc message on conn 1 has a 4194305-byte payload, limit is 4194304"
    );
    // The byte stream is desynchronised: later writes keep failing.
    assert!(conn.write_all(&good).await.is_err());
    // The mux itself is fine and the good message is on the trunk.
    assert!(!mux.is_closed());
    let (id, payload) = peer.recv_frame().await.unwrap();
    assert_eq!((id, payload), (1, good));
}

#[tokio::test]
async fn two_messages_in_one_write_never_share_a_frame() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(2).unwrap();
    let mut batch = Vec::new();
    let lens = [0usize, 5, 4086, 4087, 9000, 3];
    for (i, &len) in lens.iter().enumerate() {
        batch.extend(ttrpc_msg(2 * i as u32 + 1, 2, &pattern(i as u8, len)));
    }
    let total = batch.len();
    let sent = batch.clone();
    let writer = tokio::spawn(async move {
        conn.write_all(&sent).await.unwrap();
        conn.flush().await.unwrap();
        conn
    });
    let frames = peer.recv_frames(total).await;
    let _conn = writer.await.unwrap();
    let sizes: Vec<usize> = frames.iter().map(|f| f.1.len()).collect();
    assert_eq!(sizes, [10, 15, 4096, 4096, 1, 4096, 4914, 13]);
    let mut go = GoReader::new(frames.into_iter().map(|f| f.1));
    for (i, &len) in lens.iter().enumerate() {
        let (_, payload, _) = go.read_message().unwrap();
        assert_eq!(payload, pattern(i as u8, len));
    }
    assert!(go.is_drained());
}

#[tokio::test]
async fn incomplete_message_stays_buffered_and_drained_only_waits_for_complete_ones() {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let mux = crate::mux::Mux::new(
        tokio::net::UnixStream::from_std(a).unwrap(),
        Options::default(),
    );
    let mut peer = b;
    let mut conn = mux.open(1).unwrap();
    let msg = ttrpc_msg(1, 1, &pattern(9, 5000));

    conn.write_all(&msg[..3000]).await.unwrap();
    conn.drained().await.unwrap();
    assert_eq!(conn.unsent(), 3000);
    let mut buf = vec![0u8; 20_000];
    let err = peer.read(&mut buf).unwrap_err();
    assert_eq!(
        err.kind(),
        std::io::ErrorKind::WouldBlock,
        "nothing may be on the trunk yet"
    );

    conn.write_all(&msg[3000..]).await.unwrap();
    conn.drained().await.unwrap();
    assert_eq!(conn.unsent(), 0);
    // drained() returned, so every byte is already in the socket.
    let n = peer.read(&mut buf).unwrap();
    assert_eq!(n, 8 + 4096 + 8 + 914);
    assert_eq!(&buf[..8], &encode_header(1, 4096));
    assert_eq!(&buf[8..8 + 4096], &msg[..4096]);
    assert_eq!(&buf[4104..4112], &encode_header(1, 914));
    assert_eq!(&buf[4112..n], &msg[4096..]);
}

/// Checks that on the trunk, the frames of one ttrpc message are never
/// separated by a frame of another ConnID, and returns each ConnID's frames.
fn check_contiguous(frames: &[(u32, Vec<u8>)]) -> HashMap<u32, Vec<Vec<u8>>> {
    let mut pending: Option<(u32, usize)> = None;
    let mut per_conn: HashMap<u32, Vec<Vec<u8>>> = HashMap::new();
    for (id, payload) in frames {
        match pending {
            Some((owner, left)) => {
                assert_eq!(
                    *id, owner,
                    "frame of conn {id} inside a message of conn {owner}"
                );
                assert!(payload.len() <= left);
                pending = (left > payload.len()).then(|| (owner, left - payload.len()));
            }
            None => {
                assert!(payload.len() >= 10, "first frame without a ttrpc header");
                let left = 10 + ttrpc_payload_len(payload) - payload.len();
                pending = (left > 0).then_some((*id, left));
            }
        }
        per_conn.entry(*id).or_default().push(payload.clone());
    }
    assert!(pending.is_none());
    per_conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_keep_each_message_contiguous() {
    let (mux, mut peer) = mux_and_peer(Options::default().write_buffer_limit(16 << 10));
    let sizes = [10usize, 70_000, 4087, 0, 300_000, 4086, 12_345, 1];
    let mut total = 0;
    let mut writers = Vec::new();
    for id in [1u32, 2, 5] {
        let mut conn = mux.open(id).unwrap();
        let msgs: Vec<Vec<u8>> = (0..30)
            .map(|i| {
                let len = sizes[(i + id as usize) % sizes.len()];
                ttrpc_msg(2 * i as u32 + 1, 1, &pattern((i as u8) ^ id as u8, len))
            })
            .collect();
        total += msgs.iter().map(Vec::len).sum::<usize>();
        writers.push(tokio::spawn(async move {
            for m in &msgs {
                // Like ttrpc-rust: two writes per message, then flush.
                let split = m.len().min(4096);
                conn.write_all(&m[..split]).await.unwrap();
                conn.write_all(&m[split..]).await.unwrap();
                conn.flush().await.unwrap();
            }
            (conn, msgs)
        }));
    }
    let frames = peer.recv_frames(total).await;
    let per_conn = check_contiguous(&frames);
    for w in writers {
        let (conn, msgs) = w.await.unwrap();
        let mut go = GoReader::new(per_conn[&conn.id()].iter().cloned());
        for m in &msgs {
            let (hdr, payload, nframes) = go.read_message().unwrap();
            assert_eq!(&hdr[..], &m[..10]);
            assert_eq!(payload, &m[10..]);
            assert!(nframes <= 2);
        }
        assert!(go.is_drained());
    }
}

/// A message completed while nothing is queued goes on the trunk from the
/// thread that wrote it: here the runtime's tasks, the writer task among
/// them, never run between the write and the peer's read. (The runtime
/// runs once before, for its driver to see the socket writable, as the
/// core's thread does at all times.)
#[test]
fn a_message_written_while_nothing_is_queued_needs_no_writer_task() {
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};
    use tokio::io::AsyncWrite;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (a, mut peer) = std::os::unix::net::UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let entered = rt.enter();
    let mux = crate::mux::Mux::new(
        tokio::net::UnixStream::from_std(a).unwrap(),
        Options::default(),
    );
    drop(entered);
    rt.block_on(async { tokio::time::sleep(std::time::Duration::from_millis(20)).await });
    let mut conn = mux.open(1).unwrap();
    let msg = ttrpc_msg(1, 1, &pattern(3, 100));
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(&mut conn).poll_write(&mut cx, &msg) {
        Poll::Ready(Ok(n)) => assert_eq!(n, msg.len()),
        other => panic!("the write was not taken: {other:?}"),
    }
    assert_eq!(conn.unsent(), 0, "nothing left for the writer task");
    peer.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut got = vec![0u8; 8 + msg.len()];
    peer.read_exact(&mut got)
        .expect("the message is on the trunk without the runtime running");
    assert_eq!(&got[..8], &encode_header(1, msg.len()));
    assert_eq!(&got[8..], &msg[..]);
}
