//! Runtime-spec JSON with Go's semantics, for specs that cross a language
//! boundary (the C ABI, `go/generate`) and for Rust callers that hold a
//! spec as JSON.
//!
//! * Parsing must not drop anything: a non-empty field oci-spec does not
//!   model (e.g. `vm.hwconfig`, `freebsd`) is refused, naming it, unless
//!   lossy parsing is asked for. Go's zero values (what `omitempty` leaves
//!   out) are not losses.
//! * JSON written here has no `null` members, and a pids section without a
//!   limit is written without one (`{}`), as Go writes it: oci-spec itself
//!   can only write a limit of 0, which a runtime could take literally.
//!
//! [`adjust`], [`update_resources`] and [`resources_to_oci`] are the whole
//! JSON-in, JSON-out calls, so that every caller reads and writes the
//! bytes the same way rather than assembling the steps itself.

use std::fmt;

use oci_spec::runtime::{LinuxResources as OciLinuxResources, Spec};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use nri_api::{ContainerAdjustment, LinuxResources};

use crate::{Generator, SpecError, UNLIMITED_PIDS_LIMIT};

/// Why JSON could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// The input is not JSON, not a spec (or section) of the expected
    /// shape, or holds fields that would be lost.
    Invalid(String),
    /// A value could not be written as JSON.
    Unwritable(String),
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Invalid(m) | JsonError::Unwritable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for JsonError {}

/// Why a JSON-in, JSON-out call failed: the JSON, or the generator.
#[derive(Debug, thiserror::Error)]
pub enum SpecJsonError {
    /// The JSON given could not be read, or the result could not be
    /// written.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// The generator refused the adjustment, update or resources.
    #[error(transparent)]
    Spec(#[from] SpecError),
}

/// An adjusted spec as JSON, and what is left for the caller to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdjustedJson {
    /// The spec, written as this module writes specs.
    pub spec: Vec<u8>,
    /// A JSON array of the CDI device names left for the caller to inject
    /// (see [`Adjusted::pending_cdi_devices`](crate::Adjusted::pending_cdi_devices)).
    pub pending_cdi_devices: Vec<u8>,
}

/// Applies `adjustment` to the spec given as JSON, with
/// [`Generator::adjust`]. The spec is parsed knowing the pids limit the
/// adjustment brings, so that an unlimited one is written without a limit.
pub fn adjust(
    generator: &Generator,
    spec: &[u8],
    lossy: bool,
    adjustment: &ContainerAdjustment,
) -> Result<AdjustedJson, SpecJsonError> {
    let pids = adjustment.linux.resources.pids.as_ref().map(|p| p.limit);
    let mut parsed = parse_spec(spec, lossy, pids)?;
    let adjusted = generator.adjust(&mut parsed, adjustment)?;
    Ok(AdjustedJson {
        spec: to_vec(&spec_to_json(&parsed)?)?,
        pending_cdi_devices: to_vec(&adjusted.pending_cdi_devices)?,
    })
}

/// Applies a resource update to the spec given as JSON, with
/// [`Generator::update_resources`], and returns the updated spec as JSON;
/// pids as for [`adjust`].
pub fn update_resources(
    generator: &Generator,
    spec: &[u8],
    lossy: bool,
    update: &LinuxResources,
) -> Result<Vec<u8>, SpecJsonError> {
    let pids = update.pids.as_ref().map(|p| p.limit);
    let mut parsed = parse_spec(spec, lossy, pids)?;
    generator.update_resources(&mut parsed, update)?;
    Ok(to_vec(&spec_to_json(&parsed)?)?)
}

/// [`crate::resources_to_oci`] written as runtime-spec `LinuxResources`
/// JSON, for a runtime's update call: no `null`s, and an unlimited pids
/// limit written as a pids section without one (`{}`), as Go writes it.
pub fn resources_to_oci(r: &LinuxResources) -> Result<Vec<u8>, SpecJsonError> {
    let mut oci = crate::resources_to_oci(r)?;
    unset_unlimited_pids(&mut oci, r);
    Ok(to_vec(&resources_to_json(&oci)?)?)
}

/// Marks the pids limit of `oci`, converted from `from`, as unset when
/// `from` leaves pids unlimited, so that it is written without a limit.
pub fn unset_unlimited_pids(oci: &mut OciLinuxResources, from: &nri_api::LinuxResources) {
    let unlimited = from
        .pids
        .as_ref()
        .is_some_and(|p| p.limit <= UNLIMITED_PIDS_LIMIT);
    if let (true, Some(p)) = (unlimited, oci.pids_mut().as_mut()) {
        p.set_limit(PIDS_UNSET);
    }
}

