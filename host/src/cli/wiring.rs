//! What `run` and `demo` assemble alike: the transcript printer on an event
//! bus, a plugin manager over the search path feeding a registry, the packs
//! loaded in order, and a session with the standard tools and `delegate`
//! (that wiring is `chimera_host::pack_test::setup`, shared with the policy
//! test harness so a replayed case runs as a real session does).

use super::args::SearchArgs;
use super::failure::Failure;
use super::render::Renderer;
use super::spec::parse_pack_spec;
use chimera_host::agent::{EventBus, SessionBuilder};
use chimera_host::config::search_path;
use chimera_host::pack_test::{load_in_order, session_builder, PackLoadError};
use chimera_host::plugins::{LoadError, PluginManager, Registry};
use chimera_host::providers::Provider;
use chimera_host::tools::{Tool, Workspace};
use std::sync::Arc;

/// Loads `--pack` specs in order, publishing `pack_loaded` for each; the
/// first failure is exit 3.
pub(crate) fn load_packs(
    manager: &PluginManager,
    specs: &[String],
    bus: &EventBus,
) -> Result<(), Failure> {
    let parsed = specs
        .iter()
        .map(|spec| parse_pack_spec(spec))
        .collect::<Result<Vec<_>, _>>()?;
    load_in_order(manager, &parsed, bus).map_err(|PackLoadError { name, source }| {
        let hint = match *source {
            LoadError::UnknownName { .. } => unknown_name_hint(manager, &name),
            _ => String::new(),
        };
        Failure::pack(format!("cannot load pack {name}: {source}{hint}"))
    })
}

/// What to add to "no pack named NAME": the closest name on the search
/// path, if one is close (a typo), and where to see them all.
fn unknown_name_hint(manager: &PluginManager, name: &str) -> String {
    let discovery = manager.discover();
    let wanted = name.to_lowercase();
    let closest = discovery
        .packs
        .iter()
        .map(|pack| {
            (
                strsim::levenshtein(&wanted, &pack.name.to_lowercase()),
                &pack.name,
            )
        })
        .filter(|(distance, _)| *distance <= (wanted.chars().count() / 3).max(2))
        .min();
    match closest {
        Some((_, close)) => {
            format!("; did you mean '{close}'? (`chimera packs list` lists the packs found)")
        }
        None => "; `chimera packs list` lists the packs found".to_owned(),
    }
}

/// The printer, the bus and the plugin manager of one command.
pub(crate) struct Host {
    /// Every event of the command goes here; the renderer listens.
    pub(crate) bus: EventBus,
    /// The registry the manager feeds and sessions merge from.
    pub(crate) registry: Arc<Registry>,
    /// Loads packs by name from the search path `search` describes.
    pub(crate) manager: Arc<PluginManager>,
}

impl Host {
    /// A host printing JSON lines (`json`) or the readable transcript.
    pub(crate) fn new(search: &SearchArgs, json: bool) -> Self {
        let renderer = Renderer::new(json);
        let bus = EventBus::new();
        bus.subscribe(move |event| renderer.render(event));
        let registry = Arc::new(Registry::new());
        let manager = Arc::new(PluginManager::with_search_path(
            Arc::clone(&registry),
            search_path(&search.plugins_dirs),
        ));
        Host {
            bus,
            registry,
            manager,
        }
    }

    /// A session on `provider` in `workspace` with the standard tools (bash
    /// sandboxed unless `bash_sandbox` is false), the `extra` tools (the
    /// MCP servers') and `delegate`, merging this host's registry every
    /// turn and publishing on its bus.
    pub(crate) fn session(
        &self,
        provider: Arc<dyn Provider>,
        workspace: Workspace,
        (max_steps, bash_sandbox): (usize, bool),
        extra: &[Arc<dyn Tool>],
    ) -> SessionBuilder {
        session_builder(
            provider,
            workspace,
            Arc::clone(&self.registry),
            self.bus.clone(),
            max_steps,
            bash_sandbox,
            extra,
        )
    }
}
