//! How plugins become active: builtin and pre-installed ones at start, in
//! one runtime sync; external ones one at a time, once synchronized.

use std::path::PathBuf;
use std::sync::Arc;

use log::{info, warn};

use crate::core_state::{Activation, Core};
use crate::error::peer_text;
use crate::plugins::plugin::{Origin, Plugin, Transport};
use crate::plugins::wasm::{LoadConfig, WasmPlugin};
use crate::{connections::connect, connections::launch, sync, BuiltinPlugin, Error, SyncCb};

/// Brings up builtin and pre-installed plugins and synchronizes them in one
/// runtime sync call, as upstream's `startPlugins` does.
pub(crate) async fn start_plugins(
    core: Arc<Core>,
    builtin: Vec<BuiltinPlugin>,
    plugin_path: PathBuf,
    config_path: PathBuf,
) -> Result<(), Error> {
    let mut started: Vec<Arc<Plugin>> = Vec::new();
    for b in builtin {
        let p = Arc::new(Plugin::new(
            b.base.clone(),
            b.index.clone(),
            Origin::Builtin,
            None,
            String::new(),
            None,
            Transport::Builtin(b.handlers.clone()),
            core.clone(),
        ));
        hold_name(&core, &p);
        p.configure().await.map_err(|e| {
            Error::Start(format!(
                "failed to initialize/start builtin NRI plugin {:?}: {e}",
                b.base
            ))
        })?;
        started.push(p);
    }

    let discovered = launch::discover(&plugin_path, &config_path)?;
    let (modules, executables): (Vec<_>, Vec<_>) = discovered
        .into_iter()
        .partition(|d| nri_api::is_wasm_module(&d.path));
    // Modules are compiled one at a time (two at once would only share the
    // cores), then the executables are launched together.
    for d in modules {
        match load_wasm(&core, &d).await {
            Ok(p) => started.push(p),
            Err(e) => launch::skip(&d, &e),
        }
    }
    let launches = executables.into_iter().map(|d| {
        let core = Arc::clone(&core);
        async move {
            let res = match launch::launch(&d) {
                Ok((stream, launched)) => connect::connect(core, stream, Some(launched)).await,
                Err(e) => Err(e),
            };
            res.map_err(|e| launch::skip(&d, &e)).ok()
        }
    });
    for c in futures::future::join_all(launches)
        .await
        .into_iter()
        .flatten()
    {
        started.push(c);
    }

    let cb = SyncCb::new(
        sync::SyncTargets::Started(started.clone()),
        recorder(&core),
        core.next_stop(),
    );
    if let Err(e) = core.sync_fn.sync(cb).await {
        for p in &started {
            p.close();
        }
        return Err(Error::Runtime(
            format!("failed to synchronize pre-installed NRI Plugins: {e}").into(),
        ));
    }
    let active: Vec<_> = started.into_iter().filter(|p| !p.is_closed()).collect();
    for p in &active {
        info!("plugin {} started", p.qualified_name());
    }
    core.add_plugins(active);
    Ok(())
}

/// Loads and configures a WASM plugin from the plugin directory (upstream's
/// `newLaunchedPlugin` for a module, then its `start`, which skips
/// registration). Its start function gets the registration timeout.
async fn load_wasm(core: &Arc<Core>, d: &launch::Discovered) -> Result<Arc<Plugin>, Error> {
    let fail = |e: String| Error::Start(format!("load WASM plugin {}: {e}", d.path.display()));
    if !core.wasm_enabled {
        return Err(Error::Start(format!(
            "can't load WASM plugin {}: no WASM support",
            d.path.display()
        )));
    }
    info!("Found WASM plugin: {}", d.path.display());
    let (path, name) = (d.path.clone(), format!("{}-{}", d.idx, d.base));
    let cfg = LoadConfig {
        memory_limit: core.wasm_memory_limit,
        init_timeout: core.registration_timeout(),
        cache_dir: core.wasm_cache_dir.clone(),
        engine: core.wasm_engine.clone(),
    };
    // Compiling a module takes a while: off the core's thread.
    let module = tokio::task::spawn_blocking(move || WasmPlugin::load(&path, &name, &cfg))
        .await
        .map_err(|e| fail(e.to_string()))?
        .map_err(fail)?;
    let p = Arc::new(Plugin::new(
        d.base.clone(),
        d.idx.clone(),
        Origin::Wasm,
        None,
        d.config.clone(),
        d.runtime.request_timeout,
        Transport::Wasm(module),
        core.clone(),
    ));
    hold_name(core, &p);
    p.configure().await?;
    Ok(p)
}

