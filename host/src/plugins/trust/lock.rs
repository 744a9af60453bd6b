//! `chimera.lock`: the pack files trusted in a plugins directory.
//!
//! ```text
//! # chimera.lock: pack files trusted in this directory.
//! # Written by `chimera packs lock`; checked before any pack is loaded.
//! libplan_gate.so  sha256:5f2c…(64 hex)  plan-gate
//! libbundle.so     sha256:9a0e…          redactor,delegate-spawner
//! ```
//!
//! One line per file: the file name, its SHA-256, and the entry points it
//! provides (comma-separated). `#` starts a comment; blank lines are ignored.
//!
//! A lock kept outside the plugins directories (`--lock FILE`) names each
//! file by its absolute path instead, so one lock covers every directory.
//!
//! A lock file is read under the same policy as a pack: through the handle
//! of a directory that passed the directory policy, a regular file (no
//! symlink, no FIFO), not writable by group or others, owned by you or root.

use super::policy::TrustedDir;
use crate::plugins::SearchDir;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The lock file's name, in each plugins directory.
pub const LOCK_FILE_NAME: &str = "chimera.lock";

/// One pinned pack file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    /// File name (no directory).
    pub file: String,
    /// SHA-256 of its content, lower-case hex.
    pub sha256: String,
    /// Entry-point names it provides.
    pub entry_points: Vec<String>,
}

/// A parsed lock file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LockFile {
    /// Pinned files, in file order.
    pub entries: Vec<LockEntry>,
}

/// A lock file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    /// A line does not parse.
    #[error("chimera.lock line {line}: {problem}")]
    Syntax {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// The file could not be read.
    #[error("cannot read {path}: {problem}")]
    Read {
        /// The lock file.
        path: String,
        /// Why.
        problem: String,
    },
}

fn is_hex64(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The largest lock file read.
const MAX_LOCK_BYTES: u64 = 1 << 20;

/// How a lock file names the files it pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockScope {
    /// A `chimera.lock` in a plugins directory: bare file names.
    Directory,
    /// A lock kept elsewhere (`--lock FILE`): absolute paths.
    External,
}

impl LockFile {
    /// Parses the text of a `chimera.lock` in a plugins directory. Every
    /// problem names its line.
    pub fn parse(text: &str) -> Result<LockFile, LockError> {
        LockFile::parse_scoped(text, LockScope::Directory)
    }

    /// Parses lock-file text whose entries are named as `scope` says.
    pub fn parse_scoped(text: &str, scope: LockScope) -> Result<LockFile, LockError> {
        let mut entries: Vec<LockEntry> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw.split('#').next().unwrap_or_default().trim();
            if content.is_empty() {
                continue;
            }
            let syntax = |problem: &str| LockError::Syntax {
                line,
                problem: problem.to_owned(),
            };
            let fields: Vec<&str> = content.split_whitespace().collect();
            let [file, hash, names] = fields[..] else {
                return Err(syntax(
                    "expected `<file> sha256:<hex> <entry-point>[,<entry-point>…]`",
                ));
            };
            match scope {
                LockScope::Directory
                    if file.contains('/') || file.contains('\\') || file == "." || file == ".." =>
                {
                    return Err(syntax(
                        "the file must be a bare file name in this directory",
                    ));
                }
                LockScope::External if !Path::new(file).is_absolute() => {
                    return Err(syntax(
                        "a lock kept outside the plugins directories names each pack file by its absolute path",
                    ));
                }
                _ => {}
            }
            let sha256 = hash
                .strip_prefix("sha256:")
                .filter(|h| is_hex64(h))
                .ok_or_else(|| syntax("the hash must be `sha256:` and 64 lower-case hex digits"))?;
            let entry_points: Vec<String> = names.split(',').map(str::to_owned).collect();
            if entry_points.iter().any(String::is_empty) {
                return Err(syntax("an entry-point name is empty"));
            }
            if entries.iter().any(|e| e.file == file) {
                return Err(syntax(&format!("{file} is pinned twice")));
            }
            entries.push(LockEntry {
                file: file.to_owned(),
                sha256: sha256.to_owned(),
                entry_points,
            });
        }
        Ok(LockFile { entries })
    }

    /// Reads `dir/chimera.lock`; `Ok(None)` when there is none.
    pub fn read(dir: &Path) -> Result<Option<LockFile>, LockError> {
        let trusted = TrustedDir::open(dir, "plugins directory", false).map_err(|problem| {
            LockError::Read {
                path: dir.join(LOCK_FILE_NAME).display().to_string(),
                problem,
            }
        })?;
        LockFile::read_in(&trusted)
    }

    /// Reads the `chimera.lock` of an opened plugins directory, through its
    /// handle; `Ok(None)` when there is none.
    pub(crate) fn read_in(dir: &TrustedDir) -> Result<Option<LockFile>, LockError> {
        let path = dir.path().join(LOCK_FILE_NAME);
        read_checked(dir, Path::new(LOCK_FILE_NAME), &path, LockScope::Directory)
    }

    /// Reads a lock kept outside the plugins directories (`--lock FILE`):
    /// its directory passes the directory policy, the file the lock-file
    /// policy, and it must exist.
    pub fn read_external(path: &Path) -> Result<LockFile, LockError> {
        let error = |problem: String| LockError::Read {
            path: path.display().to_string(),
            problem,
        };
        let name = path
            .file_name()
            .ok_or_else(|| error("it names no file".to_owned()))?;
        let dir = TrustedDir::open(
            path.parent().unwrap_or(Path::new(".")),
            "directory of the lock file",
            false,
        )
        .map_err(error)?;
        read_checked(&dir, Path::new(name), path, LockScope::External)?.ok_or_else(|| {
            error("no such file (write it with `chimera packs lock --lock FILE`)".to_owned())
        })
    }

    /// The pin for `file` (a bare name, or an absolute path in an external lock).
    pub fn entry(&self, file: &str) -> Option<&LockEntry> {
        self.entries.iter().find(|e| e.file == file)
    }
}

