//! `-verbose` dumps of NRI objects: YAML with protobuf field names, one
//! log line per YAML line, as the Go samples' `dump` helper prints them.

use log::info;
use protobuf::MessageFull;
use serde_json::Value;

/// An NRI message as a JSON value with the protobuf field names.
pub fn message<M: MessageFull>(msg: &M) -> Value {
    let options = protobuf_json_mapping::PrintOptions {
        proto_field_name: true,
        ..Default::default()
    };
    protobuf_json_mapping::print_to_string_with_options(msg, &options)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

/// Several NRI messages as a JSON array.
pub fn messages<M: MessageFull>(msgs: &[M]) -> Value {
    Value::Array(msgs.iter().map(message).collect())
}

/// An optional NRI message (`null` when absent).
pub fn optional<M: MessageFull>(msg: Option<&M>) -> Value {
    msg.map(message).unwrap_or(Value::Null)
}

/// Logs the pod and the container of an event (`-verbose`).
pub fn dump_pod_container(
    prefix: &str,
    pod: &nri_stub::api::PodSandbox,
    ctr: Option<&nri_stub::api::Container>,
) {
    dump(prefix, "pod", &message(pod));
    if let Some(ctr) = ctr {
        dump(prefix, "container", &message(ctr));
    }
}

/// The log name of a container being created (`pod/container`), after
/// dumping the event's pod and container when `verbose`.
pub fn creating(
    verbose: bool,
    pod: &nri_stub::api::PodSandbox,
    ctr: &nri_stub::api::Container,
) -> String {
    if verbose {
        dump_pod_container("CreateContainer", pod, Some(ctr));
    }
    crate::container_name(Some(pod), ctr)
}

/// Logs `value` as YAML under `prefix: tag:`.
pub fn dump(prefix: &str, tag: &str, value: &Value) {
    let yaml = crate::goyaml::to_string(value);
    info!("{prefix}: {tag}:");
    for line in yaml.trim().lines() {
        info!("{prefix}:    {line}");
    }
}
