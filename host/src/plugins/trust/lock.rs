//! `chimera.lock`: the pack files trusted in a plugins directory, in TOML.
//!
//! ```toml
//! # chimera.lock: trusted pack files. Written by `chimera packs lock`.
//!
//! [[pack]]
//! file = "libplan_gate.so"
//! sha256 = "5f2c…"   # 64 lower-case hex digits
//! entry_points = ["plan-gate"]
//!
//! [[pack]]
//! file = "libbundle.so"
//! sha256 = "9a0e…"
//! entry_points = ["redactor", "delegate-spawner"]
//! ```
//!
//! One `[[pack]]` table per pinned file: its name, the SHA-256 of its
//! content, and the entry points its manifest lists. Any other key is an
//! error naming it and its line; a file is pinned at most once.
//!
//! A lock kept outside the plugins directories (`--lock FILE`) names each
//! file by its absolute path instead, so one lock covers every directory.
//!
//! A lock file is read under the same policy as a pack: through the handle
//! of a directory that passed the directory policy, a regular file (no
//! symlink, no FIFO), not writable by group or others, owned by you or root,
//! and at most 1 MiB.

use super::policy::{DirectoryRole, FollowSymlinks, PolicyError, Subject, TrustedDir};
use crate::types::one_line;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::{self, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The lock file's name, in each plugins directory.
pub const LOCK_FILE_NAME: &str = "chimera.lock";

/// The largest lock file read.
const MAX_LOCK_BYTES: u64 = 1 << 20;

/// One pinned pack file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockEntry {
    /// The file: a bare name in a directory's `chimera.lock`, an absolute
    /// path in a lock kept elsewhere.
    pub file: String,
    /// SHA-256 of its content, 64 lower-case hex digits.
    pub sha256: String,
    /// The entry-point names its manifest lists, in manifest order.
    pub entry_points: Vec<String>,
}

/// A parsed lock file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LockFile {
    /// Pinned files, in file order.
    pub entries: Vec<LockEntry>,
}

/// A lock file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The file (or a directory being pinned) could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// What was being read.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The lock file, or its directory, fails the trust policy.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The text is not a lock file.
    #[error("{} line {line}: {problem}", file.display())]
    Syntax {
        /// The lock file (`chimera.lock` when parsed from text alone).
        file: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// What is wrong there.
        problem: SyntaxProblem,
    },
    /// Over the size limit.
    #[error("{} is larger than {limit} bytes; a lock file is a few lines per pack", path.display())]
    TooLarge {
        /// The lock file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
    /// `--lock FILE` names a file that does not exist.
    #[error("cannot read {}: no such file (write it with `chimera packs lock --lock FILE`)", path.display())]
    Missing {
        /// The path given.
        path: PathBuf,
    },
    /// `--lock FILE` names a directory (`/`, `..`), not a file.
    #[error("{} names no file", path.display())]
    NoFileName {
        /// The path given.
        path: PathBuf,
    },
}

impl LockError {
    /// A syntax error now names `path` instead of `chimera.lock`.
    fn in_file(self, path: &Path) -> Self {
        match self {
            LockError::Syntax { line, problem, .. } => LockError::Syntax {
                file: path.to_owned(),
                line,
                problem,
            },
            other => other,
        }
    }
}

