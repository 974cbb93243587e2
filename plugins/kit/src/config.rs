//! Plugin configuration updated from YAML the way decoding YAML into an
//! existing Go struct updates it: keys the text sets replace the values,
//! the others stay.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::goyaml;

/// `base` with the keys set in the YAML `text` replaced. `canonical` maps
/// a key as written to the key `T` serializes (for alternative spellings;
/// `str::to_string` when there are none). An empty or `null` text changes
/// nothing; text that is not a mapping is an error. Decoding follows Go:
/// `null` is the zero value, keys match case-insensitively.
///
/// An error ends with the key path (`invalid type: ..., at events`); a key
/// `T` does not know is logged as a warning and ignored, as Go ignores it.
pub fn merge_yaml<T: Serialize + DeserializeOwned>(
    base: &T,
    text: &str,
    canonical: impl Fn(&str) -> String,
) -> Result<T, String> {
    merge(None, base, text, canonical)
}

/// [`merge_yaml`] for text read from `source` (a file name, say), which
/// errors and warnings name: `SOURCE: MESSAGE, at KEY`.
pub fn merge_yaml_in<T: Serialize + DeserializeOwned>(
    source: &str,
    base: &T,
    text: &str,
    canonical: impl Fn(&str) -> String,
) -> Result<T, String> {
    merge(Some(source), base, text, canonical).map_err(|e| format!("{source}: {e}"))
}

fn merge<T: Serialize + DeserializeOwned>(
    source: Option<&str>,
    base: &T,
    text: &str,
    canonical: impl Fn(&str) -> String,
) -> Result<T, String> {
    let mut value = serde_json::to_value(base).map_err(|e| e.to_string())?;
    match (&mut value, goyaml::parse_json(text)?) {
        (Value::Object(base), Value::Object(update)) => {
            for (k, v) in update {
                base.insert(canonical(&k), v);
            }
        }
        (_, Value::Null) => {}
        _ => return Err("not a mapping".to_string()),
    }
    goyaml::decode_value(source, value, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize, Serialize, PartialEq)]
    #[serde(default, rename_all = "camelCase")]
    struct Cfg {
        log_file: String,
        events: Vec<String>,
    }

    #[test]
    fn keys_given_replace_the_others_stay() {
        let base = Cfg {
            log_file: "/a".into(),
            events: vec![],
        };
        let new = merge_yaml(&base, "events: [x]\n", str::to_string).unwrap();
        assert_eq!(new.log_file, "/a");
        assert_eq!(new.events, ["x"]);
        let alt = merge_yaml(&base, "log_file: /b", |k| k.replace("log_file", "logFile")).unwrap();
        assert_eq!(alt.log_file, "/b");
        assert_eq!(merge_yaml(&base, "", str::to_string).unwrap(), base);
        assert_eq!(
            merge_yaml(&base, "[1]", str::to_string).unwrap_err(),
            "not a mapping"
        );
        assert!(merge_yaml(&base, "events: {", str::to_string).is_err());
        assert_eq!(
            merge_yaml(&base, "events: 3", str::to_string).unwrap_err(),
            "invalid type: integer `3`, expected a sequence, at events"
        );
        assert_eq!(
            merge_yaml_in(
                "/etc/nri/conf.d/x.conf",
                &base,
                "logFile: [a]",
                str::to_string
            )
            .unwrap_err(),
            "/etc/nri/conf.d/x.conf: invalid type: sequence, expected a string, at logFile"
        );
    }

    #[test]
    fn misspelled_keys_are_ignored() {
        let base = Cfg::default();
        let new = merge_yaml(&base, "logFlie: /b\nevents: [x]", str::to_string).unwrap();
        assert_eq!(new.log_file, "");
        assert_eq!(new.events, ["x"]);
    }
}
