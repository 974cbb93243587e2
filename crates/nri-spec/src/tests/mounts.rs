//! Mounts: replacement, removal, ordering, propagation, the host check.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::{adjusted, adjusted_by, refused};
use crate::mounts::{check_propagation, clean};
use crate::{Generator, SpecError};
use nri_api::{ContainerAdjustment, Mount};

fn mount(destination: &str, source: &str, options: &[&str]) -> Mount {
    Mount {
        destination: destination.into(),
        type_: "bind".into(),
        source: source.into(),
        options: options.iter().map(|o| o.to_string()).collect(),
        ..Default::default()
    }
}

fn with_mounts(mounts: Value) -> Value {
    json!({"ociVersion": "1.0.2", "mounts": mounts})
}

#[test]
fn a_mount_replaces_the_one_at_its_destination() {
    let mut adjust = ContainerAdjustment::new();
    adjust.add_mount(mount("/data", "/host/new", &["ro"]));
    let spec = with_mounts(json!([
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/data", "source": "/host/old"},
    ]));
    assert_eq!(
        adjusted(spec, &adjust)["mounts"],
        json!([
            {"destination": "/data", "type": "bind", "source": "/host/new", "options": ["ro"]},
            {"destination": "/proc", "type": "proc", "source": "proc"},
        ])
    );
}

#[test]
fn removal_marker_removes_and_existing_mounts_get_sorted() {
    let mut adjust = ContainerAdjustment::new();
    adjust.remove_mount("/b");
    let spec = with_mounts(json!([
        {"destination": "/z/y"},
        {"destination": "/b"},
        {"destination": "/a"},
    ]));
    assert_eq!(
        adjusted(spec, &adjust)["mounts"],
        json!([{"destination": "/a"}, {"destination": "/z/y"}])
    );
}

#[test]
fn destinations_compare_as_strings() {
    // "/data/" is not "/data" to upstream's removal, though it sorts as
    // deep as "/data".
    let mut adjust = ContainerAdjustment::new();
    adjust.remove_mount("/data");
    let spec = with_mounts(json!([{"destination": "/data/"}]));
    assert_eq!(
        adjusted(spec, &adjust)["mounts"],
        json!([{"destination": "/data/"}])
    );
}

#[test]
fn removing_all_mounts_drops_the_list() {
    let mut adjust = ContainerAdjustment::new();
    adjust.remove_mount("/a");
    let spec = adjusted(with_mounts(json!([{"destination": "/a"}])), &adjust);
    assert_eq!(spec, json!({"ociVersion": "1.0.2"}));
}

#[test]
fn sorting_counts_cleaned_path_separators() {
    let mut adjust = ContainerAdjustment::new();
    for d in ["/a/b/../c/d", "/x//y", "/a/./b", "rel", "/", "/m"] {
        adjust.add_mount(mount(d, "", &[]));
    }
    let order: Vec<String> = adjusted(json!({"ociVersion": ""}), &adjust)["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["destination"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order, ["rel", "/", "/m", "/a/./b", "/x//y", "/a/b/../c/d"]);
}

#[test]
fn clean_matches_go_filepath_clean() {
    for (path, want) in [
        ("", "."),
        ("/", "/"),
        ("//a//b/", "/a/b"),
        ("/a/./b/../c", "/a/c"),
        ("/..", "/"),
        ("/../a", "/a"),
        ("a/../..", ".."),
        ("../a/..", ".."),
        ("a/b/../../..", ".."),
        (".", "."),
        ("./a", "a"),
    ] {
        assert_eq!(clean(path), want, "{path:?}");
    }
}

/// The (source, accepted propagations) of each propagation check.
type Calls = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// A generator whose propagation check records its calls and accepts.
fn recording() -> (Generator, Calls) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = calls.clone();
    let generator = Generator::builder()
        .propagation_checker(move |source: &str, accepted: &[&str]| {
            let accepted = accepted.iter().map(|a| a.to_string()).collect();
            seen.lock().unwrap().push((source.to_string(), accepted));
            Ok(())
        })
        .build();
    (generator, calls)
}

#[test]
fn rshared_mount_is_checked_and_makes_rootfs_rshared() {
    let (generator, calls) = recording();
    let mut adjust = ContainerAdjustment::new();
    adjust.add_mount(mount("/shared", "/host/shared", &["rbind", "rshared"]));
    let spec = adjusted_by(&generator, json!({"ociVersion": ""}), &adjust);
    assert_eq!(spec["linux"]["rootfsPropagation"], json!("rshared"));
    assert_eq!(
        *calls.lock().unwrap(),
        [("/host/shared".to_string(), vec!["rshared".to_string()])]
    );
}