/// What is wrong on a line of a lock file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SyntaxProblem {
    /// Not TOML, or not the lock file's tables and keys (the parser's
    /// words, which name an unknown key).
    #[error("{}", one_line(.0))]
    Toml(String),
    /// A lock in the one-line format chimera wrote before it used TOML.
    #[error("this is the old one-line lock format; re-run `chimera packs lock` to rewrite it")]
    OldFormat,
    /// A directory's `chimera.lock` names a file elsewhere.
    #[error("the file must be a bare file name in this directory, not {file:?}")]
    NotBareName {
        /// The name found.
        file: String,
    },
    /// A lock kept elsewhere names a relative path.
    #[error("a lock kept outside the plugins directories names each pack file by its absolute path, not {file:?}")]
    NotAbsolute {
        /// The path found.
        file: String,
    },
    /// The hash is not 64 lower-case hex digits.
    #[error("the sha256 must be 64 lower-case hex digits")]
    BadHash,
    /// `entry_points` holds an empty name.
    #[error("an entry-point name is empty")]
    EmptyEntryPoint,
    /// The same file has two tables.
    #[error("{} is pinned twice", file.escape_debug())]
    PinnedTwice {
        /// The file named by both tables.
        file: String,
    },
}

/// How a lock file names the files it pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockScope {
    /// A `chimera.lock` in a plugins directory: bare file names.
    Directory,
    /// A lock kept elsewhere (`--lock FILE`): absolute paths.
    External,
}

/// The file as written, before its values are checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLock {
    #[serde(default)]
    pack: Vec<RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    file: Spanned<String>,
    sha256: Spanned<String>,
    entry_points: Spanned<Vec<String>>,
}

/// The file as written by [`LockFile`]'s `Display`.
#[derive(Serialize)]
struct Rendered<'a> {
    pack: &'a [LockEntry],
}

fn is_hex64(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The 1-based line holding byte `span.start` of `text` (line 1 when the
/// parser names no place).
fn line_of(text: &str, span: Option<Range<usize>>) -> usize {
    let start = span.map_or(0, |span| span.start.min(text.len()));
    1 + text.as_bytes()[..start].split(|b| *b == b'\n').count() - 1
}

/// Where the first line of the old format (`<file> sha256:<hex> <names>`)
/// starts, if `text` has one.
fn old_format_line(text: &str) -> Option<usize> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let [_, hash, _] = fields[..] {
            if hash.starts_with("sha256:") {
                return Some(at);
            }
        }
        at += line.len();
    }
    None
}

impl RawEntry {
    /// The entry, once its values pass; else the problem and where it is.
    fn check(self, scope: LockScope) -> Result<LockEntry, (SyntaxProblem, Range<usize>)> {
        let file_span = self.file.span();
        let file = self.file.into_inner();
        let bare = !file.is_empty()
            && !file.contains('/')
            && !file.contains('\\')
            && file != "."
            && file != "..";
        match scope {
            LockScope::Directory if !bare => {
                return Err((SyntaxProblem::NotBareName { file }, file_span))
            }
            LockScope::External if !Path::new(&file).is_absolute() => {
                return Err((SyntaxProblem::NotAbsolute { file }, file_span))
            }
            _ => {}
        }
        if !is_hex64(self.sha256.get_ref()) {
            return Err((SyntaxProblem::BadHash, self.sha256.span()));
        }
        if self.entry_points.get_ref().iter().any(String::is_empty) {
            return Err((SyntaxProblem::EmptyEntryPoint, self.entry_points.span()));
        }
        Ok(LockEntry {
            file,
            sha256: self.sha256.into_inner(),
            entry_points: self.entry_points.into_inner(),
        })
    }
}

impl LockFile {
    /// Parses the text of a `chimera.lock` in a plugins directory. Every
    /// problem names its line.
    ///
    /// # Errors
    ///
    /// `LockError::Syntax`, naming the line, when `text` is not TOML of the
    /// lock file's tables and keys (or is the old one-line format), or an entry
    /// is wrong: a file that is not a bare name, a hash that is not 64 hex
    /// digits, an empty entry point, a file pinned twice.
    pub fn parse(text: &str) -> Result<LockFile, LockError> {
        LockFile::parse_scoped(text, LockScope::Directory)
    }

