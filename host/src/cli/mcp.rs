//! `chimera mcp guard`: loads the packs, then relays between the MCP
//! client on standard input and output and the MCP server it starts (see
//! `chimera_host::mcp`). Standard output carries only MCP messages; the
//! guard's own lines (packs loaded, reloaded, a failure) go to standard
//! error.

use super::args::McpGuardArgs;
use super::failure::Failure;
use super::run::{configure_isolation, configure_trust, watcher};
use super::serve::{audit_log, operator_log};
use super::wiring::load_packs;
use chimera_host::config::search_path;
use chimera_host::plugins::{PluginManager, Registry};
use std::sync::Arc;

/// Runs `chimera mcp guard`; exits as the server did.
pub(crate) fn guard(args: McpGuardArgs) -> Result<(), Failure> {
    let registry = Arc::new(Registry::new());
    let manager = Arc::new(PluginManager::with_search_path(
        Arc::clone(&registry),
        search_path(&args.search.plugins_dirs),
    ));
    let bus = operator_log("chimera mcp guard");
    configure_trust(&manager, &args.trust, &bus)?;
    configure_isolation(
        &manager,
        &args.packs,
        &args.isolate,
        args.trust.probe_timeout,
    )?;
    load_packs(&manager, &args.packs, &bus)?;
    let watching = args.watch.then(|| watcher(&manager, &bus)).transpose()?;
    let audit = args
        .audit
        .as_deref()
        .map(|path| audit_log(path, &manager))
        .transpose()?;
    let status = chimera_host::mcp::guard(
        &registry,
        &args.command,
        std::io::stdin(),
        std::io::stdout(),
        audit.clone(),
    )
    .map_err(|e| Failure::run_failed(format!("mcp guard: {e}")))?;
    if let Some(audit) = audit {
        audit
            .finish()
            .map_err(|e| Failure::run_failed(format!("the audit log: {e}")))?;
    }
    drop(watching);
    drop(manager);
    if status.success() {
        Ok(())
    } else {
        Err(Failure::run_failed(format!(
            "mcp guard: the MCP server {} ended: {status}",
            args.command[0]
        )))
    }
}
