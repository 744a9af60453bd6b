//! Finding, killing and reaping every process one `bash` call started.
//!
//! A call's processes are recognised by three marks, any one of which is
//! enough:
//!
//! - **a token** in the environment (`CHIMERA_BASH_CALL`, random per call),
//!   which every descendant inherits unless it drops it on purpose; it
//!   survives `setsid`, double forks and re-parenting;
//! - **the process group** of the shell (it runs in its own group), which
//!   survives a cleared environment, but not `setsid` or `setpgid`; it is
//!   used only while the shell is unreaped, so its id cannot have been
//!   reused;
//! - **ancestry**: a process whose parent was already recognised (by any
//!   mark) is recognised too. The call watches its processes every
//!   [`WATCH_EVERY`] while it runs, so this catches a child that both drops
//!   the token and calls `setsid`, provided it was seen while its parent
//!   was still alive.
//!
//! Processes are named by pid *and* start time, and signalled through a
//! pidfd opened and re-checked against that start time, so a pid reused by
//! an unrelated process is never signalled. Two calls running at once have
//! different tokens and groups, and so never touch each other's processes.
//!
//! The host becomes a child subreaper (on Linux), so orphans of a call are
//! re-parented to the host rather than to `init` (which, in some containers
//! and VMs, never reaps); the sweep reaps those it killed or recognised,
//! through their pidfd, never with a wildcard wait that could steal another
//! part of the host's child.
//!
//! The residual gap: a process that drops the token *and* leaves the group
//! (`setsid`, `setpgid`), and whose parent exits before a watch sweep sees
//! the two together (within about [`WATCH_EVERY`] of its start), is not
//! recognised: it survives the call, and if it exits by itself its zombie
//! stays until the host exits. Re-exporting the token is not a way out:
//! the mark is the exact per-call value.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The environment variable that carries a call's token.
pub(crate) const TOKEN_VAR: &str = "CHIMERA_BASH_CALL";

/// How often a running call sweeps for its processes.
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(50);

/// How long the final kill may keep finding live processes before it gives
/// up (a process stuck in uninterruptible sleep cannot die sooner).
#[cfg(target_os = "linux")]
const KILL_DEADLINE: Duration = Duration::from_secs(5);

/// A fresh token: unique within the host (a counter), and unguessable
/// enough that no other process carries it by chance.
fn new_token() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let random = hasher.finish();
    format!(
        "{}-{}-{random:016x}",
        std::process::id(),
        COUNTER.load(Ordering::Relaxed)
    )
}

/// The processes of one call.
pub(crate) struct CallProcesses {
    token: String,
    #[cfg(target_os = "linux")]
    linux: linux::State,
    #[cfg(all(unix, not(target_os = "linux")))]
    shell: Option<u32>,
}

impl CallProcesses {
    /// A new call (also makes the host a child subreaper, once).
    pub(crate) fn new() -> Self {
        #[cfg(target_os = "linux")]
        linux::become_subreaper();
        CallProcesses {
            token: new_token(),
            #[cfg(target_os = "linux")]
            linux: linux::State::default(),
            #[cfg(all(unix, not(target_os = "linux")))]
            shell: None,
        }
    }

    /// The value of [`TOKEN_VAR`] for this call's shell.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Records the shell's pid (it leads its own process group). Until
    /// [`CallProcesses::kill_all`] returns, the caller must not reap it.
    pub(crate) fn set_shell(&mut self, pid: u32) {
        #[cfg(target_os = "linux")]
        self.linux.set_shell(pid);
        #[cfg(all(unix, not(target_os = "linux")))]
        {
            self.shell = Some(pid);
        }
        #[cfg(not(unix))]
        let _ = pid;
    }

    /// A watch sweep while the call runs: learns the call's processes (so
    /// ancestry can be followed later) and reaps its orphans that exited.
    pub(crate) fn watch(&mut self) {
        #[cfg(target_os = "linux")]
        self.linux.sweep(&self.token, false);
    }