/// With an identity policy, a plugin the runtime configured holds its name
/// against external plugins.
fn hold_name(core: &Arc<Core>, p: &Arc<Plugin>) {
    if core.identities.is_some() {
        let claim = core
            .names
            .hold(&p.base, &p.idx, p.qualified_name(), p.identity.clone());
        p.keep_name(claim);
    }
}

/// Synchronizes a newly connected external plugin and makes it active.
/// Holds the sync lock exclusively (waiting out [`PluginSyncBlock`]s; other
/// plugins' syncs wait their turn) but not the event lock: events and other
/// handshakes go on meanwhile. A plugin that goes away while it waits
/// leaves the queue.
/// Where a sync's updates are recorded: the audit log, if kept.
fn recorder(core: &Core) -> Option<Arc<dyn sync::SyncRecorder>> {
    let auditor = core.audit.clone()?;
    Some(auditor)
}

pub(crate) async fn sync_and_add(core: Arc<Core>, plugin: Arc<Plugin>) {
    let turn = tokio::select! {
        turn = core.sync_lock.exclusive() => turn,
        () = plugin.gone() => return,
    };
    let _exclusive = match turn {
        Ok(turn) => turn,
        Err(e) => {
            warn!("refusing plugin {}: {e}", plugin.qualified_name());
            plugin.close();
            return;
        }
    };
    let within = core.activate_within_sync.then(|| {
        let core = Arc::clone(&core);
        Box::new(move |p: &Arc<Plugin>| make_active(&core, p, false)) as sync::OnSynchronized
    });
    let cb = SyncCb::new(
        sync::SyncTargets::External(Arc::clone(&plugin), within),
        recorder(&core),
        core.next_stop(),
    );
    match core.sync_fn.sync(cb).await {
        Ok(()) if !plugin.is_closed() => make_active(&core, &plugin, true),
        Ok(()) => warn!(
            "plugin {} went away during synchronization",
            plugin.qualified_name()
        ),
        Err(e) => {
            warn!(
                "failed to synchronize plugin {}: {}",
                plugin.qualified_name(),
                peer_text(&e)
            );
            // It may be active already (activated within the sync).
            plugin.close();
            core.prune_closed();
        }
    }
}

/// Makes a synchronized external plugin active (once; see
/// [`Core::activate`]) and, with `replace`, retires the instances it
/// replaces (handover).
pub(crate) fn make_active(core: &Arc<Core>, plugin: &Arc<Plugin>, replace: bool) {
    let Activation::Active { added, replaced } = core.activate(plugin, replace) else {
        return;
    };
    if added {
        info!("plugin {} registered", plugin.qualified_name());
    }
    for old in replaced {
        info!(
            "plugin {} replaces {}",
            plugin.qualified_name(),
            old.qualified_name()
        );
        // Out of the list, the old instance is no stop's to close: its
        // retirement runs to its end.
        core.spawn_teardown(retire(Arc::clone(core), old));
    }
}

/// Closes a replaced plugin once the events it was already in have ended:
/// the event lock is free only then. With `shutdown_on_stop` it is told
/// `Shutdown` first.
async fn retire(core: Arc<Core>, old: Arc<Plugin>) {
    drop(core.events.lock().await);
    if core.shutdown_on_stop {
        old.shutdown(old.request_timeout()).await;
    }
    old.close();
}
