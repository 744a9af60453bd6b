//! Errors of the registry, plugins and the loader. Each keeps what went
//! wrong as values (paths, names, sources) and displays as one line a
//! person can act on.

use super::trust::{PinError, PolicyError, ProbeError};
use crate::interception::UnknownSeam;
use crate::types::one_line;
use chimera_plugin_api::abi::Seam;
use std::fmt;
use std::path::PathBuf;

/// A registry operation that was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The seam name is not one of the four.
    #[error(transparent)]
    UnknownSeam(#[from] UnknownSeam),
    /// The interceptor was built for another seam.
    #[error("interceptor '{name}' runs on {actual}, not on {requested}")]
    SeamMismatch {
        /// Interceptor display name.
        name: String,
        /// The seam asked for.
        requested: String,
        /// The seam the interceptor belongs to.
        actual: String,
    },
}

/// A plugin's own failure (activation, deactivation, state handover).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The plugin refused, saying why (`Err("…".into())`).
    #[error("{}", one_line(.0))]
    Failed(String),
    /// A registration was refused.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The hook panicked.
    #[error("{hook} panicked: {message}")]
    Panicked {
        /// `activate` or `deactivate`.
        hook: &'static str,
        /// The panic's message.
        message: String,
    },
    /// A pack registers on a seam this host does not run.
    #[error("interceptor '{interceptor}' registers on {seam} which this host does not run; upgrade the host or drop the pack")]
    UnsupportedSeam {
        /// `<pack>/<name>`.
        interceptor: String,
        /// The seam it asked for.
        seam: Seam,
    },
}

impl From<&str> for PluginError {
    fn from(text: &str) -> Self {
        PluginError::Failed(text.to_owned())
    }
}

impl From<String> for PluginError {
    fn from(text: String) -> Self {
        PluginError::Failed(text)
    }
}

/// Why a file is not a shared library this platform loads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WrongFormat {
    /// No object format recognised (the object reader's own words).
    #[error("{}", .0.to_lowercase())]
    Unrecognised(String),
    /// A program, not a library.
    #[error("an executable")]
    Executable,
    /// An object file not yet linked.
    #[error("a relocatable object")]
    Relocatable,
    /// Another kind of object file (a core dump, …).
    #[error("not a dynamic library")]
    OtherKind,
    /// Larger than any pack.
    #[error("larger than {} MiB, which no pack is", limit >> 20)]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
}

/// A part of an ELF file that a complete file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElfPart {
    /// The section header table.
    SectionTable,
    /// The program header table.
    ProgramHeaders,
    /// The contents of the program header (segment) at this index.
    Segment(usize),
    /// The contents of the section at this index.
    Section(usize),
}

impl fmt::Display for ElfPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElfPart::SectionTable => f.write_str("section table"),
            ElfPart::ProgramHeaders => f.write_str("program header table"),
            ElfPart::Segment(index) => write!(f, "segment {index}"),
            ElfPart::Section(index) => write!(f, "section {index}"),
        }
    }
}

/// How a truncated (or still growing) file shows it is not all there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Incomplete {
    /// Zero bytes.
    #[error("the file is empty")]
    Empty,
    /// The file ends inside its ELF header.
    #[error("the ELF header is cut short: {len} bytes")]
    Header {
        /// The file's length.
        len: u64,
    },
    /// The header describes a part that lies past the end of the file.
    #[error("{len} bytes, but its {part} ends at byte {end}")]
    CutShort {
        /// The file's length.
        len: u64,
        /// The first part found to lie past the end.
        part: ElfPart,
        /// Where that part ends.
        end: u64,
    },
}

/// How a library's ABI differs from the host's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AbiMismatch {
    /// A type's layout differs (`abi_stable`'s layout check).
    #[error("{}{}", type_name.as_deref().map(|t| format!("{t}: ")).unwrap_or_default(), differences.join("; "))]
    Layout {
        /// The type whose layout differs, where `abi_stable` names it.
        type_name: Option<String>,
        /// The first differences, e.g. `too many fields (expected 3, found 4)`.
        differences: Vec<String>,
    },
    /// The library header is not one this `abi_stable` reads.
    #[error("it was built with an incompatible abi_stable")]
    Header,
    /// A version string in the library does not parse (`abi_stable`'s words).
    #[error("{}", one_line(.0))]
    Version(String),
    /// `abi_stable` reported an empty list of errors.
    #[error("unknown library error")]
    Unknown,
}

/// Why a pack library's root module could not be initialised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RootModuleFailure {
    /// No `abi_stable` root module is exported.
    #[error("it exports no abi_stable root module")]
    Missing,
    /// The root module's initialiser failed or panicked (its message).
    #[error("{}", one_line(.0))]
    Failed(String),
}

