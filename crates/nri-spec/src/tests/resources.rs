//! Resources, block I/O and RDT classes, RDT fields, updates.

use std::sync::{Arc, Mutex};

use oci_spec::runtime::{LinuxBlockIo, LinuxIntelRdt, LinuxResources as Oci};
use serde_json::{json, Value};

use super::{adjusted, adjusted_by, base_json, base_spec, generator, refused, to_json};
use crate::{resources_to_oci, Generator, SpecError};
use nri_api::{optional, ContainerAdjustment, ContainerUpdate, LinuxDeviceCgroup, LinuxResources};

fn resources(spec: &Value) -> Value {
    spec["linux"]["resources"].clone()
}

#[test]
fn all_cpu_fields_are_set() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_cpu_shares(1);
    adjust.set_linux_cpu_quota(2);
    adjust.set_linux_cpu_period(3);
    adjust.set_linux_cpu_realtime_runtime(4);
    adjust.set_linux_cpu_realtime_period(5);
    adjust.set_linux_cpuset_cpus("0-1");
    adjust.set_linux_cpuset_mems("0");
    let spec = adjusted(json!({"ociVersion": ""}), &adjust);
    assert_eq!(
        resources(&spec)["cpu"],
        json!({"shares": 1, "quota": 2, "period": 3, "realtimeRuntime": 4,
               "realtimePeriod": 5, "cpus": "0-1", "mems": "0"})
    );
}

#[test]
fn only_a_nonzero_memory_limit_is_applied() {
    // Upstream applies the limit (as limit and swap) and nothing else.
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_memory_reservation(1);
    adjust.set_linux_memory_swap(2);
    adjust.set_linux_memory_swappiness(3);
    adjust.set_linux_memory_disable_oom_killer();
    assert_eq!(adjusted(base_json(), &adjust), base_json());
    adjust.set_linux_memory_limit(0);
    assert_eq!(adjusted(base_json(), &adjust), base_json());
}

#[test]
fn hugepages_replace_by_page_size_and_unified_is_set() {
    let mut spec = base_json();
    spec["linux"]["resources"]["hugepageLimits"] = json!([{"pageSize": "2MB", "limit": 1}]);
    spec["linux"]["resources"]["unified"] = json!({"memory.high": "1"});
    let mut adjust = ContainerAdjustment::new();
    adjust.add_linux_hugepage_limit("1GB", 4);
    adjust.add_linux_hugepage_limit("2MB", 2);
    adjust.add_linux_unified("memory.high", "2");
    adjust.add_linux_unified("pids.max", "5");
    let r = resources(&adjusted(spec, &adjust));
    assert_eq!(
        r["hugepageLimits"],
        json!([{"pageSize": "2MB", "limit": 2}, {"pageSize": "1GB", "limit": 4}])
    );
    assert_eq!(r["unified"], json!({"memory.high": "2", "pids.max": "5"}));
}

#[test]
fn hugepage_limit_beyond_i64_is_refused() {
    let mut adjust = ContainerAdjustment::new();
    adjust.add_linux_hugepage_limit("2MB", u64::MAX);
    let err = refused(&generator(), base_json(), &adjust);
    assert!(matches!(
        err,
        SpecError::OutOfRange {
            field: "hugepage limit",
            ..
        }
    ));
}

#[test]
fn unlimited_pids_keeps_the_limit_and_creates_pids() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_pid_limits(-1);
    assert_eq!(adjusted(base_json(), &adjust), base_json());
    // No pids section: one with no limit, which oci-spec writes as 0.
    let spec = adjusted(json!({"ociVersion": ""}), &adjust);
    assert_eq!(resources(&spec), json!({"pids": {"limit": 0}}));
}

#[test]
fn device_rules_are_appended() {
    let mut adjust = ContainerAdjustment::new();
    adjust
        .linux
        .mut_or_insert_default()
        .resources
        .mut_or_insert_default()
        .devices = vec![
        LinuxDeviceCgroup {
            allow: false,
            access: "rwm".into(),
            ..Default::default()
        },
        LinuxDeviceCgroup {
            allow: true,
            type_: "c".into(),
            major: optional::int64(10),
            minor: optional::int64(200),
            access: "rw".into(),
            ..Default::default()
        },
    ];
    assert_eq!(
        resources(&adjusted(base_json(), &adjust))["devices"],
        json!([
            {"allow": false, "access": "rwm"},
            {"allow": true, "type": "c", "major": 10, "minor": 200, "access": "rw"},
        ])
    );
}

