//! NRI v0.1.0: the one-shot plugin protocol the adapter speaks. The
//! runtime (here: the adapter) reads `/etc/nri/conf.json`, and for each
//! plugin listed runs `<type> invoke` (found in `PATH` plus `/opt/nri/bin`)
//! with a JSON request on stdin, expecting a JSON result on stdout.
//!
//! The JSON written is byte for byte what upstream's Go client writes:
//! fields in the order of its structs, empty ones left out where it leaves
//! them out, map keys sorted, `conf` passed on compacted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nri_stub::api::{LinuxNamespace, LinuxResources, OptionalValue};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::io::AsyncWriteExt;

/// Version of the protocol when the configuration names none.
pub const VERSION: &str = "0.1";
pub const DEFAULT_CONF_PATH: &str = "/etc/nri/conf.json";
pub const DEFAULT_BINARY_PATH: &str = "/opt/nri/bin";

/// `conf.json`: the plugins to run, in order.
#[derive(Debug, Default, Deserialize)]
pub struct ConfigList {
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub plugins: Vec<Option<PluginConf>>,
}

#[derive(Debug, Deserialize)]
pub struct PluginConf {
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub conf: Option<Box<RawValue>>,
}

/// The state a request announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Create,
    Delete,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Create => "create",
            State::Delete => "delete",
        }
    }
}

