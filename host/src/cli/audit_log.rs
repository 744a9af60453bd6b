//! `--audit FILE`, alike for `run`, `serve` and `mcp guard`: the log
//! opened (its lines naming each loaded pack's file hash) and, when the
//! command ends, finished (a write that failed on the way is reported
//! then).

use super::failure::Failure;
use chimera_host::audit::AuditLog;
use chimera_host::plugins::PluginManager;
use std::path::Path;
use std::sync::Arc;

/// Opens the log at `path`, naming the file hash of each of `manager`'s
/// loaded packs.
pub(crate) fn open(path: &Path, manager: &Arc<PluginManager>) -> Result<AuditLog, Failure> {
    let log = AuditLog::open(path)
        .map_err(|e| Failure::usage(format!("--audit {}: {e}", path.display())))?;
    // Weak: the manager's health sink holds the bus, which may hold this.
    let weak = Arc::downgrade(manager);
    log.set_pack_hashes(move |pack| weak.upgrade().and_then(|m| m.loaded_sha256(pack)));
    Ok(log)
}

/// Finishes `log` (when there is one), written at `path`.
pub(crate) fn finish(log: Option<&AuditLog>, path: Option<&Path>) -> Result<(), Failure> {
    let Some(log) = log else {
        return Ok(());
    };
    log.finish().map(|_| ()).map_err(|e| {
        let shown = path.map_or_else(String::new, |p| format!(" {}", p.display()));
        Failure::run_failed(format!("--audit{shown}: {e}"))
    })
}
