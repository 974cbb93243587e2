//! The parts of the pod and of the pristine container the default
//! validator reads, so a runtime that holds a CreateContainer request
//! encoded can have it validated without decoding the whole of either
//! (~200 heap objects for a typical container, most of what relaying the
//! event costs, and ~40 for a pod).
//!
//! [`DefaultValidator::validate`](crate::DefaultValidator::validate) reads
//! of `req.pod` its name, its namespace and its annotations, and of
//! `req.container` its ID, its name and its seccomp profile, and nothing
//! else; [`pod`] and [`container`] keep exactly those. The tests hold
//! every verdict of the validator's cases on a whole, rich pod and
//! container equal to the verdict on them as read, so a check that starts
//! reading another field fails them until the field is kept here too.

use nri_api::wire::field::*;
use nri_api::wire::{decode_fields, fields_once};
use nri_api::{Container, LinuxContainer, PodSandbox, SecurityProfile};
use protobuf::{Message, MessageField};

/// The fields of a pod that the validator reads.
const POD_FIELDS: [u32; 3] = [
    POD_SANDBOX_NAME,
    POD_SANDBOX_NAMESPACE,
    POD_SANDBOX_ANNOTATIONS,
];

/// `p` as the validator reads it: its name, its namespace and its
/// annotations.
pub fn pod(p: &PodSandbox) -> PodSandbox {
    PodSandbox {
        name: p.name.clone(),
        namespace: p.namespace.clone(),
        annotations: p.annotations.clone(),
        ..Default::default()
    }
}

/// `c` as the validator reads it: its ID, its name, and of its Linux part
/// the seccomp profile.
pub fn container(c: &Container) -> Container {
    Container {
        id: c.id.clone(),
        name: c.name.clone(),
        linux: MessageField::some(LinuxContainer {
            seccomp_profile: c.linux.seccomp_profile.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod and the container as read ([`pod`], [`container`]) of an
/// encoded `CreateContainerRequest`, which must be well-formed
/// ([`nri_api::wire::check`]); the rest of both is skipped, not decoded.
/// Each is as decoding has it, absent where the bytes have none.
/// `None` when a field this reads is there more than once (a decoder
/// would merge the copies): decode the request instead.
pub fn from_create_request(
    bytes: &[u8],
) -> Option<(MessageField<PodSandbox>, MessageField<Container>)> {
    let [pod, ctr] = fields_once(
        bytes,
        [
            CREATE_CONTAINER_REQUEST_POD,
            CREATE_CONTAINER_REQUEST_CONTAINER,
        ],
    )?;
    let pod = match pod {
        Some(b) => MessageField::some(decode_fields(b, &POD_FIELDS).ok()?),
        None => MessageField::none(),
    };
    let Some(ctr) = ctr else {
        return Some((pod, MessageField::none()));
    };
    let [id, name, linux] = fields_once(ctr, [CONTAINER_ID, CONTAINER_NAME, CONTAINER_LINUX])?;
    let seccomp_profile = match linux {
        Some(linux) => match fields_once(linux, [LINUX_CONTAINER_SECCOMP_PROFILE])? {
            [Some(b)] => MessageField::some(SecurityProfile::parse_from_bytes(b).ok()?),
            [None] => MessageField::none(),
        },
        None => MessageField::none(),
    };
    let text = |b: Option<&[u8]>| {
        std::str::from_utf8(b.unwrap_or_default())
            .ok()
            .map(str::to_string)
    };
    let ctr = MessageField::some(Container {
        id: text(id)?,
        name: text(name)?,
        linux: MessageField::some(LinuxContainer {
            seccomp_profile,
            ..Default::default()
        }),
        ..Default::default()
    });
    Some((pod, ctr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_api::security_profile::ProfileType;
    use nri_api::{CreateContainerRequest, Mount};

    fn request(seccomp: Option<ProfileType>) -> CreateContainerRequest {
        let mut pod = PodSandbox {
            id: "pod-1".into(),
            name: "web".into(),
            namespace: "default".into(),
            ..Default::default()
        };
        pod.annotations.insert(
            "required-plugins.noderesource.dev/pod".into(),
            "[\"x\"]".into(),
        );
        // What the validator does not read.
        pod.uid = "0b4c1a6e".into();
        pod.labels.insert("app".into(), "web".into());
        pod.ips = vec!["10.0.0.1".into()];
        pod.linux.mut_or_insert_default().cgroup_parent = "/kubepods".into();
        let mut ctr = Container {
            id: "ctr-1".into(),
            name: "nginx".into(),
            args: vec!["nginx".into()],
            env: vec!["A=b".into()],
            ..Default::default()
        };
        ctr.mounts.push(Mount {
            destination: "/data".into(),
            ..Default::default()
        });
        let linux = ctr.linux.mut_or_insert_default();
        linux.cgroups_path = "/kubepods/x".into();
        if let Some(kind) = seccomp {
            linux.seccomp_profile = MessageField::some(SecurityProfile {
                profile_type: kind.into(),
                localhost_ref: "profiles/x.json".into(),
                ..Default::default()
            });
        }
        CreateContainerRequest {
            pod: MessageField::some(pod),
            container: MessageField::some(ctr),
            ..Default::default()
        }
    }

    #[test]
    fn from_the_bytes_it_is_the_decoded_request_as_read() {
        for seccomp in [
            None,
            Some(ProfileType::UNCONFINED),
            Some(ProfileType::LOCALHOST),
        ] {
            let req = request(seccomp);
            let (p, c) = from_create_request(&req.write_to_bytes().unwrap()).unwrap();
            assert_eq!(*p, pod(&req.pod), "{seccomp:?}");
            assert_eq!(*c, container(&req.container), "{seccomp:?}");
        }
        // Neither pod nor container: none, as decoding has it.
        let (pod, ctr) = from_create_request(&[]).unwrap();
        assert!(pod.is_none() && ctr.is_none());
    }

    #[test]
    fn a_field_it_reads_twice_is_left_to_decoding() {
        let bytes = request(Some(ProfileType::LOCALHOST))
            .write_to_bytes()
            .unwrap();
        // Two requests back to back decode as their merge.
        assert_eq!(from_create_request(&[bytes.clone(), bytes].concat()), None);
        // Two names in one container.
        let ctr = Container {
            name: "a".into(),
            ..Default::default()
        };
        let once = ctr.write_to_bytes().unwrap();
        let twice = [once.clone(), once].concat();
        let mut bytes = vec![0x12, twice.len() as u8];
        bytes.extend_from_slice(&twice);
        assert_eq!(from_create_request(&bytes), None);
    }
}
