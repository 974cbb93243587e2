//! Byte-stream behaviour: round trips, interleaving, budgets, blocking.

use std::pin::Pin;
use std::task::Poll;

use futures::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{mux_and_peer, mux_pair, pattern, read_n, ttrpc_msg};
use crate::mux::{Framing, Options, MAX_PAYLOAD};

#[tokio::test]
async fn four_mib_ttrpc_message_round_trips() {
    let (a, b) = mux_pair(Options::default(), Options::default());
    let mut tx = a.open(1).unwrap();
    let mut rx = b.open(1).unwrap();
    let msg = ttrpc_msg(1, 1, &pattern(4, 4 << 20));
    let sent = msg.clone();
    let writer = tokio::spawn(async move {
        tx.write_all(&sent).await.unwrap();
        tx.flush().await.unwrap();
        tx
    });
    assert_eq!(read_n(&mut rx, msg.len()).await, msg);
    drop(writer.await.unwrap());
}

#[tokio::test]
async fn large_raw_stream_round_trips_with_a_small_budget() {
    // 9 MiB through a 100 KiB receive budget: the reader must wait, not fail.
    let opts = Options::default().conn_buffer_limit(100 << 10);
    let (a, b) = mux_pair(Options::default(), opts);
    let mut tx = a.open_with(1, Framing::Raw).unwrap();
    let mut rx = b.open_with(1, Framing::Raw).unwrap();
    let data = pattern(5, 2 * MAX_PAYLOAD + 777_777);
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        tx.write_all(&sent).await.unwrap();
        tx.flush().await.unwrap();
        tx
    });
    assert_eq!(read_n(&mut rx, data.len()).await, data);
    assert!(rx.peak_buffered() <= 100 << 10);
    drop(writer.await.unwrap());
}

/// Writes `data` in uneven chunks, flushing now and then.
async fn write_chunked<W: AsyncWrite + Unpin>(w: &mut W, data: &[u8], seed: usize) {
    let mut off = 0;
    let mut i = seed;
    while off < data.len() {
        let n = [1, 17, 4096, 70_000, 333, 4_100_000][i % 6].min(data.len() - off);
        w.write_all(&data[off..off + n]).await.unwrap();
        if i % 3 == 0 {
            w.flush().await.unwrap();
        }
        off += n;
        i += 1;
    }
    w.flush().await.unwrap();
}

async fn interleaved(opts: Options) {
    let (a, b) = mux_pair(opts.clone(), opts);
    let mut tasks = Vec::new();
    // Both directions on both ConnIDs at once.
    for (id, seed) in [(1u32, 10u8), (2, 20)] {
        for (side, (from, to)) in [(0u8, (&a, &b)), (1, (&b, &a))] {
            let data = pattern(seed + side, 3_000_000 + 1000 * seed as usize);
            let mut tx = from.open_with(id + 10 * side as u32, Framing::Raw).unwrap();
            let mut rx = to.open_with(id + 10 * side as u32, Framing::Raw).unwrap();
            let sent = data.clone();
            tasks.push(tokio::spawn(async move {
                write_chunked(&mut tx, &sent, seed as usize).await;
                tx
            }));
            tasks.push(tokio::spawn(async move {
                let got = read_n(&mut rx, data.len()).await;
                assert!(got == data, "conn {} stream corrupted", rx.id());
                rx
            }));
        }
    }
    for t in tasks {
        drop(t.await.unwrap());
    }
    assert!(!a.is_closed() && !b.is_closed());
}

