//! YAML decoding with the semantics upstream's Go samples get from
//! `sigs.k8s.io/yaml`: the YAML is turned into JSON, then decoded the way
//! Go's `encoding/json` decodes into a struct. What that means for a user:
//!
//! * struct keys match case-insensitively (`Name:` sets `name`), unknown
//!   keys are ignored;
//! * a number or boolean where a string is expected becomes its text
//!   (`net.core.somaxconn: 256` is the string `"256"`);
//! * `null` (or an empty document) leaves a value at its zero value;
//! * a number where a number is expected may also be written in YAML 1.1
//!   forms the Go YAML parser understands (`0666` octal, `0x1f`, `1_000`).
//!
//! Known difference: a *quoted* number is accepted where Go wants a number
//! (Go rejects `major: "1"`); we accept more, never less.

use nri_yaml::{self as yaml, Node, Resolved};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Number, Value};

/// Decodes `text` (YAML or JSON) into `T` as Go's `yaml.Unmarshal` from
/// `sigs.k8s.io/yaml` would. The error text is meant for a log line and
/// ends with the key path (`..., at [0].major`); unknown keys are logged as
/// warnings and ignored.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    decode(None, text, true)
}

/// [`from_str`] for text from `source` (a file, an annotation key), which
/// errors and warnings name: `SOURCE: MESSAGE, at KEY`.
pub fn from_str_in<T: DeserializeOwned>(source: &str, text: &str) -> Result<T, String> {
    decode(Some(source), text, true)
}

/// Decodes `text` (JSON) into `T` as Go's `encoding/json` would: like
/// [`from_str`] but a number or boolean is not accepted for a string.
pub fn from_json_str<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    decode(None, text, false)
}

fn decode<T: DeserializeOwned>(
    source: Option<&str>,
    text: &str,
    lenient: bool,
) -> Result<T, String> {
    let named = |e: String| match source {
        Some(source) => format!("{source}: {e}"),
        None => e,
    };
    let json = parse_json(text).map_err(named)?;
    decode_value(source, json, lenient).map_err(named)
}

/// The first YAML document of `text` as the JSON value `sigs.k8s.io/yaml`
/// converts it to (`null` for an empty document).
pub fn parse_json(text: &str) -> Result<Value, String> {
    match yaml::parse(text).map_err(|e| e.to_string())? {
        Some(node) => to_json(&node),
        None => Ok(Value::Null),
    }
}

/// Decodes `json` into `T` with Go leniency (`lenient`: numbers and
/// booleans for strings), naming the key path in an error and logging a
/// warning for each key `T` does not know.
pub(crate) fn decode_value<T: DeserializeOwned>(
    source: Option<&str>,
    json: Value,
    lenient: bool,
) -> Result<T, String> {
    yaml::decode(GoValue(json, lenient), &mut |key| {
        warn_unknown(source, &key)
    })
    .map_err(|e| e.to_string())
}

/// Logs that `key` is not one the configuration knows.
pub(crate) fn warn_unknown(source: Option<&str>, key: &str) {
    #[cfg(test)]
    UNKNOWN.with(|u| u.borrow_mut().push(key.to_string()));
    match source {
        Some(source) => log::warn!("{source}: unknown key {key:?} (ignored)"),
        None => log::warn!("unknown key {key:?} (ignored)"),
    }
}

#[cfg(test)]
thread_local! {
    /// The unknown keys warned about on this thread, for tests.
    pub(crate) static UNKNOWN: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `value` as block YAML, for logs: mappings and sequences one entry a
/// line, strings plain where they read back as the same string and
/// double-quoted (JSON escapes) otherwise.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    emit(&mut out, value, 0);
    out
}

