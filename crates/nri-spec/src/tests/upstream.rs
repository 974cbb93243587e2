//! The cases of upstream's `pkg/runtime-tools/generate` test suite, each
//! checked against the spec it expects.

use serde_json::json;

use super::{adjusted, base_json, base_spec, generator, to_json};
use nri_api::{
    optional, ContainerAdjustment, LinuxContainerAdjustment, LinuxSeccomp, LinuxSyscall, Mount,
};

#[test]
fn nil_and_empty_adjustments_leave_the_spec_alone() {
    let mut empty_linux = ContainerAdjustment::new();
    empty_linux.linux = protobuf::MessageField::some(LinuxContainerAdjustment::new());
    for adjust in [ContainerAdjustment::new(), empty_linux] {
        let mut spec = base_spec();
        let adjusted = generator().adjust(&mut spec, &adjust).unwrap();
        assert_eq!(spec, base_spec());
        assert!(adjusted.pending_cdi_devices.is_empty());
    }
}

#[test]
fn args_replace_the_process_arguments() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_args(["arg0", "arg1", "arg2"]);
    let mut want = base_json();
    want["process"]["args"] = json!(["arg0", "arg1", "arg2"]);
    assert_eq!(adjusted(base_json(), &adjust), want);
}

#[test]
fn rlimits_are_appended() {
    // Upstream's case uses the type "nofile", which runtime-spec does not
    // name and oci-spec cannot hold (see process.rs); the runtime-spec name:
    let mut adjust = ContainerAdjustment::new();
    adjust.add_rlimit("RLIMIT_NOFILE", 456, 123);
    let mut want = base_json();
    want["process"]["rlimits"] = json!([{"type": "RLIMIT_NOFILE", "hard": 456, "soft": 123}]);
    assert_eq!(adjusted(base_json(), &adjust), want);
}

#[test]
fn memory_limit_sets_limit_and_swap() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_memory_limit(11111);
    let mut want = base_json();
    want["linux"]["resources"]["memory"] = json!({"limit": 11111, "swap": 11111});
    assert_eq!(adjusted(base_json(), &adjust), want);
}

#[test]
fn oom_score_adj_is_set() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_oom_score_adj(Some(123));
    let mut want = base_json();
    want["process"]["oomScoreAdj"] = json!(123);
    assert_eq!(adjusted(base_json(), &adjust), want);
}

#[test]
fn unset_oom_score_adj_changes_nothing() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_oom_score_adj(None);
    assert_eq!(adjusted(base_json(), &adjust), base_json());
}

#[test]
fn existing_oom_score_adj_is_kept() {
    let mut spec = base_json();
    spec["process"]["oomScoreAdj"] = json!(123);
    assert_eq!(adjusted(spec.clone(), &ContainerAdjustment::new()), spec);
}

/// How to set a CPU field, its JSON name and the value expected.
type CpuCase = (
    fn(&mut ContainerAdjustment),
    &'static str,
    serde_json::Value,
);

#[test]
fn cpu_settings_are_set() {
    let cases: [CpuCase; 5] = [
        (|a| a.set_linux_cpu_shares(11111), "shares", json!(11111)),
        (|a| a.set_linux_cpu_quota(11111), "quota", json!(11111)),
        (|a| a.set_linux_cpu_period(11111), "period", json!(11111)),
        (|a| a.set_linux_cpuset_cpus("5,6"), "cpus", json!("5,6")),
        (|a| a.set_linux_cpuset_mems("5,6"), "mems", json!("5,6")),
    ];
    for (set, field, value) in cases {
        let mut adjust = ContainerAdjustment::new();
        set(&mut adjust);
        let mut want = base_json();
        want["linux"]["resources"]["cpu"][field] = value;
        assert_eq!(adjusted(base_json(), &adjust), want, "{field}");
    }
}

#[test]
fn pids_limit_is_set() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_pid_limits(123);
    let mut want = base_json();
    want["linux"]["resources"]["pids"] = json!({"limit": 123});
    assert_eq!(adjusted(base_json(), &adjust), want);
}

#[test]
fn mounts_are_sorted_by_depth() {
    let mut adjust = ContainerAdjustment::new();
    for (destination, source) in [
        ("/a/b/c/d/e", "/host/e"),
        ("/a/b/c", "/host/c"),
        ("/a/b", "/host/b"),
        ("/a", "/host/a"),
    ] {
        adjust.add_mount(Mount {
            destination: destination.into(),
            source: source.into(),
            ..Default::default()
        });
    }
    let mut want = base_json();
    want["mounts"] = json!([
        {"destination": "/a", "source": "/host/a"},
        {"destination": "/a/b", "source": "/host/b"},
        {"destination": "/a/b/c", "source": "/host/c"},
        {"destination": "/a/b/c/d/e", "source": "/host/e"},
    ]);
    assert_eq!(adjusted(base_json(), &adjust), want);
}

#[test]
fn seccomp_policy_replaces_the_spec_policy() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_seccomp_policy(LinuxSeccomp {
        default_action: "SCMP_ACT_ALLOW".into(),
        listener_path: "/run/meshuggah-rocks.sock".into(),
        syscalls: vec![LinuxSyscall {
            names: vec!["sched_getaffinity".into()],
            action: "SCMP_ACT_NOTIFY".into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    let spec = adjusted(base_json(), &adjust);
    assert_eq!(
        spec["linux"]["seccomp"],
        json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "listenerPath": "/run/meshuggah-rocks.sock",
            "syscalls": [{"names": ["sched_getaffinity"], "action": "SCMP_ACT_NOTIFY"}]
        })
    );
}

#[test]
fn sysctl_is_set_and_removed() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_sysctl("net.ipv4.ip_forward", "1");
    adjust.set_linux_sysctl("-delete.me", "");
    let mut spec = base_json();
    spec["linux"]["sysctl"] = json!({"delete.me": "foobar"});
    let spec = adjusted(spec, &adjust);
    assert_eq!(spec["linux"]["sysctl"], json!({"net.ipv4.ip_forward": "1"}));
}

#[test]
fn rdt_fields_are_set() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_rdt_clos_id("foo");
    adjust.set_linux_rdt_schemata(["L2:0=ff", "L3:0=f"]);
    adjust.set_linux_rdt_enable_monitoring(true);
    let spec = adjusted(base_json(), &adjust);
    assert_eq!(
        spec["linux"]["intelRdt"],
        json!({"closID": "foo", "schemata": ["L2:0=ff", "L3:0=f"], "enableMonitoring": true})
    );
}

#[test]
fn rdt_remove_clears_intel_rdt() {
    let mut adjust = ContainerAdjustment::new();
    adjust.remove_linux_rdt();
    let mut spec = base_json();
    spec["linux"]["intelRdt"] = json!({"closID": "bar"});
    assert_eq!(adjusted(spec, &adjust), base_json());
}

#[test]
fn optional_wrappers_distinguish_zero_from_absent() {
    // What the ported cases rely on: an absent OOM score is no change, a
    // present zero is a change.
    let mut adjust = ContainerAdjustment::new();
    adjust.linux.mut_or_insert_default().oom_score_adj = optional::int(0);
    let mut spec = base_spec();
    generator().adjust(&mut spec, &adjust).unwrap();
    assert_eq!(to_json(&spec)["process"]["oomScoreAdj"], json!(0));
}
