//! `nri_spec_generator`: the OCI spec generator (`nri_spec`) behind an
//! opaque handle. A spec crosses as runtime-spec JSON, an adjustment or a
//! resource update as protobuf bytes, and the adjusted spec comes back as
//! JSON in an owned `nri_buffer`.
//!
//! The generator's options are callbacks set on the handle. They run
//! synchronously, on the thread that called `nri_spec_adjust` (or
//! `nri_spec_update_resources`, `nri_spec_filter_labels`) and only during
//! that call, so one generator used from several threads at once may run
//! its callbacks concurrently. Each callback answers through its
//! `nri_reply`: data (`nri_reply_set_data`) or an error
//! (`nri_reply_set_error`), which refuses the adjustment with
//! `NRI_STATUS_CALLBACK_FAILED`.
//!
//! JSON rules, for every spec and section that crosses:
//! * A spec must parse as an oci-spec 0.10 `Spec`, and parsing must not
//!   drop anything: a non-empty field oci-spec does not model (e.g.
//!   `vm.hwconfig`, `freebsd`) is refused with `NRI_STATUS_INVALID_SPEC`
//!   naming it, unless lossy parsing was allowed.
//! * JSON written by the library has no `null` members, and a pids section
//!   without a limit is written without one (`{}`), as Go writes it: oci-spec
//!   itself can only write a limit of 0, which a runtime could take
//!   literally.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CString};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use nri_spec::oci_spec::runtime::{LinuxResources as OciLinuxResources, Spec};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use super::buffer::{bytes, decode_raw, nri_buffer, write_out};
use super::callbacks::{nri_free_fn, nri_reply, UserData};
use super::error::{boundary, nri_error, nri_status, to_cstring, Failure};
use nri_api::{ContainerAdjustment, LinuxResources};
use nri_spec::{BoxError, Generator, GeneratorBuilder, SpecError, UNLIMITED_PIDS_LIMIT};

/// A spec generator and its options (Rust type: `Box<nri_spec_generator>`
/// around an `nri_spec::Generator` builder). Created by
/// `nri_spec_generator_new`, released by `nri_spec_generator_free`. Every
/// function may be called from several threads at once on one generator.
///
/// Its callbacks run synchronously, on the thread of the call that needs
/// them (`nri_spec_adjust`, `nri_spec_update_resources`,
/// `nri_spec_filter_labels`) and only during it; they answer through their
/// `nri_reply`, and an error set there fails the call with
/// `NRI_STATUS_CALLBACK_FAILED`. Specs cross as runtime-spec JSON: input
/// must parse as an oci-spec 0.10 spec without losing a non-empty field
/// (else `NRI_STATUS_INVALID_SPEC`, unless lossy parsing is allowed);
/// output has no `null` members, and a pids section without a limit is
/// written without one.
pub struct nri_spec_generator {
    state: Mutex<State>,
}

#[derive(Clone, Default)]
struct State {
    builder: GeneratorBuilder,
    /// Shared with the callbacks, which parse what they are answered.
    lossy: Arc<AtomicBool>,
}

/// Gets a JSON object of strings (annotations, labels; keys keep their
/// removal markers) and answers with the filtered object (`null` for none).
/// No data at all keeps the input as it is; an error rejects it.
pub type nri_spec_map_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        json: *const u8,
        len: usize,
        reply: *mut nri_reply,
    ),
>;

/// Gets a class name and answers with its settings as JSON: a
/// runtime-spec `LinuxBlockIO` (block I/O) or `LinuxIntelRdt` (RDT) object,
/// or `null` (or no data) to clear them; an error refuses the class.
pub type nri_spec_class_fn = Option<
    unsafe extern "C" fn(user_data: *mut c_void, class_name: *const c_char, reply: *mut nri_reply),
>;

/// Gets the spec's `linux.resources` as JSON (`null` when the spec has
/// none) once an adjustment has been applied to them. May answer with
/// changed resources (a `LinuxResources` object, ignored when the spec has
/// none); no data keeps them; an error refuses the adjustment.
pub type nri_spec_resources_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        json: *const u8,
        len: usize,
        reply: *mut nri_reply,
    ),
>;

/// Gets the spec as JSON and the adjustment's CDI device names (`count`
/// NUL-terminated strings) and answers with the spec, devices injected (no
/// data: unchanged); an error refuses the adjustment.
pub type nri_spec_cdi_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        spec: *const u8,
        len: usize,
        names: *const *const c_char,
        count: usize,
        reply: *mut nri_reply,
    ),
>;

/// Gets a mount's host source path and the propagations accepted for it
/// (`count` strings: "rshared", or "rshared" and "rslave"); an error
/// refuses the mount.
pub type nri_spec_propagation_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        source: *const c_char,
        accepted: *const *const c_char,
        count: usize,
        reply: *mut nri_reply,
    ),
>;

/// New generator with upstream's defaults: no filters, resolvers, checker
/// or CDI injector (block I/O and RDT classes are ignored, CDI device names
/// are handed back), and the host's mount propagation check on Linux.
#[no_mangle]
pub extern "C" fn nri_spec_generator_new() -> *mut nri_spec_generator {
    Box::into_raw(Box::new(nri_spec_generator {
        state: Mutex::new(State::default()),
    }))
}

/// Releases a generator, running the finalizers of its callbacks' user
/// data. NULL is a no-op. Must not race with another call on it.
///
/// # Safety
/// `g` is NULL or a generator from `nri_spec_generator_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_free(g: *mut nri_spec_generator) {
    if !g.is_null() {
        // SAFETY: from Box::into_raw in nri_spec_generator_new.
        drop(unsafe { Box::from_raw(g) });
    }
}

impl nri_spec_generator {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A snapshot of the generator, so callbacks run without the lock.
    fn snapshot(&self) -> (Generator, bool) {
        let s = self.state().clone();
        (s.builder.build(), s.lossy.load(Ordering::Relaxed))
    }
}

/// The C callback types without their `Option`.
type MapFn = unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut nri_reply);
type ClassFn = unsafe extern "C" fn(*mut c_void, *const c_char, *mut nri_reply);
type CdiFn = unsafe extern "C" fn(
    *mut c_void,
    *const u8,
    usize,
    *const *const c_char,
    usize,
    *mut nri_reply,
);
type PropagationFn =
    unsafe extern "C" fn(*mut c_void, *const c_char, *const *const c_char, usize, *mut nri_reply);

