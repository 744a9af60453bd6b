//! Where a pack file (or a lock file) may be read from: not from a
//! directory, or a file, that someone else can change.
//!
//! The directory is opened **once**, and everything in it is read through
//! that handle, so no path is checked and then reopened:
//!
//! ```text
//!  open(dir) ─▶ its ancestors: owned by you or root, not writable by others
//!               (a sticky directory such as /tmp is fine) ─▶ the path still
//!               leads to the directory that was opened
//!            ─▶ the directory itself (on the handle): owned by you or root,
//!               not group- or world-writable
//!  openat(handle, name): no symlink out of the directory, no FIFO (never
//!               blocks), a regular file owned by you or root, not writable
//!               by others — all checked on the opened file
//! ```

pub(crate) use cap_fs_ext::FollowSymlinks;
use cap_fs_ext::OpenOptionsFollowExt;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Which kind of directory a path is, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DirectoryRole {
    /// A directory packs are loaded from.
    Plugins,
    /// The directory holding a lock kept outside the plugins directories
    /// (`--lock FILE`).
    LockFile,
}

impl fmt::Display for DirectoryRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DirectoryRole::Plugins => "plugins directory",
            DirectoryRole::LockFile => "directory of the lock file",
        })
    }
}

/// What a refused path is to chimera, as the message names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Subject {
    /// The directory itself.
    Directory(DirectoryRole),
    /// One of the directories above it (a writable one could swap it).
    Above(DirectoryRole),
    /// A pack library in a plugins directory.
    PackFile,
    /// A `chimera.lock`, or the file given to `--lock`.
    LockFile,
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Directory(role) => write!(f, "{role}"),
            Subject::Above(role) => write!(f, "directory above the {role}"),
            Subject::PackFile => f.write_str("pack file"),
            Subject::LockFile => f.write_str("lock file"),
        }
    }
}

/// What a file-system call was doing when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Opening the path.
    Open,
    /// Resolving it to its canonical path.
    Resolve,
    /// Reading its owner and mode.
    Inspect,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Open => "open",
            Access::Resolve => "resolve",
            Access::Inspect => "inspect",
        })
    }
}

/// Why the policy refuses a path.
#[derive(Debug)]
#[non_exhaustive]
pub enum PolicyErrorKind {
    /// Anyone may write to it (and so replace what chimera loads).
    WorldWritable,
    /// Its group may write to it.
    GroupWritable,
    /// It belongs to another user (neither the one running chimera nor root).
    ForeignOwner {
        /// The uid that owns it.
        owner: u32,
        /// The effective uid chimera runs as.
        me: u32,
    },
    /// A directory, FIFO, socket or device where a file was expected.
    NotRegularFile,
    /// A symlink, where only a regular file is accepted (lock files).
    Symlink,
    /// A symlink that leads out of the directory, or an absolute one.
    SymlinkOut {
        /// The directory it leads out of.
        dir: PathBuf,
    },
    /// The path led to another directory after it was opened: someone
    /// renamed directories while chimera was opening it.
    Replaced {
        /// The directory whose writers could have done it.
        parent: PathBuf,
    },
    /// Nothing is there.
    Missing,
    /// A file-system call failed.
    Io {
        /// What was being done.
        access: Access,
        /// The operating system's error.
        source: io::Error,
    },
}

/// A directory or file that fails the trust policy. Displays as one line
/// naming the path and the fix.
#[derive(Debug)]
#[non_exhaustive]
pub struct PolicyError {
    /// What the path is to chimera.
    pub subject: Subject,
    /// The refused path, as it was reached.
    pub path: PathBuf,
    /// What is wrong with it.
    pub kind: PolicyErrorKind,
}

impl PolicyError {
    fn new(subject: Subject, path: impl Into<PathBuf>, kind: PolicyErrorKind) -> Self {
        PolicyError {
            subject,
            path: path.into(),
            kind,
        }
    }

