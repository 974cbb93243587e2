//! The trunk multiplexer (`nri_api::mux`): the write side's ttrpc message
//! assembly on its own (`mux_frames`), and a whole `Mux` fed a hostile
//! peer's bytes while it sends messages of its own (`mux_stream`).

use std::time::Duration;

use nri_api::mux::fuzzing::{ttrpc_frames, ttrpc_payload_len, Assembler, FIRST_FRAME_PAYLOAD};
use nri_api::mux::{
    Framing, Mux, Options, FRAME_HEADER_LEN, MAX_PAYLOAD, PLUGIN_SERVICE_CONN,
    RUNTIME_SERVICE_CONN, TTRPC_HEADER_LEN,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::alloc::largest_during;

/// A small deterministic generator of chunk sizes, seeded by the input.
struct Chunks(u64);

impl Chunks {
    fn next(&mut self, max: usize) -> usize {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        1 + (r >> 33) as usize % max.max(1)
    }
}

fn seed(cfg: &[u8]) -> u64 {
    cfg.iter().fold(0x9e37_79b9_7f4a_7c15, |s, &b| {
        (s ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) | 1
}

/// One complete ttrpc message of `stream`, or why the stream stops: the
/// reference the assembler is compared with.
enum Next<'a> {
    Message(&'a [u8]),
    Oversized(usize),
    Incomplete,
}

fn next_message(stream: &[u8], max_payload: usize) -> Next<'_> {
    if stream.len() < TTRPC_HEADER_LEN {
        return Next::Incomplete;
    }
    let len = ttrpc_payload_len(stream);
    if len > max_payload {
        return Next::Oversized(len);
    }
    match stream.get(..TTRPC_HEADER_LEN + len) {
        Some(msg) => Next::Message(msg),
        None => Next::Incomplete,
    }
}

/// The complete messages of a written ttrpc byte stream, in order, up to
/// the first incomplete or oversized one.
fn messages(mut stream: &[u8], max_payload: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Next::Message(msg) = next_message(stream, max_payload) {
        out.push(msg);
        stream = &stream[msg.len()..];
    }
    out
}

/// The frames (payloads) a Go ttrpc peer writes for one message: the
/// header and up to 4086 payload bytes, then the rest in one frame.
fn go_frames(msg: &[u8]) -> Vec<&[u8]> {
    let first = msg.len().min(TTRPC_HEADER_LEN + FIRST_FRAME_PAYLOAD);
    let mut out = vec![&msg[..first]];
    if msg.len() > first {
        out.push(&msg[first..]);
    }
    out
}

/// Input: 3 bytes of settings (the largest payload the assembler takes,
/// the seed of the write sizes), then the bytes written to a ttrpc
/// connection. The assembler must hand out exactly the complete messages,
/// refuse exactly the first oversized header, never hold more than one
/// message, and cut every message into Go's frames.
pub fn mux_frames(data: &[u8]) {
    let Some((cfg, stream)) = data.split_first_chunk::<3>() else {
        return;
    };
    let max_payload = u16::from_le_bytes([cfg[0], cfg[1]]) as usize * 4;
    let mut sizes = Chunks(seed(cfg));
    let max_write = 1 + cfg[2] as usize * 32;

    let mut asm = Assembler::default();
    let mut rest = stream;
    let mut at = 0;
    while at < stream.len() {
        let write = &stream[at..at + sizes.next(max_write).min(stream.len() - at)];
        let mut taken = 0;
        while taken < write.len() {
            let n = asm.wanted().min(write.len() - taken);
            assert!(n > 0, "the assembler wants nothing");
            let done = asm.push(&write[taken..taken + n], max_payload);
            taken += n;
            assert!(
                asm.buffered() <= TTRPC_HEADER_LEN + max_payload,
                "assembler holds {} bytes, more than one message",
                asm.buffered()
            );
            match (done, next_message(rest, max_payload)) {
                (Ok(Some(msg)), Next::Message(want)) => {
                    assert_eq!(&msg[..], want, "assembled message differs");
                    assert!(asm.is_idle(), "bytes left after a complete message");
                    rest = &rest[want.len()..];
                    check_frames(7, &msg);
                }
                (Ok(Some(_)), _) => panic!("a message handed out before it was complete"),
                (Ok(None), Next::Message(want)) => {
                    // Only complete once all its bytes were pushed.
                    let pushed = stream.len() - rest.len();
                    let have = at + taken - pushed;
                    assert!(
                        have < want.len(),
                        "complete message {} not handed out",
                        want.len()
                    );
                }
                (Ok(None), Next::Oversized(len)) => {
                    let pushed = at + taken - (stream.len() - rest.len());
                    assert!(
                        pushed < TTRPC_HEADER_LEN,
                        "oversized header ({len}) accepted"
                    );
                }
                (Ok(None), Next::Incomplete) => {}
                (Err(e), Next::Oversized(len)) => {
                    assert_eq!(e.len, len);
                    return;
                }
                (Err(e), _) => panic!("refused a message of {} bytes", e.len),
            }
        }
        at += write.len();
    }
    assert_eq!(
        asm.buffered(),
        rest.len(),
        "the incomplete message is not what is buffered"
    );
}

/// `ttrpc_frames` of one message: Go's frames, frame headers included.
fn check_frames(id: u32, msg: &[u8]) {
    let bufs = ttrpc_frames(id, bytes_of(msg));
    let wire: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
    let frames = parse_frames(&wire);
    assert!(
        frames.partial.is_none(),
        "ttrpc_frames left a partial frame"
    );
    let want: Vec<(u32, &[u8])> = go_frames(msg).into_iter().map(|f| (id, f)).collect();
    let got: Vec<(u32, &[u8])> = frames.whole.iter().map(|(i, p)| (*i, &p[..])).collect();
    assert_eq!(got, want, "frames differ from a Go peer's");
}

fn bytes_of(msg: &[u8]) -> bytes::Bytes {
    bytes::Bytes::copy_from_slice(msg)
}

/// Frames parsed off a trunk: the whole ones, and a cut-off last one.
struct Frames {
    whole: Vec<(u32, Vec<u8>)>,
    partial: Option<usize>,
}

fn parse_frames(mut wire: &[u8]) -> Frames {
    let mut whole = Vec::new();
    while wire.len() >= FRAME_HEADER_LEN {
        let id = u32::from_be_bytes(wire[..4].try_into().unwrap());
        let len = u32::from_be_bytes(wire[4..8].try_into().unwrap()) as usize;
        assert!(len <= MAX_PAYLOAD, "a frame of {len} bytes");
        let Some(payload) = wire.get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + len) else {
            break;
        };
        whole.push((id, payload.to_vec()));
        wire = &wire[FRAME_HEADER_LEN + len..];
    }
    Frames {
        partial: (!wire.is_empty()).then_some(wire.len()),
        whole,
    }
}

/// What the peer's trunk bytes deliver to each open connection: the
/// payloads of its frames, in order, up to the first frame header over
/// the limit; a cut-off last payload is delivered as far as it goes.
fn delivered(mut trunk: &[u8], id: u32) -> Vec<u8> {
    let mut out = Vec::new();
    while trunk.len() >= FRAME_HEADER_LEN {
        let fid = u32::from_be_bytes(trunk[..4].try_into().unwrap());
        let len = u32::from_be_bytes(trunk[4..8].try_into().unwrap()) as usize;
        if len > MAX_PAYLOAD {
            break;
        }
        let end = (FRAME_HEADER_LEN + len).min(trunk.len());
        if fid == id {
            out.extend_from_slice(&trunk[FRAME_HEADER_LEN..end]);
        }
        trunk = &trunk[end..];
    }
    out
}

/// Input: 8 bytes of settings (receive budget, write budget, message
/// limit, read sizes, where the input splits), then bytes that are split
/// in two: what the peer sends on the trunk, and what the runtime side
/// writes to its ttrpc connection (ConnID 1) and raw connection (ConnID 2).
///
/// Checks: no panic, no deadlock (all of it is in memory, so 20 s without
/// an end is one); each connection delivers exactly the payloads addressed to it
/// and never buffers more than its budget; no allocation near a claimed
/// frame length; what goes out is Go's framing of the complete messages
/// written, the frames of one message back to back.
pub fn mux_stream(data: &[u8]) {
    let Some((cfg, rest)) = data.split_first_chunk::<8>() else {
        return;
    };
    let read_limit = 1 + u16::from_le_bytes([cfg[0], cfg[1]]) as usize % 16384;
    let write_limit = 1 + cfg[2] as usize * 64;
    let max_message = cfg[3] as usize * 64;
    let read_size = 1 + cfg[4] as usize;
    let cut = rest.len() * cfg[5] as usize / 256;
    let (trunk_in, outgoing) = rest.split_at(cut);
    let raw_cut = outgoing.len() * cfg[6] as usize / 256;
    let (ttrpc_out, raw_out) = outgoing.split_at(raw_cut);
    let mut sizes = Chunks(seed(cfg));
    let write_sizes: Vec<usize> = (0..64)
        .map(|_| sizes.next(1 + cfg[7] as usize * 16))
        .collect();

    thread_local! {
        // One runtime for all inputs: building one per input was most of
        // the target's time. Each input's tasks are gone when it returns.
        static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("tokio runtime");
    }
    let opts = Options::default()
        .conn_buffer_limit(read_limit)
        .write_buffer_limit(write_limit)
        .max_message_payload(max_message);

    let (run, largest) = largest_during(|| {
        RT.with(|rt| {
            rt.block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(20),
                    run_stream(opts, trunk_in, ttrpc_out, raw_out, read_size, &write_sizes),
                )
                .await
            })
        })
    });
    let out = run.expect("the mux stalled: nothing could make progress");

    // Received: exactly what was addressed to each connection.
    for (id, got, peak) in [
        (PLUGIN_SERVICE_CONN, &out.recv[0], out.peak[0]),
        (RUNTIME_SERVICE_CONN, &out.recv[1], out.peak[1]),
    ] {
        assert!(
            peak <= read_limit,
            "conn {id} buffered {peak} > budget {read_limit}"
        );
        assert!(
            *got == delivered(trunk_in, id),
            "conn {id} received other bytes than were sent to it"
        );
    }
    // Memory: bounded by the budgets, not by what frames claim.
    let bound = (256 << 10) + 4 * (read_limit + write_limit + max_message) + 8 * data.len();
    assert!(
        largest <= bound,
        "an allocation of {largest} bytes (bound {bound})"
    );

    // Sent: Go's frames of the complete messages, a prefix of them.
    let frames = parse_frames(&out.sent);
    // (frame, whether the next frame is the rest of the same message)
    let want1: Vec<(&[u8], bool)> = messages(ttrpc_out, max_message)
        .into_iter()
        .flat_map(|m| {
            let f = go_frames(m);
            let n = f.len();
            f.into_iter().enumerate().map(move |(k, f)| (f, k + 1 < n))
        })
        .collect();
    let mut k = 0;
    let mut raw = Vec::new();
    for (i, (id, payload)) in frames.whole.iter().enumerate() {
        match *id {
            PLUGIN_SERVICE_CONN => {
                let Some(&(want, more)) = want1.get(k) else {
                    panic!("ttrpc frame {k}: more frames than the messages written");
                };
                assert!(
                    &payload[..] == want,
                    "ttrpc frame {k} differs from a Go peer's"
                );
                if more {
                    if let Some((next, _)) = frames.whole.get(i + 1) {
                        assert_eq!(*next, PLUGIN_SERVICE_CONN, "a message's frames interleaved");
                    }
                }
                k += 1;
            }
            RUNTIME_SERVICE_CONN => raw.extend_from_slice(payload),
            other => panic!("a frame for ConnID {other}"),
        }
    }
    assert!(
        raw_out.starts_with(&raw),
        "raw bytes sent differ from those written"
    );
}

