//! Write confinement for `bash`: a Landlock domain that lets the command
//! and everything it starts write only beneath a few directories.
//!
//! Landlock domains (and `no_new_privs`, which unprivileged Landlock
//! requires) belong to a *thread* and are inherited by every process it
//! starts. So a confined spawn runs on its own short-lived thread, which
//! restricts itself and then spawns the command: the child inherits the
//! domain, the thread ends, and the rest of the host is never restricted.
//!
//! The ruleset handles the filesystem rights that modify something — write,
//! truncate, remove, rename/link across directories (`Refer`), make
//! regular files, directories, symlinks, fifos, sockets and devices, and
//! device ioctls — as far as the running kernel supports them
//! (`CompatLevel::BestEffort`). Reading, listing and executing are not
//! handled, so they stay allowed everywhere. Connecting to a Unix socket
//! (`ResolveUnix`, ABI 9) is deliberately not handled: it is not a write,
//! and refusing it would break name resolution and other local services.
//!
//! Where Landlock is missing (an older kernel, another OS) the spawn runs
//! unconfined; [`available`] says which case this is.

use std::path::Path;
use std::process::{Child, Command};

/// How a spawned command ended up confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(target_os = "linux"),
    allow(
        dead_code,
        reason = "only Linux has Landlock, so only None occurs elsewhere"
    )
)]
pub(crate) enum Confinement {
    /// Every write right this module asks for is enforced.
    Full,
    /// Landlock is on, but the kernel's ABI lacks some of the rights:
    /// before ABI 3, `truncate(2)` by path is not confined; before ABI 5,
    /// device ioctls are not. (Before ABI 2 nothing can be moved or linked
    /// to another directory at all, even inside the workspace.)
    Partial,
    /// No confinement: Landlock is unavailable on this system.
    None,
}

/// Files (not directories) the command may write to wherever the
/// workspace is: harmless sinks and sources. Missing ones are skipped.
#[cfg(target_os = "linux")]
const DEVICE_FILES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// Of [`DEVICE_FILES`], those that may also take ioctls. `/dev/tty` may
/// not (`TIOCSTI` could push input into the user's terminal), nor the
/// random devices (their ioctls credit or clear entropy).
#[cfg(target_os = "linux")]
const IOCTL_FILES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

#[cfg(target_os = "linux")]
mod imp {
    use super::{Confinement, DEVICE_FILES, IOCTL_FILES};
    use landlock::{
        AccessFs, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
    };
    use std::path::Path;
    use std::process::{Child, Command};
    use std::sync::OnceLock;

    /// The write rights, as of the newest ABI whose additions are all
    /// write-ish (ABI 9 adds `ResolveUnix`, see the module docs).
    fn write_rights() -> BitFlags<AccessFs> {
        AccessFs::from_write(ABI::V8)
    }

    /// The rights that make sense on a single file.
    fn file_write_rights(ioctl: bool) -> BitFlags<AccessFs> {
        let mut rights = AccessFs::WriteFile | AccessFs::Truncate;
        if ioctl {
            rights |= AccessFs::IoctlDev;
        }
        rights
    }

