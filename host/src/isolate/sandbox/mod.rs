//! The pack host's sandbox: what an isolated pack's process may still do
//! once it has loaded and instantiated its pack.
//!
//! Before any of the pack's code runs ([`start`]): the host starts its pack
//! hosts with an empty environment (`HOME` alone) and has made itself
//! non-dumpable ([`shield_host`]), so its `/proc/PID/environ`, `maps` and
//! `fd/*` answer no pack host; and the pack host ([`before_pack_code`])
//! closes every descriptor it inherited beyond its standard three, drops
//! its capabilities and enters a first Landlock domain.
//!
//! [`confine_pack_host`] is called once, in the child, after the pack is
//! loaded and before the first call is served. It is one-way: nothing in
//! the process can lift any of it again. In order:
//!
//! 1. **Resource limits** (soft and hard, so the pack cannot raise them):
//!    `RLIMIT_DATA` (the private writable memory the pack can fill:
//!    [`Limits::memory_bytes`]), `RLIMIT_AS` (a backstop several times that,
//!    see [`Limits::address_space_bytes`]), `RLIMIT_CPU`
//!    ([`Limits::cpu_seconds`] of CPU over the child's life, then `SIGXCPU`),
//!    `RLIMIT_FSIZE` 0 (no file grows; if standard error is a regular file,
//!    it alone may grow by [`STDERR_GROWTH`](limits::STDERR_GROWTH)), `RLIMIT_CORE` 0 (a crash writes no
//!    core dump), `RLIMIT_NOFILE` ([`MAX_OPEN_FILES`](limits::MAX_OPEN_FILES)), `RLIMIT_MEMLOCK` and
//!    `RLIMIT_MSGQUEUE` 0. `RLIMIT_NPROC` is left alone: it counts every
//!    process of the user on the machine, so any useful value would refuse
//!    the pack's own threads; seccomp refuses new processes instead.
//! 2. **Capabilities** dropped (a pack host started as root keeps root's
//!    uid but none of its powers), and **`no_new_privs`**.
//! 3. **Landlock**: every filesystem write right handled with no rule (no
//!    file or directory is created, written, truncated, removed, renamed
//!    or linked anywhere, no Unix socket path is reached), `execve` of
//!    files refused, TCP bind and connect handled with no rule (ABI 4),
//!    and the abstract-Unix-socket and signal scopes (ABI 6). Reading stays
//!    allowed. Landlock also stops the child from ptracing (or reading
//!    `/proc/PID/mem` or `environ` of) any process outside its domain, the
//!    host included, once its capabilities are gone (the host is
//!    non-dumpable besides, [`shield_host`], for a kernel without Landlock).
//! 4. **seccomp** (all threads, `TSYNC`): these calls fail with `EPERM`:
//!    sockets of every family, exec, new processes (`clone` without
//!    `CLONE_THREAD`; `clone3`, whose flags a filter cannot read,
//!    fails with `ENOSYS` so the C library falls back to `clone`), ptrace
//!    and cross-process memory access, signals to any other process, raising
//!    or setting resource limits, shared memory that would escape
//!    `RLIMIT_DATA` or reach another process (`MAP_SHARED` anonymous maps,
//!    System V and POSIX IPC), `io_uring` (which could open sockets behind
//!    seccomp's back), terminal input injection (`TIOCSTI`), mounts,
//!    namespaces, modules, BPF and the like. A refused call returns an
//!    error rather than killing the process, so a curious pack sees a clean
//!    failure; everything the pack host needs (its inherited socket, memory,
//!    futexes, clocks, threads, exit) stays allowed.
//!
//! Each protection the kernel cannot give becomes one warning line in the
//! result, for the host to pass on (prefixed with the pack's name).
//!
//! The child's standard error is best a pipe the host reads: a regular file
//! there lifts `RLIMIT_FSIZE` to its size plus [`STDERR_GROWTH`](limits::STDERR_GROWTH) (past
//! that, `SIGXFSZ` ends the child), and the host can only name a memory
//! limit it saw the runtime's message for (see [`describe_exit`](limits::describe_exit)).
//!
//! [`limits`] holds the limits and how an exit by one is told; [`start`]
//! what the pack host does before loading;
//! [`linux`] the confinement itself (elsewhere, [`other`]: none);
//! [`attack`] the test that a confined child tries every escape and
//! fails.

#[cfg(all(test, target_os = "linux"))]
mod attack;
mod limits;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(not(target_os = "linux"))]
mod other;
mod start;

#[cfg(unix)]
pub(crate) use limits::describe_exit;
pub(crate) use limits::Limits;
#[cfg(target_os = "linux")]
use linux as imp;
#[cfg(not(target_os = "linux"))]
use other as imp;
pub(crate) use start::{before_pack_code, shield_host};

/// Confines the calling process for good; returns one warning line per
/// protection the kernel cannot give (none on a kernel with Landlock ABI 6
/// or later and seccomp). The lines name no pack: the caller prefixes them.
///
/// Call it once, after the pack is loaded and before any pack code runs on
/// a call; every thread started afterwards inherits all of it.
#[cfg_attr(
    not(test),
    allow(dead_code, reason = "the pack host's child calls it; tests call it")
)]
pub(crate) fn confine_pack_host(limits: &Limits) -> Vec<String> {
    imp::confine(limits)
}
