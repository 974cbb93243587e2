//! Per-plugin permissions: who may change what, mount sources, the
//! configuration and that configurations without permissions are
//! unaffected.

use protobuf::{Enum, EnumFull};

use super::*;
use crate::permissions::PermissionKind as K;
use nri_api::Mount;

/// A validator configuration from YAML; tests read better in the
/// operator's notation than as struct literals.
fn cfg(yaml: &str) -> DefaultValidatorConfig {
    DefaultValidatorConfig::from_yaml(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"))
}

fn parse_err(yaml: &str) -> String {
    match DefaultValidatorConfig::from_yaml(yaml) {
        Ok(c) => panic!("{yaml}: parsed as {c:?}"),
        Err(e) => e.to_string(),
    }
}

impl Request {
    /// Adds a mount to the merged adjustment and records `owner` for its
    /// destination, as the runtime does.
    fn mount(self, destination: &str, source: &str, owner: &str) -> Self {
        self.claim_key(Field::Mounts, destination, owner)
            .mount_only(destination, source)
    }

    fn mount_only(mut self, destination: &str, source: &str) -> Self {
        let mut m = Mount::new();
        m.destination = destination.into();
        m.source = source.into();
        m.type_ = if source.starts_with('/') {
            "bind"
        } else {
            source
        }
        .into();
        self.0.adjust.mut_or_insert_default().mounts.push(m);
        self
    }
}

const ANNOTATIONS_ONLY: &str = "
pluginPermissions:
  - plugins: [10-a]
    allow: [annotations]
";

#[test]
fn a_plugin_may_make_only_the_kinds_it_is_allowed() {
    let c = cfg(ANNOTATIONS_ONLY);
    let allowed = || request().claim_key(Field::Annotations, "team", "10-a");
    assert_eq!(allowed().validate(&c), Ok(()));
    assert_eq!(
        allowed().claim_key(Field::Env, "FOO", "10-a").validate(&c),
        Err(r#"validation error: plugin "10-a" not permitted to adjust env: Env "FOO""#.into())
    );
    assert_eq!(
        request().claim(Field::MemLimit, "10-a").validate(&c),
        Err(
            r#"validation error: plugin "10-a" not permitted to adjust resources: MemLimit"#.into()
        )
    );
}

#[test]
fn the_star_entry_covers_plugins_without_one() {
    let c = cfg("
pluginPermissions:
  - plugins: [10-a]
    allow: [env]
  - plugins: ['*']
    allow: [annotations]
");
    assert_eq!(
        request()
            .claim_key(Field::Annotations, "x", "20-b")
            .validate(&c),
        Ok(())
    );
    assert_eq!(
        request().claim_key(Field::Env, "X", "20-b").validate(&c),
        Err(r#"validation error: plugin "20-b" not permitted to adjust env: Env "X""#.into())
    );
    // A plugin with an entry of its own gets only that entry, not `*` too.
    assert_eq!(
        request()
            .claim_key(Field::Annotations, "x", "10-a")
            .validate(&c),
        Err(
            r#"validation error: plugin "10-a" not permitted to adjust annotations: Annotations "x""#
                .into()
        )
    );
}

#[test]
fn idx_name_beats_bare_name_beats_star() {
    let c = cfg("
pluginPermissions:
  - plugins: ['*']
    allow: [env]
  - plugins: [hooks]
    allow: [annotations]
  - plugins: [10-hooks]
    allow: [ociHooks]
");
    let hooks = |owner: &str| request().claim(Field::OciHooks, owner);
    let note = |owner: &str| request().claim_key(Field::Annotations, "n", owner);
    let env = |owner: &str| request().claim_key(Field::Env, "E", owner);
    // 10-hooks is listed by full name, later than its bare name.
    assert_eq!(hooks("10-hooks").validate(&c), Ok(()));
    assert!(note("10-hooks").validate(&c).is_err());
    // Another instance is listed only by its bare name.
    assert!(hooks("20-hooks").validate(&c).is_err());
    assert_eq!(note("20-hooks").validate(&c), Ok(()));
    // Anyone else falls to `*`.
    assert_eq!(env("30-other").validate(&c), Ok(()));
    assert!(env("20-hooks").validate(&c).is_err());
}

#[test]
fn bare_names_come_from_the_plugins_taking_part() {
    let c = cfg("
pluginPermissions:
  - plugins: [x-y]
    allow: [env]
");
    // Split at its first `-`, `1-x-y` would be `x-y`; the runtime says the
    // plugin is `x-y`, index `1`, too, and a request naming it so agrees.
    let req = || request().claim_key(Field::Env, "E", "1-x-y");
    assert_eq!(req().validate(&c), Ok(()));
    assert_eq!(req().plugin("1", "x-y").validate(&c), Ok(()));
    // With an index of its own that has a `-`, only the list tells.
    let c = cfg("
pluginPermissions:
  - plugins: [y]
    allow: [env]
");
    assert!(req().validate(&c).is_err(), "split guesses `x-y`");
    assert_eq!(req().plugin("1-x", "y").validate(&c), Ok(()));
}

#[test]
fn a_plugin_without_an_entry_may_change_nothing() {
    let c = cfg(ANNOTATIONS_ONLY);
    assert_eq!(
        request()
            .claim_key(Field::Annotations, "team", "20-b")
            .validate(&c),
        Err(
            r#"validation error: plugin "20-b" not permitted to adjust annotations: Annotations "team""#
                .into()
        )
    );
    // Untouched containers pass whatever the entries say.
    assert_eq!(request().validate(&c), Ok(()));
}

#[test]
fn clear_markers_count_as_the_clearing_plugins_change() {
    let c = cfg(ANNOTATIONS_ONLY);
    assert_eq!(
        request().claim_key(Field::Env, "E", "-10-a").validate(&c),
        Err(r#"validation error: plugin "10-a" not permitted to adjust env: Env "E""#.into())
    );
    assert_eq!(
        request().claim(Field::Args, "-10-a").validate(&c),
        Err(r#"validation error: plugin "10-a" not permitted to adjust args: Args"#.into())
    );
    assert_eq!(
        request()
            .claim_key(Field::Annotations, "x", "-10-a")
            .validate(&c),
        Ok(())
    );
}

#[test]
fn each_plugin_in_the_hooks_owner_list_is_checked() {
    let c = cfg("
pluginPermissions:
  - plugins: [10-a, 30-c]
    allow: [ociHooks]
");
    assert_eq!(
        request().claim(Field::OciHooks, "10-a,30-c").validate(&c),
        Ok(())
    );
    assert_eq!(
        request()
            .claim(Field::OciHooks, "10-a,20-b,30-c")
            .validate(&c),
        Err(r#"validation error: plugin "20-b" not permitted to adjust ociHooks: OciHooks"#.into())
    );
}

#[test]
fn updates_to_other_containers_need_resources() {
    let c = cfg(ANNOTATIONS_ONLY);
    let req = || request().claim_for("other", Field::CPUShares, "10-a");
    assert_eq!(
        req().validate(&c),
        Err(
            r#"validation error: plugin "10-a" not permitted to adjust resources: CPUShares of container "other""#
                .into()
        )
    );
    let c = cfg("
pluginPermissions:
  - plugins: [10-a]
    allow: [resources]
");
    assert_eq!(req().validate(&c), Ok(()));
    assert_eq!(
        req()
            .claim_key_for("other", Field::HugepageLimits, "2MB", "10-a")
            .validate(&c),
        Ok(())
    );
}

#[test]
fn fields_unknown_to_this_version_are_denied() {
    let everything = format!(
        "pluginPermissions:\n  - plugins: ['*']\n    allow: [{}]\n",
        PermissionKind::ALL.map(|k| k.name()).join(", ")
    );
    let c = cfg(&everything);
    let mut req = request();
    req.field_owners(CTR_ID).simple.insert(999, "10-a".into());
    assert_eq!(
        req.validate(&c),
        Err(
            "validation error: plugin \"10-a\" not permitted to adjust field 999, unknown to this validator"
                .into()
        )
    );
    // Nor may anyone claim the placeholder value.
    assert!(request().claim(Field::None, "10-a").validate(&c).is_err());
    // Without permissions nothing changes: upstream ignores such fields.
    assert_eq!(req.validate(&DefaultValidatorConfig::default()), Ok(()));
}

#[test]
fn the_first_refusal_is_deterministic_and_the_rest_are_counted() {
    let c = cfg(ANNOTATIONS_ONLY);
    // "a-other" sorts before CTR_ID, but the validated container comes first.
    let req = request()
        .claim_for("a-other", Field::MemLimit, "10-a")
        .claim_key(Field::Env, "B", "10-a")
        .claim_key(Field::Env, "A", "20-b")
        .claim(Field::Args, "20-b")
        .claim_key(Field::Annotations, "ok", "10-a");
    assert_eq!(
        req.validate(&c),
        Err(
            r#"validation error: plugin "20-b" not permitted to adjust env: Env "A", and 3 more not permitted"#
                .into()
        )
    );
    let err = DefaultValidator::new(c).validate(&req.0).unwrap_err();
    let ValidationError::Rejected(Violation::NotPermitted {
        plugin,
        container,
        field,
        kind,
        key,
        more,
    }) = err
    else {
        panic!("{err:?}");
    };
    assert_eq!(
        (
            plugin.as_str(),
            container,
            field,
            kind,
            key.as_deref(),
            more
        ),
        ("20-b", None, Field::Env as i32, Some(K::Env), Some("A"), 3)
    );
}

#[test]
fn upstreams_checks_report_first() {
    let c = DefaultValidatorConfig {
        reject_oci_hook_adjustment: true,
        ..cfg(ANNOTATIONS_ONLY)
    };
    assert_eq!(
        request()
            .claim(Field::OciHooks, "20-b")
            .claim_key(Field::Env, "E", "20-b")
            .validate(&c),
        Err(r#"validation error: plugin "20-b" attempted restricted OCI hook injection"#.into())
    );
    // Sysctl is upstream's last check; permissions come after it.
    let c = DefaultValidatorConfig {
        reject_sysctl_adjustment: true,
        ..cfg(ANNOTATIONS_ONLY)
    };
    assert_eq!(
        request()
            .sysctl("net.x", "1")
            .claim_key(Field::Sysctl, "net.x", "20-b")
            .validate(&c),
        Err("validation error: attempted restricted sysctl adjustment by plugin(s) 20-b".into())
    );
    // Both must agree: allowed by permissions, still refused globally.
    let c = DefaultValidatorConfig {
        reject_sysctl_adjustment: true,
        ..cfg("
pluginPermissions:
  - plugins: ['*']
    allow: [sysctls]
")
    };
    assert_eq!(
        request()
            .sysctl("net.x", "1")
            .claim_key(Field::Sysctl, "net.x", "10-a")
            .validate(&c),
        Err("validation error: attempted restricted sysctl adjustment by plugin(s) 10-a".into())
    );
}

#[test]
fn without_permissions_every_plugin_may_change_everything() {
    let req = || {
        request()
            .claim_for("other", Field::MemLimit, "10-a")
            .claim(Field::OciHooks, "10-a,20-b")
            .claim_key(Field::Env, "E", "-30-c")
            .mount("/x", "/etc", "40-d")
    };
    assert_eq!(req().validate(&DefaultValidatorConfig::default()), Ok(()));
    assert_eq!(req().validate(&cfg("pluginPermissions: []")), Ok(()));
    assert_eq!(req().validate(&cfg("pluginPermissions: ~")), Ok(()));
}

mod mount_sources {
    use super::*;

    const HOOKS: &str = "
pluginPermissions:
  - plugins: [10-a]
    allow: [mounts]
    mountSources: [/opt/hooks, /var/lib/x/]
";

    fn check(source: &str) -> Result<(), String> {
        request()
            .mount("/dst", source, "10-a")
            .validate(&cfg(HOOKS))
    }

    fn refused(source: &str) -> String {
        format!(
            "validation error: plugin \"10-a\" not permitted to mount {} at \"/dst\": source outside its mountSources",
            go_quote(source)
        )
    }

    #[test]
    fn at_or_below_a_listed_path() {
        for source in [
            "/opt/hooks",
            "/opt/hooks/",
            "/opt/hooks/bin/hook",
            "/opt//hooks/./bin",
            "/opt/hooks/a/../b",
            "/var/lib/x",
            "/var/lib/x/y",
        ] {
            assert_eq!(check(source), Ok(()), "{source}");
        }
    }

    #[test]
    fn elsewhere_is_refused() {
        for source in [
            "/opt/hooks2",
            "/opt/hook",
            "/opt",
            "/",
            "/etc",
            "/opt/hooks/../../etc",
            "/opt/hooks/..",
            "/var/lib/xy",
            // Climbing above / is refused, not clamped to /.
            "/../opt/hooks",
        ] {
            assert_eq!(check(source), Err(refused(source)), "{source}");
        }
    }

    #[test]
    fn other_sources_and_removals_need_only_the_mounts_kind() {
        let c = cfg(HOOKS);
        assert_eq!(
            request()
                .mount("/tmp", "tmpfs", "10-a")
                .mount("/proc", "proc", "10-a")
                .mount("/rel", "relative/path", "10-a")
                .validate(&c),
            Ok(())
        );
        let removal = request()
            .claim_key(Field::Mounts, "/gone", "-10-a")
            .mount_only("-/gone", "");
        assert_eq!(removal.validate(&c), Ok(()));
        assert_eq!(
            request().mount("/tmp", "tmpfs", "20-b").validate(&c),
            Err(
                r#"validation error: plugin "20-b" not permitted to adjust mounts: Mounts "/tmp""#
                    .into()
            )
        );
    }

    #[test]
    fn a_cleared_then_readded_mount_is_the_clearers() {
        // A hand-built request may leave the marker on a mount that is
        // there; the clearer is still the one to check.
        let req = request()
            .claim_key(Field::Mounts, "/dst", "-10-a")
            .mount_only("/dst", "/etc");
        assert_eq!(req.validate(&cfg(HOOKS)), Err(refused("/etc")));
    }

    #[test]
    fn without_mount_sources_any_source_is_allowed() {
        let c = cfg("
pluginPermissions:
  - plugins: [10-a]
    allow: [mounts]
");
        assert_eq!(request().mount("/dst", "/etc", "10-a").validate(&c), Ok(()));
        // An empty list is given: no host path at all.
        let c = cfg("
pluginPermissions:
  - plugins: [10-a]
    allow: [mounts]
    mountSources: []
");
        assert_eq!(
            request().mount("/dst", "/etc", "10-a").validate(&c),
            Err(refused("/etc"))
        );
        assert_eq!(
            request().mount("/dst", "tmpfs", "10-a").validate(&c),
            Ok(())
        );
    }

    #[test]
    fn the_first_refused_mount_in_adjustment_order() {
        let req = request()
            .mount("/dst", "/etc", "10-a")
            .mount("/a", "/root", "10-a")
            .mount("/ok", "/opt/hooks/ok", "10-a");
        assert_eq!(
            req.validate(&cfg(HOOKS)),
            Err(format!("{}, and 1 more not permitted", refused("/etc")))
        );
    }

    #[test]
    fn kinds_are_checked_before_sources() {
        let req = request()
            .mount("/dst", "/etc", "10-a")
            .claim_key(Field::Env, "E", "10-a");
        assert_eq!(
            req.validate(&cfg(HOOKS)),
            Err(r#"validation error: plugin "10-a" not permitted to adjust env: Env "E""#.into())
        );
    }
}

mod config {
    use super::*;

    fn entry(plugins: &[&str], allow: &[K], mount_sources: Option<&[&str]>) -> PluginPermissions {
        PluginPermissions {
            plugins: plugins.iter().map(|p| p.to_string()).collect(),
            allow: allow.to_vec(),
            mount_sources: mount_sources.map(|s| s.iter().map(|p| p.to_string()).collect()),
        }
    }

    fn example() -> DefaultValidatorConfig {
        DefaultValidatorConfig {
            enable: true,
            plugin_permissions: vec![
                entry(
                    &["10-hooks", "hook-injector"],
                    &[K::OciHooks, K::Mounts],
                    Some(&["/opt/hooks", "/var/lib/x"]),
                ),
                entry(&["*"], &[K::Resources, K::Annotations, K::Env], None),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn yaml_and_toml_spellings() {
        let yaml = "
enable: true
rejectOCIHookAdjustment: false
pluginPermissions:
  - plugins: [10-hooks, hook-injector]
    allow: [ociHooks, mounts]
    mountSources: [/opt/hooks, /var/lib/x]
  - plugins: ['*']
    allow: [resources, annotations, env]
";
        assert_eq!(cfg(yaml), example());
        let toml_keys = yaml
            .replace("pluginPermissions", "plugin_permissions")
            .replace("mountSources", "mount_sources");
        assert_eq!(cfg(&toml_keys), example());
    }

    #[test]
    fn round_trips_and_is_written_only_when_set() {
        let written = serde_json::to_string(&example()).unwrap();
        assert!(written.contains(r#""pluginPermissions":[{"plugins":["10-hooks","hook-injector"],"allow":["ociHooks","mounts"],"mountSources":["/opt/hooks","/var/lib/x"]},{"plugins":["*"],"allow":["resources","annotations","env"]}]"#), "{written}");
        assert_eq!(cfg(&written), example());

        let upstream = DefaultValidatorConfig {
            enable: true,
            reject_oci_hook_adjustment: true,
            ..Default::default()
        };
        let written = serde_json::to_string(&upstream).unwrap();
        assert!(!written.contains("ermissions"), "{written}");
        assert_eq!(cfg(&written), upstream);
    }

    #[test]
    fn unknown_kinds_are_errors() {
        assert_eq!(
            parse_err("pluginPermissions: [{plugins: [a], allow: [env, ocihooks]}]"),
            "unknown permission kind \"ocihooks\"; known kinds: annotations, mounts, ociHooks, \
             devices, env, args, resources, cgroupsPath, oomScoreAdj, rlimits, ioPriority, \
             seccomp, namespaces, sysctls, netDevices, scheduler, at pluginPermissions[0].allow[1]"
        );
        assert!(parse_err("pluginPermissions: [{plugins: [a], allow: [1]}]")
            .starts_with("unknown permission kind \"1\""));
    }

    #[test]
    fn mount_sources_must_be_absolute() {
        for (root, why) in [
            ("opt/hooks", "is not an absolute path"),
            ("''", "is not an absolute path"),
            ("./x", "is not an absolute path"),
            ("/../x", "climbs above /"),
        ] {
            let yaml = format!(
                "pluginPermissions: [{{plugins: [a], allow: [mounts], mountSources: [/ok, {root}]}}]"
            );
            let shown = root.trim_matches('\'');
            assert_eq!(
                parse_err(&yaml),
                format!("mount source \"{shown}\" {why}, at pluginPermissions[0].mountSources"),
                "{root}"
            );
        }
    }

    #[test]
    fn entries_are_strict() {
        assert!(
            parse_err("pluginPermissions: [{plugins: [a], alow: [env]}]")
                .contains("unknown field `alow`"),
        );
        assert!(parse_err("pluginPermissions: [{plugins: [a]}]").contains("missing field `allow`"));
        assert!(
            parse_err("pluginPermissions: [{allow: [env]}]").contains("missing field `plugins`")
        );
    }

    #[test]
    fn kind_names_parse_back() {
        for kind in PermissionKind::ALL {
            assert_eq!(kind.name().parse::<PermissionKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
        }
        assert!("OciHooks".parse::<PermissionKind>().is_err());
    }
}

/// Walks the proto's own list of values, so that a field the generated
/// enum gains is noticed here even if the match in `permission_kind` were
/// ever given a catch-all.
#[test]
fn every_field_has_exactly_one_kind() {
    let mut seen = Vec::new();
    for value in Field::enum_descriptor().values() {
        let field = Field::from_i32(value.value())
            .unwrap_or_else(|| panic!("{} has no Rust value", value.name()));
        match permission_kind(field) {
            Some(kind) => seen.push((value.name().to_string(), kind)),
            None => assert_eq!(field, Field::None, "{} has no kind", value.name()),
        }
    }
    assert_eq!(
        seen.len(),
        40,
        "a field was added: give it a kind and document it"
    );
    // Every kind is reachable from some field: none is a dead name.
    for kind in PermissionKind::ALL {
        assert!(
            seen.iter().any(|(_, k)| *k == kind),
            "{kind} covers no field"
        );
    }
    let devices: Vec<&str> = seen
        .iter()
        .filter(|(_, k)| *k == K::Devices)
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(devices, ["Devices", "CdiDevices"]);
}

#[test]
fn an_empty_request_passes_with_permissions_on() {
    let v = DefaultValidator::new(cfg(ANNOTATIONS_ONLY));
    assert_eq!(
        v.validate(&ValidateContainerAdjustmentRequest::new()),
        Ok(())
    );
}
