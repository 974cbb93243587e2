//! Requests the runtime hands over encoded, as the C ABI does
//! (`create_container_wire`, `relay_encoded`): checked, sent to plugins as
//! they are, and decoded only where the core needs the message. Each test
//! holds the encoded path to what the decoded one does.

use nri_api::{self as api, ContainerAdjustment, Event};
use protobuf::Message;

use crate::common::*;
use crate::peers::{configure_reply, RawPlugin};

/// `create_req` with the parts upstream adds to a container before the
/// first plugin, as go/adaptation encodes it: the bytes a lone plugin is
/// sent unchanged.
fn normalized(pod: &str, ctr: &str) -> api::CreateContainerRequest {
    let mut req = create_req(pod, ctr);
    let c = req.container.mut_or_insert_default();
    c.hooks.mut_or_insert_default();
    let res = c
        .linux
        .mut_or_insert_default()
        .resources
        .mut_or_insert_default();
    res.memory.mut_or_insert_default();
    res.cpu.mut_or_insert_default();
    req
}

fn wire_create(req: &api::CreateContainerRequest) -> Vec<u8> {
    req.write_to_bytes().unwrap()
}

async fn create_encoded(
    h: &Harness,
    req: &api::CreateContainerRequest,
) -> api::CreateContainerResponse {
    let rsp = h.nri.create_container_wire(wire_create(req)).await.unwrap();
    api::CreateContainerResponse::parse_from_bytes(&rsp).unwrap()
}

/// A plugin that sets `from=<name>`, and records in `saw-<name>` which
/// `from` the container had when it got it.
fn chaining(name: &'static str) -> TestPlugin {
    TestPlugin::adjusting(move |ctr| {
        let mut a = ContainerAdjustment::default();
        let saw = ctr
            .annotations
            .get("from")
            .cloned()
            .unwrap_or_else(|| "-".into());
        a.add_annotation(format!("saw-{name}"), &saw);
        if ctr.annotations.contains_key("from") {
            a.remove_annotation("from");
        }
        a.add_annotation("from", name);
        a.add_env(format!("BY_{name}"), name);
        Ok((a, vec![]))
    })
}

/// Plugins after an adjusting one see the container as adjusted, whether
/// the request's bytes are normalized (sent as they are until the first
/// adjustment) or not (decoded from the start), and the pod as it came
/// (kept encoded, sent on with the adjusted container); and the merged
/// reply is the decoded path's, byte for byte.
#[tokio::test]
async fn later_plugins_see_earlier_adjustments_of_an_encoded_request() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let plugins = [chaining("a"), chaining("b"), chaining("c")];
    for (p, (name, idx)) in plugins.iter().zip([("a", "10"), ("b", "20"), ("c", "30")]) {
        h.connect(name, idx, p.clone());
    }
    h.wait_plugins(3).await;
    let mut rich = create_req("p", "c3");
    let pod = rich.pod.mut_or_insert_default();
    pod.labels.insert("app".into(), "web".into());
    pod.annotations.insert("note".into(), "kept".into());
    pod.ips = vec!["10.0.0.7".into()];
    for (i, req) in [normalized("p", "c1"), create_req("p", "c2"), rich]
        .iter()
        .enumerate()
    {
        for p in &plugins {
            p.pods.lock().unwrap().clear();
        }
        let rsp = create_encoded(&h, req).await;
        for p in &plugins {
            assert_eq!(*p.pods.lock().unwrap(), [(*req.pod).clone()], "request {i}");
        }
        assert_eq!(annotation(&rsp, "saw-a"), Some("-"), "request {i}");
        assert_eq!(annotation(&rsp, "saw-b"), Some("a"), "request {i}");
        assert_eq!(annotation(&rsp, "saw-c"), Some("b"), "request {i}");
        assert_eq!(annotation(&rsp, "from"), Some("c"), "request {i}");
        let decoded = h.nri.create_container(req.clone()).await.unwrap();
        assert_eq!(
            rsp, decoded,
            "request {i}: the encoded path's reply is the decoded one's"
        );
    }
}

/// One adjusting plugin and nothing after it: its reply is merged without
/// the container (the request is never decoded), into the same reply.
#[tokio::test]
async fn a_lone_plugins_adjustment_merges_as_with_the_decoded_request() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let p = TestPlugin::adjusting(|_| {
        let mut a = ContainerAdjustment::default();
        a.add_annotation("k", "v");
        a.remove_env("GONE");
        a.add_env("A", "1");
        a.add_mount(api::Mount {
            destination: "/m".into(),
            source: "/s".into(),
            type_: "bind".into(),
            options: vec!["rbind".into()],
            ..Default::default()
        });
        a.set_linux_memory_limit(1 << 30);
        a.set_linux_cpuset_cpus("0");
        a.add_linux_unified("memory.high", "max");
        a.add_rlimit("RLIMIT_NOFILE", 1024, 512);
        Ok((a, vec![]))
    });
    h.connect("lone", "10", p.clone());
    // A plugin after it that does not take CreateContainer.
    h.connect_with(
        "watcher",
        "20",
        Some(api::EventMask::of(&[Event::START_CONTAINER])),
        TestPlugin::default(),
    );
    h.wait_plugins(2).await;
    let req = normalized("p", "c1");
    let rsp = create_encoded(&h, &req).await;
    let decoded = h.nri.create_container(req).await.unwrap();
    assert_eq!(rsp, decoded);
    assert_eq!(annotation(&rsp, "k"), Some("v"));
    assert_eq!(p.events(), ["CreateContainer c1", "CreateContainer c1"]);
}

