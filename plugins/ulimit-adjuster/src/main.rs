//! nri-ulimit-adjuster: sets POSIX resource limits (rlimits) of a container
//! from its pod's annotations, with the flags, annotations and errors of
//! upstream's Go `ulimit-adjuster`.
//!
//! Flags: `-name NAME`, `-idx NN`, `-socket PATH`, `-verbose`.

use std::collections::HashMap;

use log::{debug, error, info};
use nri_stub::api::{Container, ContainerAdjustment, ContainerUpdate, PodSandbox};
use nri_stub::{HandlerResult, Plugin};
use plugin_kit::{goyaml, lookup_annotation, Flags, StubOptions};
use serde::Deserialize;

const ULIMIT_KEY: &str = "ulimits.noderesource.dev";
/// Deprecated spelling of [`ULIMIT_KEY`].
const OLD_ULIMIT_KEY: &str = "ulimits.nri.containerd.io";
const RLIMIT_PREFIX: &str = "RLIMIT_";

const VALID: &[&str] = &[
    "AS",
    "CORE",
    "CPU",
    "DATA",
    "FSIZE",
    "LOCKS",
    "MEMLOCK",
    "MSGQUEUE",
    "NICE",
    "NOFILE",
    "NPROC",
    "RSS",
    "RTPRIO",
    "RTTIME",
    "SIGPENDING",
    "STACK",
];

/// One annotated limit.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
struct Ulimit {
    #[serde(rename = "type")]
    kind: String,
    hard: u64,
    soft: u64,
}

/// The limits annotated for container `ctr`: only container-specific keys
/// count, the current key before the deprecated one; an empty value means
/// none. Types are normalized to `RLIMIT_<TYPE>`.
fn parse_ulimits(annotations: &HashMap<String, String>, ctr: &str) -> Result<Vec<Ulimit>, String> {
    let keys = [
        format!("{ULIMIT_KEY}/container.{ctr}"),
        format!("{OLD_ULIMIT_KEY}/container.{ctr}"),
    ];
    let value = lookup_annotation(annotations, &keys).unwrap_or("");
    if value.is_empty() {
        debug!("no annotations found with keys {keys:?}");
        return Ok(Vec::new());
    }
    let mut ulimits: Vec<Ulimit> = goyaml::from_str_in(ULIMIT_KEY, value)?;
    for u in &mut ulimits {
        let upper = u.kind.to_uppercase();
        let typ = upper.strip_prefix(RLIMIT_PREFIX).unwrap_or(&upper);
        if !VALID.contains(&typ) {
            debug!("failed to parse type {:?} (trimmed {typ:?})", u.kind);
            return Err(format!("failed to parse type: {:?}", u.kind));
        }
        u.kind = format!("{RLIMIT_PREFIX}{typ}");
    }
    Ok(ulimits)
}

fn adjust_ulimits(ulimits: &[Ulimit]) -> Result<ContainerAdjustment, String> {
    let mut adjust = ContainerAdjustment::new();
    for u in ulimits {
        if u.hard < u.soft {
            return Err(format!(
                "ulimit {:?} must have hard limit >= soft limit",
                u.kind
            ));
        }
        debug!(
            "adjust rlimit type={} hard={} soft={}",
            u.kind, u.hard, u.soft
        );
        adjust.add_rlimit(u.kind.clone(), u.hard, u.soft);
    }
    Ok(adjust)
}

struct Adjuster;

#[nri_stub::plugin]
impl Plugin for Adjuster {
    async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<(ContainerAdjustment, Vec<ContainerUpdate>)> {
        debug!("create container pod={} container={}", pod.name, ctr.name);
        let adjust = parse_ulimits(&pod.annotations, &ctr.name)
            .and_then(|u| adjust_ulimits(&u))
            .inspect_err(|e| error!("pod={} container={}: {e}", pod.name, ctr.name))?;
        Ok((adjust, Vec::new()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::new("nri-ulimit-adjuster")
        .string("name", "", "plugin name to register to NRI")
        .string("idx", "", "plugin index to register to NRI")
        .string("socket", "", "path to the plugin socket")
        .boolean("verbose", "enable (more) verbose logging")
        .parse_env_or_exit();
    plugin_kit::logging::init(flags.flag("verbose"));
    info!(
        "starting plugin name={:?} idx={:?} verbose={}",
        flags.get("name"),
        flags.get("idx"),
        flags.flag("verbose")
    );
    plugin_kit::run_plugin(StubOptions::from_flags(&flags, "socket"), Adjuster).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(k: &str, v: &str) -> HashMap<String, String> {
        HashMap::from([(k.to_string(), v.to_string())])
    }

    #[test]
    fn parses_and_normalizes_types() {
        let a = ann(
            "ulimits.nri.containerd.io/container.sleep",
            "- type: memlock\n  hard: 987654\n  soft: 645321\n- type: RLIMIT_NOFILE\n  hard: 4096\n  soft: 1024\n- type: nproc\n  hard: 9000\n",
        );
        let u = parse_ulimits(&a, "sleep").unwrap();
        let kinds: Vec<_> = u.iter().map(|u| u.kind.as_str()).collect();
        assert_eq!(kinds, ["RLIMIT_MEMLOCK", "RLIMIT_NOFILE", "RLIMIT_NPROC"]);
        let adj = adjust_ulimits(&u).unwrap();
        assert_eq!(adj.rlimits.len(), 3);
        assert_eq!((adj.rlimits[2].hard, adj.rlimits[2].soft), (9000, 0));
        // Only container-specific keys count.
        assert!(
            parse_ulimits(&ann("ulimits.noderesource.dev/pod", "- {type: cpu}"), "c")
                .unwrap()
                .is_empty()
        );
        // The current key wins, even when empty.
        let mut both = ann("ulimits.noderesource.dev/container.c", "");
        both.insert(
            "ulimits.nri.containerd.io/container.c".into(),
            "- {type: cpu}".into(),
        );
        assert!(parse_ulimits(&both, "c").unwrap().is_empty());
    }

    #[test]
    fn malformed_input() {
        let err = |v: &str| {
            parse_ulimits(&ann("ulimits.noderesource.dev/container.c", v), "c")
                .and_then(|u| adjust_ulimits(&u))
                .unwrap_err()
        };
        assert_eq!(err("- type: bogus"), "failed to parse type: \"bogus\"");
        assert_eq!(
            err("- {type: cpu, hard: 1, soft: 2}"),
            "ulimit \"RLIMIT_CPU\" must have hard limit >= soft limit"
        );
        assert!(err("- {type: cpu, hard: -1}").contains("invalid value"));
        assert!(err("type: cpu").contains("expected a sequence"));
        assert!(err("- [").contains("did not find"));
    }
}
