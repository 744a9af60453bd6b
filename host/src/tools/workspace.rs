//! The workspace confinement: every file a tool touches is opened through a
//! handle on the workspace root, never by a path resolved beforehand.
//!
//! [`Workspace::new`] opens the root directory once. Every later lookup is
//! relative to that handle (with `cap-std`: on Linux `openat2` with
//! `RESOLVE_BENEATH`, elsewhere a component-by-component walk that follows
//! nothing out of the root), and what was opened is then checked on its
//! descriptor. There is no gap between a check and the open or the write in
//! which a swapped directory or symlink could redirect it.
//!
//! * A path is relative to the root, or absolute and spelled under
//!   [`Workspace::root`] (that prefix is dropped). `..` is allowed as long as
//!   it does not climb above the root; under a directory that does not exist
//!   yet it is refused, since what it would name depends on directories not
//!   created yet.
//! * A symlink is followed when its target, read relative to the link's own
//!   directory, stays inside the workspace. A target that leads out — and
//!   any absolute target, even one that names a place inside — is an
//!   escape.
//! * Every escape is refused with `path escapes the workspace: <path> (use a
//!   path inside <root>)`; nothing outside is created, read or written.
//! * Files are opened non-blocking and checked once open: only regular files
//!   are read or written (a FIFO, socket or device is refused at once, never
//!   waited on), and a file with more than one hard link is never written,
//!   since its other names may be outside the workspace.
//!
//! Long with its tests: the code is its first 570 lines, and the last 209
//! are the tests that pin it, kept beside it.

use super::{PathError, ToolError};
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::fs::{Dir, OpenOptions};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// How many symlinks [`Workspace::entry`] follows before giving up.
const MAX_LINK_DEPTH: usize = 40;

/// The directory tools are confined to.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// The root, opened once: every lookup starts here.
    dir: Arc<Dir>,
}

/// What a tool means to do with a file it opens; decides the open flags and
/// the checks made on the descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read only.
    Read,
    /// Read, then rewrite in place: the file must exist.
    Edit,
    /// Write: created when missing, emptied once it passed the checks.
    Write,
    /// Read a file that is to be replaced whole (renamed over) or deleted:
    /// no write access is needed, but hard links are refused as for a write.
    Replace,
}

impl Access {
    fn options(self) -> OpenOptions {
        let mut options = OpenOptions::new();
        match self {
            Access::Read | Access::Replace => options.read(true),
            Access::Edit => options.read(true).write(true),
            Access::Write => options.write(true).create(true),
        };
        // A FIFO opened for reading returns at once instead of waiting for a
        // writer; one opened for writing with no reader fails (ENXIO).
        options.nonblock(true);
        no_controlling_terminal(&mut options);
        options
    }

    /// Whether the file is to be changed (so hard links are refused).
    fn changes(self) -> bool {
        self != Access::Read
    }

    fn verb(self) -> &'static str {
        match self {
            Access::Read | Access::Replace => "read",
            Access::Edit | Access::Write => "write",
        }
    }

    fn directory_error(self, shown: &str) -> ToolError {
        let path = shown.to_owned();
        match self {
            Access::Write => PathError::DirectoryNotWritable { path },
            _ => PathError::Directory { path },
        }
        .into()
    }
}

#[cfg(unix)]
fn no_controlling_terminal(options: &mut OpenOptions) {
    use cap_std::fs::OpenOptionsExt;
    // The flag's bits fit an `int`, which is what `open(2)` takes.
    options.custom_flags(i32::from_ne_bytes(
        rustix::fs::OFlags::NOCTTY.bits().to_ne_bytes(),
    ));
}

#[cfg(not(unix))]
fn no_controlling_terminal(_options: &mut OpenOptions) {}

/// A name in a directory of the workspace, every symlink on the way to it
/// followed: where `apply_patch` reads, stages, renames over and deletes.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The directory holding it; `None` while that directory does not exist.
    dir: Option<Dir>,
    /// That directory, relative to the root (to create it when missing).
    parent: PathBuf,
    /// The entry's name in it.
    name: OsString,
    /// Which directory that is, to tell two spellings of one file apart.
    place: Place,
}

/// The identity of an entry's directory.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// An existing directory, by device and inode.
    #[cfg(unix)]
    Inode(u64, u64),
    /// A directory by its path (one that does not exist yet, or where inodes
    /// are not available), `.` components dropped.
    Path(PathBuf),
}