#[test]
fn rslave_mount_does_not_weaken_rshared_rootfs() {
    let (generator, calls) = recording();
    let mut adjust = ContainerAdjustment::new();
    adjust.add_mount(mount("/slave", "/host/slave", &["rslave"]));
    let spec = json!({"ociVersion": "", "linux": {"rootfsPropagation": "rshared"}});
    assert_eq!(
        adjusted_by(&generator, spec, &adjust)["linux"]["rootfsPropagation"],
        json!("rshared")
    );
    let spec = json!({"ociVersion": "", "linux": {"rootfsPropagation": "rprivate"}});
    assert_eq!(
        adjusted_by(&generator, spec, &adjust)["linux"]["rootfsPropagation"],
        json!("rslave")
    );
    assert_eq!(calls.lock().unwrap()[0].1, ["rshared", "rslave"]);
}

#[test]
fn rprivate_needs_no_check() {
    let (generator, calls) = recording();
    let mut adjust = ContainerAdjustment::new();
    adjust.add_mount(mount("/p", "/host/p", &["rprivate"]));
    let spec = adjusted_by(&generator, json!({"ociVersion": ""}), &adjust);
    assert_eq!(spec.get("linux"), None);
    assert!(calls.lock().unwrap().is_empty());
}

#[test]
fn propagation_carries_over_to_later_mounts_as_upstream() {
    let (generator, calls) = recording();
    let mut adjust = ContainerAdjustment::new();
    adjust.add_mount(mount("/one", "/host/one", &["rshared"]));
    adjust.add_mount(mount("/two", "/host/two", &["ro"]));
    adjust.add_mount(mount("/three", "/host/three", &["rprivate"]));
    adjust.add_mount(mount("/four", "/host/four", &[]));
    adjusted_by(&generator, json!({"ociVersion": ""}), &adjust);
    let sources: Vec<String> = calls.lock().unwrap().iter().map(|c| c.0.clone()).collect();
    assert_eq!(sources, ["/host/one", "/host/two"]);
}

#[test]
fn failed_propagation_check_refuses_the_adjustment() {
    let generator = Generator::builder()
        .propagation_checker(|source: &str, _: &[&str]| {
            Err(format!("path {source:?} mount propagation is \"\", not \"rshared\"").into())
        })
        .build();
    let mut adjust = ContainerAdjustment::new();
    adjust.add_mount(mount("/ok", "/host/ok", &[]));
    adjust.add_mount(mount("/shared", "/host/private", &["rshared"]));
    let err = refused(
        &generator,
        with_mounts(json!([{"destination": "/ok"}])),
        &adjust,
    );
    assert!(
        matches!(err, SpecError::MountPropagation { ref destination, .. } if destination == "/shared")
    );
    assert_eq!(
        err.to_string(),
        "failed to adjust mounts in OCI Spec: path \"/host/private\" mount propagation is \"\", not \"rshared\""
    );
}

const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw
24 22 8:2 / /var/lib rw master:7 - ext4 /dev/sda2 rw
25 22 8:3 / /private rw - ext4 /dev/sda3 rw
26 22 8:4 / /with\\040space rw shared:9 master:3 - ext4 /dev/sda4 rw
27 22 8:5 / /mnt/slave rw master:4 propagate_from:2 - ext4 /dev/sda5 rw
";

#[test]
fn host_propagation_comes_from_the_longest_prefix_mount() {
    let ok = |path, accepted: &[&str]| check_propagation(MOUNTINFO, path, accepted);
    ok("/srv/data", &["rshared"]).unwrap();
    ok("/var/lib/x", &["rshared", "rslave"]).unwrap();
    ok("/with space/x", &["rshared"]).unwrap();
    ok("/mnt/slave/x", &["rslave"]).unwrap();
    assert_eq!(
        ok("/var/lib/x", &["rshared"]).unwrap_err().to_string(),
        "path \"/var/lib/x\" mount propagation is \"rslave\", not \"rshared\""
    );
    assert_eq!(
        ok("/private/x", &["rshared", "rslave"])
            .unwrap_err()
            .to_string(),
        "path \"/private/x\" mount propagation is \"\", not \"rshared or rslave\""
    );
    // A string prefix, as upstream's mountinfo filter: "/private2" is
    // under "/private".
    assert!(ok("/private2", &["rshared"]).is_err());
    // Relative sources match no mount point.
    assert_eq!(
        ok("rel", &["rshared"]).unwrap_err().to_string(),
        "failed to get mount info for \"rel\""
    );
    assert!(check_propagation("1 2 3", "/", &["rshared"]).is_err());
}

#[cfg(target_os = "linux")]
#[test]
fn the_default_generator_checks_the_host() {
    // The root of this process's mount table has some propagation; asking
    // for an impossible one shows the check ran.
    let generator = Generator::default();
    let mut adjust = ContainerAdjustment::new();
    adjust.add_mount(mount("/x", "relative/source", &["rshared"]));
    let err = refused(&generator, json!({"ociVersion": ""}), &adjust);
    assert!(
        err.to_string().contains("failed to get mount info"),
        "{err}"
    );
}
