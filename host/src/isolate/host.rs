//! The host side of an isolated pack: the child process, its socket, the
//! call deadline, crash handling and restarts (at once after a healthy
//! spell, with back-off when crashes follow one another). Over 700 lines
//! with its tests (the last fifty); the state operations a call may ask
//! are answered in [`super::state`].

use super::state::{answer_state, MAX_STATE_OPS};
use super::transport::DeadlineRead;
use super::wire::{self, FromChild, Hello, ReadError, WIRE_VERSION};
use crate::interception::PackHealth;
use chimera_plugin_api::abi::state::StateServiceArc;
use chimera_plugin_api::abi::{Decision, SeamInput};
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError, Weak};
use std::time::{Duration, Instant};

/// The first restart after a good answer is immediate; the second failure
/// in a row (a crash or a failed restart) waits this long, and each one
/// after it doubles the wait.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// The longest wait between restarts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long a call waits when no call budget is set.
const NO_BUDGET_WAIT: Duration = Duration::from_secs(30);
/// How long an ended child may take to exit after shutdown before it is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// How to start a pack host for one pack.
pub(crate) struct Spawner {
    /// The `chimera` binary run as `pack-host`.
    pub(crate) program: PathBuf,
    /// The sealed pack, handed over as the child's stdin (shared with the
    /// other packs taken from the same bytes).
    pub(crate) memfd: Arc<OwnedFd>,
    /// The pack's entry-point name.
    pub(crate) pack: String,
    /// Its JSON configuration (empty: defaults).
    pub(crate) config: String,
    /// How long loading may take before the child is killed.
    pub(crate) start_timeout: Duration,
    /// The host's gate state, bound to this pack: what its interceptors'
    /// state operations are answered from.
    pub(crate) state: StateServiceArc,
}

/// How many of a pack host's last standard-error lines are kept, and how
/// long one line may be: enough to tell how it ended, bounded whatever
/// it writes.
const STDERR_LINES: usize = 8;
const STDERR_LINE_BYTES: usize = 1024;