#[test]
fn an_empty_resources_message_creates_the_linux_section() {
    let mut adjust = ContainerAdjustment::new();
    adjust
        .linux
        .mut_or_insert_default()
        .resources
        .mut_or_insert_default();
    let spec = adjusted(json!({"ociVersion": ""}), &adjust);
    assert_eq!(spec, json!({"ociVersion": "", "linux": {}}));
}

#[test]
fn resource_checker_sees_the_result_and_may_change_it() {
    let seen = Arc::new(Mutex::new(None));
    let record = seen.clone();
    let generator = Generator::builder()
        .no_propagation_check()
        .resource_checker(move |r: Option<&mut Oci>| {
            let r = r.expect("resources");
            *record.lock().unwrap() = r.memory().as_ref().and_then(|m| m.limit());
            r.memory_mut().as_mut().unwrap().set_swap(None);
            Ok(())
        })
        .build();
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_memory_limit(4096);
    let spec = adjusted_by(&generator, base_json(), &adjust);
    assert_eq!(*seen.lock().unwrap(), Some(4096));
    assert_eq!(resources(&spec)["memory"], json!({"limit": 4096}));
}

#[test]
fn resource_checker_rejection_refuses_the_adjustment() {
    let generator = Generator::builder()
        .no_propagation_check()
        .resource_checker(|_: Option<&mut Oci>| Err("swap not supported".into()))
        .build();
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_memory_limit(4096);
    let err = refused(&generator, base_json(), &adjust);
    assert_eq!(
        err.to_string(),
        "failed to adjust resources in OCI Spec: swap not supported"
    );
}

fn class_generator() -> Generator {
    Generator::builder()
        .no_propagation_check()
        .blockio_resolver(|class: &str| match class {
            "slow" => Ok(Some(
                serde_json::from_value::<LinuxBlockIo>(json!({"weight": 10})).unwrap(),
            )),
            "none" => Ok(None),
            _ => Err(format!("unknown block I/O class {class:?}").into()),
        })
        .rdt_resolver(|class: &str| match class {
            "gold" => Ok(Some(
                serde_json::from_value::<LinuxIntelRdt>(json!({"closID": "gold"})).unwrap(),
            )),
            _ => Err(format!("unknown RDT class {class:?}").into()),
        })
        .build()
}

#[test]
fn classes_resolve_and_the_empty_class_clears() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_blockio_class("slow");
    adjust.set_linux_rdt_class("gold");
    let spec = adjusted_by(&class_generator(), base_json(), &adjust);
    assert_eq!(resources(&spec)["blockIO"], json!({"weight": 10}));
    assert_eq!(spec["linux"]["intelRdt"], json!({"closID": "gold"}));

    let mut clear = ContainerAdjustment::new();
    clear.set_linux_blockio_class("");
    clear.set_linux_rdt_class("");
    assert_eq!(adjusted_by(&class_generator(), spec, &clear), base_json());

    let mut none = ContainerAdjustment::new();
    none.set_linux_blockio_class("none");
    let mut spec = base_json();
    spec["linux"]["resources"]["blockIO"] = json!({"weight": 1});
    assert_eq!(adjusted_by(&class_generator(), spec, &none), base_json());
}

#[test]
fn classes_are_ignored_without_resolvers() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_blockio_class("slow");
    adjust.set_linux_rdt_class("");
    let mut spec = base_json();
    spec["linux"]["intelRdt"] = json!({"closID": "kept"});
    assert_eq!(adjusted(spec.clone(), &adjust), spec);
}

