//! nri-network-device-injector: moves host network devices into a pod's
//! network namespace when the pod starts (and back when it stops), from the
//! pod annotation `netdevice.noderesource.dev` (or the deprecated
//! `netdevices.nri.containerd.io`), as upstream's Go
//! `network-device-injector` does.
//!
//! Flags: `-idx NN`, `-socket PATH`, `-verbose`.

mod netlink;

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;

use log::{debug, error, info};
use nri_stub::api::PodSandbox;
use nri_stub::{HandlerResult, Plugin};
use plugin_kit::dump::dump_pod_container;
use plugin_kit::{goyaml, lookup_annotation, Flags, StubOptions};
use serde::Deserialize;

use netlink::{current_netns, in_netns, Netlink};

const NETDEVICE_KEY: &str = "netdevice.noderesource.dev";
/// Deprecated spelling of [`NETDEVICE_KEY`].
const OLD_NETDEVICE_KEY: &str = "netdevices.nri.containerd.io";

/// An annotated network device (see netdevice(7)).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
struct NetDevice {
    /// Name in the runtime's (host's) namespace.
    name: String,
    /// Name inside the pod; defaults to `name`.
    new_name: String,
    address: String,
    prefix: i64,
    mtu: i64,
}

/// The devices annotated for a pod: `/pod` keys before bare keys, the
/// current prefix before the deprecated one. Addresses must parse.
fn parse_netdevices(annotations: &HashMap<String, String>) -> Result<Vec<NetDevice>, String> {
    let keys = [
        format!("{NETDEVICE_KEY}/pod"),
        format!("{OLD_NETDEVICE_KEY}/pod"),
        NETDEVICE_KEY.to_string(),
        OLD_NETDEVICE_KEY.to_string(),
    ];
    let Some((key, value)) = keys
        .iter()
        .find_map(|k| lookup_annotation(annotations, &[k]).map(|v| (k, v)))
    else {
        return Ok(Vec::new());
    };
    let mut devices: Vec<NetDevice> =
        // The error names the annotation already; from_str_in names it in
        // the warnings about unknown keys too (and, harmlessly, again here).
        goyaml::from_str_in(key, value)
            .map_err(|e| format!("invalid device annotation {key:?}: {e}"))?;
    for d in &mut devices {
        if d.new_name.is_empty() {
            d.new_name = d.name.clone();
        }
        if !d.address.is_empty() {
            let ip: IpAddr = d
                .address
                .parse()
                .map_err(|_| format!("error parsing address {}", d.address))?;
            if d.prefix == 0 {
                d.prefix = if ip.is_ipv4() { 32 } else { 128 };
            }
        }
    }
    Ok(devices)
}

/// The pod's network namespace path; empty for host-network pods.
fn pod_netns(pod: &PodSandbox) -> &str {
    pod.linux
        .namespaces
        .iter()
        .find(|ns| ns.type_ == "network")
        .map(|ns| ns.path.as_str())
        .unwrap_or("")
}

fn context(what: impl std::fmt::Display) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Moves host link `name` into the namespace at `ns_path` as `new_name`,
/// keeping its host name as the link's alias, and brings it up. On
/// failure everything done is undone.
fn inject(name: &str, new_name: &str, ns_path: &str) -> io::Result<()> {
    let mut host = Netlink::open()?;
    let host_ns = current_netns()?;
    let dev = host.link(name)?;
    host.set_up(dev.index, false)
        .map_err(context(format_args!("failed to set {name:?} down")))?;
    let temp = format!("temp_{}", dev.index);
    let restore_host = |host: &mut Netlink, index: i32, renamed: bool| {
        if renamed {
            let _ = host.rename(index, name);
        }
        if dev.up {
            let _ = host.set_up(index, true);
        }
    };
    if let Err(e) = host.rename(dev.index, &temp) {
        restore_host(&mut host, dev.index, false);
        return Err(context(format_args!(
            "failed to rename device {name:?} to temporary name"
        ))(e));
    }
    let ns = std::fs::File::open(ns_path)?;
    if let Err(e) = host.move_to(dev.index, ns.as_raw_fd()) {
        restore_host(&mut host, dev.index, true);
        return Err(context(format_args!(
            "failed to move {temp:?} to container ns"
        ))(e));
    }
    let inside = in_netns(ns_path, || {
        let mut nl = Netlink::open()?;
        let moved = nl
            .link(&temp)
            .map_err(context(format_args!("failed to find {temp:?}")))?;
        let result = (|| {
            nl.set_alias(moved.index, name)
                .map_err(context(format_args!("failed to set alias to {temp:?}")))?;
            nl.rename(moved.index, new_name)
                .map_err(context(format_args!(
                    "failed to rename device {temp:?} to {new_name:?}"
                )))?;
            nl.set_up(moved.index, true)
                .map_err(context(format_args!("failed to set {new_name:?} up")))
        })();
        if result.is_err() {
            // Back to the host, under the temporary name.
            let _ = nl.set_up(moved.index, false);
            let _ = nl.rename(moved.index, &temp);
            let _ = nl.move_to(moved.index, host_ns.as_raw_fd());
        }
        result
    });
    if let Err(e) = inside {
        if let Ok(back) = host.link(&temp) {
            restore_host(&mut host, back.index, true);
        }
        return Err(e);
    }
    Ok(())
}