/// Opens `name` through `dir` under the lock-file policy and parses it.
fn read_checked(
    dir: &TrustedDir,
    name: &Path,
    shown: &Path,
    scope: LockScope,
) -> Result<Option<LockFile>, LockError> {
    let error = |problem: String| LockError::Read {
        path: shown.display().to_string(),
        problem,
    };
    let Some(file) = dir.open_file_nofollow(name, "lock file").map_err(error)? else {
        return Ok(None);
    };
    let mut text = String::new();
    file.file
        .take(MAX_LOCK_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| error(e.to_string()))?;
    if text.len() as u64 > MAX_LOCK_BYTES {
        return Err(error(format!(
            "it is larger than {MAX_LOCK_BYTES} bytes; a lock file is a few lines per pack"
        )));
    }
    LockFile::parse_scoped(&text, scope).map(Some)
}

impl fmt::Display for LockFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# chimera.lock: trusted pack files.")?;
        writeln!(
            f,
            "# Written by `chimera packs lock`; checked before any pack is loaded."
        )?;
        let width = self.entries.iter().map(|e| e.file.len()).max().unwrap_or(0);
        for entry in &self.entries {
            writeln!(
                f,
                "{:<width$}  sha256:{}  {}",
                entry.file,
                entry.sha256,
                entry.entry_points.join(",")
            )?;
        }
        Ok(())
    }
}

/// The pack files of `dir`, pinned: file name, SHA-256 of the content and
/// the entry points its manifest lists. No pack code runs. Files that are
/// not packs, or that fail the directory policy, are left out (and returned
/// as problems).
pub fn pin_directory(dir: &Path) -> Result<(LockFile, Vec<String>), LockError> {
    pin(&[SearchDir::all(dir)], LockScope::Directory)
}

/// Every pack file of `dirs` (as each admits), pinned by absolute path for a
/// lock kept outside them (`chimera packs lock --lock FILE`). Directories
/// that do not exist are skipped.
pub fn pin_external(dirs: &[SearchDir]) -> Result<(LockFile, Vec<String>), LockError> {
    let existing: Vec<SearchDir> = dirs.iter().filter(|d| d.path.is_dir()).cloned().collect();
    pin(&existing, LockScope::External)
}

fn pin(dirs: &[SearchDir], scope: LockScope) -> Result<(LockFile, Vec<String>), LockError> {
    let mut lock = LockFile::default();
    let mut skipped = Vec::new();
    for search_dir in dirs {
        let dir = &search_dir.path;
        let read_error = |problem: String| LockError::Read {
            path: dir.display().to_string(),
            problem,
        };
        let trusted = TrustedDir::open(dir, "plugins directory", false).map_err(read_error)?;
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| read_error(e.to_string()))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                crate::plugins::platform::is_library_file(path) && search_dir.admits(path)
            })
            .collect();
        files.sort();
        for path in files {
            let name = path.file_name().map(PathBuf::from).unwrap_or_default();
            let bytes = match read_pack(&trusted, &name) {
                Ok(bytes) => bytes,
                Err(problem) => {
                    skipped.push(format!("{}: skipped, {problem}", path.display()));
                    continue;
                }
            };
            let file = match scope {
                LockScope::Directory => name.to_string_lossy().into_owned(),
                LockScope::External => {
                    let canonical = trusted_canonical(dir, &name).map_err(read_error)?;
                    if canonical.to_string_lossy().contains(char::is_whitespace) {
                        skipped.push(format!(
                            "{}: skipped, a path with whitespace cannot be pinned in a lock file",
                            path.display()
                        ));
                        continue;
                    }
                    canonical.to_string_lossy().into_owned()
                }
            };
            if lock.entry(&file).is_some() {
                continue;
            }
            match crate::plugins::file_check::inspect(&bytes[..], bytes.len() as u64) {
                Ok(inspection) => lock.entries.push(LockEntry {
                    file,
                    sha256: sha256_hex(&bytes),
                    entry_points: inspection.packs().map(|(n, _)| n.clone()).collect(),
                }),
                Err(problem) => skipped.push(format!("{}: skipped, {problem}", path.display())),
            }
        }
    }
    Ok((lock, skipped))
}

