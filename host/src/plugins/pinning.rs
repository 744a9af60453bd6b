//! Pinning: `chimera packs lock` writes a lock from the pack files a
//! directory (or the search path) holds: each file read through the
//! directory's trust handle, checked as a pack file, hashed, its entry
//! points listed. No pack code runs. It stands above the trust policy
//! and the lock format (which it uses) and the file check (which it
//! runs).

use super::errors::FileError;
use super::file_check::{inspect, read_bounded, sha256_hex};
use super::trust::{
    compare, DirectoryRole, FollowSymlinks, LockEntry, LockError, LockFile, LockMismatch,
    LockScope, Subject, TrustedDir,
};
use super::SearchDir;
use std::fmt;
use std::path::{Path, PathBuf};

/// A library file `chimera packs lock` left out of the lock.
#[derive(Debug)]
pub struct Skipped {
    /// The library file, in its plugins directory.
    pub path: PathBuf,
    /// Why it was not pinned (the trust policy, or not a pack).
    pub reason: FileError,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: skipped, {}", self.path.display(), self.reason)
    }
}

/// The pack files of `dir`, pinned: file name, SHA-256 of the content and
/// the entry points its manifest lists. No pack code runs. Files that are
/// not packs, or that fail the file policy, are left out (and returned).
///
/// # Errors
///
/// `LockError::Policy` when `dir` fails the directory policy; `LockError::Read`
/// when it cannot be listed. A file that cannot be pinned is skipped, not an
/// error.
pub fn pin_directory(dir: &Path) -> Result<(LockFile, Vec<Skipped>), LockError> {
    pin(&[SearchDir::all(dir)], LockScope::Directory)
}

/// Every pack file of `dirs` (as each admits), pinned by absolute path for a
/// lock kept outside them (`chimera packs lock --lock FILE`). Directories
/// that do not exist are skipped.
///
/// # Errors
///
/// `LockError::Policy` when one of the directories fails the directory policy;
/// `LockError::Read` when one cannot be listed.
pub fn pin_external(dirs: &[SearchDir]) -> Result<(LockFile, Vec<Skipped>), LockError> {
    let existing: Vec<SearchDir> = dirs.iter().filter(|d| d.path.is_dir()).cloned().collect();
    pin(&existing, LockScope::External)
}

fn pin(dirs: &[SearchDir], scope: LockScope) -> Result<(LockFile, Vec<Skipped>), LockError> {
    let mut lock = LockFile::default();
    let mut skipped = Vec::new();
    for search_dir in dirs {
        let trusted = TrustedDir::open(&search_dir.path, DirectoryRole::Plugins, false)?;
        let files = search_dir
            .library_files()
            .map_err(|source| LockError::Read {
                path: search_dir.path.clone(),
                source,
            })?;
        for path in files {
            let name = PathBuf::from(path.file_name().unwrap_or_default());
            let file = match scope {
                LockScope::Directory => name.to_string_lossy().into_owned(),
                LockScope::External => trusted
                    .canonical()
                    .join(&name)
                    .to_string_lossy()
                    .into_owned(),
            };
            if lock.entry(&file).is_some() {
                continue;
            }
            match pin_file(&trusted, &name) {
                Ok((sha256, entry_points)) => lock.entries.push(LockEntry {
                    file,
                    sha256,
                    entry_points,
                }),
                Err(reason) => skipped.push(Skipped { path, reason }),
            }
        }
    }
    Ok((lock, skipped))
}

/// The hash and entry points of pack file `name`, read through the
/// directory handle.
fn pin_file(dir: &TrustedDir, name: &Path) -> Result<(String, Vec<String>), FileError> {
    let file = dir
        .open_file(name, Subject::PackFile, FollowSymlinks::Yes)
        .map_err(FileError::Untrusted)?
        .ok_or(FileError::NotFound)?;
    let bytes = read_bounded(file.file)?;
    let inspection = inspect(&bytes[..], bytes.len() as u64)?;
    let entry_points = inspection.packs().map(|(name, _)| name.clone()).collect();
    Ok((sha256_hex(&bytes), entry_points))
}

/// What is wrong in `dir` against its lock file.
///
/// # Errors
///
/// [`LockFile::read`]'s errors for the lock file, then [`pin_directory`]'s for
/// `dir`. A directory without a lock is a `LockMismatch::NoLock`, not an error.
pub fn verify_directory(dir: &Path) -> Result<Vec<LockMismatch>, LockError> {
    let Some(lock) = LockFile::read(dir)? else {
        return Ok(vec![LockMismatch::NoLock {
            dir: dir.to_owned(),
        }]);
    };
    let (current, _) = pin_directory(dir)?;
    Ok(compare(&lock, &current, |file| dir.join(file)))
}

/// What is wrong in `dirs` against the lock kept at `lock_path`.
///
/// # Errors
///
/// [`LockFile::read_external`]'s errors for the lock (which must exist), then
/// [`pin_external`]'s for `dirs`.
pub fn verify_external(
    lock_path: &Path,
    dirs: &[SearchDir],
) -> Result<Vec<LockMismatch>, LockError> {
    let lock = LockFile::read_external(lock_path)?;
    let (current, _) = pin_external(dirs)?;
    Ok(compare(&lock, &current, |file| PathBuf::from(file)))
}
