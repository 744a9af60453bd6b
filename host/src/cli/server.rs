//! What the servers (`serve`, `mcp guard`) set up before they serve: the
//! packs loaded, trusted, maybe isolated and watched, and an operator log
//! on standard error (standard output is the server's own).

use super::args::{SearchArgs, TrustArgs};
use super::failure::Failure;
use super::run::{configure_isolation, configure_trust, watcher};
use super::wiring::load_packs;
use chimera_host::agent::{AgentEvent, EventBus};
use chimera_host::config::search_path;
use chimera_host::plugins::{PluginManager, Registry, Watcher};
use std::sync::Arc;

/// What a server (`serve`, `mcp guard`) holds while it serves: the
/// registry its packs feed, their manager, and the watcher when it
/// hot-swaps (its operator log lives on in the watcher).
pub(crate) struct ServerPacks {
    /// The chains the server merges.
    pub(crate) registry: Arc<Registry>,
    /// The packs' manager (kept while serving: the chains call its packs).
    pub(crate) manager: Arc<PluginManager>,
    /// Hot-swaps rebuilt packs, when asked to.
    pub(crate) watching: Option<Watcher>,
}

/// The packs of a server named `who`: trust and isolation configured,
/// `prepare` run on the manager (what it offers packs), the packs loaded
/// in order, and watched when `watch`.
pub(crate) fn server_packs(
    who: &'static str,
    search: &SearchArgs,
    trust: &TrustArgs,
    (packs, isolate, watch): (&[String], &[String], bool),
    prepare: impl FnOnce(&PluginManager) -> Result<(), Failure>,
) -> Result<ServerPacks, Failure> {
    let registry = Arc::new(Registry::new());
    let manager = Arc::new(PluginManager::with_search_path(
        Arc::clone(&registry),
        search_path(&search.plugins_dirs),
    ));
    let bus = operator_log(who);
    configure_trust(&manager, trust, &bus)?;
    configure_isolation(&manager, packs, isolate, trust.probe_timeout)?;
    prepare(&manager)?;
    load_packs(&manager, packs, &bus)?;
    let watching = watch.then(|| watcher(&manager, &bus)).transpose()?;
    Ok(ServerPacks {
        registry,
        manager,
        watching,
    })
}

/// The bus a server's own events go to (packs loaded, reloaded or
/// quarantined): one line each on stderr, after `who`, since stdout
/// carries only the server's own output.
fn operator_log(who: &'static str) -> EventBus {
    let bus = EventBus::new();
    bus.subscribe(move |event| {
        let line = match event {
            AgentEvent::PackLoaded { name, version, .. } => {
                format!("pack loaded: {name} {version}")
            }
            AgentEvent::PackReloaded { name, version, .. } => {
                format!("pack reloaded: {name} {version}")
            }
            AgentEvent::PackReloadFailed { name, error } => {
                format!("pack reload failed, the running version stays: {name}: {error}")
            }
            AgentEvent::PackQuarantined { name, reason } => {
                format!("pack quarantined: {name}: {reason}")
            }
            _ => return,
        };
        eprintln!("{who}: {line}");
    });
    bus
}
