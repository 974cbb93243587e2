//! Just enough rtnetlink to move a network device between namespaces:
//! look a link up by name, set it up or down, rename it, set its alias and
//! move it into another network namespace. A netlink socket acts in the
//! network namespace of the thread that opened it; [`in_netns`] runs code
//! on a thread switched into another namespace.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const NLMSG_HDR: usize = 16;
const IFINFO: usize = 16;
const IFLA_IFNAME: u16 = 3;
const IFLA_IFALIAS: u16 = 20;
const IFLA_NET_NS_FD: u16 = 28;
const IFF_UP: u32 = 1;

/// A network link as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub index: i32,
    pub name: String,
    pub alias: String,
    pub up: bool,
}

/// A NETLINK_ROUTE socket in the namespace it was opened in.
pub struct Netlink {
    fd: OwnedFd,
    seq: u32,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn attr(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
    let len = 4 + data.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(data);
    out.resize(align4(out.len()), 0);
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses an RTM_NEWLINK payload (ifinfomsg and attributes).
fn parse_link(payload: &[u8]) -> io::Result<Link> {
    if payload.len() < IFINFO {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "short ifinfomsg",
        ));
    }
    let index = u32_at(payload, 4) as i32;
    let flags = u32_at(payload, 8);
    let (mut name, mut alias) = (String::new(), String::new());
    let mut at = IFINFO;
    while at + 4 <= payload.len() {
        let len = u16_at(payload, at) as usize;
        let kind = u16_at(payload, at + 2) & 0x3fff;
        if len < 4 || at + len > payload.len() {
            break;
        }
        let data = &payload[at + 4..at + len];
        let text =
            || String::from_utf8_lossy(data.split(|b| *b == 0).next().unwrap_or(&[])).into_owned();
        match kind {
            IFLA_IFNAME => name = text(),
            IFLA_IFALIAS => alias = text(),
            _ => {}
        }
        at += align4(len);
    }
    Ok(Link {
        index,
        name,
        alias,
        up: flags & IFF_UP != 0,
    })
}