/// What a setter hands its option: the callback, its user data, and the
/// generator's lossy-parsing switch.
struct Callback<F> {
    f: F,
    data: Arc<UserData>,
    lossy: Arc<AtomicBool>,
}

/// Runs a setter on a generator that must not be NULL: `set` adds the
/// option for callback `f`. `data` is owned already, so its finalizer runs
/// even when this fails.
///
/// # Safety
/// `g` is NULL or a live generator.
unsafe fn set_callback<F>(
    g: *mut nri_spec_generator,
    err: *mut *mut nri_error,
    what: &str,
    f: Option<F>,
    data: Arc<UserData>,
    set: fn(GeneratorBuilder, Callback<F>) -> GeneratorBuilder,
) -> nri_status {
    boundary(err, || {
        // SAFETY: guaranteed by the caller.
        let g = unsafe { g.as_ref() }.ok_or_else(|| Failure::invalid("generator is NULL"))?;
        let f = f.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))?;
        let mut s = g.state();
        let lossy = Arc::clone(&s.lossy);
        s.builder = set(std::mem::take(&mut s.builder), Callback { f, data, lossy });
        Ok(())
    })
}

/// Filters or rejects labels (upstream's `WithLabelFilter`); applied by
/// `nri_spec_filter_labels` only, as upstream's `Adjust` never applies it.
/// The user data is owned from here on, even when this fails.
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_set_label_filter(
    g: *mut nri_spec_generator,
    filter: nri_spec_map_fn,
    user_data: *mut c_void,
    free_user_data: nri_free_fn,
    err: *mut *mut nri_error,
) -> nri_status {
    let data = UserData::new(user_data, free_user_data);
    // SAFETY: guaranteed by the caller.
    unsafe { set_callback(g, err, "filter", filter, data, label_filter) }
}

fn label_filter(b: GeneratorBuilder, c: Callback<MapFn>) -> GeneratorBuilder {
    b.label_filter(move |m| call_map_filter("label filter", c.f, &c.data, m))
}

/// Filters or rejects an adjustment's annotations before they are applied
/// (upstream's `WithAnnotationFilter`). The user data is owned from here
/// on, even when this fails.
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_set_annotation_filter(
    g: *mut nri_spec_generator,
    filter: nri_spec_map_fn,
    user_data: *mut c_void,
    free_user_data: nri_free_fn,
    err: *mut *mut nri_error,
) -> nri_status {
    let data = UserData::new(user_data, free_user_data);
    // SAFETY: guaranteed by the caller.
    unsafe { set_callback(g, err, "filter", filter, data, annotation_filter) }
}

fn annotation_filter(b: GeneratorBuilder, c: Callback<MapFn>) -> GeneratorBuilder {
    b.annotation_filter(move |m| call_map_filter("annotation filter", c.f, &c.data, m))
}

/// Resolves block I/O classes (upstream's `WithBlockIOResolver`); without
/// it they are ignored. The user data is owned from here on, even when
/// this fails.
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_set_blockio_resolver(
    g: *mut nri_spec_generator,
    resolve: nri_spec_class_fn,
    user_data: *mut c_void,
    free_user_data: nri_free_fn,
    err: *mut *mut nri_error,
) -> nri_status {
    let data = UserData::new(user_data, free_user_data);
    // SAFETY: guaranteed by the caller.
    unsafe { set_callback(g, err, "resolve", resolve, data, blockio_resolver) }
}

fn blockio_resolver(b: GeneratorBuilder, c: Callback<ClassFn>) -> GeneratorBuilder {
    b.blockio_resolver(move |class| call_resolver("block I/O class resolver", &c, class))
}

/// Resolves RDT classes (upstream's `WithRdtResolver`); without it they are
/// ignored. The user data is owned from here on, even when this fails.
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_set_rdt_resolver(
    g: *mut nri_spec_generator,
    resolve: nri_spec_class_fn,
    user_data: *mut c_void,
    free_user_data: nri_free_fn,
    err: *mut *mut nri_error,
) -> nri_status {
    let data = UserData::new(user_data, free_user_data);
    // SAFETY: guaranteed by the caller.
    unsafe { set_callback(g, err, "resolve", resolve, data, rdt_resolver) }
}

fn rdt_resolver(b: GeneratorBuilder, c: Callback<ClassFn>) -> GeneratorBuilder {
    b.rdt_resolver(move |class| call_resolver("RDT class resolver", &c, class))
}

/// Checks, and may change, the resources once an adjustment or update has
/// been applied to them (upstream's `WithResourceChecker`). The user data
/// is owned from here on, even when this fails.
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_set_resource_checker(
    g: *mut nri_spec_generator,
    check: nri_spec_resources_fn,
    user_data: *mut c_void,
    free_user_data: nri_free_fn,
    err: *mut *mut nri_error,
) -> nri_status {
    let data = UserData::new(user_data, free_user_data);
    // SAFETY: guaranteed by the caller.
    unsafe { set_callback(g, err, "check", check, data, resource_checker) }
}

fn resource_checker(b: GeneratorBuilder, c: Callback<MapFn>) -> GeneratorBuilder {
    b.resource_checker(move |r| call_checker(&c, r))
}

/// Injects an adjustment's CDI devices into the spec, at upstream's point
/// in the order (upstream's `WithCDIDeviceInjector`); without it the names
/// come back from `nri_spec_adjust`. The user data is owned from here on,
/// even when this fails.
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_set_cdi_injector(
    g: *mut nri_spec_generator,
    inject: nri_spec_cdi_fn,
    user_data: *mut c_void,
    free_user_data: nri_free_fn,
    err: *mut *mut nri_error,
) -> nri_status {
    let data = UserData::new(user_data, free_user_data);
    // SAFETY: guaranteed by the caller.
    unsafe { set_callback(g, err, "inject", inject, data, cdi_injector) }
}

fn cdi_injector(b: GeneratorBuilder, c: Callback<CdiFn>) -> GeneratorBuilder {
    b.cdi_injector(move |spec, names| call_injector(&c, spec, names))
}

