//! Seed inputs, built from nri-rs's own types: a handful per target that
//! reach its interesting paths at once (well-formed messages and frames,
//! a few broken ones). `nri-fuzz-seeds` writes them to `corpus/`.

use protobuf::{Message, MessageField};

use nri_api::*;

/// A deterministic byte generator, for the targets whose input
/// `arbitrary` interprets (any bytes are a case there).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

fn ttrpc_msg(stream: u32, kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(10 + payload.len());
    m.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    m.extend_from_slice(&stream.to_be_bytes());
    m.extend([kind, 0]);
    m.extend_from_slice(payload);
    m
}

fn frame(id: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(8 + payload.len());
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn pod(i: usize) -> PodSandbox {
    let mut p = PodSandbox {
        id: format!("pod{i}"),
        name: format!("name{i}"),
        namespace: "default".into(),
        uid: format!("uid-{i}"),
        ..Default::default()
    };
    p.annotations.insert("a".into(), "b".into());
    p.labels.insert("app".into(), format!("x{i}"));
    p
}

fn container(i: usize) -> Container {
    let mut c = Container {
        id: format!("ctr{i}"),
        pod_sandbox_id: format!("pod{i}"),
        name: "ctr".into(),
        args: vec!["/bin/sh".into(), "-c".into(), "true".into()],
        env: vec!["PATH=/bin".into()],
        ..Default::default()
    };
    c.annotations.insert("k".into(), "v".into());
    c.mounts.push(Mount {
        destination: "/data".into(),
        source: "/host".into(),
        type_: "bind".into(),
        options: vec!["rbind".into(), "ro".into()],
        ..Default::default()
    });
    c
}

fn adjustment() -> ContainerAdjustment {
    let mut a = ContainerAdjustment::default();
    a.add_env("HELLO", "world");
    a.remove_env("GONE");
    a.add_annotation("seed", "1");
    a.add_mount(Mount {
        destination: "/m".into(),
        source: "/src".into(),
        type_: "bind".into(),
        options: vec!["rbind".into()],
        ..Default::default()
    });
    a.set_linux_memory_limit(1 << 30);
    a.set_linux_cpu_shares(512);
    a.set_linux_cpuset_cpus("0-1");
    a.add_linux_hugepage_limit("2MB", 1 << 20);
    a.add_linux_unified("memory.high", "max");
    a.add_rlimit("RLIMIT_NOFILE", 1024, 512);
    a.set_linux_sysctl("net.ipv4.ip_forward", "1");
    a.add_or_replace_namespace(LinuxNamespace {
        type_: "network".into(),
        path: "/proc/1/ns/net".into(),
        ..Default::default()
    });
    a.set_linux_oom_score_adj(Some(-100));
    a
}

fn update(ctr: &str) -> ContainerUpdate {
    let mut u = ContainerUpdate::for_container(ctr);
    u.set_linux_memory_limit(1 << 28);
    u.set_linux_cpu_quota(50_000);
    u.set_linux_pid_limits(100);
    u
}

fn resources() -> LinuxResources {
    update("x").linux.unwrap().resources.unwrap()
}

fn sync_request(pods: usize, ctrs: usize, more: bool) -> Vec<u8> {
    SynchronizeRequest {
        pods: (0..pods).map(pod).collect(),
        containers: (0..ctrs).map(container).collect(),
        more,
        ..Default::default()
    }
    .write_to_bytes()
    .unwrap()
}

fn enc<M: Message>(m: &M) -> Vec<u8> {
    m.write_to_bytes().unwrap()
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn mux_frames() -> Vec<Vec<u8>> {
    let big = [0xff, 0xff, 0xff];
    let small = [0x10, 0x00, 0x07];
    let m0 = ttrpc_msg(1, 1, b"");
    let m1 = ttrpc_msg(3, 1, &noise(1, 100));
    let m2 = ttrpc_msg(5, 2, &noise(2, 4086));
    let m3 = ttrpc_msg(7, 2, &noise(3, 5000));
    vec![
        cat(&[&big, &m1]),
        cat(&[&big, &m0, &m1, &m2]),
        cat(&[&big, &m3, &m1]),
        cat(&[&big, &m1[..50]]),
        cat(&[&small, &m1, &m3]),
        cat(&[&small, &[0xff; 10]]),
        cat(&[&[0, 0, 0], &m0, &m0]),
    ]
}

fn mux_stream() -> Vec<Vec<u8>> {
    let req = ttrpc_msg(1, 1, &enc(&CreateContainerRequest::default()));
    let reply = ttrpc_msg(1, 2, &noise(4, 5000));
    let trunk = cat(&[
        &frame(1, &req),
        &frame(2, &noise(5, 300)),
        &frame(9, &noise(6, 40)),
        &frame(1, &reply[..4096]),
        &frame(1, &reply[4096..]),
    ]);
    let huge = [0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
    let outgoing = cat(&[&req, &reply, &noise(7, 200)]);
    let mut out = Vec::new();
    for cfg in [
        [0xff, 0xff, 0xff, 0xff, 0x00, 0x80, 0x80, 0x10],
        [0x40, 0x00, 0x01, 0x80, 0x07, 0x80, 0xc0, 0x01],
        [0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x80, 0x00],
    ] {
        // About half of the bytes after the settings go to the trunk.
        let body = cat(&[&trunk, &outgoing[..trunk.len().min(outgoing.len())]]);
        out.push(cat(&[&cfg, &body]));
    }
    out.push(cat(&[
        &[0xff, 0xff, 0x10, 0xff, 0x10, 0xff, 0x00, 0x00],
        &frame(1, &req),
        &huge,
    ]));
    out.push(cat(&[
        &[0xff, 0x0f, 0x10, 0xff, 0x10, 0xff, 0x00, 0x00],
        &frame(2, &noise(8, 60)),
        &[0, 0, 0, 2, 0, 0, 1, 0, 1, 2, 3],
    ]));
    out
}

fn sync_split() -> Vec<Vec<u8>> {
    let mut unknown = sync_request(2, 3, true);
    unknown.extend([9 << 3, 42, 10 << 3 | 2, 2, b'h', b'i']);
    let good = sync_request(3, 5, false);
    vec![
        Vec::new(),
        sync_request(1, 0, false),
        good.clone(),
        sync_request(0, 4, true),
        unknown,
        good[..good.len() - 3].to_vec(),
        vec![1 << 3 | 2, 100, 1, 2],
        vec![1 << 3, 1],
        vec![3 << 3, 1, 3 << 3, 0],
    ]
}

fn decode() -> Vec<Vec<u8>> {
    let register = RegisterPluginRequest {
        plugin_name: "logger".into(),
        plugin_idx: "10".into(),
        ..Default::default()
    };
    let updates = UpdateContainersRequest {
        update: vec![update("ctr0"), update("ctr1")],
        evict: vec![ContainerEviction {
            container_id: "ctr2".into(),
            reason: "oom".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let configure = ConfigureResponse {
        events: EventMask::of(&[Event::CREATE_CONTAINER, Event::STOP_CONTAINER]).raw(),
        ..Default::default()
    };
    let create = CreateContainerResponse {
        adjust: MessageField::some(adjustment()),
        update: vec![update("ctr1")],
        ..Default::default()
    };
    let validate = ValidateContainerAdjustmentResponse {
        reject: true,
        reason: "no".into(),
        ..Default::default()
    };
    let request = ::ttrpc::Request {
        service: "nri.pkg.api.v1alpha1.Runtime".into(),
        method: "RegisterPlugin".into(),
        payload: enc(&register),
        timeout_nano: 2_000_000_000,
        ..Default::default()
    };
    let response = ::ttrpc::Response {
        payload: enc(&create),
        ..Default::default()
    };
    vec![
        enc(&register),
        enc(&updates),
        enc(&configure),
        enc(&create),
        enc(&validate),
        enc(&SynchronizeResponse {
            update: vec![update("ctr3")],
            more: true,
            ..Default::default()
        }),
        enc(&request),
        enc(&response),
        // A runtime's request, as the C ABI checks it.
        enc(&CreateContainerRequest {
            pod: MessageField::some(pod(0)),
            container: MessageField::some(container(0)),
            ..Default::default()
        }),
    ]
}

fn arbitrary_bytes(seed: u64) -> Vec<Vec<u8>> {
    [16, 64, 128, 256, 512, 1024, 2048, 4096]
        .iter()
        .enumerate()
        .map(|(i, &len)| noise(seed + i as u64, len))
        .collect()
}

fn validator_yaml() -> Vec<Vec<u8>> {
    [
        "enable: true\nrejectOCIHookAdjustment: true\nrequiredPlugins:\n  - logger\n  - 10-injector\n",
        "{\"enable\": true, \"reject_namespace_adjustment\": true, \"requiredPlugins\": [\"a\"]}",
        "enable: yes\n",
        "tolerateMissingPluginsAnnotation: tolerate.example.com\nunknown:\n  nested: [1, 2]\n",
        "- a\n- 10-b\n- ~\n",
        "[ a, \"b\", 1, null ]",
        "base: &a [x, y]\nmore: [*a, *a, *a]\n",
        "requiredPlugins: !!str 1\n",
        "---\nenable: true\n---\nenable: false\n",
        "a:\n\tb: c\n",
        "",
        "# only a comment\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

const SPEC: &str = r#"{"ociVersion":"1.2.0","process":{"user":{"uid":0,"gid":0},"args":["/bin/sh"],"env":["PATH=/bin"],"cwd":"/"},"root":{"path":"rootfs"},"mounts":[{"destination":"/proc","type":"proc","source":"proc"}],"annotations":{"a":"b"},"linux":{"resources":{"memory":{"limit":1073741824},"cpu":{"shares":1024}},"namespaces":[{"type":"pid"},{"type":"mount"}]}}"#;

/// `[selector, flags, length of a (u16 LE)]`, a, b (see `capi.rs`).
fn capi_input(sel: u8, flags: u8, a: &[u8], b: &[u8]) -> Vec<u8> {
    let len = u16::try_from(a.len()).expect("a seed part under 64 KiB");
    cat(&[&[sel, flags], &len.to_le_bytes(), a, b])
}

fn capi() -> Vec<Vec<u8>> {
    let pod_req = |p: PodSandbox| {
        enc(&RunPodSandboxRequest {
            pod: MessageField::some(p),
            ..Default::default()
        })
    };
    let create_req = enc(&CreateContainerRequest {
        pod: MessageField::some(pod(0)),
        container: MessageField::some(container(0)),
        ..Default::default()
    });
    let create_rsp = enc(&CreateContainerResponse {
        adjust: MessageField::some(adjustment()),
        update: vec![update("ctr1")],
        ..Default::default()
    });
    let update_req = enc(&UpdateContainerRequest {
        pod: MessageField::some(pod(0)),
        container: MessageField::some(container(0)),
        linux_resources: MessageField::some(resources()),
        ..Default::default()
    });
    let update_rsp = enc(&UpdateContainerResponse {
        update: vec![update("ctr0")],
        ..Default::default()
    });
    let stop_req = enc(&StopContainerRequest {
        pod: MessageField::some(pod(0)),
        container: MessageField::some(container(0)),
        ..Default::default()
    });
    let stop_rsp = enc(&StopContainerResponse {
        update: vec![update("ctr2")],
        ..Default::default()
    });
    let sync_rsp = enc(&SynchronizeResponse {
        update: vec![update("ctr0")],
        ..Default::default()
    });
    vec![
        capi_input(0, 0, &pod_req(pod(0)), b""),
        capi_input(1, 0, &enc(&UpdatePodSandboxRequest::default()), b""),
        capi_input(5, 0, &create_req, &create_rsp),
        capi_input(5, 1, &create_req, &create_rsp),
        capi_input(5, 2, &create_req, b""),
        capi_input(5, 8, &create_req, b"x"),
        capi_input(5, 16, &create_req, &create_rsp),
        capi_input(9, 0, &update_req, &update_rsp),
        capi_input(11, 0, &stop_req, &stop_rsp),
        capi_input(12, 4, &stop_req, b""),
        capi_input(13, 0, &sync_request(2, 3, false), &sync_rsp),
        capi_input(13, 1, &sync_request(1, 1, false), b""),
        capi_input(14, 0, SPEC.as_bytes(), &enc(&adjustment())),
        capi_input(14, 32, b"{\"ociVersion\":\"1.0.0\"}", &enc(&adjustment())),
        capi_input(15, 0, SPEC.as_bytes(), &enc(&resources())),
        capi_input(16, 0, b"{\"app\":\"x\",\"-gone\":\"\"}", b""),
        capi_input(17, 0, &enc(&resources()), b""),
        capi_input(18, 0, b"enable: true\nrequiredPlugins: [a]\n", b""),
        capi_input(
            19,
            0,
            &[4, 0, 0, 0, 15, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
            b"",
        ),
        // nri_sync_cb_stream: 2 pods and 3 containers of these sizes,
        // well framed, then the same sizes with bytes that are not.
        capi_input(
            13,
            128 | 64,
            &[2, 3, 6, 0, 0, 0, 200, 0, 2, 0, 9, 0, 0x0a, 0x02, b'p', b'0'],
            &sync_rsp,
        ),
        capi_input(13, 128, &[1, 1, 10, 0, 20, 0, 0xff, 0x0a, 0x7f], b""),
    ]
}

/// Every target's seeds, by target name.
pub fn all() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    vec![
        ("mux_frames", mux_frames()),
        ("mux_stream", mux_stream()),
        ("sync_split", sync_split()),
        ("decode", decode()),
        ("merge", arbitrary_bytes(100)),
        ("validator", arbitrary_bytes(200)),
        ("validator_yaml", validator_yaml()),
        ("capi", capi()),
    ]
}
