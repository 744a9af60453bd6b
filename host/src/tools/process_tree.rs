//! Finding, killing and reaping every process one `bash` call started.
//!
//! A call's processes are recognised by four marks, any one of which is
//! enough:
//!
//! - **a cgroup** of its own (cgroup v2, where the host may create one
//!   beneath its own: as root, or in a delegated subtree): the shell is
//!   moved into it before it may run the command (see [`GATE`]), and
//!   nothing it starts can leave it without write access to the cgroup
//!   filesystem, which the sandbox denies. It also names exiting processes
//!   and zombies, whose environment is gone. At the end the whole cgroup
//!   is killed at once (`cgroup.kill`, Linux 5.14), then swept like the
//!   rest;
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
//! through their pidfd, never with a wildcard wait that could steal a child
//! another part of the host is waiting for. Being a subreaper is
//! process-wide: orphans of the host's other children (a pack probe's,
//! say) come to the host too, and are not reaped by this module.
//!
//! The residual gap, where no cgroup could be made (not root, no
//! delegation, cgroup v1 only, not Linux): a process that drops the token
//! *and* leaves the group (`setsid`, `setpgid`), and whose parent exits
//! before a watch sweep sees the two together (within about
//! [`WATCH_EVERY`] of its start), is not recognised: it survives the call,
//! and if it exits by itself its zombie stays until the host exits. With a
//! cgroup, the gap is a process that moves itself to another cgroup, which
//! takes write access to the cgroup filesystem: only with the sandbox off,
//! and as root or within a delegated subtree.
//!
//! Long with its tests: the code is its first 564 lines, and the last 158
//! are the tests that pin it, kept beside it.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The environment variable that carries a call's token.
pub(crate) const TOKEN_VAR: &str = "CHIMERA_BASH_CALL";

/// A script for `bash -c GATE bash <command>` that waits for its stdin to
/// close (the host closes it once the shell is in the call's cgroup), then
/// becomes `bash -c <command>` with stdin from `/dev/null`: nothing the
/// command starts can be forked before the move.
pub(crate) const GATE: &str = "read -r _ || :; exec bash -c \"$1\" </dev/null";

/// How often a running call sweeps for its processes.
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(100);

