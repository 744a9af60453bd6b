//! Checking a pack file's content against the lock that governs it, before
//! anything of it is mapped.

use super::lock::{same_entry_points, short_hash, LockEntry, LockError, LockFile};
use super::policy::TrustedDir;
use super::{TrustSettings, LOCK_FILE_NAME};
use std::fmt;
use std::path::{Path, PathBuf};

/// The lock that governs a plugins directory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockLocation {
    /// The `chimera.lock` in this plugins directory.
    Directory(PathBuf),
    /// The lock given with `--lock FILE`.
    External(PathBuf),
}

impl LockLocation {
    /// The command that rewrites this lock.
    #[must_use]
    pub fn relock_command(&self) -> String {
        match self {
            LockLocation::Directory(dir) => {
                format!("chimera packs lock --plugins-dir {}", dir.display())
            }
            LockLocation::External(file) => format!("chimera packs lock --lock {}", file.display()),
        }
    }
}

/// `chimera.lock` for a directory's own lock (the pack's path, which the
/// message starts with, says which directory), the path of one given with
/// `--lock`.
impl fmt::Display for LockLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockLocation::Directory(_) => f.write_str(LOCK_FILE_NAME),
            LockLocation::External(file) => write!(f, "{}", file.display()),
        }
    }
}

/// Why the lock does not let a pack file load.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PinError {
    /// The file's content is not what was locked.
    #[error("its SHA-256 ({}…) is not the one {lock} pins ({}…): the file changed after it was locked; re-run `{}` if the change is yours", short_hash(found), short_hash(pinned), lock.relock_command())]
    Changed {
        /// The lock that refused it.
        lock: LockLocation,
        /// The SHA-256 the lock pins, hex.
        pinned: String,
        /// The SHA-256 of the bytes read, hex.
        found: String,
    },
    /// The lock does not name this file.
    #[error("{lock} does not pin {file}; run `{}` to trust it", lock.relock_command())]
    NotPinned {
        /// The lock that refused it.
        lock: LockLocation,
        /// The name the lock would pin it under (bare, or absolute).
        file: String,
    },
    /// `--locked`, and the directory has no lock file.
    #[error("--locked, but {} has no {LOCK_FILE_NAME}; run `chimera packs lock --plugins-dir {}` first (or keep the lock elsewhere with --lock FILE)", dir.display(), dir.display())]
    NoLock {
        /// The plugins directory.
        dir: PathBuf,
    },
    /// The content is the pinned one, but its manifest now lists other
    /// entry points than the lock (a lock edited by hand).
    #[error("it provides [{}] but {lock} pins [{}]; re-run `{}` if this change is yours", found.join(", "), pinned.join(", "), lock.relock_command())]
    EntryPoints {
        /// The lock that refused it.
        lock: LockLocation,
        /// What the manifest lists.
        found: Vec<String>,
        /// What the lock pins.
        pinned: Vec<String>,
    },
    /// The lock itself cannot be used.
    #[error(transparent)]
    Unreadable(#[from] LockError),
}

/// A file's entry in the lock that governs it.
#[derive(Debug, Clone)]
pub(crate) struct Pin {
    entry: LockEntry,
    lock: LockLocation,
}

impl Pin {
    /// Checks the entry points the manifest lists against the pinned ones.
    pub(crate) fn check_entry_points(&self, found: Vec<String>) -> Result<(), PinError> {
        if same_entry_points(&found, &self.entry.entry_points) {
            return Ok(());
        }
        Err(PinError::EntryPoints {
            lock: self.lock.clone(),
            found,
            pinned: self.entry.entry_points.clone(),
        })
    }
}

/// Checks `sha256` (hex) of file `name` in `dir` against the lock that
/// governs it: the `--lock FILE` when one is set, else the directory's own
/// `chimera.lock`. `Ok(None)`: no lock, and none is required.
pub(crate) fn check_pin(
    dir: &TrustedDir,
    name: &Path,
    sha256: &str,
    trust: &TrustSettings,
) -> Result<Option<Pin>, PinError> {
    let (lock, location, key) = match &trust.lock_file {
        Some(external) => (
            Some(LockFile::read_external(external)?),
            LockLocation::External(external.clone()),
            dir.canonical().join(name),
        ),
        None => (
            LockFile::read_in(dir)?,
            LockLocation::Directory(dir.path().to_owned()),
            name.to_owned(),
        ),
    };
    let key = key.to_string_lossy().into_owned();
    let Some(lock) = lock else {
        if trust.locked {
            return Err(PinError::NoLock {
                dir: dir.path().to_owned(),
            });
        }
        return Ok(None);
    };
    match lock.entry(&key) {
        Some(entry) if entry.sha256 == sha256 => Ok(Some(Pin {
            entry: entry.clone(),
            lock: location,
        })),
        Some(entry) => Err(PinError::Changed {
            lock: location,
            pinned: entry.sha256.clone(),
            found: sha256.to_owned(),
        }),
        None => Err(PinError::NotPinned {
            lock: location,
            file: key,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PINNED: &str = "5f2c0d9b8a7e6f5041322314f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e";
    const FOUND: &str = "9a0e1d2c3b4a59687766554433221100ffeeddccbbaa99887766554433221100";

    #[test]
    fn each_refusal_names_the_lock_and_the_command_that_rewrites_it() {
        let own = LockLocation::Directory(PathBuf::from("plugins"));
        let kept = LockLocation::External(PathBuf::from("/etc/chimera/pins.lock"));
        for (error, expected) in [
            (
                PinError::Changed {
                    lock: own.clone(),
                    pinned: PINNED.to_owned(),
                    found: FOUND.to_owned(),
                },
                "its SHA-256 (9a0e1d2c3b4a…) is not the one chimera.lock pins (5f2c0d9b8a7e…): the file changed after it was locked; re-run `chimera packs lock --plugins-dir plugins` if the change is yours",
            ),
            (
                PinError::NotPinned {
                    lock: kept.clone(),
                    file: "/srv/plugins/libx.so".to_owned(),
                },
                "/etc/chimera/pins.lock does not pin /srv/plugins/libx.so; run `chimera packs lock --lock /etc/chimera/pins.lock` to trust it",
            ),
            (
                PinError::NoLock {
                    dir: PathBuf::from("plugins"),
                },
                "--locked, but plugins has no chimera.lock; run `chimera packs lock --plugins-dir plugins` first (or keep the lock elsewhere with --lock FILE)",
            ),
            (
                PinError::EntryPoints {
                    lock: own,
                    found: vec!["a".to_owned(), "b".to_owned()],
                    pinned: vec!["a".to_owned()],
                },
                "it provides [a, b] but chimera.lock pins [a]; re-run `chimera packs lock --plugins-dir plugins` if this change is yours",
            ),
        ] {
            assert_eq!(error.to_string(), expected);
        }
    }

    #[test]
    fn the_entry_points_of_a_pin_match_in_any_order() {
        let pin = Pin {
            entry: LockEntry {
                file: "libx.so".to_owned(),
                sha256: PINNED.to_owned(),
                entry_points: vec!["a".to_owned(), "b".to_owned()],
            },
            lock: LockLocation::Directory(PathBuf::from("plugins")),
        };
        assert!(pin
            .check_entry_points(vec!["b".to_owned(), "a".to_owned()])
            .is_ok());
        assert!(matches!(
            pin.check_entry_points(vec!["a".to_owned()]),
            Err(PinError::EntryPoints { .. })
        ));
    }
}