impl Workspace {
    /// A workspace rooted at `root` (which must exist); the root is
    /// canonicalised and opened.
    ///
    /// # Errors
    ///
    /// The I/O error when `root` does not exist or cannot be canonicalised or
    /// opened; one of kind `InvalidInput` when it is not a directory.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = root.as_ref().canonicalize()?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("workspace root is not a directory: {}", root.display()),
            ));
        }
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority())?;
        Ok(Workspace {
            root,
            dir: Arc::new(dir),
        })
    }

    /// The canonical root.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Opens the regular file at `path` (the caller's spelling) for
    /// `access`, following symlinks that stay inside, and checks it on the
    /// descriptor: a directory, a special file or (for a change) a file
    /// with several hard links is refused. [`Access::Write`] creates the
    /// file (its directory must exist: see [`Workspace::create_parents`])
    /// and empties it once the checks pass.
    pub(crate) fn open(&self, path: &str, access: Access) -> Result<File, ToolError> {
        let relative = self.relative(path)?;
        let opened = self.dir.open_with(relative, &access.options());
        self.checked(path, opened, access)
    }

    /// Creates the missing parent directories of `path`, inside the
    /// workspace.
    pub(crate) fn create_parents(&self, path: &str) -> Result<(), ToolError> {
        match self.relative(path)?.parent() {
            Some(parent) => self.create_dirs(path, parent),
            None => Ok(()),
        }
    }

    /// Finds the entry `path` names, following symlinks (each must stay
    /// inside) until the last component is not one. Its directory may not
    /// exist yet; the entry itself need not exist.
    pub(crate) fn entry(&self, path: &str) -> Result<Entry, ToolError> {
        let mut current = self.relative(path)?.to_path_buf();
        for _ in 0..=MAX_LINK_DEPTH {
            let Some((parent, name)) = split_name(&current) else {
                return Err(Access::Read.directory_error(path));
            };
            let dir = match self.dir.open_dir(dir_path(&parent)) {
                Ok(dir) => dir,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if has_parent_dir(&parent) {
                        return Err(self.escape_error(path).into());
                    }
                    let place = Place::Path(without_cur_dirs(&parent));
                    return Ok(Entry {
                        dir: None,
                        parent,
                        name,
                        place,
                    });
                }
                Err(e) => return Err(self.failure(path, e, "open the directory of")),
            };
            let is_link = dir
                .symlink_metadata(&name)
                .is_ok_and(|meta| meta.file_type().is_symlink());
            if !is_link {
                let place = place_of(&dir, &parent);
                return Ok(Entry {
                    dir: Some(dir),
                    parent,
                    name,
                    place,
                });
            }
            // `read_link` refuses an absolute target as an escape; a relative
            // one is resolved again from the root on the next turn.
            let target = dir
                .read_link(&name)
                .map_err(|e| self.failure(path, e, "read the symlink"))?;
            current = parent.join(target);
        }
        Err(PathError::SymlinkLoop {
            path: path.to_owned(),
        }
        .into())
    }

    /// `path` as a path relative to the root, checked lexically: not empty,
    /// no NUL, absolute only under the root, no `..` above the root.
    fn relative<'p>(&self, path: &'p str) -> Result<&'p Path, PathError> {
        if path.is_empty() {
            return Err(PathError::Empty);
        }
        if path.contains('\0') {
            return Err(PathError::ContainsNul {
                path: path.to_owned(),
            });
        }
        let given = Path::new(path);
        let relative = if given.is_absolute() {
            given
                .strip_prefix(&self.root)
                .map_err(|_| self.escape_error(path))?
        } else {
            given
        };
        let mut depth = 0usize;
        for component in relative.components() {
            match component {
                Component::Normal(_) => depth += 1,
                Component::CurDir => {}
                Component::ParentDir => {
                    depth = depth
                        .checked_sub(1)
                        .ok_or_else(|| self.escape_error(path))?;
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(PathError::Invalid {
                        path: path.to_owned(),
                    });
                }
            }
        }
        Ok(dir_path(relative))
    }

    /// Creates `dir` (relative to the root) and its missing parents, for
    /// `shown`. A `..` under a directory that does not exist is refused.
    fn create_dirs(&self, shown: &str, dir: &Path) -> Result<(), ToolError> {
        if dir.as_os_str().is_empty() {
            return Ok(());
        }
        match self.dir.metadata(dir) {
            Ok(meta) if meta.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(PathError::ParentNotDirectory {
                    path: shown.to_owned(),
                }
                .into())
            }
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(self.failure(shown, e, "create the parent directories of"));
            }
            Err(_) => {}
        }
        if has_parent_dir(dir) {
            return Err(self.escape_error(shown).into());
        }
        self.dir
            .create_dir_all(dir)
            .map_err(|e| self.failure(shown, e, "create the parent directories of"))
    }

    /// The result of opening `shown`, checked on the descriptor for
    /// `access` (see [`Workspace::open`]).
    fn checked(
        &self,
        shown: &str,
        opened: io::Result<cap_std::fs::File>,
        access: Access,
    ) -> Result<File, ToolError> {
        let file = opened
            .map_err(|e| self.open_failure(shown, e, access))?
            .into_std();
        let meta = file
            .metadata()
            .map_err(|e| ToolError::io(shown, "inspect", e))?;
        if meta.is_dir() {
            return Err(access.directory_error(shown));
        }
        if !meta.is_file() {
            return Err(not_regular(shown));
        }
        if access.changes() {
            refuse_hard_links(shown, &meta)?;
        }
        if access == Access::Write {
            file.set_len(0)
                .map_err(|e| ToolError::io(shown, "write", e))?;
        }
        Ok(file)
    }

    fn open_failure(&self, shown: &str, error: io::Error, access: Access) -> ToolError {
        if error.kind() == io::ErrorKind::IsADirectory {
            return access.directory_error(shown);
        }
        if is_no_reader(&error) {
            return not_regular(shown);
        }
        self.failure(shown, error, access.verb())
    }

    /// One line for a failed operation on `shown`: an escape, a missing path
    /// and a symlink loop get their own message, anything else says what
    /// could not be done (`doing`) and why.
    fn failure(&self, shown: &str, error: io::Error, doing: &'static str) -> ToolError {
        let path = shown.to_owned();
        if is_escape(&error) {
            return self.escape_error(shown).into();
        }
        if error.kind() == io::ErrorKind::NotFound {
            return PathError::NotFound { path }.into();
        }
        if is_symlink_loop(&error) {
            return PathError::SymlinkLoop { path }.into();
        }
        ToolError::Io {
            path,
            action: doing,
            source: error,
        }
    }

    fn escape_error(&self, path: &str) -> PathError {
        PathError::Escapes {
            path: path.to_owned(),
            root: self.root.clone(),
        }
    }
}

