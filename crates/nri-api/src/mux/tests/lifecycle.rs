//! Opening, closing, and how the mux ends (cleanly, or on a hostile peer).

use std::io::ErrorKind;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{mux_and_peer, read_n, ttrpc_msg};
use crate::mux::{Conn, Framing, Mux, MuxError, Options, MAX_PAYLOAD};

fn mux_error(err: &std::io::Error) -> &MuxError {
    err.get_ref()
        .and_then(|e| e.downcast_ref::<Arc<MuxError>>())
        .map(|e| &**e)
        .unwrap_or_else(|| panic!("not a mux error: {err:?}"))
}

#[test]
fn conn_and_mux_are_send_sync_static() {
    fn check<T: Send + Sync + Unpin + 'static>() {}
    check::<Conn>();
    check::<Mux>();
    fn io<T: tokio::io::AsyncRead + tokio::io::AsyncWrite>() {}
    io::<Conn>();
}

#[tokio::test]
async fn open_rejects_reserved_and_duplicate_ids() {
    let (mux, _peer) = mux_and_peer(Options::default());
    let err = mux.open(0).unwrap_err();
    assert!(matches!(err, MuxError::Reserved(0)));
    assert_eq!(err.to_string(), "ConnID 0 is reserved");
    let c = mux.open(1).unwrap();
    assert!(matches!(mux.open(1), Err(MuxError::AlreadyOpen(1))));
    assert!(matches!(
        mux.open_with(1, Framing::Raw),
        Err(MuxError::AlreadyOpen(1))
    ));
    assert_eq!((c.id(), c.framing()), (1, Framing::Ttrpc));
}

#[tokio::test]
async fn dropping_a_conn_closes_the_id_locally_and_it_can_be_reopened() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut sentinel = mux.open(9).unwrap();
    let conn = mux.open(1).unwrap();
    drop(conn);
    peer.send_frame(1, b"for nobody").await;
    peer.send_frame(9, b".").await;
    assert_eq!(read_n(&mut sentinel, 1).await, b".");
    let mut conn = mux.open(1).unwrap();
    peer.send_frame(1, b"fresh").await;
    assert_eq!(read_n(&mut conn, 5).await, b"fresh");
    assert!(!mux.is_closed());
}

#[tokio::test]
async fn dropping_a_conn_while_the_reader_waits_for_its_budget_frees_the_reader() {
    let (mux, mut peer) = mux_and_peer(Options::default().conn_buffer_limit(10));
    let conn = mux.open(1).unwrap();
    let mut other = mux.open(2).unwrap();
    peer.send_frame(1, &[1u8; 5000]).await;
    // Wait until the reader is stuck on conn 1's full budget.
    while conn.buffered() < 10 {
        tokio::task::yield_now().await;
    }
    drop(conn);
    peer.send_frame(2, b"next").await;
    assert_eq!(read_n(&mut other, 4).await, b"next");
}

#[tokio::test]
async fn close_closes_everything_and_is_idempotent() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut c1 = mux.open(1).unwrap();
    let mut c2 = mux.open_with(2, Framing::Raw).unwrap();
    let clone = mux.clone();
    peer.send_frame(1, b"unread").await;
    peer.send_frame(2, b"x").await;
    assert_eq!(read_n(&mut c2, 1).await, b"x");
    mux.close();
    clone.close();
    assert!(mux.is_closed() && clone.is_closed());
    assert!(mux.closed().await.is_none());
    assert!(mux.error().is_none());
    // Local close: reads end at once (received bytes are discarded).
    assert_eq!(c1.read(&mut [0u8; 16]).await.unwrap(), 0);
    assert_eq!(c2.read(&mut [0u8; 16]).await.unwrap(), 0);
    let err = c1.write_all(&ttrpc_msg(1, 1, b"late")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe);
    assert!(matches!(mux_error(&err), MuxError::Closed));
    assert!(c2.write_all(b"late").await.is_err());
    assert!(matches!(mux.open(3), Err(MuxError::Closed)));
    // The peer sees the trunk end.
    assert!(peer.recv_frame().await.is_none());
}

#[tokio::test]
async fn dropping_every_handle_closes_the_trunk() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    drop(mux);
    // A conn alone keeps the mux alive.
    peer.send_frame(1, b"hi").await;
    assert_eq!(read_n(&mut conn, 2).await, b"hi");
    drop(conn);
    assert!(peer.recv_frame().await.is_none());
}

#[tokio::test]
async fn peer_eof_on_a_frame_boundary_is_a_clean_close() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    peer.send_frame(1, b"last words").await;
    drop(peer);
    assert!(mux.closed().await.is_none());
    // Bytes received before the end are still readable, then EOF.
    let mut all = Vec::new();
    conn.read_to_end(&mut all).await.unwrap();
    assert_eq!(all, b"last words");
    assert!(conn.write_all(&ttrpc_msg(1, 1, b"")).await.is_err());
}

