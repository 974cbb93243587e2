//! The spec generator's C ABI, called as C would call it.

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
use nri_spec::UNLIMITED_PIDS_LIMIT;
use serde_json::Map;
use serde_json::Value;
use std::ffi::CString;

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
    let v =
        serde_json::from_slice(unsafe { std::slice::from_raw_parts(buf.data, buf.len) }).unwrap();
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
unsafe extern "C" fn filter(_: *mut c_void, json: *const u8, len: usize, reply: *mut nri_reply) {
    let mut m: Map<String, Value> = serde_json::from_value(unsafe { json_arg(json, len) }).unwrap();
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
unsafe extern "C" fn checker(ud: *mut c_void, json: *const u8, len: usize, reply: *mut nri_reply) {
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
    let no_pids = json!({"ociVersion": "", "process": {"user": {"uid": 0, "gid": 0}, "cwd": ""}});
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
    exotic["vm"] =
        json!({"hypervisor": {"path": "/hv"}, "kernel": {"path": "/k"}, "hwconfig": {"vcpus": 2}});
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
    let st = unsafe { nri_spec_adjust(g, null(), 3, null(), 0, &mut out, null_mut(), &mut err) };
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
        nri_spec_generator_set_annotation_filter(g, Some(filter), ud, free, null_mut()).then_ok();
        nri_spec_generator_set_label_filter(g, Some(filter), ud, free, null_mut()).then_ok();
        nri_spec_generator_set_blockio_resolver(g, Some(blockio), ud, free, null_mut()).then_ok();
        nri_spec_generator_set_rdt_resolver(g, Some(rdt), ud, free, null_mut()).then_ok();
        nri_spec_generator_set_resource_checker(g, Some(checker), ud, free, null_mut()).then_ok();
        nri_spec_generator_set_cdi_injector(g, Some(inject), ud, free, null_mut()).then_ok();
        nri_spec_generator_set_propagation_checker(g, Some(no_propagation), ud, free, null_mut())
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
    assert!(
        refused(&|a| a.set_linux_blockio_class("garbage")).starts_with(
            "failed to adjust BlockIO class in OCI Spec: block I/O class resolver: invalid JSON"
        )
    );
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