/// Parses resources a caller answered with: as [`from_value`], and a pids
/// section without a limit stays without one.
pub fn resources_from_value(value: Value, lossy: bool) -> Result<OciLinuxResources, JsonError> {
    let unset = pids_limit_unset(&value);
    let mut r: OciLinuxResources = from_value(value, lossy)?;
    if let (true, Some(p)) = (unset, r.pids_mut().as_mut()) {
        p.set_limit(PIDS_UNSET);
    }
    Ok(r)
}

/// A pids limit the JSON did not give: written back as no limit. oci-spec
/// 0.10 has no "unset" for it (a plain `i64`), and would write 0.
const PIDS_UNSET: i64 = i64::MIN;

fn invalid_spec(message: impl Into<String>) -> JsonError {
    JsonError::Invalid(message.into())
}

/// Parses JSON text.
pub fn parse_value(input: &[u8]) -> Result<Value, JsonError> {
    serde_json::from_slice(input).map_err(|e| invalid_spec(format!("invalid JSON: {e}")))
}

/// Parses a spec. `pids` is the pids limit the adjustment or update will
/// apply, if any: a pids section it creates without a limit is created
/// here, marked unset, so it is written back without one.
pub fn parse_spec(input: &[u8], lossy: bool, pids: Option<i64>) -> Result<Spec, JsonError> {
    let mut value = parse_value(input)?;
    if pids.is_some_and(|l| l <= UNLIMITED_PIDS_LIMIT) {
        let resources = value
            .as_object_mut()
            .and_then(|spec| section(spec, "linux"))
            .and_then(|linux| section(linux, "resources"));
        if let Some(r) = resources {
            if r.get("pids").is_none_or(Value::is_null) {
                r.insert("pids".into(), Value::Object(Map::new()));
            }
        }
    }
    let unset = pids_limit_unset(value.pointer("/linux/resources").unwrap_or(&Value::Null));
    let mut spec: Spec = from_value(value, lossy)?;
    if unset {
        if let Some(p) = spec
            .linux_mut()
            .as_mut()
            .and_then(|l| l.resources_mut().as_mut())
            .and_then(|r| r.pids_mut().as_mut())
        {
            p.set_limit(PIDS_UNSET);
        }
    }
    Ok(spec)
}

/// The object member `key`, created empty if missing or `null`.
fn section<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let v = m.entry(key).or_insert(Value::Null);
    if v.is_null() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut()
}

/// Whether `resources` (JSON) has a pids section without a limit.
fn pids_limit_unset(resources: &Value) -> bool {
    resources
        .get("pids")
        .is_some_and(|p| p.is_object() && p.get("limit").is_none_or(Value::is_null))
}

/// Parses `value` as `T`, refusing (unless `lossy`) anything `T` drops.
pub fn from_value<T: DeserializeOwned + Serialize>(
    value: Value,
    lossy: bool,
) -> Result<T, JsonError> {
    let parsed: T = serde_json::from_value(value.clone())
        .map_err(|e| invalid_spec(format!("invalid spec: {e}")))?;
    if !lossy {
        let back = serde_json::to_value(&parsed)
            .map_err(|e| invalid_spec(format!("cannot serialize the spec: {e}")))?;
        let mut lost = Vec::new();
        lost_fields(&value, &back, &mut String::new(), &mut lost);
        if !lost.is_empty() {
            return Err(invalid_spec(format!(
                "spec fields oci-spec 0.10 cannot hold would be lost: {}",
                lost.join(", ")
            )));
        }
    }
    Ok(parsed)
}

/// Collects (up to a few) the paths of non-empty input values missing from
/// or changed in `output`.
fn lost_fields(input: &Value, output: &Value, path: &mut String, lost: &mut Vec<String>) {
    const MAX: usize = 5;
    if lost.len() >= MAX || is_empty(input) {
        return;
    }
    let len = path.len();
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (key, value) in i {
                path.push_str(if len == 0 { "" } else { "." });
                path.push_str(key);
                lost_fields(value, o.get(key).unwrap_or(&Value::Null), path, lost);
                path.truncate(len);
            }
        }
        (Value::Array(i), Value::Array(o)) if i.len() == o.len() => {
            for (n, (a, b)) in i.iter().zip(o).enumerate() {
                path.push_str(&format!("[{n}]"));
                lost_fields(a, b, path, lost);
                path.truncate(len);
            }
        }
        (a, b) if a == b => {}
        _ if lost.len() < MAX => lost.push(if path.is_empty() {
            "(spec)".into()
        } else {
            path.clone()
        }),
        _ => {}
    }
}