/// How long the final kill may keep finding live processes before it gives
/// up (a process stuck in uninterruptible sleep cannot die sooner).
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "only the /proc sweep on Linux waits")
)]
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
        let token = new_token();
        CallProcesses {
            #[cfg(target_os = "linux")]
            linux: linux::State::new(&token),
            token,
            #[cfg(all(unix, not(target_os = "linux")))]
            shell: None,
        }
    }

    /// A call that makes no cgroup, to test the other marks where a cgroup
    /// could be made.
    #[cfg(test)]
    fn without_cgroup() -> Self {
        let mut calls = CallProcesses::new();
        #[cfg(target_os = "linux")]
        {
            calls.linux = linux::State::without_cgroup();
        }
        calls
    }

    /// The value of [`TOKEN_VAR`] for this call's shell.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Records the shell's pid (it leads its own process group) and moves
    /// it into the call's cgroup, if there is one. Until
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

    /// Whether the call has a cgroup of its own (see the module docs). The
    /// shell must then wait, before it starts anything, until
    /// [`CallProcesses::set_shell`] has moved it there: see [`GATE`].
    pub(crate) fn has_cgroup(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.linux.has_cgroup()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// A watch sweep while the call runs: learns the call's processes (so
    /// ancestry can be followed later) and reaps its orphans that exited.
    pub(crate) fn watch(&mut self) {
        #[cfg(target_os = "linux")]
        self.linux.sweep(&self.token, false);
    }

    /// Kills every process of the call, sweeping until a sweep finds none
    /// alive (or [`KILL_DEADLINE`] passes), and reaps those re-parented to
    /// the host. The shell itself is killed too but left for its owner to
    /// reap.
    pub(crate) fn kill_all(&mut self) {
        #[cfg(target_os = "linux")]
        self.linux.kill_all(&self.token);
        #[cfg(all(unix, not(target_os = "linux")))]
        {
            // No /proc: the process group is all there is.
            use rustix::process::{kill_process_group, Pid, Signal};
            if let Some(pid) = self.shell.and_then(|pid| Pid::from_raw(pid as i32)) {
                let _ = kill_process_group(pid, Signal::KILL);
            }
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
    use std::path::{Path, PathBuf};
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

    /// A process pinned for signalling or reaping.
    enum Pinned {
        /// A pidfd: it names that very process, whatever happens to its pid.
        Fd(rustix::fd::OwnedFd),
        /// No pidfds (before Linux 5.3): the pid, just re-checked.
        Pid(Pid),
    }

    /// Pins `p`: opens a pidfd for its pid, then checks that the process
    /// there is still `p` (same start time), so the pidfd names `p`. `None`
    /// when `p` is gone.
    fn pin(p: &Proc) -> Option<Pinned> {
        let pid = Pid::from_raw(p.pid)?;
        let fd = pidfd_open(pid, PidfdFlags::empty());
        let now = read_stat(p.pid)?;
        if now.start != p.start {
            return None;
        }
        Some(match fd {
            Ok(fd) => Pinned::Fd(fd),
            Err(_) => Pinned::Pid(pid),
        })
    }

    fn kill_one(p: &Proc) {
        match pin(p) {
            Some(Pinned::Fd(fd)) => {
                let _ = pidfd_send_signal(&fd, Signal::KILL);
            }
            Some(Pinned::Pid(pid)) => {
                let _ = kill_process(pid, Signal::KILL);
            }
            None => {}
        }
    }

    /// Reaps `p`, a zombie child of the host, through a pidfd (which can
    /// reap only that process) or by its pid (safe too: an unreaped child's
    /// pid cannot be reused).
    fn reap(p: &Proc) {
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG;
        match pin(p) {
            Some(Pinned::Fd(fd)) => {
                let _ = waitid(WaitId::PidFd(fd.as_fd()), options);
            }
            Some(Pinned::Pid(pid)) => {
                let _ = waitid(WaitId::Pid(pid), options);
            }
            None => {}
        }
    }

    pub(super) struct State {
        /// The shell's pid; its group is a mark while it is unreaped.
        shell: Option<i32>,
        /// The call's own cgroup, where one could be made.
        cgroup: Option<Cgroup>,
        /// Processes recognised as the call's, by identity.
        known: HashSet<(i32, u64)>,
        /// Processes checked and found without the token.
        foreign: HashSet<(i32, u64)>,
    }

    impl State {
        pub(super) fn new(token: &str) -> Self {
            State {
                shell: None,
                cgroup: Cgroup::create(token),
                known: HashSet::new(),
                foreign: HashSet::new(),
            }
        }

        #[cfg(test)]
        pub(super) fn without_cgroup() -> Self {
            State {
                shell: None,
                cgroup: None,
                known: HashSet::new(),
                foreign: HashSet::new(),
            }
        }

        pub(super) fn set_shell(&mut self, pid: u32) {
            self.shell = i32::try_from(pid).ok();
            if let Some(cgroup) = &self.cgroup {
                if let Err(e) = std::fs::write(cgroup.dir.join("cgroup.procs"), pid.to_string()) {
                    tracing::debug!("could not move bash into {}: {e}", cgroup.dir.display());
                    self.cgroup = None;
                }
            }
        }

        /// Whether the call's cgroup is in use.
        pub(super) fn has_cgroup(&self) -> bool {
            self.cgroup.is_some()
        }

        /// The call's processes now, by every mark.
        fn recognise(&mut self, token: &str) -> Vec<Proc> {
            let needle = format!("{}={token}", super::TOKEN_VAR).into_bytes();
            let procs = scan();
            let present: HashSet<(i32, u64)> = procs.iter().map(Proc::ident).collect();
            self.known.retain(|id| present.contains(id));
            self.foreign.retain(|id| present.contains(id));

            let mut ours: HashSet<i32> = HashSet::new();
            for p in &procs {
                let id = p.ident();
                // Checked once per process, then remembered either way. The
                // cgroup is read from `/proc/<pid>/cgroup`, not from
                // `cgroup.procs`, which leaves out exiting processes (and
                // an exiting process has no environment to read either).
                let marked = self.known.contains(&id)
                    || self.shell == Some(p.pgrp)
                    || (!self.foreign.contains(&id) && {
                        let found = has_token(p.pid, &needle)
                            || self.cgroup.as_ref().is_some_and(|c| c.holds(p.pid));
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
                    // Killed like the rest, but its owner reaps it.
                    if !p.zombie {
                        live += 1;
                        if kill {
                            kill_one(p);
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
                    kill_one(p);
                }
            }
            live
        }

        pub(super) fn kill_all(&mut self, token: &str) {
            let deadline = Instant::now() + KILL_DEADLINE;
            if let Some(cgroup) = &self.cgroup {
                // All at once, forks in flight included (Linux 5.14 and
                // later; before, the sweeps below do it one by one).
                let _ = std::fs::write(cgroup.dir.join("cgroup.kill"), "1");
            }
            loop {
                let live = self.sweep(token, true);
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
        }
    }

    /// A cgroup v2 made for one call, beneath the host's own; removed on
    /// drop (once it holds no live process).
    struct Cgroup {
        /// Its directory in the cgroup filesystem.
        dir: PathBuf,
        /// Its path as `/proc/<pid>/cgroup` shows it.
        path: String,
    }

    impl Cgroup {
        /// A new cgroup beneath the host's, or `None` where cgroup v2 is
        /// not mounted or the host may not make one (not root and not
        /// delegated).
        fn create(token: &str) -> Option<Cgroup> {
            let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
            let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim_end();
            let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
            // "<id> <parent> <dev> <root> <mount point> <options> ... - <type> ..."
            let mount = mountinfo.lines().find_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                if right.split_whitespace().next()? != "cgroup2" {
                    return None;
                }
                let fields: Vec<&str> = left.split_whitespace().collect();
                // Only a mount of the namespace's root cgroup maps paths plainly.
                (fields.get(3) == Some(&"/")).then(|| fields.get(4).copied())?
            })?;
            let name = format!("chimera-bash-{token}");
            let path = if own == "/" {
                format!("/{name}")
            } else {
                format!("{own}/{name}")
            };
            let dir = Path::new(mount).join(path.trim_start_matches('/'));
            match std::fs::create_dir(&dir) {
                Ok(()) => Some(Cgroup { dir, path }),
                Err(e) => {
                    tracing::debug!("no cgroup for bash calls ({}): {e}", dir.display());
                    None
                }
            }
        }

        /// Whether `pid` is in it or beneath it (or was, when it died: a
        /// zombie still names its cgroup).
        fn holds(&self, pid: i32) -> bool {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
                return false;
            };
            text.lines().filter_map(|l| l.strip_prefix("0::")).any(|p| {
                p == self.path
                    || p.strip_prefix(self.path.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
        }
    }

    impl Drop for Cgroup {
        fn drop(&mut self) {
            // Children first; a just-killed process may take a moment to
            // leave, so retry briefly.
            for _ in 0..50 {
                let mut dirs = vec![self.dir.clone()];
                let mut order = Vec::new();
                while let Some(dir) = dirs.pop() {
                    if let Ok(entries) = std::fs::read_dir(&dir) {
                        dirs.extend(
                            entries
                                .filter_map(Result::ok)
                                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                                .map(|e| e.path()),
                        );
                    }
                    order.push(dir);
                }
                for dir in order.iter().rev() {
                    let _ = std::fs::remove_dir(dir);
                }
                if !self.dir.exists() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            tracing::debug!("could not remove {}", self.dir.display());
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::{Child, Command, Stdio};
    use std::time::Instant;

    /// Starts `script` as a call's shell would be started (no gate: these
    /// calls have no cgroup), in `dir`, and waits until it has exited
    /// (without reaping it, as the tool does).
    #[allow(
        clippy::zombie_processes,
        reason = "the caller reaps the shell, after kill_all, as the tool does"
    )]
    fn run_shell(calls: &mut CallProcesses, dir: &Path, script: &str) -> Child {
        use std::os::unix::process::CommandExt;
        let child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .env(TOKEN_VAR, calls.token())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        calls.set_shell(child.id());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
            if stat
                .rsplit(')')
                .next()
                .unwrap()
                .trim_start()
                .starts_with('Z')
            {
                return child;
            }
            assert!(Instant::now() < deadline, "the shell did not exit");
            calls.watch();
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The pid and start time the script wrote to `file` with
    /// `echo $pid $(cut -d' ' -f22 /proc/$pid/stat)`.
    fn pid_and_start(file: &Path) -> (i32, String) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(text) = std::fs::read_to_string(file) {
                let words: Vec<&str> = text.split_whitespace().collect();
                if words.len() == 2 {
                    return (words[0].parse().unwrap(), words[1].to_owned());
                }
            }
            assert!(
                Instant::now() < deadline,
                "{} was not written",
                file.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// That process still exists (perhaps as a zombie).
    fn exists(pid: i32, start: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')').next().unwrap().split_whitespace().nth(19) == Some(start)
        })
    }

    const RECORD: &str = "echo $! $(cut -d' ' -f22 /proc/$!/stat)";

    #[test]
    fn without_a_cgroup_the_token_finds_setsid_children_and_double_forks() {
        let dir = tempfile::tempdir().unwrap();
        let mut calls = CallProcesses::without_cgroup();
        let mut shell = run_shell(
            &mut calls,
            dir.path(),
            &format!(
                "setsid sleep 30 & {RECORD} > a
                 (sleep 30 & {RECORD} > b) &
                 while [ ! -s b ]; do sleep 0.01; done"
            ),
        );
        let a = pid_and_start(&dir.path().join("a"));
        let b = pid_and_start(&dir.path().join("b"));
        calls.kill_all();
        shell.wait().unwrap();
        assert!(!exists(a.0, &a.1), "the setsid child is still there");
        assert!(!exists(b.0, &b.1), "the double-forked child is still there");
    }

    #[test]
    fn without_a_cgroup_the_group_finds_a_child_that_dropped_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let mut calls = CallProcesses::without_cgroup();
        let mut shell = run_shell(
            &mut calls,
            dir.path(),
            &format!("env -u {TOKEN_VAR} sleep 30 & {RECORD} > a"),
        );
        let a = pid_and_start(&dir.path().join("a"));
        calls.kill_all();
        shell.wait().unwrap();
        assert!(!exists(a.0, &a.1));
    }

    #[test]
    fn without_a_cgroup_ancestry_finds_a_child_that_dropped_the_token_and_left_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut calls = CallProcesses::without_cgroup();
        // The shell outlives a few watch sweeps (`run_shell` watches).
        let mut shell = run_shell(
            &mut calls,
            dir.path(),
            &format!("env -u {TOKEN_VAR} setsid sleep 30 & {RECORD} > a; sleep 0.3"),
        );
        let a = pid_and_start(&dir.path().join("a"));
        calls.kill_all();
        shell.wait().unwrap();
        assert!(!exists(a.0, &a.1));
    }

    #[test]
    fn a_call_never_kills_the_processes_of_another_call() {
        let dir = tempfile::tempdir().unwrap();
        let mut other = CallProcesses::new();
        let mut other_shell = run_shell(
            &mut other,
            dir.path(),
            &format!("setsid sleep 30 & {RECORD} > theirs; sleep 30 & {RECORD} > grouped"),
        );
        let theirs = pid_and_start(&dir.path().join("theirs"));
        let grouped = pid_and_start(&dir.path().join("grouped"));
        for mut calls in [CallProcesses::new(), CallProcesses::without_cgroup()] {
            let mut shell = run_shell(&mut calls, dir.path(), "setsid sleep 30 &");
            calls.kill_all();
            shell.wait().unwrap();
            assert!(exists(theirs.0, &theirs.1), "another call killed it");
            assert!(exists(grouped.0, &grouped.1), "another call killed it");
        }
        other.kill_all();
        other_shell.wait().unwrap();
        assert!(!exists(theirs.0, &theirs.1));
        assert!(!exists(grouped.0, &grouped.1));
    }

    #[test]
    fn tokens_differ_from_call_to_call() {
        let first = CallProcesses::without_cgroup();
        let second = CallProcesses::without_cgroup();
        assert_ne!(first.token(), second.token());
    }
}