/// Why a pack file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// Nothing at that path.
    #[error("no such file")]
    NotFound,
    /// The file exists but could not be read or copied.
    #[error("cannot read it: {0}")]
    Io(#[source] std::io::Error),
    /// Not an object file this platform loads.
    #[error("not a shared library ({0})")]
    NotALibrary(#[from] WrongFormat),
    /// A shared library, but not a Chimera pack.
    #[error("not a chimera pack: it exports no CHIMERA_PACK_MANIFEST (build it with chimera_plugin_api::export_packs!)")]
    NotAPack,
    /// Truncated, or still being written.
    #[error("incomplete file ({0}); it may still be being written — publish packs by writing a temporary file and renaming it")]
    Incomplete(#[from] Incomplete),
    /// `dlopen` refused it.
    #[error("the dynamic loader refused it: {}", one_line(&.0.to_string()))]
    Open(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Built against another plugin-api version.
    #[error("built against chimera-plugin-api {found}, but this host speaks {expected}; rebuild the pack against chimera-plugin-api {expected}")]
    VersionMismatch {
        /// The host's plugin-api version.
        expected: String,
        /// The pack's.
        found: String,
    },
    /// The ABI layout differs from the host's.
    #[error(
        "incompatible pack ABI ({0}); rebuild the pack against this host's chimera-plugin-api"
    )]
    AbiMismatch(#[from] AbiMismatch),
    /// The pack's root module failed or panicked while initialising.
    #[error("the pack library failed to initialise: {0}")]
    RootModule(#[from] RootModuleFailure),
    /// The manifest names a pack the library does not provide.
    #[error("its manifest lists '{0}' but the library does not provide it")]
    ManifestMismatch(String),
    /// The file's location is not trusted (permissions, owner, symlink).
    #[error(transparent)]
    Untrusted(#[from] PolicyError),
    /// The lock file does not pin this content.
    #[error(transparent)]
    NotPinned(#[from] PinError),
    /// The child-process probe failed.
    #[error(transparent)]
    ProbeFailed(#[from] ProbeError),
    /// The requested entry point is not in this library.
    #[error("it provides no pack named '{wanted}' (it has: {})", have.join(", "))]
    NoSuchPack {
        /// The name asked for.
        wanted: String,
        /// The entry points the library has.
        have: Vec<String>,
    },
    /// No name was given, and the library has more than one pack.
    #[error("it provides more than one pack ({}); name the one to load", have.join(", "))]
    WhichPack {
        /// The entry points the library has.
        have: Vec<String>,
    },
}

/// Why a pack could not be loaded, unloaded or instantiated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// No file on the search path provides this entry point.
    #[error(
        "no pack entry point named '{name}' (searched: {})",
        path_list(searched)
    )]
    UnknownName {
        /// The entry point asked for.
        name: String,
        /// The directories searched, in order.
        searched: Vec<PathBuf>,
    },
    /// Two files at the same precedence level of the search path (the
    /// best one providing it) provide this entry point. Neither is loaded:
    /// which one is genuine is for the user to decide.
    #[error("pack '{name}' is provided by two files, {} and {}; refusing to choose: remove the one you did not put there, or leave its directory off the search path", first.display(), second.display())]
    ClaimedTwice {
        /// The entry point.
        name: String,
        /// The first file on the search path that provides it.
        first: PathBuf,
        /// Another file at the same level that provides it, later on the
        /// search path.
        second: PathBuf,
    },
    /// A pack by this name is already loaded.
    #[error("pack '{0}' is already loaded")]
    AlreadyLoaded(String),
    /// No pack by this name is loaded.
    #[error("pack '{0}' is not loaded")]
    NotLoaded(String),
    /// The pack was not loaded from a file, so there is nothing to reload.
    #[error("pack '{0}' was not loaded from a file; there is nothing to reload")]
    NotReloadable(String),
    /// The file is unusable.
    #[error("{}: {kind}", path.display())]
    File {
        /// The pack file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        kind: FileError,
    },
    /// The pack refused its configuration, or its constructor failed or
    /// panicked (the pack's own message, which names it).
    #[error("{}", one_line(.0))]
    Instantiate(String),
    /// Activation failed; the registry is exactly as it was before.
    #[error("{name}: activation failed: {source}")]
    Activation {
        /// The pack or plugin.
        name: String,
        /// The plugin's own error, or its panic.
        #[source]
        source: PluginError,
    },
    /// Deactivation failed; the plugin is unloaded and its chains withdrawn anyway.
    #[error("{name}: deactivate failed: {source}")]
    Deactivation {
        /// The pack or plugin.
        name: String,
        /// The plugin's own error, or its panic.
        #[source]
        source: PluginError,
    },
}

impl LoadError {
    pub(crate) fn file(path: impl Into<PathBuf>, kind: impl Into<FileError>) -> Self {
        LoadError::File {
            path: path.into(),
            kind: kind.into(),
        }
    }
}

/// Directories as a person reads them: `a, b`, or `nothing` for none.
#[must_use]
pub fn path_list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "nothing".to_owned();
    }
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}
