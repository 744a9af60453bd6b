//! Trust: what is checked before a pack's code ever runs in this process.
//!
//! ```text
//!  dir  ─▶ opened once; it and its ancestors pass the directory policy
//!  file ─▶ opened through that handle (no symlink out, no FIFO; owner, mode)
//!       ─▶ its bytes, read once ─▶ SHA-256 ─▶ lock file pin     ← before dlopen
//!       ─▶ format + completeness ─▶ sealed (memfd) copy of those bytes
//!       ─▶ probe the sealed copy in a child                     ← before dlopen here
//!       ─▶ dlopen the sealed copy in the host
//! ```
//!
//! Loading a shared library runs its code (ELF constructors) before any
//! check of ours could, so every check that can be made without loading is
//! made first, on the very bytes that are then loaded.

mod lock;
mod pin;
mod policy;
mod probe;

pub(crate) use lock::compare;
pub use lock::{
    LockEntry, LockError, LockFile, LockMismatch, LockScope, SyntaxProblem, LOCK_FILE_NAME,
};
pub(crate) use pin::{check_pin, Pin};
pub use pin::{LockLocation, PinError};
pub use policy::{check_location, Access, DirectoryRole, PolicyError, PolicyErrorKind, Subject};
pub(crate) use policy::{FollowSymlinks, TrustedDir};
pub use probe::{Probe, ProbeError};

/// How strictly pack files are trusted.
#[derive(Debug, Clone, Default)]
pub struct TrustSettings {
    /// Refuse every pack file not pinned by a `chimera.lock` in its
    /// directory, even where no lock file exists (`--locked`). A lock file,
    /// where one exists, is always enforced.
    pub locked: bool,
    /// A lock kept outside the plugins directories (`--lock FILE`): when
    /// set, it is the only lock consulted, and every pack file must be
    /// pinned in it by absolute path.
    pub lock_file: Option<std::path::PathBuf>,
    /// Load from directories and files others can write (with a warning).
    pub allow_insecure: bool,
    /// Load-test new content in a child process before loading it here, at
    /// start-up.
    pub probe_on_load: Option<Probe>,
    /// The same, for hot reloads (on by default in the CLI).
    pub probe_on_reload: Option<Probe>,
}
