//! Indexing a search path by entry-point name, from manifests alone.

use super::errors::FileError;
use super::file_check::inspect;
use super::platform::is_library_file;
use object::read::ReadCache;
use std::path::{Path, PathBuf};

/// A pack found on the search path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredPack {
    /// Entry-point name.
    pub name: String,
    /// Version from the manifest.
    pub version: String,
    /// The file that provides it.
    pub path: PathBuf,
}

/// The index of a search path.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Packs by name; the first directory that provides a name wins.
    pub packs: Vec<DiscoveredPack>,
    /// Library files that are not usable packs, and why.
    pub problems: Vec<(PathBuf, FileError)>,
}

impl Discovery {
    /// The file providing `name`, if any.
    pub fn find(&self, name: &str) -> Option<&DiscoveredPack> {
        self.packs.iter().find(|pack| pack.name == name)
    }
}

/// Indexes every library file in `search_path`, reading only symbol tables:
/// no pack code runs. Missing directories are skipped.
pub fn discover(search_path: &[PathBuf]) -> Discovery {
    let mut discovery = Discovery::default();
    for dir in search_path {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| is_library_file(path) && path.is_file())
            .collect();
        files.sort();
        for path in files {
            match read_manifest(&path) {
                Ok(manifest) => {
                    for (name, version) in manifest {
                        if discovery.find(&name).is_none() {
                            discovery.packs.push(DiscoveredPack {
                                name,
                                version,
                                path: path.clone(),
                            });
                        }
                    }
                }
                Err(problem) => discovery.problems.push((path, problem)),
            }
        }
    }
    discovery
}

fn read_manifest(path: &Path) -> Result<Vec<(String, String)>, FileError> {
    let file = std::fs::File::open(path).map_err(FileError::Io)?;
    let len = file.metadata().map_err(FileError::Io)?.len();
    let cache = ReadCache::new(file);
    inspect(&cache, len).map(|inspection| inspection.packs().cloned().collect())
}
