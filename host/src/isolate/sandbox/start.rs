//! What keeps the host's secrets from a pack host before any code of its
//! pack runs (the pack's load-time constructors and its `new` included).
//!
//! The host starts the pack host with an empty environment (`HOME` alone,
//! see [`crate::isolate`]) and hands it exactly three descriptors: the
//! sealed pack (stdin), its end of the socket (stdout) and a pipe for its
//! standard error. Then, on each side:
//!
//! * **The pack host** ([`before_pack_code`], first thing) closes every
//!   descriptor above 2 (one the host itself inherited without
//!   close-on-exec — a shell's `3<secret`, a supervisor's socket — would
//!   otherwise reach it), drops its capabilities (with `CAP_SYS_PTRACE` a
//!   pack host started as root reads the host's `/proc/PID/environ` and
//!   `fd/*` whatever else holds), and enters a first Landlock domain: exec
//!   of files refused, the signal and abstract-socket scopes, and no
//!   ptrace-mode access (`environ`, `mem`, `maps`, `fd/*`) to a process
//!   outside it. The full confinement ([`super::confine_pack_host`])
//!   follows after loading.
//! * **The host** makes itself non-dumpable ([`shield_host`], once, before
//!   its first pack host starts), as `ssh-agent` does: its `environ`,
//!   `maps`, `mem` and `fd/*` then answer only a process with
//!   `CAP_SYS_PTRACE`, which a pack host never has. That holds where the
//!   kernel has no Landlock, and against any other process of the same
//!   user. (It also means no core dump of the host, and no debugger
//!   attached to it without that capability.)
//!
//! What stays readable of the host is what any local process may read of
//! any other: its `cmdline` (which holds no secret: keys reach `chimera`
//! through variables it is told the names of), `stat` and `status`.

/// Makes this process (the host) non-dumpable, once, before its first pack
/// host starts: its `/proc/PID` entries that show its environment, memory
/// and open files then answer no process without `CAP_SYS_PTRACE`. A
/// failure is one warning line (once).
pub(crate) fn shield_host() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(target_os = "linux")]
        if let Err(e) =
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        {
            tracing::warn!(
                "cannot make this process non-dumpable ({e}): an isolated pack may read its \
                 environment through /proc"
            );
        }
    });
}

/// Closes what the process inherited beyond its standard three descriptors,
/// drops its capabilities and enters the first Landlock domain; one warning
/// line per step that could not be done (none on Linux with Landlock).
///
/// Call it first thing in the pack host, before anything of this process
/// opens a descriptor of its own: every descriptor above 2 is closed.
pub(crate) fn before_pack_code() -> Vec<String> {
    let mut warnings = Vec::new();
    if let Err(why) = close_inherited() {
        warnings.push(format!(
            "cannot close the descriptors inherited from the host ({why}): the pack may read them"
        ));
    }
    #[cfg(target_os = "linux")]
    {
        super::linux::drop_capabilities(&mut warnings);
        warnings.extend(super::linux::first_domain());
    }
    warnings
}

/// Closes every descriptor above standard error.
fn close_inherited() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    if close_range_above_stderr() {
        return Ok(());
    }
    let listed = ["/proc/self/fd", "/dev/fd"].iter().find_map(|dir| {
        let entries = std::fs::read_dir(dir).ok()?;
        Some(
            entries
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .collect::<Vec<_>>(),
        )
    });
    let Some(listed) = listed else {
        return Err("neither close_range(2) nor a listing of /proc/self/fd".to_owned());
    };
    for fd in listed.into_iter().filter(|&fd| fd > 2) {
        close(fd);
    }
    Ok(())
}

/// `close_range(3, ~0, 0)` (Linux 5.9): `false` where the kernel lacks it.
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "close_range(2) has no safe wrapper; it closes descriptors no object of this process owns"
)]
fn close_range_above_stderr() -> bool {
    // SAFETY: a plain system call with integer arguments. It closes every
    // descriptor above 2, and the caller runs before anything in this
    // process opened one of its own: each was inherited, and no `OwnedFd`
    // or `File` refers to it.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, 3_u32, u32::MAX, 0_u32) };
    closed == 0
}

/// Closes `fd`, which was inherited (a failure, `EBADF` for the listing's
/// own descriptor, closed by now, changes nothing).
#[allow(
    unsafe_code,
    reason = "closing a descriptor by number: one inherited, which no object of this process owns"
)]
fn close(fd: i32) {
    // SAFETY: `fd` was inherited (see `before_pack_code`): no `OwnedFd` or
    // `File` of this process refers to it, so nothing closes or uses it
    // after this.
    unsafe { rustix::io::close(fd) };
}