    /// Parses lock-file text whose entries are named as `scope` says.
    ///
    /// # Errors
    ///
    /// `LockError::Syntax`, naming the line, as for [`LockFile::parse`], but
    /// with each file named as `scope` says (a bare name, or an absolute path).
    pub fn parse_scoped(text: &str, scope: LockScope) -> Result<LockFile, LockError> {
        let syntax = |problem, span| LockError::Syntax {
            file: PathBuf::from(LOCK_FILE_NAME),
            line: line_of(text, span),
            problem,
        };
        let raw: RawLock = toml::from_str(text).map_err(|error| match old_format_line(text) {
            Some(at) => syntax(SyntaxProblem::OldFormat, Some(at..at)),
            None => syntax(
                SyntaxProblem::Toml(error.message().to_owned()),
                error.span(),
            ),
        })?;
        let mut entries: Vec<LockEntry> = Vec::new();
        for raw in raw.pack {
            let file_span = raw.file.span();
            let entry = raw
                .check(scope)
                .map_err(|(problem, span)| syntax(problem, Some(span)))?;
            if entries.iter().any(|e| e.file == entry.file) {
                let file = entry.file;
                return Err(syntax(SyntaxProblem::PinnedTwice { file }, Some(file_span)));
            }
            entries.push(entry);
        }
        Ok(LockFile { entries })
    }

    /// Reads `dir/chimera.lock`; `Ok(None)` when there is none.
    ///
    /// # Errors
    ///
    /// `LockError::Policy` when `dir` or the lock file fails the trust policy;
    /// `LockError::Read` or `LockError::TooLarge` when the file cannot be read
    /// or is over the size limit; `LockError::Syntax` when it does not parse.
    pub fn read(dir: &Path) -> Result<Option<LockFile>, LockError> {
        let trusted = TrustedDir::open(dir, DirectoryRole::Plugins, false)?;
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
    ///
    /// # Errors
    ///
    /// `LockError::NoFileName` when `path` names no file; `LockError::Policy`
    /// when its directory or the file fails the trust policy;
    /// `LockError::Missing` when it does not exist; `LockError::Read`,
    /// `LockError::TooLarge` or `LockError::Syntax` when it cannot be read, is
    /// over the size limit or does not parse.
    pub fn read_external(path: &Path) -> Result<LockFile, LockError> {
        let name = path.file_name().ok_or_else(|| LockError::NoFileName {
            path: path.to_owned(),
        })?;
        let dir = TrustedDir::open(
            path.parent().unwrap_or(Path::new(".")),
            DirectoryRole::LockFile,
            false,
        )?;
        read_checked(&dir, Path::new(name), path, LockScope::External)?.ok_or_else(|| {
            LockError::Missing {
                path: path.to_owned(),
            }
        })
    }

    /// The pin for `file` (a bare name, or an absolute path in an external lock).
    #[must_use]
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
    let Some(file) = dir.open_file(name, Subject::LockFile, FollowSymlinks::No)? else {
        return Ok(None);
    };
    let mut text = String::new();
    file.file
        .take(MAX_LOCK_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|source| LockError::Read {
            path: shown.to_owned(),
            source,
        })?;
    if text.len() as u64 > MAX_LOCK_BYTES {
        return Err(LockError::TooLarge {
            path: shown.to_owned(),
            limit: MAX_LOCK_BYTES,
        });
    }
    LockFile::parse_scoped(&text, scope)
        .map(Some)
        .map_err(|error| error.in_file(shown))
}

/// The lock file's text, as `chimera packs lock` writes it.
impl fmt::Display for LockFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "# {LOCK_FILE_NAME}: trusted pack files. Written by `chimera packs lock`."
        )?;
        if self.entries.is_empty() {
            return Ok(());
        }
        let tables = toml::to_string(&Rendered {
            pack: &self.entries,
        })
        .map_err(|_| fmt::Error)?;
        write!(f, "\n{tables}")
    }
}

