//! The C ABI entries that take bytes (`include/nri.h`), called through
//! their Rust `extern "C"` functions as a C runtime calls them: every
//! event with fuzzer bytes as its request while a builtin plugin answers
//! with fuzzer bytes; the sync callback's `nri_sync_cb_call`, or its
//! `nri_sync_cb_stream` with fuzzer sizes and an encoder writing fuzzer
//! bytes or well-framed objects; the callbacks' `nri_reply_set_data`; the spec generator's four functions;
//! the default validator's configuration string. NULL and length
//! combinations come from the input too (NULL with a length, a dangling
//! pointer with length 0, NULL outputs).
//!
//! Checks: no panic anywhere (the libFuzzer runtime aborts on any, caught
//! at the boundary or not); a status is one of the header's; outputs are
//! written only on success and errors only on failure.

#![allow(clippy::undocumented_unsafe_blocks)] // every call is a C call on values made just before

use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut, NonNull};
use std::sync::{Mutex, OnceLock};

use nri::*;
use nri_api::EventMask;

/// What the builtin plugin answers and what the sync callback sends,
/// for the input being run.
struct Script {
    reply: Vec<u8>,
    /// How the reply is set: 0 data, 1 error, 2 NULL with a length, 3 nothing.
    reply_mode: u8,
    state: Vec<u8>,
    state_null: bool,
    /// Synchronize through `nri_sync_cb_stream`, with these sizes.
    stream: Option<Streamed>,
}

/// A state for `nri_sync_cb_stream`: sizes, and what the encoder writes.
struct Streamed {
    pod_sizes: Vec<usize>,
    container_sizes: Vec<usize>,
    /// Each object as a field of its size (its bytes from `bytes`),
    /// rather than `bytes` over and over.
    framed: bool,
    bytes: Vec<u8>,
}

static SCRIPT: Mutex<Script> = Mutex::new(Script {
    reply: Vec::new(),
    reply_mode: 3,
    state: Vec::new(),
    state_null: false,
    stream: None,
});

fn script() -> std::sync::MutexGuard<'static, Script> {
    SCRIPT.lock().unwrap_or_else(|e| e.into_inner())
}

/// A pointer for `bytes`: NULL, dangling (only for an empty slice) or real.
fn ptr_of(bytes: &[u8], null_it: bool) -> *const u8 {
    if null_it {
        null()
    } else if bytes.is_empty() {
        NonNull::<u8>::dangling().as_ptr()
    } else {
        bytes.as_ptr()
    }
}

unsafe fn answer(reply: *mut nri_reply) {
    let s = script();
    let st = match s.reply_mode % 4 {
        0 => unsafe { nri_reply_set_data(reply, ptr_of(&s.reply, false), s.reply.len()) },
        1 => unsafe { nri_reply_set_error(reply, c"builtin says no".as_ptr()) },
        2 => unsafe { nri_reply_set_data(reply, null(), s.reply.len().max(1)) },
        _ => return,
    };
    if s.reply_mode % 4 == 2 {
        assert_eq!(
            st,
            nri_status::InvalidArgument,
            "NULL data with a length accepted"
        );
    } else {
        assert_eq!(st, nri_status::Ok, "setting a reply failed");
    }
}

unsafe extern "C" fn builtin(
    _: *mut c_void,
    _op: nri_builtin_op,
    _req: *const u8,
    _len: usize,
    reply: *mut nri_reply,
) {
    unsafe { answer(reply) }
}

