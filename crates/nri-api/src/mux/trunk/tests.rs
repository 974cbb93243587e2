use std::task::Waker;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const EPOLLIN: u32 = libc::EPOLLIN as u32;
const EPOLLOUT: u32 = libc::EPOLLOUT as u32;

/// The events `fd` is registered for, in every epoll instance of this
/// process. The kernel lists each registration in /proc/self/fdinfo with
/// the number and the inode of the descriptor registered (tests running
/// meanwhile may have had the same number for other sockets), and once for
/// every descriptor of the epoll instance (mio duplicates its own): an
/// entry is one registration, told apart by its token (`data:`).
fn registered_events(fd: RawFd) -> Vec<u32> {
    // SAFETY: a zeroed stat is valid for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is valid for writes; `fd` is open.
    assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
    let ino = format!("ino:{:x}", st.st_ino);
    let mut found = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/fdinfo").unwrap() {
        let Ok(text) = std::fs::read_to_string(entry.unwrap().path()) else {
            continue;
        };
        for line in text.lines() {
            // "tfd: 9 events: 19 data: 7f49400 pos:0 ino:1f3 sdev:8"
            let words: Vec<&str> = line.split_whitespace().collect();
            if let ["tfd:", tfd, "events:", events, "data:", token, _, inode, ..] = words[..] {
                if tfd == fd.to_string() && inode == ino {
                    found.insert(token.to_string(), u32::from_str_radix(events, 16).unwrap());
                }
            }
        }
    }
    found.into_values().collect()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + i / 251) as u8).collect()
}

#[tokio::test]
async fn the_socket_is_watched_for_reading_only() {
    let (a, b) = UnixStream::pair().unwrap();
    let theirs = b.as_raw_fd();
    // tokio's own registration watches for room too: what the trunk avoids.
    assert!(registered_events(theirs).iter().all(|e| e & EPOLLOUT != 0));
    assert_eq!(registered_events(theirs).len(), 1);

    let trunk = UnixTrunk::new(a).unwrap();
    let events = registered_events(trunk.fd());
    assert_eq!(events.len(), 1, "{events:x?}");
    assert_eq!(events[0] & (EPOLLIN | EPOLLOUT), EPOLLIN, "{:x}", events[0]);
}

#[tokio::test]
async fn a_full_socket_is_watched_for_room_until_a_write_goes_through() {
    let (a, mut b) = UnixStream::pair().unwrap();
    let mut trunk = UnixTrunk::new(a).unwrap();
    let data = pattern(8 << 20);

    // Write until the socket is full.
    let mut cx = Context::from_waker(Waker::noop());
    let mut sent = 0;
    while let Poll::Ready(n) = Pin::new(&mut trunk).poll_write(&mut cx, &data[sent..]) {
        sent += n.unwrap();
        assert!(sent < data.len(), "the socket never filled");
    }
    let room = trunk.room.as_ref().expect("watching for room");
    let events = registered_events(room.get_ref().as_raw_fd());
    assert_eq!(events.len(), 1);
    assert_ne!(events[0] & EPOLLOUT, 0, "{:x}", events[0]);

    // The peer reads it all; the write goes on and completes.
    let reader = tokio::spawn(async move {
        let mut got = vec![0u8; data.len()];
        b.read_exact(&mut got).await.unwrap();
        (got, data)
    });
    let rest = pattern(8 << 20);
    trunk.write_all(&rest[sent..]).await.unwrap();
    assert!(trunk.room.is_none(), "no longer watching for room");
    let (got, data) = reader.await.unwrap();
    assert!(got == data, "the bytes arrive as written");
}

#[tokio::test]
async fn reads_of_any_size_get_every_byte_then_the_end() {
    let (a, mut b) = UnixStream::pair().unwrap();
    let mut trunk = UnixTrunk::new(a).unwrap();
    let data = pattern(300_000);
    let writer = {
        let data = data.clone();
        tokio::spawn(async move {
            for chunk in data.chunks(4099) {
                b.write_all(chunk).await.unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    let mut got = Vec::new();
    for size in [7, 1000, 65536].into_iter().cycle() {
        let mut buf = vec![0u8; size];
        let n = trunk.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    writer.await.unwrap();
    assert!(got == data, "{} of {} bytes", got.len(), data.len());
}

#[tokio::test]
async fn shutting_down_the_write_side_ends_the_peers_reading() {
    let (a, mut b) = UnixStream::pair().unwrap();
    let mut trunk = UnixTrunk::new(a).unwrap();
    trunk.write_all(b"last").await.unwrap();
    trunk.shutdown().await.unwrap();
    let mut got = Vec::new();
    b.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"last");
    // Our reading still works.
    b.write_all(b"reply").await.unwrap();
    let mut buf = [0u8; 5];
    trunk.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"reply");
}
