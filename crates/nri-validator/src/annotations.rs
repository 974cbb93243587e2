//! The NRI pod annotations the default validator reads, and how their
//! values are parsed (upstream `pkg/plugin/annotations.go` and the parsing
//! done in `plugins/default-validator`).
//!
//! Values are parsed the way upstream's Go code parses them, so that a pod
//! annotated for a Go runtime means the same thing to ours.

use nri_api::PodSandbox;

use nri_api::quote::go_quote;

/// Domain of the NRI-specific annotations.
pub const ANNOTATION_DOMAIN: &str = "noderesource.dev";

/// Annotation listing extra plugins a pod's containers require, as a YAML
/// list of plugin names (`name` or `idx-name`).
pub const REQUIRED_PLUGINS_ANNOTATION: &str = "required-plugins.noderesource.dev";

/// The value of the annotation `key` that applies to the container
/// `container_name` of `pod`.
///
/// Only pod annotations are consulted (container annotations are the
/// container's own business and could be set by plugins). The most specific
/// key wins:
/// 1. `<key>/container.<container_name>`
/// 2. `<key>/pod`
/// 3. `<key>`
pub fn effective_annotation<'a>(
    pod: &'a PodSandbox,
    key: &str,
    container_name: &str,
) -> Option<&'a str> {
    if pod.annotations.is_empty() {
        return None;
    }
    [
        format!("{key}/container.{container_name}"),
        format!("{key}/pod"),
        key.to_string(),
    ]
    .iter()
    .find_map(|k| pod.annotations.get(k))
    .map(String::as_str)
}

/// Parses `value` like Go's `strconv.ParseBool`; the error is Go's text,
/// which upstream embeds in its rejection reason.
pub(crate) fn parse_go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!(
            "strconv.ParseBool: parsing {}: invalid syntax",
            go_quote(value)
        )),
    }
}

