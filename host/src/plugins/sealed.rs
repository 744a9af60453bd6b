//! The bytes that were read, hashed and checked, in a form `dlopen` maps and
//! nobody can change.
//!
//! On Linux that is a **sealed memfd**: an anonymous file that exists only
//! in this process, written once, then sealed against every write, shrink
//! and grow, and loaded by its `/proc/self/fd/N` path. No path on disk is
//! involved between the hash and the mapping, so there is nothing another
//! user could swap. The descriptor is kept open for the life of the process
//! (libraries are never unloaded, and the dynamic loader recognises a
//! library by the path string it was opened under: a reused `/proc/self/fd/N`
//! would hand back the old library).
//!
//! Elsewhere, or where memfds are unavailable, it is a copy in a private
//! cache directory: created with mode 0700 (whatever the umask) and verified
//! to be 0700 and ours before anything is written into it; the copy is
//! unlinked once it is mapped.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Loadable, unchangeable bytes.
pub(crate) enum Sealed {
    /// A sealed memfd (Linux).
    #[cfg(target_os = "linux")]
    Memfd(std::os::fd::OwnedFd),
    /// A copy in the private cache directory.
    Copy(PathBuf),
}

impl Sealed {
    /// Seals `bytes` (named `stem` for diagnostics).
    pub(crate) fn new(bytes: &[u8], stem: &str, cache: &PrivateDir) -> io::Result<Sealed> {
        #[cfg(target_os = "linux")]
        if let Some(fd) = memfd(bytes, stem) {
            return Ok(Sealed::Memfd(fd));
        }
        cache.copy(bytes, stem).map(Sealed::Copy)
    }

    /// The path to hand to `dlopen` (and to a probe that loads by path).
    pub(crate) fn path(&self) -> PathBuf {
        match self {
            #[cfg(target_os = "linux")]
            Sealed::Memfd(fd) => {
                use std::os::fd::AsRawFd;
                PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            }
            Sealed::Copy(path) => path.clone(),
        }
    }

    /// A duplicate of the memfd for a child's stdin (the probe loads exactly
    /// these bytes); `None` for a copy, which a child loads by path.
    pub(crate) fn for_child(&self) -> io::Result<Option<std::process::Stdio>> {
        match self {
            #[cfg(target_os = "linux")]
            Sealed::Memfd(fd) => Ok(Some(fd.try_clone()?.into())),
            Sealed::Copy(_) => Ok(None),
        }
    }

    /// After `dlopen`: the memfd stays open for good; the copy is unlinked
    /// (the mapping keeps its inode).
    pub(crate) fn loaded(self) {
        match self {
            #[cfg(target_os = "linux")]
            Sealed::Memfd(fd) => std::mem::forget(fd),
            Sealed::Copy(path) => {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// The memfd itself, for a child that loads it again and again (an
    /// isolated pack's restarts); `None` for a copy, which is removed.
    pub(crate) fn into_memfd(self) -> Option<std::os::fd::OwnedFd> {
        match self {
            #[cfg(target_os = "linux")]
            Sealed::Memfd(fd) => Some(fd),
            Sealed::Copy(path) => {
                let _ = std::fs::remove_file(path);
                None
            }
        }
    }

    /// Not loaded after all: release it.
    pub(crate) fn discard(self) {
        if let Sealed::Copy(path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(target_os = "linux")]
fn memfd(bytes: &[u8], stem: &str) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{fcntl_add_seals, memfd_create, MemfdFlags, SealFlags};
    let name = format!("chimera-pack-{stem}");
    let fd = memfd_create(
        name.as_str(),
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )
    .ok()?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes).ok()?;
    let fd = std::os::fd::OwnedFd::from(file);
    fcntl_add_seals(
        &fd,
        SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL,
    )
    .ok()?;
    // The loader opens it by this path; without /proc the copy is used.
    Path::new("/proc/self/fd").is_dir().then_some(fd)
}

/// A cache directory only this user can enter, made on first use and
/// removed when it goes.
#[derive(Default)]
pub(crate) struct PrivateDir {
    dir: OnceLock<tempfile::TempDir>,
    counter: AtomicU64,
}

impl PrivateDir {
    pub(crate) fn new() -> Self {
        PrivateDir::default()
    }

    /// The directory: created atomically with a random name and mode 0700,
    /// then verified (mode exactly 0700, owned by us) before first use.
    pub(crate) fn path(&self) -> io::Result<&Path> {
        if let Some(dir) = self.dir.get() {
            return Ok(dir.path());
        }
        let mut builder = tempfile::Builder::new();
        builder.prefix("chimera-packs-");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o700));
        }
        let dir = builder.tempdir()?;
        verify_private(dir.path())?;
        Ok(self.dir.get_or_init(|| dir).path())
    }

    fn copy(&self, bytes: &[u8], stem: &str) -> io::Result<PathBuf> {
        let dir = self.path()?;
        let path = dir.join(format!(
            "{stem}-{}.{}",
            self.counter.fetch_add(1, Ordering::Relaxed),
            std::env::consts::DLL_EXTENSION
        ));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&path)?;
        file.write_all(bytes)?;
        Ok(path)
    }
}

/// Mode exactly 0700 and owned by this user (the umask can only take bits
/// away, but a directory made before, or by someone else, is not trusted).
#[cfg(unix)]
fn verify_private(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path)?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.mode() & 0o7777 != 0o700 || meta.uid() != me {
        return Err(io::Error::other(format!(
            "the private cache directory {} is not a 0700 directory owned by uid {me} (mode {:o}, owner {})",
            path.display(),
            meta.mode() & 0o7777,
            meta.uid()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn verify_private(_path: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// Set in the child process the umask test runs in.
    const CHILD: &str = "CHIMERA_TEST_UMASK_CHILD";

    #[test]
    fn the_private_cache_directory_is_0700_under_umask_000() {
        if std::env::var_os(CHILD).is_some() {
            rustix::process::umask(rustix::fs::Mode::empty());
            let cache = PrivateDir::new();
            let path = cache.path().expect("private dir");
            let mode = std::fs::metadata(path).unwrap().mode() & 0o7777;
            assert_eq!(mode, 0o700, "{}", path.display());
            let copy = cache.copy(b"bytes", "x").unwrap();
            let mode = std::fs::metadata(&copy).unwrap().mode() & 0o077;
            assert_eq!(mode & 0o022, 0, "the copy is not writable by others");
            return;
        }
        // The umask is process-wide: change it only in a child of our own.
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "plugins::sealed::tests::the_private_cache_directory_is_0700_under_umask_000",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sealed_bytes_cannot_be_changed_or_resized() {
        let sealed = Sealed::new(b"exactly these bytes", "x", &PrivateDir::new()).unwrap();
        let Sealed::Memfd(fd) = &sealed else {
            panic!("memfds are available on this machine");
        };
        let mut file = std::fs::File::from(fd.try_clone().unwrap());
        assert!(file.write_all(b"changed").is_err());
        assert!(file.set_len(1).is_err());
        assert_eq!(
            std::fs::read(sealed.path()).unwrap(),
            b"exactly these bytes"
        );
        sealed.discard();
    }
}
