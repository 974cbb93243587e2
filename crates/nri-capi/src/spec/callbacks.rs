//! The spec generator's options as C callbacks: the callback types, and
//! how each is called (its input as JSON, its answer read back with the
//! same JSON rules as specs).

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CString};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nri_spec::json;
use nri_spec::oci_spec::runtime::{LinuxResources as OciLinuxResources, Spec};
use nri_spec::BoxError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::callbacks::{nri_reply, UserData};
use crate::error::to_cstring;

/// The C callback types without their `Option`.
pub(super) type MapFn = unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut nri_reply);
pub(super) type ClassFn = unsafe extern "C" fn(*mut c_void, *const c_char, *mut nri_reply);
pub(super) type CdiFn = unsafe extern "C" fn(
    *mut c_void,
    *const u8,
    usize,
    *const *const c_char,
    usize,
    *mut nri_reply,
);
pub(super) type PropagationFn =
    unsafe extern "C" fn(*mut c_void, *const c_char, *const *const c_char, usize, *mut nri_reply);

/// What a setter hands its option: the callback, its user data, and the
/// generator's lossy-parsing switch.
pub(super) struct Callback<F> {
    pub(super) f: F,
    pub(super) data: Arc<UserData>,
    pub(super) lossy: Arc<AtomicBool>,
}

/// A caller callback's error (or unusable answer), told apart from the
/// generator's own refusals by its type.
#[derive(Debug)]
pub(super) struct CallbackError(String);

impl fmt::Display for CallbackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallbackError {}

pub(super) fn callback_error(message: impl Into<String>) -> BoxError {
    Box::new(CallbackError(message.into()))
}

/// Calls a callback with a fresh reply and returns the reply's data.
pub(super) fn call(f: impl FnOnce(*mut nri_reply)) -> Result<Vec<u8>, BoxError> {
    let mut reply = nri_reply::default();
    f(&mut reply);
    reply
        .into_result()
        .map_err(|e| callback_error(e.to_string()))
}

pub(super) fn call_map_filter(
    what: &str,
    f: MapFn,
    data: &UserData,
    map: &HashMap<String, String>,
) -> Result<HashMap<String, String>, BoxError> {
    let json = serde_json::to_vec(map)?;
    // SAFETY: calls the callback given to nri_spec_generator_set_label_filter
    // or _set_annotation_filter as nri_spec_map_fn documents, with its user
    // data, on the thread of the call that needs it (as nri_spec_generator
    // documents); `json` holds `json.len()` bytes, and it and the reply live
    // until it returns.
    let answer = call(|reply| unsafe { f(data.ptr, json.as_ptr(), json.len(), reply) })?;
    if answer.is_empty() {
        return Ok(map.clone());
    }
    let filtered: Option<HashMap<String, String>> = serde_json::from_slice(&answer)
        .map_err(|e| callback_error(format!("{what} answered with invalid JSON: {e}")))?;
    Ok(filtered.unwrap_or_default())
}

pub(super) fn call_resolver<T: DeserializeOwned + Serialize>(
    what: &str,
    c: &Callback<ClassFn>,
    class: &str,
) -> Result<Option<T>, BoxError> {
    let class = to_cstring(class.to_string());
    // SAFETY: calls the callback given to
    // nri_spec_generator_set_blockio_resolver or _set_rdt_resolver as
    // nri_spec_class_fn documents, with its user data, on the thread of the
    // call that needs it (as nri_spec_generator documents); the NUL-terminated
    // `class` and the reply live until it returns.
    let answer = call(|reply| unsafe { (c.f)(c.data.ptr, class.as_ptr(), reply) })?;
    if answer.is_empty() {
        return Ok(None);
    }
    let value = c.answer_value(what, &answer)?;
    if value.is_null() {
        return Ok(None);
    }
    c.answer_as(what, value).map(Some)
}

