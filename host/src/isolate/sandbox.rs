//! The pack host's sandbox: what an isolated pack's process may still do
//! once it has loaded and instantiated its pack.
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
//!    it alone may grow by [`STDERR_GROWTH`]), `RLIMIT_CORE` 0 (a crash writes no
//!    core dump), `RLIMIT_NOFILE` ([`MAX_OPEN_FILES`]), `RLIMIT_MEMLOCK` and
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
//!    host included.
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
//! there lifts `RLIMIT_FSIZE` to its size plus [`STDERR_GROWTH`] (past
//! that, `SIGXFSZ` ends the child), and the host can only name a memory
//! limit it saw the runtime's message for (see [`describe_exit`]).

/// The limits of one pack host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Private writable memory (heap, stacks, the pack's data), in bytes:
    /// `RLIMIT_DATA`.
    pub(crate) memory_bytes: u64,
    /// CPU time over the child's whole life, in seconds: `RLIMIT_CPU`.
    pub(crate) cpu_seconds: u64,
}

/// The default memory limit: 1 GiB.
const DEFAULT_MEMORY_BYTES: u64 = 1 << 30;

/// The address-space backstop never goes below this: 8 GiB.
const MIN_ADDRESS_SPACE_BYTES: u64 = 8 << 30;

/// How much a standard error that is a regular file may still grow in the
/// pack host: 64 MiB.
pub(crate) const STDERR_GROWTH: u64 = 64 << 20;

/// `RLIMIT_NOFILE` in the pack host: its socket, standard streams, the
/// pack's memfd and a few files a pack may read.
pub(crate) const MAX_OPEN_FILES: u64 = 64;

impl Default for Limits {
    /// 1 GiB of memory and 10 minutes of CPU.
    ///
    /// The memory limit is `RLIMIT_DATA`, not `RLIMIT_AS`: address space
    /// is mostly reservations in a threaded Rust process (the C library
    /// reserves 64 MiB per malloc arena, thread stacks and guard pages,
    /// the mapped libraries), so an address-space limit tight enough to
    /// matter refuses threads long before memory is used, while
    /// `RLIMIT_DATA` counts exactly the private writable pages a pack can
    /// fill. 1 GiB is far beyond what a policy pack holds and far below the
    /// machine. The CPU limit is a backstop for a child the host has lost
    /// track of: the host's call budget already ends a slow call, and a
    /// child that used up its 10 minutes is restarted by the host.
    fn default() -> Self {
        Limits {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            cpu_seconds: 600,
        }
    }
}

impl Limits {
    /// `RLIMIT_AS`: four times the memory limit, at least 8 GiB. Only a
    /// backstop against mappings `RLIMIT_DATA` does not count.
    pub(crate) fn address_space_bytes(&self) -> u64 {
        self.memory_bytes
            .saturating_mul(4)
            .max(MIN_ADDRESS_SPACE_BYTES)
    }
}

/// What the Rust runtime prints before it aborts on a failed allocation;
/// [`describe_exit`] recognizes a memory limit by it.
const ALLOCATION_FAILED: &str = "memory allocation of ";

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

/// One phrase for how a pack host ended, for the host's one line about it:
/// `was killed by SIGSEGV (invalid memory access)`, `exited with status 3`,
/// `ran out of memory (limit 1024 MiB)`, `used up its CPU time (limit
/// 600 s)`. `stderr_tail` is the end of what the child wrote to standard
/// error (empty if unknown): a failed allocation is told apart from a
/// plain abort by the runtime's message there.
#[cfg(unix)]
pub(crate) fn describe_exit(
    status: std::process::ExitStatus,
    stderr_tail: &str,
    limits: &Limits,
) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    if stderr_tail.contains(ALLOCATION_FAILED) {
        return format!(
            "ran out of memory (limit {} MiB)",
            limits.memory_bytes >> 20
        );
    }
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    let Some(signal) = status.signal() else {
        return format!("ended ({status})");
    };
    let (name, meaning) = signal_name(signal);
    match name.as_str() {
        "SIGXCPU" => format!(
            "used up its CPU time (limit {} s, SIGXCPU)",
            limits.cpu_seconds
        ),
        "SIGXFSZ" => "tried to grow a file (SIGXFSZ)".to_owned(),
        _ if meaning.is_empty() => format!("was killed by {name}"),
        _ => format!("was killed by {name} ({meaning})"),
    }
}

