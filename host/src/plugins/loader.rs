//! Opening pack libraries: read, hash, inspect, private copy, dlopen, check.
//!
//! Never through `RootModule::load_from*` (one cached module per type for the
//! whole process) and never the watched file itself (`dlopen` returns a stale
//! handle for a path it has seen, and a file rewritten under a mapping
//! crashes the host): each new content is read once, sealed (a memfd, or a
//! private copy), loaded from there, and never unloaded.

use super::condense::condense;
use super::errors::{FileError, LoadError};
use super::file_check::{inspect, read_bounded, sha256_hex, Inspection};
use super::sealed::{PrivateDir, Sealed};
use super::trust::{
    check_pin, DirectoryRole, FollowSymlinks, Pin, Probe, Subject, TrustSettings, TrustedDir,
};
use super::MAX_PACK_BYTES;
use abi_stable::library::{
    AbiHeaderRef, LibHeader, LibraryError, RawLibrary, ROOT_MODULE_LOADER_NAME,
};
use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::{PackInstanceBox, PackLibraryRef, Seam};
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One pack a library provides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackDescription {
    /// The entry-point name it is loaded by.
    pub name: String,
    /// The version the pack declares.
    pub version: String,
    /// The pack's one-line description, for listings.
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
    /// Every pack of every root module in the library, in manifest order.
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
    /// The description of pack `name`, or of the library's only pack when
    /// `name` is `None`.
    pub(crate) fn pack(&self, name: Option<&str>) -> Result<&PackDescription, LoadError> {
        let packs = &self.info.packs;
        let have = || packs.iter().map(|p| p.name.clone()).collect();
        let found = match (name, packs.as_slice()) {
            (Some(name), _) => {
                packs
                    .iter()
                    .find(|p| p.name == name)
                    .ok_or_else(|| FileError::NoSuchPack {
                        wanted: name.to_owned(),
                        have: have(),
                    })
            }
            (None, [only]) => Ok(only),
            (None, _) => Err(FileError::WhichPack { have: have() }),
        };
        found.map_err(|kind| LoadError::file(&self.info.path, kind))
    }

    /// Builds pack `name` from `config_json`.
    pub(crate) fn instantiate(
        &self,
        name: &str,
        config_json: &str,
    ) -> Result<PackInstanceBox, LoadError> {
        let Some(root) = self
            .roots
            .iter()
            .find(|(_, names)| names.iter().any(|n| n == name))
            .map(|(root, _)| *root)
        else {
            self.pack(Some(name))?;
            let kind = FileError::ManifestMismatch(name.to_owned());
            return Err(LoadError::file(&self.info.path, kind));
        };
        (root.instantiate())(RStr::from_str(name), RStr::from_str(config_json))
            .into_result()
            .map_err(|e| LoadError::Instantiate(e.into_string()))
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

/// Checked, sealed bytes for an isolated pack's child.
pub(crate) struct SealedPack {
    /// The sealed memfd, shared by every isolated pack taken from the same
    /// bytes.
    pub(crate) memfd: Arc<std::os::fd::OwnedFd>,
    /// SHA-256 of the bytes, hex.
    pub(crate) sha256: String,
    /// The entry-point names the manifest lists.
    pub(crate) packs: Vec<String>,
}

/// Opens libraries, once per distinct content.
pub(crate) struct Loader {
    /// Where copies go where sealed memfds are not available.
    cache: PrivateDir,
    /// Every library loaded, by the SHA-256 (hex) of its content.
    libraries: Mutex<HashMap<String, Arc<Library>>>,
    /// The batch open, if any (see [`Loader::batch`]).
    batch: Mutex<Option<Batch>>,
    /// The sealed memfds isolated packs run from, by the SHA-256 (hex) of
    /// their content: the packs of one library share one while any of
    /// them runs.
    sealed: Mutex<HashMap<String, std::sync::Weak<std::os::fd::OwnedFd>>>,
}

/// The libraries one thread opened during a batch, by the path it opened
/// them by.
struct Batch {
    thread: std::thread::ThreadId,
    opened: HashMap<PathBuf, Arc<Library>>,
}

/// A batch of loads (see [`Loader::batch`]): ends when dropped.
#[must_use = "the batch ends when this is dropped"]
pub struct LoadTogether<'l> {
    /// `None`: another batch was open; this one changes nothing.
    loader: Option<&'l Loader>,
}

impl Drop for LoadTogether<'_> {
    fn drop(&mut self) {
        if let Some(loader) = self.loader {
            *loader
                .batch
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
            // What the batch's loads left freed goes back, as after one load.
            give_back_freed_memory();
        }
    }
}