/// Bytes that do not decode are refused with decoding's error before any
/// plugin sees them, for every event the runtime hands over encoded.
#[tokio::test]
async fn malformed_requests_are_refused_before_plugins_see_them() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let p = TestPlugin::default();
    h.connect("watch", "10", p.clone());
    h.wait_plugins(1).await;
    // Field 1 (the pod), 3 bytes long, holding a string that is not UTF-8.
    let bad = vec![0x0a, 0x03, 0x0a, 0x01, 0xff];
    let err = h.nri.create_container_wire(bad.clone()).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid CreateContainerRequest: "),
        "{err}"
    );
    for event in &api::ALL_EVENTS[..api::ALL_EVENTS.len() - 1] {
        let e = *event;
        if matches!(
            e,
            Event::CREATE_CONTAINER | Event::UPDATE_CONTAINER | Event::STOP_CONTAINER
        ) {
            continue;
        }
        let err = h.nri.relay_encoded(e, bad.clone()).await.unwrap_err();
        assert!(err.to_string().starts_with("invalid "), "{e:?}: {err}");
    }
    let err = h
        .nri
        .relay_encoded(Event::CREATE_CONTAINER, wire_create(&create_req("p", "c")))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("not an event plugins only observe"),
        "{err}"
    );
    assert!(p.events().is_empty(), "{:?}", p.events());
}

/// With several plugins the pod stays encoded, passed on as it came; a pod
/// that does not decode is still refused, with the error decoding the
/// whole request gives, before any plugin sees it.
#[tokio::test]
async fn a_malformed_pod_is_refused_though_it_stays_encoded() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let plugins = [chaining("a"), chaining("b")];
    h.connect("a", "10", plugins[0].clone());
    h.connect("b", "20", plugins[1].clone());
    h.wait_plugins(2).await;
    let mut no_pod = normalized("p", "c1");
    no_pod.pod.clear();
    // Field 1 (the pod) holding a string that is not UTF-8, then a
    // well-formed container.
    let bad = [&[0x0a, 0x03, 0x0a, 0x01, 0xff][..], &wire_create(&no_pod)].concat();
    let whole = api::CreateContainerRequest::parse_from_bytes(&bad).unwrap_err();
    let err = h.nri.create_container_wire(bad).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("invalid CreateContainerRequest: {whole}")
    );
    for p in &plugins {
        assert!(p.events().is_empty(), "{:?}", p.events());
    }
}

/// The 13 lifecycle events of `lifecycle`, each handed over encoded where
/// the C ABI hands it over encoded (all but UpdateContainer and
/// StopContainer).
async fn lifecycle_encoded(h: &Harness, p: &str, c: &str) {
    let nri = &h.nri;
    let observed = |e: Event, m: &dyn protobuf::MessageDyn| {
        let bytes = m.write_to_bytes_dyn().unwrap();
        async move { nri.relay_encoded(e, bytes).await.unwrap() }
    };
    observed(Event::RUN_POD_SANDBOX, &req!(RunPodSandboxRequest, p)).await;
    observed(Event::UPDATE_POD_SANDBOX, &req!(UpdatePodSandboxRequest, p)).await;
    observed(
        Event::POST_UPDATE_POD_SANDBOX,
        &req!(PostUpdatePodSandboxRequest, p),
    )
    .await;
    create_encoded(h, &normalized(p, c)).await;
    observed(
        Event::POST_CREATE_CONTAINER,
        &req!(PostCreateContainerRequest, p, c),
    )
    .await;
    observed(Event::START_CONTAINER, &req!(StartContainerRequest, p, c)).await;
    observed(
        Event::POST_START_CONTAINER,
        &req!(PostStartContainerRequest, p, c),
    )
    .await;
    nri.update_container(req!(UpdateContainerRequest, p, c))
        .await
        .unwrap();
    observed(
        Event::POST_UPDATE_CONTAINER,
        &req!(PostUpdateContainerRequest, p, c),
    )
    .await;
    nri.stop_container(req!(StopContainerRequest, p, c))
        .await
        .unwrap();
    observed(Event::REMOVE_CONTAINER, &req!(RemoveContainerRequest, p, c)).await;
    observed(Event::STOP_POD_SANDBOX, &req!(StopPodSandboxRequest, p)).await;
    observed(Event::REMOVE_POD_SANDBOX, &req!(RemovePodSandboxRequest, p)).await;
}