impl Netlink {
    /// Opens a socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Netlink> {
        // SAFETY: plain socket/bind calls; the fd is owned right away.
        unsafe {
            let fd = libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            );
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = OwnedFd::from_raw_fd(fd);
            let mut addr: libc::sockaddr_nl = std::mem::zeroed();
            addr.nl_family = libc::AF_NETLINK as u16;
            if libc::bind(
                fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            ) < 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(Netlink { fd, seq: 1 })
        }
    }

    /// Sends one request and returns the RTM_NEWLINK payload of the reply
    /// (`None` for a plain acknowledgement).
    fn request(
        &mut self,
        kind: u16,
        flags: u16,
        index: i32,
        (ifi_flags, ifi_change): (u32, u32),
        attrs: &[(u16, Vec<u8>)],
    ) -> io::Result<Option<Vec<u8>>> {
        self.seq += 1;
        let seq = self.seq;
        let mut msg = vec![0u8; NLMSG_HDR];
        msg.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
        msg.extend_from_slice(&index.to_ne_bytes());
        msg.extend_from_slice(&ifi_flags.to_ne_bytes());
        msg.extend_from_slice(&ifi_change.to_ne_bytes());
        for (k, data) in attrs {
            attr(&mut msg, *k, data);
        }
        let len = msg.len() as u32;
        msg[0..4].copy_from_slice(&len.to_ne_bytes());
        msg[4..6].copy_from_slice(&kind.to_ne_bytes());
        msg[6..8].copy_from_slice(&(flags | libc::NLM_F_REQUEST as u16).to_ne_bytes());
        msg[8..12].copy_from_slice(&seq.to_ne_bytes());
        // SAFETY: msg is a valid buffer of its length.
        if unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; 65536];
        loop {
            // SAFETY: buf is a valid writable buffer of its length.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let data = &buf[..n as usize];
            let mut at = 0;
            while at + NLMSG_HDR <= data.len() {
                let mlen = u32_at(data, at) as usize;
                let mtype = u16_at(data, at + 4);
                let mseq = u32_at(data, at + 8);
                if mlen < NLMSG_HDR || at + mlen > data.len() {
                    break;
                }
                let payload = &data[at + NLMSG_HDR..at + mlen];
                at += align4(mlen);
                if mseq != seq {
                    continue;
                }
                if mtype == libc::NLMSG_ERROR as u16 {
                    let errno = -(u32_at(payload, 0) as i32);
                    return if errno == 0 {
                        Ok(None)
                    } else {
                        Err(io::Error::from_raw_os_error(errno))
                    };
                }
                if mtype == libc::RTM_NEWLINK {
                    return Ok(Some(payload.to_vec()));
                }
            }
        }
    }

    fn set(&mut self, index: i32, flags: (u32, u32), attrs: &[(u16, Vec<u8>)]) -> io::Result<()> {
        let ack = (libc::NLM_F_ACK) as u16;
        self.request(libc::RTM_NEWLINK, ack, index, flags, attrs)
            .map(|_| ())
    }

    /// The link named `name`.
    pub fn link(&mut self, name: &str) -> io::Result<Link> {
        let payload = self
            .request(
                libc::RTM_GETLINK,
                0,
                0,
                (0, 0),
                &[(IFLA_IFNAME, cstr(name))],
            )?
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no link in reply"))?;
        parse_link(&payload)
    }

    pub fn set_up(&mut self, index: i32, up: bool) -> io::Result<()> {
        self.set(index, (if up { IFF_UP } else { 0 }, IFF_UP), &[])
    }

    pub fn rename(&mut self, index: i32, name: &str) -> io::Result<()> {
        self.set(index, (0, 0), &[(IFLA_IFNAME, cstr(name))])
    }

    pub fn set_alias(&mut self, index: i32, alias: &str) -> io::Result<()> {
        self.set(index, (0, 0), &[(IFLA_IFALIAS, alias.as_bytes().to_vec())])
    }

    /// Moves the link into the network namespace `ns`.
    pub fn move_to(&mut self, index: i32, ns: RawFd) -> io::Result<()> {
        self.set(
            index,
            (0, 0),
            &[(IFLA_NET_NS_FD, (ns as u32).to_ne_bytes().to_vec())],
        )
    }
}

/// The calling thread's network namespace.
pub fn current_netns() -> io::Result<File> {
    File::open("/proc/thread-self/ns/net")
}

/// Runs `f` on a thread switched into the network namespace at `path`.
pub fn in_netns<T: Send>(path: &str, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    let ns = File::open(path)?;
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setns on this (scoped, short-lived) thread only.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
                return Err(io::Error::last_os_error());
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("network namespace thread panicked")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_link_attributes() {
        let mut p = vec![0u8, 0, 0, 0];
        p.extend_from_slice(&7i32.to_ne_bytes());
        p.extend_from_slice(&(IFF_UP | 0x1000).to_ne_bytes());
        p.extend_from_slice(&0u32.to_ne_bytes());
        attr(&mut p, IFLA_IFNAME, &cstr("eth1"));
        attr(&mut p, 99, &[1, 2, 3]);
        attr(&mut p, IFLA_IFALIAS, b"dummy0");
        let l = parse_link(&p).unwrap();
        assert_eq!(
            l,
            Link {
                index: 7,
                name: "eth1".into(),
                alias: "dummy0".into(),
                up: true
            }
        );
        assert!(parse_link(&[0; 8]).is_err());
    }

    #[test]
    fn loopback_is_found_and_unknown_links_are_not() {
        let Ok(mut nl) = Netlink::open() else {
            return; // no netlink here
        };
        let lo = nl.link("lo").unwrap();
        assert_eq!(lo.name, "lo");
        assert!(lo.index > 0);
        let err = nl.link("no-such-link0").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENODEV));
    }
}