unsafe extern "C" fn sync(_: *mut c_void, cb: *mut nri_sync_cb, reply: *mut nri_reply) {
    let (state, null_it, sizes) = {
        let s = script();
        let sizes = s
            .stream
            .as_ref()
            .map(|st| (st.pod_sizes.clone(), st.container_sizes.clone()));
        (s.state.clone(), s.state_null, sizes)
    };
    let mut updates = nri_buffer {
        data: null_mut(),
        len: 0,
    };
    let mut err = null_mut();
    let st = match &sizes {
        Some((pods, ctrs)) => unsafe {
            nri_sync_cb_stream(
                cb,
                pods.as_ptr(),
                pods.len(),
                ctrs.as_ptr(),
                ctrs.len(),
                Some(encode),
                null_mut(),
                &mut updates,
                &mut err,
            )
        },
        None => unsafe {
            nri_sync_cb_call(
                cb,
                ptr_of(&state, null_it),
                state.len(),
                &mut updates,
                &mut err,
            )
        },
    };
    check_outcome(st, updates.data.is_null(), err);
    unsafe { nri_buffer_free(&mut updates) };
    if st != nri_status::Ok {
        unsafe { nri_reply_set_error(reply, c"sync failed".as_ptr()) };
    }
}

/// The stream's encoder: the script's bytes, framed as its objects or not.
unsafe extern "C" fn encode(
    _: *mut c_void,
    pods_from: usize,
    pods_to: usize,
    containers_from: usize,
    containers_to: usize,
    out: *mut u8,
    len: usize,
    reply: *mut nri_reply,
) {
    let s = script();
    let st = s.stream.as_ref().expect("a streamed sync");
    assert!(pods_from <= pods_to && pods_to <= st.pod_sizes.len(), "pods out of range");
    assert!(
        containers_from <= containers_to && containers_to <= st.container_sizes.len(),
        "containers out of range"
    );
    let mut fill = st.bytes.iter().copied().chain(std::iter::repeat(0)).cycle();
    let mut bytes = Vec::with_capacity(len);
    if st.framed {
        let objects = (pods_from..pods_to)
            .map(|i| (1u8, st.pod_sizes[i]))
            .chain((containers_from..containers_to).map(|i| (2, st.container_sizes[i])));
        for (field, size) in objects {
            bytes.push(field << 3 | 2);
            let mut n = size;
            while n >= 0x80 {
                bytes.push(n as u8 | 0x80);
                n >>= 7;
            }
            bytes.push(n as u8);
            bytes.extend(fill.by_ref().take(size));
        }
        assert_eq!(bytes.len(), len, "the sizes' length is not the objects'");
    } else {
        bytes.extend(fill.take(len));
    }
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, len) };
    if s.reply_mode % 4 == 1 {
        unsafe { nri_reply_set_error(reply, c"encoder says no".as_ptr()) };
    }
}

unsafe extern "C" fn update(_: *mut c_void, _: *const u8, _: usize, reply: *mut nri_reply) {
    unsafe { answer(reply) }
}

/// A status from the header, an error exactly on failure; frees the error.
fn check_outcome(st: nri_status, no_output: bool, err: *mut nri_error) {
    let code = st as u32;
    assert!(code <= 11, "status {code} is not in the header");
    assert_ne!(st, nri_status::Panic, "a panic caught at the boundary");
    if st == nri_status::Ok {
        assert!(err.is_null(), "an error written on success");
    } else {
        assert!(no_output, "an output written on failure");
        if !err.is_null() {
            assert_eq!(
                unsafe { nri_error_status(err) },
                st,
                "error and status differ"
            );
            assert!(!unsafe { nri_error_message(err) }.is_null());
            unsafe { nri_error_free(err) };
        }
    }
}

/// Options for an adaptation with no external plugins and one builtin
/// plugin subscribed to every event.
fn options(dir: &std::path::Path) -> *mut nri_options {
    let opts = nri_options_new();
    let path = CString::new(dir.to_str().unwrap()).unwrap();
    let plugin = nri_builtin_plugin {
        name: c"fuzz".as_ptr(),
        index: c"10".as_ptr(),
        events: EventMask::VALID.raw(),
        handle: Some(builtin),
        user_data: null_mut(),
        free_user_data: None,
    };
    unsafe {
        assert_eq!(
            nri_options_disable_external_connections(opts, null_mut()),
            nri_status::Ok
        );
        assert_eq!(
            nri_options_set_plugin_path(opts, path.as_ptr(), null_mut()),
            nri_status::Ok
        );
        assert_eq!(
            nri_options_add_builtin_plugin(opts, &plugin, null_mut()),
            nri_status::Ok
        );
    }
    opts
}

