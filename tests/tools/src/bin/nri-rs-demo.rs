//! `make demo`: the Rust adaptation core as a runtime's NRI, hosting two
//! Rust plugins pre-installed in its plugin directory (`nri-logger` and a
//! tagging plugin), driving one pod and container through their lifecycle
//! and showing what the plugins changed.
//!
//! Usage: nri-rs-demo <dir with nri-logger and nri-interop-plugin>

use std::path::{Path, PathBuf};
use std::time::Duration;

use nri_runtime::{Adaptation, BoxError, Options, SyncCb};
use nri_stub::api::{self, ContainerUpdate};
use protobuf::MessageField;

fn install(dir: &Path, bin: &Path, name: &str, as_: &str, config: &str) -> std::io::Result<()> {
    std::os::unix::fs::symlink(bin.join(name), dir.join("plugins").join(as_))?;
    std::fs::write(dir.join("conf.d").join(format!("{as_}.conf")), config)
}

/// The distinct event names the logger logged, in order (`... Event: ...` lines).
fn logged_events(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut seen = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 3 || !f[1].ends_with(':') || !f[2].ends_with(':') {
            continue;
        }
        let ev = f[1].trim_end_matches(':').to_string();
        if ev != "Synchronize" && !seen.contains(&ev) {
            seen.push(ev);
        }
    }
    seen
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let bin = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: nri-rs-demo <bin dir>")?,
    );
    let dir = std::env::temp_dir().join(format!("nri-rs-demo-{}", std::process::id()));
    for sub in ["plugins", "conf.d"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    let log_file = dir.join("logger.log");
    install(
        &dir,
        &bin,
        "nri-logger",
        "10-logger",
        &format!(
            "logFile: {}\nevents: [all]\naddAnnotation: demo.nri-rs.io/logger\nsetEnv: LOGGER_PID\n",
            log_file.display()
        ),
    )?;
    install(
        &dir,
        &bin,
        "nri-interop-plugin",
        "20-tagger",
        r#"{"adjust": true}"#,
    )?;

    let nri = Adaptation::new(
        "nri-rs-demo",
        "0.1.0",
        |cb: SyncCb| async move {
            cb.call(vec![], vec![]).await?;
            Ok::<_, BoxError>(())
        },
        |_updates: Vec<ContainerUpdate>| async { Ok::<_, BoxError>(Vec::new()) },
        Options::default()
            .plugin_path(dir.join("plugins"))?
            .plugin_config_path(dir.join("conf.d"))?
            .disable_external_connections(),
    )?;
    println!("== runtime: nri-rs Rust adaptation core; plugins: Rust (nri-rs stub)");
    let result = drive(&nri, &log_file).await;
    nri.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn drive(nri: &Adaptation, log_file: &Path) -> Result<(), BoxError> {
    nri.start().await?;
    println!(
        "== plugins registered and synchronized: {}",
        nri.plugins().join(", ")
    );

    let pod = api::PodSandbox {
        id: "pod-1".into(),
        name: "demo".into(),
        uid: "uid-1".into(),
        namespace: "default".into(),
        ..Default::default()
    };
    let ctr = api::Container {
        id: "ctr-1".into(),
        pod_sandbox_id: pod.id.clone(),
        name: "app".into(),
        args: vec!["/bin/sh".into(), "-c".into(), "echo hello".into()],
        env: vec!["PATH=/bin".into()],
        ..Default::default()
    };
    let p = || MessageField::some(pod.clone());
    let c = || MessageField::some(ctr.clone());

    nri.run_pod_sandbox(api::RunPodSandboxRequest {
        pod: p(),
        ..Default::default()
    })
    .await?;
    println!("-> RunPodSandbox ok");
    let rsp = nri
        .create_container(api::CreateContainerRequest {
            pod: p(),
            container: c(),
            ..Default::default()
        })
        .await?;
    println!("-> CreateContainer ok");
    println!("== adjustment the runtime got for ctr-1 (merged from both plugins):");
    let mut annotations: Vec<_> = rsp.adjust.annotations.iter().collect();
    annotations.sort();
    for (k, v) in annotations {
        println!("   annotation {k}={v}");
    }
    for kv in &rsp.adjust.env {
        println!("   env        {}={}", kv.key, kv.value);
    }
    nri.start_container(api::StartContainerRequest {
        pod: p(),
        container: c(),
        ..Default::default()
    })
    .await?;
    println!("-> StartContainer ok");
    let mut resources = api::LinuxResources::default();
    resources.cpu.mut_or_insert_default().shares = nri_stub::api::optional::uint64(512u64);
    nri.update_container(api::UpdateContainerRequest {
        pod: p(),
        container: c(),
        linux_resources: MessageField::some(resources),
        ..Default::default()
    })
    .await?;
    println!("-> UpdateContainer ok");
    nri.stop_container(api::StopContainerRequest {
        pod: p(),
        container: c(),
        ..Default::default()
    })
    .await?;
    println!("-> StopContainer ok");
    nri.remove_container(api::RemoveContainerRequest {
        pod: p(),
        container: c(),
        ..Default::default()
    })
    .await?;
    println!("-> RemoveContainer ok");
    nri.stop_pod_sandbox(api::StopPodSandboxRequest {
        pod: p(),
        ..Default::default()
    })
    .await?;
    println!("-> StopPodSandbox ok");
    nri.remove_pod_sandbox(api::RemovePodSandboxRequest {
        pod: p(),
        ..Default::default()
    })
    .await?;
    println!("-> RemovePodSandbox ok");

    // The logger writes asynchronously; give it a moment to catch up.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut seen = logged_events(log_file);
    while seen.len() < 8 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        seen = logged_events(log_file);
    }
    println!("== events the Rust logger plugin logged:");
    for ev in &seen {
        println!("   {ev}");
    }
    if seen.len() < 8 {
        return Err(format!("logger logged {} of 8 events", seen.len()).into());
    }
    Ok(())
}
