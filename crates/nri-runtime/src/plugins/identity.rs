//! Who is at the other end of a plugin connection, and which of them may
//! register which plugin names.
//!
//! The kernel tells a Unix socket's peer at accept time (`SO_PEERCRED`:
//! uid, gid, pid); the executable and the cgroup are read from `/proc` for
//! that pid, and the pod and container of a plugin running in Kubernetes
//! from the cgroup's path. A registration is then checked against the
//! runtime's [`IdentityPolicy`], if it has one. The name registry that
//! keeps a name to its holder is `names.rs`.

use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

/// The credentials and whereabouts of a plugin's process.
///
/// `uid`, `gid` and `pid` are the kernel's, taken when the plugin
/// connected. `executable` and `cgroup` are read from `/proc` right after;
/// where the kernel offers a pidfd of the peer (`SO_PEERPIDFD`, Linux 6.5
/// and later) the reading is kept only if the peer is still alive after
/// it, so they cannot belong to a process that took a dead peer's pid.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PeerIdentity {
    pub uid: u32,
    pub gid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// What `/proc/<pid>/exe` points to, as the runtime's mount namespace
    /// sees it (for a containerized plugin, a path in its image's layers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executable: Option<PathBuf>,
    /// The process's cgroup (v2, or the first v1 hierarchy listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// The Kubernetes pod UID in that cgroup's path, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    /// The container ID in that cgroup's path, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
}

impl PeerIdentity {
    /// The peer of `socket`; `None` if the kernel does not say.
    pub(crate) fn of_socket(socket: &tokio::net::UnixStream) -> Option<PeerIdentity> {
        let cred = socket.peer_cred().ok()?;
        let pidfd = peer_pidfd(socket);
        let mut id = PeerIdentity::bare(cred.uid(), cred.gid(), cred.pid());
        if let Some(pid) = id.pid {
            id.read_proc(pid);
            if pidfd.as_ref().is_some_and(has_exited) {
                // Gone before we finished: what /proc said may be another's.
                id.forget_proc();
            }
        }
        Some(id)
    }

    /// A process the runtime launched (its socket's credentials would be
    /// the runtime's own): its effective ids are read from `/proc`.
    pub(crate) fn of_child(pid: i32) -> PeerIdentity {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let effective = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|ids| ids.split_whitespace().nth(1))
                .and_then(|id| id.parse().ok())
        };
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let mut id = PeerIdentity::bare(
            effective("Uid:").unwrap_or(uid),
            effective("Gid:").unwrap_or(gid),
            Some(pid),
        );
        id.read_proc(pid);
        id
    }

    /// The runtime's own process (builtin plugins and WASM modules run in
    /// it, but have no identity of their own).
    #[cfg(test)]
    pub(crate) fn of_runtime() -> PeerIdentity {
        PeerIdentity::of_child(std::process::id() as i32)
    }

    fn bare(uid: u32, gid: u32, pid: Option<i32>) -> PeerIdentity {
        PeerIdentity {
            uid,
            gid,
            pid,
            executable: None,
            cgroup: None,
            pod_uid: None,
            container_id: None,
        }
    }

    fn read_proc(&mut self, pid: i32) {
        self.executable = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        self.cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .ok()
            .and_then(|text| cgroup_path(&text).map(str::to_string));
        let (pod, container) = self
            .cgroup
            .as_deref()
            .map(kubernetes_ids)
            .unwrap_or_default();
        self.pod_uid = pod;
        self.container_id = container;
    }

    fn forget_proc(&mut self) {
        let (uid, gid, pid) = (self.uid, self.gid, self.pid);
        *self = PeerIdentity::bare(uid, gid, pid);
    }

    /// The identity as a JSON object (`uid`, `gid`, `pid`, `executable`,
    /// `cgroup`, `podUid`, `containerId`; what is unknown left out), as the
    /// C ABI and Go report it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Whether `other` is the same principal: a new instance of the same
    /// plugin (another pid, another pod) is; another user or program is
    /// not.
    pub(crate) fn same_principal(&self, other: &PeerIdentity) -> bool {
        self.uid == other.uid && self.gid == other.gid && self.executable == other.executable
    }
}