    fn io(subject: Subject, path: &Path, access: Access) -> impl FnOnce(io::Error) -> Self + '_ {
        move |source| PolicyError::new(subject, path, PolicyErrorKind::Io { access, source })
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, path) = (self.subject, self.path.display());
        let insecure = "or pass --allow-insecure-plugins-dir";
        match &self.kind {
            PolicyErrorKind::WorldWritable => write!(
                f,
                "refusing the {what} {path}: it is world-writable (run `chmod o-w {path}`, {insecure})"
            ),
            PolicyErrorKind::GroupWritable => write!(
                f,
                "refusing the {what} {path}: it is group-writable (run `chmod g-w {path}`, {insecure})"
            ),
            PolicyErrorKind::ForeignOwner { owner, me } => write!(
                f,
                "refusing the {what} {path}: it is owned by user {owner}, not by you (uid {me}) or root (chown it, {insecure})"
            ),
            PolicyErrorKind::NotRegularFile => {
                write!(f, "refusing the {what} {path}: it is not a regular file")
            }
            PolicyErrorKind::Symlink => write!(
                f,
                "refusing the {what} {path}: it is a symlink; it must be a regular file"
            ),
            PolicyErrorKind::SymlinkOut { dir } => write!(
                f,
                "{path} is a symlink leading out of the plugins directory {} (or an absolute one); copy the {what} into it, or link to it with a relative path inside it",
                dir.display()
            ),
            PolicyErrorKind::Replaced { parent } => write!(
                f,
                "the {what} {path} was replaced while it was being opened; try again, and check who else can write to {}",
                parent.display()
            ),
            PolicyErrorKind::Missing => write!(f, "{path}: no such file"),
            PolicyErrorKind::Io { access, source } => {
                write!(f, "cannot {access} the {what} {path}: {source}")
            }
        }
    }
}

impl std::error::Error for PolicyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            PolicyErrorKind::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A directory opened once and checked on its handle.
pub(crate) struct TrustedDir {
    path: PathBuf,
    /// Where `path` led when the directory was opened.
    canonical: PathBuf,
    role: DirectoryRole,
    dir: Dir,
    /// Problems were found but `--allow-insecure-plugins-dir` overrides them.
    allow_insecure: bool,
}

/// A regular file opened through a [`TrustedDir`] and checked on its handle.
pub(crate) struct TrustedFile {
    /// The open file.
    pub(crate) file: std::fs::File,
}

impl TrustedDir {
    /// Opens `path` and checks it and its ancestors. With `allow_insecure`,
    /// problems are warnings and the directory is used anyway.
    pub(crate) fn open(
        path: &Path,
        role: DirectoryRole,
        allow_insecure: bool,
    ) -> Result<Self, PolicyError> {
        let path = if path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            path
        };
        let subject = Subject::Directory(role);
        let dir = Dir::open_ambient_dir(path, ambient_authority()).map_err(PolicyError::io(
            subject,
            path,
            Access::Open,
        ))?;
        let canonical =
            path.canonicalize()
                .map_err(PolicyError::io(subject, path, Access::Resolve))?;
        let trusted = TrustedDir {
            path: path.to_owned(),
            canonical,
            role,
            dir,
            allow_insecure,
        };
        trusted.overridable(trusted.check())?;
        Ok(trusted)
    }

    /// The directory's path, as it was given.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The absolute path the directory had when it was opened (what an
    /// external lock pins its files under).
    pub(crate) fn canonical(&self) -> &Path {
        &self.canonical
    }

    fn overridable(&self, outcome: Result<(), PolicyError>) -> Result<(), PolicyError> {
        match outcome {
            Err(problem) if self.allow_insecure => {
                tracing::warn!(%problem, "loading anyway (--allow-insecure-plugins-dir)");
                Ok(())
            }
            other => other,
        }
    }

    #[cfg(unix)]
    fn check(&self) -> Result<(), PolicyError> {
        use cap_std::fs::MetadataExt;
        use std::os::unix::fs::MetadataExt as _;
        let subject = Subject::Directory(self.role);
        let canonical = &self.canonical;
        for ancestor in canonical.ancestors().skip(1) {
            let above = Subject::Above(self.role);
            let meta = std::fs::symlink_metadata(ancestor).map_err(PolicyError::io(
                above,
                ancestor,
                Access::Inspect,
            ))?;
            owner_and_mode(ancestor, above, meta.uid(), meta.mode(), true)?;
        }
        let handle = self.dir.dir_metadata().map_err(PolicyError::io(
            subject,
            &self.path,
            Access::Inspect,
        ))?;
        let now = std::fs::metadata(canonical).map_err(PolicyError::io(
            subject,
            canonical,
            Access::Inspect,
        ))?;
        if (handle.dev(), handle.ino()) != (now.dev(), now.ino()) {
            let parent = canonical.parent().unwrap_or(canonical).to_owned();
            return Err(PolicyError::new(
                subject,
                &self.path,
                PolicyErrorKind::Replaced { parent },
            ));
        }
        owner_and_mode(canonical, subject, handle.uid(), handle.mode(), false)
    }

    #[cfg(not(unix))]
    fn check(&self) -> Result<(), PolicyError> {
        // Windows ACLs are not checked; the README says so.
        Ok(())
    }

    /// Opens `name` in this directory for reading and checks the opened file:
    /// `Ok(None)` when there is no such file. With [`FollowSymlinks::Yes`] a
    /// relative symlink may lead to another file in the directory, never out
    /// of it (an absolute symlink counts as out); with
    /// [`FollowSymlinks::No`] a symlink is refused outright.
    pub(crate) fn open_file(
        &self,
        name: &Path,
        subject: Subject,
        follow: FollowSymlinks,
    ) -> Result<Option<TrustedFile>, PolicyError> {
        let shown = self.path.join(name);
        let refuse = |kind| PolicyError::new(subject, &shown, kind);
        let mut options = OpenOptions::new();
        options.read(true).follow(follow);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            // Never block on a FIFO or take a terminal.
            let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY;
            // `open(2)` takes the same bits as an `int`.
            options.custom_flags(i32::from_ne_bytes(flags.bits().to_ne_bytes()));
        }
        let file = match self.dir.open_with(name, &options) {
            Ok(file) => file.into_std(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) if follow == FollowSymlinks::No && is_loop(&error) => {
                return Err(refuse(PolicyErrorKind::Symlink))
            }
            Err(error) if is_escape(&error) => {
                let dir = self.path.clone();
                return self
                    .overridable(Err(refuse(PolicyErrorKind::SymlinkOut { dir })))
                    .and_then(|()| open_outside(&shown, subject));
            }
            Err(error) => return Err(PolicyError::io(subject, &shown, Access::Open)(error)),
        };
        let meta = file
            .metadata()
            .map_err(PolicyError::io(subject, &shown, Access::Inspect))?;
        if !meta.is_file() {
            return Err(refuse(PolicyErrorKind::NotRegularFile));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            self.overridable(owner_and_mode(
                &shown,
                subject,
                meta.uid(),
                meta.mode(),
                false,
            ))?;
        }
        Ok(Some(TrustedFile { file }))
    }
}