#[tokio::test]
async fn interleaved_connections_keep_their_byte_streams_current_thread() {
    interleaved(Options::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn interleaved_connections_keep_their_byte_streams_multi_thread() {
    interleaved(Options::default().conn_buffer_limit(50_000)).await;
}

#[tokio::test]
async fn frames_for_unopened_ids_are_dropped_and_the_mux_stays_healthy() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    let mut sentinel = mux.open(3).unwrap();
    peer.send_frame(0, b"reserved id").await;
    peer.send_frame(2, &pattern(1, 1_000_000)).await;
    peer.send_frame(99, &[]).await;
    peer.send_frame(u32::MAX, b"x").await;
    peer.send_frame(3, b"sync").await;
    // The reader handled everything above before this arrives.
    assert_eq!(read_n(&mut sentinel, 4).await, b"sync");
    peer.send_frame(1, b"still alive").await;
    assert_eq!(read_n(&mut conn, 11).await, b"still alive");
    assert_eq!(conn.buffered(), 0);
    assert!(!mux.is_closed());
}

#[tokio::test]
async fn frame_of_exactly_max_payload_is_accepted() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    let data = pattern(2, MAX_PAYLOAD);
    let sent = data.clone();
    let sender = tokio::spawn(async move {
        peer.send_frame(1, &sent).await;
        peer
    });
    assert_eq!(read_n(&mut conn, MAX_PAYLOAD).await, data);
    let _peer = sender.await.unwrap();
    assert!(!mux.is_closed());
}

#[tokio::test]
async fn burst_of_tiny_frames_with_a_slow_consumer_is_backpressured_not_fatal() {
    const LIMIT: usize = 1000;
    let (mux, mut peer) = mux_and_peer(Options::default().conn_buffer_limit(LIMIT));
    let mut conn = mux.open(1).unwrap();
    let data = pattern(7, 70_000);
    let sent = data.clone();
    let sender = tokio::spawn(async move {
        for chunk in sent.chunks(7) {
            peer.send_frame(1, chunk).await;
        }
        peer
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 100];
    while got.len() < data.len() {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "unexpected EOF");
        got.extend_from_slice(&buf[..n]);
        assert!(conn.buffered() <= LIMIT);
        // Allocation follows the budget too, not just the byte count.
        assert!(conn.buffer_capacity() <= LIMIT);
        // A slow consumer: let everybody else run between reads.
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
    }
    assert_eq!(got, data);
    // The budget was really used up (so backpressure, not luck, kept it there).
    assert_eq!(conn.peak_buffered(), LIMIT);
    assert!(!mux.is_closed());
    let _peer = sender.await.unwrap();
}

#[tokio::test]
async fn ten_thousand_frames_queued_before_any_read_do_not_close_the_conn() {
    // Upstream closes the whole mux at 256 queued frames.
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    let mut sentinel = mux.open(2).unwrap();
    let mut all = Vec::new();
    for i in 0..10_000u32 {
        let b = [(i % 251) as u8];
        all.push(b[0]);
        peer.send_frame(1, &b).await;
    }
    peer.send_frame(2, b"!").await;
    assert_eq!(read_n(&mut sentinel, 1).await, b"!");
    assert_eq!(conn.buffered(), 10_000);
    assert!(conn.buffer_capacity() < 2 * 10_000);
    assert_eq!(read_n(&mut conn, 10_000).await, all);
    assert!(!mux.is_closed());
}

#[tokio::test]
async fn blocked_reader_delivers_early_frames_after_unblock() {
    let (mux, mut peer) = mux_and_peer(Options::default().blocked_read(true));
    // Sent before anything is open: a running reader would drop these.
    peer.send_frame(2, b"early ").await;
    peer.send_frame(2, b"bird").await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let mut conn = mux.open(2).unwrap();
    assert_eq!(conn.buffered(), 0, "reader ran while blocked");
    mux.unblock();
    mux.unblock(); // idempotent
    assert_eq!(read_n(&mut conn, 10).await, b"early bird");
}

#[tokio::test]
async fn unblocked_reader_drops_frames_sent_before_open() {
    // The counterpart of the test above, to show blocking is what saves them.
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut sentinel = mux.open(3).unwrap();
    peer.send_frame(2, b"lost").await;
    peer.send_frame(3, b"s").await;
    assert_eq!(read_n(&mut sentinel, 1).await, b"s");
    let mut conn = mux.open(2).unwrap();
    peer.send_frame(2, b"kept").await;
    assert_eq!(read_n(&mut conn, 4).await, b"kept");
}

