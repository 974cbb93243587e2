//! Environment: replacement in place, removal, appending, upstream's quirks.

use serde_json::{json, Value};

use super::adjusted;
use nri_api::ContainerAdjustment;

fn with_env(env: &[&str]) -> Value {
    json!({"ociVersion": "1.0.2", "process": {"user": {"uid": 0, "gid": 0}, "cwd": "/", "env": env}})
}

fn env_after(spec: Value, adjust: &ContainerAdjustment) -> Value {
    adjusted(spec, adjust)["process"]["env"].clone()
}

#[test]
fn set_replaces_in_place_and_appends_new_names() {
    let mut adjust = ContainerAdjustment::new();
    adjust.add_env("NEW", "1");
    adjust.add_env("B", "two");
    assert_eq!(
        env_after(with_env(&["A=1", "B=2", "C=3"]), &adjust),
        json!(["A=1", "B=two", "C=3", "NEW=1"])
    );
}

#[test]
fn removal_marker_removes() {
    let mut adjust = ContainerAdjustment::new();
    adjust.remove_env("B");
    adjust.remove_env("MISSING");
    assert_eq!(
        env_after(with_env(&["A=1", "B=2"]), &adjust),
        json!(["A=1"])
    );
}

#[test]
fn removing_everything_drops_the_list() {
    let mut adjust = ContainerAdjustment::new();
    adjust.remove_env("A");
    let spec = adjusted(with_env(&["A=1"]), &adjust);
    assert_eq!(spec["process"].get("env"), None);
}

#[test]
fn values_may_hold_equals_signs() {
    let mut adjust = ContainerAdjustment::new();
    adjust.add_env("X", "a=b");
    assert_eq!(
        env_after(with_env(&["OPTS=k=v"]), &adjust),
        json!(["OPTS=k=v", "X=a=b"])
    );
}

#[test]
fn rewriting_drops_entries_without_equals_and_collapses_duplicates() {
    // Upstream's quirks, kept: the rewrite skips "BROKEN", and the second
    // "A" replaces the first, even the adjusted value.
    let mut adjust = ContainerAdjustment::new();
    adjust.add_env("A", "adjusted");
    assert_eq!(
        env_after(with_env(&["A=1", "BROKEN", "A=2", "=empty"]), &adjust),
        json!(["A=2"])
    );
}

#[test]
fn later_entry_for_a_name_decides_for_existing_names() {
    let mut remove_last = ContainerAdjustment::new();
    remove_last.add_env("A", "x");
    remove_last.remove_env("A");
    assert_eq!(env_after(with_env(&["A=1"]), &remove_last), Value::Null);

    let mut set_last = ContainerAdjustment::new();
    set_last.remove_env("A");
    set_last.add_env("A", "x");
    assert_eq!(env_after(with_env(&["A=1"]), &set_last), json!(["A=x"]));
}

#[test]
fn new_names_are_set_even_when_also_removed() {
    // Upstream appends every unmarked entry whose name the spec did not
    // have, whatever marked entries follow it.
    let mut adjust = ContainerAdjustment::new();
    adjust.add_env("N", "x");
    adjust.remove_env("N");
    assert_eq!(env_after(with_env(&[]), &adjust), json!(["N=x"]));
}

#[test]
fn a_missing_process_is_created() {
    let mut adjust = ContainerAdjustment::new();
    adjust.add_env("A", "1");
    let spec = adjusted(json!({"ociVersion": "1.0.2"}), &adjust);
    assert_eq!(
        spec["process"],
        json!({"user": {"uid": 0, "gid": 0}, "cwd": "", "env": ["A=1"]})
    );
}