/// A pack host's standard error: read on a thread of its own, each line
/// logged at debug level (naming the pack) and the last
/// [`STDERR_LINES`] kept, for the one line that says how it ended — the
/// Rust runtime's "memory allocation of N bytes failed" before an abort
/// is how a memory limit shows. Never copied to the host's own standard
/// error: a crash is one line there, whatever the child printed.
struct StderrTail {
    lines: Arc<Mutex<std::collections::VecDeque<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl StderrTail {
    fn follow(pack: &str, stderr: Option<std::process::ChildStderr>) -> Self {
        let lines = Arc::new(Mutex::new(std::collections::VecDeque::new()));
        let reader = stderr.and_then(|stderr| {
            let kept = Arc::clone(&lines);
            let pack = pack.to_owned();
            std::thread::Builder::new()
                .name("chimera-pack-stderr".to_owned())
                .spawn(move || read_stderr(&pack, stderr, &kept))
                .ok()
        });
        StderrTail { lines, reader }
    }

    /// The kept lines, once the child is gone and its pipe drained.
    fn tail(&mut self) -> String {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn read_stderr(
    pack: &str,
    stderr: std::process::ChildStderr,
    kept: &Mutex<std::collections::VecDeque<String>>,
) {
    use std::io::BufRead;
    let mut reader = io::BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        // At most one bounded line in memory, however long the child's is.
        let read = (&mut reader)
            .take(STDERR_LINE_BYTES as u64)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_owned();
        if !line.ends_with(b"\n") {
            // The rest of an overlong line.
            let _ = reader.skip_until(b'\n');
        }
        tracing::debug!(pack, "pack host: {text}");
        let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() == STDERR_LINES {
            kept.pop_front();
        }
        kept.push_back(text);
    }
}

/// A live pack host.
struct Running {
    process: Child,
    stderr: StderrTail,
    socket: UnixStream,
    /// The read timeout the socket has now.
    timeout: Option<Duration>,
}

impl Spawner {
    /// Starts a pack host and waits for its hello.
    fn spawn(&self) -> Result<(Running, Hello), String> {
        super::sandbox::shield_host();
        let (host_end, child_end) =
            UnixStream::pair().map_err(|e| format!("cannot make a socket pair: {e}"))?;
        let stdin = self
            .memfd
            .try_clone()
            .map_err(|e| format!("cannot hand the pack over: {e}"))?;
        let spec = if self.config.is_empty() {
            self.pack.clone()
        } else {
            format!("{}={}", self.pack, self.config)
        };
        let mut command = Command::new(&self.program);
        // Nothing of the host's environment (its upstream keys) but what
        // the pack host needs: see `super::PACK_HOST_ENV`. No
        // `RUST_BACKTRACE` either: a pack's panic is caught and reported by
        // the SDK, and a backtrace would only be more stderr.
        command
            .env_clear()
            .envs(
                super::PACK_HOST_ENV
                    .iter()
                    .filter_map(|name| std::env::var_os(name).map(|value| (*name, value))),
            )
            .args(["pack-host", "--pack", &spec]);
        if self.state.is_shared() {
            command.arg("--state-shared");
        }
        let process = command
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::from(OwnedFd::from(child_end)))
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.program.display()))?;
        let mut process = process;
        let stderr = StderrTail::follow(&self.pack, process.stderr.take());
        let mut running = Running {
            process,
            stderr,
            socket: host_end,
            timeout: None,
        };
        let mut frame = Vec::new();
        let outcome = running
            .read(&mut frame, self.start_timeout)
            .map_err(|e| match e {
                Failure::TimedOut => format!(
                    "did not finish loading within {:?} (it hangs)",
                    self.start_timeout
                ),
                other => other.describe(&mut running),
            })
            .and_then(|()| match wire::decode_from_child(&frame) {
                Ok(FromChild::Hello(hello)) if hello.wire_version != WIRE_VERSION => Err(format!(
                    "speaks wire version {}, this host {WIRE_VERSION}",
                    hello.wire_version
                )),
                Ok(FromChild::Hello(hello)) if hello.name != self.pack => Err(format!(
                    "says it is pack '{}', not '{}'",
                    hello.name, self.pack
                )),
                Ok(FromChild::Hello(hello)) => Ok(hello),
                Ok(FromChild::Failed(line)) => Err(line),
                Ok(_) => Err("sent something other than its hello".to_owned()),
                Err(e) => Err(format!("sent a malformed hello ({e})")),
            });
        match outcome {
            Ok(hello) => Ok((running, hello)),
            Err(line) => {
                running.end();
                Err(line)
            }
        }
    }
}

/// How a round trip failed.
enum Failure {
    TimedOut,
    Closed,
    Io(io::Error),
    Wire(String),
}

impl Failure {
    /// The failure as the rest of a line after "pack 'x' (isolated) ".
    fn describe(self, running: &mut Running) -> String {
        match self {
            Failure::TimedOut => "did not answer in time".to_owned(),
            Failure::Closed => format!("crashed: {}", running.ending()),
            Failure::Io(error) => format!("crashed: {} ({error})", running.ending()),
            Failure::Wire(e) => format!("sent a malformed frame ({e})"),
        }
    }
}

impl From<ReadError> for Failure {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::Io(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Failure::TimedOut
            }
            ReadError::Io(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
                ) =>
            {
                Failure::Closed
            }
            ReadError::Io(e) => Failure::Io(e),
            ReadError::Wire(e) => Failure::Wire(e.to_string()),
        }
    }
}

impl Running {
    fn read(&mut self, frame: &mut Vec<u8>, within: Duration) -> Result<(), Failure> {
        if self.timeout != Some(within) {
            self.socket
                .set_read_timeout(Some(within))
                .map_err(Failure::Io)?;
            self.timeout = Some(within);
        }
        let mut reader = DeadlineRead::new(&mut self.socket, &mut self.timeout, within);
        wire::read_frame(&mut reader, frame).map_err(Failure::from)
    }

