//! Indexing a search path by entry-point name, from manifests alone.
//!
//! Each directory has a precedence [`Level`]: a name is provided by the
//! best level that has it (the directories the user named, then the
//! per-user one, then the bundled packs), a copy at a better level shadows
//! the ones below it, and two files claiming a name within that one level
//! are refused. Order within a level never decides. One thing does within
//! a level: a file that provides a pack alone outranks a library that
//! provides it among others (the shipped packs' one-library build,
//! `libchimera_packs`, beside the fifteen files cargo builds next to it),
//! so a pack rebuilt on its own is the one loaded; two of a kind are still
//! refused.

use super::errors::{FileError, LoadError};
use super::file_check::inspect;
use super::platform::is_library_file;
use chimera_plugin_api::abi::Seam;
use object::read::ReadCache;
use std::path::{Path, PathBuf};

/// How strongly the packs of a search directory claim their names, best
/// first: a name is taken from the best level that provides it, and the
/// copies below are shadowed (said so, not refused).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// A directory the user named: `--plugins-dir`, `$CHIMERA_PLUGIN_PATH`,
    /// the configuration file's `plugins_dirs`.
    #[default]
    Chosen,
    /// The per-user data directory.
    User,
    /// The packs bundled beside the `chimera` executable.
    Bundled,
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Level::Chosen => "chosen",
            Level::User => "per-user",
            Level::Bundled => "bundled",
        })
    }
}

/// A directory on the search path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDir {
    /// The directory, as configured (not canonicalised).
    pub path: PathBuf,
    /// `None`: every pack file in it is indexed. `Some(names)`: only files
    /// with these names (the executable's directory holds the bundled packs,
    /// and nothing else there is found by name).
    pub files: Option<Vec<String>>,
    /// Its precedence.
    pub level: Level,
}

impl SearchDir {
    /// Every pack file in `path`, a directory the user chose
    /// ([`Level::Chosen`]).
    pub fn all(path: impl Into<PathBuf>) -> Self {
        SearchDir {
            path: path.into(),
            files: None,
            level: Level::Chosen,
        }
    }

    /// Only the files of `path` named in `files`, a directory the user
    /// chose ([`Level::Chosen`]).
    pub fn only(path: impl Into<PathBuf>, files: Vec<String>) -> Self {
        SearchDir {
            files: Some(files),
            ..SearchDir::all(path)
        }
    }

    /// Every pack file in the per-user data directory `path`
    /// ([`Level::User`]).
    pub fn user(path: impl Into<PathBuf>) -> Self {
        SearchDir::all(path).at(Level::User)
    }

    /// The bundled packs: only the files of `path` named in `files`
    /// ([`Level::Bundled`]).
    pub fn bundled(path: impl Into<PathBuf>, files: Vec<String>) -> Self {
        SearchDir::only(path, files).at(Level::Bundled)
    }

    /// The same directory at precedence `level`.
    #[must_use]
    pub fn at(self, level: Level) -> Self {
        SearchDir { level, ..self }
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
    /// The precedence of the directory it was found in.
    pub level: Level,
    /// The file provides other packs too (a library of several): within
    /// one level, a file that provides this pack alone outranks it.
    pub shared: bool,
}

impl DiscoveredPack {
    /// How strongly it claims its name, best first: its level, then alone
    /// before shared.
    fn rank(&self) -> (Level, bool) {
        (self.level, self.shared)
    }

    /// Whether `other` claims the name more strongly: from a better level,
    /// or from the same one providing it alone where this is a library of
    /// several.
    #[must_use]
    pub fn is_outranked_by(&self, other: &DiscoveredPack) -> bool {
        other.rank() < self.rank()
    }
}

/// The index of a search path.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Every entry point found, with the file providing it, in search-path
    /// order. A name may appear more than once: copies at lower levels are
    /// shadowed ([`Discovery::shadowed`]), two at the best level are a
    /// conflict, which [`Discovery::find`] refuses.
    pub packs: Vec<DiscoveredPack>,
    /// Library files that are not usable packs, and why.
    pub problems: Vec<(PathBuf, FileError)>,
}

