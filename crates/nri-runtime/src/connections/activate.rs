//! How plugins become active: builtin and pre-installed ones at start, in
//! one runtime sync; external ones one at a time, once synchronized.

use std::path::PathBuf;
use std::sync::Arc;

use log::{info, warn};

use crate::core_state::{Activation, Core};
use crate::error::peer_text;
use crate::plugins::plugin::{Origin, Plugin, Transport};
use crate::plugins::wasm::{LoadConfig, WasmPlugin};
use crate::sync::joining::Joining;
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
            Default::default(),
            false,
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
        d.runtime.timeouts,
        d.runtime.concurrent_requests,
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

/// Where a sync's updates are recorded: the audit log, if kept.
fn recorder(core: &Core) -> Option<Arc<dyn sync::SyncRecorder>> {
    let auditor = core.audit.clone()?;
    Some(auditor)
}

/// Synchronizes a newly connected external plugin and makes it active.
/// Other plugins' syncs wait their turn; runtime calls do not wait for this
/// one but while the plugin is actually synchronized (`sync/lock.rs`), and
/// what their events tell the plugin meanwhile is kept for it and replayed
/// once it answered (`sync/joining.rs`). Neither holds the event lock but
/// for the last replays: events and other handshakes go on meanwhile. A
/// plugin that goes away while it waits leaves the queue.
pub(crate) async fn sync_and_add(core: Arc<Core>, plugin: Arc<Plugin>) {
    let turn = tokio::select! {
        turn = core.sync_lock.turn() => turn,
        () = plugin.gone() => return,
    };
    let mut turn = match turn {
        Ok(turn) => turn,
        Err(e) => {
            warn!("refusing plugin {}: {e}", plugin.qualified_name());
            plugin.close();
            return;
        }
    };
    // A new instance taking over from a connected one joins in one step
    // with the old one's leaving, once the sync function returned: until
    // then the old one gets each event, so nothing is kept for the new one.
    let takes_over = core.plugin_handover
        && core
            .snapshot()
            .iter()
            .any(|p| !p.is_builtin() && p.name == plugin.name);
    let joining = if takes_over {
        Arc::new(Joining::new(Arc::clone(&plugin)))
    } else {
        core.start_joining(&plugin)
    };
    tokio::select! {
        () = turn.grace_period() => {}
        () = plugin.gone() => {
            core.stop_joining(&joining);
            return;
        }
    }
    let then = {
        let core = Arc::clone(&core);
        Box::new(move |j: Arc<Joining>| {
            let core = Arc::clone(&core);
            Box::pin(async move {
                if takes_over {
                    return Ok(());
                }
                join(&core, &j, false).await
            }) as futures::future::BoxFuture<'static, Result<(), Error>>
        }) as sync::OnSynchronized
    };
    let cb = SyncCb::new(
        sync::SyncTargets::External(Arc::clone(&joining), then),
        recorder(&core),
        core.next_stop(),
    );
    let synced = core.sync_fn.sync(cb).await;
    let joined: Result<(), crate::BoxError> = match synced {
        // Joined within the sync already, unless it takes over from
        // another instance, which leaves now; a runtime that never called
        // back joins it here.
        Ok(()) if !plugin.is_closed() => join(&core, &joining, true).await.map_err(Into::into),
        Ok(()) => Err("the plugin went away".into()),
        Err(e) => Err(e),
    };
    core.stop_joining(&joining);
    drop(turn);
    if let Err(e) = joined {
        warn!(
            "failed to synchronize plugin {}: {}",
            plugin.qualified_name(),
            peer_text(&e)
        );
        // It may be active already (joined within the sync).
        plugin.close();
        core.prune_closed();
    }
}

/// Replays to a synchronized plugin what it missed, then makes it active
/// under the event lock, after the last events kept for it: from then on
/// events reach it live, and none reached it twice or not at all.
async fn join(core: &Arc<Core>, joining: &Arc<Joining>, replace: bool) -> Result<(), Error> {
    joining.catch_up().await?;
    let _events = core.events.all().await;
    joining.catch_up().await?;
    if joining.plugin.is_closed() {
        return Err(Error::Start("the plugin went away".to_string()));
    }
    make_active(core, &joining.plugin, replace);
    core.stop_joining(joining);
    Ok(())
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
    drop(core.events.all().await);
    if core.shutdown_on_stop {
        old.shutdown(old.request_timeout()).await;
    }
    old.close();
}
