//! `nri-wire-echo`: decodes protobuf messages with nri-rs's generated
//! `nri_stub::api` types and writes them back re-encoded.
//!
//! Driven by the Go tests in `go/wirecompat`, which build messages with
//! upstream's Go types, send them here and require that what comes back
//! decodes (with upstream's types again) to an equal message.
//!
//! # Protocol (stdin → stdout, until EOF on stdin)
//!
//! Request:  `u32 BE name length`, `name`, `u32 BE payload length`, `payload`
//! Reply:    `u8 status` (0 ok, 1 error), `u32 BE length`, `bytes`
//!
//! `name` is the short name of a top-level message of `crates/nri-api/proto/nri.proto`
//! (e.g. `ContainerAdjustment`). On success the reply bytes are the message
//! re-encoded by rust-protobuf; on error they are UTF-8 error text.
//!
//! With the name prefixed by `!unknown:` (e.g. `!unknown:PodSandbox`) the
//! decoded message is also checked, recursively through every nested
//! message, repeated field and map, for fields our schema does not know
//! (rust-protobuf keeps those as unknown fields and would otherwise write
//! them back unchanged, hiding the gap) and for enum numbers our enums do
//! not define; any finding is an error reply listing every offending path.
//!
//! Bad requests (unknown names, undecodable payloads, oversized frames) get
//! an error reply and the loop goes on; only a stream that ends in the middle
//! of a frame, or a failing stdout, ends the process with a non-zero status.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;

use nri_stub::api;
use protobuf::reflect::{ReflectFieldRef, ReflectValueRef};
use protobuf::{MessageDyn, MessageFull};

/// Prefix of a request name asking for the unknown-field check.
const STRICT_PREFIX: &str = "!unknown:";
/// Longest accepted message name; longer ones are skipped and refused.
const MAX_NAME_LEN: u32 = 4096;
/// Largest accepted payload; larger ones are skipped and refused.
const MAX_PAYLOAD_LEN: u32 = 64 << 20;

type Decoder = fn(&[u8]) -> protobuf::Result<Box<dyn MessageDyn>>;

fn decode<M: MessageFull>(bytes: &[u8]) -> protobuf::Result<Box<dyn MessageDyn>> {
    Ok(Box::new(M::parse_from_bytes(bytes)?))
}

macro_rules! message_table {
    ($($name:ident),* $(,)?) => {
        /// Every top-level message of `crates/nri-api/proto/nri.proto`, by short name.
        const MESSAGES: &[(&str, Decoder)] = &[
            $((stringify!($name), decode::<api::$name> as Decoder),)*
        ];
    };
}

message_table!(
    RegisterPluginRequest,
    UpdateContainersRequest,
    UpdateContainersResponse,
    LogRequest,
    ConfigureRequest,
    ConfigureResponse,
    FailurePolicy,
    SynchronizeRequest,
    SynchronizeResponse,
    Empty,
    RunPodSandboxRequest,
    RunPodSandboxResponse,
    UpdatePodSandboxRequest,
    UpdatePodSandboxResponse,
    PostUpdatePodSandboxRequest,
    PostUpdatePodSandboxResponse,
    StopPodSandboxRequest,
    StopPodSandboxResponse,
    RemovePodSandboxRequest,
    RemovePodSandboxResponse,
    CreateContainerRequest,
    CreateContainerResponse,
    PostCreateContainerRequest,
    PostCreateContainerResponse,
    StartContainerRequest,
    StartContainerResponse,
    PostStartContainerRequest,
    PostStartContainerResponse,
    UpdateContainerRequest,
    UpdateContainerResponse,
    PostUpdateContainerRequest,
    PostUpdateContainerResponse,
    StopContainerRequest,
    StopContainerResponse,
    RemoveContainerRequest,
    RemoveContainerResponse,
    StateChangeEvent,
    ValidateContainerAdjustmentRequest,
    PluginInstance,
    ValidateContainerAdjustmentResponse,
    PodSandbox,
    LinuxPodSandbox,
    Container,
    Image,
    Mount,
    Hooks,
    Hook,
    LinuxContainer,
    LinuxNamespace,
    LinuxDevice,
    LinuxDeviceCgroup,
    CDIDevice,
    User,
    LinuxResources,
    LinuxMemory,
    LinuxCPU,
    HugepageLimit,
    SecurityProfile,
    POSIXRlimit,
    LinuxPids,
    LinuxIOPriority,
    LinuxNetDevice,
    LinuxScheduler,
    ContainerAdjustment,
    LinuxContainerAdjustment,
    LinuxSeccomp,
    LinuxSyscall,
    LinuxSeccompArg,
    LinuxMemoryPolicy,
    ContainerUpdate,
    LinuxContainerUpdate,
    ContainerEviction,
    LinuxRdt,
    KeyValue,
    OptionalString,
    OptionalRepeatedString,
    OptionalInt,
    OptionalInt32,
    OptionalUInt32,
    OptionalInt64,
    OptionalUInt64,
    OptionalBool,
    OptionalFileMode,
    CompoundFieldOwners,
    FieldOwners,
    OwningPlugins,
);

