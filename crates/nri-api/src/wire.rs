//! Reading encoded NRI messages without decoding them: [`check`], which
//! tells whether bytes decode as a message type without building it, and
//! [`only_field`], which finds one field of an encoded message.
//!
//! A runtime hands the adaptation its requests encoded, and most of them
//! are forwarded to plugins as they are. Decoding a CreateContainer request
//! with rust-protobuf builds some 200 heap objects, which is most of what
//! relaying it costs; checking the same bytes allocates nothing. The check
//! walks the message with the same `CodedInputStream` calls the generated
//! decoder makes, driven by the descriptors of `nri.proto`, so it accepts
//! exactly the bytes decoding accepts (`tests/wire.rs` compares the two on
//! mutated requests), and it fails with decoding's own error. Its tables
//! are made from the descriptor the build writes next to the generated
//! code, not from rust-protobuf's reflection, whose index of the file
//! (0.4 MiB) would stay in the runtime's heap for good.

use std::collections::HashMap;
use std::sync::OnceLock;

use protobuf::descriptor::field_descriptor_proto::{Label, Type};
use protobuf::descriptor::{DescriptorProto, FileDescriptorProto};
use protobuf::rt::WireType;
use protobuf::{CodedInputStream, Message};

/// `nri.proto`'s `FileDescriptorProto`, encoded (see `build.rs`).
const DESCRIPTOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/nri.descriptor"));

/// Whether `bytes` are an `M`, well-formed: `Ok` exactly when decoding
/// them within their own length succeeds (see [`decode_within`]), and
/// otherwise decoding's error. Nothing is allocated unless the bytes are
/// refused.
pub fn check<M: Message>(bytes: &[u8]) -> protobuf::Result<()> {
    let shapes = shapes();
    let Some(root) = shapes.root(M::NAME) else {
        // Not one of nri.proto's messages: only decoding can tell.
        return decode_within::<M>(bytes).map(drop);
    };
    let walked = Walk { shapes }.message(&mut Reader::over(bytes), root, 0);
    match walked {
        Ok(()) => Ok(()),
        // Decoding's own words; and should the walk ever refuse what
        // decoding accepts, decoding wins.
        Err(Refused) => decode_within::<M>(bytes).map(drop),
    }
}

/// Decodes `bytes` as an `M` with the input's length as the outermost
/// limit. `M::parse_from_bytes` has no outermost limit, so it accepts a
/// nested message whose length runs past the end of the input, read as far
/// as the input goes; other decoders (Go's among them) refuse it, and so
/// does this.
pub fn decode_within<M: Message>(bytes: &[u8]) -> protobuf::Result<M> {
    let mut is = CodedInputStream::from_bytes(bytes);
    let outer = is.push_limit(bytes.len() as u64)?;
    let mut m = M::new();
    m.merge_from(&mut is)?;
    is.pop_limit(outer);
    is.check_eof()?;
    Ok(m)
}

/// The payload of field `number` of the encoded message `buf`, if the field
/// is there exactly once and length-delimited (a message, a string or
/// bytes). `None` when it is absent, repeated, or there in another wire
/// type, which are the cases where a decoder's view of the field is more
/// than one payload. `buf` must be well-formed ([`check`]); bytes that are
/// not give `None`.
pub fn only_field(buf: &[u8], number: u32) -> Option<&[u8]> {
    let [found] = only_fields(buf, [number]);
    found
}

/// [`only_field`] for several fields, in one pass over `buf`.
pub fn only_fields<const N: usize>(buf: &[u8], numbers: [u32; N]) -> [Option<&[u8]>; N] {
    let Some(Found {
        mut payloads,
        spoilt,
    }) = scan(buf, numbers)
    else {
        return [None; N];
    };
    for (f, spoilt) in payloads.iter_mut().zip(spoilt) {
        if spoilt {
            *f = None;
        }
    }
    payloads
}

/// The payloads of length-delimited fields `numbers` of the encoded
/// message `buf`, each `None` where its field is absent: the whole answer
/// is `None` if any of them is there more than once or in another wire
/// type (a decoder would merge or refuse what it finds, not take one
/// payload), or if `buf` is not well-formed ([`check`] it first). Unlike
/// [`only_fields`], an absent field is told apart from a spoilt one, for
/// proto3 fields whose default value is not encoded.
pub fn fields_once<const N: usize>(buf: &[u8], numbers: [u32; N]) -> Option<[Option<&[u8]>; N]> {
    let found = scan(buf, numbers)?;
    (!found.spoilt.contains(&true)).then_some(found.payloads)
}

/// `buf` decoded as an `M` of fields `numbers` only: the message decoding
/// all of `buf` gives, with every other field left at its default, at the
/// cost of decoding those fields alone. Each field's occurrences are merged
/// in their order, as decoding merges them, so a repeated field or a map
/// is whole and a scalar's last occurrence wins. `buf` must be well-formed
/// ([`check`]); bytes that are not give an error.
pub fn decode_fields<M: Message>(buf: &[u8], numbers: &[u32]) -> protobuf::Result<M> {
    let malformed = || {
        protobuf::Error::from(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a malformed message",
        ))
    };
    let mut m = M::new();
    let mut r = Reader::over(buf);
    // A run of wanted fields back to back is merged in one call.
    let mut run: Option<usize> = None;
    loop {
        let start = r.pos;
        let tag = r.tag().map_err(|Refused| malformed())?;
        let wanted = tag.is_some_and(|(number, _)| numbers.contains(&number));
        match (wanted, run) {
            (true, None) => run = Some(start),
            (false, Some(from)) => {
                m.merge_from_bytes(&buf[from..start])?;
                run = None;
            }
            _ => {}
        }
        let Some((_, wire_type)) = tag else {
            return Ok(m);
        };
        match wire_type {
            WireType::StartGroup => skip_top_group(&mut r, 0),
            other => r.skip(other),
        }
        .map_err(|Refused| malformed())?;
    }
}