/// Replaces the host mount propagation check (a mount asking for `rshared`
/// or `rslave` needs a host source with that propagation). The user data
/// is owned from here on, even when this fails.
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_set_propagation_checker(
    g: *mut nri_spec_generator,
    check: nri_spec_propagation_fn,
    user_data: *mut c_void,
    free_user_data: nri_free_fn,
    err: *mut *mut nri_error,
) -> nri_status {
    let data = UserData::new(user_data, free_user_data);
    // SAFETY: guaranteed by the caller.
    unsafe { set_callback(g, err, "check", check, data, propagation_checker) }
}

fn propagation_checker(b: GeneratorBuilder, c: Callback<PropagationFn>) -> GeneratorBuilder {
    b.propagation_checker(move |source, accepted| call_propagation(&c, source, accepted))
}

/// Runs a setter without a callback on a generator that must not be NULL.
fn with_state(
    g: *mut nri_spec_generator,
    err: *mut *mut nri_error,
    set: impl FnOnce(&mut State),
) -> nri_status {
    boundary(err, || {
        // SAFETY: callers of the exports pass a live generator or NULL.
        let g = unsafe { g.as_ref() }.ok_or_else(|| Failure::invalid("generator is NULL"))?;
        set(&mut g.state());
        Ok(())
    })
}

/// Turns the mount propagation check off (a runtime that checks mounts
/// itself, or whose host mount table is not its own).
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_disable_propagation_check(
    g: *mut nri_spec_generator,
    err: *mut *mut nri_error,
) -> nri_status {
    with_state(g, err, |s| {
        s.builder = std::mem::take(&mut s.builder).no_propagation_check()
    })
}

/// Allows specs with fields oci-spec 0.10 does not model: from now on they
/// are dropped instead of refused, in specs given and in what callbacks
/// answer.
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_allow_lossy_parsing(
    g: *mut nri_spec_generator,
    err: *mut *mut nri_error,
) -> nri_status {
    with_state(g, err, |s| s.lossy.store(true, Ordering::Relaxed))
}

/// Applies a `ContainerAdjustment` (protobuf) to a spec (JSON). On success
/// `*out_spec` receives the adjusted spec as JSON and, if `out_cdi_devices`
/// is not NULL, `*out_cdi_devices` a JSON array of the CDI device names
/// left for the caller to inject (empty when an injector took them).
/// Statuses: `INVALID_SPEC` (the spec), `INVALID_MESSAGE` (the adjustment),
/// `SPEC_REFUSED` (a value the spec cannot take, a failed mount propagation
/// check), `CALLBACK_FAILED` (a callback's error or unusable answer).
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `spec` and `adjustment` are
/// valid for their lengths (or the length is 0); `out_spec` is writable;
/// `out_cdi_devices` and `err` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_adjust(
    g: *const nri_spec_generator,
    spec: *const u8,
    spec_len: usize,
    adjustment: *const u8,
    adjustment_len: usize,
    out_spec: *mut nri_buffer,
    out_cdi_devices: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: guaranteed by the caller.
        let g = unsafe { generator_arg(g, out_spec) }?;
        // SAFETY: guaranteed by the caller.
        let input = unsafe { bytes("spec", spec, spec_len) }?;
        // SAFETY: guaranteed by the caller.
        let adjust: ContainerAdjustment = unsafe { decode_raw(adjustment, adjustment_len) }?;
        let pids = adjust.linux.resources.pids.as_ref().map(|p| p.limit);
        let (generator, lossy) = g.snapshot();
        let mut spec = parse_spec(input, lossy, pids)?;
        let adjusted = generator.adjust(&mut spec, &adjust).map_err(spec_failure)?;
        // Both encoded before either is written: outputs only on success.
        let spec = to_json_bytes(&spec_to_json(&spec)?)?;
        let cdi = to_json_bytes(&adjusted.pending_cdi_devices)?;
        // SAFETY: guaranteed by the caller; checked not NULL above.
        unsafe { out_spec.write(nri_buffer::from_vec(spec)) };
        if !out_cdi_devices.is_null() {
            // SAFETY: guaranteed by the caller.
            unsafe { out_cdi_devices.write(nri_buffer::from_vec(cdi)) };
        }
        Ok(())
    })
}

/// Applies a resource update, a `LinuxResources` (protobuf), to a spec
/// (JSON): the resources step of an adjustment, with the resource checker
/// and the block I/O and RDT classes. On success `*out_spec` receives the
/// updated spec as JSON. Statuses as for `nri_spec_adjust`.
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `spec` and `resources` are
/// valid for their lengths (or the length is 0); `out_spec` is writable;
/// `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_update_resources(
    g: *const nri_spec_generator,
    spec: *const u8,
    spec_len: usize,
    resources: *const u8,
    resources_len: usize,
    out_spec: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: guaranteed by the caller.
        let g = unsafe { generator_arg(g, out_spec) }?;
        // SAFETY: guaranteed by the caller.
        let input = unsafe { bytes("spec", spec, spec_len) }?;
        // SAFETY: guaranteed by the caller.
        let update: LinuxResources = unsafe { decode_raw(resources, resources_len) }?;
        let (generator, lossy) = g.snapshot();
        let mut spec = parse_spec(input, lossy, update.pids.as_ref().map(|p| p.limit))?;
        generator
            .update_resources(&mut spec, &update)
            .map_err(spec_failure)?;
        let spec = nri_buffer::from_vec(to_json_bytes(&spec_to_json(&spec)?)?);
        // SAFETY: guaranteed by the caller; checked not NULL above.
        unsafe { out_spec.write(spec) };
        Ok(())
    })
}

/// Runs the label filter (identity when none is set) on labels given as a
/// JSON object of strings; on success `*out_json` receives the filtered
/// labels as a JSON object.
///
/// # Safety
/// `g` comes from `nri_spec_generator_new`; `labels` is valid for `len`
/// bytes (or `len` is 0); `out_json` is writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_filter_labels(
    g: *const nri_spec_generator,
    labels: *const u8,
    len: usize,
    out_json: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        // SAFETY: guaranteed by the caller.
        let g = unsafe { generator_arg(g, out_json) }?;
        // SAFETY: guaranteed by the caller.
        let input = unsafe { bytes("labels", labels, len) }?;
        let labels: Option<HashMap<String, String>> =
            serde_json::from_slice(input).map_err(|e| {
                Failure::invalid(format!("labels are not a JSON object of strings: {e}"))
            })?;
        let (generator, _) = g.snapshot();
        let filtered = generator
            .filter_labels(&labels.unwrap_or_default())
            .map_err(spec_failure)?;
        let json = nri_buffer::from_vec(to_json_bytes(&filtered)?);
        // SAFETY: guaranteed by the caller; checked not NULL above.
        unsafe { out_json.write(json) };
        Ok(())
    })
}

