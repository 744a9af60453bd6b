//! Isolated packs: a pack run in a sandboxed child process (the pack host).
//!
//! An isolated pack is the same pack file, checked the same way (directory
//! policy, lock pin, one read, SHA-256, inspection, a sealed memfd), but the
//! host never maps it: it starts `chimera pack-host` with the sealed memfd
//! as the child's stdin, one end of a Unix socket pair as its stdout, and
//! an environment of [`PACK_HOST_ENV`] alone (never the host's keys). The
//! host makes itself non-dumpable first, so no pack host reads its
//! environment or its open files through `/proc`; the child closes any
//! other descriptor it inherited and drops its capabilities before the
//! pack's code runs (see [`sandbox`]).
//! The child loads exactly those bytes, builds the pack, confines itself
//! ([`sandbox`]) and says hello (its interceptors, its declared policy, the
//! sandbox features this kernel lacks). From then on every run of
//! consecutive interceptors of the pack in a chain is **one round trip**
//! ([`wire`]): the child runs them in order on the same input while they
//! allow, and answers how many allowed and the first other decision.
//!
//! ```text
//!  host                                        pack host (child)
//!   Loader::seal ─ checks ─▶ sealed memfd ──stdin──▶ load · instantiate · confine
//!   socket pair ─────────────────────────stdout──▶ (moved off fd 1 at once)
//!        ◀─────────────── Hello {interceptors, policy, sandbox warnings}
//!   chain run  ── Call {seq, [i, j, k], input} ──▶ i, j, k while they allow
//!        ◀─────────────── StateOp {seq, op}   (an interceptor asks the gate state;
//!   StateAnswer ─────────────────────────────▶  answered in the call, at most 64)
//!        ◀─────────────── Reply {seq, allowed, first other decision}
//! ```
//!
//! Containment: each call waits at most the pack's call budget
//! (`--call-budget-ms`). Past it, or when the child dies (EOF, a signal, an
//! exit), the child is killed and reaped, the call is an interceptor error
//! (so the seam's failure policy applies: `tool_call` blocks), the failure
//! counts towards the pack's health as today, one line names the pack and
//! what happened, and a new child starts after a back-off (50 ms doubling
//! to 5 s; calls fail fast meanwhile). State is handed over on a reload
//! (`export_state` on the old child, `import_state` on the new one); a
//! child killed for a deadline cannot be asked, so a restart starts fresh.
//!
//! A reload starts a new child and swaps its chains in at the same
//! position; the old child is asked to exit once the last chain holding it
//! is dropped (and killed after a grace period). The host process never
//! `dlopen`s an isolated pack, so its memory does not grow with reloads.

pub(crate) mod host;
pub(crate) mod pool;
pub(crate) mod sandbox;
mod state;
pub(crate) mod transport;
pub(crate) mod wire;

use std::path::PathBuf;
use std::time::Duration;

/// The host's environment variables a pack host is started with, each when
/// the host has it; every other one is left out (a gateway's upstream keys
/// among them, so a pack that reads `std::env::vars()` finds none).
///
/// The pack host itself needs none: its pack comes as a descriptor, its
/// name and configuration as arguments, and a panic is reported without
/// `RUST_BACKTRACE`. `HOME` is kept for packs that read a file their
/// configuration names as `~/…` (gate-kit's `expand_home`), as they would
/// in-process; it names a directory, not a secret.
pub const PACK_HOST_ENV: &[&str] = &["HOME"];

/// Which packs run isolated, and how their pack hosts are started.
#[derive(Debug, Clone)]
pub struct Isolation {
    /// Packs (by entry-point name) to isolate.
    pub packs: Vec<String>,
    /// Isolate every pack loaded from a file.
    pub all: bool,
    /// The `chimera` binary started as the pack host.
    pub program: PathBuf,
    /// How long a pack host may take to load its pack.
    pub start_timeout: Duration,
    /// How many pack hosts each isolated pack runs, to answer that many
    /// calls at once (at least one; see [`pool`]).
    pub processes: usize,
}

impl Isolation {
    /// Isolation of `packs` (and of every file-loaded pack when `all`),
    /// with pack hosts re-executing the running binary (which must be
    /// `chimera`).
    ///
    /// # Errors
    ///
    /// The I/O error when the running binary's path cannot be found
    /// ([`std::env::current_exe`]).
    pub fn current_exe(packs: Vec<String>, all: bool) -> std::io::Result<Self> {
        Ok(Isolation {
            packs,
            all,
            program: std::env::current_exe()?,
            start_timeout: Duration::from_secs(10),
            processes: 1,
        })
    }

    /// True when pack `name` is to run isolated.
    #[must_use]
    pub fn covers(&self, name: Option<&str>) -> bool {
        self.all || name.is_some_and(|n| self.packs.iter().any(|p| p == n))
    }
}