/// The first 12 hex digits of a hash, for messages.
pub(crate) fn short_hash(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The same entry points, in any order.
pub(crate) fn same_entry_points(a: &[String], b: &[String]) -> bool {
    let sorted = |names: &[String]| {
        let mut names = names.to_vec();
        names.sort_unstable();
        names
    };
    sorted(a) == sorted(b)
}

/// A way the pack files on disk differ from their lock (`chimera packs verify`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockMismatch {
    /// The directory has no lock file at all.
    #[error("{}: no {LOCK_FILE_NAME}; run `chimera packs lock --plugins-dir {}`", dir.display(), dir.display())]
    NoLock {
        /// The plugins directory.
        dir: PathBuf,
    },
    /// A pinned file is gone, or no longer a pack.
    #[error("{}: pinned but missing (or no longer a pack)", path.display())]
    Missing {
        /// The pinned file.
        path: PathBuf,
    },
    /// A pinned file's content changed.
    #[error("{}: content changed since it was locked (sha256 {}… is not the pinned {}…)", path.display(), short_hash(now), short_hash(pinned))]
    Changed {
        /// The pinned file.
        path: PathBuf,
        /// The SHA-256 of its content now.
        now: String,
        /// The SHA-256 the lock pins.
        pinned: String,
    },
    /// A pinned file now provides other entry points.
    #[error("{}: provides [{}] but the lock pins [{}]", path.display(), now.join(", "), pinned.join(", "))]
    EntryPoints {
        /// The pinned file.
        path: PathBuf,
        /// What its manifest lists now.
        now: Vec<String>,
        /// What the lock pins.
        pinned: Vec<String>,
    },
    /// A pack file the lock does not pin.
    #[error("{}: not pinned in the lock file", path.display())]
    NotPinned {
        /// The pack file found on disk.
        path: PathBuf,
    },
}