impl Entry {
    /// The entry's name in its directory.
    pub(crate) fn name(&self) -> &OsStr {
        &self.name
    }

    /// Whether `other` is the same entry (however it was spelled).
    pub(crate) fn same_as(&self, other: &Entry) -> bool {
        self.place == other.place && self.name == other.name
    }

    /// Opens the entry itself for `access` (a symlink put there since it was
    /// found is not followed), checked as by [`Workspace::open`]; `None`
    /// when nothing is there.
    pub(crate) fn open(
        &self,
        workspace: &Workspace,
        shown: &str,
        access: Access,
    ) -> Result<Option<File>, ToolError> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let mut options = access.options();
        options.follow(FollowSymlinks::No);
        match dir.open_with(&self.name, &options) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            opened => workspace.checked(shown, opened, access).map(Some),
        }
    }

    /// The directory holding the entry, created (with its parents) when it
    /// does not exist yet.
    pub(crate) fn directory(
        &mut self,
        workspace: &Workspace,
        shown: &str,
    ) -> Result<&Dir, ToolError> {
        let dir = if let Some(dir) = self.dir.take() {
            dir
        } else {
            workspace.create_dirs(shown, &self.parent)?;
            workspace
                .dir
                .open_dir(dir_path(&self.parent))
                .map_err(|e| workspace.failure(shown, e, "open the directory of"))?
        };
        Ok(self.dir.insert(dir))
    }

    /// The directory holding the entry, when it exists.
    pub(crate) fn existing_directory(&self) -> Option<&Dir> {
        self.dir.as_ref()
    }
}

