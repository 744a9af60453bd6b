//! The session `chimera run` assembles, shared with the harness so that a
//! replayed case runs under exactly the wiring a real session has: the
//! standard tools, `bash` (sandboxed), `delegate`, the default system
//! prompt, and the packs loaded in order with a `pack_loaded` event each.

use crate::agent::{AgentEvent, AgentSession, EventBus, SessionBuilder, SessionSubAgent};
use crate::plugins::{LoadError, PackInfo, PluginManager, Registry};
use crate::providers::Provider;
use crate::tools::{BashTool, DelegateTool, Tool, ToolSet, Workspace};
use std::sync::Arc;

/// The default system prompt.
pub const SYSTEM_PROMPT: &str =
    "You are Chimera, a coding agent. Work inside the workspace with the tools provided; plan before you change files.";

/// A pack that could not be loaded, by the name it was asked for.
#[derive(Debug, thiserror::Error)]
#[error("cannot load pack {name}: {source}")]
pub struct PackLoadError {
    /// The entry-point name asked for.
    pub name: String,
    /// Why it could not be loaded.
    pub source: Box<LoadError>,
}

/// The event published when a pack loads.
#[must_use]
pub fn loaded_event(info: &PackInfo) -> AgentEvent {
    AgentEvent::PackLoaded {
        name: info.name.clone(),
        version: info.version.clone(),
        path: info.path().map(|p| p.display().to_string()),
    }
}

/// Loads `(name, config JSON)` pairs in order (load order is chain order),
/// publishing `pack_loaded` for each and logging the order warnings (a ban
/// check before a redactor on the same seam); the first failure stops.
///
/// # Errors
///
/// [`PackLoadError`] for the first pack that does not load: the name asked for
/// and the [`LoadError`]. The packs before it stay loaded.
pub fn load_in_order(
    manager: &PluginManager,
    packs: &[(String, String)],
    bus: &EventBus,
) -> Result<(), PackLoadError> {
    let _together = manager.load_together();
    for (name, config) in packs {
        let info = manager.load(name, config).map_err(|source| PackLoadError {
            name: name.clone(),
            source: Box::new(source),
        })?;
        bus.publish(loaded_event(&info));
    }
    for warning in manager.registry().get_all().order_warnings() {
        tracing::warn!("{warning}");
    }
    Ok(())
}

/// A session on `provider` in `workspace` with the standard tools (`bash`
/// sandboxed unless `bash_sandbox` is false), the `extra` tools and
/// `delegate`, the default system prompt, merging `registry` every turn
/// and publishing on `bus`.
#[must_use]
pub fn session_builder(
    provider: Arc<dyn Provider>,
    workspace: Workspace,
    registry: Arc<Registry>,
    bus: EventBus,
    max_steps: usize,
    bash_sandbox: bool,
    extra: &[Arc<dyn Tool>],
) -> SessionBuilder {
    let tools = standard_tools(&provider, &workspace, max_steps, bash_sandbox, extra);
    AgentSession::builder(provider, workspace)
        .system(SYSTEM_PROMPT)
        .tools(tools)
        .registry(registry)
        .events(bus)
        .max_steps(max_steps)
}

/// The standard tools plus `bash`, the `extra` tools (an MCP server's) and
/// `delegate`, whose sub-agent runs on the same provider with the same
/// tools under the calling session's policy and merged chains.
#[must_use]
pub fn standard_tools(
    provider: &Arc<dyn Provider>,
    workspace: &Workspace,
    max_steps: usize,
    bash_sandbox: bool,
    extra: &[Arc<dyn Tool>],
) -> ToolSet {
    let mut tools = ToolSet::standard();
    let bash = BashTool::default().sandboxed(bash_sandbox);
    if bash_sandbox && !bash.sandbox_active() {
        tracing::warn!("{}", bash.sandbox_summary());
    }
    tools.insert(Arc::new(bash));
    for tool in extra {
        tools.insert(Arc::clone(tool));
    }
    let sub_agent = SessionSubAgent::new(Arc::clone(provider), workspace.clone(), tools.clone())
        .max_steps(max_steps);
    tools.insert(Arc::new(DelegateTool::new(Arc::new(sub_agent))));
    tools
}