/// What differs between `lock` and the pins of the files as they are
/// now (`current`), each path shown through `shown`.
pub(crate) fn compare(
    lock: &LockFile,
    current: &LockFile,
    shown: impl Fn(&str) -> PathBuf,
) -> Vec<LockMismatch> {
    let mut problems = Vec::new();
    for pin in &lock.entries {
        let path = shown(&pin.file);
        match current.entry(&pin.file) {
            None => problems.push(LockMismatch::Missing { path }),
            Some(now) if now.sha256 != pin.sha256 => problems.push(LockMismatch::Changed {
                path,
                now: now.sha256.clone(),
                pinned: pin.sha256.clone(),
            }),
            Some(now) if !same_entry_points(&now.entry_points, &pin.entry_points) => {
                problems.push(LockMismatch::EntryPoints {
                    path,
                    now: now.entry_points.clone(),
                    pinned: pin.entry_points.clone(),
                });
            }
            Some(_) => {}
        }
    }
    for entry in &current.entries {
        if lock.entry(&entry.file).is_none() {
            problems.push(LockMismatch::NotPinned {
                path: shown(&entry.file),
            });
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "5f2c0d9b8a7e6f5041322314f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e";

    fn entry(file: &str, entry_points: &[&str]) -> LockEntry {
        LockEntry {
            file: file.into(),
            sha256: HASH.into(),
            entry_points: entry_points.iter().map(|&n| n.to_owned()).collect(),
        }
    }

    fn pinned(file: &str, entry_points: &str) -> String {
        format!("[[pack]]\nfile = {file:?}\nsha256 = \"{HASH}\"\nentry_points = {entry_points}\n")
    }

    #[test]
    fn a_lock_file_round_trips_through_its_text() {
        let lock = LockFile {
            entries: vec![
                entry("libplan_gate.so", &["plan-gate"]),
                entry("libbundle.so", &["redactor", "delegate-spawner"]),
            ],
        };
        let text = lock.to_string();
        assert_eq!(LockFile::parse(&text).unwrap(), lock);
        assert!(
            text.starts_with("# chimera.lock: trusted pack files."),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "[[pack]]\nfile = \"libbundle.so\"\nsha256 = \"{HASH}\"\nentry_points = [\"redactor\", \"delegate-spawner\"]\n"
            )),
            "one readable table per file:\n{text}"
        );
        assert_eq!(
            LockFile::parse(&LockFile::default().to_string()).unwrap(),
            LockFile::default()
        );
    }

    #[test]
    fn names_with_quotes_line_breaks_and_other_characters_round_trip() {
        let odd = entry(
            "lib \"odd\"\n\t'x' é.so",
            &["gate\u{7f}", "a = b", "[[pack]]"],
        );
        let lock = LockFile {
            entries: vec![odd.clone()],
        };
        assert_eq!(LockFile::parse(&lock.to_string()).unwrap(), lock);
        let twice = LockFile {
            entries: vec![odd.clone(), odd],
        };
        let error = LockFile::parse(&twice.to_string()).unwrap_err().to_string();
        assert!(!error.contains('\n'), "one line: {error}");
        assert!(error.contains("line 11: lib \\\"odd\\\"\\n\\t"), "{error}");
    }

    #[test]
    fn an_external_lock_pins_absolute_paths_even_with_spaces_and_quotes() {
        let lock = LockFile {
            entries: vec![entry("/home/me/my \"packs\"/lib gate.so", &["gate"])],
        };
        let text = lock.to_string();
        assert_eq!(
            LockFile::parse_scoped(&text, LockScope::External).unwrap(),
            lock
        );
        let error = LockFile::parse(&text).unwrap_err().to_string();
        assert!(
            error.contains("line 4: the file must be a bare file name"),
            "{error}"
        );
        let error = LockFile::parse_scoped(&pinned("libx.so", "[\"x\"]"), LockScope::External)
            .unwrap_err()
            .to_string();
        assert!(error.contains("by its absolute path"), "{error}");
    }

    #[test]
    fn every_problem_names_its_line() {
        for (text, fragment) in [
            (
                "[[pack]]\nfile = \"libx.so\"\nsha256 = \"abc\"\nentry_points = [\"x\"]".to_owned(),
                "chimera.lock line 3: the sha256 must be 64 lower-case hex digits",
            ),
            (
                format!("\n# comment\n{}", pinned("../libx.so", "[\"x\"]")),
                "line 4: the file must be a bare file name in this directory, not \"../libx.so\"",
            ),
            (
                pinned("libx.so", "[\"a\", \"\", \"b\"]"),
                "line 4: an entry-point name is empty",
            ),
            (
                format!(
                    "{}\n{}",
                    pinned("libx.so", "[\"a\"]"),
                    pinned("libx.so", "[\"b\"]")
                ),
                "line 7: libx.so is pinned twice",
            ),
            (
                pinned("libx.so", "[\"a\"]").replace(HASH, &HASH.to_uppercase()),
                "line 3: the sha256 must be 64 lower-case hex digits",
            ),
            (
                format!("{}entry-points = [\"a\"]\n", pinned("libx.so", "[\"a\"]")),
                "line 5: unknown field `entry-points`",
            ),
            (
                format!(
                    "{}\n[[pack]]\nfile = \"liby.so\"\n",
                    pinned("libx.so", "[\"a\"]")
                ),
                "line 6: missing field `sha256`",
            ),
            (
                format!("# pins\nlibx.so  sha256:{HASH}  a,b\n"),
                "line 2: this is the old one-line lock format; re-run `chimera packs lock`",
            ),
            ("libx.so sha 256".to_owned(), "line 1: "),
            ("[[pack]]\nfile = \"libx.so\n".to_owned(), "line 2: "),
        ] {
            let error = LockFile::parse(&text).unwrap_err();
            assert!(matches!(error, LockError::Syntax { .. }), "{error:?}");
            let error = error.to_string();
            assert!(!error.contains('\n'), "one line: {error}");
            assert!(error.contains(fragment), "{error:?} lacks {fragment:?}");
        }
    }
}