#[tokio::test]
async fn peer_closing_mid_payload_is_an_error_not_a_panic() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    let mut other = mux.open(2).unwrap();
    peer.send_header(1, 100).await;
    peer.io.write_all(&[5u8; 10]).await.unwrap();
    drop(peer);
    let err = mux.closed().await.expect("an error");
    assert!(matches!(
        &*err,
        MuxError::TruncatedPayload {
            conn: 1,
            len: 100,
            received: 10
        }
    ));
    assert_eq!(
        err.to_string(),
        "trunk closed mid-frame: frame for conn 1 of 100 bytes ended after 10 bytes"
    );
    // Conn 1 gets the 10 bytes that made it, then the error.
    assert_eq!(read_n(&mut conn, 10).await, [5u8; 10]);
    let e = conn.read(&mut [0u8; 8]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    assert!(e.to_string().starts_with("trunk closed mid-frame"));
    let e = other.read(&mut [0u8; 8]).await.unwrap_err();
    assert!(matches!(mux_error(&e), MuxError::TruncatedPayload { .. }));
}

#[tokio::test]
async fn peer_closing_mid_header_is_an_error_not_a_panic() {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    peer.io.write_all(&[0, 0, 0, 1, 0]).await.unwrap();
    drop(peer);
    let err = mux.closed().await.expect("an error");
    assert!(matches!(&*err, MuxError::TruncatedHeader { received: 5 }));
    assert_eq!(
        err.to_string(),
        "trunk closed mid-frame: got 5 of 8 header bytes"
    );
    assert_eq!(
        conn.read(&mut [0u8; 1]).await.unwrap_err().kind(),
        ErrorKind::UnexpectedEof
    );
}

async fn oversized_frame_closes_the_mux(claimed: u32) {
    let (mux, mut peer) = mux_and_peer(Options::default());
    let mut conn = mux.open(1).unwrap();
    peer.send_header(1, claimed).await;
    // No payload follows: the mux must fail on the header alone.
    let err = mux.closed().await.expect("an error");
    assert!(matches!(
        &*err,
        MuxError::FrameTooLarge { conn: 1, len, max: MAX_PAYLOAD } if *len == claimed
    ));
    assert_eq!(
        err.to_string(),
        format!("frame for conn 1 claims {claimed} bytes, limit is 4194314")
    );
    assert!(mux.is_closed());
    let e = conn.read(&mut [0u8; 1]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidData);
    assert!(matches!(mux_error(&e), MuxError::FrameTooLarge { .. }));
    assert!(matches!(mux.open(2), Err(MuxError::Closed)));
    assert!(peer.recv_frame().await.is_none(), "trunk must be closed");
}

#[tokio::test]
async fn frame_one_byte_over_the_limit_closes_the_mux() {
    oversized_frame_closes_the_mux(MAX_PAYLOAD as u32 + 1).await;
}

#[tokio::test]
async fn frame_claiming_4_gib_closes_the_mux() {
    oversized_frame_closes_the_mux(u32::MAX).await;
}

/// A trunk whose reads never complete and whose writes always fail.
struct BrokenTrunk;

impl tokio::io::AsyncRead for BrokenTrunk {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Pending
    }
}

impl tokio::io::AsyncWrite for BrokenTrunk {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(Err(ErrorKind::ConnectionReset.into()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn trunk_write_failure_closes_the_mux_and_fails_the_drain() {
    let mux = Mux::new(BrokenTrunk, Options::default());
    let mut conn = mux.open(1).unwrap();
    conn.write_all(&ttrpc_msg(1, 1, &[0; 100])).await.unwrap();
    let err = conn.drained().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionReset);
    let reason = mux.closed().await.expect("an error");
    assert!(matches!(&*reason, MuxError::TrunkWrite(_)));
    assert!(reason.to_string().starts_with("failed to write to trunk: "));
    assert_eq!(
        conn.read(&mut [0u8; 1]).await.unwrap_err().kind(),
        ErrorKind::ConnectionReset
    );
}

/// A trunk that never accepts a byte.
struct StuckTrunk;

impl tokio::io::AsyncRead for StuckTrunk {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Pending
    }
}

impl tokio::io::AsyncWrite for StuckTrunk {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Pending
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Pending
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Pending
    }
}

/// ttrpc-rust closes a connection when a request's reply arrives while the
/// writer is still inside flush; flush therefore must not wait for the trunk.
#[tokio::test]
async fn flush_returns_while_the_trunk_is_still_busy_but_drained_waits() {
    let mux = Mux::new(StuckTrunk, Options::default());
    let mut conn = mux.open(1).unwrap();
    conn.write_all(&ttrpc_msg(1, 1, &[7; 10_000]))
        .await
        .unwrap();
    conn.flush().await.unwrap();
    assert!(conn.unsent() > 10_010, "the whole message is still queued");
    let waited = tokio::time::timeout(std::time::Duration::from_millis(50), conn.drained()).await;
    assert!(
        waited.is_err(),
        "drained() resolved with bytes still queued"
    );
}
