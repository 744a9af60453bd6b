//! Plugins: the interceptor registry, in-process plugins, and compiled packs
//! loaded from shared libraries.
//!
//! ```text
//!  search path ──discover──▶ index (name → file), read from symbol tables: no pack code runs;
//!                             a name two files claim is refused
//!  load(name) ─▶ read file ─▶ hash ─▶ inspect (format, completeness, manifest)
//!             ─▶ private copy ─▶ dlopen copy ─▶ abi_stable version + layout check
//!             ─▶ verify entry-point name ─▶ instantiate(config) ─▶ stage registrations
//!             ─▶ commit to the registry in one step (atomic) ─▶ pack_loaded
//! ```
//!
//! Libraries are never unloaded (`dlclose` is unsafe with `abi_stable`); a
//! library whose content was loaded before is reused, not mapped again.

mod condense;
mod discovery;
mod errors;
pub(crate) mod file_check;
pub(crate) mod loader;
mod manager;
mod pack_host;
mod pinning;
pub mod platform;
mod plugin;
mod registry;
mod sealed;
pub mod trust;
mod watch;

/// The largest pack file read (no real pack comes near it).
pub(crate) const MAX_PACK_BYTES: u64 = 512 << 20;

pub use discovery::{discover, DiscoveredPack, Discovery, Level, SearchDir};
pub use errors::path_list;
pub use errors::{
    AbiMismatch, ElfPart, FileError, Incomplete, LoadError, PluginError, RegistryError,
    RootModuleFailure, WrongFormat,
};
pub use loader::{LibraryInfo, LoadTogether, PackDescription};
pub use manager::{
    interceptors_of, PackInfo, PackSource, PluginManager, ReloadOutcome, MAX_STREAM_WINDOW,
};
pub use pinning::{pin_directory, pin_external, verify_directory, verify_external, Skipped};
pub use plugin::{Plugin, PluginRegistrar};
pub use registry::{OwnerId, Registry};
pub use watch::{watch, ReloadEvent, WatchError, WatchOptions, Watcher};

/// The child side of an isolated pack: serves pack `pack` (built from
/// `config`) over the socket on stdout, loading the sealed pack on stdin;
/// the pack's state operations go to the host over the same socket
/// (`state_shared`: the host's store is shared with other processes).
/// What `chimera pack-host` runs; an error is one line.
///
/// # Errors
///
/// The line saying what failed: reading or loading the sealed pack,
/// building it, confining the process, or the socket.
pub fn serve_pack_host(pack: &str, config: &str, state_shared: bool) -> Result<(), String> {
    pack_host::serve(pack, config, state_shared)
}