/// Reads an opened workspace file to its end as UTF-8 text; `shown` is the
/// caller's spelling, for messages.
pub(crate) fn read_text(file: &mut File, shown: &str) -> Result<String, ToolError> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| ToolError::io(shown, "read", e))?;
    String::from_utf8(bytes).map_err(|_| ToolError::NotUtf8 {
        path: shown.to_owned(),
    })
}

/// Rewrites an open file in place with `bytes`: from the start, then cut to
/// their length (no moment where it is empty).
fn rewrite(file: &mut File, bytes: &[u8]) -> io::Result<()> {
    file.rewind()?;
    file.write_all(bytes)?;
    file.set_len(u64::try_from(bytes.len()).map_err(io::Error::other)?)
}

impl Workspace {
    /// Edits the text file at `path` in place, through one checked
    /// descriptor: `change` gets its text and returns the new text with
    /// what to answer; the file is rewritten only when the text changed.
    pub(crate) fn edit_text<T>(
        &self,
        path: &str,
        change: impl FnOnce(&str) -> Result<(String, T), ToolError>,
    ) -> Result<T, ToolError> {
        let mut file = self.open(path, Access::Edit)?;
        let text = read_text(&mut file, path)?;
        let (updated, answer) = change(&text)?;
        if updated != text {
            rewrite(&mut file, updated.as_bytes()).map_err(|e| ToolError::io(path, "write", e))?;
        }
        Ok(answer)
    }
}

fn not_regular(shown: &str) -> ToolError {
    PathError::NotRegular {
        path: shown.to_owned(),
    }
    .into()
}

#[cfg(unix)]
fn refuse_hard_links(shown: &str, meta: &std::fs::Metadata) -> Result<(), ToolError> {
    use std::os::unix::fs::MetadataExt;
    match meta.nlink() {
        0 | 1 => Ok(()),
        links => Err(PathError::HardLinks {
            path: shown.to_owned(),
            links,
        }
        .into()),
    }
}

#[cfg(not(unix))]
fn refuse_hard_links(_shown: &str, _meta: &std::fs::Metadata) -> Result<(), ToolError> {
    Ok(())
}

/// cap-std's refusal of a path that leads out of the root: a
/// `PermissionDenied` error of its own, carrying no OS error code.
fn is_escape(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::PermissionDenied && error.raw_os_error().is_none()
}

#[cfg(unix)]
fn is_errno(error: &io::Error, errno: rustix::io::Errno) -> bool {
    error.raw_os_error() == Some(errno.raw_os_error())
}

/// ENXIO: a FIFO opened for writing with no reader, or a socket.
fn is_no_reader(error: &io::Error) -> bool {
    #[cfg(unix)]
    {
        is_errno(error, rustix::io::Errno::NXIO)
    }
    #[cfg(not(unix))]
    {
        let _ = error;
        false
    }
}

/// ELOOP: a symlink loop (or a symlink where none may be followed).
fn is_symlink_loop(error: &io::Error) -> bool {
    #[cfg(unix)]
    {
        is_errno(error, rustix::io::Errno::LOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = error;
        false
    }
}

/// `path`, or `.` for the empty path (the root itself).
fn dir_path(path: &Path) -> &Path {
    if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    }
}

/// A path's directory and last name; `None` when it ends in `..` or names
/// the root.
fn split_name(path: &Path) -> Option<(PathBuf, OsString)> {
    match path.components().next_back()? {
        Component::Normal(name) => Some((path.parent()?.to_path_buf(), name.to_owned())),
        _ => None,
    }
}

fn has_parent_dir(path: &Path) -> bool {
    path.components().any(|c| c == Component::ParentDir)
}

fn without_cur_dirs(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| *c != Component::CurDir)
        .collect()
}