impl Discovery {
    /// Every file claiming `name` at the best rank that has one.
    fn best_claimants<'d>(&'d self, name: &str) -> Vec<&'d DiscoveredPack> {
        let claimants = self.packs.iter().filter(|pack| pack.name == name);
        let Some(best) = claimants.clone().map(DiscoveredPack::rank).min() else {
            return Vec::new();
        };
        claimants.filter(|pack| pack.rank() == best).collect()
    }

    /// The one file providing `name` at the best level that has it:
    /// `Ok(None)` when none does, an error naming both files when two do
    /// at that level. Never "first wins" within a level: an impostor
    /// earlier on the path must not shadow the real pack, and a later one
    /// must not be silently ignored either. A copy at a lower level is
    /// shadowed ([`Discovery::shadowed`]).
    ///
    /// # Errors
    ///
    /// `LoadError::ClaimedTwice` when two files at the best level provide
    /// `name`.
    pub fn find(&self, name: &str) -> Result<Option<&DiscoveredPack>, LoadError> {
        match self.best_claimants(name).as_slice() {
            [] => Ok(None),
            [only] => Ok(Some(only)),
            [first, second, ..] => Err(LoadError::ClaimedTwice {
                name: name.to_owned(),
                first: first.path.clone(),
                second: second.path.clone(),
            }),
        }
    }

    /// The files claiming `name` below the one that provides it (a
    /// bundled copy under a chosen one; a library of several beside a file
    /// that provides it alone), in search-path order; empty when nothing
    /// is shadowed.
    #[must_use]
    pub fn shadowed(&self, name: &str) -> Vec<&DiscoveredPack> {
        let best = self.best_claimants(name);
        let Some(rank) = best.first().map(|pack| pack.rank()) else {
            return Vec::new();
        };
        self.packs
            .iter()
            .filter(|pack| pack.name == name && pack.rank() > rank)
            .collect()
    }

    /// The names that two files claim at the best level providing them:
    /// the ones [`Discovery::find`] refuses.
    #[must_use]
    pub fn conflicts(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for pack in &self.packs {
            if !names.contains(&pack.name.as_str()) && self.best_claimants(&pack.name).len() > 1 {
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
            match read_manifest(&path, dir.level) {
                Ok(packs) => discovery.packs.extend(packs),
                Err(problem) => discovery.problems.push((path, problem)),
            }
        }
    }
    discovery
}