fn emit(out: &mut String, value: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                out.push_str(&pad);
                out.push_str(&scalar(&Value::String(k.clone())));
                out.push(':');
                emit_nested(out, v, indent, false);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for v in items {
                out.push_str(&pad);
                out.push('-');
                emit_nested(out, v, indent, true);
            }
        }
        other => {
            out.push_str(&pad);
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

/// The value after `key:` or `-`: inline if a scalar or empty, else on
/// the following lines (a sequence under a key is not indented further,
/// as serde_yaml wrote it).
fn emit_nested(out: &mut String, v: &Value, indent: usize, in_seq: bool) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            emit(out, v, indent + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            emit(out, v, if in_seq { indent + 2 } else { indent });
        }
        _ => {
            out.push(' ');
            out.push_str(&scalar(v));
            out.push('\n');
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if plain_is_safe(s) => s.clone(),
        Value::String(s) => Value::String(s.clone()).to_string(),
        Value::Array(_) => "[]".to_string(),
        Value::Object(_) => "{}".to_string(),
    }
}

/// Whether `s` written plain reads back as the string `s`.
fn plain_is_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    matches!(yaml::resolve_plain(s), Resolved::Str(_))
        && !"-?:,[]{}#&*!|>'\"%@`".contains(first)
        && !first.is_whitespace()
        && !s.ends_with(char::is_whitespace)
        && !s.ends_with(':')
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.chars().any(|c| c.is_control())
}

/// YAML node to JSON value, as `sigs.k8s.io/yaml` converts (map keys
/// become strings; tags are dropped; non-finite floats are an error).
fn to_json(node: &Node) -> Result<Value, String> {
    Ok(match node {
        Node::Scalar(s) => match s.resolve() {
            Resolved::Null => Value::Null,
            Resolved::Bool(b) => Value::Bool(b),
            Resolved::Int(i) => Value::from(i),
            Resolved::Uint(u) => Value::from(u),
            Resolved::Float(f) => {
                Value::Number(Number::from_f64(f).ok_or(format!("json: unsupported value: {f}"))?)
            }
            Resolved::Str(t) => Value::String(t.to_string()),
        },
        Node::Seq(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Node::Map(entries) => {
            let mut out = Map::new();
            for (k, v) in entries {
                let key = match k {
                    Node::Scalar(s) => match s.resolve() {
                        Resolved::Null => "null".to_string(),
                        Resolved::Bool(b) => b.to_string(),
                        Resolved::Int(i) => i.to_string(),
                        Resolved::Uint(u) => u.to_string(),
                        Resolved::Float(f) => f.to_string(),
                        Resolved::Str(t) => t.to_string(),
                    },
                    other => return Err(format!("unsupported map key {other:?}")),
                };
                if out.insert(key.clone(), to_json(v)?).is_some() {
                    return Err(format!("duplicate entry with key {key:?}"));
                }
            }
            Value::Object(out)
        }
    })
}

/// Parses an integer as Go's `strconv.ParseInt(s, 0, 64)` (which the Go
/// YAML parser uses for plain scalars): sign, `0x`/`0o`/`0b`/leading-`0`
/// prefixes, `_` separators.
pub fn parse_go_int(s: &str) -> Option<i128> {
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_string())
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_string())
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_string())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string())
    } else {
        (10, lower.clone())
    };
    // Underscores only between digits, and only with base prefix detection
    // (Go allows them for base 0).
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return None;
    }
    let v = i128::from_str_radix(&digits.replace('_', ""), radix).ok()?;
    Some(if neg { -v } else { v })
}

/// Formats a float as Go's `strconv.FormatFloat(f, 'g', -1, 32)`, which
/// `sigs.k8s.io/yaml` uses when a float lands in a string field.
fn go_float_string(f: f64) -> String {
    let f32v = f as f32;
    if f32v == f32v.trunc() && f32v.abs() < 1e21 {
        // Integral values: Go prints them without exponent below 1e21.
        let s = format!("{f32v}");
        return s.trim_end_matches(".0").to_string();
    }
    format!("{f32v}")
}

/// A JSON value deserialized with Go `encoding/json` leniency.
/// `.1`: numbers and booleans may stand for strings (`sigs.k8s.io/yaml`).
pub(crate) struct GoValue(pub(crate) Value, pub(crate) bool);

