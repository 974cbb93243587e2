//! Cgroups path, namespaces, seccomp, memory policy.

use serde_json::json;

use super::{adjusted, base_json, generator, refused};
use crate::SpecError;
use nri_api::{
    optional, ContainerAdjustment, LinuxMemoryPolicy, LinuxNamespace, LinuxSeccomp,
    LinuxSeccompArg, LinuxSyscall, MpolFlag, MpolMode,
};

#[test]
fn cgroups_path_is_set_when_not_empty() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_cgroups_path("");
    assert_eq!(adjusted(base_json(), &adjust), base_json());
    adjust.set_linux_cgroups_path("/kubepods/pod1/ctr");
    assert_eq!(
        adjusted(base_json(), &adjust)["linux"]["cgroupsPath"],
        json!("/kubepods/pod1/ctr")
    );
}

fn ns(typ: &str, path: &str) -> LinuxNamespace {
    LinuxNamespace {
        type_: typ.into(),
        path: path.into(),
        ..Default::default()
    }
}

#[test]
fn namespaces_are_replaced_added_and_removed() {
    let mut spec = base_json();
    spec["linux"]["namespaces"] = json!([
        {"type": "pid"},
        {"type": "network", "path": "/proc/1/ns/net"},
        {"type": "ipc"},
    ]);
    let mut adjust = ContainerAdjustment::new();
    adjust.add_or_replace_namespace(ns("network", "/var/run/netns/x"));
    adjust.add_or_replace_namespace(ns("pid", ""));
    adjust.add_or_replace_namespace(ns("time", ""));
    adjust.remove_namespace("ipc");
    adjust.remove_namespace("user");
    assert_eq!(
        adjusted(spec, &adjust)["linux"]["namespaces"],
        json!([
            {"type": "pid"},
            {"type": "network", "path": "/var/run/netns/x"},
            {"type": "time"},
        ])
    );
}

#[test]
fn only_runtime_spec_namespace_names_are_accepted() {
    for typ in ["net", "mnt", "bogus", "-bogus"] {
        let mut adjust = ContainerAdjustment::new();
        adjust.add_or_replace_namespace(ns(typ, ""));
        let err = refused(&generator(), base_json(), &adjust);
        assert!(matches!(err, SpecError::UnknownNamespace(_)), "{err}");
    }
    let mut adjust = ContainerAdjustment::new();
    adjust.add_or_replace_namespace(ns("net", ""));
    assert_eq!(
        refused(&generator(), base_json(), &adjust).to_string(),
        "unrecognized namespace \"net\""
    );
}