/// The OCI resources, as runtime-spec's Go types encode them.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct OciResources {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<OciDeviceCgroup>,
    pub memory: OciMemory,
    pub cpu: OciCpu,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<OciPids>,
    #[serde(rename = "hugepageLimits", skip_serializing_if = "Vec::is_empty")]
    pub hugepage_limits: Vec<OciHugepageLimit>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unified: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct OciDeviceCgroup {
    pub allow: bool,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minor: Option<i64>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub access: String,
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct OciMemory {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<i64>,
    #[serde(rename = "kernelTCP", skip_serializing_if = "Option::is_none")]
    pub kernel_tcp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swappiness: Option<u64>,
    #[serde(rename = "disableOOMKiller", skip_serializing_if = "Option::is_none")]
    pub disable_oom_killer: Option<bool>,
    #[serde(rename = "useHierarchy", skip_serializing_if = "Option::is_none")]
    pub use_hierarchy: Option<bool>,
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct OciCpu {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shares: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
    #[serde(rename = "realtimeRuntime", skip_serializing_if = "Option::is_none")]
    pub realtime_runtime: Option<i64>,
    #[serde(rename = "realtimePeriod", skip_serializing_if = "Option::is_none")]
    pub realtime_period: Option<u64>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cpus: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mems: String,
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct OciPids {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct OciHugepageLimit {
    #[serde(rename = "pageSize")]
    pub page_size: String,
    pub limit: u64,
}

/// NRI resources to OCI resources, as upstream's `LinuxResources.ToOCI`
/// converts them (memory and cpu always present; a pids limit only above
/// "unlimited").
pub fn to_oci(r: &LinuxResources) -> OciResources {
    let mut o = OciResources::default();
    if let Some(m) = r.memory.as_ref() {
        o.memory = OciMemory {
            limit: m.limit.value(),
            reservation: m.reservation.value(),
            swap: m.swap.value(),
            kernel: m.kernel.value(),
            kernel_tcp: m.kernel_tcp.value(),
            swappiness: m.swappiness.value(),
            disable_oom_killer: m.disable_oom_killer.value(),
            use_hierarchy: m.use_hierarchy.value(),
        };
    }
    if let Some(c) = r.cpu.as_ref() {
        o.cpu = OciCpu {
            shares: c.shares.value(),
            quota: c.quota.value(),
            period: c.period.value(),
            realtime_runtime: c.realtime_runtime.value(),
            realtime_period: c.realtime_period.value(),
            cpus: c.cpus.clone(),
            mems: c.mems.clone(),
        };
    }
    o.hugepage_limits = r
        .hugepage_limits
        .iter()
        .map(|l| OciHugepageLimit {
            page_size: l.page_size.clone(),
            limit: l.limit,
        })
        .collect();
    o.unified = r
        .unified
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    o.devices = r
        .devices
        .iter()
        .map(|d| OciDeviceCgroup {
            allow: d.allow,
            kind: d.type_.clone(),
            major: d.major.value(),
            minor: d.minor.value(),
            access: d.access.clone(),
        })
        .collect();
    if let Some(p) = r.pids.as_ref() {
        o.pids = Some(OciPids {
            limit: (p.limit > -1).then_some(p.limit),
        });
    }
    o
}

/// The part of the OCI spec a v0.1.0 request carries.
#[derive(Debug, Serialize, PartialEq)]
pub struct Spec {
    /// `null` when the pod or container has no resources.
    pub resources: Option<OciResources>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub namespaces: BTreeMap<String, String>,
    #[serde(rename = "cgroupsPath", skip_serializing_if = "String::is_empty")]
    pub cgroups_path: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Spec {
    pub fn new(
        annotations: &std::collections::HashMap<String, String>,
        namespaces: &[LinuxNamespace],
        resources: Option<&LinuxResources>,
        cgroups_path: &str,
    ) -> Spec {
        Spec {
            resources: resources.map(to_oci),
            namespaces: namespaces
                .iter()
                .map(|ns| (ns.type_.clone(), ns.path.clone()))
                .collect(),
            cgroups_path: cgroups_path.to_string(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// A v0.1.0 request.
#[derive(Debug, Serialize)]
pub struct Request {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conf: Option<Box<RawValue>>,
    pub version: String,
    pub state: &'static str,
    pub id: String,
    #[serde(rename = "sandboxID", skip_serializing_if = "String::is_empty")]
    pub sandbox_id: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub pid: u32,
    pub spec: Spec,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<V1Result>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// What a v0.1.0 plugin answers.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct V1Result {
    pub plugin: String,
    pub version: String,
    pub error: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// Removes the whitespace outside strings, as Go's encoder does with a
/// raw message.
fn compact(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let (mut in_str, mut escaped) = (false, false);
    for c in raw.chars() {
        if in_str {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else if c == '"' {
            in_str = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// The v0.1.0 client: configuration and where plugins are found.
pub struct Client {
    pub conf_path: PathBuf,
    pub bin_dir: PathBuf,
}

impl Client {
    /// Reads the configuration; a missing file means no plugins.
    pub fn load(&self) -> Result<ConfigList, String> {
        match std::fs::read_to_string(&self.conf_path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| e.to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigList {
                version: VERSION.to_string(),
                plugins: Vec::new(),
            }),
            Err(e) => Err(e.to_string()),
        }
    }

    fn find(&self, name: &str) -> PathBuf {
        if name.contains('/') {
            return PathBuf::from(name);
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(std::iter::once(self.bin_dir.clone()))
            .map(|dir| dir.join(name))
            .find(|p| is_executable(p))
            .unwrap_or_else(|| PathBuf::from(name))
    }

    /// Runs every configured plugin with the request for `id` in `state`;
    /// each sees the results of those before it. The first failure stops.
    pub async fn invoke(
        &self,
        state: State,
        id: &str,
        pid: u32,
        spec: Spec,
        sandbox: (&str, BTreeMap<String, String>),
    ) -> Result<Vec<V1Result>, String> {
        let conf = self.load()?;
        let plugins: Vec<PluginConf> = conf.plugins.into_iter().flatten().collect();
        if plugins.is_empty() {
            return Ok(Vec::new());
        }
        let mut req = Request {
            conf: None,
            version: conf.version,
            state: state.as_str(),
            id: id.to_string(),
            sandbox_id: sandbox.0.to_string(),
            pid,
            spec,
            labels: sandbox.1,
            results: Vec::new(),
        };
        for p in plugins {
            req.conf = match &p.conf {
                Some(raw) => {
                    Some(RawValue::from_string(compact(raw.get())).map_err(|e| e.to_string())?)
                }
                None => None,
            };
            let result = self
                .invoke_plugin(&p.kind, &req)
                .await
                .map_err(|e| format!("plugin: {}: {e}", p.kind))?;
            req.results.push(result);
        }
        Ok(req.results)
    }

    async fn invoke_plugin(&self, name: &str, req: &Request) -> Result<V1Result, String> {
        let payload = serde_json::to_vec(req).map_err(|e| e.to_string())?;
        let mut child = tokio::process::Command::new(self.find(name))
            .arg("invoke")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("exec: {name:?}: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A plugin may not read its input; that is its business.
            let _ = stdin.write_all(&payload).await;
        }
        let out = child.wait_with_output().await.map_err(|e| e.to_string())?;
        let mut msg = if out.stdout.is_empty() {
            "output: <empty>".to_string()
        } else {
            format!("output: {:?}", String::from_utf8_lossy(&out.stdout))
        };
        if !out.status.success() {
            msg += &format!(" exit code: {}", out.status.code().unwrap_or(-1));
        }
        let result: V1Result = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("failed to unmarshal plugin output {msg}: {e}"))?;
        if !result.error.is_empty() {
            return Err(result.error);
        }
        Ok(result)
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_stub::api::optional::{boolean, int64, uint64};
    use nri_stub::api::{LinuxCPU, LinuxMemory, LinuxPids};

    #[test]
    fn resources_encode_as_runtime_spec_does() {
        let r = LinuxResources {
            memory: protobuf::MessageField::some(LinuxMemory {
                limit: int64(1 << 20),
                use_hierarchy: boolean(false),
                ..Default::default()
            }),
            cpu: protobuf::MessageField::some(LinuxCPU {
                shares: uint64(512u64),
                cpus: "0-1".into(),
                ..Default::default()
            }),
            pids: protobuf::MessageField::some(LinuxPids {
                limit: -1,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&to_oci(&r)).unwrap(),
            r#"{"memory":{"limit":1048576,"useHierarchy":false},"cpu":{"shares":512,"cpus":"0-1"},"pids":{}}"#
        );
        assert_eq!(
            serde_json::to_string(&to_oci(&LinuxResources::default())).unwrap(),
            r#"{"memory":{},"cpu":{}}"#
        );
    }

    #[test]
    fn request_encodes_as_upstream_does() {
        let req = Request {
            conf: Some(RawValue::from_string(compact("{ \"b\": 1,\n \"a\": \"x y\" }")).unwrap()),
            version: "0.1".into(),
            state: State::Create.as_str(),
            id: "c1".into(),
            sandbox_id: "p1".into(),
            pid: 0,
            spec: Spec {
                resources: None,
                namespaces: BTreeMap::new(),
                cgroups_path: String::new(),
                annotations: BTreeMap::from([("z".into(), "1".into()), ("a".into(), "2".into())]),
            },
            labels: BTreeMap::new(),
            results: Vec::new(),
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"conf":{"b":1,"a":"x y"},"version":"0.1","state":"create","id":"c1","sandboxID":"p1","spec":{"resources":null,"annotations":{"a":"2","z":"1"}}}"#
        );
    }

    fn client(dir: &Path, conf: &str) -> Client {
        std::fs::write(dir.join("conf.json"), conf).unwrap();
        Client {
            conf_path: dir.join("conf.json"),
            bin_dir: dir.to_path_buf(),
        }
    }

    fn script(dir: &Path, name: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn spec() -> Spec {
        Spec::new(&Default::default(), &[], None, "")
    }

    #[tokio::test(flavor = "current_thread")]
    async fn runs_plugins_in_order_and_stops_at_the_first_error() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        script(d, "ok-plugin", "cat > \"$0.in\"; echo '{\"plugin\":\"ok\",\"version\":\"0.1\",\"metadata\":{\"k\":\"v\"}}'");
        script(
            d,
            "failing",
            "cat >/dev/null; echo '{\"plugin\":\"failing\",\"error\":\"no way\"}'",
        );
        script(d, "garbage", "echo not json; exit 3");
        let c = client(
            d,
            r#"{"version": "0.1", "plugins": [{"type": "ok-plugin", "conf": {"x": 1}}]}"#,
        );
        let results = c
            .invoke(State::Create, "c1", 42, spec(), ("p1", BTreeMap::new()))
            .await
            .unwrap();
        assert_eq!(results[0].metadata["k"], "v");
        let seen = std::fs::read_to_string(d.join("ok-plugin.in")).unwrap();
        assert_eq!(
            seen,
            r#"{"conf":{"x":1},"version":"0.1","state":"create","id":"c1","sandboxID":"p1","pid":42,"spec":{"resources":null}}"#
        );
        let c = client(
            d,
            r#"{"plugins": [{"type": "ok-plugin"}, {"type": "failing"}, {"type": "ok-plugin"}]}"#,
        );
        let err = c
            .invoke(State::Delete, "c1", 0, spec(), ("", BTreeMap::new()))
            .await
            .unwrap_err();
        assert_eq!(err, "plugin: failing: no way");
        let c = client(d, r#"{"plugins": [{"type": "garbage"}]}"#);
        let err = c
            .invoke(State::Create, "c1", 0, spec(), ("", BTreeMap::new()))
            .await
            .unwrap_err();
        assert!(err.starts_with("plugin: garbage: failed to unmarshal plugin output output: \"not json\\n\" exit code: 3"), "{err}");
        let c = client(d, r#"{"plugins": [{"type": "no-such-plugin"}]}"#);
        assert!(c
            .invoke(State::Create, "c1", 0, spec(), ("", BTreeMap::new()))
            .await
            .is_err());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn configuration_missing_or_malformed() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Client {
            conf_path: dir.path().join("none.json"),
            bin_dir: dir.path().into(),
        };
        assert!(missing
            .invoke(State::Create, "c", 0, spec(), ("", BTreeMap::new()))
            .await
            .unwrap()
            .is_empty());
        let bad = client(dir.path(), "{plugins: ");
        assert!(bad.load().is_err());
        assert!(bad
            .invoke(State::Create, "c", 0, spec(), ("", BTreeMap::new()))
            .await
            .is_err());
    }
}
