//! Writing to a plugin that hung up must not raise SIGPIPE: in a Go host
//! that does not catch it, the signal on one of the library's threads kills
//! the runtime. This binary runs one test with SIGPIPE at its default
//! action, as such a host has it; were the signal raised, the binary would
//! die of it and the test fail.

use std::time::Duration;

use nri_api::mux::{self, Mux, UnixTrunk, RUNTIME_SERVICE_CONN};
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn writing_to_a_peer_that_hung_up_fails_without_a_signal() {
    // SAFETY: this binary's only test; no other thread relies on SIGPIPE
    // being ignored.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };

    // The raw trunk: the write fails with EPIPE.
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    drop(theirs);
    let mut trunk = UnixTrunk::new(ours).unwrap();
    let err = trunk.write_all(b"hello").await.unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPIPE), "{err}");

    // Through the mux, as the runtime writes: the mux closes instead.
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    let mux = Mux::new(UnixTrunk::new(ours).unwrap(), mux::Options::default());
    let mut conn = mux.open(RUNTIME_SERVICE_CONN).unwrap();
    drop(theirs);
    let written = async {
        loop {
            if conn.write_all(&[0u8; 64 << 10]).await.is_err() {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), written).await;
    tokio::time::timeout(Duration::from_secs(5), mux.closed())
        .await
        .expect("the mux closes when its peer is gone");
}