/// Go's zero values: what `omitempty` leaves out, so not a loss.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

fn serialize_failure(e: serde_json::Error) -> JsonError {
    JsonError::Unwritable(format!("cannot serialize the spec: {e}"))
}

/// Writes `v` as JSON text.
pub fn to_vec<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, JsonError> {
    serde_json::to_vec(v).map_err(serialize_failure)
}

/// A spec as the library writes it: no `null`s, unset pids limits left out.
pub fn spec_to_json(spec: &Spec) -> Result<Value, JsonError> {
    let mut v = serde_json::to_value(spec).map_err(serialize_failure)?;
    if let Some(r) = v.pointer_mut("/linux/resources") {
        drop_unset_pids_limit(r);
    }
    strip_nulls(&mut v);
    Ok(v)
}

/// Resources as the library writes them: no `null`s, an unset pids limit
/// left out.
pub fn resources_to_json(r: &OciLinuxResources) -> Result<Value, JsonError> {
    let mut v = serde_json::to_value(r).map_err(serialize_failure)?;
    drop_unset_pids_limit(&mut v);
    strip_nulls(&mut v);
    Ok(v)
}

fn drop_unset_pids_limit(resources: &mut Value) {
    if let Some(Value::Object(p)) = resources.get_mut("pids") {
        if p.get("limit").and_then(Value::as_i64) == Some(PIDS_UNSET) {
            p.remove("limit");
        }
    }
}

