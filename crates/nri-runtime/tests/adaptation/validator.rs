//! The default validator wired as the builtin `00-default-validator`
//! (`Options::default_validator`, checklist 5.3-5.5) against real plugins.

use std::collections::HashMap;

use nri_api::{self as api, ContainerAdjustment};
use nri_runtime::Options;
use nri_validator::{DefaultValidatorConfig, REQUIRED_PLUGINS_ANNOTATION};
use serde_json::json;

use crate::common::*;
use crate::goprocess::GoPlugin;
use crate::peers::eventually;

const REJECTED: &str = "validator \"00-default-validator\" rejected container adjustment, reason: ";

async fn harness(cfg: DefaultValidatorConfig) -> Harness {
    let h = Harness::start_with(
        |o: Options| {
            o.default_validator(DefaultValidatorConfig {
                enable: true,
                ..cfg
            })
        },
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    assert_eq!(h.nri.plugins(), ["00-default-validator"]);
    h
}

fn tagging() -> TestPlugin {
    TestPlugin::adjusting(|_| {
        let mut a = ContainerAdjustment::default();
        a.add_annotation("tagged", "yes");
        Ok((a, vec![]))
    })
}

const TOLERATE: &str = "tolerate-missing.example.com";

/// Whether creating this container works, and if not why.
async fn create(h: &Harness, req: api::CreateContainerRequest) -> Result<(), String> {
    h.nri
        .create_container(req)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// A creation request for container `ctr` (named `<ctr>-name`) in a pod
/// with these annotations.
fn annotated(ctr: &str, annotations: &[(&str, &str)]) -> api::CreateContainerRequest {
    let mut req = create_req("pod", ctr);
    req.pod.mut_or_insert_default().annotations = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<HashMap<_, _>>();
    req
}

/// With OCI hooks disallowed, a Go plugin injecting one fails the creation,
/// and no other plugin's adjustment reaches the runtime; without it the
/// same plugins get through.
#[tokio::test]
async fn a_go_plugin_injecting_an_oci_hook_is_rejected_when_hooks_are_disallowed() {
    let h = harness(DefaultValidatorConfig {
        reject_oci_hook_adjustment: true,
        ..Default::default()
    })
    .await;
    let hooker = GoPlugin::start(
        &h,
        "hooker",
        "10",
        json!({"events": "createcontainer",
               "replies": {"CreateContainer": {"adjust": {"hooks": {"prestart": [{"path": "/bin/hook"}]}}}}}),
    );
    h.wait_plugins(2).await;
    h.connect("tagger", "20", tagging());
    h.wait_plugins(3).await;
    assert_eq!(
        h.nri.plugins(),
        ["00-default-validator", "10-hooker", "20-tagger"]
    );

    let err = creation_error(&h, create_req("pod", "c1")).await;
    assert_eq!(
        err,
        format!("{REJECTED}validation error: plugin \"10-hooker\" attempted restricted OCI hook injection")
    );

    drop(hooker);
    eventually(PATIENCE, "the hooker to go", || {
        h.nri.plugins() == ["00-default-validator", "20-tagger"]
    })
    .await;
    let rsp = h
        .nri
        .create_container(create_req("pod", "c2"))
        .await
        .unwrap();
    assert_eq!(annotation(&rsp, "tagged"), Some("yes"));
    assert!(rsp.adjust.hooks.prestart.is_empty());
}

/// A globally required plugin: no container without it, whether it never
/// came, left, or died in the middle of this very creation (upstream lists
/// that last one as present and lets the container through).
#[tokio::test]
async fn a_missing_required_plugin_never_lets_a_container_through() {
    let h = harness(DefaultValidatorConfig {
        required_plugins: vec!["needed".into()],
        ..Default::default()
    })
    .await;
    let missing = format!("{REJECTED}validation error: required plugin \"needed\" not present");
    let err = creation_error(&h, create_req("pod", "c1")).await;
    assert_eq!(err, missing);

    // Present means registered, not subscribed to CreateContainer.
    let needed = GoPlugin::start(&h, "needed", "30", json!({"events": "runpodsandbox"}));
    h.wait_plugins(2).await;
    h.nri
        .create_container(create_req("pod", "c2"))
        .await
        .unwrap();

    drop(needed);
    eventually(PATIENCE, "the plugin to go", || {
        h.nri.plugins() == ["00-default-validator"]
    })
    .await;
    let err = creation_error(&h, create_req("pod", "c3")).await;
    assert_eq!(err, missing);

    let mut crashing = GoPlugin::start(
        &h,
        "needed",
        "30",
        json!({"events": "createcontainer", "exit_on": "CreateContainer"}),
    );
    h.wait_plugins(2).await;
    let err = creation_error(&h, create_req("pod", "c4")).await;
    assert_eq!(
        err, missing,
        "dropped during the creation it was required for"
    );
    assert_eq!(crashing.wait().code(), Some(3), "it crashed as scripted");
    assert_eq!(h.nri.plugins(), ["00-default-validator"]);
}

/// Plugins required by pod annotation, per container or for the whole pod,
/// by name or by `idx-name`; and the tolerate-missing annotation, which
/// waives the check only when it parses as true.
#[tokio::test]
async fn required_plugins_by_annotation_and_tolerating_missing_ones() {
    let h = harness(DefaultValidatorConfig {
        required_plugins: vec!["needed".into()],
        tolerate_missing_annotation: TOLERATE.into(),
        ..Default::default()
    })
    .await;
    let rejected = |what: &str| Err(format!("{REJECTED}validation error: {what}"));
    let missing = rejected("required plugin \"needed\" not present");

    // The globally required plugin is missing: tolerated only where annotated so.
    let per_ctr = format!("{TOLERATE}/container.c2-name");
    let invalid = format!(
        "{REJECTED}invalid {TOLERATE} annotation \"maybe\": \
         strconv.ParseBool: parsing \"maybe\": invalid syntax"
    );
    for (ctr, annotations, outcome) in [
        ("c0", vec![], missing.clone()),
        ("c1", vec![(TOLERATE, "true")], Ok(())),
        ("c2", vec![(per_ctr.as_str(), "1")], Ok(())),
        ("c3", vec![(TOLERATE, "false")], missing.clone()),
        ("c4", vec![(TOLERATE, "maybe")], Err(invalid)),
    ] {
        assert_eq!(
            create(&h, annotated(ctr, &annotations)).await,
            outcome,
            "{ctr}"
        );
    }

    let _needed = GoPlugin::start(&h, "needed", "30", json!({"events": "runpodsandbox"}));
    h.connect("other", "40", tagging());
    h.wait_plugins(3).await;
    let strict = format!("{REQUIRED_PLUGINS_ANNOTATION}/container.strict-name");
    let whole = format!("{REQUIRED_PLUGINS_ANNOTATION}/pod");
    let both = "[\"40-other\", \"50-absent\"]";
    for (ctr, annotations, outcome) in [
        ("c5", vec![], Ok(())),
        // Per container, by idx-name: only the named container is affected.
        (
            "strict",
            vec![(strict.as_str(), both)],
            rejected("required plugin \"50-absent\" not present"),
        ),
        ("relaxed", vec![(strict.as_str(), both)], Ok(())),
        // For the whole pod, by name.
        ("c6", vec![(whole.as_str(), "[other, needed]")], Ok(())),
        (
            "c7",
            vec![(whole.as_str(), "[other, gone, away]")],
            rejected("required plugins \"gone,away\" not present"),
        ),
    ] {
        assert_eq!(
            create(&h, annotated(ctr, &annotations)).await,
            outcome,
            "{ctr}"
        );
    }
}

/// With `required_plugins_guard_pods`, a required plugin that is absent
/// (an upstream Go-stub one), or dropped during the pod's RunPodSandbox (a
/// Go-stub one that crashes on it), fails RunPodSandbox, and plugins do not
/// see a pod refused up front; one present (a Rust-stub one) lets it
/// through. Without the option, as upstream, every pod goes through.
#[tokio::test]
async fn required_plugins_guard_pods_only_when_asked() {
    const POD_REJECTED: &str =
        "validator \"00-default-validator\" rejected pod sandbox, reason: validation error: required plugin \"needed\" not present";
    let run = |id: &str| api::RunPodSandboxRequest {
        pod: protobuf::MessageField::some(pod(id)),
        ..Default::default()
    };
    for guarded in [false, true] {
        let h = Harness::start_with(
            |o: Options| {
                o.default_validator(DefaultValidatorConfig {
                    enable: true,
                    required_plugins: vec!["needed".into()],
                    ..Default::default()
                })
                .required_plugins_guard_pods(guarded)
            },
            RuntimeState::default(),
        )
        .await;
        h.nri.start().await.unwrap();
        let watcher = TestPlugin::default();
        let _watcher = h.connect("watcher", "90", watcher.clone());
        h.wait_plugins(2).await;
        let want = |ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(POD_REJECTED.to_string())
            }
        };
        let outcome = |r: Result<(), nri_runtime::Error>| r.map_err(|e| e.to_string());

        // Absent: refused before any plugin sees the pod.
        assert_eq!(
            outcome(h.nri.run_pod_sandbox(run("p1")).await),
            want(!guarded)
        );
        let saw_p1 = watcher.events().iter().any(|e| e == "RunPodSandbox p1");
        assert_eq!(saw_p1, !guarded, "a plugin saw a pod refused up front");

        // Present, as a Rust-stub plugin: through.
        let needed = TestPlugin::default();
        let rust = h.connect("needed", "30", needed.clone());
        h.wait_plugins(3).await;
        assert_eq!(outcome(h.nri.run_pod_sandbox(run("p2")).await), Ok(()));
        rust.stop();
        eventually(PATIENCE, "the Rust plugin to go", || {
            h.nri.plugins().len() == 2
        })
        .await;

        // Dropped during the pod's RunPodSandbox: a Go-stub plugin that
        // crashes on it.
        let mut crashing = GoPlugin::start(
            &h,
            "needed",
            "30",
            json!({"events": "runpodsandbox", "exit_on": "RunPodSandbox"}),
        );
        // (The plugin-count gauge still counts the Rust plugin gone.)
        eventually(PATIENCE, "the Go plugin to join", || {
            h.nri.plugins().len() == 3
        })
        .await;
        assert_eq!(
            outcome(h.nri.run_pod_sandbox(run("p3")).await),
            want(!guarded)
        );
        assert_eq!(crashing.wait().code(), Some(3), "it crashed as scripted");
    }
}