fn new_adaptation(dir: &std::path::Path) -> *mut nri_adaptation {
    let cbs = nri_callbacks {
        sync: Some(sync),
        update: Some(update),
        user_data: null_mut(),
        free_user_data: None,
    };
    let mut a = null_mut();
    let st = unsafe {
        nri_adaptation_new(
            c"fuzz-runtime".as_ptr(),
            c"1.0".as_ptr(),
            &cbs,
            options(dir),
            &mut a,
            null_mut(),
        )
    };
    assert_eq!(st, nri_status::Ok, "creating the adaptation");
    a
}

/// The adaptation the event inputs share (started once, never freed).
struct Shared(*mut nri_adaptation);
// SAFETY: the C ABI allows calls on one adaptation from any thread.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

fn shared() -> *const nri_adaptation {
    static A: OnceLock<(Shared, tempfile::TempDir)> = OnceLock::new();
    A.get_or_init(|| {
        let dir = tempfile::tempdir().expect("plugin dir");
        *script() = Script {
            reply: Vec::new(),
            reply_mode: 3,
            state: Vec::new(),
            state_null: false,
            stream: None,
        };
        let a = new_adaptation(dir.path());
        assert_eq!(
            unsafe { nri_adaptation_start(a, null_mut()) },
            nri_status::Ok
        );
        (Shared(a), dir)
    })
    .0
     .0
}

/// The events, in the order the selector byte numbers them, and whether
/// each has a response. All go through `nri_adaptation_event`, the one
/// entry point.
const EVENTS: [(nri_event, bool); 13] = [
    (nri_event::RunPodSandbox, false),
    (nri_event::UpdatePodSandbox, true),
    (nri_event::PostUpdatePodSandbox, false),
    (nri_event::StopPodSandbox, false),
    (nri_event::RemovePodSandbox, false),
    (nri_event::CreateContainer, true),
    (nri_event::PostCreateContainer, false),
    (nri_event::StartContainer, false),
    (nri_event::PostStartContainer, false),
    (nri_event::UpdateContainer, true),
    (nri_event::PostUpdateContainer, false),
    (nri_event::StopContainer, true),
    (nri_event::RemoveContainer, false),
];

/// Flags of the input's second byte.
struct Flags(u8);

impl Flags {
    fn null_input(&self) -> bool {
        self.0 & 1 != 0
    }
    fn null_output(&self) -> bool {
        self.0 & 2 != 0
    }
    fn null_err(&self) -> bool {
        self.0 & 4 != 0
    }
    fn reply_mode(&self) -> u8 {
        (self.0 >> 3) & 3
    }
    fn lossy(&self) -> bool {
        self.0 & 32 != 0
    }
    /// Sync cases: through `nri_sync_cb_stream`, its objects well framed.
    fn stream(&self) -> bool {
        self.0 & 128 != 0
    }
    fn framed(&self) -> bool {
        self.0 & 64 != 0
    }
}

