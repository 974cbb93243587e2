//! Tests of the default validator. The first two tables carry the cases of
//! upstream's `default-validator_test.go`; the rest pin the messages, the
//! order of the checks and the edge cases this port decides.

use protobuf::{EnumOrUnknown, MessageField};

use super::*;
use nri_api::{
    Container, ContainerAdjustment, FieldOwners, LinuxContainerAdjustment, PluginInstance,
    PodSandbox, SecurityProfile,
};

const CTR_ID: &str = "container-id";
const CTR_NAME: &str = "container-name";
const TOLERATE: &str = "tolerate-missing-plugins";

/// Builds the request a runtime would send for container `CTR_ID`.
struct Request(ValidateContainerAdjustmentRequest);

fn request() -> Request {
    let mut pod = PodSandbox::new();
    pod.id = "pod-id".into();
    pod.name = "pod-name".into();
    pod.namespace = "pod-namespace".into();
    let mut container = Container::new();
    container.id = CTR_ID.into();
    container.name = CTR_NAME.into();
    let mut req = ValidateContainerAdjustmentRequest::new();
    req.pod = MessageField::some(pod);
    req.container = MessageField::some(container);
    req.adjust = MessageField::some(ContainerAdjustment::new());
    Request(req)
}

impl Request {
    fn annotate(mut self, key: &str, value: &str) -> Self {
        let pod = self.0.pod.mut_or_insert_default();
        pod.annotations.insert(key.into(), value.into());
        self
    }

    fn plugin(mut self, index: &str, name: &str) -> Self {
        let mut p = PluginInstance::new();
        p.index = index.into();
        p.name = name.into();
        self.0.plugins.push(p);
        self
    }

    fn without_adjust(mut self) -> Self {
        self.0.adjust.clear();
        self
    }

    /// Records that `owner` set simple `field` of the container.
    fn claim(self, field: Field, owner: &str) -> Self {
        self.claim_for(CTR_ID, field, owner)
    }

    fn claim_for(mut self, ctr_id: &str, field: Field, owner: &str) -> Self {
        self.field_owners(ctr_id)
            .simple
            .insert(field as i32, owner.into());
        self
    }

    /// Records that `owner` set `key` of compound `field` of the container.
    fn claim_key(self, field: Field, key: &str, owner: &str) -> Self {
        self.claim_key_for(CTR_ID, field, key, owner)
    }

    fn claim_key_for(mut self, ctr_id: &str, field: Field, key: &str, owner: &str) -> Self {
        self.field_owners(ctr_id)
            .compound
            .entry(field as i32)
            .or_default()
            .owners
            .insert(key.into(), owner.into());
        self
    }

    fn field_owners(&mut self, ctr_id: &str) -> &mut FieldOwners {
        let owners = self.0.owners.mut_or_insert_default();
        owners.owners.entry(ctr_id.into()).or_default()
    }

    /// Puts sysctl `key` into the merged adjustment.
    fn sysctl(mut self, key: &str, value: &str) -> Self {
        let adjust = self.0.adjust.mut_or_insert_default();
        let linux = adjust.linux.mut_or_insert_default();
        linux.sysctl.insert(key.into(), value.into());
        self
    }

    /// Gives the pristine container a seccomp profile of raw type `value`.
    fn seccomp(mut self, value: i32) -> Self {
        let mut profile = SecurityProfile::new();
        profile.profile_type = EnumOrUnknown::from_i32(value);
        let container = self.0.container.mut_or_insert_default();
        container.linux.mut_or_insert_default().seccomp_profile = MessageField::some(profile);
        self
    }

    /// The verdict on this request; and, as every case passes through
    /// here, a check that the validator reads of the pod and the container
    /// no more than `as_read` keeps: the verdict on them with every other
    /// field filled in, and on them as read, is the same.
    fn validate(&self, cfg: &DefaultValidatorConfig) -> Result<(), String> {
        let v = DefaultValidator::new(cfg.clone());
        let verdict =
            |req: &ValidateContainerAdjustmentRequest| v.validate(req).map_err(|e| e.to_string());
        let said = verdict(&self.0);
        let mut rich = self.0.clone();
        fill_unread(rich.container.mut_or_insert_default());
        fill_unread_of_pod(rich.pod.mut_or_insert_default());
        let mut read = rich.clone();
        read.container = MessageField::some(as_read::container(&rich.container));
        read.pod = MessageField::some(as_read::pod(&rich.pod));
        assert_eq!(
            verdict(&rich),
            said,
            "the whole pod and container change the verdict"
        );
        assert_eq!(
            verdict(&read),
            said,
            "the pod and container as read change the verdict"
        );
        said
    }
}