#[test]
fn unresolvable_classes_refuse_the_adjustment() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_blockio_class("fast");
    let err = refused(&class_generator(), base_json(), &adjust);
    assert!(matches!(err, SpecError::BlockIoClass { ref class, .. } if class == "fast"));
    assert_eq!(
        err.to_string(),
        "failed to adjust BlockIO class in OCI Spec: unknown block I/O class \"fast\""
    );

    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_rdt_class("silver");
    let err = refused(&class_generator(), base_json(), &adjust);
    assert!(matches!(err, SpecError::RdtClass { .. }), "{err}");
}

#[test]
fn rdt_fields_apply_after_the_class_and_remove_goes_first() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_rdt_class("gold");
    adjust.remove_linux_rdt();
    adjust.set_linux_rdt_schemata(["MB:0=50"]);
    let spec = adjusted_by(&class_generator(), base_json(), &adjust);
    assert_eq!(spec["linux"]["intelRdt"], json!({"schemata": ["MB:0=50"]}));

    // Empty values and false are written as nothing, as Go's omitempty.
    let mut unset = ContainerAdjustment::new();
    unset.set_linux_rdt_clos_id("");
    unset.set_linux_rdt_schemata(Vec::<String>::new());
    unset.set_linux_rdt_enable_monitoring(false);
    let mut spec = base_json();
    spec["linux"]["intelRdt"] = json!({"closID": "a", "schemata": ["x"], "enableMonitoring": true});
    let spec = adjusted(spec, &unset);
    assert_eq!(spec["linux"]["intelRdt"], json!({}));
}

#[test]
fn update_resources_applies_like_an_adjustment() {
    let mut update = ContainerUpdate::for_container("c");
    update.set_linux_cpu_shares(7);
    update.set_linux_memory_limit(8192);
    update.set_linux_blockio_class("slow");
    let r = update.linux.resources.as_ref().unwrap();
    let mut spec = base_spec();
    class_generator().update_resources(&mut spec, r).unwrap();
    let got = to_json(&spec);
    assert_eq!(resources(&got)["cpu"]["shares"], json!(7));
    assert_eq!(
        resources(&got)["memory"],
        json!({"limit": 8192, "swap": 8192})
    );
    assert_eq!(resources(&got)["blockIO"], json!({"weight": 10}));
}

#[test]
fn a_refused_update_leaves_the_spec_alone() {
    let mut update = ContainerUpdate::for_container("c");
    update.set_linux_cpu_shares(7);
    update.set_linux_blockio_class("fast");
    let mut spec = base_spec();
    let err = class_generator()
        .update_resources(&mut spec, update.linux.resources.as_ref().unwrap())
        .unwrap_err();
    assert!(matches!(err, SpecError::BlockIoClass { .. }));
    assert_eq!(spec, base_spec());
}

#[test]
fn resources_to_oci_mirrors_upstream_to_oci() {
    let empty = resources_to_oci(&LinuxResources::new()).unwrap();
    assert_eq!(
        serde_json::to_value(&empty).unwrap(),
        json!({"memory": {}, "cpu": {}})
    );

    let mut update = ContainerUpdate::for_container("c");
    update.set_linux_memory_limit(1);
    update.set_linux_memory_reservation(2);
    update.set_linux_memory_swap(3);
    update.set_linux_memory_kernel(4);
    update.set_linux_memory_kernel_tcp(5);
    update.set_linux_memory_swappiness(6);
    update.set_linux_memory_disable_oom_killer();
    update.set_linux_memory_use_hierarchy();
    update.set_linux_cpu_shares(7);
    update.set_linux_cpuset_cpus("1");
    update.set_linux_pid_limits(-1);
    update.add_linux_hugepage_limit("2MB", 8);
    update.add_linux_unified("io.weight", "9");
    update.set_linux_blockio_class("ignored");
    let r = resources_to_oci(update.linux.resources.as_ref().unwrap()).unwrap();
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        json!({
            "memory": {"limit": 1, "reservation": 2, "swap": 3, "kernel": 4, "kernelTCP": 5,
                       "swappiness": 6, "disableOOMKiller": true, "useHierarchy": true},
            "cpu": {"shares": 7, "cpus": "1"},
            "pids": {"limit": 0},
            "hugepageLimits": [{"pageSize": "2MB", "limit": 8}],
            "unified": {"io.weight": "9"},
        })
    );
}
