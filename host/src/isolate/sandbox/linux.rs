//! The confinement on Linux: resource limits, capabilities dropped and
//! `no_new_privs`, Landlock, then seccomp; each protection the kernel
//! lacks is one warning line.

use super::limits::{Limits, MAX_OPEN_FILES, STDERR_GROWTH};
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
pub(super) fn drop_capabilities(warnings: &mut Vec<String>) {
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

/// The pack host's first Landlock domain, entered before its pack's code
/// runs and after its capabilities are dropped (see [`super::start`]):
/// exec of files refused, the signal and abstract-socket scopes (ABI 6),
/// and, for being in a domain at all, no ptrace-mode access to a process
/// outside it (its `/proc/PID/environ`, `mem`, `fd/*`), from the pack's
/// load-time code on. The warning line when there is none.
pub(super) fn first_domain() -> Option<String> {
    let attempt = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::Execute)
        .and_then(|r| r.scope(Scope::from_all(ABI::V6)))
        .and_then(Ruleset::create)
        .and_then(landlock::RulesetCreated::restrict_self);
    match attempt {
        Ok(status) if status.ruleset != RulesetStatus::NotEnforced => None,
        Ok(_) => Some(
            "no Landlock domain before loading: the pack's load-time code may exec and signal"
                .to_owned(),
        ),
        Err(e) => Some(format!(
            "no Landlock domain before loading ({e}): the pack's load-time code may exec and \
             signal"
        )),
    }
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