/// Converts a `LinuxResources` (protobuf) to runtime-spec `LinuxResources`
/// JSON for the runtime's update call, as upstream's
/// `LinuxResources.ToOCI()` does (block I/O and RDT classes left out).
///
/// # Safety
/// `resources` is valid for `len` bytes (or `len` is 0); `out_json` is
/// writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_resources_to_oci(
    resources: *const u8,
    len: usize,
    out_json: *mut nri_buffer,
    err: *mut *mut nri_error,
) -> nri_status {
    boundary(err, || {
        if out_json.is_null() {
            return Err(Failure::invalid("out_json is NULL"));
        }
        // SAFETY: guaranteed by the caller.
        let r: LinuxResources = unsafe { decode_raw(resources, len) }?;
        let mut oci = nri_spec::resources_to_oci(&r).map_err(spec_failure)?;
        let unlimited = r
            .pids
            .as_ref()
            .is_some_and(|p| p.limit <= UNLIMITED_PIDS_LIMIT);
        if let (true, Some(p)) = (unlimited, oci.pids_mut().as_mut()) {
            p.set_limit(PIDS_UNSET);
        }
        let json = to_json_bytes(&resources_to_json(&oci)?)?;
        // SAFETY: guaranteed by the caller; checked not NULL above.
        unsafe { write_out("out_json", out_json, nri_buffer::from_vec(json)) }
    })
}

/// The generator of a call, checked with the output slot every call has.
///
/// # Safety
/// `g` is NULL or a live generator.
unsafe fn generator_arg<'a>(
    g: *const nri_spec_generator,
    out: *mut nri_buffer,
) -> Result<&'a nri_spec_generator, Failure> {
    if out.is_null() {
        return Err(Failure::invalid("output buffer is NULL"));
    }
    // SAFETY: guaranteed by the caller.
    unsafe { g.as_ref() }.ok_or_else(|| Failure::invalid("generator is NULL"))
}

/// A caller callback's error (or unusable answer), told apart from the
/// generator's own refusals by its type.
#[derive(Debug)]
struct CallbackError(String);

impl fmt::Display for CallbackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallbackError {}

fn callback_error(message: impl Into<String>) -> BoxError {
    Box::new(CallbackError(message.into()))
}

fn spec_failure(e: SpecError) -> Failure {
    let cause = match &e {
        SpecError::AnnotationFilter(c)
        | SpecError::LabelFilter(c)
        | SpecError::ResourceCheck(c)
        | SpecError::CdiInjection { cause: c, .. }
        | SpecError::BlockIoClass { cause: c, .. }
        | SpecError::RdtClass { cause: c, .. }
        | SpecError::MountPropagation { cause: c, .. } => Some(c),
        _ => None,
    };
    let status = match cause {
        Some(c) if c.is::<CallbackError>() => nri_status::CallbackFailed,
        _ => nri_status::SpecRefused,
    };
    Failure::new(status, e.to_string())
}

/// Calls a callback with a fresh reply and returns the reply's data.
fn call(f: impl FnOnce(*mut nri_reply)) -> Result<Vec<u8>, BoxError> {
    let mut reply = nri_reply::default();
    f(&mut reply);
    reply
        .into_result()
        .map_err(|e| callback_error(e.to_string()))
}

fn call_map_filter(
    what: &str,
    f: MapFn,
    data: &UserData,
    map: &HashMap<String, String>,
) -> Result<HashMap<String, String>, BoxError> {
    let json = serde_json::to_vec(map)?;
    // SAFETY: the caller's callback; `json` and the reply outlive the call.
    let answer = call(|reply| unsafe { f(data.ptr, json.as_ptr(), json.len(), reply) })?;
    if answer.is_empty() {
        return Ok(map.clone());
    }
    let filtered: Option<HashMap<String, String>> = serde_json::from_slice(&answer)
        .map_err(|e| callback_error(format!("{what} answered with invalid JSON: {e}")))?;
    Ok(filtered.unwrap_or_default())
}

fn call_resolver<T: DeserializeOwned + Serialize>(
    what: &str,
    c: &Callback<ClassFn>,
    class: &str,
) -> Result<Option<T>, BoxError> {
    let class = to_cstring(class.to_string());
    // SAFETY: the caller's callback; `class` and the reply outlive the call.
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

fn call_checker(
    c: &Callback<MapFn>,
    resources: Option<&mut OciLinuxResources>,
) -> Result<(), BoxError> {
    const WHAT: &str = "resource checker";
    let view = match resources.as_deref() {
        Some(r) => resources_to_json(r).map_err(|e| callback_error(e.message))?,
        None => Value::Null,
    };
    let json = to_json_bytes(&view).map_err(|e| callback_error(e.message))?;
    // SAFETY: the caller's callback; `json` and the reply outlive the call.
    let answer = call(|reply| unsafe { (c.f)(c.data.ptr, json.as_ptr(), json.len(), reply) })?;
    let Some(resources) = resources else {
        return Ok(());
    };
    if answer.is_empty() {
        return Ok(());
    }
    let value = c.answer_value(WHAT, &answer)?;
    let unset = pids_limit_unset(&value);
    let mut checked: OciLinuxResources = c.answer_as(WHAT, value)?;
    if let (true, Some(p)) = (unset, checked.pids_mut().as_mut()) {
        p.set_limit(PIDS_UNSET);
    }
    *resources = checked;
    Ok(())
}

impl<F> Callback<F> {
    fn lossy(&self) -> bool {
        self.lossy.load(Ordering::Relaxed)
    }

    fn answer_value(&self, what: &str, answer: &[u8]) -> Result<Value, BoxError> {
        parse_value(answer).map_err(|e| callback_error(format!("{what}: {}", e.message)))
    }

    fn answer_as<T: DeserializeOwned + Serialize>(
        &self,
        what: &str,
        value: Value,
    ) -> Result<T, BoxError> {
        from_value(value, self.lossy())
            .map_err(|e| callback_error(format!("{what}: {}", e.message)))
    }
}

/// NUL-terminated copies of `items`, and the array of pointers to them
/// that C gets (valid while the copies live).
fn c_strings<'a>(items: impl Iterator<Item = &'a str>) -> (Vec<CString>, Vec<*const c_char>) {
    let owned: Vec<CString> = items.map(|s| to_cstring(s.to_string())).collect();
    let ptrs = owned.iter().map(|s| s.as_ptr()).collect();
    (owned, ptrs)
}