struct StreamOut {
    recv: [Vec<u8>; 2],
    peak: [usize; 2],
    sent: Vec<u8>,
}

async fn run_stream(
    opts: Options,
    trunk_in: &[u8],
    ttrpc_out: &[u8],
    raw_out: &[u8],
    read_size: usize,
    write_sizes: &[usize],
) -> StreamOut {
    use nri_api::mux::Conn;
    use tokio::io::{ReadHalf, WriteHalf};

    let (ours, theirs) = tokio::io::duplex(4096);
    let mux = Mux::new(ours, opts);
    let c1 = mux.open(PLUGIN_SERVICE_CONN).expect("open 1");
    let c2 = mux
        .open_with(RUNTIME_SERVICE_CONN, Framing::Raw)
        .expect("open 2");
    let (mut peer_rd, mut peer_wr) = tokio::io::split(theirs);
    let (r1, w1) = tokio::io::split(c1);
    let (r2, w2) = tokio::io::split(c2);

    async fn consume(mut r: ReadHalf<Conn>, read_size: usize) -> (ReadHalf<Conn>, Vec<u8>) {
        let mut got = Vec::new();
        let mut buf = vec![0u8; read_size];
        loop {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        (r, got)
    }
    async fn produce(mut w: WriteHalf<Conn>, bytes: &[u8], sizes: &[usize]) -> WriteHalf<Conn> {
        let mut at = 0;
        for k in 0.. {
            if at >= bytes.len() {
                break;
            }
            let n = sizes[k % sizes.len()].min(bytes.len() - at);
            if w.write_all(&bytes[at..at + n]).await.is_err() {
                break;
            }
            at += n;
        }
        w
    }

    let local_then_eof = async {
        let (w1, w2, _) = tokio::join!(
            produce(w1, ttrpc_out, write_sizes),
            produce(w2, raw_out, write_sizes),
            peer_wr.write_all(trunk_in),
        );
        // Let the mux's tasks put on the trunk what they can before the
        // peer ends it (only coverage depends on it: every check below
        // holds for any prefix of what was written).
        for _ in 0..64 {
            tokio::task::yield_now().await;
        }
        let _ = peer_wr.shutdown().await;
        (w1, w2)
    };
    let peer_read = async {
        let mut sent = Vec::new();
        let _ = peer_rd.read_to_end(&mut sent).await;
        sent
    };
    let ((r1, got1), (r2, got2), (w1, w2), sent) = tokio::join!(
        consume(r1, read_size),
        consume(r2, read_size),
        local_then_eof,
        peer_read
    );
    let (c1, c2) = (r1.unsplit(w1), r2.unsplit(w2));
    let peak = [c1.peak_buffered(), c2.peak_buffered()];
    drop((c1, c2, mux));
    StreamOut {
        recv: [got1, got2],
        peak,
        sent,
    }
}
