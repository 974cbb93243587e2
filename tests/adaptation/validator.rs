//! The default validator wired as the builtin `00-default-validator`
//! (`Options::default_validator`, checklist 5.3-5.5) against real plugins.

use std::collections::HashMap;

use nri::adaptation::Options;
use nri::api::{self, ContainerAdjustment};
use nri::validator::{DefaultValidatorConfig, REQUIRED_PLUGINS_ANNOTATION};
use serde_json::json;

use crate::common::*;
use crate::goplugin::GoPlugin;
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

    let err = h
        .nri
        .create_container(create_req("pod", "c1"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
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
    assert_eq!(
        rsp.adjust.annotations.get("tagged").map(String::as_str),
        Some("yes")
    );
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
    let err = h
        .nri
        .create_container(create_req("pod", "c1"))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), missing);

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
    let err = h
        .nri
        .create_container(create_req("pod", "c3"))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), missing);

    let mut crashing = GoPlugin::start(
        &h,
        "needed",
        "30",
        json!({"events": "createcontainer", "exit_on": "CreateContainer"}),
    );
    h.wait_plugins(2).await;
    let err = h
        .nri
        .create_container(create_req("pod", "c4"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        missing,
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
        tolerate_missing_annotation: "tolerate-missing.example.com".into(),
        ..Default::default()
    })
    .await;
    let rejected = |what: &str| format!("{REJECTED}validation error: {what}");

    // Globally required plugin missing: tolerated only where annotated so.
    let err = h
        .nri
        .create_container(annotated("c0", &[]))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        rejected("required plugin \"needed\" not present")
    );
    h.nri
        .create_container(annotated("c1", &[("tolerate-missing.example.com", "true")]))
        .await
        .unwrap();
    let key = "tolerate-missing.example.com/container.c2-name";
    h.nri
        .create_container(annotated("c2", &[(key, "1")]))
        .await
        .unwrap();
    let err = h
        .nri
        .create_container(annotated(
            "c3",
            &[("tolerate-missing.example.com", "maybe")],
        ))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{REJECTED}invalid tolerate-missing.example.com annotation \"maybe\": \
             strconv.ParseBool: parsing \"maybe\": invalid syntax"
        )
    );
    let err = h
        .nri
        .create_container(annotated(
            "c4",
            &[("tolerate-missing.example.com", "false")],
        ))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        rejected("required plugin \"needed\" not present")
    );

    let _needed = GoPlugin::start(&h, "needed", "30", json!({"events": "runpodsandbox"}));
    h.connect("other", "40", tagging());
    h.wait_plugins(3).await;
    h.nri.create_container(annotated("c5", &[])).await.unwrap();

    // Per container, by idx-name: only the named container is affected.
    let strict = format!("{REQUIRED_PLUGINS_ANNOTATION}/container.strict-name");
    let pod = [(strict.as_str(), "[\"40-other\", \"50-absent\"]")];
    let err = h
        .nri
        .create_container(annotated("strict", &pod))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        rejected("required plugin \"50-absent\" not present")
    );
    h.nri
        .create_container(annotated("relaxed", &pod))
        .await
        .unwrap();

    // For the whole pod, by name.
    let whole = format!("{REQUIRED_PLUGINS_ANNOTATION}/pod");
    h.nri
        .create_container(annotated("c6", &[(whole.as_str(), "[other, needed]")]))
        .await
        .unwrap();
    let err = h
        .nri
        .create_container(annotated("c7", &[(whole.as_str(), "[other, gone, away]")]))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        rejected("required plugins \"gone,away\" not present")
    );
}
