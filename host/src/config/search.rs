//! The plugin search path: only directories the user chose.
//!
//! In order: each directory named (`--plugins-dir`, the configuration
//! file's `plugins_dirs`), each entry of `$CHIMERA_PLUGIN_PATH`
//! (colon-separated), the per-user data directory
//! (`$XDG_DATA_HOME/chimera/plugins`, else `~/.local/share/chimera/plugins`),
//! and the directory of the `chimera` executable — there only the bundled
//! packs' files, so test doubles or anything else dropped beside the binary
//! are never found by name. The current directory is never searched unless
//! it is named: a cloned repository's `./plugins` must not run code just
//! because `chimera` was started inside it.
//!
//! Precedence, not order, decides which file provides a name: the
//! directories named by flag, environment or configuration file first
//! ([`Level::Chosen`](crate::plugins::Level::Chosen)), then the per-user
//! one (`Level::User`), then the bundled packs (`Level::Bundled`). A copy
//! the user put in a better level shadows the one below (and says so); a
//! name two files claim within one level is refused (see
//! `PluginManager::load`).

use super::paths::user_data_dir;
use crate::plugins::platform::library_file_name;
use crate::plugins::SearchDir;
use std::path::PathBuf;

/// The packs shipped beside the `chimera` executable: the Chimera packs
/// and the twelve guardrail gates.
pub const BUNDLED_PACKAGES: &[&str] = &[
    "plan-gate",
    "redactor",
    "delegate-spawner",
    "endless-loop",
    "token-budget",
    "rate-limiter",
    "tool-filter",
    "prompt-injection",
    "stop-words",
    "approval-policy",
    "context-window",
    "content-safety",
    "json-schema",
    "output-length",
    "tool-timeout",
];

/// The shipped packs' one-library build: every package of
/// [`BUNDLED_PACKAGES`] in one shared library, so the fifteen share one
/// copy of std, `abi_stable`, serde and regex. Found beside the executable
/// too; where a pack's own file sits beside it as well, that file is the
/// one loaded (a file of one pack outranks a library of several within a
/// level).
pub const BUNDLED_LIBRARY: &str = "chimera-packs";

/// The directories the user chose, in order: `named` (flags, the
/// configuration file's `plugins_dirs`), the environment's, the per-user
/// data directory (when it exists).
#[must_use]
pub fn configured_dirs(named: &[PathBuf]) -> Vec<PathBuf> {
    leveled_dirs(named)
        .into_iter()
        .map(|dir| dir.path)
        .collect()
}

/// [`configured_dirs`] with their precedence: every one named is
/// `Level::Chosen`, the per-user data directory `Level::User`.
fn leveled_dirs(named: &[PathBuf]) -> Vec<SearchDir> {
    let mut dirs: Vec<SearchDir> = named.iter().map(SearchDir::all).collect();
    if let Some(path) = std::env::var_os("CHIMERA_PLUGIN_PATH").filter(|p| !p.is_empty()) {
        dirs.extend(
            std::env::split_paths(&path)
                .filter(|p| !p.as_os_str().is_empty())
                .map(SearchDir::all),
        );
    }
    dirs.extend(
        user_data_dir()
            .filter(|dir| dir.is_dir())
            .map(SearchDir::user),
    );
    dirs
}

/// The configured directories, then the executable's directory restricted
/// to the bundled packs' files, each at its precedence level.
#[must_use]
pub fn search_path(named: &[PathBuf]) -> Vec<SearchDir> {
    let mut dirs = leveled_dirs(named);
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(PathBuf::from))
    {
        let files = BUNDLED_PACKAGES
            .iter()
            .chain([&BUNDLED_LIBRARY])
            .map(|p| library_file_name(p))
            .collect();
        dirs.push(SearchDir::bundled(exe_dir, files));
    }
    dirs
}