fn decoder(name: &str) -> Option<Decoder> {
    MESSAGES.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

/// Collects, into `findings`, every unknown field and undefined enum number
/// found in `msg` or anything nested in it. `path` names `msg`.
fn find_unknowns(msg: &dyn MessageDyn, path: &str, findings: &mut Vec<String>) {
    let mut numbers: Vec<(u32, String)> = msg
        .unknown_fields_dyn()
        .iter()
        .map(|(number, value)| (number, format!("{:?}", value.wire_type())))
        .collect();
    numbers.sort();
    for (number, wire_type) in numbers {
        findings.push(format!(
            "{path}: unknown field number {number} (wire type {wire_type}) in {}",
            msg.descriptor_dyn().full_name()
        ));
    }
    for field in msg.descriptor_dyn().fields() {
        let field_path = format!("{path}.{}", field.name());
        match field.get_reflect(msg) {
            ReflectFieldRef::Optional(value) => {
                if let Some(value) = value.value() {
                    find_unknowns_in_value(&value, &field_path, findings);
                }
            }
            ReflectFieldRef::Repeated(values) => {
                for (i, value) in values.into_iter().enumerate() {
                    find_unknowns_in_value(&value, &format!("{field_path}[{i}]"), findings);
                }
            }
            ReflectFieldRef::Map(map) => {
                for (key, value) in &map {
                    let entry_path = format!("{field_path}[{key}]");
                    find_unknowns_in_value(&key, &entry_path, findings);
                    find_unknowns_in_value(&value, &entry_path, findings);
                }
            }
        }
    }
}

fn find_unknowns_in_value(value: &ReflectValueRef, path: &str, findings: &mut Vec<String>) {
    match value {
        ReflectValueRef::Message(msg) => find_unknowns(&**msg, path, findings),
        ReflectValueRef::Enum(descriptor, number)
            if descriptor.value_by_number(*number).is_none() =>
        {
            findings.push(format!(
                "{path}: enum number {number} is not defined in {}",
                descriptor.full_name()
            ));
        }
        _ => {}
    }
}

/// Decodes `payload` as the message called `name` (optionally prefixed with
/// [`STRICT_PREFIX`]) and re-encodes it.
fn echo(name: &str, payload: &[u8]) -> Result<Vec<u8>, String> {
    let (strict, type_name) = match name.strip_prefix(STRICT_PREFIX) {
        Some(rest) => (true, rest),
        None => (false, name),
    };
    let decode = decoder(type_name).ok_or_else(|| {
        format!("unknown message type {type_name:?} (not a top-level message of nri.proto)")
    })?;
    let msg = decode(payload).map_err(|e| format!("decoding {type_name}: {e}"))?;
    if strict {
        let mut findings = Vec::new();
        find_unknowns(&*msg, type_name, &mut findings);
        if !findings.is_empty() {
            return Err(format!(
                "{type_name} carries data our schema does not know:\n{}",
                findings.join("\n")
            ));
        }
    }
    msg.write_to_bytes_dyn()
        .map_err(|e| format!("re-encoding {type_name}: {e}"))
}

/// [`echo`], with any panic turned into an error reply.
fn echo_guarded(name: &str, payload: &[u8]) -> Result<Vec<u8>, String> {
    panic::catch_unwind(AssertUnwindSafe(|| echo(name, payload))).unwrap_or_else(|cause| {
        let what = cause
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| cause.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_string());
        Err(format!("PANIC while handling {name:?}: {what}"))
    })
}

