//! Plugin configuration updated from YAML the way decoding YAML into an
//! existing Go struct updates it: keys the text sets replace the values,
//! the others stay.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// `base` with the keys set in the YAML `text` replaced. `canonical` maps
/// a key as written to the key `T` serializes (for alternative spellings;
/// `str::to_string` when there are none). An empty or `null` text changes
/// nothing; text that is not a mapping is an error.
pub fn merge_yaml<T: Serialize + DeserializeOwned>(
    base: &T,
    text: &str,
    canonical: impl Fn(&str) -> String,
) -> Result<T, String> {
    let mut value = serde_yaml::to_value(base).map_err(|e| e.to_string())?;
    let update: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    match (&mut value, update) {
        (serde_yaml::Value::Mapping(base), serde_yaml::Value::Mapping(update)) => {
            for (k, v) in update {
                let key = match k.as_str() {
                    Some(k) => serde_yaml::Value::String(canonical(k)),
                    None => k,
                };
                base.insert(key, v);
            }
        }
        (_, serde_yaml::Value::Null) => {}
        _ => return Err("not a mapping".to_string()),
    }
    serde_yaml::from_value(value).map_err(|e| e.to_string())
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
        assert!(merge_yaml(&base, "events: 3", str::to_string).is_err());
    }
}