fn call_injector(c: &Callback<CdiFn>, spec: &mut Spec, names: &[String]) -> Result<(), BoxError> {
    let json = spec_to_json(spec)
        .and_then(|v| to_json_bytes(&v))
        .map_err(|e| callback_error(e.message))?;
    let (_names, ptrs) = c_strings(names.iter().map(String::as_str));
    let (len, count) = (json.len(), ptrs.len());
    // SAFETY: the caller's callback; the JSON, names and reply outlive it.
    let answer = call(|reply| unsafe {
        (c.f)(c.data.ptr, json.as_ptr(), len, ptrs.as_ptr(), count, reply)
    })?;
    if !answer.is_empty() {
        *spec = parse_spec(&answer, c.lossy(), None)
            .map_err(|e| callback_error(format!("CDI device injector: {}", e.message)))?;
    }
    Ok(())
}

fn call_propagation(
    c: &Callback<PropagationFn>,
    source: &str,
    accepted: &[&str],
) -> Result<(), BoxError> {
    let source = to_cstring(source.to_string());
    let (_accepted, ptrs) = c_strings(accepted.iter().copied());
    // SAFETY: the caller's callback; the strings and the reply outlive it.
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

/// A pids limit the JSON did not give: written back as no limit. oci-spec
/// 0.10 has no "unset" for it (a plain `i64`), and would write 0.
const PIDS_UNSET: i64 = i64::MIN;

fn invalid_spec(message: impl Into<String>) -> Failure {
    Failure::new(nri_status::InvalidSpec, message)
}

fn parse_value(input: &[u8]) -> Result<Value, Failure> {
    serde_json::from_slice(input).map_err(|e| invalid_spec(format!("invalid JSON: {e}")))
}

/// Parses a spec. `pids` is the pids limit the adjustment or update will
/// apply, if any: a pids section it creates without a limit is created
/// here, marked unset, so it is written back without one.
fn parse_spec(input: &[u8], lossy: bool, pids: Option<i64>) -> Result<Spec, Failure> {
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
fn from_value<T: DeserializeOwned + Serialize>(value: Value, lossy: bool) -> Result<T, Failure> {
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

fn serialize_failure(e: serde_json::Error) -> Failure {
    Failure::new(
        nri_status::SpecRefused,
        format!("cannot serialize the spec: {e}"),
    )
}

fn to_json_bytes<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, Failure> {
    serde_json::to_vec(v).map_err(serialize_failure)
}

/// A spec as the library writes it: no `null`s, unset pids limits left out.
fn spec_to_json(spec: &Spec) -> Result<Value, Failure> {
    let mut v = serde_json::to_value(spec).map_err(serialize_failure)?;
    if let Some(r) = v.pointer_mut("/linux/resources") {
        drop_unset_pids_limit(r);
    }
    strip_nulls(&mut v);
    Ok(v)
}

fn resources_to_json(r: &OciLinuxResources) -> Result<Value, Failure> {
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
    use std::ffi::CStr;
    use std::ptr::{null, null_mut};
    use std::sync::atomic::AtomicUsize;

    use protobuf::Message;
    use serde_json::json;

    use super::*;
    use crate::{
        nri_buffer_free, nri_error_free, nri_error_message, nri_reply_set_data, nri_reply_set_error,
    };
    use nri_api::{CDIDevice, LinuxNamespace, LinuxNetDevice, Mount};

    /// A Go-shaped spec: a process, memory resources, a pids section
    /// without a limit.
    fn base() -> Value {
        json!({
            "ociVersion": "1.2.0",
            "process": {"user": {"uid": 0, "gid": 0}, "cwd": "/", "env": ["PATH=/bin"]},
            "linux": {"resources": {"memory": {"limit": 1000}, "pids": {}}}
        })
    }

    type Outcome<T> = Result<T, (nri_status, String)>;

    fn failed(st: nri_status, err: *mut nri_error) -> (nri_status, String) {
        // SAFETY: an error from the call that failed.
        let text = unsafe { CStr::from_ptr(nri_error_message(err)) }
            .to_string_lossy()
            .into_owned();
        unsafe { nri_error_free(err) };
        (st, text)
    }

    fn taken(buf: &mut nri_buffer) -> Value {
        // SAFETY: a buffer filled by the library.
        let v = serde_json::from_slice(unsafe { std::slice::from_raw_parts(buf.data, buf.len) })
            .unwrap();
        unsafe { nri_buffer_free(buf) };
        v
    }

    fn adjust(
        g: *const nri_spec_generator,
        spec: &Value,
        adj: &ContainerAdjustment,
    ) -> Outcome<(Value, Value)> {
        let spec = serde_json::to_vec(spec).unwrap();
        let adj = adj.write_to_bytes().unwrap();
        let (mut out, mut cdi, mut err) = (nri_buffer::EMPTY, nri_buffer::EMPTY, null_mut());
        // SAFETY: valid buffers and slots.
        let st = unsafe {
            nri_spec_adjust(
                g,
                spec.as_ptr(),
                spec.len(),
                adj.as_ptr(),
                adj.len(),
                &mut out,
                &mut cdi,
                &mut err,
            )
        };
        if st != nri_status::Ok {
            assert!(
                out.data.is_null() && cdi.data.is_null(),
                "outputs are written only on success"
            );
            return Err(failed(st, err));
        }
        Ok((taken(&mut out), taken(&mut cdi)))
    }

    fn update(g: *const nri_spec_generator, spec: &Value, r: &LinuxResources) -> Outcome<Value> {
        let spec = serde_json::to_vec(spec).unwrap();
        let r = r.write_to_bytes().unwrap();
        let (mut out, mut err) = (nri_buffer::EMPTY, null_mut());
        // SAFETY: valid buffers and slots.
        let st = unsafe {
            nri_spec_update_resources(
                g,
                spec.as_ptr(),
                spec.len(),
                r.as_ptr(),
                r.len(),
                &mut out,
                &mut err,
            )
        };
        if st != nri_status::Ok {
            assert!(out.data.is_null(), "outputs are written only on success");
            return Err(failed(st, err));
        }
        Ok(taken(&mut out))
    }

    fn plain() -> *mut nri_spec_generator {
        let g = nri_spec_generator_new();
        assert_eq!(
            unsafe { nri_spec_generator_disable_propagation_check(g, null_mut()) },
            nri_status::Ok
        );
        g
    }

    fn reply_json(reply: *mut nri_reply, v: &Value) {
        let data = serde_json::to_vec(v).unwrap();
        // SAFETY: the reply of the running callback.
        unsafe { nri_reply_set_data(reply, data.as_ptr(), data.len()) };
    }

    fn reply_error(reply: *mut nri_reply, msg: &str) {
        let msg = CString::new(msg).unwrap();
        // SAFETY: the reply of the running callback.
        unsafe { nri_reply_set_error(reply, msg.as_ptr()) };
    }

    unsafe fn json_arg(p: *const u8, n: usize) -> Value {
        serde_json::from_slice(unsafe { std::slice::from_raw_parts(p, n) }).unwrap()
    }

    unsafe fn strings(p: *const *const c_char, n: usize) -> Vec<String> {
        let ptrs = unsafe { std::slice::from_raw_parts(p, n) };
        ptrs.iter()
            .map(|s| unsafe { CStr::from_ptr(*s) }.to_string_lossy().into_owned())
            .collect()
    }

    /// Counts finalizer runs and records what the callbacks saw.
    #[derive(Default)]
    struct Seen {
        freed: AtomicUsize,
        log: Mutex<Vec<String>>,
    }

    impl Seen {
        fn ud(&self) -> *mut c_void {
            self as *const Seen as *mut c_void
        }
        fn note(ud: *mut c_void, what: String) {
            unsafe { &*(ud as *const Seen) }
                .log
                .lock()
                .unwrap()
                .push(what);
        }
    }

    unsafe extern "C" fn free_seen(ud: *mut c_void) {
        unsafe { &*(ud as *const Seen) }
            .freed
            .fetch_add(1, Ordering::SeqCst);
    }

    /// Drops `private.*` annotations; refuses a `fail` annotation.
    unsafe extern "C" fn filter(
        _: *mut c_void,
        json: *const u8,
        len: usize,
        reply: *mut nri_reply,
    ) {
        let mut m: Map<String, Value> =
            serde_json::from_value(unsafe { json_arg(json, len) }).unwrap();
        if m.contains_key("fail") {
            return reply_error(reply, "no fail allowed");
        }
        m.retain(|k, _| !k.starts_with("private."));
        reply_json(reply, &Value::Object(m));
    }

    unsafe extern "C" fn blockio(ud: *mut c_void, class: *const c_char, reply: *mut nri_reply) {
        let class = unsafe { CStr::from_ptr(class) }.to_str().unwrap();
        Seen::note(ud, format!("blockio {class}"));
        match class {
            "slow" => reply_json(reply, &json!({"weight": 10})),
            "none" => reply_json(reply, &Value::Null),
            "garbage" => unsafe { nri_reply_set_data(reply, b"{".as_ptr(), 1) }.then_ok(),
            _ => reply_error(reply, &format!("unknown class {class}")),
        }
    }

    trait ThenOk {
        fn then_ok(self);
    }
    impl ThenOk for nri_status {
        fn then_ok(self) {
            assert_eq!(self, nri_status::Ok);
        }
    }

    unsafe extern "C" fn rdt(_: *mut c_void, class: *const c_char, reply: *mut nri_reply) {
        let class = unsafe { CStr::from_ptr(class) }.to_str().unwrap();
        reply_json(reply, &json!({"closID": class}));
    }

    /// Refuses more than 1 GiB of memory; sets CPU shares to 2.
    unsafe extern "C" fn checker(
        ud: *mut c_void,
        json: *const u8,
        len: usize,
        reply: *mut nri_reply,
    ) {
        let mut r = unsafe { json_arg(json, len) };
        Seen::note(ud, format!("check {r}"));
        if r.is_null() {
            return;
        }
        if r["memory"]["limit"].as_i64().unwrap_or(0) > 1 << 30 {
            return reply_error(reply, "too much memory");
        }
        r["cpu"] = json!({"shares": 2});
        reply_json(reply, &r);
    }

    /// Adds `CDI=<names>` to the environment.
    unsafe extern "C" fn inject(
        ud: *mut c_void,
        spec: *const u8,
        len: usize,
        names: *const *const c_char,
        count: usize,
        reply: *mut nri_reply,
    ) {
        let mut spec = unsafe { json_arg(spec, len) };
        let names = unsafe { strings(names, count) }.join(",");
        Seen::note(ud, format!("inject {names}"));
        spec["process"]["env"]
            .as_array_mut()
            .unwrap()
            .push(json!(format!("CDI={names}")));
        reply_json(reply, &spec);
    }

    unsafe extern "C" fn no_propagation(
        _: *mut c_void,
        source: *const c_char,
        accepted: *const *const c_char,
        count: usize,
        reply: *mut nri_reply,
    ) {
        let source = unsafe { CStr::from_ptr(source) }.to_string_lossy();
        let accepted = unsafe { strings(accepted, count) }.join(" or ");
        reply_error(reply, &format!("{source} is not {accepted}"));
    }

    #[test]
    fn json_specs_take_protobuf_adjustments() {
        let g = plain();
        let mut adj = ContainerAdjustment::new();
        adj.add_env("HELLO", "world");
        adj.set_linux_memory_limit(2000);
        adj.add_cdi_device(CDIDevice {
            name: "vendor.com/gpu=0".into(),
            ..Default::default()
        });
        adj.add_linux_net_device("eth1", LinuxNetDevice::new()); // oci-spec writes its name as null
        let (spec, cdi) = adjust(g, &base(), &adj).unwrap();
        let mut want = base();
        want["process"]["env"] = json!(["PATH=/bin", "HELLO=world"]);
        want["linux"]["resources"]["memory"] = json!({"limit": 2000, "swap": 2000});
        want["linux"]["netDevices"] = json!({"eth1": {}});
        assert_eq!(spec, want);
        assert_eq!(cdi, json!(["vendor.com/gpu=0"]));

        // Without a slot for the CDI names, they are not asked for.
        let (s, a) = (
            serde_json::to_vec(&base()).unwrap(),
            adj.write_to_bytes().unwrap(),
        );
        let mut out = nri_buffer::EMPTY;
        let st = unsafe {
            nri_spec_adjust(
                g,
                s.as_ptr(),
                s.len(),
                a.as_ptr(),
                a.len(),
                &mut out,
                null_mut(),
                null_mut(),
            )
        };
        assert_eq!(st, nri_status::Ok);
        assert_eq!(taken(&mut out), want);
        unsafe { nri_spec_generator_free(g) };
    }

    #[test]
    fn pids_sections_without_a_limit_stay_without_one() {
        let g = plain();
        let no_pids =
            json!({"ociVersion": "", "process": {"user": {"uid": 0, "gid": 0}, "cwd": ""}});
        let pids = |spec: &Value, limit: i64| {
            let mut adj = ContainerAdjustment::new();
            adj.set_linux_pid_limits(limit);
            adjust(g, spec, &adj).unwrap().0["linux"]["resources"]["pids"].clone()
        };
        assert_eq!(pids(&no_pids, UNLIMITED_PIDS_LIMIT), json!({}));
        assert_eq!(pids(&no_pids, 0), json!({"limit": 0}));
        assert_eq!(pids(&base(), -7), json!({}));
        assert_eq!(pids(&base(), 9), json!({"limit": 9}));
        let mut limited = base();
        limited["linux"]["resources"]["pids"] = json!({"limit": 5});
        assert_eq!(pids(&limited, UNLIMITED_PIDS_LIMIT), json!({"limit": 5}));

        let mut r = LinuxResources::new();
        r.pids.mut_or_insert_default().limit = UNLIMITED_PIDS_LIMIT;
        assert_eq!(
            update(g, &no_pids, &r).unwrap()["linux"]["resources"]["pids"],
            json!({})
        );
        let bytes = r.write_to_bytes().unwrap();
        let mut out = nri_buffer::EMPTY;
        let st =
            unsafe { nri_spec_resources_to_oci(bytes.as_ptr(), bytes.len(), &mut out, null_mut()) };
        assert_eq!(st, nri_status::Ok);
        assert_eq!(
            taken(&mut out),
            json!({"memory": {}, "cpu": {}, "pids": {}})
        );
        unsafe { nri_spec_generator_free(g) };
    }

    #[test]
    fn bad_input_is_refused_and_nothing_is_written() {
        let g = plain();
        let adj = ContainerAdjustment::new();
        let invalid = |spec: &[u8], adj: &[u8]| {
            let (mut out, mut err) = (nri_buffer::EMPTY, null_mut());
            let st = unsafe {
                nri_spec_adjust(
                    g,
                    spec.as_ptr(),
                    spec.len(),
                    adj.as_ptr(),
                    adj.len(),
                    &mut out,
                    null_mut(),
                    &mut err,
                )
            };
            assert!(out.data.is_null());
            failed(st, err)
        };
        let (st, msg) = invalid(b"{", &[]);
        assert_eq!(st, nri_status::InvalidSpec);
        assert!(msg.starts_with("invalid JSON: "), "{msg}");
        let (st, msg) = invalid(br#"{"process": {}}"#, &[]);
        assert_eq!(st, nri_status::InvalidSpec);
        assert!(msg.contains("missing field `user`"), "{msg}");
        let (st, msg) = invalid(b"{}", &[0xff, 0xff]);
        assert_eq!(st, nri_status::InvalidMessage);
        assert!(msg.starts_with("invalid ContainerAdjustment"), "{msg}");

        // Fields oci-spec does not model are refused, by name, unless lossy
        // parsing is allowed; empty ones are not a loss.
        let mut exotic = base();
        exotic["vm"] = json!({"hypervisor": {"path": "/hv"}, "kernel": {"path": "/k"}, "hwconfig": {"vcpus": 2}});
        exotic["freebsd"] = json!({});
        let err = adjust(g, &exotic, &adj).unwrap_err();
        assert_eq!(
            err,
            (
                nri_status::InvalidSpec,
                "spec fields oci-spec 0.10 cannot hold would be lost: vm.hwconfig".into()
            )
        );
        let lossy = plain();
        unsafe { nri_spec_generator_allow_lossy_parsing(lossy, null_mut()) }.then_ok();
        let (spec, _) = adjust(lossy, &exotic, &adj).unwrap();
        assert_eq!(
            spec["vm"],
            json!({"hypervisor": {"path": "/hv"}, "kernel": {"path": "/k"}})
        );
        unsafe { nri_spec_generator_free(lossy) };

        // Values the OCI spec cannot take, unknown namespaces: refusals.
        let mut bad = ContainerAdjustment::new();
        bad.add_rlimit("nofile", 2, 1);
        let (st, msg) = adjust(g, &base(), &bad).unwrap_err();
        assert_eq!(st, nri_status::SpecRefused);
        assert!(
            msg.starts_with("cannot apply rlimit type \"nofile\""),
            "{msg}"
        );
        let mut bad = ContainerAdjustment::new();
        bad.add_or_replace_namespace(LinuxNamespace {
            type_: "net".into(),
            ..Default::default()
        });
        assert_eq!(
            adjust(g, &base(), &bad).unwrap_err(),
            (
                nri_status::SpecRefused,
                "unrecognized namespace \"net\"".into()
            )
        );

        // NULL handle, NULL output slot.
        let (s, mut out, mut err) = (b"{}", nri_buffer::EMPTY, null_mut());
        let st = unsafe {
            nri_spec_adjust(
                null(),
                s.as_ptr(),
                s.len(),
                null(),
                0,
                &mut out,
                null_mut(),
                &mut err,
            )
        };
        assert_eq!(
            failed(st, err),
            (nri_status::InvalidArgument, "generator is NULL".into())
        );
        let st = unsafe {
            nri_spec_update_resources(g, s.as_ptr(), s.len(), null(), 0, null_mut(), &mut err)
        };
        assert_eq!(
            failed(st, err),
            (nri_status::InvalidArgument, "output buffer is NULL".into())
        );
        let st =
            unsafe { nri_spec_adjust(g, null(), 3, null(), 0, &mut out, null_mut(), &mut err) };
        assert_eq!(
            failed(st, err),
            (
                nri_status::InvalidArgument,
                "spec is NULL but its length is 3".into()
            )
        );
        unsafe { nri_spec_generator_free(g) };
        unsafe { nri_spec_generator_free(null_mut()) };
    }

    /// A generator with every callback, on `seen`.
    fn full(seen: &Seen) -> *mut nri_spec_generator {
        let g = plain();
        let ud = seen.ud();
        let free = Some(free_seen as unsafe extern "C" fn(*mut c_void));
        unsafe {
            nri_spec_generator_set_annotation_filter(g, Some(filter), ud, free, null_mut())
                .then_ok();
            nri_spec_generator_set_label_filter(g, Some(filter), ud, free, null_mut()).then_ok();
            nri_spec_generator_set_blockio_resolver(g, Some(blockio), ud, free, null_mut())
                .then_ok();
            nri_spec_generator_set_rdt_resolver(g, Some(rdt), ud, free, null_mut()).then_ok();
            nri_spec_generator_set_resource_checker(g, Some(checker), ud, free, null_mut())
                .then_ok();
            nri_spec_generator_set_cdi_injector(g, Some(inject), ud, free, null_mut()).then_ok();
            nri_spec_generator_set_propagation_checker(
                g,
                Some(no_propagation),
                ud,
                free,
                null_mut(),
            )
            .then_ok();
        }
        g
    }

    #[test]
    fn callbacks_answer_in_json() {
        let seen = Seen::default();
        let g = full(&seen);
        let mut adj = ContainerAdjustment::new();
        adj.add_annotation("private.key", "x");
        adj.add_annotation("public", "y");
        adj.set_linux_blockio_class("slow");
        adj.set_linux_rdt_class("gold");
        adj.set_linux_memory_limit(2000);
        adj.add_cdi_device(CDIDevice {
            name: "vendor.com/gpu=0".into(),
            ..Default::default()
        });
        adj.add_cdi_device(CDIDevice {
            name: "vendor.com/gpu=1".into(),
            ..Default::default()
        });
        let (spec, cdi) = adjust(g, &base(), &adj).unwrap();
        assert_eq!(spec["annotations"], json!({"public": "y"}));
        assert_eq!(
            spec["process"]["env"],
            json!(["PATH=/bin", "CDI=vendor.com/gpu=0,vendor.com/gpu=1"])
        );
        assert_eq!(
            spec["linux"]["resources"],
            json!({"memory": {"limit": 2000, "swap": 2000}, "cpu": {"shares": 2}, "pids": {}, "blockIO": {"weight": 10}})
        );
        assert_eq!(spec["linux"]["intelRdt"], json!({"closID": "gold"}));
        assert_eq!(cdi, json!([]), "the injector took the devices");
        let log = seen.log.lock().unwrap().clone();
        assert_eq!(log[0], "inject vendor.com/gpu=0,vendor.com/gpu=1");
        // The checker sees the pids section as Go wrote it, without a limit.
        assert_eq!(
            log[1],
            r#"check {"memory":{"limit":2000,"swap":2000},"pids":{}}"#
        );
        assert_eq!(log[2], "blockio slow");

        let mut r = LinuxResources::new();
        r.blockio_class.mut_or_insert_default().value = "none".into();
        let mut spec = base();
        spec["linux"]["resources"]["blockIO"] = json!({"weight": 5});
        let updated = update(g, &spec, &r).unwrap();
        assert_eq!(
            updated["linux"]["resources"].get("blockIO"),
            None,
            "the resolver cleared it"
        );

        let labels = br#"{"private.a": "1", "b": "2"}"#;
        let (mut out, mut err) = (nri_buffer::EMPTY, null_mut());
        unsafe { nri_spec_filter_labels(g, labels.as_ptr(), labels.len(), &mut out, &mut err) }
            .then_ok();
        assert_eq!(taken(&mut out), json!({"b": "2"}));
        unsafe { nri_spec_filter_labels(g, b"{\"fail\": \"\"}".as_ptr(), 12, &mut out, &mut err) };
        assert_eq!(
            failed(nri_status::CallbackFailed, err).1,
            "failed to filter labels: no fail allowed"
        );

        unsafe { nri_spec_generator_free(g) };
        assert_eq!(
            seen.freed.load(Ordering::SeqCst),
            7,
            "each setter's user data finalized once"
        );
    }

    #[test]
    fn callback_errors_refuse_with_upstreams_text() {
        let seen = Seen::default();
        let g = full(&seen);
        let refused = |f: &dyn Fn(&mut ContainerAdjustment)| {
            let mut adj = ContainerAdjustment::new();
            f(&mut adj);
            let (st, msg) = adjust(g, &base(), &adj).unwrap_err();
            assert_eq!(st, nri_status::CallbackFailed, "{msg}");
            msg
        };
        assert_eq!(
            refused(&|a| a.add_annotation("fail", "")),
            "failed to adjust annotations in OCI Spec: no fail allowed"
        );
        assert_eq!(
            refused(&|a| a.set_linux_blockio_class("bad")),
            "failed to adjust BlockIO class in OCI Spec: unknown class bad"
        );
        assert!(refused(&|a| a.set_linux_blockio_class("garbage")).starts_with(
            "failed to adjust BlockIO class in OCI Spec: block I/O class resolver: invalid JSON"
        ));
        assert_eq!(
            refused(&|a| a.set_linux_memory_limit(2 << 30)),
            "failed to adjust resources in OCI Spec: too much memory"
        );
        let mount = |a: &mut ContainerAdjustment| {
            a.add_mount(Mount {
                destination: "/shared".into(),
                source: "/host".into(),
                options: vec!["rbind".into(), "rshared".into()],
                ..Default::default()
            })
        };
        assert_eq!(
            refused(&mount),
            "failed to adjust mounts in OCI Spec: /host is not rshared"
        );
        unsafe { nri_spec_generator_free(g) };

        // A setter without a callback fails, and still owns the user data.
        let g = plain();
        let mut err = null_mut();
        let st = unsafe {
            nri_spec_generator_set_cdi_injector(g, None, seen.ud(), Some(free_seen), &mut err)
        };
        assert_eq!(
            failed(st, err),
            (nri_status::InvalidArgument, "inject is NULL".into())
        );
        let st = unsafe {
            nri_spec_generator_set_rdt_resolver(
                null_mut(),
                Some(rdt),
                seen.ud(),
                Some(free_seen),
                &mut err,
            )
        };
        assert_eq!(
            failed(st, err),
            (nri_status::InvalidArgument, "generator is NULL".into())
        );
        assert_eq!(seen.freed.load(Ordering::SeqCst), 7 + 2);
        unsafe { nri_spec_generator_free(g) };
    }
}