/// A signal's name and, for the ones a crash raises, what it means.
#[cfg(unix)]
fn signal_name(signal: i32) -> (String, &'static str) {
    use rustix::process::Signal;
    let known = [
        (Signal::SEGV, "SIGSEGV", "invalid memory access"),
        (Signal::BUS, "SIGBUS", "invalid memory access"),
        (Signal::ABORT, "SIGABRT", "aborted"),
        (Signal::ILL, "SIGILL", "illegal instruction"),
        (Signal::FPE, "SIGFPE", "arithmetic fault"),
        (Signal::TRAP, "SIGTRAP", "trap"),
        (Signal::SYS, "SIGSYS", "forbidden system call"),
        (Signal::KILL, "SIGKILL", ""),
        (Signal::TERM, "SIGTERM", ""),
        (Signal::INT, "SIGINT", ""),
        (Signal::HUP, "SIGHUP", ""),
        (Signal::PIPE, "SIGPIPE", "wrote to a closed pipe"),
        (Signal::XCPU, "SIGXCPU", "CPU time limit"),
        (Signal::XFSZ, "SIGXFSZ", "file size limit"),
    ];
    known
        .into_iter()
        .find(|(s, _, _)| s.as_raw() == signal)
        .map_or_else(
            || (format!("signal {signal}"), ""),
            |(_, name, meaning)| (name.to_owned(), meaning),
        )
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{Limits, MAX_OPEN_FILES, STDERR_GROWTH};
    use landlock::{
        Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, RestrictSelfAttr,
        Ruleset, RulesetAttr, RulesetStatus, Scope, ABI,
    };
    use rustix::process::{setrlimit, Resource, Rlimit};
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    use std::collections::BTreeMap;

    pub(super) fn confine(limits: &Limits) -> Vec<String> {
        let mut warnings = Vec::new();
        set_limits(limits, &mut warnings);
        drop_capabilities(&mut warnings);
        if let Err(e) = rustix::thread::set_no_new_privs(true) {
            warnings.push(format!("could not set no_new_privs ({e})"));
        }
        landlock(&mut warnings);
        seccomp(&mut warnings);
        warnings
    }

    fn set_limits(limits: &Limits, warnings: &mut Vec<String>) {
        let cpu = limits.cpu_seconds.max(1);
        let fsize = max_file_size();
        let wanted = [
            (
                Resource::Data,
                "memory (RLIMIT_DATA)",
                limits.memory_bytes,
                limits.memory_bytes,
            ),
            (
                Resource::As,
                "address space (RLIMIT_AS)",
                limits.address_space_bytes(),
                limits.address_space_bytes(),
            ),
            // The hard limit one second later: SIGXCPU first, SIGKILL if
            // the pack ignores that.
            (Resource::Cpu, "CPU time (RLIMIT_CPU)", cpu, cpu + 1),
            (Resource::Fsize, "file size (RLIMIT_FSIZE)", fsize, fsize),
            (Resource::Core, "core dumps (RLIMIT_CORE)", 0, 0),
            (
                Resource::Nofile,
                "open files (RLIMIT_NOFILE)",
                MAX_OPEN_FILES,
                MAX_OPEN_FILES,
            ),
            (Resource::Memlock, "locked memory (RLIMIT_MEMLOCK)", 0, 0),
            (Resource::Msgqueue, "message queues (RLIMIT_MSGQUEUE)", 0, 0),
        ];
        for (resource, what, current, maximum) in wanted {
            let limit = Rlimit {
                current: Some(current),
                maximum: Some(maximum),
            };
            if let Err(e) = setrlimit(resource, limit) {
                warnings.push(format!("no limit on {what} ({e})"));
            }
        }
    }

    /// `RLIMIT_FSIZE`: 0, unless standard error is a regular file (the
    /// user redirected the host's `2>` to one): then that file may grow by
    /// [`STDERR_GROWTH`] more, or the pack host's first message would end
    /// it with `SIGXFSZ`. Landlock keeps every other file from being
    /// opened for writing, so only an inherited one could grow at all.
    fn max_file_size() -> u64 {
        match rustix::fs::fstat(std::io::stderr()) {
            Ok(stat)
                if rustix::fs::FileType::from_raw_mode(stat.st_mode)
                    == rustix::fs::FileType::RegularFile =>
            {
                u64::try_from(stat.st_size)
                    .unwrap_or(0)
                    .saturating_add(STDERR_GROWTH)
            }
            _ => 0,
        }
    }

    /// Empties the effective, permitted and inheritable sets (and so the
    /// ambient one). A no-op for an ordinary user.
    fn drop_capabilities(warnings: &mut Vec<String>) {
        use rustix::thread::{capabilities, set_capabilities, CapabilitySet, CapabilitySets};
        let empty = CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        };
        if capabilities(None).is_ok_and(|sets| sets == empty) {
            return;
        }
        if let Err(e) = set_capabilities(None, empty) {
            warnings.push(format!("could not drop capabilities ({e})"));
        }
    }

    /// How many threads the process has (the caller included).
    fn thread_count() -> Option<usize> {
        std::fs::read_dir("/proc/self/task")
            .ok()
            .map(Iterator::count)
    }

    fn landlock(warnings: &mut Vec<String>) {
        let threads = thread_count().unwrap_or(1);
        let attempt = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            // Every write right, ResolveUnix (ABI 9) included; and exec.
            .handle_access(AccessFs::from_write(ABI::V10) | AccessFs::Execute)
            .and_then(|r| r.handle_access(AccessNet::from_all(ABI::V4)))
            .and_then(|r| r.scope(Scope::from_all(ABI::V6)))
            .and_then(Ruleset::create)
            // Every thread of the process, where the kernel can (ABI 8).
            .and_then(|r| r.all_threads(true))
            .and_then(landlock::RulesetCreated::restrict_self);
        let status = match attempt {
            Ok(status) => status,
            Err(e) => {
                warnings.push(format!(
                    "Landlock failed ({e}): file writes are not confined; \
                     sockets and exec are refused by seccomp only"
                ));
                return;
            }
        };
        let abi = match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => effective_abi,
            LandlockStatus::NotEnabled => {
                warnings.push(
                    "Landlock is built into the kernel but not enabled: file writes are not \
                     confined; sockets and exec are refused by seccomp only"
                        .to_owned(),
                );
                return;
            }
            LandlockStatus::NotImplemented => {
                warnings.push(
                    "the kernel has no Landlock: file writes are not confined; \
                     sockets and exec are refused by seccomp only"
                        .to_owned(),
                );
                return;
            }
        };
        if status.ruleset == RulesetStatus::NotEnforced {
            warnings.push(format!(
                "Landlock ABI {} enforced nothing: file writes are not confined",
                abi as u32
            ));
            return;
        }
        let n = abi as u32;
        if abi < ABI::V2 {
            warnings.push(format!(
                "Landlock ABI {n} cannot confine links and renames across directories"
            ));
        }
        if abi < ABI::V3 {
            warnings.push(format!(
                "Landlock ABI {n} cannot refuse truncate(2): files the user may write can be \
                 emptied"
            ));
        }
        if abi < ABI::V4 {
            warnings.push(format!(
                "Landlock ABI {n} has no network rules; TCP is blocked by seccomp only"
            ));
        }
        if abi < ABI::V6 {
            warnings.push(format!(
                "Landlock ABI {n} has no scopes; signals to other processes and abstract Unix \
                 sockets are refused by seccomp only"
            ));
        }
        if threads > 1 && !status.all_threads {
            let others = threads - 1;
            warnings.push(format!(
                "Landlock ABI {n} confines one thread at a time: {others} thread(s) started \
                 before the sandbox keep file access (seccomp covers every thread)"
            ));
        }
    }

    fn seccomp(warnings: &mut Vec<String>) {
        let Ok(arch) = std::env::consts::ARCH.try_into() else {
            warnings.push(format!(
                "seccomp filters are not built for {}: sockets, exec and new processes are \
                 not refused (Landlock still blocks TCP)",
                std::env::consts::ARCH
            ));
            return;
        };
        let me = u64::from(
            rustix::process::getpid()
                .as_raw_nonzero()
                .get()
                .unsigned_abs(),
        );
        let programs = denied_rules(me).and_then(|(eperm, enosys)| {
            let eperm: BpfProgram = SeccompFilter::new(
                eperm,
                SeccompAction::Allow,
                SeccompAction::Errno(errno(libc::EPERM)),
                arch,
            )?
            .try_into()?;
            let enosys: BpfProgram = SeccompFilter::new(
                enosys,
                SeccompAction::Allow,
                SeccompAction::Errno(errno(libc::ENOSYS)),
                arch,
            )?
            .try_into()?;
            Ok((eperm, enosys))
        });
        let applied = programs
            .map_err(seccompiler::Error::from)
            .and_then(|(eperm, enosys)| {
                seccompiler::apply_filter_all_threads(&eperm)?;
                seccompiler::apply_filter_all_threads(&enosys)
            });
        if let Err(e) = applied {
            warnings.push(format!(
                "seccomp is unavailable ({e}): sockets, exec and new processes are not refused \
                 (Landlock still blocks TCP and file writes)"
            ));
        }
    }

    fn errno(code: i32) -> u32 {
        code.unsigned_abs()
    }

    type Rules = BTreeMap<i64, Vec<SeccompRule>>;

    /// The `EPERM` rules and the `ENOSYS` ones (`clone3`).
    fn denied_rules(me: u64) -> Result<(Rules, Rules), seccompiler::BackendError> {
        use SeccompCmpArgLen::{Dword, Qword};
        let cond = SeccompCondition::new;
        let one = |c: SeccompCondition| SeccompRule::new(vec![c]).map(|r| vec![r]);
        let mut eperm: Rules = always_denied()
            .into_iter()
            .map(|n| (n, Vec::new()))
            .collect();
        // New processes: a clone that is not a thread.
        let clone_thread = u64::from(libc::CLONE_THREAD.unsigned_abs());
        eperm.insert(
            libc::SYS_clone,
            one(cond(0, Qword, SeccompCmpOp::MaskedEq(clone_thread), 0)?)?,
        );
        // Signals only to this process.
        for (call, pid_arg) in [
            (libc::SYS_kill, 0),
            (libc::SYS_tgkill, 0),
            (libc::SYS_rt_sigqueueinfo, 0),
            (libc::SYS_rt_tgsigqueueinfo, 0),
        ] {
            eperm.insert(call, one(cond(pid_arg, Dword, SeccompCmpOp::Ne, me)?)?);
        }
        // Reading limits is fine; setting them (ours or another
        // process's) is not.
        eperm.insert(
            libc::SYS_prlimit64,
            one(cond(2, Qword, SeccompCmpOp::Ne, 0)?)?,
        );
        // No typing into the user's terminal through an inherited tty.
        eperm.insert(
            libc::SYS_ioctl,
            vec![
                SeccompRule::new(vec![cond(1, Dword, SeccompCmpOp::Eq, libc::TIOCSTI)?])?,
                SeccompRule::new(vec![cond(1, Dword, SeccompCmpOp::Eq, libc::TIOCLINUX)?])?,
            ],
        );
        // Shared anonymous memory: not counted by RLIMIT_DATA.
        let shared_anon = u64::from((libc::MAP_SHARED | libc::MAP_ANONYMOUS).unsigned_abs());
        eperm.insert(
            libc::SYS_mmap,
            one(cond(
                3,
                Dword,
                SeccompCmpOp::MaskedEq(shared_anon),
                shared_anon,
            )?)?,
        );
        let enosys: Rules = [(libc::SYS_clone3, Vec::new())].into_iter().collect();
        Ok((eperm, enosys))
    }

    /// The calls refused whatever their arguments.
    fn always_denied() -> Vec<i64> {
        let mut calls = vec![
            libc::SYS_socket,
            libc::SYS_socketpair,
            libc::SYS_connect,
            libc::SYS_bind,
            libc::SYS_listen,
            libc::SYS_accept,
            libc::SYS_accept4,
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_process_madvise,
            libc::SYS_pidfd_open,
            libc::SYS_pidfd_getfd,
            libc::SYS_pidfd_send_signal,
            libc::SYS_kcmp,
            libc::SYS_tkill,
            libc::SYS_setrlimit,
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_chroot,
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_fsopen,
            libc::SYS_fsconfig,
            libc::SYS_fsmount,
            libc::SYS_fspick,
            libc::SYS_move_mount,
            libc::SYS_open_tree,
            libc::SYS_mount_setattr,
            libc::SYS_kexec_load,
            libc::SYS_kexec_file_load,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
            libc::SYS_reboot,
            libc::SYS_swapon,
            libc::SYS_swapoff,
            libc::SYS_acct,
            libc::SYS_quotactl,
            libc::SYS_syslog,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_userfaultfd,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_open_by_handle_at,
            libc::SYS_name_to_handle_at,
            libc::SYS_shmget,
            libc::SYS_shmat,
            libc::SYS_shmctl,
            libc::SYS_msgget,
            libc::SYS_msgsnd,
            libc::SYS_msgrcv,
            libc::SYS_msgctl,
            libc::SYS_semget,
            libc::SYS_semop,
            libc::SYS_semtimedop,
            libc::SYS_semctl,
            libc::SYS_mq_open,
            libc::SYS_mq_unlink,
            libc::SYS_mq_timedsend,
            libc::SYS_mq_timedreceive,
            libc::SYS_mq_notify,
            libc::SYS_mq_getsetattr,
            libc::SYS_sethostname,
            libc::SYS_setdomainname,
            libc::SYS_settimeofday,
            libc::SYS_clock_settime,
            libc::SYS_clock_adjtime,
            libc::SYS_adjtimex,
        ];
        #[cfg(target_arch = "x86_64")]
        calls.extend([
            libc::SYS_fork,
            libc::SYS_vfork,
            libc::SYS_uselib,
            libc::SYS_ioperm,
            libc::SYS_iopl,
        ]);
        calls
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::Limits;

    pub(super) fn confine(_limits: &Limits) -> Vec<String> {
        vec![
            "no sandbox on this system: the pack runs in its own process, unconfined (Landlock \
             and seccomp exist only on Linux)"
                .to_owned(),
        ]
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{confine_pack_host, describe_exit, Limits};
    use std::io::{Read as _, Write as _};
    use std::net::TcpListener;
    use std::os::unix::process::ExitStatusExt as _;
    use std::path::{Path, PathBuf};
    use std::process::{Command, ExitStatus, Stdio};
    use std::time::Duration;

    /// Set in the child: the directory it must not write to.
    const DIR_VAR: &str = "CHIMERA_SANDBOX_TEST_DIR";
    /// Set in the child: the listener it must not reach.
    const ADDR_VAR: &str = "CHIMERA_SANDBOX_TEST_ADDR";
    /// The child's memory limit (small, so the test is quick).
    const TEST_MEMORY: u64 = 256 << 20;

    fn errno_name(e: &std::io::Error) -> String {
        match e.raw_os_error() {
            Some(libc::EPERM) => "EPERM".to_owned(),
            Some(libc::EACCES) => "EACCES".to_owned(),
            Some(libc::ENOSYS) => "ENOSYS".to_owned(),
            Some(libc::ENOMEM) => "ENOMEM".to_owned(),
            Some(libc::EFBIG) => "EFBIG".to_owned(),
            Some(libc::ENOENT) => "ENOENT".to_owned(),
            Some(n) => format!("errno {n}"),
            None => e.to_string(),
        }
    }

    fn report<T>(what: &str, result: std::io::Result<T>) {
        let outcome = match result {
            Ok(_) => "ok".to_owned(),
            Err(e) => format!("denied {}", errno_name(&e)),
        };
        println!("ATTACK {what}: {outcome}");
    }

    /// The confined side of
    /// [`a_confined_pack_host_cannot_write_connect_exec_signal_or_outgrow_memory`]:
    /// does nothing unless that test started this binary for it.
    #[test]
    #[ignore = "runs only as the child of the sandbox test"]
    fn confined_child_tries_every_attack() {
        let (Ok(dir), Ok(addr)) = (std::env::var(DIR_VAR), std::env::var(ADDR_VAR)) else {
            return;
        };
        let dir = PathBuf::from(dir);
        let warnings = confine_pack_host(&Limits {
            memory_bytes: TEST_MEMORY,
            cpu_seconds: 30,
        });
        for w in &warnings {
            println!("WARNING {w}");
        }
        let fsize = rustix::process::getrlimit(rustix::process::Resource::Fsize);
        println!("ATTACK fsize: {}", fsize.maximum.unwrap_or(u64::MAX));
        eprintln!("a message on standard error");
        println!("ATTACK stderr: ok");
        report("write", std::fs::write(dir.join("canary"), "escaped"));
        report("mkdir", std::fs::create_dir(dir.join("made")));
        report("remove", std::fs::remove_file(dir.join("existing")));
        report(
            "truncate",
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("existing")),
        );
        report(
            "tcp",
            std::net::TcpStream::connect_timeout(
                &addr.parse().expect("address"),
                Duration::from_secs(2),
            ),
        );
        report("udp", std::net::UdpSocket::bind("127.0.0.1:0"));
        report(
            "unix",
            std::os::unix::net::UnixStream::connect(dir.join("no-such.sock")),
        );
        report("unixpair", std::os::unix::net::UnixStream::pair());
        report("exec", Command::new("/bin/true").status());
        let parent = std::os::unix::process::parent_id();
        report(
            "signal",
            rustix::process::test_kill_process(
                rustix::process::Pid::from_raw(parent.try_into().expect("pid")).expect("pid"),
            )
            .map_err(std::io::Error::from),
        );
        report("environ", std::fs::read(format!("/proc/{parent}/environ")));
        report(
            "rlimit",
            rustix::process::setrlimit(
                rustix::process::Resource::Data,
                rustix::process::Rlimit {
                    current: None,
                    maximum: None,
                },
            )
            .map_err(std::io::Error::from),
        );
        report(
            "prlimit-parent",
            rustix::process::prlimit(
                rustix::process::Pid::from_raw(parent.try_into().expect("pid")),
                rustix::process::Resource::Nofile,
                rustix::process::Rlimit {
                    current: Some(0),
                    maximum: Some(0),
                },
            )
            .map_err(std::io::Error::from),
        );
        let caps = rustix::thread::capabilities(None).expect("capget");
        println!(
            "ATTACK capabilities: {}",
            if caps.effective.is_empty() && caps.permitted.is_empty() {
                "none"
            } else {
                "kept"
            }
        );
        let mut big: Vec<u8> = Vec::new();
        report(
            "memory",
            big.try_reserve_exact(usize::try_from(TEST_MEMORY * 2).expect("size"))
                .map_err(std::io::Error::other),
        );
        // What must keep working.
        report(
            "thread",
            std::thread::spawn(|| 7)
                .join()
                .map_err(|_| std::io::Error::other("panicked")),
        );
        report("read", std::fs::read("/proc/self/status"));
        let mut small = vec![0u8; 16 << 20];
        small.fill(1);
        report("allocate", Ok(small.len()));
        std::io::stdout().flush().expect("flush");
    }

    fn run_child(dir: &Path, addr: &str, stderr: Stdio) -> String {
        let exe = std::env::current_exe().expect("test binary");
        let output = Command::new(exe)
            .args([
                "isolate::sandbox::tests::confined_child_tries_every_attack",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DIR_VAR, dir)
            .env(ADDR_VAR, addr)
            .stdin(Stdio::null())
            .stderr(stderr)
            .output()
            .expect("run the child");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "child failed: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    fn outcome<'a>(stdout: &'a str, what: &str) -> &'a str {
        let prefix = format!("ATTACK {what}: ");
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no result for {what} in:\n{stdout}"))
    }

    #[test]
    fn a_confined_pack_host_cannot_write_connect_exec_signal_or_outgrow_memory() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("existing"), "keep me").expect("write");
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("address").to_string();

        let stdout = run_child(dir.path(), &addr, Stdio::piped());
        assert_eq!(outcome(&stdout, "fsize"), "0", "no file may grow");
        assert_eq!(outcome(&stdout, "stderr"), "ok");

        for (what, expected) in [
            ("write", "denied EACCES"),
            ("mkdir", "denied EACCES"),
            ("remove", "denied EACCES"),
            ("truncate", "denied EACCES"),
            ("tcp", "denied EPERM"),
            ("udp", "denied EPERM"),
            ("unix", "denied EPERM"),
            ("unixpair", "denied EPERM"),
            ("exec", "denied EPERM"),
            ("signal", "denied EPERM"),
            ("environ", "denied EACCES"),
            ("rlimit", "denied EPERM"),
            ("prlimit-parent", "denied EPERM"),
            ("capabilities", "none"),
            ("thread", "ok"),
            ("read", "ok"),
            ("allocate", "ok"),
        ] {
            assert_eq!(outcome(&stdout, what), expected, "{what}:\n{stdout}");
        }
        assert!(
            outcome(&stdout, "memory").starts_with("denied"),
            "memory:\n{stdout}"
        );
        assert!(
            !dir.path().join("canary").exists(),
            "the canary was written"
        );
        assert!(!dir.path().join("made").exists(), "a directory was made");
        let mut kept = String::new();
        std::fs::File::open(dir.path().join("existing"))
            .and_then(|mut f| f.read_to_string(&mut kept))
            .expect("read");
        assert_eq!(kept, "keep me");
        assert!(
            listener.accept().is_err(),
            "the listener accepted a connection"
        );
        // This kernel's warnings, if any, name what is missing; none claims
        // seccomp is gone (every EPERM above came from it).
        assert!(
            !stdout.contains("WARNING seccomp"),
            "seccomp warning:\n{stdout}"
        );
    }

    #[test]
    fn a_pack_host_whose_stderr_is_a_file_may_grow_only_that_file_and_keeps_the_rest() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("existing"), "keep me").expect("write");
        let log = dir.path().join("stderr.log");
        std::fs::write(&log, "before\n").expect("write");
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        let addr = listener.local_addr().expect("address").to_string();
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open");

        let stdout = run_child(dir.path(), &addr, Stdio::from(file));

        assert_eq!(outcome(&stdout, "stderr"), "ok", "{stdout}");
        let grown = "before\n".len() as u64 + super::STDERR_GROWTH;
        assert_eq!(outcome(&stdout, "fsize"), grown.to_string());
        let written = std::fs::read_to_string(&log).expect("read");
        assert!(written.contains("a message on standard error"), "{written}");
        assert_eq!(outcome(&stdout, "write"), "denied EACCES");
        assert!(!dir.path().join("canary").exists());
    }

    #[test]
    fn exits_are_described_by_signal_status_or_limit() {
        let limits = Limits::default();
        let signalled = |s: i32| ExitStatus::from_raw(s);
        let exited = |c: i32| ExitStatus::from_raw(c << 8);
        assert_eq!(
            describe_exit(signalled(libc::SIGSEGV), "", &limits),
            "was killed by SIGSEGV (invalid memory access)"
        );
        assert_eq!(
            describe_exit(signalled(libc::SIGABRT), "", &limits),
            "was killed by SIGABRT (aborted)"
        );
        assert_eq!(
            describe_exit(
                signalled(libc::SIGABRT),
                "memory allocation of 67108864 bytes failed\n",
                &limits
            ),
            "ran out of memory (limit 1024 MiB)"
        );
        assert_eq!(
            describe_exit(signalled(libc::SIGXCPU), "", &limits),
            "used up its CPU time (limit 600 s, SIGXCPU)"
        );
        assert_eq!(
            describe_exit(exited(3), "", &limits),
            "exited with status 3"
        );
        assert_eq!(
            describe_exit(signalled(libc::SIGKILL), "", &limits),
            "was killed by SIGKILL"
        );
    }

    #[test]
    fn the_address_space_backstop_is_never_below_the_memory_limit() {
        let small = Limits::default();
        assert!(small.address_space_bytes() >= 8 << 30);
        let huge = Limits {
            memory_bytes: 16 << 30,
            cpu_seconds: 1,
        };
        assert_eq!(huge.address_space_bytes(), 64 << 30);
    }
}
