//! Trust: what is checked before a pack's code ever runs in this process.
//!
//! ```text
//!  file ─▶ directory policy (owner, permissions, symlinks)      ← before reading it
//!       ─▶ private copy ─▶ SHA-256 of the copy ─▶ lock file pin  ← before dlopen
//!       ─▶ format + completeness ─▶ probe the copy in a child    ← before dlopen here
//!       ─▶ dlopen the copy in the host
//! ```
//!
//! Loading a shared library runs its code (ELF constructors) before any
//! check of ours could, so every check that can be made without loading is
//! made first, on the very bytes that are then loaded.

mod lock;
mod policy;
mod probe;

pub use lock::{pin_directory, verify_directory, LockEntry, LockError, LockFile, LOCK_FILE_NAME};
pub use policy::check_location;
pub use probe::Probe;

/// How strictly pack files are trusted.
#[derive(Debug, Clone, Default)]
pub struct TrustSettings {
    /// Refuse every pack file not pinned by a `chimera.lock` in its
    /// directory, even where no lock file exists (`--locked`). A lock file,
    /// where one exists, is always enforced.
    pub locked: bool,
    /// Load from directories and files others can write (with a warning).
    pub allow_insecure: bool,
    /// Load-test new content in a child process before loading it here, at
    /// start-up.
    pub probe_on_load: Option<Probe>,
    /// The same, for hot reloads (on by default in the CLI).
    pub probe_on_reload: Option<Probe>,
}