    /// Restricts the calling thread: writes only beneath `writable`, and to
    /// the device files.
    fn restrict_current_thread(writable: &[&Path]) -> std::io::Result<Confinement> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            std::io::Error::other(format!("could not set up the bash sandbox: {what}: {e}"))
        };
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(write_rights())
            .map_err(|e| failed("handling write access", &e))?
            // No signals to processes outside the sandbox (ABI 6): a command
            // cannot kill the host, or anything else the user runs.
            .scope(Scope::Signal)
            .map_err(|e| failed("scoping signals", &e))?
            .create()
            .map_err(|e| failed("creating the ruleset", &e))?;
        for dir in writable {
            let fd = PathFd::new(dir).map_err(|e| failed(&dir.display().to_string(), &e))?;
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, write_rights()))
                .map_err(|e| failed(&dir.display().to_string(), &e))?;
        }
        for file in DEVICE_FILES {
            let Ok(fd) = PathFd::new(file) else { continue };
            let rights = file_write_rights(IOCTL_FILES.contains(&file));
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(|e| failed(file, &e))?;
        }
        let status = ruleset
            .restrict_self()
            .map_err(|e| failed("restricting the thread", &e))?;
        Ok(match status.ruleset {
            RulesetStatus::FullyEnforced => Confinement::Full,
            RulesetStatus::PartiallyEnforced => Confinement::Partial,
            RulesetStatus::NotEnforced => Confinement::None,
        })
    }

    /// Spawns `cmd` from a fresh thread confined to `writable`.
    pub(super) fn spawn(
        cmd: &mut Command,
        writable: &[&Path],
    ) -> std::io::Result<(Child, Confinement)> {
        std::thread::scope(|scope| {
            let spawner = std::thread::Builder::new()
                .name("bash-sandbox".to_owned())
                .spawn_scoped(scope, || {
                    let confinement = restrict_current_thread(writable)?;
                    Ok((cmd.spawn()?, confinement))
                })?;
            spawner
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the sandbox thread panicked")))
        })
    }

    /// What the kernel supports, found once by restricting a throwaway
    /// thread the same way a call would.
    pub(super) fn probe() -> (Confinement, Option<String>) {
        static PROBE: OnceLock<(Confinement, Option<String>)> = OnceLock::new();
        PROBE
            .get_or_init(|| {
                let probed = std::thread::Builder::new()
                    .name("bash-sandbox-probe".to_owned())
                    .spawn(|| {
                        let status = Ruleset::default()
                            .set_compatibility(CompatLevel::BestEffort)
                            .handle_access(write_rights())
                            .and_then(Ruleset::create)
                            .and_then(RulesetCreated::restrict_self);
                        match status {
                            Ok(status) => {
                                let abi = match status.landlock {
                                    LandlockStatus::Available { effective_abi, .. } => {
                                        Some(format!("Landlock ABI {effective_abi}"))
                                    }
                                    LandlockStatus::NotEnabled => {
                                        Some("Landlock is built in but not enabled".to_owned())
                                    }
                                    LandlockStatus::NotImplemented => {
                                        Some("the kernel has no Landlock".to_owned())
                                    }
                                };
                                let confinement = match status.ruleset {
                                    RulesetStatus::FullyEnforced => Confinement::Full,
                                    RulesetStatus::PartiallyEnforced => Confinement::Partial,
                                    RulesetStatus::NotEnforced => Confinement::None,
                                };
                                (confinement, abi)
                            }
                            Err(e) => (Confinement::None, Some(e.to_string())),
                        }
                    })
                    .and_then(|thread| {
                        thread
                            .join()
                            .map_err(|_| std::io::Error::other("the probe thread panicked"))
                    });
                probed.unwrap_or_else(|e| (Confinement::None, Some(e.to_string())))
            })
            .clone()
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::Confinement;
    use std::path::Path;
    use std::process::{Child, Command};

    pub(super) fn spawn(
        cmd: &mut Command,
        _writable: &[&Path],
    ) -> std::io::Result<(Child, Confinement)> {
        Ok((cmd.spawn()?, Confinement::None))
    }

    pub(super) fn probe() -> (Confinement, Option<String>) {
        (
            Confinement::None,
            Some("Landlock exists only on Linux".to_owned()),
        )
    }
}

/// Spawns `cmd` so that it, and everything it starts, can write only
/// beneath `writable` (and to the harmless device files), as far as the
/// kernel allows; the result says how far that was. An error means the
/// sandbox could not be set up (for example a `writable` directory could
/// not be opened) and nothing was started.
pub(crate) fn spawn_confined(
    cmd: &mut Command,
    writable: &[&Path],
) -> std::io::Result<(Child, Confinement)> {
    imp::spawn(cmd, writable)
}

/// How a confined spawn would be confined on this system (checked once).
pub(crate) fn available() -> Confinement {
    imp::probe().0
}

/// One line on the kernel's Landlock support, for messages.
pub(crate) fn describe() -> String {
    imp::probe().1.unwrap_or_default()
}