/// Removes `null` object members, which every reader takes as absent.
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn bytes(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn a_field_oci_spec_cannot_hold_is_refused_by_name_unless_lossy() {
        let spec = bytes(json!({"ociVersion": "1.2.0", "freebsd": {"jail": {"name": "j"}}}));
        let err = parse_spec(&spec, false, None).unwrap_err();
        assert!(matches!(err, JsonError::Invalid(_)));
        assert!(err.to_string().contains("freebsd"), "{err}");
        assert!(parse_spec(&spec, true, None).is_ok());
    }

    #[test]
    fn go_zero_values_are_not_losses() {
        let spec = bytes(json!({"ociVersion": "1.2.0", "hostname": "", "mounts": []}));
        assert!(parse_spec(&spec, false, None).is_ok());
    }

    #[test]
    fn a_pids_section_without_a_limit_is_written_without_one() {
        let spec = bytes(json!({"ociVersion": "1.2.0", "linux": {"resources": {"pids": {}}}}));
        let parsed = parse_spec(&spec, false, None).unwrap();
        let back = spec_to_json(&parsed).unwrap();
        assert_eq!(back.pointer("/linux/resources/pids"), Some(&json!({})));
    }

    #[test]
    fn an_unlimited_pids_limit_about_to_be_applied_creates_an_unset_section() {
        let spec = bytes(json!({"ociVersion": "1.2.0", "linux": {}}));
        let parsed = parse_spec(&spec, false, Some(UNLIMITED_PIDS_LIMIT)).unwrap();
        let back = spec_to_json(&parsed).unwrap();
        assert_eq!(back.pointer("/linux/resources/pids"), Some(&json!({})));
    }

    #[test]
    fn written_json_has_no_nulls() {
        let parsed = parse_spec(&bytes(json!({"ociVersion": "1.2.0"})), false, None).unwrap();
        let text = String::from_utf8(to_vec(&spec_to_json(&parsed).unwrap()).unwrap()).unwrap();
        assert!(!text.contains("null"), "{text}");
    }

    /// `resources_to_oci`'s text, pinned: go/generate and the C tests
    /// compare it with upstream's byte for byte.
    fn oci_text(r: &LinuxResources) -> String {
        String::from_utf8(resources_to_oci(r).unwrap()).unwrap()
    }

    fn with_pids(limit: i64) -> LinuxResources {
        let mut update = nri_api::ContainerUpdate::for_container("c");
        update.set_linux_pid_limits(limit);
        update.linux.resources.as_ref().unwrap().clone()
    }

    #[test]
    fn resources_to_oci_writes_the_update_calls_json() {
        assert_eq!(
            oci_text(&LinuxResources::new()),
            r#"{"cpu":{},"memory":{}}"#
        );
        let mut update = nri_api::ContainerUpdate::for_container("c");
        update.set_linux_memory_limit(1 << 20);
        update.set_linux_memory_swappiness(6);
        update.set_linux_memory_disable_oom_killer();
        update.set_linux_cpu_shares(512);
        update.set_linux_cpu_quota(-1);
        update.set_linux_cpuset_cpus("0-3");
        update.set_linux_pid_limits(100);
        update.add_linux_hugepage_limit("2MB", 8);
        update.add_linux_unified("io.weight", "9");
        update.set_linux_blockio_class("left-out");
        assert_eq!(
            oci_text(update.linux.resources.as_ref().unwrap()),
            concat!(
                r#"{"cpu":{"cpus":"0-3","quota":-1,"shares":512},"#,
                r#""hugepageLimits":[{"limit":8,"pageSize":"2MB"}],"#,
                r#""memory":{"disableOOMKiller":true,"limit":1048576,"swappiness":6},"#,
                r#""pids":{"limit":100},"unified":{"io.weight":"9"}}"#
            )
        );
    }

    #[test]
    fn resources_to_oci_writes_an_unlimited_pids_limit_as_none() {
        // -1 and below: no limit, written as an empty section (oci-spec
        // alone would write 0, which means no process at all).
        for unlimited in [UNLIMITED_PIDS_LIMIT, i64::MIN] {
            assert_eq!(
                oci_text(&with_pids(unlimited)),
                r#"{"cpu":{},"memory":{},"pids":{}}"#
            );
        }
        assert_eq!(
            oci_text(&with_pids(0)),
            r#"{"cpu":{},"memory":{},"pids":{"limit":0}}"#
        );
    }

    #[test]
    fn resources_to_oci_refuses_what_the_spec_cannot_hold() {
        let mut update = nri_api::ContainerUpdate::for_container("c");
        update.add_linux_hugepage_limit("1GB", u64::MAX);
        let err = resources_to_oci(update.linux.resources.as_ref().unwrap()).unwrap_err();
        assert!(matches!(
            err,
            SpecJsonError::Spec(SpecError::OutOfRange { .. })
        ));
        assert_eq!(
            err.to_string(),
            "cannot apply hugepage limit 18446744073709551615: out of range for the OCI spec field"
        );
    }

    #[test]
    fn adjust_writes_an_unlimited_pids_limit_it_applies_as_none() {
        let mut adjustment = ContainerAdjustment::new();
        adjustment.set_linux_pid_limits(UNLIMITED_PIDS_LIMIT);
        adjustment.add_cdi_device(nri_api::CDIDevice {
            name: "vendor.com/dev=one".into(),
            ..Default::default()
        });
        let spec = bytes(json!({"ociVersion": "1.2.0", "linux": {"resources": {}}}));
        let out = adjust(&Generator::builder().build(), &spec, false, &adjustment).unwrap();
        assert_eq!(
            String::from_utf8(out.spec).unwrap(),
            r#"{"linux":{"resources":{"pids":{}}},"ociVersion":"1.2.0"}"#
        );
        assert_eq!(out.pending_cdi_devices, br#"["vendor.com/dev=one"]"#);
    }

    #[test]
    fn update_resources_writes_the_updated_spec() {
        let spec = bytes(json!({"ociVersion": "1.2.0", "linux": {"resources": {}}}));
        let out =
            update_resources(&Generator::builder().build(), &spec, false, &with_pids(5)).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"linux":{"resources":{"pids":{"limit":5}}},"ociVersion":"1.2.0"}"#
        );
    }

    #[test]
    fn the_whole_calls_tell_bad_json_from_a_refused_change() {
        let g = Generator::builder().build();
        let err = update_resources(&g, b"{", false, &with_pids(5)).unwrap_err();
        assert!(
            matches!(err, SpecJsonError::Json(JsonError::Invalid(_))),
            "{err}"
        );
        let mut adjustment = ContainerAdjustment::new();
        adjustment.add_or_replace_namespace(nri_api::LinuxNamespace {
            type_: "nowhere".into(),
            ..Default::default()
        });
        let spec = bytes(json!({"ociVersion": "1.2.0"}));
        let err = adjust(&g, &spec, false, &adjustment).unwrap_err();
        assert!(
            matches!(err, SpecJsonError::Spec(SpecError::UnknownNamespace(_))),
            "{err}"
        );
    }

    #[test]
    fn not_json_is_invalid() {
        assert!(matches!(parse_value(b"{"), Err(JsonError::Invalid(_))));
    }
}
