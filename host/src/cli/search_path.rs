//! The plugin search path (DESIGN §7).

use super::args::SearchArgs;
use std::path::PathBuf;

/// Each `--plugins-dir`, else `$CHIMERA_PLUGIN_PATH` (colon-separated), else
/// `./plugins`.
pub(crate) fn configured_dirs(args: &SearchArgs) -> Vec<PathBuf> {
    if !args.plugins_dirs.is_empty() {
        args.plugins_dirs.clone()
    } else if let Some(path) = std::env::var_os("CHIMERA_PLUGIN_PATH").filter(|p| !p.is_empty()) {
        std::env::split_paths(&path).collect()
    } else {
        vec![PathBuf::from("plugins")]
    }
}

/// The configured directories, then the directory of the running executable,
/// so packs built by `cargo build --workspace` next to `chimera` are found
/// without copying.
pub(crate) fn search_path(args: &SearchArgs) -> Vec<PathBuf> {
    let mut dirs = configured_dirs(args);
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(PathBuf::from))
    {
        if !dirs.contains(&exe_dir) {
            dirs.push(exe_dir);
        }
    }
    dirs
}