/// Moves link `new_name` out of the namespace at `ns_path` back to the
/// host, restoring its host name from its alias; it is left down.
fn release(new_name: &str, ns_path: &str) -> io::Result<()> {
    let host_ns = current_netns()?;
    let (temp, was_up) = in_netns(ns_path, || {
        let mut nl = Netlink::open()?;
        let dev = nl
            .link(new_name)
            .map_err(context(format_args!("failed to find {new_name:?}")))?;
        nl.set_up(dev.index, false)
            .map_err(context(format_args!("failed to set {new_name:?} down")))?;
        let temp = format!("temp_{}", dev.index);
        let moved = nl
            .rename(dev.index, &temp)
            .and_then(|_| nl.move_to(dev.index, host_ns.as_raw_fd()));
        if let Err(e) = moved {
            let _ = nl.rename(dev.index, new_name);
            if dev.up {
                let _ = nl.set_up(dev.index, true);
            }
            return Err(context(format_args!(
                "failed to move {new_name:?} to host netns"
            ))(e));
        }
        Ok((temp, dev.up))
    })?;
    let mut host = Netlink::open()?;
    let dev = host.link(&temp).map_err(context(format_args!(
        "failed to find {temp:?} in host namespace"
    )))?;
    if let Err(e) = host.rename(dev.index, &dev.alias) {
        // Back into the pod, so that it can be retried.
        if let Ok(ns) = std::fs::File::open(ns_path) {
            let _ = host.move_to(dev.index, ns.as_raw_fd());
            let _ = in_netns(ns_path, || {
                let mut nl = Netlink::open()?;
                let l = nl.link(&temp)?;
                nl.rename(l.index, new_name)?;
                if was_up {
                    nl.set_up(l.index, true)?;
                }
                Ok(())
            });
        }
        return Err(context(format_args!(
            "failed to restore {temp:?} to original name {:?}",
            dev.alias
        ))(e));
    }
    Ok(())
}

struct Injector {
    verbose: bool,
}