/// `--allow-insecure-plugins-dir` and a symlink out: follow it, as asked.
fn open_outside(shown: &Path, subject: Subject) -> Result<Option<TrustedFile>, PolicyError> {
    let file = std::fs::File::open(shown).map_err(PolicyError::io(subject, shown, Access::Open))?;
    Ok(Some(TrustedFile { file }))
}

/// `O_NOFOLLOW` met a symlink.
fn is_loop(error: &io::Error) -> bool {
    #[cfg(unix)]
    {
        error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
    }
    #[cfg(not(unix))]
    {
        let _ = error;
        false
    }
}

/// cap-std's refusal of a path that leads outside the directory.
fn is_escape(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::PermissionDenied
        && error.to_string().contains("outside of the filesystem")
}

/// Owned by this user or root, and not writable by group or others (unless
/// `sticky_ok` and the sticky bit is set: others can then not replace what
/// is ours).
#[cfg(unix)]
fn owner_and_mode(
    path: &Path,
    subject: Subject,
    uid: u32,
    mode: u32,
    sticky_ok: bool,
) -> Result<(), PolicyError> {
    let sticky = sticky_ok && mode & 0o1000 != 0;
    let me = rustix::process::geteuid().as_raw();
    let kind = if mode & 0o002 != 0 && !sticky {
        PolicyErrorKind::WorldWritable
    } else if mode & 0o020 != 0 && !sticky {
        PolicyErrorKind::GroupWritable
    } else if uid != me && uid != 0 {
        PolicyErrorKind::ForeignOwner { owner: uid, me }
    } else {
        return Ok(());
    };
    Err(PolicyError::new(subject, path, kind))
}

