//! Devices with their cgroup rules, and CDI devices.

use std::sync::{Arc, Mutex};

use oci_spec::runtime::Spec;
use serde_json::json;

use super::{adjusted, adjusted_by, base_json, generator, refused, spec_from};
use crate::{Generator, SpecError};
use nri_api::{optional, CDIDevice, ContainerAdjustment, LinuxDevice};

fn device(path: &str, typ: &str, major: i64, minor: i64) -> LinuxDevice {
    LinuxDevice {
        path: path.into(),
        type_: typ.into(),
        major,
        minor,
        ..Default::default()
    }
}

#[test]
fn a_device_is_added_with_an_allow_rule() {
    let mut adjust = ContainerAdjustment::new();
    let mut dev = device("/dev/sdb", "b", 8, 16);
    dev.file_mode = optional::file_mode(0o600u32);
    dev.uid = optional::uint32(1u32);
    dev.gid = optional::uint32(2u32);
    adjust.add_device(dev);
    // A char device with a read-only mode still gets "rw": upstream's
    // access string ignores the mode.
    let mut ro = device("/dev/null2", "c", 1, 3);
    ro.file_mode = optional::file_mode(0o444u32);
    adjust.add_device(ro);
    let spec = adjusted(base_json(), &adjust);
    assert_eq!(
        spec["linux"]["devices"],
        json!([
            {"path": "/dev/sdb", "type": "b", "major": 8, "minor": 16, "fileMode": 384, "uid": 1, "gid": 2},
            {"path": "/dev/null2", "type": "c", "major": 1, "minor": 3, "fileMode": 292},
        ])
    );
    assert_eq!(
        spec["linux"]["resources"]["devices"],
        json!([
            {"allow": true, "type": "b", "major": 8, "minor": 16, "access": "rwm"},
            {"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rw"},
        ])
    );
}

#[test]
fn a_device_replaces_the_one_at_its_path_and_removal_keeps_rules() {
    let mut spec = base_json();
    spec["linux"]["devices"] = json!([
        {"path": "/dev/a", "type": "c", "major": 1, "minor": 1},
        {"path": "/dev/b", "type": "c", "major": 2, "minor": 2},
    ]);
    spec["linux"]["resources"]["devices"] = json!([{"allow": false, "access": "rwm"}]);
    let mut adjust = ContainerAdjustment::new();
    adjust.add_device(device("/dev/a", "c", 9, 9));
    adjust.remove_device("/dev/b");
    let spec = adjusted(spec, &adjust);
    assert_eq!(
        spec["linux"]["devices"],
        json!([{"path": "/dev/a", "type": "c", "major": 9, "minor": 9}])
    );
    assert_eq!(
        spec["linux"]["resources"]["devices"],
        json!([
            {"allow": false, "access": "rwm"},
            {"allow": true, "type": "c", "major": 9, "minor": 9, "access": "rw"},
        ])
    );
}

#[test]
fn removing_the_last_device_drops_the_list() {
    let mut spec = base_json();
    spec["linux"]["devices"] = json!([{"path": "/dev/a", "type": "c", "major": 1, "minor": 1}]);
    let mut adjust = ContainerAdjustment::new();
    adjust.remove_device("/dev/a");
    assert_eq!(adjusted(spec, &adjust), base_json());
}

#[test]
fn device_types_outside_runtime_spec_are_refused() {
    for typ in ["", "x", "char"] {
        let mut adjust = ContainerAdjustment::new();
        adjust.add_device(device("/dev/x", typ, 1, 1));
        let err = refused(&generator(), base_json(), &adjust);
        assert!(
            matches!(
                err,
                SpecError::Unsupported {
                    field: "device type",
                    ..
                }
            ),
            "{err}"
        );
    }
}

#[test]
fn cdi_devices_come_back_without_an_injector() {
    let mut adjust = ContainerAdjustment::new();
    for name in ["vendor.com/gpu=0", "vendor.com/gpu=1"] {
        adjust.add_cdi_device(CDIDevice {
            name: name.into(),
            ..Default::default()
        });
    }
    let mut spec = spec_from(base_json());
    let adjusted = generator().adjust(&mut spec, &adjust).unwrap();
    assert_eq!(
        adjusted.pending_cdi_devices,
        ["vendor.com/gpu=0", "vendor.com/gpu=1"]
    );
}

#[test]
fn an_injector_takes_cdi_devices_in_order() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let generator = Generator::builder()
        .no_propagation_check()
        .cdi_injector(move |spec: &mut Spec, names: &[String]| {
            // Injected after env, before devices, as upstream.
            let env = spec.process().as_ref().unwrap().env().clone();
            record.lock().unwrap().push((names.to_vec(), env));
            spec.annotations_mut()
                .get_or_insert_with(Default::default)
                .insert("cdi".into(), names.join(","));
            Ok(())
        })
        .build();
    let mut adjust = ContainerAdjustment::new();
    adjust.add_env("E", "1");
    adjust.add_cdi_device(CDIDevice {
        name: "v.com/c=x".into(),
        ..Default::default()
    });
    let mut spec = spec_from(base_json());
    let adjusted = generator.adjust(&mut spec, &adjust).unwrap();
    assert!(adjusted.pending_cdi_devices.is_empty());
    assert_eq!(
        *seen.lock().unwrap(),
        [(vec!["v.com/c=x".to_string()], Some(vec!["E=1".to_string()]))]
    );
    assert_eq!(spec.annotations().as_ref().unwrap()["cdi"], "v.com/c=x");

    // No CDI devices: the injector is not called.
    adjusted_by(&generator, base_json(), &ContainerAdjustment::new());
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn injector_failure_refuses_the_adjustment() {
    let generator = Generator::builder()
        .no_propagation_check()
        .cdi_injector(|spec: &mut Spec, _: &[String]| {
            spec.set_hostname(Some("changed".into()));
            Err("unresolvable CDI devices".into())
        })
        .build();
    let mut adjust = ContainerAdjustment::new();
    adjust.add_cdi_device(CDIDevice {
        name: "v.com/c=x".into(),
        ..Default::default()
    });
    let err = refused(&generator, base_json(), &adjust);
    assert_eq!(
        err.to_string(),
        "failed to inject CDI devices [\"v.com/c=x\"]: unresolvable CDI devices"
    );
}
