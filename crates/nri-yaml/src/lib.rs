//! The YAML reader of nri-rs: the default validator's configuration and
//! annotations, and the runtime's drop-ins and identity policy, are read
//! with it, and the sample plugins' kit builds its Go-style decoding on its
//! [`Node`] tree. A crate of its own, on nothing of ours, so that a plugin
//! reads YAML without compiling the validator.
//!
//! # Why this parser
//!
//! `serde_yaml` is archived. Of the candidates:
//!
//! * `serde_yaml_ng` and `serde_norway` are forks of it that keep its
//!   libyaml translated to unsafe Rust (`unsafe-libyaml`); their last
//!   releases date from 2024.
//! * `serde_yml` is unsound (RUSTSEC-2025-0068, and its `libyml`,
//!   RUSTSEC-2025-0067) and deprecated; its last release only forwards to
//!   another crate.
//! * `serde-saphyr` is safe and active, but its releases since 1.2 need
//!   Rust 1.89, newer than the workspace's rust-version.
//! * `saphyr-parser` (the parser of the saphyr project, which continues
//!   `yaml-rust`/`yaml-rust2`) is safe Rust, maintained, Apache-2.0 OR MIT,
//!   builds with Rust 1.85 and brings only `arraydeque` (and `thiserror`,
//!   which we already use).
//!
//! We use `saphyr-parser`'s events and build the tree here. That keeps the
//! decisions that matter for Go compatibility ours: which plain scalars are
//! null, booleans or numbers (the rules serde_yaml 0.9 applied, which our
//! tests pin), that a quoted scalar is always a string, that only the first
//! document counts (as Go's `yaml.Unmarshal`), and how much work an input
//! may cost: nesting is bounded and aliases are expanded against a budget
//! proportional to the input's length, so a "billion laughs" document is
//! refused after linear work.
//!
//! Key paths in errors come from `serde_path_to_error` and unknown keys are
//! reported through `serde_ignored`; [`from_str`] combines both.

use std::collections::HashMap;
use std::fmt;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;

/// How deep collections may nest. Go's yaml.v3 and serde_yaml both stop
/// deeper documents too; real configurations nest a handful of levels.
pub const MAX_DEPTH: usize = 64;

/// A YAML node of the first document.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A scalar, as written.
    Scalar(Scalar),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in document order.
    Map(Vec<(Node, Node)>),
}

/// A scalar's text and how it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    /// The text, quotes and escapes resolved.
    pub text: String,
    /// Whether it was written plain (unquoted, not a block scalar): only
    /// plain scalars can be null, booleans or numbers.
    pub plain: bool,
    /// The suffix of an explicit core-schema tag (`!!str` is `str`).
    pub tag: Option<String>,
}

/// What a plain scalar means (serde_yaml 0.9's rules, which follow the
/// YAML 1.2 core schema; `0666` and `1_000` stay strings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resolved<'a> {
    /// `~`, `null`, `Null`, `NULL` or nothing.
    Null,
    /// `true`/`false` in one of three casings.
    Bool(bool),
    /// A negative integer.
    Int(i64),
    /// A non-negative integer.
    Uint(u64),
    /// A float (also `.inf`, `.nan`).
    Float(f64),
    /// Anything else: the text.
    Str(&'a str),
}

impl Scalar {
    /// What this scalar means to a type-less reader.
    pub fn resolve(&self) -> Resolved<'_> {
        match self.tag.as_deref() {
            Some("str") => return Resolved::Str(&self.text),
            Some("null") => return Resolved::Null,
            _ if !self.plain => return Resolved::Str(&self.text),
            _ => {}
        }
        resolve_plain(&self.text)
    }

    fn is_null(&self) -> bool {
        matches!(self.resolve(), Resolved::Null)
    }

    fn unexpected(&self) -> de::Unexpected<'_> {
        match self.resolve() {
            Resolved::Null => de::Unexpected::Unit,
            Resolved::Bool(b) => de::Unexpected::Bool(b),
            Resolved::Int(i) => de::Unexpected::Signed(i),
            Resolved::Uint(u) => de::Unexpected::Unsigned(u),
            Resolved::Float(f) => de::Unexpected::Float(f),
            Resolved::Str(s) => de::Unexpected::Str(s),
        }
    }
}