/// Every event relayed encoded reaches plugins byte for byte as the decoded
/// API relays it: to a plugin with every RPC, and to one on the deprecated
/// StateChange RPC, which is sent the decoded message's StateChange form.
#[tokio::test]
async fn observed_events_reach_plugins_as_with_decoded_requests() {
    let h = Harness::start().await;
    h.nri.start().await.unwrap();
    let events = &api::ALL_EVENTS[..api::ALL_EVENTS.len() - 1];
    let all = || -> Vec<(&str, Vec<u8>)> {
        LIFECYCLE
            .into_iter()
            .chain(["Synchronize", "StateChange"])
            .map(|m| (m, vec![]))
            .chain([("Configure", configure_reply(events))])
            .collect()
    };
    let trunk = || async { tokio::net::UnixStream::connect(&h.socket).await.unwrap() };
    let modern = RawPlugin::over(trunk().await, all()).await;
    modern.register("modern", "10").await.unwrap();
    let mut methods = all();
    methods.retain(|(m, _)| *m != "RunPodSandbox");
    let old = RawPlugin::refusing(trunk().await, methods, &["RunPodSandbox"]).await;
    old.register("old", "20").await.unwrap();
    h.wait_plugins(2).await;

    let seen = |p: &RawPlugin| std::mem::take(&mut *p.seen.lock().unwrap());
    // The first event switches the old plugin to StateChange for good.
    h.nri
        .run_pod_sandbox(req!(RunPodSandboxRequest, "p0"))
        .await
        .unwrap();
    seen(&modern);
    seen(&old);
    lifecycle_creating(&h, "p1", "c1", normalized("p1", "c1"))
        .await
        .unwrap();
    let (modern_decoded, old_decoded) = (seen(&modern), seen(&old));
    lifecycle_encoded(&h, "p1", "c1").await;
    let (modern_encoded, old_encoded) = (seen(&modern), seen(&old));
    assert_eq!(modern_decoded.len(), 13);
    assert_eq!(modern_encoded, modern_decoded);
    assert!(
        old_decoded
            .iter()
            .filter(|(m, _)| m == "StateChange")
            .count()
            >= 9
    );
    assert_eq!(old_encoded, old_decoded);
}

/// With the default validator, a lone plugin's request stays encoded too:
/// the validator is given the pod and the container as it reads them,
/// taken from the bytes. Its verdicts, accepting and rejecting, and the
/// accepted reply are the decoded path's.
#[tokio::test]
async fn the_default_validator_judges_an_encoded_request_as_a_decoded_one() {
    use nri_api::security_profile::ProfileType;
    use nri_validator::{DefaultValidatorConfig, REQUIRED_PLUGINS_ANNOTATION};
    let h = Harness::start_with(
        |o| {
            o.default_validator(DefaultValidatorConfig {
                enable: true,
                reject_runtime_default_seccomp_adjustment: true,
                ..Default::default()
            })
        },
        RuntimeState::default(),
    )
    .await;
    h.nri.start().await.unwrap();
    // Adjusts the seccomp policy of containers named `*-seccomp`, and
    // annotates every container.
    h.connect(
        "lone",
        "10",
        TestPlugin::adjusting(|ctr| {
            let mut a = ContainerAdjustment::default();
            a.add_annotation("k", "v");
            if ctr.name.ends_with("-seccomp") {
                a.set_linux_seccomp_policy(api::LinuxSeccomp {
                    default_action: "SCMP_ACT_ERRNO".into(),
                    ..Default::default()
                });
            }
            Ok((a, vec![]))
        }),
    );
    h.wait_plugins(2).await;
    let with_profile = |name: &str, kind: ProfileType| {
        let mut req = normalized("p", name);
        let c = req.container.mut_or_insert_default();
        c.name = name.into();
        c.linux.mut_or_insert_default().seccomp_profile =
            protobuf::MessageField::some(api::SecurityProfile {
                profile_type: kind.into(),
                ..Default::default()
            });
        req
    };
    let mut requiring = normalized("p", "c-required");
    requiring
        .pod
        .mut_or_insert_default()
        .annotations
        .insert(REQUIRED_PLUGINS_ANNOTATION.into(), r#"["absent"]"#.into());
    let cases = [
        ("accepted", normalized("p", "c-plain"), true),
        (
            "seccomp of a custom profile",
            with_profile("c-seccomp", ProfileType::LOCALHOST),
            true,
        ),
        (
            "seccomp of the runtime's default",
            with_profile("c-seccomp", ProfileType::RUNTIME_DEFAULT),
            false,
        ),
        ("a required plugin missing", requiring, false),
    ];
    for (what, req, accepted) in cases {
        let encoded = h
            .nri
            .create_container_wire(wire_create(&req))
            .await
            .map(|b| api::CreateContainerResponse::parse_from_bytes(&b).unwrap())
            .map_err(|e| e.to_string());
        let decoded = h.nri.create_container(req).await.map_err(|e| e.to_string());
        assert_eq!(encoded, decoded, "{what}");
        assert_eq!(encoded.is_ok(), accepted, "{what}: {encoded:?}");
        if let Ok(rsp) = &encoded {
            assert_eq!(annotation(rsp, "k"), Some("v"), "{what}");
        }
    }
}