    /// Kills every process of the call, sweeping until a sweep finds none
    /// alive, and reaps those re-parented to the host. The shell itself is
    /// killed too but left for its owner to reap. Returns how many
    /// processes were signalled.
    pub(crate) fn kill_all(&mut self) -> usize {
        #[cfg(target_os = "linux")]
        {
            self.linux.kill_all(&self.token)
        }
        #[cfg(all(unix, not(target_os = "linux")))]
        {
            // No /proc: the process group is all there is.
            use rustix::process::{kill_process_group, Pid, Signal};
            match self.shell.and_then(|pid| Pid::from_raw(pid as i32)) {
                Some(pid) => usize::from(kill_process_group(pid, Signal::KILL).is_ok()),
                None => 0,
            }
        }
        #[cfg(not(unix))]
        {
            0
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::KILL_DEADLINE;
    use rustix::process::{
        getpid, kill_process, pidfd_open, pidfd_send_signal, set_child_subreaper, waitid, Pid,
        PidfdFlags, Signal, WaitId, WaitIdOptions,
    };
    use std::collections::{HashMap, HashSet};
    use std::os::fd::AsFd;
    use std::sync::Once;
    use std::time::{Duration, Instant};

    /// Makes the host a child subreaper, once; a failure is logged, and
    /// orphans then go to `init` (they are still killed).
    pub(super) fn become_subreaper() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            if let Err(e) = set_child_subreaper(Some(getpid())) {
                tracing::warn!(
                    "could not make the host a child subreaper ({e}); orphans of bash \
                     commands are killed but left for init to reap"
                );
            }
        });
    }

    /// A process as `/proc/<pid>/stat` shows it.
    #[derive(Debug, Clone, Copy)]
    struct Proc {
        pid: i32,
        ppid: i32,
        pgrp: i32,
        /// Start time in clock ticks since boot: with the pid, an identity.
        start: u64,
        zombie: bool,
    }

    impl Proc {
        fn ident(&self) -> (i32, u64) {
            (self.pid, self.start)
        }
    }

    fn read_stat(pid: i32) -> Option<Proc> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses: fields start
        // after the last ')'.
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
        // Fields 3 (state), 4 (ppid), 5 (pgrp) and 22 (starttime) of proc(5).
        Some(Proc {
            pid,
            zombie: matches!(*fields.first()?, "Z" | "X" | "x"),
            ppid: fields.get(1)?.parse().ok()?,
            pgrp: fields.get(2)?.parse().ok()?,
            start: fields.get(19)?.parse().ok()?,
        })
    }

    /// Every process but the host.
    fn scan() -> Vec<Proc> {
        let me = getpid().as_raw_nonzero().get();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| pid != me)
            .filter_map(read_stat)
            .collect()
    }

    fn has_token(pid: i32, needle: &[u8]) -> bool {
        match std::fs::read(format!("/proc/{pid}/environ")) {
            Ok(environ) => environ.split(|&b| b == 0).any(|var| var == needle),
            Err(_) => false,
        }
    }

    /// Opens a pidfd for `p` and checks that it still names `p` (same
    /// start time): the pidfd then pins that very process.
    fn pin(p: &Proc) -> Option<rustix::fd::OwnedFd> {
        let fd = pidfd_open(Pid::from_raw(p.pid)?, PidfdFlags::empty()).ok()?;
        let now = read_stat(p.pid)?;
        (now.start == p.start).then_some(fd)
    }

    #[derive(Default)]
    pub(super) struct State {
        /// The shell's pid; its group is a mark while it is unreaped.
        shell: Option<i32>,
        /// Processes recognised as the call's, by identity.
        known: HashSet<(i32, u64)>,
        /// Processes checked and found without the token.
        foreign: HashSet<(i32, u64)>,
    }

    impl State {
        pub(super) fn set_shell(&mut self, pid: u32) {
            self.shell = i32::try_from(pid).ok();
        }

        /// The call's processes now, by all three marks.
        fn recognise(&mut self, token: &str) -> Vec<Proc> {
            let needle = format!("{}={token}", super::TOKEN_VAR).into_bytes();
            let procs = scan();
            let present: HashSet<(i32, u64)> = procs.iter().map(Proc::ident).collect();
            self.known.retain(|id| present.contains(id));
            self.foreign.retain(|id| present.contains(id));

            let mut ours: HashSet<i32> = HashSet::new();
            for p in &procs {
                let id = p.ident();
                let marked = self.known.contains(&id)
                    || self.shell == Some(p.pgrp)
                    || (!self.foreign.contains(&id) && {
                        let found = has_token(p.pid, &needle);
                        if !found {
                            self.foreign.insert(id);
                        }
                        found
                    });
                if marked {
                    ours.insert(p.pid);
                }
            }
            // Ancestry: children of recognised processes, transitively. A
            // child starts no earlier than its parent (guards a reused pid).
            let by_pid: HashMap<i32, &Proc> = procs.iter().map(|p| (p.pid, p)).collect();
            let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
            for p in &procs {
                children.entry(p.ppid).or_default().push(p.pid);
            }
            let mut queue: Vec<i32> = ours.iter().copied().collect();
            while let Some(parent) = queue.pop() {
                let parent_start = by_pid.get(&parent).map_or(0, |p| p.start);
                for &child in children.get(&parent).into_iter().flatten() {
                    let starts_after = by_pid.get(&child).is_some_and(|c| c.start >= parent_start);
                    if starts_after && ours.insert(child) {
                        queue.push(child);
                    }
                }
            }
            let found: Vec<Proc> = procs
                .into_iter()
                .filter(|p| ours.contains(&p.pid))
                .collect();
            for p in &found {
                self.known.insert(p.ident());
                self.foreign.remove(&p.ident());
            }
            found
        }

        /// One sweep: recognise, optionally kill the live ones, reap the
        /// dead ones that are the host's children. Returns how many live
        /// processes it found (and, if `kill`, signalled).
        pub(super) fn sweep(&mut self, token: &str, kill: bool) -> usize {
            let me = getpid().as_raw_nonzero().get();
            let found = self.recognise(token);
            let mut live = 0;
            for p in &found {
                if Some(p.pid) == self.shell {
                    // Its owner reaps it; it is killed through its group.
                    if kill && !p.zombie {
                        live += 1;
                        if let Some(fd) = pin(p) {
                            let _ = pidfd_send_signal(&fd, Signal::KILL);
                        }
                    }
                    continue;
                }
                if p.zombie {
                    if p.ppid == me {
                        reap(p);
                    }
                    continue;
                }
                live += 1;
                if kill {
                    signal(p);
                }
            }
            live
        }

        pub(super) fn kill_all(&mut self, token: &str) -> usize {
            let deadline = Instant::now() + KILL_DEADLINE;
            let mut signalled = 0;
            loop {
                let live = self.sweep(token, true);
                signalled += live;
                if live == 0 {
                    break;
                }
                if Instant::now() >= deadline {
                    tracing::warn!(
                        "{live} process(es) of a bash command did not die within {:?}",
                        KILL_DEADLINE
                    );
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            signalled
        }
    }

    fn signal(p: &Proc) {
        match pidfd_open(
            Pid::from_raw(p.pid).expect("a pid from /proc is positive"),
            PidfdFlags::empty(),
        ) {
            Ok(fd) => {
                if read_stat(p.pid).is_some_and(|now| now.start == p.start) {
                    let _ = pidfd_send_signal(&fd, Signal::KILL);
                }
            }
            // No pidfds (before Linux 5.3): re-check, then signal by pid.
            Err(_) => {
                if let (Some(pid), Some(now)) = (Pid::from_raw(p.pid), read_stat(p.pid)) {
                    if now.start == p.start {
                        let _ = kill_process(pid, Signal::KILL);
                    }
                }
            }
        }
    }

    /// Reaps `p`, a zombie child of the host, through a pidfd (which can
    /// reap only that process) or, without pidfds, by its pid (safe: an
    /// unreaped child's pid cannot be reused).
    fn reap(p: &Proc) {
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG;
        match pin(p) {
            Some(fd) => {
                let _ = waitid(WaitId::PidFd(fd.as_fd()), options);
            }
            None => {
                if let Some(pid) = Pid::from_raw(p.pid) {
                    if read_stat(p.pid).is_some_and(|now| now.start == p.start) {
                        let _ = waitid(WaitId::Pid(pid), options);
                    }
                }
            }
        }
    }
}