/// Resolves a plain scalar's text.
pub fn resolve_plain(text: &str) -> Resolved<'_> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        "true" | "True" | "TRUE" => return Resolved::Bool(true),
        "false" | "False" | "FALSE" => return Resolved::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        _ => {}
    }
    let (neg, unsigned) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let radix = [("0x", 16), ("0o", 8), ("0b", 2)]
        .into_iter()
        .find_map(|(prefix, radix)| unsigned.strip_prefix(prefix).map(|d| (d, radix)));
    if let Some((digits, radix)) = radix {
        if !digits.is_empty() && !digits.starts_with(['+', '-']) {
            if let Ok(n) = u64::from_str_radix(digits, radix) {
                return int(neg, n).unwrap_or(Resolved::Str(text));
            }
        }
        return Resolved::Str(text);
    }
    // Leading zeros before digits make a string in YAML 1.2.
    let digits_only = !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit());
    if digits_only && unsigned.len() > 1 && unsigned.starts_with('0') {
        return Resolved::Str(text);
    }
    if digits_only {
        if let Some(r) = unsigned.parse::<u64>().ok().and_then(|n| int(neg, n)) {
            return r;
        }
    }
    // Rust also reads "inf", "nan" and "infinity"; YAML does not.
    let looks_numeric = unsigned
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && unsigned.bytes().any(|b| b.is_ascii_digit());
    if looks_numeric {
        if let Ok(f) = text.parse::<f64>() {
            return Resolved::Float(f);
        }
    }
    Resolved::Str(text)
}

fn int<'a>(neg: bool, n: u64) -> Option<Resolved<'a>> {
    if !neg {
        return Some(Resolved::Uint(n));
    }
    if n <= i64::MAX as u64 + 1 {
        Some(Resolved::Int((n as i128).wrapping_neg() as i64))
    } else {
        None
    }
}

/// A YAML error: the parser's, a decoding error with its key path, or a
/// limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// An error with this text.
    pub fn new(msg: impl fmt::Display) -> Self {
        Error(msg.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// One open collection while the tree is built.
/// (items, anchor id, cost so far)
enum Frame {
    Seq(Vec<Node>, usize, usize),
    Map(Vec<(Node, Node)>, Option<Node>, usize, usize),
}

/// Parses the first document of `text`; `None` if there is none (empty
/// text, only comments). Later documents are not read, as Go's
/// `yaml.Unmarshal` does not.
///
/// The work is linear in `text`: nesting deeper than [`MAX_DEPTH`] is an
/// error, and so is a document whose aliases would expand it to more than
/// four times the input's size (plus 64 KiB), counted in nodes and scalar
/// bytes.
pub fn parse(text: &str) -> Result<Option<Node>, Error> {
    refuse_tab_indentation(text)?;
    let budget = text.len().saturating_mul(4).saturating_add(64 * 1024);
    let mut spent = 0usize;
    let mut charge = |cost: usize| -> Result<(), Error> {
        spent = spent.saturating_add(cost);
        if spent > budget {
            Err(Error::new(format!(
                "document too large once its aliases are expanded (more than {budget} units)"
            )))
        } else {
            Ok(())
        }
    };
    // Anchored nodes and what each costs to copy.
    let mut anchors: HashMap<usize, (Node, usize)> = HashMap::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut started = false;
    for event in Parser::new_from_str(text) {
        let (event, _span) = event.map_err(Error::new)?;
        let (node, anchor, cost) = match event {
            Event::DocumentStart(_) => {
                started = true;
                continue;
            }
            Event::DocumentEnd | Event::StreamEnd => break,
            Event::StreamStart | Event::Nothing => continue,
            Event::Alias(id) => {
                let (node, cost) = anchors
                    .get(&id)
                    .ok_or_else(|| Error::new("unknown anchor"))?;
                charge(*cost)?;
                (node.clone(), 0, *cost)
            }
            Event::Scalar(value, style, anchor, tag) => {
                let cost = 1 + value.len();
                charge(cost)?;
                let plain = matches!(style, ScalarStyle::Plain);
                let tag = tag
                    .filter(|t| t.is_yaml_core_schema())
                    .map(|t| t.suffix.clone());
                let scalar = Scalar {
                    text: value.into_owned(),
                    plain,
                    tag,
                };
                (Node::Scalar(scalar), anchor, cost)
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(Error::new(format!(
                        "collections nested deeper than {MAX_DEPTH} levels"
                    )));
                }
                charge(1)?;
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq(Vec::new(), anchor, 1)
                } else {
                    Frame::Map(Vec::new(), None, anchor, 1)
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Frame::Seq(items, anchor, cost)) => (Node::Seq(items), anchor, cost),
                Some(Frame::Map(entries, _, anchor, cost)) => (Node::Map(entries), anchor, cost),
                None => return Err(Error::new("unbalanced YAML events")),
            },
        };
        if anchor != 0 {
            anchors.insert(anchor, (node.clone(), cost));
        }
        match stack.last_mut() {
            None => return Ok(Some(node)),
            Some(Frame::Seq(items, _, total)) => {
                *total = total.saturating_add(cost);
                items.push(node);
            }
            Some(Frame::Map(entries, key, _, total)) => {
                *total = total.saturating_add(cost);
                match key.take() {
                    None => *key = Some(node),
                    Some(k) => entries.push((k, node)),
                }
            }
        }
    }
    // A document with only `---`.
    Ok(started.then(empty))
}