/// A pack file's bytes, read through the directory handle.
fn read_pack(dir: &TrustedDir, name: &Path) -> Result<Vec<u8>, String> {
    let file = dir
        .open_file(name, "pack file")?
        .ok_or_else(|| "it disappeared".to_owned())?;
    let mut bytes = Vec::new();
    file.file
        .take(crate::plugins::MAX_PACK_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// The absolute path an external lock pins `name` of `dir` under.
pub(crate) fn trusted_canonical(dir: &Path, name: &Path) -> Result<PathBuf, String> {
    dir.canonicalize()
        .map(|canonical| canonical.join(name))
        .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))
}

/// What is wrong in `dir` against its lock file, one line per problem.
pub fn verify_directory(dir: &Path) -> Result<Vec<String>, LockError> {
    let Some(lock) = LockFile::read(dir)? else {
        return Ok(vec![format!(
            "{}: no {LOCK_FILE_NAME}; run `chimera packs lock --plugins-dir {}`",
            dir.display(),
            dir.display()
        )]);
    };
    let (current, _) = pin_directory(dir)?;
    Ok(compare(&lock, &current, |file| dir.join(file)))
}

/// What is wrong in `dirs` against the lock kept at `lock_path`.
pub fn verify_external(lock_path: &Path, dirs: &[SearchDir]) -> Result<Vec<String>, LockError> {
    let lock = LockFile::read_external(lock_path)?;
    let (current, _) = pin_external(dirs)?;
    Ok(compare(&lock, &current, |file| PathBuf::from(file)))
}

fn compare(lock: &LockFile, current: &LockFile, shown: impl Fn(&str) -> PathBuf) -> Vec<String> {
    let mut problems = Vec::new();
    for pin in &lock.entries {
        let path = shown(&pin.file);
        match current.entry(&pin.file) {
            None => problems.push(format!(
                "{}: pinned but missing (or no longer a pack)",
                path.display()
            )),
            Some(now) if now.sha256 != pin.sha256 => problems.push(format!(
                "{}: content changed since it was locked (sha256 {}… is not the pinned {}…)",
                path.display(),
                &now.sha256[..12],
                &pin.sha256[..12]
            )),
            Some(now) if now.entry_points != pin.entry_points => problems.push(format!(
                "{}: provides [{}] but the lock pins [{}]",
                path.display(),
                now.entry_points.join(", "),
                pin.entry_points.join(", ")
            )),
            Some(_) => {}
        }
    }
    for entry in &current.entries {
        if lock.entry(&entry.file).is_none() {
            problems.push(format!(
                "{}: not pinned in the lock file",
                shown(&entry.file).display()
            ));
        }
    }
    problems
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "5f2c0d9b8a7e6f5041322314f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e";

    #[test]
    fn a_lock_file_round_trips() {
        let lock = LockFile {
            entries: vec![
                LockEntry {
                    file: "libplan_gate.so".into(),
                    sha256: HASH.into(),
                    entry_points: vec!["plan-gate".into()],
                },
                LockEntry {
                    file: "libbundle.so".into(),
                    sha256: HASH.into(),
                    entry_points: vec!["redactor".into(), "delegate-spawner".into()],
                },
            ],
        };
        assert_eq!(LockFile::parse(&lock.to_string()).unwrap(), lock);
    }

    #[test]
    fn every_problem_names_its_line() {
        for (text, fragment) in [
            ("libx.so sha256:abc x", "line 1: the hash must be"),
            ("\n# comment\nlibx.so", "line 3: expected"),
            (&format!("../libx.so sha256:{HASH} x"), "bare file name"),
            (
                &format!("libx.so sha256:{HASH} a,,b"),
                "entry-point name is empty",
            ),
            (
                &format!("libx.so sha256:{HASH} a\nlibx.so sha256:{HASH} b"),
                "line 2: libx.so is pinned twice",
            ),
            (
                &format!("libx.so sha256:{} a", HASH.to_uppercase()),
                "lower-case hex",
            ),
        ] {
            let error = LockFile::parse(text).unwrap_err().to_string();
            assert!(error.contains(fragment), "{error:?} lacks {fragment:?}");
        }
    }
}
