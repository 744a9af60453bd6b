//! The limits of one pack host (memory, CPU, open files, how far standard
//! error may grow) and how its exit is told: by a signal, a status, or a
//! limit it ran into.

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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt as _;
    use std::process::ExitStatus;

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
