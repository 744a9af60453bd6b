//! What the servers (`serve`, `mcp guard`) set up before they serve: the
//! packs loaded, trusted, maybe isolated and watched, and an operator log
//! on standard error (standard output is the server's own).

use super::args::{LoadArgs, PackArgs};
use super::containment::{
    check_loaded, configure_isolation, configure_monitoring, configure_trust, watcher,
};
use super::failure::Failure;
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

/// How a server keeps its packs beyond loading them: the names
/// `--fail-open` gives, and `--watch`.
pub(crate) struct PackFlags<'a> {
    pub(crate) fail_open: &'a [String],
    pub(crate) watch: bool,
}

/// The packs of a server named `who` (`load`: where they are found,
/// which, and how they are trusted): trust, isolation and monitoring
/// configured, `prepare` run on the manager (what it offers packs), the
/// packs loaded in order (one line on stderr names those monitored), and
/// watched when `watch`.
pub(crate) fn server_packs(
    who: &'static str,
    load: &LoadArgs,
    flags: &PackFlags<'_>,
    prepare: impl FnOnce(&PluginManager) -> Result<(), Failure>,
) -> Result<ServerPacks, Failure> {
    let LoadArgs {
        search,
        pack: PackArgs {
            packs,
            isolate,
            monitor,
        },
        trust,
    } = load;
    let PackFlags { fail_open, watch } = *flags;
    let registry = Arc::new(Registry::new());
    let manager = Arc::new(PluginManager::with_search_path(
        Arc::clone(&registry),
        search_path(&search.plugins_dirs),
    ));
    let bus = operator_log(who);
    configure_trust(&manager, trust, &bus)?;
    // A server judges for clients it does not trust: see `serving_line`.
    check_loaded("--fail-open", packs, fail_open)?;
    manager.set_serving(fail_open.iter().cloned());
    if !packs.is_empty() {
        eprintln!("{who}: {}", serving_line(fail_open));
    }
    configure_isolation(&manager, packs, isolate, trust)?;
    configure_monitoring(&manager, packs, monitor)?;
    prepare(&manager)?;
    load_packs(&manager, packs, &bus)?;
    if !monitor.is_empty() {
        eprintln!(
            "{who}: monitor mode (decisions recorded, not enforced): {}",
            monitor.join(", ")
        );
    }
    let watching = watch.then(|| watcher(&manager, &bus)).transpose()?;
    Ok(ServerPacks {
        registry,
        manager,
        watching,
    })
}

/// What a server says at start-up about judgements that cannot be made:
/// they fail closed, but for the packs in `fail_open`.
fn serving_line(fail_open: &[String]) -> String {
    let closed = "a pack that cannot judge (an error, a call past its deadline, its \
                  process restarting, a quarantine) refuses what it guards, \
                  never passes it unjudged";
    if fail_open.is_empty() {
        closed.to_owned()
    } else {
        format!(
            "{closed}; fail open (each seam's own policy): {}",
            fail_open.join(", ")
        )
    }
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
