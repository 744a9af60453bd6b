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

use std::fmt;
use std::path::Path;

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

impl LockFile {
    /// Parses lock-file text. Every problem names its line.
    pub fn parse(text: &str) -> Result<LockFile, LockError> {
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
            if file.contains('/') || file.contains('\\') || file == "." || file == ".." {
                return Err(syntax(
                    "the file must be a bare file name in this directory",
                ));
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
        let path = dir.join(LOCK_FILE_NAME);
        match std::fs::read_to_string(&path) {
            Ok(text) => LockFile::parse(&text).map(Some),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(LockError::Read {
                path: path.display().to_string(),
                problem: error.to_string(),
            }),
        }
    }

    /// The pin for `file`.
    pub fn entry(&self, file: &str) -> Option<&LockEntry> {
        self.entries.iter().find(|e| e.file == file)
    }
}

impl fmt::Display for LockFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# chimera.lock: pack files trusted in this directory.")?;
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
/// not packs are left out (and returned as problems).
pub fn pin_directory(dir: &Path) -> Result<(LockFile, Vec<String>), LockError> {
    let read_error = |problem: String| LockError::Read {
        path: dir.display().to_string(),
        problem,
    };
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| read_error(e.to_string()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| crate::plugins::platform::is_library_file(path) && path.is_file())
        .collect();
    files.sort();
    let mut lock = LockFile::default();
    let mut skipped = Vec::new();
    for path in files {
        let bytes = std::fs::read(&path).map_err(|e| read_error(e.to_string()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match crate::plugins::file_check::inspect(&bytes[..], bytes.len() as u64) {
            Ok(inspection) => lock.entries.push(LockEntry {
                file: name,
                sha256: sha256_hex(&bytes),
                entry_points: inspection.packs().map(|(n, _)| n.clone()).collect(),
            }),
            Err(problem) => skipped.push(format!("{}: skipped, {problem}", path.display())),
        }
    }
    Ok((lock, skipped))
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
    let mut problems = Vec::new();
    for pin in &lock.entries {
        let path = dir.join(&pin.file);
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
                "{}: not pinned in {LOCK_FILE_NAME}",
                dir.join(&entry.file).display()
            ));
        }
    }
    Ok(problems)
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