/// libyaml (so go-yaml, and serde_yaml before) refuses a tab that starts
/// a line's indentation in block context ("found character that cannot
/// start any token"); YAML 1.2, and saphyr-parser, accept some. We refuse
/// a line that starts with a tab and has content, outside flow collections
/// and quoted scalars (a cheap scan; block scalars are not told apart).
fn refuse_tab_indentation(text: &str) -> Result<(), Error> {
    let (mut flow, mut quote, mut prev) = (0usize, None::<char>, '\n');
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while let Some(c) = chars.next() {
        match quote {
            Some('\'') if c == '\'' && chars.peek() == Some(&'\'') => {
                chars.next();
            }
            Some('"') if c == '\\' => {
                chars.next();
            }
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '#' if prev.is_whitespace() => {
                    while chars.peek().is_some_and(|&c| c != '\n') {
                        chars.next();
                    }
                }
                '\t' if prev == '\n' && flow == 0 => {
                    let mut rest = chars.clone().skip_while(|c| *c == ' ' || *c == '\t');
                    if !matches!(rest.next(), None | Some('\n' | '\r' | '#')) {
                        return Err(Error::new(format!(
                            "found a tab character that cannot start any token at line {line}"
                        )));
                    }
                }
                '[' | '{' => flow += 1,
                ']' | '}' => flow = flow.saturating_sub(1),
                '\'' | '"' if prev.is_whitespace() || "[{,:-?".contains(prev) => quote = Some(c),
                _ => {}
            },
        }
        if c == '\n' {
            line += 1;
        }
        prev = c;
    }
    Ok(())
}

fn empty() -> Node {
    Node::Scalar(Scalar {
        text: String::new(),
        plain: true,
        tag: None,
    })
}

/// Decodes the first document of `text` into `T` with serde_yaml 0.9's
/// semantics. An error ends with the key path where decoding failed
/// (`invalid type: ..., at requiredPlugins[1]`; after the message, so
/// that text matching the message's start keeps working); each key that `T` does
/// not know is passed to `unknown` (as `a.b[0].c`) and otherwise ignored.
pub fn from_str<T: DeserializeOwned>(
    text: &str,
    mut unknown: impl FnMut(String),
) -> Result<T, Error> {
    let node = parse(text)?.unwrap_or_else(empty);
    decode(NodeDe(&node), &mut unknown)
}

/// Deserializes `T` from `de`, naming the key path in an error and passing
/// the path of every ignored key to `unknown`.
pub fn decode<'de, T, D>(de: D, unknown: &mut dyn FnMut(String)) -> Result<T, Error>
where
    T: de::Deserialize<'de>,
    D: de::Deserializer<'de>,
    D::Error: fmt::Display,
{
    let mut report = |path: serde_ignored::Path<'_>| unknown(key_path(&path));
    let ignored = serde_ignored::Deserializer::new(de, &mut report);
    serde_path_to_error::deserialize(ignored).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            Error::new(inner)
        } else {
            Error::new(format!("{inner}, at {path}"))
        }
    })
}

