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
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

mod callbacks;

use self::callbacks::*;
use super::buffer::{bytes, decode_raw, nri_buffer};
use super::callbacks::{nri_free_fn, nri_reply, UserData};
use super::error::{boundary, nri_error};
use super::ptr::{Handle, OutSlot};
use super::status::{nri_status, Failure};
use nri_api::{ContainerAdjustment, LinuxResources};
use nri_spec::json::{self, JsonError, SpecJsonError};
use nri_spec::{Generator, GeneratorBuilder, SpecError};

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

impl Handle for nri_spec_generator {
    const NAME: &'static str = "generator";
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
    nri_spec_generator {
        state: Mutex::new(State::default()),
    }
    .into_raw()
}

/// Releases a generator, running the finalizers of its callbacks' user
/// data. NULL is a no-op. Must not race with another call on it.
///
/// # Safety
/// `g` is NULL or a generator from `nri_spec_generator_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn nri_spec_generator_free(g: *mut nri_spec_generator) {
    // SAFETY: nri_spec_generator_free's contract: `g` is NULL or a generator
    // from nri_spec_generator_new not yet freed, and no other call races with
    // this one.
    unsafe { nri_spec_generator::free(g) }
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

/// Runs a setter on a generator that must not be NULL: `set` adds the
/// option for callback `f`. `data` is owned already, so its finalizer runs
/// even when this fails.
///
/// # Safety
/// `g` is NULL or a live generator; `err` is NULL or writable.
unsafe fn set_callback<F>(
    g: *mut nri_spec_generator,
    err: *mut *mut nri_error,
    what: &str,
    f: Option<F>,
    data: Arc<UserData>,
    set: fn(GeneratorBuilder, Callback<F>) -> GeneratorBuilder,
) -> nri_status {
    boundary(err, || {
        // SAFETY: this function's contract: `g` is NULL or a live generator.
        let g = unsafe { nri_spec_generator::arg(g) }?;
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
    // SAFETY: nri_spec_generator_set_label_filter's contract: `g` comes from
    // nri_spec_generator_new, `err` is NULL or writable.
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
    // SAFETY: nri_spec_generator_set_annotation_filter's contract: `g` comes
    // from nri_spec_generator_new, `err` is NULL or writable.
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
    // SAFETY: nri_spec_generator_set_blockio_resolver's contract: `g` comes
    // from nri_spec_generator_new, `err` is NULL or writable.
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
    // SAFETY: nri_spec_generator_set_rdt_resolver's contract: `g` comes from
    // nri_spec_generator_new, `err` is NULL or writable.
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
    // SAFETY: nri_spec_generator_set_resource_checker's contract: `g` comes
    // from nri_spec_generator_new, `err` is NULL or writable.
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
    // SAFETY: nri_spec_generator_set_cdi_injector's contract: `g` comes from
    // nri_spec_generator_new, `err` is NULL or writable.
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
    // SAFETY: nri_spec_generator_set_propagation_checker's contract: `g` comes
    // from nri_spec_generator_new, `err` is NULL or writable.
    unsafe { set_callback(g, err, "check", check, data, propagation_checker) }
}

fn propagation_checker(b: GeneratorBuilder, c: Callback<PropagationFn>) -> GeneratorBuilder {
    b.propagation_checker(move |source, accepted| call_propagation(&c, source, accepted))
}

/// Runs a setter without a callback on a generator that must not be NULL.
///
/// # Safety
/// `g` is NULL or a live generator; `err` is NULL or writable.
unsafe fn with_state(
    g: *mut nri_spec_generator,
    err: *mut *mut nri_error,
    set: impl FnOnce(&mut State),
) -> nri_status {
    boundary(err, || {
        // SAFETY: this function's contract: `g` is NULL or a live generator.
        let g = unsafe { nri_spec_generator::arg(g) }?;
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
    // SAFETY: nri_spec_generator_disable_propagation_check's contract: `g`
    // comes from nri_spec_generator_new, `err` is NULL or writable.
    unsafe {
        with_state(g, err, |s| {
            s.builder = std::mem::take(&mut s.builder).no_propagation_check()
        })
    }
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
    // SAFETY: nri_spec_generator_allow_lossy_parsing's contract: `g` comes from
    // nri_spec_generator_new, `err` is NULL or writable.
    unsafe { with_state(g, err, |s| s.lossy.store(true, Ordering::Relaxed)) }
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
        // SAFETY: nri_spec_adjust's contract: `g` comes from
        // nri_spec_generator_new, `out_spec` is writable.
        let (g, out_spec) = unsafe { generator_arg(g, out_spec) }?;
        // SAFETY: nri_spec_adjust's contract: `out_cdi_devices` is NULL or
        // writable.
        let out_cdi_devices = unsafe { OutSlot::optional(out_cdi_devices) };
        // SAFETY: nri_spec_adjust's contract: `spec` is valid for `spec_len`
        // bytes (or `spec_len` is 0).
        let input = unsafe { bytes("spec", spec, spec_len) }?;
        // SAFETY: nri_spec_adjust's contract: `adjustment` is valid for
        // `adjustment_len` bytes (or `adjustment_len` is 0).
        let adjust: ContainerAdjustment = unsafe { decode_raw(adjustment, adjustment_len) }?;
        let (generator, lossy) = g.snapshot();
        let adjusted = json::adjust(&generator, input, lossy, &adjust)?;
        out_spec.write(nri_buffer::from_vec(adjusted.spec));
        if let Some(out) = out_cdi_devices {
            out.write(nri_buffer::from_vec(adjusted.pending_cdi_devices));
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
        // SAFETY: nri_spec_update_resources's contract: `g` comes from
        // nri_spec_generator_new, `out_spec` is writable.
        let (g, out_spec) = unsafe { generator_arg(g, out_spec) }?;
        // SAFETY: nri_spec_update_resources's contract: `spec` is valid for
        // `spec_len` bytes (or `spec_len` is 0).
        let input = unsafe { bytes("spec", spec, spec_len) }?;
        // SAFETY: nri_spec_update_resources's contract: `resources` is valid
        // for `resources_len` bytes (or `resources_len` is 0).
        let update: LinuxResources = unsafe { decode_raw(resources, resources_len) }?;
        let (generator, lossy) = g.snapshot();
        let spec = json::update_resources(&generator, input, lossy, &update)?;
        out_spec.write(nri_buffer::from_vec(spec));
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
        // SAFETY: nri_spec_filter_labels's contract: `g` comes from
        // nri_spec_generator_new, `out_json` is writable.
        let (g, out_json) = unsafe { generator_arg(g, out_json) }?;
        // SAFETY: nri_spec_filter_labels's contract: `labels` is valid for
        // `len` bytes (or `len` is 0).
        let input = unsafe { bytes("labels", labels, len) }?;
        let labels: Option<HashMap<String, String>> =
            serde_json::from_slice(input).map_err(|e| {
                Failure::invalid(format!("labels are not a JSON object of strings: {e}"))
            })?;
        let (generator, _) = g.snapshot();
        let filtered = generator
            .filter_labels(&labels.unwrap_or_default())
            .map_err(spec_failure)?;
        out_json.write(nri_buffer::from_vec(json::to_vec(&filtered)?));
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
        // SAFETY: nri_spec_resources_to_oci's contract: `out_json` is writable.
        let out_json = unsafe { OutSlot::new("out_json", out_json) }?;
        // SAFETY: nri_spec_resources_to_oci's contract: `resources` is valid
        // for `len` bytes (or `len` is 0).
        let r: LinuxResources = unsafe { decode_raw(resources, len) }?;
        out_json.write(nri_buffer::from_vec(json::resources_to_oci(&r)?));
        Ok(())
    })
}

/// The generator of a call, checked after the output slot every call has
/// ("output buffer is NULL", then "generator is NULL").
///
/// # Safety
/// `g` is NULL or a live generator; `out` is NULL or writable for `'a`.
unsafe fn generator_arg<'a>(
    g: *const nri_spec_generator,
    out: *mut nri_buffer,
) -> Result<(&'a nri_spec_generator, OutSlot<'a, nri_buffer>), Failure> {
    // SAFETY: this function's contract: `out` is NULL or writable for 'a.
    let out = unsafe { OutSlot::new("output buffer", out) }?;
    // SAFETY: this function's contract: `g` is NULL or a live generator.
    let g = unsafe { nri_spec_generator::arg(g) }?;
    Ok((g, out))
}

impl From<JsonError> for Failure {
    fn from(e: JsonError) -> Failure {
        let status = match e {
            JsonError::Invalid(_) => nri_status::InvalidSpec,
            JsonError::Unwritable(_) => nri_status::SpecRefused,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<SpecJsonError> for Failure {
    fn from(e: SpecJsonError) -> Failure {
        match e {
            SpecJsonError::Json(e) => e.into(),
            SpecJsonError::Spec(e) => spec_failure(e),
        }
    }
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

#[cfg(test)]
// Tests call the C ABI as C does, on values they made a line before;
// a SAFETY comment on each call would repeat that.
#[allow(clippy::undocumented_unsafe_blocks)]
mod tests;