    fn write(&mut self, frame: &[u8]) -> Result<(), Failure> {
        wire::write_frame(&mut self.socket, frame).map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => Failure::Closed,
            _ => Failure::Io(e),
        })
    }

    /// Ends the child and says how it ended: `was killed by SIGSEGV
    /// (invalid memory access)`, `exited with status 3`, `ran out of
    /// memory (limit 1024 MiB)`, ...
    fn ending(&mut self) -> String {
        match self.end() {
            Some(status) => {
                let tail = self.stderr.tail();
                super::sandbox::describe_exit(status, &tail, &super::sandbox::Limits::default())
            }
            None => "ended (no exit status)".to_owned(),
        }
    }

    /// Kills and reaps the child; its exit status.
    fn end(&mut self) -> Option<ExitStatus> {
        if let Ok(Some(status)) = self.process.try_wait() {
            return Some(status);
        }
        // A crash closes the socket a moment before the process is gone.
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(20) {
            if let Ok(Some(status)) = self.process.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = self.process.kill();
        self.process.wait().ok()
    }
}

struct State {
    child: Option<Running>,
    /// The wait before the next restart: zero after a good answer, then
    /// [`FIRST_BACKOFF`] doubling to [`MAX_BACKOFF`] (see [`State::schedule`]).
    backoff: Duration,
    /// While the child is down: when its next start is due (a call that
    /// cannot be answered by then fails fast).
    restart_at: Option<Instant>,
    seq: u64,
    out: Vec<u8>,
    frame: Vec<u8>,
}

impl State {
    /// Schedules the next start of a child that is down: due after the
    /// current back-off, which grows for the failure after this one.
    /// Returns the wait.
    fn schedule(&mut self) -> Duration {
        let wait = self.backoff;
        self.backoff = if wait.is_zero() {
            FIRST_BACKOFF
        } else {
            (wait * 2).min(MAX_BACKOFF)
        };
        self.restart_at = Some(Instant::now() + wait);
        wait
    }
}

/// One pack running in its own process: every interceptor of its chains
/// holds an `Arc` of it, and the last one dropped ends the process.
pub(crate) struct IsolatedPack {
    spawner: Arc<Spawner>,
    hello: Hello,
    health: Arc<PackHealth>,
    budget: Duration,
    state: Mutex<State>,
    /// Signalled (with `state`) by the restart thread after each start
    /// attempt, for the calls waiting for the child to be back.
    restarted: Condvar,
    me: Weak<IsolatedPack>,
}

impl std::fmt::Debug for IsolatedPack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IsolatedPack")
            .field("pack", &self.spawner.pack)
            .finish_non_exhaustive()
    }
}

impl IsolatedPack {
    /// Starts the pack host; an error is one line naming the pack.
    pub(crate) fn start(
        spawner: Arc<Spawner>,
        health: Arc<PackHealth>,
    ) -> Result<Arc<Self>, String> {
        let (running, hello) = spawner
            .spawn()
            .map_err(|line| format!("pack '{}' (isolated) {line}", spawner.pack))?;
        for warning in &hello.warnings {
            tracing::warn!(pack = %spawner.pack, "isolated pack sandbox: {warning}");
        }
        let budget = health.budget().unwrap_or(NO_BUDGET_WAIT);
        Ok(Arc::new_cyclic(|me| IsolatedPack {
            spawner,
            hello,
            health,
            budget,
            state: Mutex::new(State {
                child: Some(running),
                backoff: Duration::ZERO,
                restart_at: None,
                seq: 0,
                out: Vec::new(),
                frame: Vec::new(),
            }),
            restarted: Condvar::new(),
            me: me.clone(),
        }))
    }

    /// What the child said about its pack.
    pub(crate) fn hello(&self) -> &Hello {
        &self.hello
    }