impl fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "uid={} gid={}", self.uid, self.gid)?;
        if let Some(pid) = self.pid {
            write!(f, " pid={pid}")?;
        }
        if let Some(exe) = &self.executable {
            write!(f, " exe={}", exe.display())?;
        }
        if let Some(pod) = &self.pod_uid {
            write!(f, " pod={pod}")?;
        }
        if let Some(ctr) = &self.container_id {
            write!(f, " container={ctr}")?;
        }
        Ok(())
    }
}

/// `SO_PEERPIDFD` (Linux 6.5), not yet in every libc crate release.
const SO_PEERPIDFD: libc::c_int = 77;

/// A pidfd of the socket's peer, where the kernel has them.
fn peer_pidfd(socket: &tokio::net::UnixStream) -> Option<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: fd and len are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&mut fd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    // SAFETY: on success the kernel gave us a new descriptor to own.
    (rc == 0 && fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether the process behind `pidfd` has exited (signal 0 checks only).
/// Only the kernel's "no such process" says so: where the call is refused
/// (a seccomp filter, an emulator), nothing is known, as on kernels
/// without `SO_PEERPIDFD`.
fn has_exited(pidfd: &OwnedFd) -> bool {
    // SAFETY: a null siginfo is allowed; signal 0 delivers nothing.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// The path of the unified hierarchy in `/proc/<pid>/cgroup`, else of the
/// first hierarchy listed.
fn cgroup_path(text: &str) -> Option<&str> {
    text.lines()
        .find(|l| l.starts_with("0::"))
        .or_else(|| text.lines().next())
        .and_then(|line| line.splitn(3, ':').nth(2))
        .filter(|p| !p.is_empty())
}

/// The pod UID and container ID in a kubelet-made cgroup path. The kubelet
/// names a pod's cgroup `pod<uid>` (cgroupfs driver) or
/// `kubepods-<class>-pod<uid with _ for ->.slice` (systemd driver); the
/// container's is the component below it, `<id>` or `<runtime>-<id>.scope`.
pub(crate) fn kubernetes_ids(cgroup: &str) -> (Option<String>, Option<String>) {
    let mut parts = cgroup.split('/').filter(|c| !c.is_empty());
    let mut pod = None;
    for part in parts.by_ref() {
        let slice = part.strip_suffix(".slice").unwrap_or(part);
        let uid = if slice.starts_with("kubepods") {
            slice
                .rsplit_once("-pod")
                .map(|(_, uid)| uid.replace('_', "-"))
        } else {
            slice.strip_prefix("pod").map(str::to_string)
        };
        if let Some(uid) = uid.filter(|u| !u.is_empty()) {
            pod = Some(uid);
            break;
        }
    }
    let container = pod.as_ref().and(parts.next()).map(|c| {
        let scope = c.strip_suffix(".scope").unwrap_or(c);
        scope.rsplit('-').next().unwrap_or(scope).to_string()
    });
    (pod, container)
}

/// Which identities may register which plugin names: a runtime's
/// configuration, in YAML or JSON.
///
/// ```yaml
/// rules:
///   - plugins: [10-resource-policy]   # idx-name, name, or "*"
///     uids: [0]
///     executables: [/usr/local/bin/nri-resource-policy]
///   - plugins: [logger]
///     gids: [2000]
///     cgroups: [/system.slice/nri-logger.service]
/// ```
///
/// An external plugin may register as `idx-name` only if a rule lists that
/// name (as `idx-name`, as `name`, or `"*"`) and the plugin's identity
/// meets every criterion the rule gives: its uid is among `uids`, its gid
/// among `gids`, its executable among `executables`, its cgroup at or
/// below one of `cgroups`. A criterion left out is met by anyone. A policy
/// also makes names exclusive (see [`Options::plugin_identities`]).
///
/// [`Options::plugin_identities`]: crate::Options::plugin_identities
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityPolicy {
    #[serde(default)]
    rules: Vec<IdentityRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityRule {
    plugins: Vec<String>,
    #[serde(default)]
    uids: Vec<u32>,
    #[serde(default)]
    gids: Vec<u32>,
    #[serde(default)]
    executables: Vec<PathBuf>,
    #[serde(default)]
    cgroups: Vec<String>,
}

/// Why an identity policy does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid plugin identity policy: {0}")]
pub struct PolicyError(String);

impl IdentityPolicy {
    /// Parses a policy; unknown keys are errors, since a misspelled
    /// criterion would otherwise let anyone in.
    pub fn from_yaml(text: &str) -> Result<IdentityPolicy, PolicyError> {
        let policy: IdentityPolicy =
            nri_yaml::from_str(text, |_| {}).map_err(|e| PolicyError(e.to_string()))?;
        for rule in &policy.rules {
            if rule.plugins.is_empty() {
                return Err(PolicyError("a rule names no plugins".into()));
            }
            let relative = rule.executables.iter().find(|p| !p.is_absolute());
            if let Some(p) = relative {
                return Err(PolicyError(format!(
                    "executable {} is not an absolute path",
                    p.display()
                )));
            }
            if let Some(c) = rule.cgroups.iter().find(|c| !c.starts_with('/')) {
                return Err(PolicyError(format!("cgroup {c:?} does not start with /")));
            }
        }
        Ok(policy)
    }

    /// Whether `id` may register as `idx-base`.
    pub fn permits(&self, idx: &str, base: &str, id: &PeerIdentity) -> bool {
        let full = format!("{idx}-{base}");
        self.rules.iter().any(|rule| {
            rule.plugins
                .iter()
                .any(|p| p == "*" || *p == base || *p == full)
                && rule.admits(id)
        })
    }
}

impl IdentityRule {
    fn admits(&self, id: &PeerIdentity) -> bool {
        let any_or = |empty: bool, found: bool| empty || found;
        any_or(self.uids.is_empty(), self.uids.contains(&id.uid))
            && any_or(self.gids.is_empty(), self.gids.contains(&id.gid))
            && any_or(
                self.executables.is_empty(),
                id.executable
                    .as_ref()
                    .is_some_and(|exe| self.executables.contains(exe)),
            )
            && any_or(
                self.cgroups.is_empty(),
                id.cgroup.as_deref().is_some_and(|cg| {
                    self.cgroups
                        .iter()
                        .any(|prefix| path_at_or_below(cg, prefix))
                }),
            )
    }
}

/// Whether `path` is `prefix` or below it, by whole components.
fn path_at_or_below(path: &str, prefix: &str) -> bool {
    let normal = |p: &str| -> Vec<String> {
        Path::new(p)
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect()
    };
    // A cgroup path from the kernel has no `..`; a configured one might.
    if prefix.split('/').any(|c| c == "..") {
        return false;
    }
    normal(path).starts_with(&normal(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(uid: u32, gid: u32, exe: &str, cgroup: &str) -> PeerIdentity {
        let mut id = PeerIdentity::bare(uid, gid, Some(1));
        id.executable = (!exe.is_empty()).then(|| PathBuf::from(exe));
        id.cgroup = (!cgroup.is_empty()).then(|| cgroup.to_string());
        id
    }

    #[test]
    fn kubelet_cgroup_paths_name_pod_and_container() {
        let systemd = "/kubepods.slice/kubepods-burstable.slice/\
            kubepods-burstable-pod1a2b_3c4d.slice/cri-containerd-abc123.scope";
        assert_eq!(
            kubernetes_ids(systemd),
            (Some("1a2b-3c4d".into()), Some("abc123".into()))
        );
        let guaranteed = "/kubepods.slice/kubepods-pod99_aa.slice/crio-def456.scope";
        assert_eq!(
            kubernetes_ids(guaranteed),
            (Some("99-aa".into()), Some("def456".into()))
        );
        let cgroupfs = "/kubepods/besteffort/pod1a2b-3c4d/abc123";
        assert_eq!(
            kubernetes_ids(cgroupfs),
            (Some("1a2b-3c4d".into()), Some("abc123".into()))
        );
        assert_eq!(
            kubernetes_ids("/system.slice/containerd.service"),
            (None, None)
        );
        assert_eq!(kubernetes_ids("/kubepods.slice"), (None, None));
    }

    #[test]
    fn the_unified_cgroup_wins_over_v1_lines() {
        assert_eq!(cgroup_path("0::/a/b\n"), Some("/a/b"));
        assert_eq!(cgroup_path("12:pids:/x\n0::/y\n"), Some("/y"));
        assert_eq!(cgroup_path("4:memory:/m\n3:cpu:/c\n"), Some("/m"));
        assert_eq!(cgroup_path(""), None);
    }

    #[test]
    fn a_rule_admits_only_identities_meeting_all_its_criteria() {
        let policy = IdentityPolicy::from_yaml(
            "rules:\n\
             - plugins: [10-policy, logger]\n  uids: [0]\n  executables: [/usr/bin/p]\n\
             - plugins: ['*']\n  gids: [2000]\n  cgroups: [/system.slice/nri]\n",
        )
        .unwrap();
        let root_p = id(0, 0, "/usr/bin/p", "");
        assert!(policy.permits("10", "policy", &root_p));
        assert!(policy.permits("90", "logger", &root_p), "by bare name");
        assert!(!policy.permits("20", "policy", &root_p), "idx-name differs");
        assert!(!policy.permits("10", "policy", &id(1000, 0, "/usr/bin/p", "")));
        assert!(!policy.permits("10", "policy", &id(0, 0, "/tmp/p", "")));
        assert!(
            !policy.permits("10", "policy", &id(0, 0, "", "")),
            "exe unknown"
        );
        let svc = id(5, 2000, "/x", "/system.slice/nri/sub");
        assert!(policy.permits("50", "anything", &svc));
        let sibling = id(5, 2000, "/x", "/system.slice/nri2");
        assert!(!policy.permits("50", "anything", &sibling), "prefix trap");
        assert!(!policy.permits("50", "anything", &id(5, 2000, "/x", "")));
    }

    #[test]
    fn an_empty_policy_admits_nobody() {
        let policy = IdentityPolicy::from_yaml("rules: []").unwrap();
        assert!(!policy.permits("10", "p", &id(0, 0, "/p", "/")));
    }

    #[test]
    fn policy_mistakes_are_errors_not_wider_access() {
        for (text, needle) in [
            ("rules:\n- plugins: [p]\n  uid: [0]\n", "uid"),
            ("rules:\n- uids: [0]\n", "plugins"),
            ("rules:\n- plugins: []\n", "names no plugins"),
            (
                "rules:\n- plugins: [p]\n  executables: [bin/p]\n",
                "absolute",
            ),
            (
                "rules:\n- plugins: [p]\n  cgroups: [system.slice]\n",
                "start with /",
            ),
            ("rules:\n- plugins: [p]\n  uids: [root]\n", "invalid"),
        ] {
            let err = IdentityPolicy::from_yaml(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_new_instance_is_the_same_principal_another_user_is_not() {
        let a = id(0, 0, "/usr/bin/p", "/pod-a");
        let mut b = id(0, 0, "/usr/bin/p", "/pod-b");
        b.pid = Some(2);
        assert!(a.same_principal(&b));
        assert!(!a.same_principal(&id(1, 0, "/usr/bin/p", "")));
        assert!(!a.same_principal(&id(0, 0, "/usr/bin/q", "")));
    }

    fn pidfd_of(pid: i32) -> OwnedFd {
        // SAFETY: pidfd_open takes a pid and flags; a new fd is ours.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        assert!(fd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
        // SAFETY: the kernel gave us this descriptor.
        unsafe { OwnedFd::from_raw_fd(fd as i32) }
    }

    #[test]
    fn only_a_process_that_is_gone_has_exited() {
        let _turn = crate::plugins::child::pidfd_test_turn();
        assert!(!has_exited(&pidfd_of(std::process::id() as i32)));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let fd = pidfd_of(child.id() as i32);
        child.wait().unwrap();
        assert!(has_exited(&fd));
    }

    #[tokio::test]
    async fn a_socket_peer_is_this_process() {
        // The peer's pidfd counts among the process's.
        let _turn = crate::plugins::child::pidfd_test_turn();
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let me = PeerIdentity::of_socket(&a).unwrap();
        // SAFETY: getuid cannot fail.
        assert_eq!(me.uid, unsafe { libc::getuid() });
        assert_eq!(me.pid, Some(std::process::id() as i32));
        assert_eq!(me.executable, std::env::current_exe().ok());
        assert!(me.cgroup.is_some());
        assert_eq!(me, PeerIdentity::of_runtime());
    }
}