impl Loader {
    pub(crate) fn new() -> Self {
        Loader {
            cache: PrivateDir::new(),
            libraries: Mutex::new(HashMap::new()),
            batch: Mutex::new(None),
            sealed: Mutex::new(HashMap::new()),
        }
    }

    /// Opens a batch for this thread: until the guard is dropped, a path
    /// this thread opened is not read again, and every pack taken from it
    /// comes from the bytes read (and checked) the first time. Loading
    /// several packs from one library then reads and hashes it once, not
    /// once a pack. Other threads (a watcher's reloads) read as always.
    /// While a batch is open, another is a no-op.
    pub(crate) fn batch(&self) -> LoadTogether<'_> {
        let mut batch = self
            .batch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if batch.is_some() {
            return LoadTogether { loader: None };
        }
        *batch = Some(Batch {
            thread: std::thread::current().id(),
            opened: HashMap::new(),
        });
        LoadTogether { loader: Some(self) }
    }

    /// What this thread's batch opened from `path`, if a batch is open.
    fn batched(&self, path: &Path) -> Option<Arc<Library>> {
        let batch = self
            .batch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let batch = batch.as_ref()?;
        if batch.thread != std::thread::current().id() {
            return None;
        }
        batch.opened.get(path).cloned()
    }

    /// Notes `library` as opened from `path`, when this thread has a batch
    /// open.
    fn remember(&self, path: &Path, library: &Arc<Library>) {
        let mut batch = self
            .batch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(batch) = batch
            .as_mut()
            .filter(|batch| batch.thread == std::thread::current().id())
        {
            batch.opened.insert(path.to_owned(), Arc::clone(library));
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
    /// the load. Within a batch ([`Loader::batch`]), a path is read once.
    ///
    /// A pack taken from a library already loaded is still probed with
    /// its own configuration when `checks` asks for a probe (its bytes are
    /// then read again, batch or not).
    pub(crate) fn open(&self, path: &Path, checks: &Checks<'_>) -> Result<Arc<Library>, LoadError> {
        if checks.probe.is_none() {
            if let Some(library) = self.batched(path) {
                return Ok(library);
            }
        }
        let library = self.read_and_open(path, checks)?;
        self.remember(path, &library);
        Ok(library)
    }

    /// [`Loader::open`] outside a batch.
    fn read_and_open(&self, path: &Path, checks: &Checks<'_>) -> Result<Arc<Library>, LoadError> {
        let fail = |kind: FileError| LoadError::file(path, kind);
        let (bytes, hash, pin) = read_checked(path, checks.trust)?;
        let stem = path
            .file_stem()
            .map_or_else(|| "pack".into(), |s| s.to_string_lossy());
        if let Some(library) = self.cached(&hash) {
            let probed = match checks.probe {
                Some(_) => Sealed::new(&bytes, &stem, &self.cache)
                    .map_err(FileError::Io)
                    .and_then(|sealed| {
                        let probed = probe(&sealed, checks);
                        sealed.discard();
                        probed
                    }),
                None => Ok(()),
            };
            drop(bytes);
            give_back_freed_memory();
            return probed.map(|()| library).map_err(fail);
        }
        let loaded = self.load_bytes(path, &bytes, &hash, &stem, pin, checks);
        drop(bytes);
        give_back_freed_memory();
        loaded.map_err(fail)
    }

    /// Every check [`Loader::open`] makes, up to the sealed memfd, and no
    /// `dlopen`: the bytes an isolated pack's child loads. The memfd of
    /// bytes an isolated pack already runs from is shared, not sealed
    /// again (the fifteen packs of one library: one copy, not fifteen).
    pub(crate) fn seal(&self, path: &Path, trust: &TrustSettings) -> Result<SealedPack, LoadError> {
        let fail = |kind: FileError| LoadError::file(path, kind);
        let (bytes, sha256, pin) = read_checked(path, trust)?;
        let inspection = inspect(&bytes[..], bytes.len() as u64).map_err(fail)?;
        let packs: Vec<String> = inspection.packs().map(|(name, _)| name.clone()).collect();
        if let Some(pin) = pin {
            pin.check_entry_points(packs.clone())
                .map_err(|e| fail(e.into()))?;
        }
        let mut sealed_copies = self
            .sealed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sealed_copies.retain(|_, copy| copy.strong_count() > 0);
        let shared = sealed_copies
            .get(&sha256)
            .and_then(std::sync::Weak::upgrade);
        let memfd = if let Some(memfd) = shared {
            memfd
        } else {
            let stem = path
                .file_stem()
                .map_or_else(|| "pack".into(), |s| s.to_string_lossy());
            let sealed =
                Sealed::new(&bytes, &stem, &self.cache).map_err(|e| fail(FileError::Io(e)))?;
            let memfd = Arc::new(sealed.into_memfd().ok_or_else(|| {
                fail(FileError::Io(io::Error::other(
                    "an isolated pack needs a sealed memfd (Linux with /proc)",
                )))
            })?);
            sealed_copies.insert(sha256.clone(), Arc::downgrade(&memfd));
            memfd
        };
        drop(sealed_copies);
        drop(bytes);
        give_back_freed_memory();
        Ok(SealedPack {
            memfd,
            sha256,
            packs,
        })
    }

    /// The probe's side: loads the sealed bytes this process was handed on
    /// its standard input by [`Probe`] (no directory or lock checks: the
    /// parent made them on these very bytes).
    pub(crate) fn open_inherited_stdin(&self) -> Result<Arc<Library>, LoadError> {
        let shown = Path::new("(sealed pack on stdin)");
        let fail = |kind: FileError| LoadError::file(shown, kind);
        let (bytes, path) = inherited_stdin().map_err(|e| fail(FileError::Io(e)))?;
        let hash = sha256_hex(&bytes);
        let inspection = inspect(&bytes[..], bytes.len() as u64).map_err(fail)?;
        drop(bytes);
        let library = self.map(shown, &path, &hash, &inspection).map_err(fail)?;
        Ok(library)
    }

    fn load_bytes(
        &self,
        path: &Path,
        bytes: &[u8],
        hash: &str,
        stem: &str,
        pin: Option<Pin>,
        checks: &Checks<'_>,
    ) -> Result<Arc<Library>, FileError> {
        let inspection = inspect(bytes, bytes.len() as u64)?;
        if let Some(pin) = pin {
            pin.check_entry_points(inspection.packs().map(|(name, _)| name.clone()).collect())?;
        }
        let sealed = Sealed::new(bytes, stem, &self.cache).map_err(FileError::Io)?;
        if let Err(problem) = probe(&sealed, checks) {
            sealed.discard();
            return Err(problem);
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
        hash: &str,
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
                    .and_then(LibHeader::init_root_module::<PackLibraryRef>)
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
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(hash.to_owned(), Arc::clone(&library));
        Ok(library)
    }

    fn cached(&self, hash: &str) -> Option<Arc<Library>> {
        self.libraries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(hash)
            .cloned()
    }
}

/// Hands the allocator's free pages back to the system once a pack's bytes
/// are dropped. They are read whole (1–8 MiB a pack); once glibc has seen
/// a block that large freed, it serves the next ones from its heap, whose
/// pages stay resident after they are freed: 3.4 MiB of the fifteen
/// shipped packs' idle heap (BENCHMARKS.md, "The packs' sealed copies").
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(
    unsafe_code,
    reason = "one call into glibc, which the libc crate declares unsafe"
)]
fn give_back_freed_memory() {
    // SAFETY: `malloc_trim` takes no pointer and only releases memory the
    // allocator holds free; glibc's allocator is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Elsewhere the allocator keeps what it keeps.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn give_back_freed_memory() {}

/// Opens `path` through its checked directory, reads it once, hashes it
/// and checks its lock pin: the bytes, their SHA-256 and the pin.
fn read_checked(
    path: &Path,
    trust: &TrustSettings,
) -> Result<(Vec<u8>, String, Option<Pin>), LoadError> {
    let fail = |kind: FileError| LoadError::file(path, kind);
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
    let dir = TrustedDir::open(parent, DirectoryRole::Plugins, trust.allow_insecure)
        .map_err(|problem| fail(problem.into()))?;
    let file = dir
        .open_file(name, Subject::PackFile, FollowSymlinks::Yes)
        .map_err(|problem| fail(problem.into()))?
        .ok_or_else(|| fail(FileError::NotFound))?;
    let bytes = read_bounded(file.file).map_err(fail)?;
    let hash = sha256_hex(&bytes);
    let pin = check_pin(&dir, name, &hash, trust).map_err(|e| fail(e.into()))?;
    Ok((bytes, hash, pin))
}

/// Runs the probe `checks` asks for, if any, on `sealed`.
fn probe(sealed: &Sealed, checks: &Checks<'_>) -> Result<(), FileError> {
    match checks.probe {
        Some((probe, packs)) => probe.run(sealed, packs).map_err(Into::into),
        None => Ok(()),
    }
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

/// The library header exported under `symbol`, checked by `abi_stable`.
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
    hash: &str,
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
        sha256: hash.to_owned(),
        abi_revision: roots.first().map_or(0, |(root, _)| root.abi_revision()),
        packs,
    })
}