/// The encoded `M` in `buf` split after its leading entries of field
/// `number`: every entry of that field, well-formed as [`check`] says, then
/// the message's other fields, not checked (decoding them does). `None` if
/// an entry of the field comes after another field (then no prefix holds it
/// all), or if the leading part is not well-formed. Protobuf merges a
/// message from entries in any order, so the two parts, decoded or sent one
/// after the other, make the same message as `buf`, or fail to decode as it
/// does; the split lets a caller decode the rest and pass on the field's
/// bytes as they are.
pub fn split_leading<M: Message>(buf: &[u8], number: u32) -> Option<(&[u8], &[u8])> {
    let (lead, rest) = leading_entries(buf, number)?;
    check::<M>(lead).ok()?;
    Some((lead, rest))
}

/// [`split_leading`]'s split, the leading part not checked.
fn leading_entries(buf: &[u8], number: u32) -> Option<(&[u8], &[u8])> {
    let mut r = Reader::over(buf);
    let mut lead = 0;
    loop {
        let start = r.pos;
        let (n, wire_type) = match r.tag() {
            Ok(Some(tag)) => tag,
            Ok(None) => return Some(buf.split_at(lead)),
            Err(Refused) => return None,
        };
        if n == number && start != lead {
            return None;
        }
        match wire_type {
            WireType::StartGroup => skip_top_group(&mut r, 0),
            other => r.skip(other),
        }
        .ok()?;
        if n == number {
            lead = r.pos;
        }
    }
}

/// What one pass over a message found of some fields: the last payload of
/// each, and whether it was there more than once or in another wire type.
struct Found<'a, const N: usize> {
    payloads: [Option<&'a [u8]>; N],
    spoilt: [bool; N],
}

/// One pass over `buf` for fields `numbers`; `None` for bytes that are not
/// well-formed.
fn scan<const N: usize>(buf: &[u8], numbers: [u32; N]) -> Option<Found<'_, N>> {
    let mut found = Found {
        payloads: [None; N],
        spoilt: [false; N],
    };
    let mut r = Reader::over(buf);
    loop {
        let (number, wire_type) = match r.tag() {
            Ok(Some(tag)) => tag,
            Ok(None) => break,
            Err(Refused) => return None,
        };
        let at = numbers.iter().position(|&n| n == number);
        let payload = match wire_type {
            WireType::LengthDelimited => r.varint32().and_then(|len| r.take(len as usize)),
            WireType::StartGroup => skip_top_group(&mut r, 0).map(|()| &[][..]),
            other => r.skip(other).map(|()| &[][..]),
        };
        let payload = payload.ok()?;
        if let Some(i) = at {
            found.spoilt[i] |=
                found.payloads[i].is_some() || wire_type != WireType::LengthDelimited;
            found.payloads[i] = Some(payload);
        }
    }
    Some(found)
}

/// Numbers of nri.proto's fields that readers of encoded messages look
/// for ([`only_field`], [`fields_once`], a Synchronize request's split),
/// held to the descriptors by this module's tests.
pub mod field {
    /// `CreateContainerRequest.pod`.
    pub const CREATE_CONTAINER_REQUEST_POD: u32 = 1;
    /// `CreateContainerRequest.container`.
    pub const CREATE_CONTAINER_REQUEST_CONTAINER: u32 = 2;
    /// `PodSandbox.name`.
    pub const POD_SANDBOX_NAME: u32 = 2;
    /// `PodSandbox.namespace`.
    pub const POD_SANDBOX_NAMESPACE: u32 = 4;
    /// `PodSandbox.annotations`.
    pub const POD_SANDBOX_ANNOTATIONS: u32 = 6;
    /// `Container.id`.
    pub const CONTAINER_ID: u32 = 1;
    /// `Container.name`.
    pub const CONTAINER_NAME: u32 = 3;
    /// `Container.hooks`.
    pub const CONTAINER_HOOKS: u32 = 10;
    /// `Container.linux`.
    pub const CONTAINER_LINUX: u32 = 11;
    /// `LinuxContainer.resources`.
    pub const LINUX_CONTAINER_RESOURCES: u32 = 3;
    /// `LinuxContainer.seccomp_profile`.
    pub const LINUX_CONTAINER_SECCOMP_PROFILE: u32 = 7;
    /// `LinuxResources.memory`.
    pub const LINUX_RESOURCES_MEMORY: u32 = 1;
    /// `LinuxResources.cpu`.
    pub const LINUX_RESOURCES_CPU: u32 = 2;
    /// `SynchronizeRequest.pods`.
    pub const SYNCHRONIZE_REQUEST_PODS: u32 = 1;
    /// `SynchronizeRequest.containers`.
    pub const SYNCHRONIZE_REQUEST_CONTAINERS: u32 = 2;
    /// `SynchronizeRequest.more`.
    pub const SYNCHRONIZE_REQUEST_MORE: u32 = 3;
}