#[tokio::test]
async fn close_while_blocked_ends_cleanly() {
    let (mux, mut peer) = mux_and_peer(Options::default().blocked_read(true));
    let mut conn = mux.open(1).unwrap();
    mux.close();
    assert!(mux.closed().await.is_none());
    assert_eq!(conn.read(&mut [0u8; 4]).await.unwrap(), 0);
    assert!(peer.recv_frame().await.is_none(), "trunk must be closed");
}

#[tokio::test]
async fn writes_push_back_when_the_trunk_is_not_drained() {
    const LIMIT: usize = 2048;
    const MSGS: usize = 1000;
    let (a, b) = tokio::io::duplex(64);
    let mux = crate::mux::Mux::new(a, Options::default().write_buffer_limit(LIMIT));
    let mut conn = mux.open(1).unwrap();
    let msg = ttrpc_msg(1, 1, &[0xAB; 90]);
    // Offer messages one poll at a time; with nobody reading the trunk,
    // poll_write must eventually return Pending.
    let (mut sent, mut off) = (0usize, 0usize);
    let stalled = loop {
        let poll =
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut conn).poll_write(cx, &msg[off..])))
                .now_or_never()
                .unwrap();
        match poll {
            Poll::Ready(n) => off += n.unwrap(),
            Poll::Pending => break true,
        }
        if off == msg.len() {
            (sent, off) = (sent + 1, 0);
            if sent == MSGS {
                break false;
            }
        }
        tokio::task::yield_now().await;
    };
    assert!(stalled, "poll_write never pushed back");
    assert!(
        conn.unsent() <= LIMIT + msg.len(),
        "unsent {}",
        conn.unsent()
    );

    // Drain the trunk: the rest goes through and every message arrives whole.
    let mut peer = super::RawPeer { io: b };
    let reader = tokio::spawn(async move {
        for _ in 0..MSGS {
            let (id, payload) = peer.recv_frame().await.unwrap();
            assert_eq!((id, payload.len()), (1, 100));
        }
        peer
    });
    conn.write_all(&msg[off..]).await.unwrap();
    for _ in sent + 1..MSGS {
        conn.write_all(&msg).await.unwrap();
    }
    conn.drained().await.unwrap();
    assert_eq!(conn.unsent(), 0);
    drop(reader.await.unwrap());
}

#[tokio::test]
async fn raw_writes_push_back_too() {
    let (a, b) = tokio::io::duplex(64);
    let mux = crate::mux::Mux::new(a, Options::default().write_buffer_limit(1000));
    let mut conn = mux.open_with(1, Framing::Raw).unwrap();
    let mut stalled = false;
    for _ in 0..1000 {
        let poll =
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut conn).poll_write(cx, &[1u8; 100])))
                .now_or_never()
                .unwrap();
        match poll {
            Poll::Ready(n) => assert_eq!(n.unwrap(), 100),
            Poll::Pending => {
                stalled = true;
                break;
            }
        }
        tokio::task::yield_now().await;
    }
    assert!(stalled);
    assert!(conn.unsent() <= 1000 + 108);
    drop(b);
}

#[tokio::test]
async fn reads_of_any_size_see_one_byte_stream() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    let data = pattern(11, 20_000);
    for chunk in data.chunks(3000) {
        peer.send_frame(1, chunk).await;
    }
    // Read across frame boundaries with odd sizes.
    let mut got = Vec::new();
    for size in [1usize, 2999, 3001, 5, 13_994] {
        got.extend(read_n(&mut conn, size).await);
    }
    assert_eq!(got, data);
    let mut small = [0u8; 0];
    assert_eq!(conn.read(&mut small).await.unwrap(), 0);
}