fn invalid(v: &Value, exp: &dyn de::Expected) -> serde_json::Error {
    let unexp = match v {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => de::Unexpected::Unsigned(u),
            (_, Some(i), _) => de::Unexpected::Signed(i),
            (_, _, Some(f)) => de::Unexpected::Float(f),
            _ => de::Unexpected::Other("number"),
        },
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    };
    de::Error::invalid_type(unexp, exp)
}

macro_rules! go_int {
    ($($method:ident => $visit:ident : $t:ty),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
            let n: i128 = match &self.0 {
                Value::Null => 0,
                Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                    (Some(i), _) => i as i128,
                    (None, Some(u)) => u as i128,
                    _ => return Err(invalid(&self.0, &visitor)),
                },
                Value::String(s) => match parse_go_int(s) {
                    Some(n) => n,
                    None => return Err(invalid(&self.0, &visitor)),
                },
                _ => return Err(invalid(&self.0, &visitor)),
            };
            let v = <$t>::try_from(n).map_err(|_| {
                de::Error::invalid_value(de::Unexpected::Other(&n.to_string()), &visitor)
            })?;
            visitor.$visit(v)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for GoValue {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Seq(items.into_iter(), self.1)),
            Value::Object(map) => visitor.visit_map(Obj::new(map, self.1)),
            other => other.deserialize_any(visitor),
        }
    }

    go_int! {
        deserialize_i8 => visit_i8: i8,
        deserialize_i16 => visit_i16: i16,
        deserialize_i32 => visit_i32: i32,
        deserialize_i64 => visit_i64: i64,
        deserialize_u8 => visit_u8: u8,
        deserialize_u16 => visit_u16: u16,
        deserialize_u32 => visit_u32: u32,
        deserialize_u64 => visit_u64: u64,
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_bool(false),
            Value::Bool(b) => visitor.visit_bool(b),
            other => Err(invalid(&other, &visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_string(String::new()),
            Value::String(s) => visitor.visit_string(s),
            Value::Bool(b) if self.1 => visitor.visit_string(b.to_string()),
            Value::Number(n) if self.1 => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => visitor.visit_string(i.to_string()),
                (None, Some(u), _) => visitor.visit_string(u.to_string()),
                (_, _, Some(f)) => visitor.visit_string(go_float_string(f)),
                _ => visitor.visit_string(n.to_string()),
            },
            other => Err(invalid(&other, &visitor)),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.deserialize_string(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(GoValue(other, self.1)),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_seq(Seq(Vec::new().into_iter(), self.1)),
            Value::Array(items) => visitor.visit_seq(Seq(items.into_iter(), self.1)),
            other => Err(invalid(&other, &visitor)),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_map(Obj::new(Map::new(), self.1)),
            Value::Object(map) => visitor.visit_map(Obj::new(map, self.1)),
            other => Err(invalid(&other, &visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_map(Obj::new(Map::new(), self.1)),
            Value::Object(map) => visitor.visit_map(Obj::new(fold_keys(map, fields), self.1)),
            other => Err(invalid(&other, &visitor)),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    forward_to_deserialize_any! {
        i128 u128 f32 f64 char bytes byte_buf unit unit_struct tuple
        tuple_struct identifier ignored_any
    }
}

/// Renames keys to the struct's field names, matching case-insensitively
/// when there is no exact match (Go's `encoding/json` rule). A later key
/// overrides an earlier one that folds to the same field, as in Go.
fn fold_keys(map: Map<String, Value>, fields: &'static [&'static str]) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in map {
        let key = if fields.contains(&k.as_str()) {
            k
        } else {
            match fields.iter().find(|f| f.eq_ignore_ascii_case(&k)) {
                Some(f) => f.to_string(),
                None => k,
            }
        };
        out.insert(key, v);
    }
    out
}

struct Seq(std::vec::IntoIter<Value>, bool);

impl<'de> SeqAccess<'de> for Seq {
    type Error = serde_json::Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(GoValue(v, self.1)))
            .transpose()
    }
}