/// How deep messages may nest, as `CodedInputStream` counts it.
const RECURSION_LIMIT: u32 = 100;

/// The walk refused the bytes; `check` asks decoding for its words.
#[derive(Debug)]
struct Refused;

type Step<T = ()> = Result<T, Refused>;

/// A scalar field's protobuf type: how the generated decoder reads it.
#[derive(Clone, Copy, Debug)]
enum Scalar {
    /// int32 and enums: a 64-bit varint that must fit an i32.
    Int32,
    /// int64, uint64, sint64 and bool: any 64-bit varint.
    Varint64,
    /// uint32 and sint32: a 32-bit varint.
    Varint32,
    /// fixed32, sfixed32 and float.
    Fixed32,
    /// fixed64, sfixed64 and double.
    Fixed64,
}

impl Scalar {
    fn wire_type(self) -> WireType {
        match self {
            Scalar::Fixed32 => WireType::Fixed32,
            Scalar::Fixed64 => WireType::Fixed64,
            _ => WireType::Varint,
        }
    }

    fn read(self, r: &mut Reader) -> Step {
        match self {
            Scalar::Int32 => i32::try_from(r.varint64()? as i64)
                .map(drop)
                .map_err(|_| Refused),
            Scalar::Varint64 => r.varint64().map(drop),
            Scalar::Varint32 => r.varint32().map(drop),
            Scalar::Fixed32 => r.take(4).map(drop),
            Scalar::Fixed64 => r.take(8).map(drop),
        }
    }
}

/// What one field, or a map entry's key or value, holds.
#[derive(Clone, Copy, Debug)]
enum Value {
    Str,
    Bytes,
    /// A message: its index in [`Shapes::shapes`].
    Message(usize),
    Scalar(Scalar),
}

impl Value {
    fn wire_type(self) -> WireType {
        match self {
            Value::Str | Value::Bytes | Value::Message(_) => WireType::LengthDelimited,
            Value::Scalar(s) => s.wire_type(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Singular(Value),
    /// A repeated scalar is accepted packed and unpacked.
    Repeated(Value),
    Map {
        key: Value,
        value: Value,
    },
}

/// What the generated decoder does on one tag of a message.
#[derive(Clone, Copy, Debug)]
enum Action {
    /// Not a known field in this wire type: kept as unknown.
    Unknown,
    Read(Value),
    /// A packed repeated scalar.
    Packed(Scalar),
    /// A map entry: the key and the value.
    Entry(Value, Value),
}

/// One message: its action for each tag (field number and wire type),
/// tags past the end being unknown.
#[derive(Default, Debug)]
struct Shape {
    by_tag: Vec<Action>,
}

impl Shape {
    fn of(fields: &[(u32, Kind)]) -> Shape {
        let mut shape = Shape::default();
        let mut set = |number: u32, wire_type: WireType, action: Action| {
            let tag = (number << 3 | wire_type as u32) as usize;
            if shape.by_tag.len() <= tag {
                shape.by_tag.resize(tag + 1, Action::Unknown);
            }
            shape.by_tag[tag] = action;
        };
        for &(n, kind) in fields {
            match kind {
                Kind::Singular(v) => set(n, v.wire_type(), Action::Read(v)),
                Kind::Repeated(v) => {
                    set(n, v.wire_type(), Action::Read(v));
                    if let Value::Scalar(s) = v {
                        set(n, WireType::LengthDelimited, Action::Packed(s));
                    }
                }
                Kind::Map { key, value } => {
                    set(n, WireType::LengthDelimited, Action::Entry(key, value))
                }
            }
        }
        shape
    }

    #[inline(always)]
    fn action(&self, tag: u32) -> Action {
        self.by_tag
            .get(tag as usize)
            .copied()
            .unwrap_or(Action::Unknown)
    }
}

/// Every message of `nri.proto`, map entries included.
struct Shapes {
    shapes: Vec<Shape>,
    /// The index in `shapes` of each top-level message, by its name
    /// (`Message::NAME`: nri.proto nests no message but map entries,
    /// which are never checked on their own), sorted by name. (A sorted
    /// list, not a hash map: it lives as long as the process, and leak
    /// checkers see a hash map's entries only through pointers into the
    /// middle of its table.)
    names: Vec<(String, usize)>,
}

fn shapes() -> &'static Shapes {
    static SHAPES: OnceLock<Shapes> = OnceLock::new();
    SHAPES.get_or_init(|| {
        let file = FileDescriptorProto::parse_from_bytes(DESCRIPTOR)
            .expect("the build wrote a well-formed descriptor");
        Shapes::of(&file)
    })
}

impl Shapes {
    /// The index of the top-level message named `name`.
    fn root(&self, name: &str) -> Option<usize> {
        self.names
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.names[i].1)
    }

    fn of(file: &FileDescriptorProto) -> Shapes {
        /// `d` and the messages nested in it, each with its full name in
        /// the form fields refer to them (`.package.Outer.Inner`).
        fn collect<'a>(
            d: &'a DescriptorProto,
            scope: &str,
            all: &mut Vec<(String, &'a DescriptorProto)>,
        ) {
            let name = format!("{scope}.{}", d.name());
            for nested in &d.nested_type {
                collect(nested, &name, all);
            }
            all.push((name, d));
        }
        let package = format!(".{}", file.package());
        let mut all = Vec::new();
        for d in &file.message_type {
            collect(d, &package, &mut all);
        }
        let index: HashMap<&str, usize> = all
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.as_str(), i))
            .collect();
        let value = |d: &DescriptorProto, number: i32| -> Value {
            let f = d
                .field
                .iter()
                .find(|f| f.number() == number)
                .expect("a map entry has its key and value");
            value_of(f.type_(), f.type_name(), &index)
        };
        let shapes = all
            .iter()
            .map(|(_, d)| {
                let mut fields = Vec::new();
                for f in &d.field {
                    let v = value_of(f.type_(), f.type_name(), &index);
                    let kind = match (f.label(), v) {
                        (Label::LABEL_REPEATED, Value::Message(entry))
                            if all[entry].1.options.map_entry() =>
                        {
                            Kind::Map {
                                key: value(all[entry].1, 1),
                                value: value(all[entry].1, 2),
                            }
                        }
                        (Label::LABEL_REPEATED, v) => Kind::Repeated(v),
                        (_, v) => Kind::Singular(v),
                    };
                    fields.push((f.number() as u32, kind));
                }
                Shape::of(&fields)
            })
            .collect();
        let mut names: Vec<(String, usize)> = file
            .message_type
            .iter()
            .map(|d| {
                (
                    d.name().to_string(),
                    index[format!("{package}.{}", d.name()).as_str()],
                )
            })
            .collect();
        names.sort();
        Shapes { shapes, names }
    }
}

