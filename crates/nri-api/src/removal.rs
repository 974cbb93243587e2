//! Removal markers.
//!
//! An adjustment removes an annotation, mount, environment variable,
//! device, namespace, sysctl or network device by naming its key with a
//! leading `-`. Removing before setting is also how a plugin claims a key
//! another plugin already set without a conflict.

/// The key with a removal marker.
pub fn mark_for_removal(key: &str) -> String {
    format!("-{key}")
}

/// `Some(key)` without its marker if `key` is marked for removal.
pub fn marked_for_removal(key: &str) -> Option<&str> {
    key.strip_prefix('-')
}

/// The key with any removal marker taken off.
pub fn clear_removal_marker(key: &str) -> &str {
    marked_for_removal(key).unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        assert_eq!(mark_for_removal("a"), "-a");
        assert_eq!(marked_for_removal("-a"), Some("a"));
        assert_eq!(marked_for_removal("a"), None);
        assert_eq!(marked_for_removal(""), None);
        assert_eq!(clear_removal_marker("-a"), "a");
        assert_eq!(clear_removal_marker("a"), "a");
    }
}