/// Checks `file` (found in `dir`) the way a load does, without reading it.
///
/// # Errors
///
/// A [`PolicyError`] when `dir` or `file` fails the policy (write permissions,
/// owner, a symlink out of `dir`, not a regular file); of kind
/// `PolicyErrorKind::Missing` when nothing is there.
pub fn check_location(dir: &Path, file: &Path) -> Result<(), PolicyError> {
    let trusted = TrustedDir::open(dir, DirectoryRole::Plugins, false)?;
    let missing = || PolicyError::new(Subject::PackFile, file, PolicyErrorKind::Missing);
    let name = file.file_name().ok_or_else(missing)?;
    match trusted.open_file(Path::new(name), Subject::PackFile, FollowSymlinks::Yes)? {
        Some(_) => Ok(()),
        None => Err(missing()),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn set_mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A private scratch directory (the temp dir above it is sticky).
    fn scratch() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        set_mode(dir.path(), 0o700);
        dir
    }

    #[test]
    fn a_private_directory_and_file_pass() {
        let dir = scratch();
        let file = dir.path().join("libx.so");
        std::fs::write(&file, "x").unwrap();
        set_mode(&file, 0o644);
        check_location(dir.path(), &file).unwrap();
    }

    #[test]
    fn world_or_group_writable_locations_are_refused_with_the_fix() {
        let dir = scratch();
        let file = dir.path().join("libx.so");
        std::fs::write(&file, "x").unwrap();
        set_mode(&file, 0o646);
        let error = check_location(dir.path(), &file).unwrap_err().to_string();
        assert!(
            error.contains("world-writable") && error.contains("chmod o-w"),
            "{error}"
        );
        set_mode(&file, 0o664);
        assert!(matches!(
            check_location(dir.path(), &file).unwrap_err().kind,
            PolicyErrorKind::GroupWritable
        ));
        set_mode(&file, 0o644);
        set_mode(dir.path(), 0o777);
        let error = check_location(dir.path(), &file).unwrap_err().to_string();
        assert!(
            error.contains("plugins directory") && error.contains("world-writable"),
            "{error}"
        );
        set_mode(dir.path(), 0o700);
    }

    #[test]
    fn a_writable_ancestor_is_refused_but_a_sticky_one_is_not() {
        let top = scratch();
        let middle = top.path().join("shared");
        let plugins = middle.join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        set_mode(&plugins, 0o755);
        let file = plugins.join("libx.so");
        std::fs::write(&file, "x").unwrap();
        set_mode(&file, 0o644);
        set_mode(&middle, 0o777);
        let error = check_location(&plugins, &file).unwrap_err().to_string();
        assert!(
            error.contains("directory above the plugins directory")
                && error.contains("world-writable"),
            "{error}"
        );
        set_mode(&middle, 0o1777);
        check_location(&plugins, &file).unwrap();
        set_mode(&middle, 0o755);
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = scratch();
        let fifo = dir.path().join("libx.so");
        crate::test_support::make_fifo(&fifo);
        let error = check_location(dir.path(), &fifo).unwrap_err().to_string();
        assert!(error.contains("not a regular file"), "{error}");
    }

    #[test]
    fn a_file_owned_by_another_user_is_refused_but_root_is_trusted() {
        let dir = scratch();
        let file = dir.path().join("libx.so");
        std::fs::write(&file, "x").unwrap();
        if rustix::process::geteuid().as_raw() != 0 {
            // Only root can hand a file to someone else; the check itself is
            // the same `uid` comparison exercised below when run as root.
            return;
        }
        std::os::unix::fs::chown(&file, Some(12345), None).unwrap();
        let error = check_location(dir.path(), &file).unwrap_err().to_string();
        assert!(error.contains("owned by user 12345"), "{error}");
        std::os::unix::fs::chown(&file, Some(0), None).unwrap();
        check_location(dir.path(), &file).unwrap();
    }

    #[test]
    fn a_symlink_out_of_the_directory_is_refused() {
        let outside = scratch();
        let target = outside.path().join("libevil.so");
        std::fs::write(&target, "x").unwrap();
        let dir = scratch();
        let link = dir.path().join("libevil.so");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = check_location(dir.path(), &link).unwrap_err().to_string();
        assert!(error.contains("symlink leading out of the"), "{error}");
        let inside = dir.path().join("libreal.so");
        std::fs::write(&inside, "x").unwrap();
        let link = dir.path().join("libalias.so");
        std::os::unix::fs::symlink("libreal.so", &link).unwrap();
        check_location(dir.path(), &link).unwrap();
        // An absolute link is resolved outside the directory handle: refused.
        let absolute = dir.path().join("libabsolute.so");
        std::os::unix::fs::symlink(&inside, &absolute).unwrap();
        assert!(check_location(dir.path(), &absolute).is_err());
    }
}