/// Reads a big-endian u32; `Ok(None)` on a clean EOF before its first byte.
fn read_u32(r: &mut impl Read, at_frame_start: bool) -> io::Result<Option<u32>> {
    let mut buf = [0u8; 4];
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) if filled == 0 && at_frame_start => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "input ended inside a frame",
                ))
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(u32::from_be_bytes(buf)))
}

fn read_len(r: &mut impl Read) -> io::Result<u32> {
    read_u32(r, false)?.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))
}

/// Reads `len` bytes, or skips them and returns `None` if `len > max`.
fn read_bytes(r: &mut impl Read, len: u32, max: u32) -> io::Result<Option<Vec<u8>>> {
    if len > max {
        let skipped = io::copy(&mut r.by_ref().take(u64::from(len)), &mut io::sink())?;
        if skipped < u64::from(len) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "input ended inside a frame",
            ));
        }
        return Ok(None);
    }
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf)?;
    Ok(Some(buf))
}

fn write_reply(w: &mut impl Write, result: &Result<Vec<u8>, String>) -> io::Result<()> {
    let (status, body): (u8, &[u8]) = match result {
        Ok(bytes) => (0, bytes),
        Err(text) => (1, text.as_bytes()),
    };
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "reply too large"))?;
    w.write_all(&[status])?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(body)?;
    w.flush()
}

/// Serves requests from `r` until EOF, writing replies to `w`.
fn serve(r: &mut impl Read, w: &mut impl Write) -> io::Result<()> {
    loop {
        let Some(name_len) = read_u32(r, true)? else {
            return Ok(());
        };
        let name = read_bytes(r, name_len, MAX_NAME_LEN)?;
        let payload_len = read_len(r)?;
        let payload = read_bytes(r, payload_len, MAX_PAYLOAD_LEN)?;
        let result = match (name, payload) {
            (None, _) => Err(format!(
                "message name of {name_len} bytes exceeds the limit of {MAX_NAME_LEN}"
            )),
            (_, None) => Err(format!(
                "payload of {payload_len} bytes exceeds the limit of {MAX_PAYLOAD_LEN}"
            )),
            (Some(name), Some(payload)) => match String::from_utf8(name) {
                Ok(name) => echo_guarded(&name, &payload),
                Err(_) => Err("message name is not valid UTF-8".to_string()),
            },
        };
        write_reply(w, &result)?;
    }
}

