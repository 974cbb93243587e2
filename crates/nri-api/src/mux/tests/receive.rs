//! What a connection accepts before it is trusted: the announced size of a
//! ttrpc message, and a byte budget shared by several multiplexers.

use std::sync::Arc;

use super::{mux_and_peer, read_n, ttrpc_msg};
use crate::mux::{Budget, MuxError, Options, ReceiveLimits};

#[tokio::test]
async fn a_message_announced_over_the_limit_closes_the_mux_before_its_payload_is_buffered() {
    let (mux, mut peer) = mux_and_peer(Options::default().received_message_limit(100));
    let mut conn = mux.open(2).unwrap();
    peer.send_frame(2, &ttrpc_msg(1, 1, &[7; 100])).await;
    assert_eq!(read_n(&mut conn, 110).await.len(), 110);
    // The header alone announces 4 MiB; no payload follows yet.
    let mut big = ttrpc_msg(3, 1, &[]);
    big[..4].copy_from_slice(&(4u32 << 20).to_be_bytes());
    peer.send_frame(2, &big).await;
    let reason = mux.closed().await.expect("an error closed the mux");
    assert!(
        matches!(
            *reason,
            MuxError::ReceivedMessageTooLarge {
                conn: 2,
                len: 4194304,
                max: 100
            }
        ),
        "{reason}"
    );
    assert_eq!(conn.buffered(), 0);
}

#[tokio::test]
async fn raised_limits_apply_to_open_connections() {
    let (mux, mut peer) = mux_and_peer(Options::default().received_message_limit(10));
    let mut conn = mux.open(2).unwrap();
    mux.set_receive_limits(ReceiveLimits::default());
    peer.send_frame(2, &ttrpc_msg(1, 1, &[1; 5000])).await;
    assert_eq!(read_n(&mut conn, 5010).await.len(), 5010);
    assert!(!mux.is_closed());
}

#[tokio::test]
async fn a_shared_budget_bounds_what_all_connections_hold_and_is_returned() {
    let budget = Budget::new(1000);
    let opts = Options::default().receive_budget(Arc::clone(&budget));
    let (a, mut pa) = mux_and_peer(opts.clone());
    let (b, mut pb) = mux_and_peer(opts);
    let mut ca = a.open(2).unwrap();
    let cb = b.open(2).unwrap();

    pa.send_frame(2, &[1; 600]).await;
    while ca.buffered() < 600 {
        tokio::task::yield_now().await;
    }
    assert_eq!(budget.used(), 600);
    // 600 + 500 would exceed it: b's mux is closed, a's is not touched.
    pb.send_frame(2, &[2; 500]).await;
    let reason = b.closed().await.expect("an error closed the mux");
    assert!(matches!(*reason, MuxError::BudgetExhausted { limit: 1000 }));
    assert_eq!(cb.buffered(), 0);
    assert!(!a.is_closed());

    // Reading returns bytes to the budget; leaving returns the rest.
    assert_eq!(read_n(&mut ca, 100).await.len(), 100);
    assert_eq!(budget.used(), 500);
    a.leave_budget();
    assert_eq!(budget.used(), 0);
    pa.send_frame(2, &[3; 2000]).await;
    assert_eq!(read_n(&mut ca, 2500).await.len(), 2500);
    assert_eq!(budget.used(), 0);
}

#[tokio::test]
async fn closing_returns_buffered_bytes_to_the_budget() {
    let budget = Budget::new(1 << 20);
    let (mux, mut peer) = mux_and_peer(Options::default().receive_budget(Arc::clone(&budget)));
    let conn = mux.open(2).unwrap();
    peer.send_frame(2, &[1; 4000]).await;
    while conn.buffered() < 4000 {
        tokio::task::yield_now().await;
    }
    assert_eq!(budget.used(), 4000);
    mux.close();
    assert_eq!(budget.used(), 0);
    drop(conn);
    assert_eq!(budget.used(), 0);
}