pub(super) fn call_checker(
    c: &Callback<MapFn>,
    resources: Option<&mut OciLinuxResources>,
) -> Result<(), BoxError> {
    const WHAT: &str = "resource checker";
    let view = match resources.as_deref() {
        Some(r) => json::resources_to_json(r).map_err(|e| callback_error(e.to_string()))?,
        None => Value::Null,
    };
    let json = json::to_vec(&view).map_err(|e| callback_error(e.to_string()))?;
    // SAFETY: calls the callback given to
    // nri_spec_generator_set_resource_checker as nri_spec_resources_fn
    // documents, with its user data, on the thread of the call that needs it
    // (as nri_spec_generator documents); `json` holds `json.len()` bytes, and
    // it and the reply live until it returns.
    let answer = call(|reply| unsafe { (c.f)(c.data.ptr, json.as_ptr(), json.len(), reply) })?;
    let Some(resources) = resources else {
        return Ok(());
    };
    if answer.is_empty() {
        return Ok(());
    }
    let value = c.answer_value(WHAT, &answer)?;
    *resources = json::resources_from_value(value, c.lossy())
        .map_err(|e| callback_error(format!("{WHAT}: {e}")))?;
    Ok(())
}

impl<F> Callback<F> {
    pub(super) fn lossy(&self) -> bool {
        self.lossy.load(Ordering::Relaxed)
    }

    pub(super) fn answer_value(&self, what: &str, answer: &[u8]) -> Result<Value, BoxError> {
        json::parse_value(answer).map_err(|e| callback_error(format!("{what}: {e}")))
    }

    pub(super) fn answer_as<T: DeserializeOwned + Serialize>(
        &self,
        what: &str,
        value: Value,
    ) -> Result<T, BoxError> {
        json::from_value(value, self.lossy()).map_err(|e| callback_error(format!("{what}: {e}")))
    }
}

/// NUL-terminated copies of `items`, and the array of pointers to them
/// that C gets (valid while the copies live).
pub(super) fn c_strings<'a>(
    items: impl Iterator<Item = &'a str>,
) -> (Vec<CString>, Vec<*const c_char>) {
    let owned: Vec<CString> = items.map(|s| to_cstring(s.to_string())).collect();
    let ptrs = owned.iter().map(|s| s.as_ptr()).collect();
    (owned, ptrs)
}

pub(super) fn call_injector(
    c: &Callback<CdiFn>,
    spec: &mut Spec,
    names: &[String],
) -> Result<(), BoxError> {
    let json = json::spec_to_json(spec)
        .and_then(|v| json::to_vec(&v))
        .map_err(|e| callback_error(e.to_string()))?;
    let (_names, ptrs) = c_strings(names.iter().map(String::as_str));
    let (len, count) = (json.len(), ptrs.len());
    // SAFETY: calls the callback given to nri_spec_generator_set_cdi_injector
    // as nri_spec_cdi_fn documents, with its user data, on the thread of the
    // call that needs it (as nri_spec_generator documents); `json` holds `len`
    // bytes, `ptrs` `count` NUL-terminated strings (owned by `_names`), and
    // they and the reply live until it returns.
    let answer = call(|reply| unsafe {
        (c.f)(c.data.ptr, json.as_ptr(), len, ptrs.as_ptr(), count, reply)
    })?;
    if !answer.is_empty() {
        *spec = json::parse_spec(&answer, c.lossy(), None)
            .map_err(|e| callback_error(format!("CDI device injector: {e}")))?;
    }
    Ok(())
}

pub(super) fn call_propagation(
    c: &Callback<PropagationFn>,
    source: &str,
    accepted: &[&str],
) -> Result<(), BoxError> {
    let source = to_cstring(source.to_string());
    let (_accepted, ptrs) = c_strings(accepted.iter().copied());
    // SAFETY: calls the callback given to
    // nri_spec_generator_set_propagation_checker as nri_spec_propagation_fn
    // documents, with its user data, on the thread of the call that needs it
    // (as nri_spec_generator documents); the NUL-terminated `source`, `ptrs`
    // with `ptrs.len()` strings (owned by `_accepted`) and the reply live until
    // it returns.
    call(|reply| unsafe {
        (c.f)(
            c.data.ptr,
            source.as_ptr(),
            ptrs.as_ptr(),
            ptrs.len(),
            reply,
        )
    })
    .map(drop)
}
