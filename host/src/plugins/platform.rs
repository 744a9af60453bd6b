//! Platform specifics, in one place: pack file names.
//!
//! Packs are `.so` on Linux, `.dylib` on macOS and `.dll` on Windows. CI runs
//! on Linux; the completeness check ([`super`]'s loader) is ELF-only, other
//! platforms rely on the size-stability check of the watcher.

use std::ffi::OsStr;
use std::path::Path;

/// True when `path` has this platform's shared-library extension.
pub fn is_library_file(path: &Path) -> bool {
    path.extension() == Some(OsStr::new(std::env::consts::DLL_EXTENSION))
        && !path
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|name| name.starts_with('.'))
}

/// The file a cargo package named `package` builds as a cdylib here
/// (`plan-gate` → `libplan_gate.so`).
#[must_use]
pub fn library_file_name(package: &str) -> String {
    libloading::library_filename(package.replace('-', "_"))
        .to_string_lossy()
        .into_owned()
}