fn main() -> ExitCode {
    // Panics are reported in the reply; keep stderr for real failures.
    panic::set_hook(Box::new(|_| {}));
    let mut input = BufReader::new(io::stdin().lock());
    let mut output = BufWriter::new(io::stdout().lock());
    match serve(&mut input, &mut output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nri-wire-echo: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protobuf::Message;
    use std::collections::BTreeSet;

    fn frame(name: &str, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(name.len() as u32).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    fn replies(mut out: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut all = Vec::new();
        while !out.is_empty() {
            let status = out[0];
            let len = u32::from_be_bytes(out[1..5].try_into().unwrap()) as usize;
            all.push((status, out[5..5 + len].to_vec()));
            out = &out[5 + len..];
        }
        all
    }

    #[test]
    fn table_covers_every_top_level_message() {
        let ours: BTreeSet<&str> = MESSAGES.iter().map(|(n, _)| *n).collect();
        assert_eq!(ours.len(), MESSAGES.len(), "duplicate names in the table");
        let proto: BTreeSet<String> = api::file_descriptor()
            .messages()
            .map(|m| m.name().to_string())
            .collect();
        let proto: BTreeSet<&str> = proto.iter().map(String::as_str).collect();
        assert_eq!(ours, proto);
    }

    #[test]
    fn round_trips_and_survives_bad_input() {
        let mut msg = api::RegisterPluginRequest::new();
        msg.plugin_name = "p".into();
        msg.plugin_idx = "10".into();
        let good = msg.write_to_bytes().unwrap();

        let mut input = Vec::new();
        input.extend(frame("RegisterPluginRequest", &good));
        input.extend(frame("NoSuchMessage", &good));
        input.extend(frame("RegisterPluginRequest", &[0x0a, 0x05, b'a'])); // truncated
        input.extend(frame(
            "!unknown:RegisterPluginRequest",
            &[0x0a, 0x01, b'a', 0xf8, 0x01, 0x07],
        ));
        input.extend(frame(
            "RegisterPluginRequest",
            &[0x0a, 0x01, b'a', 0xf8, 0x01, 0x07],
        ));
        input.extend(frame("!unknown:RegisterPluginRequest", &good));
        let mut out = Vec::new();
        serve(&mut &input[..], &mut out).unwrap();
        let r = replies(&out);
        assert_eq!(r.len(), 6);
        assert_eq!(r[0], (0, good.clone()));
        assert_eq!(r[1].0, 1);
        assert!(String::from_utf8_lossy(&r[1].1).contains("unknown message type"));
        assert_eq!(r[2].0, 1);
        assert_eq!(r[3].0, 1);
        assert!(String::from_utf8_lossy(&r[3].1).contains("unknown field number 31"));
        assert_eq!(r[4].0, 0, "non-strict mode keeps unknown fields");
        assert_eq!(r[5], (0, good));
    }

    #[test]
    fn strict_mode_looks_into_nested_messages_maps_and_enums() {
        let mut nested = api::LinuxPodSandbox::new();
        nested.mut_unknown_fields().add_varint(99, 1);
        let mut pod = api::PodSandbox::new();
        pod.linux = protobuf::MessageField::some(nested);
        let mut owners = api::CompoundFieldOwners::new();
        owners
            .mut_unknown_fields()
            .add_length_delimited(7, b"x".to_vec());
        let mut field_owners = api::FieldOwners::new();
        field_owners.compound.insert(6, owners);
        let mut ioprio = api::LinuxIOPriority::new();
        ioprio.class = protobuf::EnumOrUnknown::from_i32(42);

        let err = echo("!unknown:PodSandbox", &pod.write_to_bytes().unwrap()).unwrap_err();
        assert!(
            err.contains("PodSandbox.linux: unknown field number 99"),
            "{err}"
        );
        let err = echo(
            "!unknown:FieldOwners",
            &field_owners.write_to_bytes().unwrap(),
        )
        .unwrap_err();
        assert!(
            err.contains("FieldOwners.compound[6]: unknown field number 7"),
            "{err}"
        );
        let err = echo(
            "!unknown:LinuxIOPriority",
            &ioprio.write_to_bytes().unwrap(),
        )
        .unwrap_err();
        assert!(err.contains("enum number 42"), "{err}");
    }

    #[test]
    fn oversized_and_truncated_frames() {
        let mut input = Vec::new();
        input.extend_from_slice(&(MAX_NAME_LEN + 1).to_be_bytes());
        input.extend(vec![b'x'; MAX_NAME_LEN as usize + 1]);
        input.extend_from_slice(&0u32.to_be_bytes());
        input.extend(frame("Empty", &[]));
        let mut out = Vec::new();
        serve(&mut &input[..], &mut out).unwrap();
        let r = replies(&out);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].0, 1);
        assert_eq!(r[1], (0, vec![]));

        let truncated = &frame("Empty", &[1, 2, 3])[..10];
        assert!(serve(&mut &truncated[..], &mut Vec::new()).is_err());
    }
}
