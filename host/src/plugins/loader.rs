//! Opening pack libraries: read, hash, inspect, private copy, dlopen, check.
//!
//! Never through `RootModule::load_from*` (one cached module per type for the
//! whole process) and never the watched file itself (`dlopen` returns a stale
//! handle for a path it has seen, and a file rewritten under a mapping
//! crashes the host): each new content is read once, sealed (a memfd, or a
//! private copy), loaded from there, and never unloaded.

use super::errors::{FileError, LoadError};
use super::file_check::inspect;
use super::file_check::Inspection;
use super::sealed::{PrivateDir, Sealed};
use super::trust::{
    trusted_canonical, LockEntry, LockError, LockFile, Probe, TrustSettings, TrustedDir,
};
use super::MAX_PACK_BYTES;
use abi_stable::library::{
    AbiHeaderRef, LibHeader, LibraryError, RawLibrary, ROOT_MODULE_LOADER_NAME,
};
use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::{PackInstanceBox, PackLibraryRef, Seam};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One pack a library provides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackDescription {
    /// Entry-point name.
    pub name: String,
    /// The pack's version.
    pub version: String,
    /// One line.
    pub description: String,
    /// Seams it registers on.
    pub seams: Vec<Seam>,
}

/// What a loaded library provides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryInfo {
    /// The file it was loaded from (not the private copy).
    pub path: PathBuf,
    /// SHA-256 of the bytes that were loaded, hex.
    pub sha256: String,
    /// The ABI revision the pack was built against.
    pub abi_revision: u32,
    /// Its packs.
    pub packs: Vec<PackDescription>,
}

/// A loaded (and never unloaded) pack library.
pub(crate) struct Library {
    pub(crate) info: LibraryInfo,
    /// One root module per pack crate linked into the library, with the
    /// names its manifest lists.
    roots: Vec<(PackLibraryRef, Vec<String>)>,
}

impl Library {
    /// Builds pack `name` from `config_json`; errors are one line.
    pub(crate) fn instantiate(
        &self,
        name: &str,
        config_json: &str,
    ) -> Result<PackInstanceBox, String> {
        let root = self
            .roots
            .iter()
            .find(|(_, names)| names.iter().any(|n| n == name))
            .map(|(root, _)| *root)
            .ok_or_else(|| format!("this library has no pack named '{name}'"))?;
        (root.instantiate())(RStr::from_str(name), RStr::from_str(config_json))
            .into_result()
            .map_err(|e| e.into_string())
    }
}

/// What [`Loader::open`] checks besides the file itself.
pub(crate) struct Checks<'a> {
    /// Directory policy and lock-file enforcement.
    pub(crate) trust: &'a TrustSettings,
    /// Probe the sealed bytes in a child (instantiating these packs) before
    /// loading them here.
    pub(crate) probe: Option<(&'a Probe, &'a [(&'a str, &'a str)])>,
}

/// Checks `hash` against the lock that governs `name` in `dir`: the
/// `--lock FILE` when one is set, else the directory's own `chimera.lock`.
/// Returns the pin (to check the entry points against once the manifest is
/// read).
fn pinned(
    dir: &TrustedDir,
    name: &Path,
    hash: &str,
    trust: &TrustSettings,
) -> Result<Option<LockEntry>, FileError> {
    let not_pinned = |e: LockError| FileError::NotPinned(e.to_string());
    let (lock, key, lock_name, relock) = match &trust.lock_file {
        Some(external) => {
            let lock = LockFile::read_external(external).map_err(not_pinned)?;
            let key = trusted_canonical(dir.path(), name).map_err(FileError::NotPinned)?;
            let relock = format!("chimera packs lock --lock {}", external.display());
            let lock_name = external.display().to_string();
            (
                Some(lock),
                key.to_string_lossy().into_owned(),
                lock_name,
                relock,
            )
        }
        None => {
            let lock = LockFile::read_in(dir).map_err(not_pinned)?;
            let relock = format!("chimera packs lock --plugins-dir {}", dir.path().display());
            let lock_name = super::trust::LOCK_FILE_NAME.to_owned();
            (lock, name.to_string_lossy().into_owned(), lock_name, relock)
        }
    };
    match lock {
        Some(lock) => match lock.entry(&key) {
            Some(entry) if entry.sha256 == hash => Ok(Some(entry.clone())),
            Some(_) => Err(FileError::NotPinned(format!(
                "its SHA-256 ({}…) is not the one {lock_name} pins: the file changed after it was locked; re-run `{relock}` if the change is yours",
                &hash[..12]
            ))),
            None => Err(FileError::NotPinned(format!(
                "{lock_name} does not pin {key}; run `{relock}` to trust it"
            ))),
        },
        None if trust.locked => Err(FileError::NotPinned(format!(
            "--locked, but {} has no chimera.lock; run `{relock}` first (or keep the lock elsewhere with --lock FILE)",
            dir.path().display(),
        ))),
        None => Ok(None),
    }
}