/// `a.b[0].c` for a `serde_ignored` path (without its `?` steps).
fn key_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path as P;
    match path {
        P::Root => String::new(),
        P::Seq { parent, index } => format!("{}[{index}]", key_path(parent)),
        P::Map { parent, key } => match key_path(parent) {
            p if p.is_empty() => key.clone(),
            p => format!("{p}.{key}"),
        },
        P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => {
            key_path(parent)
        }
    }
}

/// A [`Node`] as a serde deserializer, with serde_yaml 0.9's semantics:
/// plain scalars resolve to null, booleans and numbers where the type
/// wants those (or says nothing), any scalar's text is a string.
#[derive(Clone, Copy)]
pub struct NodeDe<'a>(pub &'a Node);

impl NodeDe<'_> {
    fn invalid(&self, exp: &dyn de::Expected) -> Error {
        let unexp = match self.0 {
            Node::Scalar(s) => s.unexpected(),
            Node::Seq(_) => de::Unexpected::Seq,
            Node::Map(_) => de::Unexpected::Map,
        };
        de::Error::invalid_type(unexp, exp)
    }

    fn resolved(&self) -> Option<Resolved<'_>> {
        match self.0 {
            Node::Scalar(s) => Some(s.resolve()),
            _ => None,
        }
    }
}

macro_rules! numbers {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.resolved() {
                Some(Resolved::Int(i)) => visitor.visit_i64(i),
                Some(Resolved::Uint(u)) => visitor.visit_u64(u),
                Some(Resolved::Float(f)) => visitor.visit_f64(f),
                _ => Err(self.invalid(&visitor)),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for NodeDe<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Scalar(s) => match s.resolve() {
                Resolved::Null => visitor.visit_unit(),
                Resolved::Bool(b) => visitor.visit_bool(b),
                Resolved::Int(i) => visitor.visit_i64(i),
                Resolved::Uint(u) => visitor.visit_u64(u),
                Resolved::Float(f) => visitor.visit_f64(f),
                Resolved::Str(t) => visitor.visit_str(t),
            },
            Node::Seq(items) => visitor.visit_seq(SeqDe(items.iter())),
            Node::Map(entries) => visitor.visit_map(MapDe(entries.iter(), None)),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.resolved() {
            Some(Resolved::Bool(b)) => visitor.visit_bool(b),
            _ => Err(self.invalid(&visitor)),
        }
    }

    numbers! {
        deserialize_i8, deserialize_i16, deserialize_i32, deserialize_i64, deserialize_i128,
        deserialize_u8, deserialize_u16, deserialize_u32, deserialize_u64, deserialize_u128,
        deserialize_f32, deserialize_f64,
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Scalar(s) => visitor.visit_str(&s.text),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Scalar(s) if s.is_null() => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Scalar(s) if s.is_null() => visitor.visit_unit(),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Seq(items) => visitor.visit_seq(SeqDe(items.iter())),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Map(entries) => visitor.visit_map(MapDe(entries.iter(), None)),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Node::Scalar(s) => visitor.visit_enum(s.text.as_str().into_deserializer()),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! { bytes byte_buf }
}

struct SeqDe<'a>(std::slice::Iter<'a, Node>);

impl<'de> de::SeqAccess<'de> for SeqDe<'_> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|n| seed.deserialize(NodeDe(n)))
            .transpose()
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct MapDe<'a>(std::slice::Iter<'a, (Node, Node)>, Option<&'a Node>);

