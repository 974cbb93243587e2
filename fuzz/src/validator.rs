//! The default validator (`nri-validator`): its checks of a merged
//! adjustment, the pod annotations it parses (a Go boolean and a YAML list
//! of plugins), and its YAML configuration decoder.

use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use protobuf::{Message, MessageField};

use nri_api::{PluginInstance, ValidateContainerAdjustmentRequest};
use nri_runtime::fuzzing::CreateResult;
use nri_validator::{
    DefaultValidator, DefaultValidatorConfig, PermissionKind, PluginPermissions, ANY_PLUGIN,
    REQUIRED_PLUGINS_ANNOTATION,
};
use nri_yaml as yaml;

use crate::merge::{plugin_name, Reply};

/// Which annotation key a pod sets: the ones the validator reads, in each
/// of their scopes, or another.
#[derive(Arbitrary, Debug)]
enum AnnotationKey {
    Required,
    RequiredPod,
    RequiredContainer,
    Tolerate,
    ToleratePod,
    TolerateContainer,
    Other(String),
}

const TOLERATE: &str = "tolerate-missing.example.com";
const CONTAINER: &str = "ctr";

impl AnnotationKey {
    fn key(&self) -> String {
        let (base, scope) = match self {
            AnnotationKey::Required => (REQUIRED_PLUGINS_ANNOTATION, ""),
            AnnotationKey::RequiredPod => (REQUIRED_PLUGINS_ANNOTATION, "/pod"),
            AnnotationKey::RequiredContainer => (REQUIRED_PLUGINS_ANNOTATION, "/container.ctr"),
            AnnotationKey::Tolerate => (TOLERATE, ""),
            AnnotationKey::TolerateContainer => (TOLERATE, "/container.ctr"),
            AnnotationKey::ToleratePod => (TOLERATE, "/pod"),
            AnnotationKey::Other(k) => return k.clone(),
        };
        format!("{base}{scope}")
    }
}

#[derive(Arbitrary, Debug)]
struct Case {
    /// Bit i: the i-th `reject*` switch; bit 6: tolerate annotation set.
    switches: u8,
    required: Vec<u8>,
    annotations: Vec<(AnnotationKey, String)>,
    /// Decoded as the request the merge then completes.
    base: Vec<u8>,
    replies: Vec<Reply>,
    /// Per-plugin permissions: the plugin (255: any), a bit per kind of
    /// `PermissionKind::ALL`, and the mount sources (absolute ones kept,
    /// as the configuration decoder allows only those).
    permissions: Vec<(u8, u16, Option<Vec<String>>)>,
}

/// Input: bytes `arbitrary` turns into a configuration, pod annotations
/// and plugin replies; the replies are merged as for CreateContainer and
/// the validator checks the result, as the runtime has it do. No panic.
pub fn validator(data: &[u8]) {
    let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let bit = |i: u8| case.switches & (1 << i) != 0;
    let cfg = DefaultValidatorConfig {
        enable: true,
        reject_oci_hook_adjustment: bit(0),
        reject_runtime_default_seccomp_adjustment: bit(1),
        reject_unconfined_seccomp_adjustment: bit(2),
        reject_custom_seccomp_adjustment: bit(3),
        reject_namespace_adjustment: bit(4),
        reject_sysctl_adjustment: bit(5),
        required_plugins: case.required.iter().map(|&i| plugin_short(i)).collect(),
        tolerate_missing_annotation: if bit(6) {
            TOLERATE.into()
        } else {
            String::new()
        },
        plugin_permissions: case
            .permissions
            .iter()
            .map(|(plugin, kinds, sources)| PluginPermissions {
                plugins: vec![match plugin {
                    255 => ANY_PLUGIN.to_string(),
                    i => plugin_name(*i as usize),
                }],
                allow: PermissionKind::ALL
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| kinds & (1 << i) != 0)
                    .map(|(_, kind)| kind)
                    .collect(),
                mount_sources: sources.as_ref().map(|s| {
                    s.iter()
                        .filter(|p| p.starts_with('/') && !p.contains(".."))
                        .cloned()
                        .collect()
                }),
            })
            .collect(),
    };

    let mut req =
        ValidateContainerAdjustmentRequest::parse_from_bytes(&case.base).unwrap_or_default();
    let pod = req.pod.mut_or_insert_default();
    for (k, v) in &case.annotations {
        pod.annotations.insert(k.key(), v.clone());
    }
    let container = req.container.get_or_default().clone();
    let mut create = nri_api::CreateContainerRequest {
        pod: req.pod.clone(),
        container: MessageField::some(container),
        ..Default::default()
    };
    create.container.mut_or_insert_default().name = CONTAINER.into();
    let mut result = CreateResult::new(&mut create);
    for (i, r) in case.replies.iter().enumerate() {
        if result
            .apply(&mut create, &plugin_name(i), r.create())
            .is_err()
        {
            break;
        }
        let (index, name) = plugin_name(i)
            .split_once('-')
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .unwrap();
        req.plugins.push(PluginInstance {
            name,
            index,
            ..Default::default()
        });
    }
    req.container = create.container.clone();
    req.owners = MessageField::some(result.owners().clone());
    let rsp = result.into_response();
    req.adjust = rsp.adjust;
    req.update = rsp.update;

    let v = DefaultValidator::new(cfg);
    if let Err(e) = v.validate(&req) {
        // Every error renders (the runtime sends its text back).
        let _ = (e.to_string(), e.is_violation());
    }
}

fn plugin_short(i: u8) -> String {
    match i % 3 {
        0 => format!("plugin{}", i % 5),
        _ => plugin_name((i % 5) as usize),
    }
}

/// Input: text. The validator's configuration decoder and the annotation
/// list parser must not panic, must take time linear in the text (checked
/// loosely: a second plus a millisecond per byte), and a configuration
/// they accept must come back the same from its own JSON form.
pub fn validator_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let start = Instant::now();
    if let Ok(cfg) = DefaultValidatorConfig::from_yaml(text) {
        let json = serde_json::to_string(&cfg).expect("a configuration as JSON");
        let back = DefaultValidatorConfig::from_yaml(&json).expect("reading our own JSON");
        assert_eq!(back, cfg, "the configuration changed through JSON");
    }
    // The required-plugins annotation's parse, as the validator does it.
    if let Ok(Some(doc)) = yaml::parse(text) {
        let _: Result<Option<Vec<Option<String>>>, _> =
            yaml::decode(yaml::NodeDe(&doc), &mut |_| {});
    }
    let took = start.elapsed();
    let bound = Duration::from_secs(1) + Duration::from_millis(data.len() as u64);
    assert!(took <= bound, "{} bytes of YAML took {took:?}", data.len());
}