/// The packs the manifests of the library at `path` (in a directory at
/// `level`) name, with their details where the library has them.
fn read_manifest(path: &Path, level: Level) -> Result<Vec<DiscoveredPack>, FileError> {
    let file = std::fs::File::open(path).map_err(FileError::Io)?;
    let len = file.metadata().map_err(FileError::Io)?.len();
    let cache = ReadCache::new(file);
    let inspection = inspect(&cache, len)?;
    let shared = inspection.packs().nth(1).is_some();
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
                    level,
                    shared,
                }
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(name: &str, path: &str, level: Level) -> DiscoveredPack {
        DiscoveredPack {
            name: name.to_owned(),
            version: "1.0.0".to_owned(),
            path: PathBuf::from(path),
            description: None,
            seams: None,
            level,
            shared: false,
        }
    }

    fn among_others(pack: DiscoveredPack) -> DiscoveredPack {
        DiscoveredPack {
            shared: true,
            ..pack
        }
    }

    fn index(packs: Vec<DiscoveredPack>) -> Discovery {
        Discovery {
            packs,
            problems: Vec::new(),
        }
    }

    fn path_of(found: Option<&DiscoveredPack>) -> Option<&Path> {
        found.map(|pack| pack.path.as_path())
    }

    #[test]
    fn the_best_level_provides_a_name_and_shadows_the_copies_below_it() {
        // Search-path order puts the bundled copy first: level, not order, decides.
        let discovery = index(vec![
            found("gate", "/bundled/libgate.so", Level::Bundled),
            found("gate", "/user/libgate.so", Level::User),
            found("gate", "/chosen/libgate.so", Level::Chosen),
            found("other", "/bundled/libother.so", Level::Bundled),
        ]);
        let gate = discovery.find("gate").unwrap();
        assert_eq!(path_of(gate), Some(Path::new("/chosen/libgate.so")));
        let shadowed: Vec<&Path> = discovery
            .shadowed("gate")
            .iter()
            .map(|pack| pack.path.as_path())
            .collect();
        assert_eq!(
            shadowed,
            [
                Path::new("/bundled/libgate.so"),
                Path::new("/user/libgate.so")
            ]
        );
        assert!(discovery.shadowed("other").is_empty());
        assert!(discovery.shadowed("missing").is_empty());
        assert!(discovery.find("missing").unwrap().is_none());
        assert!(discovery.conflicts().is_empty(), "shadowing is no conflict");
    }

    #[test]
    fn two_claimants_within_the_best_level_are_refused_naming_both_whatever_lies_below() {
        let discovery = index(vec![
            found("gate", "/one/libgate.so", Level::Chosen),
            found("gate", "/bundled/libgate.so", Level::Bundled),
            found("gate", "/two/libgate.so", Level::Chosen),
            // Two below a single better one: that one provides the name.
            found("other", "/user/a/libother.so", Level::User),
            found("other", "/user/b/libother.so", Level::User),
            found("other", "/chosen/libother.so", Level::Chosen),
        ]);
        match discovery.find("gate") {
            Err(LoadError::ClaimedTwice {
                name,
                first,
                second,
            }) => {
                assert_eq!(name, "gate");
                assert_eq!(
                    (first.as_path(), second.as_path()),
                    (Path::new("/one/libgate.so"), Path::new("/two/libgate.so"))
                );
            }
            other => panic!("refused naming both chosen files, got {other:?}"),
        }
        assert_eq!(discovery.conflicts(), ["gate"]);
        let other = discovery.find("other").unwrap();
        assert_eq!(path_of(other), Some(Path::new("/chosen/libother.so")));
        assert_eq!(discovery.shadowed("other").len(), 2);
    }

    #[test]
    fn within_a_level_a_file_of_one_pack_outranks_a_library_of_several_and_two_of_a_kind_conflict()
    {
        let discovery = index(vec![
            among_others(found("gate", "/dir/libpacks.so", Level::Chosen)),
            found("gate", "/dir/libgate.so", Level::Chosen),
            among_others(found("other", "/dir/libpacks.so", Level::Chosen)),
            among_others(found("other", "/dir/libmore.so", Level::Chosen)),
            // A library of several at a better level beats a lone file below.
            among_others(found("third", "/chosen/libpacks.so", Level::Chosen)),
            found("third", "/bundled/libthird.so", Level::Bundled),
        ]);
        let gate = discovery.find("gate").unwrap();
        assert_eq!(path_of(gate), Some(Path::new("/dir/libgate.so")));
        let shadowed: Vec<&Path> = discovery
            .shadowed("gate")
            .iter()
            .map(|pack| pack.path.as_path())
            .collect();
        assert_eq!(shadowed, [Path::new("/dir/libpacks.so")]);
        assert!(
            matches!(discovery.find("other"), Err(LoadError::ClaimedTwice { .. })),
            "two libraries of several claiming one name are refused"
        );
        assert_eq!(discovery.conflicts(), ["other"]);
        let third = discovery.find("third").unwrap();
        assert_eq!(path_of(third), Some(Path::new("/chosen/libpacks.so")));
    }

    #[test]
    fn the_public_constructors_keep_their_level_and_the_new_ones_set_theirs() {
        assert_eq!(SearchDir::all("/a").level, Level::Chosen);
        assert_eq!(SearchDir::only("/a", Vec::new()).level, Level::Chosen);
        assert_eq!(SearchDir::from(PathBuf::from("/a")).level, Level::Chosen);
        assert_eq!(SearchDir::user("/a").level, Level::User);
        let bundled = SearchDir::bundled("/a", vec!["libgate.so".to_owned()]);
        assert_eq!(
            (bundled.level, bundled.files.as_deref()),
            (Level::Bundled, Some(&["libgate.so".to_owned()][..]))
        );
        assert!(Level::Chosen < Level::User && Level::User < Level::Bundled);
    }
}