#[test]
fn seccomp_policy_is_converted_field_by_field() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_seccomp_policy(LinuxSeccomp {
        default_action: "SCMP_ACT_ERRNO".into(),
        // Dropped, as upstream does.
        default_errno: optional::uint32(1u32),
        architectures: vec!["SCMP_ARCH_X86_64".into(), "SCMP_ARCH_AARCH64".into()],
        flags: vec!["SECCOMP_FILTER_FLAG_LOG".into()],
        listener_metadata: "meta".into(),
        syscalls: vec![
            LinuxSyscall {
                names: vec!["read".into(), "write".into()],
                action: "SCMP_ACT_ALLOW".into(),
                ..Default::default()
            },
            LinuxSyscall {
                names: vec!["personality".into()],
                action: "SCMP_ACT_ERRNO".into(),
                errno_ret: optional::uint32(38u32),
                args: vec![
                    LinuxSeccompArg {
                        index: 0,
                        value: 8,
                        value_two: 0,
                        op: "SCMP_CMP_EQ".into(),
                        ..Default::default()
                    },
                    LinuxSeccompArg {
                        index: 1,
                        value: 2,
                        value_two: 3,
                        op: "SCMP_CMP_MASKED_EQ".into(),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
        ],
        ..Default::default()
    });
    let mut spec = base_json();
    spec["linux"]["seccomp"] = json!({"defaultAction": "SCMP_ACT_KILL", "syscalls": [{"names": ["x"], "action": "SCMP_ACT_LOG"}]});
    assert_eq!(
        adjusted(spec, &adjust)["linux"]["seccomp"],
        json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
            "flags": ["SECCOMP_FILTER_FLAG_LOG"],
            "listenerMetadata": "meta",
            "syscalls": [
                {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
                {"names": ["personality"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38, "args": [
                    {"index": 0, "value": 8, "op": "SCMP_CMP_EQ"},
                    {"index": 1, "value": 2, "valueTwo": 3, "op": "SCMP_CMP_MASKED_EQ"},
                ]},
            ]
        })
    );
}

/// An error field and how to make a valid policy have it.
type Breaker = (&'static str, fn(&mut LinuxSeccomp));

#[test]
fn seccomp_names_outside_runtime_spec_are_refused() {
    let valid = || LinuxSeccomp {
        default_action: "SCMP_ACT_ALLOW".into(),
        syscalls: vec![LinuxSyscall {
            names: vec!["read".into()],
            action: "SCMP_ACT_LOG".into(),
            args: vec![LinuxSeccompArg {
                op: "SCMP_CMP_NE".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let breakers: [Breaker; 5] = [
        ("seccomp action", |p| p.default_action = String::new()),
        ("seccomp action", |p| p.syscalls[0].action = "allow".into()),
        ("seccomp architecture", |p| {
            p.architectures = vec!["x86_64".into()]
        }),
        ("seccomp flag", |p| {
            p.flags = vec!["SECCOMP_FILTER_FLAG_NEW_LISTENER".into()]
        }),
        ("seccomp operator", |p| {
            p.syscalls[0].args[0].op = String::new()
        }),
    ];
    let mut ok = ContainerAdjustment::new();
    ok.set_linux_seccomp_policy(valid());
    adjusted(base_json(), &ok);
    for (field, brk) in breakers {
        let mut policy = valid();
        brk(&mut policy);
        let mut adjust = ContainerAdjustment::new();
        adjust.set_linux_seccomp_policy(policy);
        let err = refused(&generator(), base_json(), &adjust);
        assert!(
            matches!(err, SpecError::Unsupported { field: f, .. } if f == field),
            "{err}"
        );
    }
}

#[test]
fn memory_policy_is_set_with_nodes_always_written() {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_memory_policy(MpolMode::MPOL_BIND, "0-1", &[MpolFlag::MPOL_F_STATIC_NODES]);
    assert_eq!(
        adjusted(base_json(), &adjust)["linux"]["memoryPolicy"],
        json!({"mode": "MPOL_BIND", "nodes": "0-1", "flags": ["MPOL_F_STATIC_NODES"]})
    );
    let mut local = ContainerAdjustment::new();
    local.set_linux_memory_policy(MpolMode::MPOL_LOCAL, "", &[]);
    assert_eq!(
        adjusted(base_json(), &local)["linux"]["memoryPolicy"],
        json!({"mode": "MPOL_LOCAL", "nodes": ""})
    );
}

/// A memory policy adjustment changed by `edit` after it was built.
fn memory_policy(edit: impl FnOnce(&mut LinuxMemoryPolicy)) -> ContainerAdjustment {
    let mut adjust = ContainerAdjustment::new();
    adjust.set_linux_memory_policy(MpolMode::MPOL_BIND, "0", &[]);
    edit(
        adjust
            .linux
            .mut_or_insert_default()
            .memory_policy
            .mut_or_insert_default(),
    );
    adjust
}

#[test]
fn memory_policy_with_unknown_mode_clears_it() {
    let adjust = memory_policy(|p| p.mode = protobuf::EnumOrUnknown::from_i32(77));
    let mut spec = base_json();
    spec["linux"]["memoryPolicy"] = json!({"mode": "MPOL_BIND", "nodes": "1"});
    assert_eq!(adjusted(spec, &adjust), base_json());
}

#[test]
fn memory_policy_with_unknown_flag_is_refused() {
    let adjust = memory_policy(|p| p.flags = vec![protobuf::EnumOrUnknown::from_i32(9)]);
    let err = refused(&generator(), base_json(), &adjust);
    assert!(matches!(
        err,
        SpecError::Unsupported {
            field: "memory policy flag",
            ..
        }
    ));
}