fn value_of(t: Type, type_name: &str, index: &HashMap<&str, usize>) -> Value {
    match t {
        Type::TYPE_STRING => Value::Str,
        Type::TYPE_BYTES => Value::Bytes,
        Type::TYPE_MESSAGE | Type::TYPE_GROUP => Value::Message(
            *index
                .get(type_name)
                .expect("nri.proto's messages refer to its own messages"),
        ),
        Type::TYPE_INT32 | Type::TYPE_ENUM => Value::Scalar(Scalar::Int32),
        Type::TYPE_INT64 | Type::TYPE_UINT64 | Type::TYPE_SINT64 | Type::TYPE_BOOL => {
            Value::Scalar(Scalar::Varint64)
        }
        Type::TYPE_UINT32 | Type::TYPE_SINT32 => Value::Scalar(Scalar::Varint32),
        Type::TYPE_FIXED32 | Type::TYPE_SFIXED32 | Type::TYPE_FLOAT => {
            Value::Scalar(Scalar::Fixed32)
        }
        Type::TYPE_FIXED64 | Type::TYPE_SFIXED64 | Type::TYPE_DOUBLE => {
            Value::Scalar(Scalar::Fixed64)
        }
    }
}

/// The bytes of one message (or of a length-delimited part of it) as
/// `CodedInputStream` reads them under a limit: `end` is the limit.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Reader<'a> {
    fn over(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            end: buf.len(),
        }
    }

    #[inline(always)]
    fn eof(&self) -> bool {
        self.pos == self.end
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> Step<&'a [u8]> {
        if n > self.end - self.pos {
            return Err(Refused);
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    /// A varint of at most `max` bytes whose last byte is at most `last`,
    /// complete before the limit: what `decode_varint32`/`64` accept.
    #[inline(always)]
    fn varint(&mut self, max: usize, last: u8) -> Step<u64> {
        let rem = &self.buf[self.pos..self.end];
        // Most varints (tags, lengths) are one byte.
        if let Some(&b) = rem.first() {
            if b < 0x80 {
                self.pos += 1;
                return Ok(b as u64);
            }
        }
        let mut v = 0u64;
        for (i, &b) in rem.iter().enumerate().take(max) {
            if i == max - 1 {
                if b > last {
                    return Err(Refused);
                }
                self.pos += i + 1;
                return Ok(v | (b as u64) << (7 * i));
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b < 0x80 {
                self.pos += i + 1;
                return Ok(v);
            }
        }
        Err(Refused)
    }

    #[inline(always)]
    fn varint64(&mut self) -> Step<u64> {
        self.varint(10, 0x01)
    }

    #[inline(always)]
    fn varint32(&mut self) -> Step<u32> {
        self.varint(5, 0x0f).map(|v| v as u32)
    }

    /// A tag, or `None` at the limit.
    #[inline(always)]
    fn tag(&mut self) -> Step<Option<(u32, WireType)>> {
        if self.eof() {
            return Ok(None);
        }
        split_tag(self.varint32()?).map(Some)
    }

    /// Runs `f` with the limit set `len` bytes ahead (`push_limit`), which
    /// must be within the current one; `f` must read up to it.
    #[inline(always)]
    fn within(&mut self, len: u64, f: impl FnOnce(&mut Self) -> Step) -> Step {
        if len > (self.end - self.pos) as u64 {
            return Err(Refused);
        }
        let outer = self.end;
        self.end = self.pos + len as usize;
        f(self)?;
        self.end = outer;
        Ok(())
    }

    /// An unknown field of a non-group wire type (`skip_field`,
    /// `read_unknown`).
    fn skip(&mut self, wire_type: WireType) -> Step {
        match wire_type {
            WireType::Varint => self.varint64().map(drop),
            WireType::Fixed64 => self.take(8).map(drop),
            WireType::Fixed32 => self.take(4).map(drop),
            WireType::LengthDelimited => {
                let len = self.varint32()?;
                self.take(len as usize).map(drop)
            }
            WireType::StartGroup | WireType::EndGroup => Err(Refused),
        }
    }
}

/// A tag as `Tag::new` accepts it: a field number and a wire type.
#[inline(always)]
fn split_tag(tag: u32) -> Step<(u32, WireType)> {
    match (tag >> 3, WireType::new(tag & 7)) {
        (0, _) | (_, None) => Err(Refused),
        (number, Some(wire_type)) => Ok((number, wire_type)),
    }
}

/// One walk over an encoded message. `depth` is the recursion level a
/// `CodedInputStream` decoding the same bytes would be at.
struct Walk<'a> {
    shapes: &'a Shapes,
}

impl Walk<'_> {
    /// A message's fields up to the limit, as the generated `merge_from`
    /// reads them.
    fn message(&self, r: &mut Reader, shape: usize, depth: u32) -> Step {
        let shape = &self.shapes.shapes[shape];
        while !r.eof() {
            let tag = r.varint32()?;
            match shape.action(tag) {
                // Strings first: most fields of NRI's messages are.
                Action::Read(Value::Str) => read_str(r)?,
                Action::Read(v) => self.value(r, v, depth)?,
                Action::Packed(s) => {
                    let len = r.varint64()?;
                    r.within(len, |r| {
                        while !r.eof() {
                            s.read(r)?;
                        }
                        Ok(())
                    })?
                }
                Action::Entry(key, value) => self.map_entry(r, key, value, depth)?,
                // An unknown field, or a known one in another wire type:
                // kept as unknown, or skipped if a group.
                Action::Unknown => match split_tag(tag)? {
                    (_, WireType::StartGroup) => skip_top_group(r, depth)?,
                    (_, wire_type) => r.skip(wire_type)?,
                },
            }
        }
        Ok(())
    }

    fn value(&self, r: &mut Reader, v: Value, depth: u32) -> Step {
        match v {
            Value::Str => read_str(r),
            Value::Bytes => {
                let len = r.varint32()?;
                r.take(len as usize).map(drop)
            }
            // `merge_message`: one level deeper, the length read as 64 bits.
            Value::Message(shape) => {
                if depth >= RECURSION_LIMIT {
                    return Err(Refused);
                }
                let len = r.varint64()?;
                r.within(len, |r| self.message(r, shape, depth + 1))
            }
            Value::Scalar(s) => s.read(r),
        }
    }

    /// One map entry, as the generated decoder reads it: no level deeper,
    /// the length read as 32 bits, unknown fields skipped.
    fn map_entry(&self, r: &mut Reader, key: Value, value: Value, depth: u32) -> Step {
        let len = r.varint32()?;
        r.within(len as u64, |r| {
            while let Some((number, wire_type)) = r.tag()? {
                match number {
                    1 if wire_type == key.wire_type() => self.value(r, key, depth)?,
                    2 if wire_type == value.wire_type() => self.value(r, value, depth)?,
                    _ => skip_field(r, wire_type, depth)?,
                }
            }
            Ok(())
        })
    }
}

