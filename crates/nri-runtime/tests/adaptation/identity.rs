//! Plugin processes of different users against the runtime's identity
//! policy: who may register which name, and that a name in use cannot be
//! taken. The plugins are upstream's Go stub; the tests need root to start
//! them as other users and skip themselves without it.

use std::os::unix::fs::PermissionsExt;

use nri_runtime::validator::DefaultValidatorConfig;
use nri_runtime::{IdentityPolicy, Options};
use serde_json::json;

use crate::common::*;
use crate::goprocess::{go_plugin_for_others, GoPlugin};

/// The user a policy admits, and one it does not.
const ADMITTED: u32 = 65534;
const STRANGER: u32 = 65533;

fn is_root() -> bool {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() == 0 }
}

/// A started adaptation with `policy`, its socket open to every user (as a
/// runtime would make it for plugins of other users); `None` if not root.
async fn harness(policy: &str, tweak: impl FnOnce(Options) -> Options) -> Option<Harness> {
    if !is_root() {
        eprintln!("skipped: running plugins as other users needs root");
        return None;
    }
    let policy = IdentityPolicy::from_yaml(policy).unwrap();
    let h = Harness::start_with(|o| tweak(o.plugin_identities(policy)), Default::default()).await;
    h.nri.start().await.unwrap();
    open_to_everyone(&h);
    Some(h)
}

fn open_to_everyone(h: &Harness) {
    let mode = |path: &std::path::Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    // The plugins write their request logs into the harness's directory.
    mode(h.dir.path(), 0o777);
    mode(h.socket.parent().unwrap(), 0o755);
    mode(&h.socket, 0o666);
}

/// Waits for an adaptation log line containing every one of `needles`.
async fn wait_logged(needles: &[&str]) -> String {
    let found = || {
        logged(needles[0])
            .into_iter()
            .find(|l| needles.iter().all(|n| l.contains(n)))
    };
    tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(line) = found() {
                return line;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no log line with {needles:?}"))
}

fn quiet() -> serde_json::Value {
    json!({"events": "createcontainer"})
}

#[tokio::test]
async fn a_name_bound_to_a_user_is_refused_to_other_users() {
    let policy = "rules:\n- plugins: [bound-policy]\n  uids: [65534]\n";
    let Some(h) = harness(policy, |o| o).await else {
        return;
    };
    let stranger = GoPlugin::start_as(&h, "bound-policy", "10", quiet(), STRANGER, STRANGER);
    let refusal = wait_logged(&["refusing plugin registration", "uid=65533"]).await;
    assert!(
        refusal.contains("plugin \"10-bound-policy\" may not register: no identity rule admits"),
        "{refusal}"
    );
    assert!(
        refusal.contains(&format!("pid={}", stranger.pid())),
        "{refusal}"
    );
    assert!(h.nri.plugins().is_empty());
    // The plugin was told why.
    let mut stranger = stranger;
    stranger.wait();
    let told = std::fs::read_to_string(&stranger.stderr).unwrap();
    assert!(told.contains("no identity rule admits"), "{told}");

    let admitted = GoPlugin::start_as(&h, "bound-policy", "10", quiet(), ADMITTED, ADMITTED);
    h.wait_plugins(1).await;
    let id = h.nri.plugin_identity("10-bound-policy").unwrap();
    assert_eq!((id.uid, id.gid), (ADMITTED, ADMITTED));
    assert_eq!(id.pid, Some(admitted.pid() as i32));
    assert_eq!(
        id.executable.as_deref(),
        Some(go_plugin_for_others(&h).canonicalize().unwrap().as_path())
    );
    assert!(id.cgroup.is_some());
}

#[tokio::test]
async fn a_required_plugins_name_cannot_be_taken_while_it_is_held() {
    let validator = DefaultValidatorConfig {
        enable: true,
        required_plugins: vec!["held-policy".into()],
        ..Default::default()
    };
    let policy = "rules:\n- plugins: ['*']\n";
    let Some(h) = harness(policy, |o| o.default_validator(validator)).await else {
        return;
    };
    let holder = GoPlugin::start_as(&h, "held-policy", "10", quiet(), ADMITTED, ADMITTED);
    h.wait_plugins(2).await;

    // Another index does not make it another name.
    let _impostor = GoPlugin::start_as(&h, "held-policy", "99", quiet(), STRANGER, STRANGER);
    let refusal = wait_logged(&["refusing plugin registration", "held-policy"]).await;
    assert_eq!(
        refusal,
        format!(
            "refusing plugin registration: plugin name \"held-policy\" is held by \
             external:10-held-policy[{}]",
            holder.pid()
        )
    );
    // Nor can the builtin validator's name be taken.
    let _fake = GoPlugin::start_as(&h, "default-validator", "00", quiet(), STRANGER, STRANGER);
    let refusal = wait_logged(&["refusing plugin registration", "\"default-validator\""]).await;
    assert!(
        refusal.ends_with("is held by builtin:00-default-validator"),
        "{refusal}"
    );
    assert_eq!(h.nri.plugins(), ["00-default-validator", "10-held-policy"]);

    // With the holder gone, containers fail instead of passing by an impostor.
    holder.kill();
    // Closed at once, pruned from the list by the next event.
    while h.nri.has_plugin("10-held-policy") {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let err = creation_error(&h, create_req("p", "c")).await;
    assert!(
        err.contains("required plugin \"held-policy\" not present"),
        "{err}"
    );
}

#[tokio::test]
async fn without_a_policy_a_name_can_be_taken_as_upstream_allows() {
    // The control for the test above: upstream's behaviour, still the default.
    if !is_root() {
        return;
    }
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    open_to_everyone(&h);
    let _holder = GoPlugin::start_as(&h, "open-policy", "10", quiet(), ADMITTED, ADMITTED);
    let _other = GoPlugin::start_as(&h, "open-policy", "99", quiet(), STRANGER, STRANGER);
    h.wait_plugins(2).await;
}

#[tokio::test]
async fn only_the_same_identity_may_take_over_a_name() {
    let policy = "rules:\n- plugins: [upgraded]\n";
    let Some(h) = harness(policy, |o| o.plugin_handover(true)).await else {
        return;
    };
    let old = GoPlugin::start_as(&h, "upgraded", "10", quiet(), ADMITTED, ADMITTED);
    h.wait_plugins(1).await;

    let _stranger = GoPlugin::start_as(&h, "upgraded", "10", quiet(), STRANGER, STRANGER);
    let refusal = wait_logged(&["refusing plugin registration", "\"upgraded\""]).await;
    assert!(refusal.contains(&format!("[{}]", old.pid())), "{refusal}");

    let new = GoPlugin::start_as(&h, "upgraded", "10", quiet(), ADMITTED, ADMITTED);
    let line = wait_logged(&["replaces", &format!("10-upgraded[{}]", new.pid())]).await;
    assert!(line.contains(&format!("[{}]", old.pid())), "{line}");
    h.wait_plugins(1).await;
    let id = h.nri.plugin_identity("10-upgraded").unwrap();
    assert_eq!(id.pid, Some(new.pid() as i32));
}