/// Opens libraries, once per distinct content.
pub(crate) struct Loader {
    /// Where copies go where sealed memfds are not available.
    cache: PrivateDir,
    libraries: Mutex<HashMap<[u8; 32], Arc<Library>>>,
}

impl Loader {
    pub(crate) fn new() -> Self {
        Loader {
            cache: PrivateDir::new(),
            libraries: Mutex::new(HashMap::new()),
        }
    }

    /// Reads, checks and loads the library at `path` (or returns the one
    /// already loaded with the same content).
    ///
    /// The directory is opened once and checked; the file is opened through
    /// it and read once; the hash, the lock pin, the format, the
    /// completeness and the manifest are all taken from those bytes; and
    /// exactly those bytes, sealed, are what the probe and `dlopen` map. No
    /// path is looked up twice, so nothing can change between the checks and
    /// the load.
    pub(crate) fn open(&self, path: &Path, checks: &Checks<'_>) -> Result<Arc<Library>, LoadError> {
        let fail = |kind| LoadError::file(path, kind);
        let name = path
            .file_name()
            .map(Path::new)
            .ok_or_else(|| fail(FileError::NotFound))?;
        let parent = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        if !parent.is_dir() {
            return Err(fail(FileError::NotFound));
        }
        let dir = TrustedDir::open(parent, "plugins directory", checks.trust.allow_insecure)
            .map_err(|problem| fail(FileError::Untrusted(problem)))?;
        let file = dir
            .open_file(name, "pack file")
            .map_err(|problem| fail(FileError::Untrusted(problem)))?
            .ok_or_else(|| fail(FileError::NotFound))?;
        let bytes = read_bounded(file.file).map_err(fail)?;
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        let pin = pinned(&dir, name, &hex(&hash), checks.trust).map_err(fail)?;
        if let Some(library) = self.cached(&hash) {
            return Ok(library);
        }
        let stem = path
            .file_stem()
            .map_or_else(|| "pack".into(), |s| s.to_string_lossy());
        self.load_bytes(path, &bytes, &hash, &stem, pin, checks)
            .map_err(fail)
    }

    /// The probe's side: loads the sealed bytes this process was handed on
    /// its standard input by [`Probe`] (no directory or lock checks: the
    /// parent made them on these very bytes).
    pub(crate) fn open_inherited_stdin(&self) -> Result<Arc<Library>, LoadError> {
        let shown = Path::new("(sealed pack on stdin)");
        let fail = |kind| LoadError::file(shown, kind);
        let (bytes, path) = inherited_stdin().map_err(|e| fail(FileError::Io(e)))?;
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        let inspection = inspect(&bytes[..], bytes.len() as u64).map_err(fail)?;
        drop(bytes);
        let library = self.map(shown, &path, &hash, &inspection).map_err(fail)?;
        Ok(library)
    }

    fn load_bytes(
        &self,
        path: &Path,
        bytes: &[u8],
        hash: &[u8; 32],
        stem: &str,
        pin: Option<LockEntry>,
        checks: &Checks<'_>,
    ) -> Result<Arc<Library>, FileError> {
        let inspection = inspect(bytes, bytes.len() as u64)?;
        if let Some(pin) = pin {
            let mut found: Vec<&str> = inspection.packs().map(|(name, _)| name.as_str()).collect();
            let mut pinned: Vec<&str> = pin.entry_points.iter().map(String::as_str).collect();
            found.sort_unstable();
            pinned.sort_unstable();
            if found != pinned {
                return Err(FileError::NotPinned(format!(
                    "it provides [{}] but the lock file pins [{}]; re-run `chimera packs lock` if this change is yours",
                    found.join(", "),
                    pinned.join(", ")
                )));
            }
        }
        let sealed = Sealed::new(bytes, stem, &self.cache).map_err(FileError::Io)?;
        if let Some((probe, packs)) = checks.probe {
            if let Err(problem) = probe.run(&sealed, packs) {
                sealed.discard();
                return Err(FileError::ProbeFailed(problem));
            }
        }
        let outcome = self.map(path, &sealed.path(), hash, &inspection);
        match &outcome {
            Ok(_) => sealed.loaded(),
            Err(_) => sealed.discard(),
        }
        outcome
    }

