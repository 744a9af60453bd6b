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

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// A directory opened once and checked on its handle.
pub(crate) struct TrustedDir {
    path: PathBuf,
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
    /// Opens `path` and checks it and its ancestors. `what` names the
    /// directory in errors ("plugins directory"). With `allow_insecure`,
    /// problems are warnings and the directory is used anyway.
    pub(crate) fn open(path: &Path, what: &str, allow_insecure: bool) -> Result<Self, String> {
        let path = if path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            path
        };
        let dir = Dir::open_ambient_dir(path, ambient_authority())
            .map_err(|e| format!("cannot open the {what} {}: {e}", path.display()))?;
        let trusted = TrustedDir {
            path: path.to_owned(),
            dir,
            allow_insecure,
        };
        trusted.overridable(trusted.check(what))?;
        Ok(trusted)
    }

    /// The directory's path, as it was given.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn overridable(&self, outcome: Result<(), String>) -> Result<(), String> {
        match outcome {
            Err(problem) if self.allow_insecure => {
                tracing::warn!(%problem, "loading anyway (--allow-insecure-plugins-dir)");
                Ok(())
            }
            other => other,
        }
    }

    #[cfg(unix)]
    fn check(&self, what: &str) -> Result<(), String> {
        use cap_std::fs::MetadataExt;
        let canonical = self
            .path
            .canonicalize()
            .map_err(|e| format!("cannot resolve the {what} {}: {e}", self.path.display()))?;
        for ancestor in canonical.ancestors().skip(1) {
            let meta = std::fs::symlink_metadata(ancestor)
                .map_err(|e| format!("cannot inspect {}: {e}", ancestor.display()))?;
            owner_and_mode(
                ancestor,
                &format!("directory above the {what}"),
                std::os::unix::fs::MetadataExt::uid(&meta),
                std::os::unix::fs::MetadataExt::mode(&meta),
                true,
            )?;
        }
        let handle = self
            .dir
            .dir_metadata()
            .map_err(|e| format!("cannot inspect the {what} {}: {e}", self.path.display()))?;
        let now = std::fs::metadata(&canonical)
            .map_err(|e| format!("cannot inspect the {what} {}: {e}", canonical.display()))?;
        if (handle.dev(), handle.ino())
            != (
                std::os::unix::fs::MetadataExt::dev(&now),
                std::os::unix::fs::MetadataExt::ino(&now),
            )
        {
            return Err(format!(
                "the {what} {} was replaced while it was being opened; try again, and check who else can write to {}",
                self.path.display(),
                canonical.parent().unwrap_or(&canonical).display()
            ));
        }
        owner_and_mode(&canonical, what, handle.uid(), handle.mode(), false)
    }

    #[cfg(not(unix))]
    fn check(&self, _what: &str) -> Result<(), String> {
        // Windows ACLs are not checked; the README says so.
        Ok(())
    }

    /// Opens `name` in this directory for reading and checks the opened file:
    /// `Ok(None)` when there is no such file. A relative symlink may lead to
    /// another file in the directory, never out of it (an absolute symlink
    /// counts as out); `what` names the file in errors ("pack file").
    pub(crate) fn open_file(&self, name: &Path, what: &str) -> Result<Option<TrustedFile>, String> {
        self.open_checked(name, what, FollowSymlinks::Yes)
    }

    /// [`TrustedDir::open_file`], refusing a symlink outright.
    pub(crate) fn open_file_nofollow(
        &self,
        name: &Path,
        what: &str,
    ) -> Result<Option<TrustedFile>, String> {
        self.open_checked(name, what, FollowSymlinks::No)
    }

    fn open_checked(
        &self,
        name: &Path,
        what: &str,
        follow: FollowSymlinks,
    ) -> Result<Option<TrustedFile>, String> {
        let shown = self.path.join(name);
        let mut options = OpenOptions::new();
        options.read(true).follow(follow);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            // Never block on a FIFO or take a terminal.
            let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY;
            options.custom_flags(flags.bits() as i32);
        }
        let file = match self.dir.open_with(name, &options) {
            Ok(file) => file.into_std(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) if follow == FollowSymlinks::No && is_loop(&error) => {
                return Err(format!(
                    "refusing the {what} {}: it is a symlink; it must be a regular file",
                    shown.display()
                ))
            }
            Err(error) if is_escape(&error) => {
                return self
                    .overridable(Err(format!(
                        "{} is a symlink leading out of the plugins directory {} (or an absolute one); copy the {what} into it, or link to it with a relative path inside it",
                        shown.display(),
                        self.path.display()
                    )))
                    .and_then(|()| self.open_outside(&shown, what))
            }
            Err(error) => return Err(format!("cannot open the {what} {}: {error}", shown.display())),
        };
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot inspect the {what} {}: {e}", shown.display()))?;
        if !meta.is_file() {
            return Err(format!(
                "refusing the {what} {}: it is not a regular file",
                shown.display()
            ));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            self.overridable(owner_and_mode(&shown, what, meta.uid(), meta.mode(), false))?;
        }
        Ok(Some(TrustedFile { file }))
    }

    /// `--allow-insecure-plugins-dir` and a symlink out: follow it, as asked.
    fn open_outside(&self, shown: &Path, what: &str) -> Result<Option<TrustedFile>, String> {
        let file = std::fs::File::open(shown)
            .map_err(|e| format!("cannot open the {what} {}: {e}", shown.display()))?;
        Ok(Some(TrustedFile { file }))
    }
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
    what: &str,
    uid: u32,
    mode: u32,
    sticky_ok: bool,
) -> Result<(), String> {
    let sticky = sticky_ok && mode & 0o1000 != 0;
    if mode & 0o002 != 0 && !sticky {
        return Err(format!(
            "refusing the {what} {}: it is world-writable (run `chmod o-w {}`, or pass --allow-insecure-plugins-dir)",
            path.display(),
            path.display()
        ));
    }
    if mode & 0o020 != 0 && !sticky {
        return Err(format!(
            "refusing the {what} {}: it is group-writable (run `chmod g-w {}`, or pass --allow-insecure-plugins-dir)",
            path.display(),
            path.display()
        ));
    }
    let me = rustix::process::geteuid().as_raw();
    if uid != me && uid != 0 {
        return Err(format!(
            "refusing the {what} {}: it is owned by user {uid}, not by you (uid {me}) or root (chown it, or pass --allow-insecure-plugins-dir)",
            path.display(),
        ));
    }
    Ok(())
}

/// Checks `file` (found in `dir`) the way a load does, without reading it.
/// `Err` is one line naming the path and the fix.
pub fn check_location(dir: &Path, file: &Path) -> Result<(), String> {
    let trusted = TrustedDir::open(dir, "plugins directory", false)?;
    let name = file
        .file_name()
        .ok_or_else(|| format!("{} names no file", file.display()))?;
    match trusted.open_file(Path::new(name), "pack file")? {
        Some(_) => Ok(()),
        None => Err(format!("{}: no such file", file.display())),
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
        let error = check_location(dir.path(), &file).unwrap_err();
        assert!(
            error.contains("world-writable") && error.contains("chmod o-w"),
            "{error}"
        );
        set_mode(&file, 0o664);
        assert!(check_location(dir.path(), &file)
            .unwrap_err()
            .contains("group-writable"));
        set_mode(&file, 0o644);
        set_mode(dir.path(), 0o777);
        let error = check_location(dir.path(), &file).unwrap_err();
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
        let error = check_location(&plugins, &file).unwrap_err();
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
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let error = check_location(dir.path(), &fifo).unwrap_err();
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
        let error = check_location(dir.path(), &file).unwrap_err();
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
        let error = check_location(dir.path(), &link).unwrap_err();
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
