//! Errors of the registry, plugins and the loader. Each displays as one line
//! a person can act on.

use crate::interception::UnknownSeam;
use std::path::PathBuf;

/// A registry operation that was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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

/// A plugin's own failure (activation or deactivation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PluginError(pub String);

impl From<RegistryError> for PluginError {
    fn from(error: RegistryError) -> Self {
        PluginError(error.to_string())
    }
}

impl From<&str> for PluginError {
    fn from(text: &str) -> Self {
        PluginError(text.to_owned())
    }
}

/// Why a pack file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Nothing at that path.
    #[error("no such file")]
    NotFound,
    /// The file exists but could not be read or copied.
    #[error("cannot read it: {0}")]
    Io(#[source] std::io::Error),
    /// Not an object file this platform loads.
    #[error("not a shared library ({0})")]
    NotALibrary(String),
    /// A shared library, but not a Chimera pack.
    #[error("not a chimera pack: it exports no CHIMERA_PACK_MANIFEST (build it with chimera_plugin_api::export_packs!)")]
    NotAPack,
    /// Truncated, or still being written.
    #[error("incomplete file ({0}); it may still be being written — publish packs by writing a temporary file and renaming it")]
    Incomplete(String),
    /// `dlopen` refused it.
    #[error("the dynamic loader refused it: {0}")]
    Open(String),
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
    AbiMismatch(String),
    /// The pack's root module failed or panicked while initialising.
    #[error("the pack library failed to initialise: {0}")]
    RootModule(String),
    /// The manifest names a pack the library does not provide.
    #[error("its manifest lists '{0}' but the library does not provide it")]
    ManifestMismatch(String),
    /// The file's location is not trusted (permissions, owner, symlink).
    #[error("{0}")]
    Untrusted(String),
    /// The lock file does not pin this content.
    #[error("{0}")]
    NotPinned(String),
    /// The child-process probe failed.
    #[error("{0}")]
    ProbeFailed(String),
    /// The requested entry point is not in this library.
    #[error("it provides no pack named '{wanted}' (it has: {have})")]
    NoSuchPack {
        /// The name asked for.
        wanted: String,
        /// What the library has.
        have: String,
    },
}

/// Why a pack could not be loaded, unloaded or instantiated.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No file on the search path provides this entry point.
    #[error("no pack entry point named '{name}' (searched: {searched})")]
    UnknownName {
        /// The entry point asked for.
        name: String,
        /// The directories searched, `:`-joined.
        searched: String,
    },
    /// Two files on the search path provide this entry point. Neither is
    /// loaded: which one is genuine is for the user to decide.
    #[error("pack '{name}' is provided by two files, {} and {}; refusing to choose: remove the one you did not put there, or leave its directory off the search path", first.display(), second.display())]
    ClaimedTwice {
        /// The entry point.
        name: String,
        /// The first file on the search path that provides it.
        first: PathBuf,
        /// Another.
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
    /// The pack refused its configuration, or its constructor failed or panicked.
    #[error("{0}")]
    Instantiate(String),
    /// Activation failed; the registry is exactly as it was before.
    #[error("{name}: activation failed: {source}")]
    Activation {
        /// The pack or plugin.
        name: String,
        /// Why.
        #[source]
        source: PluginError,
    },
    /// Deactivation failed; the plugin is unloaded and its chains withdrawn anyway.
    #[error("{name}: deactivate failed: {source}")]
    Deactivation {
        /// The pack or plugin.
        name: String,
        /// Why.
        #[source]
        source: PluginError,
    },
}

impl LoadError {
    pub(crate) fn file(path: impl Into<PathBuf>, kind: FileError) -> Self {
        LoadError::File {
            path: path.into(),
            kind,
        }
    }
}
