//! Configuration shared by every command that runs packs (`chimera run`,
//! `chimera serve`, the pack tools): the `chimera.toml` schema and how it
//! is found, read and trusted, the plugin search path, the per-user
//! directories, and pack specs (`NAME[=JSON]`). The command line declares
//! the settings (each flag with its file key) and layers the file under its
//! flags; nothing here knows about flags.

mod file;
mod pack_spec;
mod paths;
mod search;
mod trust;

pub use file::{line_of_key, parse, McpServerEntry, PackEntry, SessionScope, FILE_NAME};
pub use pack_spec::{parse_pack_spec, PackSpec};
pub use paths::{user_config_dir, user_data_dir};
pub use search::{configured_dirs, search_path, BUNDLED_LIBRARY, BUNDLED_PACKAGES};
pub use trust::{load, trust, user_file, Check, Found, Loaded};

use std::path::PathBuf;

/// A configuration file that cannot be used, as the one line a user reads
/// (a usage or configuration error: exit status 2 at the command line).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read as a configuration file.
    #[error("{}: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (not a regular file, too large, not UTF-8, ...).
        reason: String,
    },
    /// It is not valid TOML for the schema.
    #[error("{}{}: {message}", path.display(), line.map_or_else(String::new, |l| format!(" line {l}")))]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line of the problem, when known.
        line: Option<usize>,
        /// The parser's message.
        message: String,
    },
    /// It parses but says something contradictory.
    #[error("{}: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A project file that was never trusted.
    #[error("{} is not trusted yet (it names code to load): review it, then run `chimera config trust` (or pass --config {FILE_NAME})", path.display())]
    Untrusted {
        /// The file.
        path: PathBuf,
    },
    /// A project file that changed since it was trusted.
    #[error("{} changed since it was trusted: review it, then run `chimera config trust` (or pass --config {FILE_NAME})", path.display())]
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// Neither `$XDG_CONFIG_HOME` nor `$HOME` says where the trust store is.
    #[error("cannot find the user config directory (set HOME or XDG_CONFIG_HOME)")]
    NoUserDir,
    /// The trust store is unreadable.
    #[error("{}: not a trust store ({reason}); remove it and trust again", path.display())]
    TrustStore {
        /// The store.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Writing the trust store failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// What was being written.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}