/// Input: a selector byte, a flags byte, the length of the first part
/// (u16, little-endian, taken modulo what is left), then the two parts:
/// the call's input and the builtin plugin's reply (or, for the spec
/// calls, the spec JSON and the protobuf message).
pub fn capi(data: &[u8]) {
    let Some((&[sel, flags, lo, hi], rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let flags = Flags(flags);
    let cut = u16::from_le_bytes([lo, hi]) as usize % (rest.len() + 1);
    let (a, b) = rest.split_at(cut);
    match sel % 20 {
        n @ 0..=12 => event(EVENTS[n as usize], a, b, &flags),
        13 => sync_state(a, b, &flags),
        14 => spec_adjust(a, b, &flags),
        15 => spec_update_resources(a, b, &flags),
        16 => spec_filter_labels(a, &flags),
        17 => spec_resources_to_oci(a, &flags),
        18 => default_validator(a, &flags),
        _ => wants_event(a),
    }
}

fn err_slot(flags: &Flags, err: &mut *mut nri_error) -> *mut *mut nri_error {
    if flags.null_err() {
        null_mut()
    } else {
        err
    }
}

/// Runs `f` with an output buffer (or NULL), checks the outcome, frees.
fn with_output(
    flags: &Flags,
    f: impl FnOnce(*mut nri_buffer, *mut *mut nri_error) -> nri_status,
) -> nri_status {
    let mut out = nri_buffer {
        data: null_mut(),
        len: 0,
    };
    let mut err = null_mut();
    let out_ptr: *mut nri_buffer = if flags.null_output() {
        null_mut()
    } else {
        &mut out
    };
    let st = f(out_ptr, err_slot(flags, &mut err));
    if flags.null_output() {
        assert_ne!(st, nri_status::Ok, "a NULL output slot accepted");
    }
    check_outcome(st, out.data.is_null(), err);
    unsafe { nri_buffer_free(&mut out) };
    st
}

fn event((ev, has_response): (nri_event, bool), req: &[u8], reply: &[u8], flags: &Flags) {
    let a = shared();
    {
        let mut s = script();
        s.reply = reply.to_vec();
        s.reply_mode = flags.reply_mode();
    }
    let ptr = ptr_of(req, flags.null_input() && !req.is_empty());
    let (ev, no_cancel) = (ev as i32, std::ptr::null());
    let st = if has_response {
        with_output(flags, |out, err| unsafe {
            nri_adaptation_event(a, ev, no_cancel, ptr, req.len(), out, err)
        })
    } else {
        let mut err = null_mut();
        let err_ptr = err_slot(flags, &mut err);
        let st =
            unsafe { nri_adaptation_event(a, ev, no_cancel, ptr, req.len(), null_mut(), err_ptr) };
        check_outcome(st, true, err);
        st
    };
    if flags.null_input() && !req.is_empty() {
        assert_eq!(
            st,
            nri_status::InvalidArgument,
            "NULL request with a length accepted"
        );
    }
}

/// A fresh adaptation whose start synchronizes the builtin plugin with
/// `state` (the sync callback passes it to `nri_sync_cb_call`; or, with
/// `stream`, it holds a count of pods and of containers, a u16 size for
/// each, and the bytes the encoder writes), the plugin answering with
/// `reply`.
fn sync_state(state: &[u8], reply: &[u8], flags: &Flags) {
    // One adaptation at a time: the script is process-wide.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("plugin dir");
    {
        let mut s = script();
        s.reply = reply.to_vec();
        s.reply_mode = flags.reply_mode();
        s.state = state.to_vec();
        s.state_null = flags.null_input() && !state.is_empty();
        s.stream = flags.stream().then(|| streamed(state, flags.framed()));
    }
    let a = new_adaptation(dir.path());
    let mut err = null_mut();
    let st = unsafe { nri_adaptation_start(a, err_slot(flags, &mut err)) };
    check_outcome(st, true, err);
    unsafe {
        nri_adaptation_stop(a, null_mut());
        nri_adaptation_free(a);
    }
}

fn streamed(input: &[u8], framed: bool) -> Streamed {
    let (counts, rest) = input.split_at(input.len().min(2));
    let count = |i: usize| counts.get(i).map_or(0, |&n| n as usize % 6);
    let (pods, ctrs) = (count(0), count(1));
    let (sizes, bytes) = rest.split_at(rest.len().min(2 * (pods + ctrs)));
    let mut sizes = sizes
        .chunks(2)
        .map(|b| u16::from_le_bytes([b[0], *b.get(1).unwrap_or(&0)]) as usize)
        .chain(std::iter::repeat(0));
    Streamed {
        pod_sizes: sizes.by_ref().take(pods).collect(),
        container_sizes: sizes.take(ctrs).collect(),
        framed,
        bytes: bytes.to_vec(),
    }
}

fn generator(flags: &Flags) -> *mut nri_spec_generator {
    let g = nri_spec_generator_new();
    if flags.lossy() {
        assert_eq!(
            unsafe { nri_spec_generator_allow_lossy_parsing(g, null_mut()) },
            nri_status::Ok
        );
    }
    g
}

fn spec_adjust(spec: &[u8], adjustment: &[u8], flags: &Flags) {
    let g = generator(flags);
    let mut cdi = nri_buffer {
        data: null_mut(),
        len: 0,
    };
    let cdi_ptr: *mut nri_buffer = if flags.0 & 64 != 0 {
        null_mut()
    } else {
        &mut cdi
    };
    let sp = ptr_of(spec, flags.null_input() && !spec.is_empty());
    let st = with_output(flags, |out, err| unsafe {
        nri_spec_adjust(
            g,
            sp,
            spec.len(),
            ptr_of(adjustment, false),
            adjustment.len(),
            out,
            cdi_ptr,
            err,
        )
    });
    if st != nri_status::Ok {
        assert!(cdi.data.is_null(), "CDI devices written on failure");
    }
    unsafe {
        nri_buffer_free(&mut cdi);
        nri_spec_generator_free(g);
    }
}

fn spec_update_resources(spec: &[u8], resources: &[u8], flags: &Flags) {
    let g = generator(flags);
    let rp = ptr_of(resources, flags.null_input() && !resources.is_empty());
    with_output(flags, |out, err| unsafe {
        nri_spec_update_resources(
            g,
            ptr_of(spec, false),
            spec.len(),
            rp,
            resources.len(),
            out,
            err,
        )
    });
    unsafe { nri_spec_generator_free(g) };
}

fn spec_filter_labels(labels: &[u8], flags: &Flags) {
    let g = generator(flags);
    let p = ptr_of(labels, flags.null_input() && !labels.is_empty());
    with_output(flags, |out, err| unsafe {
        nri_spec_filter_labels(g, p, labels.len(), out, err)
    });
    unsafe { nri_spec_generator_free(g) };
}

fn spec_resources_to_oci(resources: &[u8], flags: &Flags) {
    let p = ptr_of(resources, flags.null_input() && !resources.is_empty());
    with_output(flags, |out, err| unsafe {
        nri_spec_resources_to_oci(p, resources.len(), out, err)
    });
}

/// The default validator's configuration, a NUL-terminated string.
fn default_validator(config: &[u8], flags: &Flags) {
    let text: Vec<u8> = config.iter().copied().filter(|&b| b != 0).collect();
    let text = CString::new(text).unwrap();
    let opts = nri_options_new();
    let mut err = null_mut();
    let p = if flags.null_input() {
        null()
    } else {
        text.as_ptr()
    };
    let st = unsafe { nri_options_set_default_validator(opts, p, err_slot(flags, &mut err)) };
    check_outcome(st, true, err);
    if flags.null_input() {
        assert_eq!(
            st,
            nri_status::InvalidArgument,
            "a NULL configuration accepted"
        );
    }
    unsafe { nri_options_free(opts) };
}

/// `nri_adaptation_wants_event` with any event number. The header says
/// true for an unknown event and a NULL handle (the event call then says
/// why), and the builtin plugin takes every event: always true here.
fn wants_event(bytes: &[u8]) {
    let a = shared();
    for chunk in bytes.chunks(4).take(16) {
        let mut raw = [0u8; 4];
        raw[..chunk.len()].copy_from_slice(chunk);
        let event = i32::from_le_bytes(raw);
        assert!(
            unsafe { nri_adaptation_wants_event(a, event) },
            "event {event} not wanted, though the builtin plugin takes all"
        );
        assert!(unsafe { nri_adaptation_wants_event(null(), event) });
    }
}