/// Gives every field of `c` that `as_read::container` leaves out a value,
/// keeping those it keeps.
fn fill_unread(c: &mut Container) {
    use nri_api::{Hook, LinuxDevice, LinuxNamespace, LinuxSeccomp, Mount, POSIXRlimit, User};
    c.pod_sandbox_id = "pod-id".into();
    c.labels
        .insert("io.kubernetes.container.name".into(), CTR_NAME.into());
    c.annotations.insert(
        REQUIRED_PLUGINS_ANNOTATION.into(),
        "[\"from-the-container\"]".into(),
    );
    c.annotations.insert(TOLERATE.into(), "true".into());
    c.args = vec!["sleep".into(), "inf".into()];
    c.env = vec!["PATH=/bin".into()];
    c.mounts.push(Mount {
        destination: "/data".into(),
        source: "/srv/data".into(),
        type_: "bind".into(),
        options: vec!["rbind".into()],
        ..Default::default()
    });
    c.hooks.mut_or_insert_default().prestart.push(Hook {
        path: "/bin/hook".into(),
        ..Default::default()
    });
    c.rlimits.push(POSIXRlimit {
        type_: "RLIMIT_NOFILE".into(),
        hard: 1024,
        soft: 1024,
        ..Default::default()
    });
    c.user = MessageField::some(User {
        uid: 1000,
        ..Default::default()
    });
    let linux = c.linux.mut_or_insert_default();
    linux.namespaces.push(LinuxNamespace {
        type_: "network".into(),
        path: "/var/run/netns/x".into(),
        ..Default::default()
    });
    linux.devices.push(LinuxDevice {
        path: "/dev/fuse".into(),
        ..Default::default()
    });
    linux.cgroups_path = "/kubepods/pod/ctr".into();
    linux
        .sysctl
        .insert("net.ipv4.ip_forward".into(), "1".into());
    linux.seccomp_policy = MessageField::some(LinuxSeccomp {
        default_action: "SCMP_ACT_ERRNO".into(),
        ..Default::default()
    });
    let resources = linux.resources.mut_or_insert_default();
    resources.cpu.mut_or_insert_default().cpus = "0-1".into();
}

/// Gives every field of `p` that `as_read::pod` leaves out a value,
/// keeping those it keeps.
fn fill_unread_of_pod(p: &mut PodSandbox) {
    use nri_api::LinuxNamespace;
    p.id = "pod-id".into();
    p.uid = "0b4c1a6e".into();
    p.runtime_handler = "runc".into();
    p.pid = 4242;
    p.ips = vec!["10.0.0.1".into()];
    // The validator's annotations, as labels.
    p.labels.insert(
        REQUIRED_PLUGINS_ANNOTATION.into(),
        "[\"from-a-label\"]".into(),
    );
    p.labels.insert(TOLERATE.into(), "true".into());
    let linux = p.linux.mut_or_insert_default();
    linux.cgroup_parent = "/kubepods".into();
    linux.namespaces.push(LinuxNamespace {
        type_: "network".into(),
        path: "/var/run/netns/x".into(),
        ..Default::default()
    });
    linux
        .resources
        .mut_or_insert_default()
        .cpu
        .mut_or_insert_default()
        .cpus = "0-1".into();
}

const UNCONFINED: i32 = ProfileType::UNCONFINED as i32;
const RUNTIME_DEFAULT: i32 = ProfileType::RUNTIME_DEFAULT as i32;
const LOCALHOST: i32 = ProfileType::LOCALHOST as i32;

fn required(plugins: &[&str]) -> DefaultValidatorConfig {
    DefaultValidatorConfig {
        enable: true,
        required_plugins: plugins.iter().map(|p| p.to_string()).collect(),
        ..Default::default()
    }
}

fn reject_all() -> DefaultValidatorConfig {
    DefaultValidatorConfig {
        enable: true,
        reject_oci_hook_adjustment: true,
        reject_runtime_default_seccomp_adjustment: true,
        reject_unconfined_seccomp_adjustment: true,
        reject_custom_seccomp_adjustment: true,
        reject_namespace_adjustment: true,
        reject_sysctl_adjustment: true,
        ..Default::default()
    }
}

/// Runs `(name, config, request, expected error text or None)` cases.
fn check_cases(cases: Vec<(&str, DefaultValidatorConfig, Request, Option<&str>)>) {
    for (name, cfg, req, want) in cases {
        let want = want.map_or(Ok(()), |w| Err(w.to_string()));
        assert_eq!(req.validate(&cfg), want, "case {name:?}");
    }
}

const ANNOTATED_FOR_CTR: &str = "required-plugins.noderesource.dev/container.container-name";

