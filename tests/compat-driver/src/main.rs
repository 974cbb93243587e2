//! nri-compat-driver: the Rust half of `go/plugincompat`. It hosts the
//! plugins pre-installed in a plugin directory in nri-rs's Rust adaptation
//! (`crates/nri-runtime`), then runs each case through it: RunPodSandbox,
//! CreateContainer, (if created) StartContainer and StopContainer, then
//! StopPodSandbox, and records what RunPodSandbox and CreateContainer gave.
//!
//! Usage: `nri-compat-driver DIR` where `DIR/plugins` holds the plugins
//! (`NN-name`), `DIR/conf.d` their configuration, and `DIR/cases.bin` the
//! cases: each a big-endian u32 length and an encoded
//! `CreateContainerRequest` (its pod is the pod). Writes `DIR/results.bin`:
//! per case and per call (run pod, create container), one status byte
//! (0 = ok, 1 = error) and a u32 length, then the encoded
//! `CreateContainerResponse` (create, on success) or the error text.
//!
//! `NRI_COMPAT_SOCKET` makes it accept external plugins on that socket too,
//! and `NRI_COMPAT_WAIT=N` waits for N plugins before running the cases.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use nri_runtime::api::{
    ContainerUpdate, CreateContainerRequest, RunPodSandboxRequest, StartContainerRequest,
    StopContainerRequest, StopPodSandboxRequest,
};
use nri_runtime::{Adaptation, BoxError, Options, SyncCb};
use protobuf::{Message, MessageField};

fn read_cases(data: &[u8]) -> Result<Vec<CreateContainerRequest>, BoxError> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err("truncated case length".into());
        }
        let len = u32::from_be_bytes(rest[..4].try_into()?) as usize;
        let body = rest.get(4..4 + len).ok_or("truncated case")?;
        out.push(CreateContainerRequest::parse_from_bytes(body)?);
        rest = &rest[4 + len..];
    }
    Ok(out)
}

fn record(out: &mut Vec<u8>, result: Result<Vec<u8>, String>) {
    let (status, body) = match result {
        Ok(bytes) => (0u8, bytes),
        Err(text) => (1u8, text.into_bytes()),
    };
    out.push(status);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: nri-compat-driver DIR")?,
    );
    let cases = read_cases(&std::fs::read(dir.join("cases.bin"))?)?;
    let nri = Adaptation::new(
        "nri-compat-driver",
        "v0.0.0",
        |cb: SyncCb| async move {
            cb.call(vec![], vec![]).await?;
            Ok::<_, BoxError>(())
        },
        |_updates: Vec<ContainerUpdate>| async { Ok::<_, BoxError>(Vec::new()) },
        {
            let opts = Options::default()
                .plugin_path(dir.join("plugins"))?
                .plugin_config_path(dir.join("conf.d"))?
                .registration_timeout(Duration::from_secs(10))
                .request_timeout(Duration::from_secs(10));
            // NRI_COMPAT_SOCKET: also accept external plugins there.
            match std::env::var_os("NRI_COMPAT_SOCKET") {
                Some(path) => opts.socket_path(PathBuf::from(path))?,
                None => opts.disable_external_connections(),
            }
        },
    )?;
    nri.start().await?;
    // NRI_COMPAT_WAIT=N: wait (up to 20 s) for N plugins before the cases.
    let want: usize = std::env::var("NRI_COMPAT_WAIT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while nri.plugins().len() < want {
        if tokio::time::Instant::now() > deadline {
            return Err(format!("only plugins {:?} registered, want {want}", nri.plugins()).into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut out = Vec::new();
    for case in cases {
        let pod = case.pod.clone();
        let run = nri
            .run_pod_sandbox(RunPodSandboxRequest {
                pod: pod.clone(),
                ..Default::default()
            })
            .await;
        record(&mut out, run.map(|_| Vec::new()).map_err(|e| e.to_string()));
        let (pod_field, ctr_field) = (case.pod.clone(), case.container.clone());
        let created = nri.create_container(case).await;
        if created.is_ok() {
            // The rest of the lifecycle, for plugins acting on it.
            let _ = nri
                .start_container(StartContainerRequest {
                    pod: pod_field.clone(),
                    container: ctr_field.clone(),
                    ..Default::default()
                })
                .await;
            let _ = nri
                .stop_container(StopContainerRequest {
                    pod: pod_field,
                    container: ctr_field,
                    ..Default::default()
                })
                .await;
        }
        record(
            &mut out,
            created
                .map_err(|e| e.to_string())
                .and_then(|rsp| rsp.write_to_bytes().map_err(|e| e.to_string())),
        );
        let _ = nri
            .stop_pod_sandbox(StopPodSandboxRequest {
                pod: MessageField::from_option(pod.into_option()),
                ..Default::default()
            })
            .await;
    }
    nri.stop().await;
    std::fs::File::create(dir.join("results.bin"))?.write_all(&out)?;
    Ok(())
}