/// Parses a required-plugins annotation value as a YAML list of strings,
/// the way upstream's `yaml.Unmarshal` into a `[]string` does:
/// * block (`- a`) and flow (`[ a ]`, `["a","b"]`) sequences both work;
/// * an empty or null document is an empty list;
/// * only the first document counts;
/// * null items are dropped, other scalars keep their text (`[1]` is
///   `"1"`).
///
/// The error is our YAML reader's text (with the index of a bad item),
/// which differs from go-yaml's; the caller names the annotation. The
/// work is linear in the value's length, aliases included (see
/// [`nri_yaml::parse`]).
pub(crate) fn parse_plugin_list(value: &str) -> Result<Vec<String>, String> {
    let Some(document) = nri_yaml::parse(value).map_err(|e| e.to_string())? else {
        return Ok(Vec::new());
    };
    let items: Option<Vec<Option<String>>> =
        nri_yaml::decode(nri_yaml::NodeDe(&document), &mut |_| {}).map_err(|e| e.to_string())?;
    Ok(items.into_iter().flatten().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(annotations: &[(&str, &str)]) -> PodSandbox {
        let mut pod = PodSandbox::new();
        pod.annotations = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        pod
    }

    #[test]
    fn required_plugins_key_is_in_the_domain() {
        assert_eq!(
            REQUIRED_PLUGINS_ANNOTATION,
            format!("required-plugins.{ANNOTATION_DOMAIN}")
        );
    }

    #[test]
    fn effective_annotation_precedence() {
        const CTR: &str = "k/container.c";
        const POD: &str = "k/pod";
        const BARE: &str = "k";
        // (pod annotations, value for key "k" and container "c")
        type Annotations = &'static [(&'static str, &'static str)];
        let cases: &[(Annotations, Option<&str>)] = &[
            (&[], None),
            (&[(BARE, "bare")], Some("bare")),
            (&[(POD, "pod")], Some("pod")),
            (&[(CTR, "ctr")], Some("ctr")),
            (&[(BARE, "bare"), (POD, "pod")], Some("pod")),
            (&[(BARE, "bare"), (CTR, "ctr")], Some("ctr")),
            (&[(POD, "pod"), (CTR, "ctr")], Some("ctr")),
            (&[(BARE, "bare"), (POD, "pod"), (CTR, "ctr")], Some("ctr")),
            // Another container's annotation does not apply.
            (&[("k/container.other", "other")], None),
            (
                &[("k/container.other", "other"), (BARE, "bare")],
                Some("bare"),
            ),
            // Other keys do not apply, even as prefixes.
            (
                &[("kk", "x"), ("k/podx", "x"), ("k/container.cc", "x")],
                None,
            ),
            // An empty value is still a value.
            (&[(CTR, ""), (BARE, "bare")], Some("")),
        ];
        for (annotations, want) in cases {
            assert_eq!(
                effective_annotation(&pod(annotations), "k", "c"),
                *want,
                "{annotations:?}"
            );
        }
    }

    #[test]
    fn effective_annotation_with_empty_container_name() {
        let p = pod(&[("k/container.", "unnamed")]);
        assert_eq!(effective_annotation(&p, "k", ""), Some("unnamed"));
    }

    #[test]
    fn go_bool_values() {
        for v in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(v), Ok(true), "{v}");
        }
        for v in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(v), Ok(false), "{v}");
        }
        for v in [
            "", "yes", "no", "tRUE", "TRue", " true", "true ", "2", "on", "y",
        ] {
            assert_eq!(
                parse_go_bool(v),
                Err(format!(
                    "strconv.ParseBool: parsing {}: invalid syntax",
                    go_quote(v)
                )),
                "{v:?}"
            );
        }
        assert_eq!(
            parse_go_bool("yes").unwrap_err(),
            r#"strconv.ParseBool: parsing "yes": invalid syntax"#
        );
    }

    #[test]
    fn plugin_lists() {
        let cases: &[(&str, &[&str])] = &[
            ("[ plugin ]", &["plugin"]),
            ("[ a ]", &["a"]),
            (r#"["a","b"]"#, &["a", "b"]),
            ("[a, 10-b]", &["a", "10-b"]),
            ("- a\n- b\n", &["a", "b"]),
            ("[]", &[]),
            ("", &[]),
            ("   ", &[]),
            ("# only a comment", &[]),
            ("~", &[]),
            ("null", &[]),
            ("---\n", &[]),
            // go-yaml keeps a scalar's text when decoding into a string...
            ("[1, true, 1.50, 0x10]", &["1", "true", "1.50", "0x10"]),
            // ...and drops null items.
            (r#"[a, ~, null, "null", '~']"#, &["a", "null", "~"]),
            // Only the first document is read.
            ("[a]\n---\n[b]", &["a"]),
        ];
        for (value, want) in cases {
            assert_eq!(
                parse_plugin_list(value),
                Ok(want.iter().map(|w| w.to_string()).collect()),
                "{value:?}"
            );
        }
    }

    #[test]
    fn invalid_plugin_lists() {
        for value in [
            "plugin",
            "[a",
            "{a: b}",
            "a: b",
            "[[a]]",
            "[a, {b: c}]",
            "\t[a]",
        ] {
            assert!(parse_plugin_list(value).is_err(), "{value:?}");
        }
    }

    #[test]
    fn bad_items_are_named_by_index() {
        assert_eq!(
            parse_plugin_list("[a, {b: c}]").unwrap_err(),
            "invalid type: map, expected a string, at [1]"
        );
    }

    #[test]
    fn hostile_values_are_refused_quickly() {
        use std::time::{Duration, Instant};
        // Billion laughs, nesting a million deep, and a large flat list.
        let mut laughs = String::from("- &a0 lol\n");
        for i in 1..12 {
            let prev = format!("*a{}", i - 1);
            laughs.push_str(&format!("- &a{i} [{}]\n", [prev.as_str(); 10].join(", ")));
        }
        let deep = "[".repeat(1 << 20);
        let flat = format!("[{}]", vec!["p"; 1 << 18].join(", "));
        for (value, refused) in [(&laughs, true), (&deep, true), (&flat, false)] {
            let start = Instant::now();
            let result = parse_plugin_list(value);
            assert_eq!(result.is_err(), refused, "{}", &value[..40]);
            assert!(start.elapsed() < Duration::from_secs(5), "{}", &value[..40]);
        }
    }
}