#[test]
fn upstream_required_plugins_cases() {
    // Upstream's requests carry no adjustment for these.
    let req = || request().without_adjust();
    let tolerating = DefaultValidatorConfig {
        tolerate_missing_annotation: TOLERATE.into(),
        ..required(&["plugin"])
    };
    check_cases(vec![
        ("no required plugins", required(&[]), req(), None),
        (
            "missing annotated required plugin",
            required(&[]),
            req().annotate(ANNOTATED_FOR_CTR, "[ plugin ]"),
            Some(r#"validation error: required plugin "plugin" not present"#),
        ),
        (
            "present annotated required plugin",
            required(&[]),
            req()
                .annotate(ANNOTATED_FOR_CTR, "[ plugin ]")
                .plugin("00", "plugin"),
            None,
        ),
        (
            "missing global required plugin",
            required(&["plugin"]),
            req(),
            Some(r#"validation error: required plugin "plugin" not present"#),
        ),
        (
            "present global required plugin",
            required(&["plugin"]),
            req().plugin("00", "plugin"),
            None,
        ),
        (
            "tolerated missing (global required) plugin",
            tolerating,
            req().annotate(TOLERATE, "true"),
            None,
        ),
        (
            "present annotated and global required plugin",
            required(&["plugin1"]),
            req()
                .annotate(ANNOTATED_FOR_CTR, "[ plugin2 ]")
                .plugin("00", "plugin1")
                .plugin("01", "plugin2"),
            None,
        ),
        (
            "missing annotated with present global required plugin",
            required(&["plugin1"]),
            req()
                .annotate(ANNOTATED_FOR_CTR, "[ plugin2 ]")
                .plugin("00", "plugin1"),
            Some(r#"validation error: required plugin "plugin2" not present"#),
        ),
        (
            "present annotated with missing global required plugin",
            required(&["plugin1"]),
            req()
                .annotate(ANNOTATED_FOR_CTR, "[ plugin2 ]")
                .plugin("00", "plugin2"),
            Some(r#"validation error: required plugin "plugin1" not present"#),
        ),
    ]);
}

#[test]
fn upstream_sysctl_cases() {
    let cfg = DefaultValidatorConfig {
        enable: true,
        reject_sysctl_adjustment: true,
        ..Default::default()
    };
    check_cases(vec![(
        "disallowed sysctl adjustment",
        cfg,
        request()
            .plugin("00", "plugin2")
            .sysctl("foo", "bar")
            .claim_key(Field::Sysctl, "foo", "plugin2"),
        Some("validation error: attempted restricted sysctl adjustment by plugin(s) plugin2"),
    )]);
}

#[test]
fn rule_messages() {
    let seccomp = |profile| {
        request()
            .seccomp(profile)
            .claim(Field::SeccompPolicy, "00-a")
    };
    check_cases(vec![
        (
            "one hook owner",
            reject_all(),
            request().claim(Field::OciHooks, "00-a"),
            Some(r#"validation error: plugin "00-a" attempted restricted OCI hook injection"#),
        ),
        (
            "several hook owners",
            reject_all(),
            request().claim(Field::OciHooks, "00-a,10-b"),
            Some(r#"validation error: plugins "00-a,10-b" attempted restricted OCI hook injection"#),
        ),
        (
            "unconfined seccomp",
            reject_all(),
            seccomp(UNCONFINED),
            Some("validation error: plugin 00-a attempted restricted  unconfined seccomp policy adjustment"),
        ),
        (
            "no seccomp profile counts as unconfined",
            reject_all(),
            request().claim(Field::SeccompPolicy, "00-a"),
            Some("validation error: plugin 00-a attempted restricted  unconfined seccomp policy adjustment"),
        ),
        (
            "runtime default seccomp",
            reject_all(),
            seccomp(RUNTIME_DEFAULT),
            Some("validation error: plugin 00-a attempted restricted runtime default seccomp policy adjustment"),
        ),
        (
            "custom seccomp",
            reject_all(),
            seccomp(LOCALHOST),
            Some("validation error: plugin 00-a attempted restricted  custom seccomp policy adjustment"),
        ),
        (
            "one namespace",
            reject_all(),
            request().claim_key(Field::Namespace, "network", "00-a"),
            Some(r#"validation error: attempted restricted namespace adjustment by plugin(s) "00-a" (namespace "network")"#),
        ),
        (
            "namespaces are listed by type",
            reject_all(),
            request()
                .claim_key(Field::Namespace, "pid", "10-b")
                .claim_key(Field::Namespace, "network", "00-a")
                .claim_key(Field::Namespace, "ipc", "10-b"),
            Some(concat!(
                "validation error: attempted restricted namespace adjustment by plugin(s) ",
                r#""10-b" (namespace "ipc"), "00-a" (namespace "network"), "10-b" (namespace "pid")"#
            )),
        ),
        (
            "sysctl owners are listed by key, one per key",
            reject_all(),
            request()
                .sysctl("net.c", "1")
                .sysctl("net.a", "1")
                .sysctl("net.b", "1")
                .claim_key(Field::Sysctl, "net.c", "00-a")
                .claim_key(Field::Sysctl, "net.a", "10-b")
                .claim_key(Field::Sysctl, "net.b", "00-a"),
            Some("validation error: attempted restricted sysctl adjustment by plugin(s) 10-b, 00-a, 00-a"),
        ),
        (
            "one required plugin missing",
            required(&["x"]),
            request(),
            Some(r#"validation error: required plugin "x" not present"#),
        ),
        (
            "several required plugins missing, configured ones first",
            required(&["x", "y"]),
            request().annotate(REQUIRED_PLUGINS_ANNOTATION, "[z]"),
            Some(r#"validation error: required plugins "x,y,z" not present"#),
        ),
        (
            "a plugin required twice is listed twice",
            required(&["x"]),
            request().annotate(REQUIRED_PLUGINS_ANNOTATION, "[x]"),
            Some(r#"validation error: required plugins "x,x" not present"#),
        ),
        (
            "names are quoted like Go does",
            required(&[]),
            request().annotate(REQUIRED_PLUGINS_ANNOTATION, r#"["a\tb\u0001"]"#),
            Some(r#"validation error: required plugin "a\tb\x01" not present"#),
        ),
    ]);
}

#[test]
fn invalid_annotations_are_not_violations() {
    let tolerating = DefaultValidatorConfig {
        tolerate_missing_annotation: TOLERATE.into(),
        ..required(&["x"])
    };
    let err = DefaultValidator::new(tolerating)
        .validate(&request().annotate(TOLERATE, "maybe").0)
        .unwrap_err();
    assert!(!err.is_violation());
    assert_eq!(
        err.to_string(),
        r#"invalid tolerate-missing-plugins annotation "maybe": strconv.ParseBool: parsing "maybe": invalid syntax"#
    );

    for value in ["plugin", "[a", "{a: b}", "[[a]]"] {
        let err = DefaultValidator::new(required(&[]))
            .validate(&request().annotate(REQUIRED_PLUGINS_ANNOTATION, value).0)
            .unwrap_err();
        assert!(!err.is_violation(), "{value:?}");
        let prefix = format!(
            "invalid required-plugins.noderesource.dev annotation {}: ",
            go_quote(value)
        );
        assert!(err.to_string().starts_with(&prefix), "{err}");
    }
    assert_eq!(
        DefaultValidator::new(required(&[]))
            .validate(&request().annotate(REQUIRED_PLUGINS_ANNOTATION, "plugin").0)
            .unwrap_err()
            .to_string(),
        r#"invalid required-plugins.noderesource.dev annotation "plugin": invalid type: string "plugin", expected a sequence"#
    );
}

#[test]
fn violations_display_with_the_validation_error_prefix() {
    let err = DefaultValidator::new(required(&["x"]))
        .validate(&request().0)
        .unwrap_err();
    assert!(err.is_violation());
    assert_eq!(
        err,
        ValidationError::Rejected(Violation::RequiredPluginsMissing {
            missing: vec!["x".into()]
        })
    );
    assert!(err.to_string().starts_with("validation error: "));
}

#[test]
fn disabled_rules_accept() {
    let claims_everything = || {
        request()
            .claim(Field::OciHooks, "00-a")
            .claim(Field::SeccompPolicy, "00-a")
            .claim_key(Field::Namespace, "network", "00-a")
            .sysctl("net.a", "1")
            .claim_key(Field::Sysctl, "net.a", "00-a")
    };
    let only = |set: fn(&mut DefaultValidatorConfig)| {
        let mut cfg = DefaultValidatorConfig::default();
        set(&mut cfg);
        cfg
    };
    check_cases(vec![
        (
            "default config",
            DefaultValidatorConfig::default(),
            claims_everything(),
            None,
        ),
        (
            "unconfined only, runtime default profile",
            only(|c| c.reject_unconfined_seccomp_adjustment = true),
            claims_everything().seccomp(RUNTIME_DEFAULT),
            None,
        ),
        (
            "runtime default only, custom profile",
            only(|c| c.reject_runtime_default_seccomp_adjustment = true),
            claims_everything().seccomp(LOCALHOST),
            None,
        ),
        (
            "custom only, no profile",
            only(|c| c.reject_custom_seccomp_adjustment = true),
            claims_everything(),
            None,
        ),
        (
            "unknown profile type",
            reject_all(),
            request().seccomp(7).claim(Field::SeccompPolicy, "00-a"),
            None,
        ),
    ]);
}

#[test]
fn unclaimed_fields_accept() {
    check_cases(vec![
        ("nothing claimed", reject_all(), request(), None),
        (
            "sysctl adjusted but unclaimed",
            reject_all(),
            request().sysctl("net.a", "1"),
            None,
        ),
        (
            "sysctl claimed but not in the adjustment",
            reject_all(),
            request().claim_key(Field::Sysctl, "net.a", "00-a"),
            None,
        ),
        (
            "claims for another container",
            reject_all(),
            request()
                .sysctl("net.a", "1")
                .claim_for("other", Field::OciHooks, "00-a")
                .claim_for("other", Field::SeccompPolicy, "00-a")
                .claim_key_for("other", Field::Namespace, "network", "00-a")
                .claim_key_for("other", Field::Sysctl, "net.a", "00-a"),
            None,
        ),
        (
            "claims of other fields",
            reject_all(),
            request().claim(Field::MemLimit, "00-a").claim_key(
                Field::Annotations,
                "network",
                "00-a",
            ),
            None,
        ),
    ]);
}

#[test]
fn removal_markers_count_as_claims() {
    // A plugin that cleared a field still adjusted it; upstream reports the
    // marked owner as it is.
    check_cases(vec![
        (
            "cleared namespace",
            reject_all(),
            request().claim_key(Field::Namespace, "network", "-00-a"),
            Some(r#"validation error: attempted restricted namespace adjustment by plugin(s) "-00-a" (namespace "network")"#),
        ),
        (
            "cleared seccomp policy",
            reject_all(),
            request().claim(Field::SeccompPolicy, "-00-a"),
            Some("validation error: plugin -00-a attempted restricted  unconfined seccomp policy adjustment"),
        ),
    ]);
}

#[test]
fn checks_run_in_upstream_order() {
    let all = || {
        let mut cfg = reject_all();
        cfg.required_plugins = vec!["x".into()];
        cfg.tolerate_missing_annotation = TOLERATE.into();
        cfg
    };
    let hooks = r#"validation error: plugin "00-a" attempted restricted OCI hook injection"#;
    let seccomp =
        "validation error: plugin 00-b attempted restricted  unconfined seccomp policy adjustment";
    let ns = r#"validation error: attempted restricted namespace adjustment by plugin(s) "00-c" (namespace "ipc")"#;
    let required = r#"validation error: required plugin "x" not present"#;
    let sysctl = "validation error: attempted restricted sysctl adjustment by plugin(s) 00-d";
    let with_sysctl = || {
        request()
            .sysctl("net.a", "1")
            .claim_key(Field::Sysctl, "net.a", "00-d")
    };
    let with_ns = || with_sysctl().claim_key(Field::Namespace, "ipc", "00-c");
    let with_seccomp = || with_ns().claim(Field::SeccompPolicy, "00-b");
    let with_hooks = || with_seccomp().claim(Field::OciHooks, "00-a");
    check_cases(vec![
        ("hooks first", all(), with_hooks(), Some(hooks)),
        ("then seccomp", all(), with_seccomp(), Some(seccomp)),
        ("then namespaces", all(), with_ns(), Some(ns)),
        (
            "then required plugins",
            all(),
            with_sysctl(),
            Some(required),
        ),
        (
            "then sysctl",
            all(),
            with_sysctl().plugin("01", "x"),
            Some(sysctl),
        ),
        (
            "a bad annotation fails before sysctl",
            all(),
            with_sysctl().annotate(TOLERATE, "nope"),
            Some(
                r#"invalid tolerate-missing-plugins annotation "nope": strconv.ParseBool: parsing "nope": invalid syntax"#,
            ),
        ),
        (
            "a bad annotation is not looked at after a violation",
            all(),
            with_ns().annotate(TOLERATE, "nope"),
            Some(ns),
        ),
    ]);
}

#[test]
fn tolerating_skips_only_the_required_plugins_check() {
    let cfg = DefaultValidatorConfig {
        tolerate_missing_annotation: TOLERATE.into(),
        reject_sysctl_adjustment: true,
        ..required(&["x"])
    };
    let sysctl = "validation error: attempted restricted sysctl adjustment by plugin(s) 00-a";
    let missing = r#"validation error: required plugin "x" not present"#;
    let base = || request();
    let with_sysctl = || {
        request()
            .sysctl("net.a", "1")
            .claim_key(Field::Sysctl, "net.a", "00-a")
    };
    let no_toleration_key = DefaultValidatorConfig {
        tolerate_missing_annotation: String::new(),
        ..cfg.clone()
    };
    check_cases(vec![
        (
            "tolerated",
            cfg.clone(),
            base().annotate(TOLERATE, "true"),
            None,
        ),
        (
            "tolerated, T",
            cfg.clone(),
            base().annotate(TOLERATE, "T"),
            None,
        ),
        (
            "tolerated, 1",
            cfg.clone(),
            base().annotate(TOLERATE, "1"),
            None,
        ),
        (
            "pod-scoped",
            cfg.clone(),
            base().annotate(&format!("{TOLERATE}/pod"), "true"),
            None,
        ),
        (
            "container-scoped",
            cfg.clone(),
            base().annotate(&format!("{TOLERATE}/container.{CTR_NAME}"), "true"),
            None,
        ),
        (
            "scoped to another container",
            cfg.clone(),
            base().annotate(&format!("{TOLERATE}/container.other"), "true"),
            Some(missing),
        ),
        (
            "container scope overrides pod scope",
            cfg.clone(),
            base()
                .annotate(TOLERATE, "true")
                .annotate(&format!("{TOLERATE}/container.{CTR_NAME}"), "false"),
            Some(missing),
        ),
        (
            "not tolerated",
            cfg.clone(),
            base().annotate(TOLERATE, "false"),
            Some(missing),
        ),
        ("no annotation", cfg.clone(), base(), Some(missing)),
        (
            "annotation without a configured key",
            no_toleration_key,
            base().annotate(TOLERATE, "true"),
            Some(missing),
        ),
        (
            "tolerated still checks sysctl",
            cfg.clone(),
            with_sysctl().annotate(TOLERATE, "true"),
            Some(sysctl),
        ),
        (
            "tolerated skips a malformed required-plugins annotation",
            cfg,
            base()
                .annotate(TOLERATE, "true")
                .annotate(REQUIRED_PLUGINS_ANNOTATION, "[oops"),
            None,
        ),
    ]);
}

#[test]
fn required_plugins_annotation_precedence_and_syntax() {
    let cfg = required(&[]);
    let key = REQUIRED_PLUGINS_ANNOTATION;
    let pod_key = format!("{key}/pod");
    let missing = |name: &str| format!(r#"validation error: required plugin "{name}" not present"#);
    let cases: Vec<(&str, Request, Option<String>)> = vec![
        (
            "bare key",
            request().annotate(key, "[a]"),
            Some(missing("a")),
        ),
        (
            "pod key",
            request().annotate(&pod_key, "[a]"),
            Some(missing("a")),
        ),
        (
            "pod key over bare key",
            request().annotate(key, "[a]").annotate(&pod_key, "[b]"),
            Some(missing("b")),
        ),
        (
            "container key over pod key",
            request()
                .annotate(&pod_key, "[a]")
                .annotate(ANNOTATED_FOR_CTR, "[b]"),
            Some(missing("b")),
        ),
        (
            "an empty container-scoped list overrides",
            request()
                .annotate(key, "[a]")
                .annotate(ANNOTATED_FOR_CTR, "[]"),
            None,
        ),
        (
            "another container's key",
            request().annotate(&format!("{key}/container.other"), "[a]"),
            None,
        ),
        (
            "JSON flow list",
            request().annotate(key, r#"["a","b"]"#).plugin("00", "a"),
            Some(missing("b")),
        ),
        (
            "flow list with spaces",
            request().annotate(key, "[ a ]"),
            Some(missing("a")),
        ),
        (
            "block list",
            request().annotate(key, "- a\n"),
            Some(missing("a")),
        ),
        ("empty value", request().annotate(key, ""), None),
        ("null value", request().annotate(key, "~"), None),
    ];
    for (name, req, want) in cases {
        assert_eq!(
            req.validate(&cfg),
            want.map_or(Ok(()), Err),
            "case {name:?}"
        );
    }
}

#[test]
fn plugin_presence() {
    // (case, required name, index and name of the only plugin, present)
    let cases = [
        ("by name", "a", ("10", "a"), true),
        ("by index and name", "10-a", ("10", "a"), true),
        ("wrong index", "10-a", ("20", "a"), false),
        ("index alone is no name", "10-a", ("10", "b"), false),
        ("dashed name", "b-a", ("10", "b-a"), true),
        ("dashed name with index", "10-b-a", ("10", "b-a"), true),
        ("name is no prefix", "a", ("10", "ab"), false),
        ("index is no name", "10", ("10", "a"), false),
        ("empty name", "b-", ("b", ""), true),
        (
            "the default validator counts",
            "00-default-validator",
            (DEFAULT_VALIDATOR_INDEX, DEFAULT_VALIDATOR_NAME),
            true,
        ),
    ];
    for (case, name, (index, plugin), present) in cases {
        let want = if present {
            Ok(())
        } else {
            Err(format!(
                r#"validation error: required plugin "{name}" not present"#
            ))
        };
        let req = request().plugin(index, plugin);
        assert_eq!(req.validate(&required(&[name])), want, "case {case:?}");
    }
}

#[test]
fn adjust_none_skips_the_adjustment_checks() {
    let cfg = reject_all();
    let claims = request()
        .without_adjust()
        .claim(Field::OciHooks, "00-a")
        .claim(Field::SeccompPolicy, "00-a")
        .claim_key(Field::Namespace, "network", "00-a")
        .claim_key(Field::Sysctl, "net.a", "00-a");
    assert_eq!(claims.validate(&cfg), Ok(()));

    // ...but not the required-plugins check.
    let mut cfg = cfg;
    cfg.required_plugins = vec!["x".into()];
    assert_eq!(
        claims.validate(&cfg),
        Err(r#"validation error: required plugin "x" not present"#.into())
    );

    // Without a Linux part only the sysctl check is skipped.
    let mut req =
        request()
            .claim(Field::OciHooks, "00-a")
            .claim_key(Field::Sysctl, "net.a", "00-a");
    req.0.adjust.mut_or_insert_default().linux.clear();
    let only_sysctl = DefaultValidatorConfig {
        reject_sysctl_adjustment: true,
        ..Default::default()
    };
    assert_eq!(req.validate(&only_sysctl), Ok(()));
    assert!(req.validate(&reject_all()).is_err());
    let mut req = request();
    req.0.adjust.mut_or_insert_default().linux =
        MessageField::some(LinuxContainerAdjustment::new());
    assert_eq!(req.validate(&only_sysctl), Ok(()));
}

#[test]
fn empty_request_never_panics() {
    let mut cfg = reject_all();
    cfg.required_plugins = vec!["x".into()];
    cfg.tolerate_missing_annotation = TOLERATE.into();
    let empty = ValidateContainerAdjustmentRequest::new();
    assert_eq!(
        DefaultValidator::new(cfg.clone())
            .validate(&empty)
            .map_err(|e| e.to_string()),
        Err(r#"validation error: required plugin "x" not present"#.into())
    );
    // An adjustment without owners, pod or container: nothing is claimed.
    let mut req = ValidateContainerAdjustmentRequest::new();
    req.adjust = MessageField::some(ContainerAdjustment::new());
    cfg.required_plugins.clear();
    assert_eq!(DefaultValidator::new(cfg).validate(&req), Ok(()));
}

#[test]
fn set_config_replaces_the_configuration() {
    let mut v = DefaultValidator::default();
    assert_eq!(v.validate(&request().0), Ok(()));
    v.set_config(required(&["x"]));
    assert_eq!(v.config(), &required(&["x"]));
    assert!(v.validate(&request().0).is_err());
}

#[test]
fn constants() {
    assert_eq!(DEFAULT_VALIDATOR_NAME, "default-validator");
    assert_eq!(DEFAULT_VALIDATOR_INDEX, "00");
    assert_eq!(ANNOTATION_DOMAIN, "noderesource.dev");
    assert_eq!(
        REQUIRED_PLUGINS_ANNOTATION,
        "required-plugins.noderesource.dev"
    );
}

mod plugin_permissions;

mod config {
    use super::*;

    fn full() -> DefaultValidatorConfig {
        DefaultValidatorConfig {
            enable: true,
            reject_oci_hook_adjustment: true,
            reject_runtime_default_seccomp_adjustment: true,
            reject_unconfined_seccomp_adjustment: true,
            reject_custom_seccomp_adjustment: true,
            reject_namespace_adjustment: true,
            reject_sysctl_adjustment: true,
            required_plugins: vec!["a".into(), "10-b".into()],
            tolerate_missing_annotation: "tolerate".into(),
            plugin_permissions: Vec::new(),
        }
    }

    fn parse(yaml: &str) -> DefaultValidatorConfig {
        DefaultValidatorConfig::from_yaml(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"))
    }

    type Setter = fn(&mut DefaultValidatorConfig);

    /// (YAML key, TOML key, YAML value, the field it sets to that value)
    const KEYS: &[(&str, &str, &str, Setter)] = &[
        ("enable", "enable", "true", |c| c.enable = true),
        (
            "rejectOCIHookAdjustment",
            "reject_oci_hook_adjustment",
            "true",
            |c| c.reject_oci_hook_adjustment = true,
        ),
        (
            "rejectRuntimeDefaultSeccompAdjustment",
            "reject_runtime_default_seccomp_adjustment",
            "true",
            |c| c.reject_runtime_default_seccomp_adjustment = true,
        ),
        (
            "rejectUnconfinedSeccompAdjustment",
            "reject_unconfined_seccomp_adjustment",
            "true",
            |c| c.reject_unconfined_seccomp_adjustment = true,
        ),
        (
            "rejectCustomSeccompAdjustment",
            "reject_custom_seccomp_adjustment",
            "true",
            |c| c.reject_custom_seccomp_adjustment = true,
        ),
        (
            "rejectNamespaceAdjustment",
            "reject_namespace_adjustment",
            "true",
            |c| c.reject_namespace_adjustment = true,
        ),
        (
            "rejectSysctlAdjustment",
            "reject_sysctl_adjustment",
            "true",
            |c| c.reject_sysctl_adjustment = true,
        ),
        ("requiredPlugins", "required_plugins", "[a, 10-b]", |c| {
            c.required_plugins = vec!["a".into(), "10-b".into()]
        }),
        (
            "tolerateMissingPluginsAnnotation",
            "tolerate_missing_plugins_annotation",
            "tolerate",
            |c| c.tolerate_missing_annotation = "tolerate".into(),
        ),
    ];

    #[test]
    fn each_key_in_both_spellings() {
        for (yaml_key, toml_key, value, set) in KEYS {
            let mut want = DefaultValidatorConfig::default();
            set(&mut want);
            // The TOML spelling goes through YAML too: serde maps keys the
            // same way whatever the format.
            for key in [yaml_key, toml_key] {
                assert_eq!(parse(&format!("{key}: {value}")), want, "{key}");
            }
        }
    }

    #[test]
    fn whole_document_in_either_spelling() {
        for toml in [false, true] {
            let document: String = KEYS
                .iter()
                .map(|(yaml_key, toml_key, value, _)| {
                    let key = if toml { toml_key } else { yaml_key };
                    format!("{key}: {value}\n")
                })
                .collect();
            assert_eq!(parse(&document), full(), "{document}");
        }
    }

    #[test]
    fn missing_null_and_unknown_keys() {
        assert_eq!(parse("{}"), DefaultValidatorConfig::default());
        assert_eq!(
            parse("enable: true\nsomethingElse: 1"),
            DefaultValidatorConfig {
                enable: true,
                ..Default::default()
            }
        );
        let nulls = "
enable: ~
rejectSysctlAdjustment: null
requiredPlugins: ~
tolerateMissingPluginsAnnotation: ~
";
        assert_eq!(parse(nulls), DefaultValidatorConfig::default());
    }

    #[test]
    fn writes_yaml_keys() {
        // JSON is YAML: what we write reads back.
        let yaml = serde_json::to_string(&full()).unwrap();
        assert!(yaml.contains("\"rejectOCIHookAdjustment\":true"), "{yaml}");
        assert!(
            yaml.contains("\"tolerateMissingPluginsAnnotation\":\"tolerate\""),
            "{yaml}"
        );
        assert_eq!(parse(&yaml), full());
    }

    #[test]
    fn wrong_types_are_errors() {
        assert!(DefaultValidatorConfig::from_yaml("enable: maybe").is_err());
        // go-yaml would read these YAML 1.1 words as booleans; we refuse them
        // rather than read them differently.
        for word in ["yes", "no", "on", "off", "y", "n"] {
            let yaml = format!("rejectSysctlAdjustment: {word}");
            assert!(DefaultValidatorConfig::from_yaml(&yaml).is_err(), "{word}");
        }
        assert!(DefaultValidatorConfig::from_yaml("requiredPlugins: {a: b}").is_err());
    }

    #[test]
    fn wrong_types_name_the_key() {
        let err = DefaultValidatorConfig::from_yaml("enable: true\nrejectOCIHookAdjustment: yes")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid type: string "yes", expected a boolean, at rejectOCIHookAdjustment"#
        );
        let err = DefaultValidatorConfig::from_yaml("required_plugins: [a, [b]]").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid type: sequence, expected a string, at required_plugins[1]"
        );
    }

    #[test]
    fn unknown_keys_are_reported_and_ignored() {
        let mut unknown = Vec::new();
        let cfg = DefaultValidatorConfig::parse(
            "enable: true\nrejectOCIHookAdjustmnet: true\nrequiredPlugins: [a]\n",
            &mut |key| unknown.push(key),
        )
        .unwrap();
        assert_eq!(unknown, ["rejectOCIHookAdjustmnet"]);
        assert_eq!(
            cfg,
            DefaultValidatorConfig {
                enable: true,
                required_plugins: vec!["a".into()],
                ..Default::default()
            }
        );
    }
}

#[test]
fn pods_are_checked_with_their_pod_wide_annotations() {
    let plugin = |index: &str, name: &str| PluginInstance {
        index: index.into(),
        name: name.into(),
        ..Default::default()
    };
    let pod = |annotations: &[(&str, &str)]| PodSandbox {
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    let tolerating = DefaultValidatorConfig {
        tolerate_missing_annotation: "tolerate".into(),
        ..required(&["a"])
    };
    const REQ: &str = "required-plugins.noderesource.dev";
    // (case, config, pod annotations, active plugins, expected error)
    let missing_a = r#"validation error: required plugin "a" not present"#;
    let missing_b = r#"validation error: required plugin "b" not present"#;
    type Case<'a> = (
        &'a str,
        DefaultValidatorConfig,
        Vec<(&'a str, &'a str)>,
        Vec<PluginInstance>,
        Option<&'a str>,
    );
    let cases: Vec<Case> = vec![
        (
            "present",
            required(&["a"]),
            vec![],
            vec![plugin("10", "a")],
            None,
        ),
        (
            "absent",
            required(&["a"]),
            vec![],
            vec![plugin("10", "b")],
            Some(missing_a),
        ),
        (
            "by index and name",
            required(&["10-a"]),
            vec![],
            vec![plugin("10", "a")],
            None,
        ),
        (
            "annotated for the pod",
            required(&[]),
            vec![("required-plugins.noderesource.dev/pod", "[b]")],
            vec![],
            Some(missing_b),
        ),
        (
            "annotated bare",
            required(&[]),
            vec![(REQ, "[b]")],
            vec![],
            Some(missing_b),
        ),
        (
            "annotated for a container only",
            required(&[]),
            vec![("required-plugins.noderesource.dev/container.c", "[b]")],
            vec![],
            None,
        ),
        (
            "tolerated for the pod",
            tolerating.clone(),
            vec![("tolerate/pod", "true")],
            vec![],
            None,
        ),
        (
            "tolerated for a container only",
            tolerating.clone(),
            vec![("tolerate/container.c", "true")],
            vec![],
            Some(missing_a),
        ),
        (
            "not tolerated",
            tolerating,
            vec![("tolerate", "false")],
            vec![],
            Some(missing_a),
        ),
    ];
    for (case, cfg, annotations, plugins, want) in cases {
        let got = DefaultValidator::new(cfg)
            .check_pod_required_plugins(&pod(&annotations), &plugins)
            .map_err(|e| e.to_string());
        assert_eq!(
            got,
            want.map_or(Ok(()), |w| Err(w.to_string())),
            "case {case:?}"
        );
    }
}
