//! Looking up the pod annotations that drive the sample plugins.

use std::collections::HashMap;

use nri_stub::api::{Container, PodSandbox};

/// The value of the first of `keys` present in `annotations`. Empty keys
/// and keys starting with `/` (an empty prefix) are skipped.
pub fn lookup_annotation<'a, S: AsRef<str>>(
    annotations: &'a HashMap<String, String>,
    keys: &[S],
) -> Option<&'a str> {
    keys.iter()
        .map(AsRef::as_ref)
        .filter(|k| !k.is_empty() && !k.starts_with('/'))
        .find_map(|k| annotations.get(k))
        .map(String::as_str)
}

/// The candidate keys for annotation `key` (and its deprecated spelling
/// `old_key`, possibly empty) applying to container `ctr`, most specific
/// first: container-specific, then pod-wide (`/pod`), then the bare key;
/// at each level the current key before the deprecated one.
pub fn effective_keys(key: &str, old_key: &str, ctr: &str) -> Vec<String> {
    let mut keys = Vec::with_capacity(6);
    for suffix in [
        format!("/container.{ctr}"),
        "/pod".to_string(),
        String::new(),
    ] {
        for prefix in [key, old_key] {
            if !prefix.is_empty() {
                keys.push(format!("{prefix}{suffix}"));
            }
        }
    }
    keys
}

/// Annotations from `(key, value)` pairs (for tests and examples).
pub fn from_pairs(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `pod/container`, or the container's name alone without a pod, as the
/// Go samples name containers in their logs.
pub fn container_name(pod: Option<&PodSandbox>, ctr: &Container) -> String {
    match pod {
        Some(pod) => format!("{}/{}", pod.name, ctr.name),
        None => ctr.name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_specific_key_wins_and_new_prefix_before_old() {
        let keys = effective_keys("devices.noderesource.dev", "devices.nri.io", "c0");
        assert_eq!(
            keys,
            [
                "devices.noderesource.dev/container.c0",
                "devices.nri.io/container.c0",
                "devices.noderesource.dev/pod",
                "devices.nri.io/pod",
                "devices.noderesource.dev",
                "devices.nri.io",
            ]
        );
        let mut a = HashMap::new();
        a.insert("devices.nri.io".to_string(), "old".to_string());
        a.insert(
            "devices.noderesource.dev/pod".to_string(),
            "pod".to_string(),
        );
        assert_eq!(lookup_annotation(&a, &keys), Some("pod"));
        a.insert("devices.nri.io/container.c0".to_string(), "c0".to_string());
        assert_eq!(lookup_annotation(&a, &keys), Some("c0"));
        assert_eq!(effective_keys("sysctl.noderesource.dev", "", "c").len(), 3);
        assert_eq!(lookup_annotation(&a, &["", "/pod"]), None);
    }
}
