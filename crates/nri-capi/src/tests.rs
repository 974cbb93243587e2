//! The C ABI driven from Rust the way a C caller drives it: raw pointers,
//! `extern "C"` callbacks, protobuf bytes. (The C-level tests proper live
//! in tests/c.)

use std::ffi::{c_void, CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use protobuf::Message;

use super::*;
use nri_api::*;

/// What the callbacks saw, checked on the test thread.
#[derive(Default)]
struct Seen {
    syncs: AtomicUsize,
    freed: AtomicUsize,
    ops: Mutex<Vec<u32>>,
}

unsafe extern "C" fn sync(ud: *mut c_void, cb: *mut nri_sync_cb, reply: *mut nri_reply) {
    let seen = unsafe { &*(ud as *const Seen) };
    seen.syncs.fetch_add(1, Ordering::SeqCst);
    let mut state = SynchronizeRequest::new();
    state.pods.push(PodSandbox {
        id: "pod0".into(),
        ..Default::default()
    });
    let bytes = state.write_to_bytes().unwrap();
    let mut updates = nri_buffer::EMPTY;
    let st = unsafe { nri_sync_cb_call(cb, bytes.as_ptr(), bytes.len(), &mut updates, null_mut()) };
    if st != nri_status::Ok {
        unsafe { nri_reply_set_error(reply, c"sync failed".as_ptr()) };
    }
    unsafe { nri_buffer_free(&mut updates) };
}

unsafe extern "C" fn update(_: *mut c_void, _: *const u8, _: usize, _: *mut nri_reply) {}

unsafe extern "C" fn free_seen(ud: *mut c_void) {
    let seen = unsafe { &*(ud as *const Seen) };
    seen.freed.fetch_add(1, Ordering::SeqCst);
}

/// A builtin plugin adding an environment variable, rejecting containers
/// named "evil" at validation.
unsafe extern "C" fn builtin(
    ud: *mut c_void,
    op: nri_builtin_op,
    req: *const u8,
    len: usize,
    reply: *mut nri_reply,
) {
    let seen = unsafe { &*(ud as *const Seen) };
    seen.ops.lock().unwrap().push(op as u32);
    let bytes = unsafe { std::slice::from_raw_parts(req, len) };
    match op {
        nri_builtin_op::CreateContainer => {
            let mut rsp = CreateContainerResponse::new();
            rsp.adjust.mut_or_insert_default().env.push(KeyValue {
                key: "FROM_C".into(),
                value: "yes".into(),
                ..Default::default()
            });
            let out = rsp.write_to_bytes().unwrap();
            unsafe { nri_reply_set_data(reply, out.as_ptr(), out.len()) };
        }
        nri_builtin_op::ValidateContainerAdjustment => {
            let req = ValidateContainerAdjustmentRequest::parse_from_bytes(bytes).unwrap();
            if req.container.name == "evil" {
                unsafe { nri_reply_set_error(reply, c"no evil containers".as_ptr()) };
            }
        }
        _ => {}
    }
}

fn err_text(err: *mut nri_error) -> String {
    let s = unsafe { CStr::from_ptr(nri_error_message(err)) }
        .to_string_lossy()
        .into_owned();
    unsafe { nri_error_free(err) };
    s
}

const CREATE: i32 = nri_event::CreateContainer as i32;

fn create(a: *const nri_adaptation, name: &str) -> Result<CreateContainerResponse, String> {
    let mut req = CreateContainerRequest::new();
    req.pod.mut_or_insert_default().id = "pod0".into();
    req.container.mut_or_insert_default().id = format!("ctr-{name}");
    req.container.mut_or_insert_default().name = name.into();
    let bytes = req.write_to_bytes().unwrap();
    let mut rsp = nri_buffer::EMPTY;
    let mut err = null_mut();
    let st = unsafe {
        nri_adaptation_event(
            a,
            CREATE,
            null(),
            bytes.as_ptr(),
            bytes.len(),
            &mut rsp,
            &mut err,
        )
    };
    if st != nri_status::Ok {
        assert!(rsp.data.is_null(), "outputs are written only on success");
        return Err(format!("{}: {}", st as u32, err_text(err)));
    }
    let out = unsafe { std::slice::from_raw_parts(rsp.data, rsp.len) };
    let parsed = CreateContainerResponse::parse_from_bytes(out).unwrap();
    unsafe { nri_buffer_free(&mut rsp) };
    Ok(parsed)
}

#[test]
fn a_builtin_plugin_adjusts_and_validates_through_the_c_abi() {
    let seen = Box::new(Seen::default());
    let ud = &*seen as *const Seen as *mut c_void;
    let opts = nri_options_new();
    unsafe {
        assert_eq!(
            nri_options_disable_external_connections(opts, null_mut()),
            nri_status::Ok
        );
        let dir = tempfile::tempdir().unwrap();
        let p = CString::new(dir.path().to_str().unwrap()).unwrap();
        assert_eq!(
            nri_options_set_plugin_path(opts, p.as_ptr(), null_mut()),
            nri_status::Ok
        );
        let plugin = nri_builtin_plugin {
            name: c"c-plugin".as_ptr(),
            index: c"10".as_ptr(),
            events: EventMask::of(&[
                Event::CREATE_CONTAINER,
                Event::VALIDATE_CONTAINER_ADJUSTMENT,
            ])
            .raw(),
            handle: Some(builtin),
            user_data: ud,
            free_user_data: Some(free_seen),
        };
        assert_eq!(
            nri_options_add_builtin_plugin(opts, &plugin, null_mut()),
            nri_status::Ok
        );
    }
    let cbs = nri_callbacks {
        sync: Some(sync),
        update: Some(update),
        user_data: ud,
        free_user_data: Some(free_seen),
    };
    let mut a = null_mut();
    let mut err = null_mut();
    let st = unsafe {
        nri_adaptation_new(
            c"rt".as_ptr(),
            c"1.0".as_ptr(),
            &cbs,
            opts,
            &mut a,
            &mut err,
        )
    };
    assert_eq!(st, nri_status::Ok);

    // Not started yet: events are refused.
    let e = create(a, "early").unwrap_err();
    assert_eq!(e, "3: NRI adaptation is not running");

    assert_eq!(unsafe { nri_adaptation_start(a, &mut err) }, nri_status::Ok);
    assert_eq!(seen.syncs.load(Ordering::SeqCst), 1);

    let rsp = create(a, "good").unwrap();
    let env = &rsp.adjust.env;
    assert_eq!(env.len(), 1);
    assert_eq!(
        (env[0].key.as_str(), env[0].value.as_str()),
        ("FROM_C", "yes")
    );

    let e = create(a, "evil").unwrap_err();
    assert!(e.starts_with("6: validator"), "{e}");
    assert!(e.contains("no evil containers"), "{e}");

    let ops = seen.ops.lock().unwrap().clone();
    assert_eq!(ops[0], nri_builtin_op::Configure as u32);
    assert_eq!(ops[1], nri_builtin_op::Synchronize as u32);
    assert!(ops.contains(&(nri_builtin_op::ValidateContainerAdjustment as u32)));

    // Bad input: garbage bytes, NULL response slot, NULL handle.
    let junk = [0xffu8; 4];
    let mut rsp = nri_buffer::EMPTY;
    let st = unsafe {
        nri_adaptation_event(
            a,
            CREATE,
            null(),
            junk.as_ptr(),
            junk.len(),
            &mut rsp,
            &mut err,
        )
    };
    assert_eq!(st, nri_status::InvalidMessage);
    assert!(err_text(err).starts_with("invalid CreateContainerRequest"));
    let st = unsafe { nri_adaptation_event(a, CREATE, null(), null(), 0, null_mut(), &mut err) };
    assert_eq!(st, nri_status::InvalidArgument);
    assert_eq!(err_text(err), "response is NULL");
    let start = nri_event::StartContainer as i32;
    let st =
        unsafe { nri_adaptation_event(null(), start, null(), null(), 0, null_mut(), &mut err) };
    assert_eq!(st, nri_status::InvalidArgument);
    assert_eq!(err_text(err), "adaptation is NULL");

    // Still usable after all that; stop twice, then events are refused.
    assert!(create(a, "again").is_ok());
    unsafe {
        assert_eq!(nri_adaptation_stop(a, null_mut()), nri_status::Ok);
        assert_eq!(nri_adaptation_stop(a, null_mut()), nri_status::Ok);
    }
    assert!(create(a, "late").unwrap_err().starts_with("3: "));

    assert_eq!(seen.freed.load(Ordering::SeqCst), 0);
    unsafe { nri_adaptation_free(a) };
    // Both the runtime callbacks' and the builtin plugin's finalizers ran.
    assert_eq!(seen.freed.load(Ordering::SeqCst), 2);
}

#[test]
fn creation_failures_run_finalizers_and_write_nothing() {
    let seen = Box::new(Seen::default());
    let ud = &*seen as *const Seen as *mut c_void;
    let cbs = nri_callbacks {
        sync: Some(sync),
        update: None,
        user_data: ud,
        free_user_data: Some(free_seen),
    };
    let mut a = null_mut();
    let mut err = null_mut();
    let st = unsafe {
        nri_adaptation_new(
            c"rt".as_ptr(),
            c"1.0".as_ptr(),
            &cbs,
            nri_options_new(),
            &mut a,
            &mut err,
        )
    };
    assert_eq!(st, nri_status::InvalidArgument);
    assert_eq!(err_text(err), "callbacks.update is NULL");
    assert!(a.is_null());
    assert_eq!(seen.freed.load(Ordering::SeqCst), 1);

    let opts = nri_options_new();
    let bad = unsafe { nri_options_set_default_validator(opts, c"enable: [".as_ptr(), &mut err) };
    assert_eq!(bad, nri_status::InvalidArgument);
    assert!(err_text(err).starts_with("invalid default validator config"));
    let empty = unsafe { nri_options_set_socket_path(opts, c"".as_ptr(), &mut err) };
    assert_eq!(empty, nri_status::InvalidArgument);
    assert_eq!(err_text(err), "socket path is empty");
    unsafe { nri_options_free(opts) };
    unsafe { nri_options_free(null_mut()) };
}

/// A setter the core refuses a value of leaves the options whole: the
/// builtin plugin added before stays, its user data freed only with the
/// options.
#[test]
fn a_refused_option_value_keeps_the_options_it_was_set_on() {
    let seen = Box::new(Seen::default());
    let ud = &*seen as *const Seen as *mut c_void;
    let plugin = |name: &CStr| nri_builtin_plugin {
        name: name.as_ptr(),
        index: c"10".as_ptr(),
        events: 0,
        handle: Some(builtin),
        user_data: ud,
        free_user_data: Some(free_seen),
    };
    let opts = nri_options_new();
    let kept = plugin(c"kept");
    let st = unsafe { nri_options_add_builtin_plugin(opts, &kept, null_mut()) };
    assert_eq!(st, nri_status::Ok);

    let refused = |call: &dyn Fn(*mut *mut nri_error) -> nri_status| {
        let mut err = null_mut();
        assert_eq!(call(&mut err), nri_status::InvalidArgument);
        err_text(err)
    };
    unsafe {
        assert_eq!(
            refused(&|e| nri_options_set_plugin_path(opts, c"".as_ptr(), e)),
            "plugin path is empty"
        );
        assert_eq!(
            refused(&|e| nri_options_set_plugin_request_timeout(opts, c"slow".as_ptr(), 0, e)),
            "request timeout of plugin \"slow\" is 0"
        );
        assert_eq!(
            refused(&|e| nri_options_set_plugin_request_timeout(opts, c"".as_ptr(), 1, e)),
            "plugin is empty"
        );
        assert_eq!(
            refused(&|e| nri_options_set_audit_file(opts, c"".as_ptr(), e)),
            "path is empty"
        );
        assert_eq!(
            refused(&|e| nri_options_set_audit_record_limit(opts, 255, e)),
            "audit record limit 255 is below 256 bytes"
        );
        assert_eq!(
            refused(&|e| nri_options_set_plugin_identities(
                opts,
                c"rules: [{plugins: []}]".as_ptr(),
                e
            )),
            "invalid plugin identity policy: a rule names no plugins"
        );
    }
    assert_eq!(seen.freed.load(Ordering::SeqCst), 0);
    // A refused plugin's own user data is freed at once, as documented.
    let nameless = plugin(c"");
    assert_eq!(
        refused(&|e| unsafe { nri_options_add_builtin_plugin(opts, &nameless, e) }),
        "builtin plugin \"10\"-\"\": empty name or index"
    );
    assert_eq!(seen.freed.load(Ordering::SeqCst), 1);
    unsafe { nri_options_free(opts) };
    assert_eq!(seen.freed.load(Ordering::SeqCst), 2);
}