    /// `dlopen`s `load_path` and reads its root modules.
    fn map(
        &self,
        path: &Path,
        load_path: &Path,
        hash: &[u8; 32],
        inspection: &Inspection,
    ) -> Result<Arc<Library>, FileError> {
        let raw = RawLibrary::load_at(load_path).map_err(condense)?;
        let roots = inspection
            .manifests
            .iter()
            .map(|manifest| {
                let symbol = manifest
                    .root_symbol
                    .as_deref()
                    .unwrap_or(ROOT_MODULE_LOADER_NAME);
                let root = library_header(&raw, symbol)
                    .and_then(|header| header.init_root_module::<PackLibraryRef>())
                    .map_err(condense)?;
                Ok((
                    root,
                    manifest
                        .packs
                        .iter()
                        .map(|(name, _)| name.clone())
                        .collect(),
                ))
            })
            .collect::<Result<Vec<_>, FileError>>()?;
        // Never dlclose (see ARCHITECTURE.md, "What leaks, and why").
        std::mem::forget(raw);
        let library = Arc::new(Library {
            info: describe(path, hash, &roots)?,
            roots,
        });
        self.libraries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(*hash, Arc::clone(&library));
        Ok(library)
    }

    fn cached(&self, hash: &[u8; 32]) -> Option<Arc<Library>> {
        self.libraries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(hash)
            .cloned()
    }
}

/// The whole file, up to [`MAX_PACK_BYTES`].
fn read_bounded(file: std::fs::File) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::new();
    file.take(MAX_PACK_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(FileError::Io)?;
    if bytes.len() as u64 > MAX_PACK_BYTES {
        return Err(FileError::NotALibrary(format!(
            "larger than {} MiB, which no pack is",
            MAX_PACK_BYTES >> 20
        )));
    }
    Ok(bytes)
}

/// The bytes of the sealed file on stdin, and the path `dlopen` reads it by.
fn inherited_stdin() -> io::Result<(Vec<u8>, PathBuf)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::from(io::stdin().as_fd().try_clone_to_owned()?);
        let len = file.metadata()?.len();
        if len > MAX_PACK_BYTES {
            return Err(io::Error::other("the sealed pack is too large"));
        }
        let mut bytes = vec![0; usize::try_from(len).map_err(io::Error::other)?];
        file.read_exact_at(&mut bytes, 0)?;
        Ok((bytes, PathBuf::from("/proc/self/fd/0")))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(io::Error::other(
            "sealed packs are handed over on Linux only",
        ))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The library header exported under `symbol`, checked by abi_stable.
fn library_header(raw: &RawLibrary, symbol: &str) -> Result<&'static LibHeader, LibraryError> {
    let mut name = symbol.as_bytes().to_vec();
    name.push(0);
    // SAFETY: `symbol` comes from the library's manifest, which names a
    // `LibHeader` static exported by `export_packs!` (or abi_stable's own
    // `export_root_module`). abi_stable reads that static exactly this way,
    // as an `AbiHeaderRef` (`abi_header_from_raw_library`), and `upgrade`
    // validates the header before anything else is read. The library is
    // never unloaded, so the `'static` reference stays valid.
    #[allow(unsafe_code, reason = "reading the library header, as abi_stable does")]
    let header: AbiHeaderRef = unsafe { *raw.get::<AbiHeaderRef>(&name)? };
    header.upgrade()
}

