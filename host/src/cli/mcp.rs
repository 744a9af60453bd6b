//! `chimera mcp guard`: loads the packs, then relays between the MCP
//! client on standard input and output and the MCP server it starts (see
//! `chimera_host::mcp`). Standard output carries only MCP messages; the
//! guard's own lines (packs loaded, reloaded, a failure) go to standard
//! error.

use super::args::McpGuardArgs;
use super::failure::Failure;
use super::serve::audit_log;
use super::server::{pack_flags, server_packs, PackFlags, ServerPacks};
use chimera_host::agent::{Permission, ToolRules};
use chimera_host::mcp::Rules;
use std::sync::Arc;

/// Runs `chimera mcp guard`; exits as the server did.
pub(crate) fn guard(args: McpGuardArgs) -> Result<(), Failure> {
    let ServerPacks {
        registry,
        manager,
        watching,
    } = server_packs(
        "chimera mcp guard",
        &args.search,
        &args.trust,
        &pack_flags!(args),
        |_| Ok(()),
    )?;
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
        Rules {
            policy: Arc::new(
                args.deny
                    .iter()
                    .fold(ToolRules::new(Permission::Allow), |rules, tool| {
                        rules.set(tool, Permission::Deny)
                    }),
            ),
            audit: audit.clone(),
        },
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