impl<'de> de::MapAccess<'de> for MapDe<'_> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.0.next() {
            Some((k, v)) => {
                self.1 = Some(v);
                seed.deserialize(NodeDe(k)).map(Some)
            }
            None => Ok(None),
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let empty = empty();
        match self.1.take() {
            Some(v) => seed.deserialize(NodeDe(v)),
            None => seed.deserialize(NodeDe(&empty)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::time::{Duration, Instant};

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default, rename_all = "camelCase")]
    struct Cfg {
        flag: bool,
        names: Vec<String>,
        inner: Inner,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default)]
    struct Inner {
        n: u32,
    }

    fn unknown_keys(text: &str) -> (Result<Cfg, Error>, Vec<String>) {
        let mut keys = Vec::new();
        let r = from_str(text, |k| keys.push(k));
        (r, keys)
    }

    #[test]
    fn plain_scalars_resolve_as_serde_yaml_did() {
        let cases: &[(&str, Resolved)] = &[
            ("", Resolved::Null),
            ("~", Resolved::Null),
            ("NULL", Resolved::Null),
            ("True", Resolved::Bool(true)),
            ("yes", Resolved::Str("yes")),
            ("0x1f", Resolved::Uint(31)),
            ("-0o10", Resolved::Int(-8)),
            ("0666", Resolved::Str("0666")),
            ("1_000", Resolved::Str("1_000")),
            ("12", Resolved::Uint(12)),
            ("-12", Resolved::Int(-12)),
            ("1.5", Resolved::Float(1.5)),
            ("1e3", Resolved::Float(1000.0)),
            ("inf", Resolved::Str("inf")),
            ("nan", Resolved::Str("nan")),
            ("-.inf", Resolved::Float(f64::NEG_INFINITY)),
            ("1.2.3", Resolved::Str("1.2.3")),
            ("0x", Resolved::Str("0x")),
        ];
        for (text, want) in cases {
            assert_eq!(resolve_plain(text), *want, "{text:?}");
        }
    }

    #[test]
    fn errors_name_the_key_path() {
        let (r, _) = unknown_keys("flag: yes");
        assert_eq!(
            r.unwrap_err().to_string(),
            r#"invalid type: string "yes", expected a boolean, at flag"#
        );
        let (r, _) = unknown_keys("names: [a, [b]]");
        assert_eq!(
            r.unwrap_err().to_string(),
            "invalid type: sequence, expected a string, at names[1]"
        );
        let (r, _) = unknown_keys("inner: {n: -1}");
        assert_eq!(
            r.unwrap_err().to_string(),
            "invalid value: integer `-1`, expected u32, at inner.n"
        );
        let (r, _) = unknown_keys("[1]");
        assert!(r.unwrap_err().to_string().starts_with("invalid type"));
    }

    #[test]
    fn unknown_keys_are_reported_not_refused() {
        let (r, keys) = unknown_keys("flgg: true\ninner: {n: 1, m: 2}\nnames: [a]");
        assert_eq!(
            r.unwrap(),
            Cfg {
                names: vec!["a".into()],
                inner: Inner { n: 1 },
                ..Default::default()
            }
        );
        assert_eq!(keys, ["flgg", "inner.m"]);
    }

    #[test]
    fn only_the_first_document_counts() {
        let (r, _) = unknown_keys("flag: true\n---\nflag: [not, read]\n");
        assert!(r.unwrap().flag);
        assert_eq!(parse("---\n").unwrap(), Some(empty()));
        assert_eq!(parse("# nothing").unwrap(), None);
    }

    #[test]
    fn aliases_expand_within_a_budget() {
        let (r, _) = unknown_keys("a: &x [p, q]\nnames: *x");
        assert_eq!(r.unwrap().names, ["p", "q"]);
        // Billion laughs: each level ten aliases of the one before.
        let mut doc = String::from("a: &a0 [lol]\n");
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            let items = [prev.as_str(); 10].join(", ");
            doc.push_str(&format!("a{i}: &a{i} [{items}]\n"));
        }
        let start = Instant::now();
        let err = parse(&doc).unwrap_err();
        assert!(err.to_string().contains("aliases"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let doc = "[".repeat(100_000);
        assert!(parse(&doc).is_err());
        let doc = format!("{}{}", "- ".repeat(MAX_DEPTH + 1), "x");
        let err = parse(&doc).unwrap_err();
        assert!(err.to_string().contains("nested"), "{err}");
    }

    #[test]
    fn tabs_refused_where_libyaml_refuses_them() {
        for bad in ["\t[a]", "a: 1\n\tb: 2", "- a\n\t- b"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        for good in ["[a,\n\tb]", "a: 1 # \t\n\t\n\t# c\nb: 2"] {
            assert!(parse(good).is_ok(), "{good:?}");
        }
    }
}