/// A string: its length as 32 bits, then UTF-8.
#[inline(always)]
fn read_str(r: &mut Reader) -> Step {
    let len = r.varint32()?;
    let bytes = r.take(len as usize)?;
    // Most strings are ASCII, which is quicker to tell.
    match bytes.is_ascii() || std::str::from_utf8(bytes).is_ok() {
        true => Ok(()),
        false => Err(Refused),
    }
}

/// An unknown group field of a message (`rt::read_unknown_or_skip_group`):
/// no level deeper itself, and its end tag must come before the limit.
fn skip_top_group(r: &mut Reader, depth: u32) -> Step {
    loop {
        match r.tag()?.ok_or(Refused)? {
            (_, WireType::EndGroup) => return Ok(()),
            (_, wire_type) => skip_field(r, wire_type, depth)?,
        }
    }
}

/// `CodedInputStream::skip_field`, with its recursion counted from `depth`:
/// a group is one level deeper and may end with the limit.
fn skip_field(r: &mut Reader, wire_type: WireType, depth: u32) -> Step {
    if wire_type != WireType::StartGroup {
        return r.skip(wire_type);
    }
    if depth >= RECURSION_LIMIT {
        return Err(Refused);
    }
    while let Some((_, wire_type)) = r.tag()? {
        if wire_type == WireType::EndGroup {
            break;
        }
        skip_field(r, wire_type, depth + 1)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;
    use protobuf::reflect::MessageDescriptor;
    use protobuf::{Message, MessageFull};

    #[test]
    fn the_tables_are_made_from_the_descriptor_the_generated_code_holds() {
        let ours = FileDescriptorProto::parse_from_bytes(DESCRIPTOR).unwrap();
        assert_eq!(&ours, generated::nri::file_descriptor().proto());
        // Every top-level message is a root, under the name its type has.
        let shapes = shapes();
        assert_eq!(shapes.names.len(), ours.message_type.len());
        assert!(shapes.root(CreateContainerRequest::NAME).is_some());
        assert!(shapes.root(LinuxResources::NAME).is_some());
        assert!(shapes.root("LabelsEntry").is_none());
    }

    /// A request with every kind of field the walk knows: strings, maps of
    /// strings and of messages, nested and repeated messages, scalars,
    /// enums and a packed repeated scalar.
    fn rich_request() -> CreateContainerRequest {
        let mut pod = PodSandbox {
            id: "pod-1".into(),
            name: "web".into(),
            namespace: "default".into(),
            uid: "0b4c1a6e".into(),
            pid: 4242,
            ..Default::default()
        };
        pod.labels.insert("app".into(), "web".into());
        pod.annotations
            .insert("ä-annotation".into(), "ünïcode".into());
        let mut ctr = Container {
            id: "ctr-1".into(),
            pod_sandbox_id: "pod-1".into(),
            name: "nginx".into(),
            args: vec!["nginx".into(), "-g".into(), "daemon off;".into()],
            env: vec!["PATH=/usr/bin".into(), "HOME=/root".into()],
            state: ContainerState::CONTAINER_CREATED.into(),
            ..Default::default()
        };
        ctr.annotations.insert("k".into(), "v".into());
        ctr.mounts.push(Mount {
            destination: "/data".into(),
            source: "/srv".into(),
            type_: "bind".into(),
            options: vec!["rbind".into(), "ro".into()],
            ..Default::default()
        });
        ctr.user = protobuf::MessageField::some(User {
            uid: 1000,
            gid: 1000,
            additional_gids: vec![4, 24, 1 << 20],
            ..Default::default()
        });
        let mut linux = LinuxContainer::default();
        let mut res = LinuxResources::default();
        res.memory.mut_or_insert_default().limit = protobuf::MessageField::some(OptionalInt64 {
            value: -1,
            ..Default::default()
        });
        res.cpu.mut_or_insert_default().cpus = "0-1".into();
        res.unified.insert("memory.high".into(), "max".into());
        linux.resources = protobuf::MessageField::some(res);
        linux.net_devices.insert(
            "eth1".into(),
            LinuxNetDevice {
                name: "net1".into(),
                ..Default::default()
            },
        );
        linux.oom_score_adj = protobuf::MessageField::some(OptionalInt {
            value: -999,
            ..Default::default()
        });
        ctr.linux = protobuf::MessageField::some(linux);
        ctr.hooks.mut_or_insert_default().prestart.push(Hook {
            path: "/bin/hook".into(),
            args: vec!["hook".into()],
            ..Default::default()
        });
        CreateContainerRequest {
            pod: protobuf::MessageField::some(pod),
            container: protobuf::MessageField::some(ctr),
            ..Default::default()
        }
    }

    fn walk_accepts<M: Message>(bytes: &[u8]) -> bool {
        let shapes = shapes();
        let root = shapes.root(M::NAME).unwrap();
        Walk { shapes }
            .message(&mut Reader::over(bytes), root, 0)
            .is_ok()
    }

    fn agrees<M: MessageFull>(bytes: &[u8]) {
        assert_eq!(
            walk_accepts::<M>(bytes),
            decode_within::<M>(bytes).is_ok(),
            "{} of {} bytes: {bytes:02x?}",
            M::NAME,
            bytes.len()
        );
    }

    /// Decoding `bytes` whole against what the runtime does with a
    /// CreateContainer request whose pod it keeps encoded: split off the
    /// leading pods, check them, decode the rest, and (for a plugin that
    /// needs the message) merge the pods back in. The same message, or the
    /// same error. Returns whether the split was taken.
    fn split_agrees(bytes: &[u8]) -> bool {
        let Some((lead, rest)) = split_leading::<CreateContainerRequest>(bytes, 1) else {
            // The runtime decodes the whole then.
            return false;
        };
        let whole = CreateContainerRequest::parse_from_bytes(bytes);
        let mut parts = CreateContainerRequest::parse_from_bytes(rest);
        if let Ok(m) = &mut parts {
            m.merge_from_bytes(lead).expect("checked pods merge");
        }
        match (whole, parts) {
            (Ok(w), Ok(p)) => assert_eq!(w, p, "{bytes:02x?}"),
            (Err(w), Err(p)) => assert_eq!(w.to_string(), p.to_string(), "{bytes:02x?}"),
            (w, p) => panic!("whole {w:?}, split {p:?}: {bytes:02x?}"),
        }
        true
    }

    /// A small deterministic generator (xorshift), so a failure repeats.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn a_well_formed_request_is_accepted() {
        let bytes = rich_request().write_to_bytes().unwrap();
        assert!(walk_accepts::<CreateContainerRequest>(&bytes));
        check::<CreateContainerRequest>(&bytes).unwrap();
        assert!(check::<CreateContainerRequest>(&[]).is_ok());
    }

    #[test]
    fn mutated_requests_are_refused_exactly_when_decoding_refuses_them() {
        let good = rich_request().write_to_bytes().unwrap();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut refused, mut accepted, mut split) = (0, 0, 0);
        for _ in 0..20_000 {
            let mut b = good.clone();
            for _ in 0..=rng.below(3) {
                match rng.below(4) {
                    0 => {
                        let i = rng.below(b.len());
                        b[i] = rng.next() as u8;
                    }
                    1 => {
                        let i = rng.below(b.len());
                        b[i] ^= 1 << rng.below(8);
                    }
                    2 => b.truncate(rng.below(b.len() + 1)),
                    _ => {
                        let i = rng.below(b.len() + 1);
                        b.insert(i, rng.next() as u8);
                    }
                }
                if b.is_empty() {
                    break;
                }
            }
            agrees::<CreateContainerRequest>(&b);
            split += usize::from(split_agrees(&b));
            // The same bytes read as other messages exercise other shapes.
            agrees::<UpdateContainerRequest>(&b);
            agrees::<StopContainerRequest>(&b);
            match decode_within::<CreateContainerRequest>(&b) {
                Ok(_) => accepted += 1,
                Err(_) => refused += 1,
            }
        }
        // Both outcomes must be well represented for the test to mean
        // anything.
        assert!(
            refused > 1_000 && accepted > 1_000 && split > 1_000,
            "{refused} refused, {accepted} accepted, {split} split"
        );
    }

    #[test]
    fn crafted_edge_cases_agree_with_decoding() {
        // Field 2 (container), a message holding `bytes` at field 1 (id).
        let ctr = |inner: &[u8]| {
            let mut v = vec![0x12, inner.len() as u8];
            v.extend_from_slice(inner);
            v
        };
        let cases: Vec<Vec<u8>> = vec![
            ctr(&[0x0a, 0x02, 0xc3, 0x28]), // invalid UTF-8 in a string
            ctr(&[0x0a, 0x02, 0xc3, 0xa4]), // valid UTF-8
            ctr(&[0x08, 0x01]),             // known field, other wire type
            ctr(&[0x0b, 0x08, 0x01, 0x0c]), // a group where a string is
            ctr(&[0x0b, 0x08, 0x01]),       // a group without its end
            ctr(&[0x0c]),                   // an end-group tag alone
            ctr(&[0x00, 0x00]),             // field number 0
            ctr(&[0x0e, 0x00]),             // wire type 6
            ctr(&[0x60, 0xff, 0xff, 0xff, 0xff, 0x1f]), // uint32 pid too large
            ctr(&[0x20, 0xff, 0xff, 0xff, 0xff, 0x7f]), // enum state beyond int32
            ctr(&[
                0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ]), // -1
            ctr(&[0xaa, 0x01, 0x03, 0x1a, 0x01, 0x80]), // user: packed gids truncated
            ctr(&[0xaa, 0x01, 0x04, 0x1a, 0x02, 0x01, 0x02]), // user: packed gids
            ctr(&[0xaa, 0x01, 0x02, 0x18, 0x05]), // user: an unpacked gid
            ctr(&[0x2a, 0x04, 0x0a, 0x01, 0x61, 0x13]), // labels entry ending in a group
            ctr(&[0x2a, 0x03, 0x0a, 0x01, 0xff]), // labels key not UTF-8
            ctr(&[0x2a, 0x02, 0x08, 0x01]), // labels entry, key of another type
            vec![0x13, 0x14],               // empty unknown top-level group
            vec![0x12, 0x05, 0x0a, 0x03],   // length beyond the message
        ];
        for case in &cases {
            agrees::<CreateContainerRequest>(case);
        }
        // Nesting: groups in an unknown field, and messages, around the
        // recursion limit.
        for depth in [98, 99, 100, 101, 150] {
            let mut groups = vec![0x0bu8; depth];
            groups.extend(std::iter::repeat_n(0x0c, depth));
            agrees::<CreateContainerRequest>(
                &ctr(&[]).iter().chain(&groups).copied().collect::<Vec<_>>(),
            );
            agrees::<Container>(&groups);
        }
    }

    /// rust-protobuf reads a nested message whose length runs past the end
    /// of the input as far as the input goes; Go refuses it, and so does
    /// the check: such bytes are not forwarded as they are.
    #[test]
    fn a_length_past_the_end_is_refused_as_go_refuses_it() {
        let truncated = [0x12, 0x09, 0x0a, 0x03, b'a', b'b', b'c'];
        assert!(CreateContainerRequest::parse_from_bytes(&truncated).is_ok());
        let err = check::<CreateContainerRequest>(&truncated).unwrap_err();
        assert!(err.to_string().contains("limit"), "{err}");
    }

    #[test]
    fn only_field_finds_a_field_there_once() {
        let req = rich_request();
        let bytes = req.write_to_bytes().unwrap();
        let ctr = only_field(&bytes, 2).unwrap();
        assert_eq!(ctr, req.container.write_to_bytes().unwrap());
        assert_eq!(only_field(ctr, 1), Some(&b"ctr-1"[..]));
        assert_eq!(only_field(ctr, 9_999), None);
        // Twice: decoding merges the two, so no one payload is the field.
        let twice = [bytes.clone(), bytes.clone()].concat();
        assert_eq!(only_field(&twice, 2), None);
        // In another wire type.
        assert_eq!(only_field(&[0x10, 0x01], 2), None);
    }

    #[test]
    fn the_field_numbers_are_nri_protos() {
        use super::field::*;
        let number =
            |d: MessageDescriptor, name: &str| d.field_by_name(name).expect(name).number() as u32;
        let req = CreateContainerRequest::descriptor();
        assert_eq!(number(req.clone(), "pod"), CREATE_CONTAINER_REQUEST_POD);
        assert_eq!(number(req, "container"), CREATE_CONTAINER_REQUEST_CONTAINER);
        for (name, n) in [
            ("name", POD_SANDBOX_NAME),
            ("namespace", POD_SANDBOX_NAMESPACE),
            ("annotations", POD_SANDBOX_ANNOTATIONS),
        ] {
            assert_eq!(number(PodSandbox::descriptor(), name), n);
        }
        for (name, n) in [
            ("id", CONTAINER_ID),
            ("name", CONTAINER_NAME),
            ("hooks", CONTAINER_HOOKS),
            ("linux", CONTAINER_LINUX),
        ] {
            assert_eq!(number(Container::descriptor(), name), n);
        }
        let linux = LinuxContainer::descriptor();
        assert_eq!(
            number(linux.clone(), "resources"),
            LINUX_CONTAINER_RESOURCES
        );
        assert_eq!(
            number(linux, "seccomp_profile"),
            LINUX_CONTAINER_SECCOMP_PROFILE
        );
        assert_eq!(
            number(LinuxResources::descriptor(), "memory"),
            LINUX_RESOURCES_MEMORY
        );
        assert_eq!(
            number(LinuxResources::descriptor(), "cpu"),
            LINUX_RESOURCES_CPU
        );
        let sync = SynchronizeRequest::descriptor();
        assert_eq!(number(sync.clone(), "pods"), SYNCHRONIZE_REQUEST_PODS);
        assert_eq!(
            number(sync.clone(), "containers"),
            SYNCHRONIZE_REQUEST_CONTAINERS
        );
        assert_eq!(number(sync, "more"), SYNCHRONIZE_REQUEST_MORE);
    }

    #[test]
    fn fields_once_tells_an_absent_field_from_a_spoilt_one() {
        let req = rich_request();
        let bytes = req.write_to_bytes().unwrap();
        let ctr = req.container.write_to_bytes().unwrap();
        // Container: id (1) there, pod_sandbox_id (2) there, 9,999 absent.
        assert_eq!(
            fields_once(&ctr, [1, 9_999, 2]),
            Some([Some(&b"ctr-1"[..]), None, Some(&b"pod-1"[..])])
        );
        // Any field asked for there twice spoils the answer; one not asked
        // for may repeat.
        let twice = [bytes.clone(), bytes.clone()].concat();
        assert_eq!(fields_once(&twice, [1]), None);
        assert_eq!(fields_once(&twice, [9_999]), Some([None]));
        // In another wire type, or bytes that are not a message.
        assert_eq!(fields_once(&[0x10, 0x01], [2]), None);
        assert_eq!(fields_once(&[0x12, 0x05, 0x0a], [2]), None);
    }

    #[test]
    fn decode_fields_is_decoding_with_the_other_fields_cleared() {
        let first = rich_request().pod.unwrap();
        let mut second = first.clone();
        second.name = "second".into();
        second.annotations.insert("b".into(), "2".into());
        second.labels.insert("tier".into(), "front".into());
        second.ips = vec!["10.0.0.2".into()];
        // Back to back, the two decode as their merge: each field there
        // twice, and the annotations of the two apart.
        let bytes = [
            first.write_to_bytes().unwrap(),
            second.write_to_bytes().unwrap(),
        ]
        .concat();
        let whole = PodSandbox::parse_from_bytes(&bytes).unwrap();
        let got: PodSandbox = decode_fields(&bytes, &[2, 4, 6]).unwrap();
        let want = PodSandbox {
            name: whole.name.clone(),
            namespace: whole.namespace.clone(),
            annotations: whole.annotations.clone(),
            ..Default::default()
        };
        assert_eq!(got, want);
        assert_eq!((got.name.as_str(), got.annotations.len()), ("second", 2));
        let all: Vec<u32> = (1..=10).collect();
        assert_eq!(decode_fields::<PodSandbox>(&bytes, &all).unwrap(), whole);
        assert_eq!(
            decode_fields::<PodSandbox>(&bytes, &[]).unwrap(),
            PodSandbox::default()
        );
        // Bytes that are not a message.
        assert!(decode_fields::<PodSandbox>(&[0x12, 0x05, 0x0a], &[2]).is_err());
        assert!(decode_fields::<PodSandbox>(&[0x12, 0x05, 0x0a], &[9]).is_err());
    }

    #[test]
    fn split_leading_separates_a_leading_field_from_the_rest() {
        let req = rich_request();
        let bytes = req.write_to_bytes().unwrap();
        let (pod, rest) = split_leading::<CreateContainerRequest>(&bytes, 1).unwrap();
        assert_eq!(
            PodSandbox::parse_from_bytes(only_field(pod, 1).unwrap()).unwrap(),
            *req.pod
        );
        let without_pod = CreateContainerRequest {
            pod: Default::default(),
            ..req.clone()
        };
        assert_eq!(
            CreateContainerRequest::parse_from_bytes(rest).unwrap(),
            without_pod
        );
        // The field there twice, back to back: both entries lead.
        let twice = [
            pod.to_vec(),
            pod.to_vec(),
            without_pod.write_to_bytes().unwrap(),
        ]
        .concat();
        assert_eq!(
            split_leading::<CreateContainerRequest>(&twice, 1)
                .unwrap()
                .0
                .len(),
            2 * pod.len()
        );
        // Absent: an empty lead, all the rest.
        assert_eq!(
            split_leading::<CreateContainerRequest>(rest, 1),
            Some((&[][..], rest))
        );
        // Not leading, or after another field too: no split.
        assert_eq!(
            split_leading::<CreateContainerRequest>(&[rest, pod].concat(), 1),
            None
        );
        assert_eq!(
            split_leading::<CreateContainerRequest>(&[pod, rest, pod].concat(), 1),
            None
        );
        // Bytes that are not a message.
        assert_eq!(
            split_leading::<CreateContainerRequest>(&[0x0a, 0x05, 0x0a], 1),
            None
        );
        // A leading pod that does not decode (a name that is not UTF-8),
        // though the entries are whole: no split.
        let bad_pod = [&[0x0a, 0x03, 0x12, 0x01, 0xff][..], rest].concat();
        assert_eq!(leading_entries(&bad_pod, 1).unwrap().0.len(), 5);
        assert_eq!(split_leading::<CreateContainerRequest>(&bad_pod, 1), None);
    }
}
