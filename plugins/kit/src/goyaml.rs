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

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Number, Value};

/// Decodes `text` (YAML or JSON) into `T` as Go's `yaml.Unmarshal` from
/// `sigs.k8s.io/yaml` would. The error text is meant for a log line.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    decode(text, true)
}

/// Decodes `text` (JSON) into `T` as Go's `encoding/json` would: like
/// [`from_str`] but a number or boolean is not accepted for a string.
pub fn from_json_str<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    decode(text, false)
}

fn decode<T: DeserializeOwned>(text: &str, lenient: bool) -> Result<T, String> {
    let yaml: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    let json = to_json(yaml)?;
    T::deserialize(GoValue(json, lenient)).map_err(|e| e.to_string())
}

/// YAML value to JSON value, as `sigs.k8s.io/yaml` converts (map keys
/// become strings; tags are dropped; non-finite floats are an error).
fn to_json(v: serde_yaml::Value) -> Result<Value, String> {
    use serde_yaml::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                Value::Number(Number::from_f64(f).ok_or(format!("json: unsupported value: {f}"))?)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(seq) => Value::Array(seq.into_iter().map(to_json).collect::<Result<_, _>>()?),
        Y::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    Y::Null => "null".to_string(),
                    other => return Err(format!("unsupported map key {other:?}")),
                };
                out.insert(key, to_json(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => to_json(t.value)?,
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
struct GoValue(Value, bool);

fn invalid(v: &Value, exp: &dyn de::Expected) -> serde_json::Error {
    let unexp = match v {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(n) => match n.as_f64() {
            Some(f) => de::Unexpected::Float(f),
            None => de::Unexpected::Other("number"),
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