struct Obj {
    iter: serde_json::map::IntoIter,
    value: Option<Value>,
    lenient: bool,
}

impl Obj {
    fn new(map: Map<String, Value>, lenient: bool) -> Self {
        Obj {
            iter: map.into_iter(),
            value: None,
            lenient,
        }
    }
}

impl<'de> MapAccess<'de> for Obj {
    type Error = serde_json::Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        match self.iter.next() {
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(k.into_deserializer()).map(Some)
            }
            None => Ok(None),
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        seed.deserialize(GoValue(
            self.value.take().unwrap_or(Value::Null),
            self.lenient,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default)]
    struct Dev {
        path: String,
        major: i64,
        file_mode: u32,
        #[serde(rename = "hostIf")]
        host_if: String,
        flags: Vec<String>,
    }

    #[test]
    fn go_json_leniency() {
        let d: Vec<Dev> = from_str(
            "- Path: /dev/x\n  MAJOR: 0x10\n  file_mode: 0666\n  hostif: eth0\n  unknown: 1\n  flags: ~\n",
        )
        .unwrap();
        assert_eq!(
            d,
            [Dev {
                path: "/dev/x".into(),
                major: 16,
                file_mode: 0o666,
                host_if: "eth0".into(),
                flags: vec![],
            }]
        );
        let m: BTreeMap<String, String> =
            from_str("net.core.somaxconn: 256\nx: true\ny: 1.5\nz: abc").unwrap();
        assert_eq!(m["net.core.somaxconn"], "256");
        assert_eq!(m["x"], "true");
        assert_eq!(m["y"], "1.5");
        assert!(from_json_str::<BTreeMap<String, String>>(r#"{"a": 1}"#).is_err());
        let empty: Vec<Dev> = from_str("").unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert!(from_str::<Vec<Dev>>("- path: [").is_err());
        assert!(from_str::<Vec<Dev>>("path: /dev/x").is_err()); // map, not list
        assert!(from_str::<Vec<Dev>>("- major: abc").is_err());
        assert!(from_str::<Vec<Dev>>("- file_mode: -1").is_err());
        assert!(from_str::<Vec<Dev>>("- file_mode: 99999999999").is_err());
        assert!(from_str::<Vec<String>>("- [a]").is_err());
    }

    #[test]
    fn errors_and_unknown_keys_name_the_key() {
        UNKNOWN.with(|u| u.borrow_mut().clear());
        let d: Vec<Dev> = from_str("- path: /dev/x\n  majr: 1\n").unwrap();
        assert_eq!(d[0].major, 0);
        assert_eq!(UNKNOWN.with(|u| u.borrow().clone()), ["[0].majr"]);
        assert_eq!(
            from_str_in::<Vec<Dev>>("devices.noderesource.dev", "- major: abc").unwrap_err(),
            r#"devices.noderesource.dev: invalid type: string "abc", expected i64, at [0].major"#
        );
    }

    #[test]
    fn dumps_read_back() {
        let v: Value = serde_json::json!({
            "a": {"b": [1, "x", {"c": null, "d": []}], "e": {}},
            "quoted": ["", "true", "0666", "- x", "a: b", "two\nlines", " pad", "ok text"],
            "n": -1.5,
        });
        let text = to_string(&v);
        assert_eq!(parse_json(&text).unwrap(), v, "{text}");
        assert!(text.contains("ok text\n"), "{text}");
    }

    #[test]
    fn go_int_syntax() {
        assert_eq!(parse_go_int("0666"), Some(0o666));
        assert_eq!(parse_go_int("-0x1F"), Some(-31));
        assert_eq!(parse_go_int("0b101"), Some(5));
        assert_eq!(parse_go_int("1_000"), Some(1000));
        assert_eq!(parse_go_int("08"), None);
        assert_eq!(parse_go_int("_1"), None);
        assert_eq!(parse_go_int(""), None);
    }
}