fn place_of(dir: &Dir, parent: &Path) -> Place {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        if let Ok(meta) = dir.dir_metadata() {
            return Place::Inode(meta.dev(), meta.ino());
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Place::Path(without_cur_dirs(parent))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::tools::testing::setup;

    fn read(ws: &Workspace, path: &str) -> Result<String, ToolError> {
        read_text(&mut ws.open(path, Access::Read)?, path)
    }

    fn error(result: Result<impl std::fmt::Debug, ToolError>) -> String {
        result.expect_err("expected an error").to_string()
    }

    #[test]
    fn new_requires_existing_root() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Workspace::new(dir.path().join("missing")).is_err());
        let ws = Workspace::new(dir.path()).unwrap();
        assert_eq!(ws.root(), dir.path().canonicalize().unwrap());
    }

    #[test]
    fn opens_relative_and_absolute_paths_inside() {
        let (_dir, ws) = setup();
        fs::create_dir(ws.root().join("sub")).unwrap();
        fs::write(ws.root().join("sub/a.txt"), "a").unwrap();
        assert_eq!(read(&ws, "sub/a.txt").unwrap(), "a");
        assert_eq!(read(&ws, "./sub/../sub/a.txt").unwrap(), "a");
        let abs = ws.root().join("sub/a.txt").to_str().unwrap().to_owned();
        assert_eq!(read(&ws, &abs).unwrap(), "a");
        let root = ws.root().to_str().unwrap().to_owned();
        for path in [".", "sub", root.as_str()] {
            assert!(error(read(&ws, path)).contains("is a directory"), "{path}");
            assert!(
                error(ws.open(path, Access::Write)).contains("is a directory"),
                "{path}"
            );
        }
    }

    #[test]
    fn missing_and_empty_paths_are_reported() {
        let (_dir, ws) = setup();
        assert!(error(read(&ws, "nope.txt")).contains("no such file"));
        assert!(error(read(&ws, "")).contains("empty"));
        assert!(error(ws.create_parents("")).contains("empty"));
        assert!(error(ws.entry("")).contains("empty"));
        ws.create_parents("new/dir/f.txt").unwrap();
        assert!(ws.root().join("new/dir").is_dir());
        assert!(!ws.root().join("new/dir/f.txt").exists());
    }

    #[test]
    fn a_parent_dir_that_leaves_the_root_is_an_escape() {
        let (_dir, ws) = setup();
        assert!(error(read(&ws, "../x")).contains("escapes the workspace"));
        assert!(error(ws.open("../x", Access::Write)).contains("escapes the workspace"));
        assert!(error(ws.create_parents("missing/../../x")).contains("escapes the workspace"));
        assert!(error(ws.entry("../x")).contains("escapes the workspace"));
        // `..` under a directory that does not exist yet is refused too.
        assert!(error(ws.create_parents("missing/../x/y")).contains("escapes the workspace"));
        assert!(error(ws.entry("missing/../x")).contains("escapes the workspace"));
        assert!(!ws.root().join("missing").exists());
    }

    #[test]
    fn absolute_paths_outside_are_escapes() {
        let (_dir, ws) = setup();
        assert!(error(read(&ws, "/etc/passwd")).contains("escapes the workspace"));
        assert!(error(ws.open("/etc/chimera-test-nope", Access::Write))
            .contains("escapes the workspace"));
        assert!(error(ws.entry("/etc/passwd")).contains("escapes the workspace"));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_leading_out_are_escapes() {
        use std::os::unix::fs::symlink;
        let base = tempfile::tempdir().unwrap();
        fs::create_dir(base.path().join("ws")).unwrap();
        fs::create_dir(base.path().join("outside")).unwrap();
        fs::write(base.path().join("outside/secret"), "s").unwrap();
        let ws = Workspace::new(base.path().join("ws")).unwrap();
        let outside = base.path().join("outside");
        symlink(&outside, ws.root().join("dirlink")).unwrap();
        symlink("../outside", ws.root().join("relative_dirlink")).unwrap();
        symlink(outside.join("secret"), ws.root().join("filelink")).unwrap();
        symlink(outside.join("nothing"), ws.root().join("dangling")).unwrap();
        symlink("../outside/nothing", ws.root().join("relative_dangling")).unwrap();
        for p in [
            "dirlink/secret",
            "relative_dirlink/secret",
            "filelink",
            "dangling",
            "relative_dangling",
        ] {
            assert!(error(read(&ws, p)).contains("escapes"), "{p}");
            assert!(error(ws.open(p, Access::Write)).contains("escapes"), "{p}");
            assert!(error(ws.entry(p)).contains("escapes"), "{p}");
        }
        assert!(error(ws.create_parents("dirlink/new/file")).contains("escapes"));
        assert!(error(ws.create_parents("relative_dirlink/new/file")).contains("escapes"));
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
        assert_eq!(fs::read_to_string(outside.join("secret")).unwrap(), "s");
    }

    #[cfg(unix)]
    #[test]
    fn an_absolute_symlink_is_refused_even_when_it_points_inside() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("f"), "x").unwrap();
        std::os::unix::fs::symlink(ws.root().join("f"), ws.root().join("abs")).unwrap();
        assert!(error(read(&ws, "abs")).contains("escapes the workspace"));
        assert!(error(ws.entry("abs")).contains("escapes the workspace"));
    }

    #[cfg(unix)]
    #[test]
    fn relative_symlinks_that_stay_inside_are_followed() {
        use std::os::unix::fs::symlink;
        let (_dir, ws) = setup();
        fs::create_dir(ws.root().join("real")).unwrap();
        fs::write(ws.root().join("real/f"), "x").unwrap();
        symlink("real", ws.root().join("link")).unwrap();
        symlink("real/later", ws.root().join("dangling_in")).unwrap();
        symlink("loop", ws.root().join("loop")).unwrap();
        assert_eq!(read(&ws, "link/f").unwrap(), "x");
        ws.open("dangling_in", Access::Write).unwrap();
        assert!(ws.root().join("real/later").is_file());
        let followed = ws.entry("link/f").unwrap();
        assert!(followed.same_as(&ws.entry("real/f").unwrap()));
        assert!(followed.same_as(&ws.entry("./real/../real/f").unwrap()));
        assert!(!followed.same_as(&ws.entry("real/later").unwrap()));
        assert_eq!(followed.name(), "f");
        for access in [Access::Read, Access::Write] {
            assert!(error(ws.open("loop", access)).contains("symbolic links"));
        }
        assert!(error(ws.entry("loop")).contains("symbolic links"));
    }

    #[cfg(unix)]
    #[test]
    fn a_file_with_hard_links_is_read_but_never_changed() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("a"), "original").unwrap();
        fs::hard_link(ws.root().join("a"), ws.root().join("b")).unwrap();
        assert_eq!(read(&ws, "b").unwrap(), "original");
        for access in [Access::Edit, Access::Write, Access::Replace] {
            let message = error(ws.open("b", access));
            assert_eq!(
                message,
                "b has 2 hard links; refusing to write through a hard link (replace it with a copy of its own first)"
            );
            let entry = ws.entry("b").unwrap();
            assert!(error(entry.open(&ws, "b", access)).contains("hard link"));
        }
        assert_eq!(fs::read_to_string(ws.root().join("a")).unwrap(), "original");
    }

    #[cfg(unix)]
    #[test]
    fn special_files_are_refused_for_every_access_without_blocking() {
        let (_dir, ws) = setup();
        crate::tools::testing::make_fifo(&ws.root().join("fifo"));
        let _listener = std::os::unix::net::UnixListener::bind(ws.root().join("socket")).unwrap();
        crate::tools::testing::within_seconds(10, move || {
            for path in ["fifo", "socket"] {
                for access in [Access::Read, Access::Edit, Access::Write, Access::Replace] {
                    let message = error(ws.open(path, access));
                    assert_eq!(
                        message,
                        format!("{path} is not a regular file; only regular files can be read or written"),
                        "{access:?}"
                    );
                }
            }
        });
    }

    #[test]
    fn an_edit_rewrites_the_whole_content_and_answers_what_the_change_said() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("f"), "a long first version\n").unwrap();
        let answer = ws
            .edit_text("f", |text| {
                assert_eq!(text, "a long first version\n");
                Ok(("short\n".to_owned(), 7))
            })
            .unwrap();
        assert_eq!(answer, 7);
        assert_eq!(fs::read_to_string(ws.root().join("f")).unwrap(), "short\n");
    }

    #[test]
    fn an_edit_that_fails_leaves_the_file_alone() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("f"), "keep\n").unwrap();
        let refused = ws.edit_text("f", |_| -> Result<(String, ()), ToolError> {
            Err(ToolError::failed("no"))
        });
        assert_eq!(refused.unwrap_err().to_string(), "no");
        assert_eq!(fs::read_to_string(ws.root().join("f")).unwrap(), "keep\n");
        fs::write(ws.root().join("bin"), [0xff, 0xfe]).unwrap();
        let binary = ws.edit_text("bin", |text| Ok((text.to_owned(), ())));
        assert!(matches!(binary, Err(ToolError::NotUtf8 { .. })));
    }
}
