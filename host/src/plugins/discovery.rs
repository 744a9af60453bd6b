//! Indexing a search path by entry-point name, from manifests alone.

use super::errors::{FileError, LoadError};
use super::file_check::inspect;
use super::platform::is_library_file;
use chimera_plugin_api::abi::Seam;
use object::read::ReadCache;
use std::path::{Path, PathBuf};

/// A directory on the search path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDir {
    /// The directory, as configured (not canonicalised).
    pub path: PathBuf,
    /// `None`: every pack file in it is indexed. `Some(names)`: only files
    /// with these names (the executable's directory holds the bundled packs,
    /// and nothing else there is found by name).
    pub files: Option<Vec<String>>,
}

impl SearchDir {
    /// Every pack file in `path`.
    pub fn all(path: impl Into<PathBuf>) -> Self {
        SearchDir {
            path: path.into(),
            files: None,
        }
    }

    /// Only the files of `path` named in `files`.
    pub fn only(path: impl Into<PathBuf>, files: Vec<String>) -> Self {
        SearchDir {
            path: path.into(),
            files: Some(files),
        }
    }

    /// The library files of the directory that it admits, sorted (whatever
    /// they turn out to be: nothing is opened).
    pub(crate) fn library_files(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.path)?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| is_library_file(path) && self.admits(path))
            .collect();
        files.sort();
        Ok(files)
    }

    fn admits(&self, file: &Path) -> bool {
        match &self.files {
            None => true,
            Some(names) => file
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| names.iter().any(|allowed| allowed == n)),
        }
    }
}

impl From<PathBuf> for SearchDir {
    fn from(path: PathBuf) -> Self {
        SearchDir::all(path)
    }
}

impl From<&Path> for SearchDir {
    fn from(path: &Path) -> Self {
        SearchDir::all(path)
    }
}

/// A pack found on the search path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredPack {
    /// Entry-point name.
    pub name: String,
    /// Version from the manifest.
    pub version: String,
    /// The file that provides it.
    pub path: PathBuf,
    /// Its one-line description, from the manifest's details (`None`: the
    /// library has none, being built by hand or by an SDK that predates
    /// them). Text from the file: show it escaped.
    pub description: Option<String>,
    /// The seams it registers on, from the manifest's details (`None`: as
    /// for `description`).
    pub seams: Option<Vec<Seam>>,
}

/// The index of a search path.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Every entry point found, with the file providing it, in search-path
    /// order. A name may appear more than once: that is a conflict, which
    /// [`Discovery::find`] refuses.
    pub packs: Vec<DiscoveredPack>,
    /// Library files that are not usable packs, and why.
    pub problems: Vec<(PathBuf, FileError)>,
}

impl Discovery {
    /// The one file providing `name`: `Ok(None)` when none does, an error
    /// naming both files when two do. Never "first wins": an impostor earlier
    /// on the path must not shadow the real pack, and a later one must not
    /// be silently ignored either.
    pub fn find(&self, name: &str) -> Result<Option<&DiscoveredPack>, LoadError> {
        let mut claimants = self.packs.iter().filter(|pack| pack.name == name);
        let first = claimants.next();
        match (first, claimants.next()) {
            (Some(first), Some(second)) => Err(LoadError::ClaimedTwice {
                name: name.to_owned(),
                first: first.path.clone(),
                second: second.path.clone(),
            }),
            (first, _) => Ok(first),
        }
    }

    /// The names provided by more than one file.
    #[must_use]
    pub fn conflicts(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for (i, pack) in self.packs.iter().enumerate() {
            if self.packs[..i].iter().any(|p| p.name == pack.name) && !names.contains(&&*pack.name)
            {
                names.push(&pack.name);
            }
        }
        names
    }
}

/// Indexes every library file in `search_path`, reading only symbol tables:
/// no pack code runs. Missing directories are skipped; a directory listed
/// twice (by any spelling) is indexed once.
pub fn discover<D: Into<SearchDir> + Clone>(search_path: &[D]) -> Discovery {
    let mut discovery = Discovery::default();
    let mut seen: Vec<PathBuf> = Vec::new();
    for dir in search_path.iter().cloned().map(Into::into) {
        let canonical = dir.path.canonicalize().unwrap_or_else(|_| dir.path.clone());
        if seen.contains(&canonical) {
            continue;
        }
        seen.push(canonical);
        let Ok(files) = dir.library_files() else {
            continue;
        };
        for path in files.into_iter().filter(|path| path.is_file()) {
            match read_manifest(&path) {
                Ok(packs) => discovery.packs.extend(packs),
                Err(problem) => discovery.problems.push((path, problem)),
            }
        }
    }
    discovery
}

/// The packs the manifests of the library at `path` name, with their
/// details where the library has them.
fn read_manifest(path: &Path) -> Result<Vec<DiscoveredPack>, FileError> {
    let file = std::fs::File::open(path).map_err(FileError::Io)?;
    let len = file.metadata().map_err(FileError::Io)?.len();
    let cache = ReadCache::new(file);
    let inspection = inspect(&cache, len)?;
    Ok(inspection
        .manifests
        .iter()
        .flat_map(|manifest| {
            manifest.packs.iter().map(|(name, version)| {
                let details = manifest.details_of(name);
                DiscoveredPack {
                    name: name.clone(),
                    version: version.clone(),
                    path: path.to_owned(),
                    description: details.map(|d| d.description.clone()),
                    seams: details.map(|d| d.seams.clone()),
                }
            })
        })
        .collect())
}