    /// The pack's health record.
    pub(crate) fn health(&self) -> &Arc<PackHealth> {
        &self.health
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn label(&self) -> String {
        format!("pack '{}' (isolated)", self.spawner.pack)
    }

    /// Runs interceptors `indices` (in order, on `input`) in the child as one
    /// round trip: how many allowed, and the first other answer. A call
    /// that finds the child down waits for the restarted one (at most the
    /// call budget, see [`Self::wait_for_child`]) and is judged by it.
    /// Every failure (a deadline, a crash, a malformed reply) is an error
    /// decision after `allowed` interceptors. `Err` when nothing was
    /// called: the child was not back in time (the line says so; it is no
    /// failure of the pack).
    pub(crate) fn call(
        &self,
        indices: &[u32],
        input: &SeamInput<'_>,
    ) -> Result<(usize, Option<Decision>), String> {
        // Waiting for the lock, the child's restart and its reply blocks:
        // off the runtime's workers when called from one.
        crate::runtime::blocking(|| self.call_locked(self.lock(), indices, input))
    }

    /// [`Self::call`] when no other call holds the child; `None` when one
    /// does (a pool then tries another of its processes).
    pub(crate) fn try_call(
        &self,
        indices: &[u32],
        input: &SeamInput<'_>,
    ) -> Option<Result<(usize, Option<Decision>), String>> {
        let guard = match self.state.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(crate::runtime::blocking(|| {
            self.call_locked(guard, indices, input)
        }))
    }

    /// [`Self::call`] with the child's lock held, on the calling thread.
    fn call_locked(
        &self,
        guard: MutexGuard<'_, State>,
        indices: &[u32],
        input: &SeamInput<'_>,
    ) -> Result<(usize, Option<Decision>), String> {
        let mut guard = self.wait_for_child(guard);
        let state = &mut *guard;
        let Some(running) = state.child.as_mut() else {
            return Err(self.unavailable(state));
        };
        state.seq += 1;
        let seq = state.seq;
        let sent = running.write(wire::call(&mut state.out, seq, indices, input));
        // The deadline grows with what the call carries.
        let within = self
            .health
            .policy()
            .budget_for(state.out.len())
            .unwrap_or(self.budget);
        let reply = sent
            .and_then(|()| self.reply_of(running, &mut state.out, &mut state.frame, (seq, within)));
        let failure = match reply {
            Ok(FromChild::Reply {
                seq: got,
                allowed,
                decision,
            }) if got == seq => {
                let allowed = allowed as usize;
                let fits = match &decision {
                    Some(_) => allowed < indices.len(),
                    None => allowed == indices.len(),
                };
                if fits {
                    state.backoff = Duration::ZERO;
                    return Ok((allowed, decision));
                }
                Failure::Wire("a reply that does not match its call".to_owned())
            }
            Ok(_) => Failure::Wire("an answer to another request".to_owned()),
            Err(failure) => failure,
        };
        Ok((0, Some(Decision::error(self.failed(state, failure)))))
    }

    /// The child's reply to call `seq`, each frame waited for at most
    /// `within`, answering the state operations its interceptors ask on
    /// the way (at most [`MAX_STATE_OPS`] a call).
    fn reply_of(
        &self,
        running: &mut Running,
        out: &mut Vec<u8>,
        frame: &mut Vec<u8>,
        (seq, within): (u64, Duration),
    ) -> Result<FromChild, Failure> {
        let mut asked = 0;
        loop {
            running.read(frame, within)?;
            let message =
                wire::decode_from_child(frame).map_err(|e| Failure::Wire(e.to_string()))?;
            let FromChild::StateOp { seq: of, op } = message else {
                return Ok(message);
            };
            asked += 1;
            if of != seq || asked > MAX_STATE_OPS {
                return Err(Failure::Wire(format!(
                    "state operations beyond the {MAX_STATE_OPS} a call may ask"
                )));
            }
            let answer = answer_state(&self.spawner.state, op);
            running.write(wire::state_answer(out, &answer))?;
        }
    }

    /// Waits, at most the call budget, while the child is down and its
    /// next start is due within that wait; returns the lock either way
    /// (the child is back, or it is not). A child whose next start is
    /// further off than the budget (back-off after repeated crashes) is
    /// not waited for: the call fails fast. The lock
    /// is released while waiting, so the restart thread can put the new
    /// child in place, and concurrent callers each wait the same way.
    fn wait_for_child<'s>(&self, guard: MutexGuard<'s, State>) -> MutexGuard<'s, State> {
        if guard.child.is_some() {
            return guard;
        }
        let until = Instant::now() + self.budget;
        self.restarted
            .wait_timeout_while(guard, self.budget, |state| {
                state.child.is_none() && state.restart_at.is_some_and(|at| at <= until)
            })
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }

    /// The line for a call made while the child is down.
    fn unavailable(&self, state: &State) -> String {
        let when = match state.restart_at {
            Some(at) if at > Instant::now() => {
                format!("in {} ms", (at - Instant::now()).as_millis())
            }
            Some(_) => format!("not back within {} ms", self.budget.as_millis()),
            None => "no restart scheduled".to_owned(),
        };
        format!(
            "{} is restarting; calls fail until it is back ({when})",
            self.label()
        )
    }

    /// Ends the child after `failure`, schedules a restart, and returns the
    /// one line that says so.
    fn failed(&self, state: &mut State, failure: Failure) -> String {
        let Some(mut running) = state.child.take() else {
            return self.unavailable(state);
        };
        let what = match failure {
            Failure::TimedOut => {
                running.end();
                format!(
                    "did not answer within {} ms: killed",
                    self.budget.as_millis()
                )
            }
            other => {
                let line = other.describe(&mut running);
                running.end();
                line
            }
        };
        let wait = state.schedule();
        let line = if wait.is_zero() {
            format!("{} {what}; restarting", self.label())
        } else {
            format!(
                "{} {what}; restarting in {} ms",
                self.label(),
                wait.as_millis()
            )
        };
        tracing::warn!("{line}");
        if !self.restart_after(wait) {
            state.restart_at = None;
        }
        line
    }

    /// Starts a new child after `wait`, on a thread of its own (the call
    /// that failed does not wait for a process to start), retrying with
    /// back-off, and wakes the calls waiting for it after each attempt.
    /// `false` when no thread could be started (one line says so).
    fn restart_after(&self, wait: Duration) -> bool {
        let me = self.me.clone();
        let spawned = std::thread::Builder::new()
            .name("chimera-pack-restart".to_owned())
            .spawn(move || {
                let mut wait = wait;
                loop {
                    std::thread::sleep(wait);
                    let Some(pack) = me.upgrade() else {
                        return;
                    };
                    match pack.spawner.spawn() {
                        Ok((running, hello)) if hello.registrations == pack.hello.registrations => {
                            let mut state = pack.lock();
                            state.child = Some(running);
                            state.restart_at = None;
                            pack.restarted.notify_all();
                            return;
                        }
                        outcome => {
                            let line = match outcome {
                                Ok((mut running, _)) => {
                                    running.end();
                                    "came back with other interceptors".to_owned()
                                }
                                Err(line) => line,
                            };
                            let mut state = pack.lock();
                            wait = state.schedule();
                            // Waiting calls look again: the next attempt
                            // may come too late for them.
                            pack.restarted.notify_all();
                            tracing::warn!(
                                "{} did not restart: {line}; retrying in {} ms",
                                pack.label(),
                                wait.as_millis()
                            );
                        }
                    }
                }
            });
        match spawned {
            Ok(_) => true,
            Err(error) => {
                tracing::warn!("{}: cannot schedule a restart: {error}", self.label());
                false
            }
        }
    }

    /// The pack's state, if the child answers within the budget.
    pub(crate) fn export_state(&self) -> Option<String> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let running = state.child.as_mut()?;
        state.seq += 1;
        let seq = state.seq;
        let outcome = running
            .write(wire::export(&mut state.out, seq))
            .and_then(|()| running.read(&mut state.frame, self.budget));
        match outcome.map(|()| wire::decode_from_child(&state.frame)) {
            Ok(Ok(FromChild::State { seq: got, json })) if got == seq => {
                (!json.is_empty()).then_some(json)
            }
            Ok(_) => {
                self.failed(state, Failure::Wire("a bad state answer".to_owned()));
                None
            }
            Err(failure) => {
                self.failed(state, failure);
                None
            }
        }
    }

    /// Hands the child state exported by an earlier build.
    pub(crate) fn import_state(&self, json: &str) -> Result<(), String> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(running) = state.child.as_mut() else {
            return Err(self.unavailable(state));
        };
        state.seq += 1;
        let seq = state.seq;
        let outcome = running
            .write(wire::import(&mut state.out, seq, json))
            .and_then(|()| running.read(&mut state.frame, self.budget));
        match outcome.map(|()| wire::decode_from_child(&state.frame)) {
            Ok(Ok(FromChild::Imported { seq: got, outcome })) if got == seq => outcome,
            Ok(_) => Err(self.failed(state, Failure::Wire("a bad import answer".to_owned()))),
            Err(failure) => Err(self.failed(state, failure)),
        }
    }
}

