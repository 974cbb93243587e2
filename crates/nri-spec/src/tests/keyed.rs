//! Keyed maps: annotations, sysctl, network devices; the annotation filter.

use std::collections::HashMap;

use serde_json::json;

use super::{adjusted, adjusted_by, generator, refused, spec_from, to_json};
use crate::{Generator, SpecError};
use nri_api::{ContainerAdjustment, LinuxNetDevice};

#[test]
fn annotations_are_set_and_removed() {
    let mut adjust = ContainerAdjustment::new();
    adjust.add_annotation("new", "1");
    adjust.add_annotation("keep", "changed");
    adjust.remove_annotation("gone");
    adjust.remove_annotation("never-there");
    let spec = json!({"ociVersion": "1.0.2", "annotations": {"keep": "0", "gone": "x"}});
    assert_eq!(
        adjusted(spec, &adjust)["annotations"],
        json!({"new": "1", "keep": "changed"})
    );
}

#[test]
fn removing_the_last_annotation_drops_the_map() {
    let mut adjust = ContainerAdjustment::new();
    adjust.remove_annotation("a");
    let spec = json!({"ociVersion": "1.0.2", "annotations": {"a": "x"}});
    assert_eq!(adjusted(spec, &adjust), json!({"ociVersion": "1.0.2"}));
}

#[test]
fn removing_and_setting_a_key_sets_it() {
    // A merged adjustment carries both when a plugin claims a key another
    // plugin set. Upstream's outcome depends on Go's map order; here the
    // removal always goes first.
    for _ in 0..20 {
        let mut adjust = ContainerAdjustment::new();
        adjust.remove_annotation("k");
        adjust.add_annotation("k", "mine");
        adjust.set_linux_sysctl("-s", "");
        adjust.set_linux_sysctl("s", "1");
        adjust.remove_linux_net_device("eth0");
        adjust.add_linux_net_device(
            "eth0",
            LinuxNetDevice {
                name: "ctr0".into(),
                ..Default::default()
            },
        );
        let spec = json!({"ociVersion": "1.0.2", "annotations": {"k": "theirs"}});
        let spec = adjusted(spec, &adjust);
        assert_eq!(spec["annotations"], json!({"k": "mine"}));
        assert_eq!(spec["linux"]["sysctl"], json!({"s": "1"}));
        assert_eq!(
            spec["linux"]["netDevices"],
            json!({"eth0": {"name": "ctr0"}})
        );
    }
}

#[test]
fn annotation_filter_sees_markers_and_may_rewrite() {
    let generator = Generator::builder()
        .no_propagation_check()
        .annotation_filter(|a: &HashMap<String, String>| {
            assert!(a.contains_key("-gone"));
            Ok(a.iter()
                .filter(|(k, _)| !k.starts_with("blocked."))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect())
        })
        .build();
    let mut adjust = ContainerAdjustment::new();
    adjust.add_annotation("blocked.x", "1");
    adjust.add_annotation("ok", "1");
    adjust.remove_annotation("gone");
    let spec = json!({"ociVersion": "1.0.2", "annotations": {"gone": "x"}});
    assert_eq!(
        adjusted_by(&generator, spec, &adjust)["annotations"],
        json!({"ok": "1"})
    );
}

#[test]
fn annotation_filter_rejection_refuses_the_adjustment() {
    let generator = Generator::builder()
        .no_propagation_check()
        .annotation_filter(|_: &HashMap<String, String>| Err("annotation not allowed".into()))
        .build();
    let mut adjust = ContainerAdjustment::new();
    adjust.add_annotation("a", "1");
    adjust.add_env("E", "1");
    let err = refused(&generator, json!({"ociVersion": "1.0.2"}), &adjust);
    assert!(matches!(err, SpecError::AnnotationFilter(_)));
    assert_eq!(
        err.to_string(),
        "failed to adjust annotations in OCI Spec: annotation not allowed"
    );
}

#[test]
fn label_filter_is_offered_but_not_applied_by_adjust() {
    let generator = Generator::builder()
        .label_filter(|_: &HashMap<String, String>| Err("no labels".into()))
        .build();
    let labels = HashMap::from([("a".to_string(), "b".to_string())]);
    assert!(matches!(
        generator.filter_labels(&labels),
        Err(SpecError::LabelFilter(_))
    ));
    assert_eq!(super::generator().filter_labels(&labels).unwrap(), labels);
    let mut spec = spec_from(json!({"ociVersion": "1.0.2"}));
    generator
        .adjust(&mut spec, &ContainerAdjustment::new())
        .unwrap();
}

#[test]
fn removing_a_sysctl_does_not_create_the_linux_section() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_sysctl("-a.b", "");
    assert_eq!(
        adjusted(json!({"ociVersion": "1.0.2"}), &adjust),
        json!({"ociVersion": "1.0.2"})
    );
}

#[test]
fn net_devices_are_added_renamed_and_removed() {
    let mut adjust = ContainerAdjustment::new();
    adjust.add_linux_net_device(
        "eth1",
        LinuxNetDevice {
            name: "net1".into(),
            ..Default::default()
        },
    );
    adjust.add_linux_net_device("eth2", LinuxNetDevice::default());
    adjust.remove_linux_net_device("eth0");
    let spec = json!({"ociVersion": "1.0.2", "linux": {"netDevices": {"eth0": {"name": "x"}}}});
    let mut spec = spec_from(spec);
    generator().adjust(&mut spec, &adjust).unwrap();
    let devices = spec
        .linux()
        .as_ref()
        .unwrap()
        .net_devices()
        .as_ref()
        .unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices["eth1"].name().as_deref(), Some("net1"));
    // An empty name is no name (Go omits it).
    assert_eq!(devices["eth2"].name(), &None);
}

#[test]
fn removing_a_net_device_creates_the_linux_section() {
    // As upstream, whose removal initializes the map (written as nothing).
    let mut adjust = ContainerAdjustment::new();
    adjust.remove_linux_net_device("eth0");
    let mut spec = spec_from(json!({"ociVersion": "1.0.2"}));
    generator().adjust(&mut spec, &adjust).unwrap();
    assert_eq!(to_json(&spec), json!({"ociVersion": "1.0.2", "linux": {}}));
}