#[nri_stub::plugin]
impl Plugin for Injector {
    async fn run_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        debug!(
            "Started pod... namespace={} name={}",
            pod.namespace, pod.name
        );
        if self.verbose {
            dump_pod_container("RunPodSandbox", pod, None);
        }
        let devices = parse_netdevices(&pod.annotations).inspect_err(|e| error!("{e}"))?;
        if devices.is_empty() {
            return Ok(());
        }
        let ns = pod_netns(pod);
        if ns.is_empty() {
            info!(
                "Pod using host namespace, skipping ... namespace={} name={}",
                pod.namespace, pod.name
            );
            return Err("trying to inject network device on host network Pod".into());
        }
        for d in &devices {
            if let Err(e) = inject(&d.name, &d.new_name, ns) {
                // As upstream: the pod starts anyway, remaining devices
                // are not injected.
                error!(
                    "failed to inject network device {:?} as {:?}: {e}",
                    d.name, d.new_name
                );
                return Ok(());
            }
            info!(
                "injected network device {:?} as {:?} into {ns}",
                d.name, d.new_name
            );
        }
        Ok(())
    }

    async fn stop_pod_sandbox(&self, pod: &PodSandbox) -> HandlerResult<()> {
        debug!(
            "Stopped pod... namespace={} name={}",
            pod.namespace, pod.name
        );
        if self.verbose {
            dump_pod_container("StopPodSandbox", pod, None);
        }
        let devices = parse_netdevices(&pod.annotations).inspect_err(|e| error!("{e}"))?;
        let ns = pod_netns(pod);
        if devices.is_empty() || ns.is_empty() {
            return Ok(());
        }
        for d in &devices {
            if let Err(e) = release(&d.new_name, ns) {
                error!("failed to release network device {:?}: {e}", d.new_name);
                return Ok(());
            }
            info!("released network device {:?} as {:?}", d.new_name, d.name);
        }
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::new("nri-network-device-injector")
        .string("idx", "", "plugin index to register to NRI")
        .string("socket", "", "path to NRI socket")
        .boolean("verbose", "enable (more) verbose logging")
        .parse_env_or_exit();
    let verbose = flags.flag("verbose");
    plugin_kit::logging::init(verbose);
    plugin_kit::run_plugin(
        StubOptions::from_flags(&flags, "socket"),
        Injector { verbose },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command, Stdio};

    use plugin_kit::annotations::from_pairs as ann;

    #[test]
    fn parsing_and_defaults() {
        let d = parse_netdevices(&ann(&[(
            "netdevice.noderesource.dev",
            "- name: dummy0\n  new_name: eth33\n  address: 192.168.2.2\n- name: d1\n  address: fe80::1\n",
        )]))
        .unwrap();
        assert_eq!((d[0].new_name.as_str(), d[0].prefix), ("eth33", 32));
        assert_eq!((d[1].new_name.as_str(), d[1].prefix), ("d1", 128));
        // Precedence: /pod keys first, the current prefix first.
        let d = parse_netdevices(&ann(&[
            ("netdevice.noderesource.dev", "- name: bare"),
            ("netdevices.nri.containerd.io/pod", "- name: oldpod"),
        ]))
        .unwrap();
        assert_eq!(d[0].name, "oldpod");
        assert!(
            parse_netdevices(&ann(&[("netdevices.noderesource.dev", "- name: x")]))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn malformed_annotations() {
        let err =
            |v: &str| parse_netdevices(&ann(&[("netdevice.noderesource.dev", v)])).unwrap_err();
        assert_eq!(
            err("- name: d\n  address: 300.1.1.1"),
            "error parsing address 300.1.1.1"
        );
        assert!(
            err("name: d").starts_with("invalid device annotation \"netdevice.noderesource.dev\"")
        );
        assert!(err("- {name: d, mtu: big}").contains("invalid type"));
    }

    fn ip(args: &[&str]) -> String {
        let out = Command::new("ip").args(args).output().expect("ip");
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A process holding a fresh network namespace (the "pod").
    struct PodNs(Child);

    impl Drop for PodNs {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Moves a veth end into a pod namespace and back, on a thread of its
    /// own network namespace (the "host"), so the machine's network is
    /// never touched. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and `ip`.
    #[test]
    fn inject_and_release_between_namespaces() {
        let skip = |why: &str| eprintln!("skipped: {why}");
        // SAFETY: geteuid(2) has no preconditions.
        if unsafe { libc::geteuid() } != 0 || Command::new("ip").arg("-V").output().is_err() {
            return skip("needs root and ip");
        }
        std::thread::spawn(move || {
            // SAFETY: only this test thread changes namespace.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return skip("cannot create a network namespace");
            }
            if Command::new("ip")
                .args([
                    "link", "add", "hostdev0", "type", "veth", "peer", "name", "peer0",
                ])
                .status()
                .map_or(true, |s| !s.success())
            {
                return skip("cannot create veth links");
            }
            ip(&["link", "set", "hostdev0", "up"]);
            let pod = PodNs(
                Command::new("unshare")
                    .args(["-n", "sleep", "30"])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("unshare"),
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
            let ns = format!("/proc/{}/ns/net", pod.0.id());
            let in_pod = |args: &[&str]| {
                let net = format!("--net={ns}");
                let mut a = vec![net.as_str(), "ip"];
                a.extend_from_slice(args);
                let out = Command::new("nsenter").args(&a).output().expect("nsenter");
                String::from_utf8_lossy(&out.stdout).into_owned()
            };

            inject("hostdev0", "eth33", &ns).expect("inject");
            let shown = in_pod(&["link", "show", "eth33"]);
            assert!(shown.contains("eth33"), "{shown}");
            assert!(shown.contains("alias hostdev0"), "{shown}");
            assert!(shown.contains(",UP"), "{shown}");
            assert!(!ip(&["link", "show"]).contains("hostdev0"));

            // A missing device, or a name taken in the pod, changes nothing.
            assert!(inject("nosuchdev", "eth34", &ns).is_err());
            ip(&[
                "link", "add", "second0", "type", "veth", "peer", "name", "peer1",
            ]);
            assert!(inject("second0", "eth33", &ns).is_err());
            assert!(ip(&["link", "show", "second0"]).contains("second0"));

            release("eth33", &ns).expect("release");
            assert!(ip(&["link", "show", "hostdev0"]).contains("hostdev0"));
            assert!(!in_pod(&["link", "show"]).contains("eth33"));
            assert!(release("eth33", &ns).is_err());
        })
        .join()
        .unwrap();
    }
}