/// Reads each root module's own account of its packs and checks it against
/// the manifest the file was indexed by.
fn describe(
    path: &Path,
    hash: &[u8; 32],
    roots: &[(PackLibraryRef, Vec<String>)],
) -> Result<LibraryInfo, FileError> {
    let mut packs = Vec::new();
    for (root, names) in roots {
        let provided: Vec<PackDescription> = (root.packs())()
            .into_iter()
            .map(|d| PackDescription {
                name: d.name.into_string(),
                version: d.version.into_string(),
                description: d.description.into_string(),
                seams: d.seams.into_iter().collect(),
            })
            .collect();
        if let Some(name) = names
            .iter()
            .find(|n| !provided.iter().any(|p| &&p.name == n))
        {
            return Err(FileError::ManifestMismatch(name.clone()));
        }
        packs.extend(provided);
    }
    Ok(LibraryInfo {
        path: path.to_owned(),
        sha256: hex(hash),
        abi_revision: roots.first().map_or(0, |(root, _)| root.abi_revision()),
        packs,
    })
}

/// Turns abi_stable's error (up to hundreds of lines of layout dump) into
/// one sentence.
fn condense(error: LibraryError) -> FileError {
    match error {
        LibraryError::OpenError { err, .. } => FileError::Open(first_line(&err.to_string())),
        LibraryError::GetSymbolError { .. } => {
            FileError::RootModule("it exports no abi_stable root module".to_owned())
        }
        LibraryError::IncompatibleVersionNumber {
            expected_version,
            actual_version,
            ..
        } => FileError::VersionMismatch {
            expected: expected_version.to_string(),
            found: actual_version.to_string(),
        },
        LibraryError::RootModule { err, .. } => FileError::RootModule(first_line(&err.to_string())),
        LibraryError::AbiInstability(err) => {
            FileError::AbiMismatch(layout_summary(&err.to_string()))
        }
        LibraryError::InvalidAbiHeader(_) | LibraryError::InvalidCAbi { .. } => {
            FileError::AbiMismatch("it was built with an incompatible abi_stable".to_owned())
        }
        LibraryError::ParseVersionError(error) => {
            FileError::AbiMismatch(first_line(&error.to_string()))
        }
        LibraryError::Many(errors) => match errors.into_iter().next() {
            Some(first) => condense(first),
            None => FileError::AbiMismatch("unknown library error".to_owned()),
        },
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("unknown error")
        .to_owned()
}

/// Condenses a layout dump into the mismatching type and its first errors:
/// `ToolCallView<'a>: incompatible type size (expected 48, found 56); too many
/// fields (expected 3, found 4)`.
fn layout_summary(dump: &str) -> String {
    let lines: Vec<&str> = dump.lines().map(str::trim).collect();
    let mut type_name = None;
    let mut errors: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if *line == "Layout of found type:" {
            type_name = lines[i..]
                .iter()
                .find_map(|l| l.strip_prefix("type:"))
                .map(str::to_owned);
        }
        if let Some(what) = line.strip_prefix("Error:") {
            let value_after = |label: &str| {
                lines[i..]
                    .iter()
                    .position(|l| *l == label)
                    .and_then(|at| lines.get(i + at + 1))
                    .map(|v| v.to_string())
            };
            let error = match (value_after("Expected:"), value_after("Found:")) {
                (Some(expected), Some(found)) if expected.len() < 60 && found.len() < 60 => {
                    format!("{what} (expected {expected}, found {found})")
                }
                _ => what.to_owned(),
            };
            if !errors.contains(&error) {
                errors.push(error);
            }
        }
    }
    errors.truncate(2);
    match (type_name, errors.is_empty()) {
        (_, true) => first_line(dump),
        (Some(name), false) => format!("{name}: {}", errors.join("; ")),
        (None, false) => errors.join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::layout_summary;

    #[test]
    fn a_layout_dump_condenses_to_the_type_and_its_first_errors() {
        let dump = "\
Layout of expected type:
    --- Type Layout ---
    type:ToolCallView<'a>
Layout of found type:
    --- Type Layout ---
    type:ToolCallView<'a>
    size:56 align:8

Error:incompatible type size
Expected:
    48
Found:
    56

Error:too many fields
Expected:
    3
Found:
    4
";
        assert_eq!(
            layout_summary(dump),
            "ToolCallView<'a>: incompatible type size (expected 48, found 56); too many fields (expected 3, found 4)"
        );
    }
}