impl Drop for IsolatedPack {
    /// Asks the child to exit, closes its socket, and reaps it on a thread
    /// of its own (killed after a grace period): no zombie stays behind.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let Some(mut running) = state.child.take() else {
            return;
        };
        let _ = running.write(wire::shutdown(&mut state.out));
        let _ = running.socket.shutdown(std::net::Shutdown::Both);
        let reap = move || {
            let started = Instant::now();
            while started.elapsed() < SHUTDOWN_GRACE {
                if let Ok(Some(_)) = running.process.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = running.process.kill();
            let _ = running.process.wait();
        };
        let _ = std::thread::Builder::new()
            .name("chimera-pack-reap".to_owned())
            .spawn(reap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`StderrTail`] keeps of a child running `script` in `sh`.
    fn kept(script: &str) -> String {
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh runs");
        let mut tail = StderrTail::follow("test", child.stderr.take());
        child.wait().expect("sh ends");
        tail.tail()
    }

    #[test]
    fn the_first_restart_is_immediate_and_failures_in_a_row_back_off_doubling_to_the_cap() {
        let mut state = State {
            child: None,
            backoff: Duration::ZERO,
            restart_at: None,
            seq: 0,
            out: Vec::new(),
            frame: Vec::new(),
        };
        let waits: Vec<u128> = (0..10).map(|_| state.schedule().as_millis()).collect();
        assert_eq!(waits, [0, 50, 100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert!(state.restart_at.is_some(), "a start is scheduled");
    }

    #[test]
    fn a_pack_hosts_stderr_is_kept_bounded_in_lines_and_length() {
        // 5 000 bytes without a newline, then two short lines.
        let kept_long =
            kept("head -c 5000 /dev/zero | tr '\\0' a >&2; echo >&2; echo one >&2; echo two >&2");
        let lines: Vec<&str> = kept_long.lines().collect();
        assert_eq!(lines.len(), 3, "{kept_long}");
        assert_eq!(lines[0].len(), STDERR_LINE_BYTES);
        assert_eq!(&lines[1..], ["one", "two"]);
        // Twelve lines: the last eight are kept.
        let kept_many = kept("for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line $i >&2; done");
        let lines: Vec<&str> = kept_many.lines().collect();
        assert_eq!(lines.len(), STDERR_LINES, "{kept_many}");
        assert_eq!((lines[0], lines[7]), ("line 5", "line 12"));
    }
}
