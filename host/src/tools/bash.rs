//! `bash`: run a shell command in the workspace, with a timeout, confined
//! to writing inside the workspace, and with nothing left running after.
//!
//! The command runs as `bash -c <command>` in the workspace root with stdin
//! closed, in its own process group (on unix), with `TMPDIR` set to a
//! private directory (mode 0700) made for the call and removed after it.
//! Reader threads drain stdout and stderr.
//!
//! # The sandbox: what it confines
//!
//! On by default where the kernel has Landlock (Linux 5.13 and later),
//! off with [`BashTool::sandboxed`]`(false)`. The command and every process
//! it starts may *write* only beneath the workspace root and the call's
//! `TMPDIR`, plus `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`,
//! `/dev/urandom` and `/dev/tty`. Anywhere else, files cannot be created,
//! opened for writing, truncated, removed, renamed or linked into or out
//! of a directory, and no directory, symlink, fifo, socket or device node
//! can be made — as far as the kernel's Landlock ABI supports each right
//! (`truncate(2)` by path needs ABI 3 and device ioctls ABI 5: an older ABI
//! leaves those unconfined, and a warning says so once; before ABI 2 no
//! file can be moved or linked to another directory at all, so `mv`
//! between directories falls back to copying). That covers `/proc` and
//! `/sys` too (no `/proc/sys` tuning, no leaving the call's cgroup). The
//! process also runs with `no_new_privs`, so set-uid programs such as
//! `sudo` do not gain privileges. Confinement is per thread in the kernel:
//! a short-lived thread restricts itself and spawns the shell, so the host
//! itself is never restricted.
//!
//! # What it does not confine
//!
//! Reading and executing anything the user can read; the network; Unix
//! sockets (connecting to one is allowed, so a daemon listening on one —
//! a container engine, an init system, a session bus — can still write on
//! the command's behalf); signals to other processes; CPU, memory and disk
//! usage (beyond the timeout). Programs that write caches or locks outside
//! the workspace (`~/.cargo`, `~/.npm`, `~/.cache`, `/dev/shm` for POSIX
//! semaphores, `/var/tmp`) fail there unless pointed into the workspace or
//! `TMPDIR`. And where Landlock is unavailable (an older kernel, another
//! OS), or the sandbox is turned off, bash is **not confined at all**: the
//! workspace check that the file tools apply to their paths does not apply
//! to a shell; [`BashTool::sandbox_active`] says which case holds, and the
//! first unconfined call logs a warning.
//!
//! # Nothing left running
//!
//! When the call ends — the shell exited or the timeout passed — every
//! process the command started is killed, including those that left the
//! process group with `setsid` and double-forked daemons, and those
//! re-parented to the host are reaped; see the `process_tree` module for
//! how they are recognised (a cgroup of the call's own where the host may
//! make one, an environment token, the process group, ancestry), why
//! concurrent calls never touch each other's processes, and the residual
//! gap: without a cgroup, a process that drops the token *and* leaves the
//! group before a watch sweep has seen it.
//!
//! # Output
//!
//! Stdout then stderr, each converted lossily to UTF-8. The whole result,
//! note included, fits in the output cap; when something is cut, the note
//! `[output truncated: N more bytes]` gives N exactly: the bytes of the
//! command's output (stdout plus stderr, as written) that are not shown.

use super::args::optional_whole;
use super::process_tree::{CallProcesses, GATE, TOKEN_VAR, WATCH_EVERY};
use super::sandbox::{self, Confinement};
use super::{ToolContext, ToolError, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// How long to wait for the readers to reach end-of-file once every process
/// of the call was killed (only a process that escaped can hold them).
const KILL_GRACE: Duration = Duration::from_millis(300);
/// How often the shell's status is polled: from the first interval,
/// doubling up to the second (short commands return quickly, long ones
/// cost little).
const POLL: (Duration, Duration) = (Duration::from_millis(1), Duration::from_millis(10));
/// The default largest `timeout_secs` a call may ask for.
const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The smallest output cap: room for the longest truncation note.
const MIN_OUTPUT_CAP: usize = 64;

/// `bash`: runs `bash -c <command>` in the workspace root with a timeout
/// (default 120 s, at most 600 s), an output cap (default 30 000 bytes)
/// and, where the kernel allows, a sandbox confining writes to the
/// workspace (see the module docs).
#[derive(Debug, Clone)]
pub struct BashTool {
    default_timeout: Duration,
    max_timeout: Duration,
    output_cap: usize,
    sandbox: bool,
}

impl Default for BashTool {
    /// A 120 s default timeout, a 30 000-byte output cap, sandboxed.
    fn default() -> Self {
        BashTool::new(Duration::from_secs(120), 30_000)
    }
}

impl BashTool {
    /// A tool whose commands time out after `default_timeout` unless the
    /// call sets `timeout_secs` (at most 600 s, or `default_timeout` if that
    /// is longer; see [`BashTool::max_timeout`]), and whose whole output is
    /// at most `output_cap` bytes (at least 64). Sandboxed where the kernel
    /// allows.
    #[must_use]
    pub fn new(default_timeout: Duration, output_cap: usize) -> Self {
        BashTool {
            default_timeout,
            max_timeout: DEFAULT_MAX_TIMEOUT.max(default_timeout),
            output_cap: output_cap.max(MIN_OUTPUT_CAP),
            sandbox: true,
        }
    }

    /// The largest `timeout_secs` a call may ask for (at least 1 s); a
    /// larger one is refused with an error naming this maximum. Lowers the
    /// default timeout to it if needed.
    #[must_use]
    pub fn max_timeout(mut self, max: Duration) -> Self {
        self.max_timeout = max.max(Duration::from_secs(1));
        self.default_timeout = self.default_timeout.min(self.max_timeout);
        self
    }

    /// Turns the write sandbox on (the default) or off.
    #[must_use]
    pub fn sandboxed(mut self, on: bool) -> Self {
        self.sandbox = on;
        self
    }

    /// Whether this tool's commands run confined: the sandbox is on and
    /// the kernel supports Landlock (perhaps partially, see the module
    /// docs).
    #[must_use]
    pub fn sandbox_active(&self) -> bool {
        self.sandbox && BashTool::sandbox_available()
    }

    /// Whether the running system can confine bash at all (Landlock is
    /// available and enforced); checked once.
    #[must_use]
    pub fn sandbox_available() -> bool {
        sandbox::available() != Confinement::None
    }

    /// One line on the sandbox, for a status display: whether it is on,
    /// off or unavailable, and why.
    #[must_use]
    pub fn sandbox_summary(&self) -> String {
        let kernel = sandbox::describe();
        match (self.sandbox, sandbox::available()) {
            (false, _) => "bash sandbox off: commands may write anywhere the user can".to_owned(),
            (true, Confinement::Full) => format!(
                "bash sandbox on ({kernel}): writes confined to the workspace and a private TMPDIR"
            ),
            (true, Confinement::Partial) => format!(
                "bash sandbox partly on ({kernel}): writes confined to the workspace and a \
                 private TMPDIR, except the rights this kernel lacks"
            ),
            (true, Confinement::None) => {
                format!("bash sandbox unavailable ({kernel}): commands run unconfined")
            }
        }
    }
}

/// The arguments of `bash` (the field docs are what the model reads; the
/// timeout's maximum and default are filled in from the tool's settings).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The bash command line to run.
    pub command: String,
    /// Seconds before the command is killed.
    #[serde(default, deserialize_with = "optional_whole")]
    #[schemars(range(min = 1))]
    pub timeout_secs: Option<u64>,
}

impl TypedTool for BashTool {
    /// Inline under a deadline: it kills the command's process tree by the deadline.
    fn stops_by_deadline(&self) -> bool {
        true
    }

    type Args = BashArgs;

    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        if self.sandbox_active() {
            "Run a shell command with `bash -c` in the workspace root (stdin is closed, so \
             nothing can prompt). Returns stdout then stderr; long output is cut. A non-zero \
             exit status is reported as an error with the output kept. Writes are allowed only \
             inside the workspace and $TMPDIR (a private directory, fresh for each call); \
             anything else is read-only. When the command ends or times out (default 120 s, or \
             `timeout_secs`), every process it started is killed: nothing keeps running in the \
             background."
        } else {
            "Run a shell command with `bash -c` in the workspace root (stdin is closed, so \
             nothing can prompt). Returns stdout then stderr; long output is cut. A non-zero \
             exit status is reported as an error with the output kept. $TMPDIR is a private \
             directory, fresh for each call. When the command ends or times out (default 120 s, \
             or `timeout_secs`), every process it started is killed: nothing keeps running in \
             the background."
        }
    }

    /// States the maximum timeout and the default, which are settings.
    fn adjust_parameters(&self, parameters: &mut serde_json::Value) {
        let max = self.max_timeout.as_secs().max(1);
        let timeout = &mut parameters["properties"]["timeout_secs"];
        timeout["maximum"] = max.into();
        timeout["description"] = format!(
            "Seconds before the command is killed (default {}, at most {max}; \
             a larger value is refused with an error).",
            self.default_timeout.as_secs().max(1)
        )
        .into();
    }

    fn run(&self, arguments: BashArgs, cx: &ToolContext<'_>) -> Result<String, ToolError> {
        let BashArgs {
            command,
            timeout_secs,
        } = arguments;
        let max = self.max_timeout.as_secs().max(1);
        let timeout = match timeout_secs {
            None => self.default_timeout,
            Some(0) => {
                return Err(ToolError::invalid(
                    "timeout_secs",
                    "argument `timeout_secs` must be at least 1",
                ))
            }
            Some(secs) if secs > max => {
                return Err(ToolError::invalid(
                    "timeout_secs",
                    format!(
                        "argument `timeout_secs` is {secs}, above the maximum of {max}: \
                         give at most {max}"
                    ),
                ))
            }
            Some(secs) => Duration::from_secs(secs),
        };
        if command.trim().is_empty() {
            return Err(ToolError::invalid(
                "command",
                "argument `command` is empty: give a command to run",
            ));
        }
        // A deadline from a `tool_call` interceptor (a timeout gate) wins
        // over a longer timeout: the command's process tree dies by then.
        let timeout = cx
            .deadline
            .map_or(timeout, |deadline| timeout.min(deadline));
        self.run_command(&command, timeout, cx)
    }
}

/// What one reader thread captured: the first `cap` bytes and the total.
#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    total: usize,
}

type Shared = Arc<Mutex<Captured>>;

/// Drains `pipe` on a thread, keeping at most `cap` bytes; signals `done`
/// at end-of-file. `None` when no thread could be started (the pipe is then
/// closed, and the writer sees a broken pipe).
fn spawn_reader(
    mut pipe: impl Read + Send + 'static,
    cap: usize,
    done: mpsc::Sender<()>,
) -> Option<Shared> {
    let sink: Shared = Arc::default();
    let shared = Arc::clone(&sink);
    let spawned = thread::Builder::new()
        .name("bash-output".to_owned())
        .spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let mut captured = shared.lock().unwrap_or_else(PoisonError::into_inner);
                        let room = cap.saturating_sub(captured.kept.len());
                        captured.kept.extend_from_slice(&buf[..n.min(room)]);
                        captured.total += n;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = done.send(());
        });
    spawned.ok().map(|_| sink)
}

/// Waits until `count` readers have signalled or `deadline` passes; returns
/// how many are still running.
fn wait_readers(done: &Receiver<()>, mut count: usize, deadline: Instant) -> usize {
    while count > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        match done.recv_timeout(left) {
            Ok(()) => count -= 1,
            Err(mpsc::RecvTimeoutError::Disconnected) => return 0,
            Err(mpsc::RecvTimeoutError::Timeout) => break,
        }
    }
    count
}

/// Whether the shell has exited, *without* reaping it on Linux: while it is
/// an unreaped zombie its pid (and so its process group id) cannot be
/// reused, which the sweep relies on.
fn shell_exited(child: &mut Child) -> std::io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        waitid(WaitId::Pid(Pid::from_child(child)), options)
            .map(|status| status.is_some())
            .map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        child.try_wait().map(|status| status.is_some())
    }
}

/// Logs, once per process, that bash runs unconfined although the sandbox
/// was asked for.
fn warn_unconfined() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tracing::warn!(
            "bash runs unconfined: {}; its commands can write anywhere the user can",
            sandbox::describe()
        );
    });
}

/// Logs, once per process, that the kernel confines bash only partly.
fn warn_partial() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tracing::warn!(
            "bash is confined only partly ({}): write rights this kernel's Landlock lacks \
             (truncate(2) by path before ABI 3, device ioctls before ABI 5) are not confined",
            sandbox::describe()
        );
    });
}

impl BashTool {
    /// Starts `cmd` in the write sandbox (unless it is off or unavailable),
    /// saying once how far it confines.
    fn spawn(&self, cmd: &mut Command, root: &Path, tmp: &Path) -> Result<Child, ToolError> {
        let spawned = if !self.sandbox {
            cmd.spawn()
        } else if sandbox::available() == Confinement::None {
            warn_unconfined();
            cmd.spawn()
        } else {
            let (child, confinement) =
                sandbox::spawn_confined(cmd, &[root, tmp]).map_err(|source| {
                    ToolError::Process {
                        action: "start bash in its sandbox",
                        source,
                    }
                })?;
            match confinement {
                Confinement::Full => {}
                Confinement::Partial => warn_partial(),
                Confinement::None => warn_unconfined(),
            }
            Ok(child)
        };
        spawned.map_err(|source| ToolError::Process {
            action: "start bash",
            source,
        })
    }

    fn run_command(
        &self,
        command: &str,
        timeout: Duration,
        cx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let tmp = private_tmpdir().map_err(|source| ToolError::Process {
            action: "create a private temporary directory",
            source,
        })?;
        let mut calls = CallProcesses::new();
        let mut cmd = shell_command(command, &calls, cx.workspace.root(), tmp.path());
        let mut child = self.spawn(&mut cmd, cx.workspace.root(), tmp.path())?;
        calls.set_shell(child.id());
        // Opens the gate, if any: the shell is in its cgroup now.
        drop(child.stdin.take());

        let (done_tx, done_rx) = mpsc::channel();
        let stdout = child
            .stdout
            .take()
            .and_then(|pipe| spawn_reader(pipe, self.output_cap, done_tx.clone()));
        let stderr = child
            .stderr
            .take()
            .and_then(|pipe| spawn_reader(pipe, self.output_cap, done_tx.clone()));
        drop(done_tx);
        let readers = usize::from(stdout.is_some()) + usize::from(stderr.is_some());

        let timed_out = wait_for_shell(&mut child, &mut calls, timeout);
        // The shell is still unreaped here, so its group id is still its own.
        calls.kill_all();
        #[cfg(not(unix))]
        let _ = child.kill();
        let status = child.wait();
        wait_readers(&done_rx, readers, Instant::now() + KILL_GRACE);
        drop(tmp);

        let captured: Vec<Captured> = [stdout, stderr]
            .into_iter()
            .flatten()
            .map(|s| std::mem::take(&mut *s.lock().unwrap_or_else(PoisonError::into_inner)))
            .collect();
        let output = render(self.output_cap, &captured);
        if timed_out {
            return Err(ToolError::TimedOut {
                seconds: timeout.as_secs(),
                output,
            });
        }
        match status {
            Ok(status) if status.success() => Ok(output),
            Ok(status) => Err(ToolError::CommandFailed {
                status: describe_failure(status),
                output,
            }),
            Err(e) => Err(ToolError::Failed {
                message: format!("could not collect the exit status of bash: {e}"),
                output,
            }),
        }
    }
}

/// A fresh directory only the user can enter (mode 0700), removed on drop.
fn private_tmpdir() -> std::io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix("chimera-bash-").tempdir()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(dir)
}

/// The streams' text, in order, with a newline between two when the first
/// does not end with one, within `cap` bytes in all. When something does
/// not fit (or a reader kept only part of its stream), the text is cut at
/// a character boundary and ends with `[output truncated: N more bytes]`,
/// N being exactly the bytes of the streams not shown (the separator and
/// the note are not output of the command and are not counted).
fn render(cap: usize, streams: &[Captured]) -> String {
    let total: usize = streams.iter().map(|s| s.total).sum();
    let complete = streams.iter().all(|s| s.kept.len() == s.total);
    if complete {
        let mut whole = String::new();
        for stream in streams.iter().filter(|s| !s.kept.is_empty()) {
            if !whole.is_empty() && !whole.ends_with('\n') {
                whole.push('\n');
            }
            whole.push_str(&String::from_utf8_lossy(&stream.kept));
        }
        if whole.len() <= cap {
            return whole;
        }
    }
    // Room for the text: the cap less the longest note it could need (N is
    // at most `total`) and the newline before it.
    let longest_note = note(total).len() + 1;
    let budget = cap.saturating_sub(longest_note);
    let mut text = String::new();
    let mut shown = 0;
    'streams: for stream in streams.iter().filter(|s| !s.kept.is_empty()) {
        let mut separator = !text.is_empty() && !text.ends_with('\n');
        for chunk in stream.kept.utf8_chunks() {
            // Each character stands for its own bytes; each invalid
            // sequence for one replacement character, as in
            // `String::from_utf8_lossy`.
            let invalid = chunk.invalid();
            let units = chunk.valid().chars().map(|c| (c, c.len_utf8())).chain(
                (!invalid.is_empty()).then_some((char::REPLACEMENT_CHARACTER, invalid.len())),
            );
            for (c, raw) in units {
                if text.len() + usize::from(separator) + c.len_utf8() > budget {
                    break 'streams;
                }
                if separator {
                    text.push('\n');
                    separator = false;
                }
                text.push(c);
                shown += raw;
            }
        }
        if stream.kept.len() < stream.total {
            // The reader dropped the rest of this stream: stop here rather
            // than show the next stream as if this one had ended.
            break;
        }
    }
    let more = total - shown;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&note(more));
    text
}

fn note(more: usize) -> String {
    format!("[output truncated: {more} more bytes]")
}

/// `bash -c <command>` in `root`, its own process group, with a private
/// `TMPDIR` and the call's token; behind the cgroup gate when the call has a
/// cgroup (the shell waits on stdin until the host has moved it there).
fn shell_command(command: &str, calls: &CallProcesses, root: &Path, tmp: &Path) -> Command {
    let mut cmd = Command::new("bash");
    if calls.has_cgroup() {
        cmd.arg("-c").arg(GATE).arg("bash").arg(command);
        cmd.stdin(Stdio::piped());
    } else {
        cmd.arg("-c").arg(command);
        cmd.stdin(Stdio::null());
    }
    cmd.current_dir(root)
        .env("TMPDIR", tmp)
        .env(TOKEN_VAR, calls.token())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    cmd
}

/// Polls the shell until it exits (`false`) or `timeout` passes (`true`),
/// sweeping the call's processes every [`WATCH_EVERY`] meanwhile.
fn wait_for_shell(child: &mut Child, calls: &mut CallProcesses, timeout: Duration) -> bool {
    let started = Instant::now();
    let mut watched = started;
    let mut poll = POLL.0;
    loop {
        match shell_exited(child) {
            Ok(true) => return false,
            Ok(false) if started.elapsed() >= timeout => return true,
            Ok(false) => {
                if watched.elapsed() >= WATCH_EVERY {
                    calls.watch();
                    watched = Instant::now();
                }
                thread::sleep(poll);
                poll = (poll * 2).min(POLL.1);
            }
            // Cannot poll: treat as a timeout so nothing is left running.
            Err(_) => return true,
        }
    }
}

fn describe_failure(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    format!("command failed: {status}")
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::tools::testing::{run, setup};
    use crate::tools::{Tool, Workspace};
    use crate::types::ToolResult;
    use serde_json::json;

    /// Runs `command` with `tool` in `ws`.
    fn sh(tool: &BashTool, ws: &Workspace, command: &str) -> ToolResult {
        run(tool, ws, json!({ "command": command }))
    }

    /// The output of `command`, run successfully in a fresh workspace by a
    /// tool whose output cap is `cap`.
    fn output_with_cap(cap: usize, command: &str) -> String {
        let (_dir, ws) = setup();
        let r = sh(&BashTool::new(Duration::from_secs(10), cap), &ws, command);
        assert_eq!(r.error, None, "{command}");
        r.output
    }

    /// Alive and not a zombie (a zombie may wait for a reaper that is slow
    /// or absent in containers).
    fn alive(pid: u32) -> bool {
        let stat = std::path::PathBuf::from(format!("/proc/{pid}/stat"));
        if Path::new("/proc/self/stat").exists() {
            return match std::fs::read_to_string(stat) {
                Ok(text) => {
                    let state = text.rsplit(')').next().unwrap_or("").trim_start();
                    !state.starts_with('Z') && !state.starts_with('X')
                }
                Err(_) => false,
            };
        }
        Command::new("kill")
            .arg("-0")
            .arg(pid.to_string())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    #[test]
    fn success_in_workspace_root() {
        let (_dir, ws) = setup();
        let r = sh(&BashTool::default(), &ws, "pwd; echo err >&2");
        assert_eq!(r.error, None);
        assert_eq!(r.output, format!("{}\nerr\n", ws.root().display()));
    }

    #[test]
    fn stdin_is_closed() {
        assert_eq!(output_with_cap(100, "cat; echo ok"), "ok\n");
    }

    #[test]
    fn nonzero_exit_keeps_output() {
        let (_dir, ws) = setup();
        let r = sh(&BashTool::default(), &ws, "echo out; echo oops >&2; exit 3");
        assert_eq!(r.error.as_deref(), Some("exit status 3"));
        assert_eq!(r.output, "out\noops\n");
    }

    #[test]
    fn output_is_capped() {
        assert_eq!(
            output_with_cap(100, "head -c 5000 /dev/zero | tr '\\0' a"),
            // 100 bytes in all: 64 shown, a newline, and the 35-byte note.
            format!("{}\n[output truncated: 4936 more bytes]", "a".repeat(64))
        );
    }

    #[test]
    fn ill_formed_arguments_are_refused_before_anything_runs() {
        let (_dir, ws) = setup();
        let tool = BashTool::default();
        let error = |args| run(&tool, &ws, args).error.unwrap();
        assert_eq!(
            error(json!({})),
            "missing required argument `command` (a string)"
        );
        assert_eq!(
            error(json!({"command": "touch ran", "timeout_secs": 0})),
            "argument `timeout_secs` must be at least 1"
        );
        assert_eq!(
            error(json!({"command": "touch ran", "timeout_secs": "5"})),
            "argument `timeout_secs` must be a non-negative integer, got \"5\""
        );
        assert_eq!(
            error(json!({"command": "touch ran", "timeout": 5})),
            "unknown argument `timeout`; expected `command` or `timeout_secs`"
        );
        assert_eq!(
            error(json!({"command": "  "})),
            "argument `command` is empty: give a command to run"
        );
        assert!(!ws.root().join("ran").exists());
        // An integral float is a whole number of seconds.
        let r = run(&tool, &ws, json!({"command": "true", "timeout_secs": 5.0}));
        assert_eq!(r.error, None);
    }

    #[test]
    fn timeout_kills_the_process_group() {
        let (_dir, ws) = setup();
        let started = Instant::now();
        let r = run(
            &BashTool::default(),
            &ws,
            json!({"command": "echo started; sleep 30 & echo $! > child.pid; wait", "timeout_secs": 1}),
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            r.error.as_deref(),
            Some("command timed out after 1s; it and every process it started were killed")
        );
        assert_eq!(r.output, "started\n");
        assert_gone_soon(&ws.root().join("child.pid"));
    }

    /// Asserts that the process whose pid `pid_file` holds is gone within
    /// two seconds.
    fn assert_gone_soon(pid_file: &Path) {
        let pid: u32 = std::fs::read_to_string(pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        while alive(pid) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(pid), "background child {pid} survived the call");
    }

    #[test]
    fn background_holding_pipes_does_not_hang() {
        let (_dir, ws) = setup();
        let started = Instant::now();
        let r = sh(
            &BashTool::default(),
            &ws,
            "sleep 30 & echo $! > bg.pid; echo done",
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(r.error, None);
        assert_eq!(r.output, "done\n");
        assert_gone_soon(&ws.root().join("bg.pid"));
    }

    // ----- timeout cap -----

    #[test]
    fn the_schema_states_the_maximum_timeout() {
        let schema = BashTool::default().parameters();
        assert_eq!(schema["properties"]["timeout_secs"]["maximum"], json!(600));
        let schema = BashTool::default()
            .max_timeout(Duration::from_secs(5))
            .parameters();
        assert_eq!(schema["properties"]["timeout_secs"]["maximum"], json!(5));
        let description = schema["properties"]["timeout_secs"]["description"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(description.contains("at most 5"), "{description}");
        assert!(description.contains("default 5"), "{description}");
    }

    #[test]
    fn a_timeout_above_the_maximum_is_refused_naming_the_maximum() {
        let (_dir, ws) = setup();
        let tool = BashTool::default();
        let r = run(&tool, &ws, json!({"command": "true", "timeout_secs": 601}));
        assert_eq!(
            r.error.as_deref(),
            Some("argument `timeout_secs` is 601, above the maximum of 600: give at most 600")
        );
        let r = run(&tool, &ws, json!({"command": "true", "timeout_secs": 600}));
        assert_eq!(r.error, None);
        let tool = BashTool::default().max_timeout(Duration::from_secs(5));
        let r = run(&tool, &ws, json!({"command": "true", "timeout_secs": 6}));
        assert!(r.error.unwrap().contains("maximum of 5"));
    }

    #[test]
    fn a_default_timeout_longer_than_the_maximum_raises_the_maximum() {
        let tool = BashTool::new(Duration::from_secs(900), 1000);
        assert_eq!(
            tool.parameters()["properties"]["timeout_secs"]["maximum"],
            json!(900)
        );
    }

    // ----- the truncation note -----

    fn captured(bytes: &[u8]) -> Captured {
        Captured {
            kept: bytes.to_vec(),
            total: bytes.len(),
        }
    }

    #[test]
    fn output_that_fits_is_shown_whole_with_a_newline_between_the_streams() {
        let out = render(64, &[captured(b"out"), captured(b"err\n")]);
        assert_eq!(out, "out\nerr\n");
    }

    #[test]
    fn the_note_counts_the_bytes_of_multibyte_text_not_shown() {
        // 200 bytes; the longest note ("... 200 more bytes]", 34 bytes) and
        // its newline leave 29 bytes: 14 two-byte characters.
        let out = render(64, &[captured("é".repeat(100).as_bytes())]);
        assert_eq!(
            out,
            format!("{}\n[output truncated: 172 more bytes]", "é".repeat(14))
        );
        assert!(out.len() <= 64);
    }

    #[test]
    fn the_note_counts_invalid_bytes_as_written_not_as_replaced() {
        // 40 invalid bytes become 40 three-byte replacement characters; 30
        // bytes of room show 10 of them, standing for 10 bytes.
        let out = render(64, &[captured(&[0xff; 40])]);
        assert_eq!(
            out,
            format!(
                "{}\n[output truncated: 30 more bytes]",
                "\u{FFFD}".repeat(10)
            )
        );
        assert_eq!(out.len(), 64);
    }

    #[test]
    fn the_separator_between_stdout_and_stderr_is_not_counted() {
        // 70 bytes; the longest note (33 bytes) and its newline leave 30
        // bytes of room: 10 of stdout, the separator, 19 of stderr. 29
        // bytes of output shown, 41 not; 64 bytes in all.
        let out = render(64, &[captured(&[b'a'; 10]), captured(&[b'b'; 60])]);
        assert_eq!(
            out,
            format!(
                "{}\n{}\n[output truncated: 41 more bytes]",
                "a".repeat(10),
                "b".repeat(19)
            )
        );
        assert_eq!(out.len(), 64);
    }

    #[test]
    fn stderr_is_not_shown_after_a_stream_the_reader_cut() {
        let stdout = Captured {
            kept: vec![b'a'; 20],
            total: 5000,
        };
        let out = render(64, &[stdout, captured(b"err")]);
        assert_eq!(
            out,
            format!("{}\n[output truncated: 4983 more bytes]", "a".repeat(20))
        );
    }

    #[test]
    fn truncated_stdout_and_stderr_of_a_real_command_give_the_exact_note() {
        assert_eq!(
            output_with_cap(
                64,
                "head -c 10 /dev/zero | tr '\\0' a; head -c 60 /dev/zero | tr '\\0' b >&2"
            ),
            format!(
                "{}\n{}\n[output truncated: 41 more bytes]",
                "a".repeat(10),
                "b".repeat(19)
            )
        );
    }

    #[test]
    fn truncated_multibyte_output_of_a_real_command_gives_the_exact_note() {
        assert_eq!(
            output_with_cap(64, "for _ in $(seq 100); do printf 'é'; done"),
            format!("{}\n[output truncated: 172 more bytes]", "é".repeat(14))
        );
    }

    #[test]
    fn the_whole_output_with_its_note_fits_the_default_cap() {
        let output = output_with_cap(30_000, "head -c 100000 /dev/zero | tr '\\0' a");
        // 100 000 bytes: the longest note is 37 bytes, so 29 962 are shown.
        assert_eq!(
            output,
            format!(
                "{}\n[output truncated: 70038 more bytes]",
                "a".repeat(29_962)
            )
        );
        assert!(output.len() <= 30_000);
    }

    // ----- TMPDIR -----

    #[test]
    fn tmpdir_is_private_fresh_for_each_call_and_removed_after_it() {
        let (_dir, ws) = setup();
        let tool = BashTool::default();
        let first = sh(&tool, &ws, "printf %s \"$TMPDIR\"");
        let second = sh(&tool, &ws, "printf %s \"$TMPDIR\"");
        assert_ne!(first.output, second.output);
        assert!(!Path::new(&first.output).exists());
        let r = sh(&tool, &ws, "stat -c %a \"$TMPDIR\"; echo hi > \"$TMPDIR/f\" && cat \"$TMPDIR/f\"; mktemp >/dev/null && echo made");
        assert_eq!(r.error, None);
        assert_eq!(r.output, "700\nhi\nmade\n");
    }

    // ----- the sandbox -----

    /// Whether the sandbox tests can run here; says why not when they
    /// cannot.
    #[cfg(target_os = "linux")]
    fn landlock_here() -> bool {
        if BashTool::sandbox_available() {
            return true;
        }
        eprintln!(
            "note: skipping a sandbox test: {}",
            BashTool::default().sandbox_summary()
        );
        false
    }

    /// Names and kinds of what is in `dir`, sorted, with file contents.
    #[cfg(target_os = "linux")]
    fn listing(dir: &Path) -> Vec<(String, String)> {
        let mut entries: Vec<(String, String)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let kind = e.file_type().unwrap();
                let content = if kind.is_file() {
                    std::fs::read_to_string(e.path()).unwrap_or_default()
                } else {
                    format!("{kind:?}")
                };
                (e.file_name().to_string_lossy().into_owned(), content)
            })
            .collect();
        entries.sort();
        entries
    }

    /// Commands that write outside the workspace (`out`) in every way the
    /// sandbox confines. Each expects [`outside_setup`].
    #[cfg(target_os = "linux")]
    fn outside_attempts(out: &str) -> Vec<String> {
        vec![
            format!("echo x > {out}/f"),
            format!("echo x >> {out}/victim"),
            format!("touch {out}/t"),
            format!("mkdir {out}/d"),
            format!("rm {out}/victim"),
            format!("rmdir {out}/sub"),
            format!("truncate -s 0 {out}/victim"),
            format!("mv {out}/victim {out}/renamed"),
            format!("mv inside {out}/moved"),
            format!("mv {out}/victim ./stolen"),
            format!("ln inside {out}/hard"),
            format!("ln -s inside {out}/soft"),
            format!("mkfifo {out}/fifo"),
            format!(
                "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"{out}/sock\")' \
                 2>/dev/null || mknod {out}/sock p"
            ),
        ]
    }

    /// A workspace with a file `inside`, and an outside directory with a
    /// file `victim` and a directory `sub`.
    #[cfg(target_os = "linux")]
    fn outside_setup() -> (tempfile::TempDir, Workspace, tempfile::TempDir) {
        let (dir, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "keep").unwrap();
        std::fs::create_dir(outside.path().join("sub")).unwrap();
        std::fs::write(ws.root().join("inside"), "in").unwrap();
        (dir, ws, outside)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn with_the_sandbox_on_writes_outside_the_workspace_fail_and_change_nothing() {
        if !landlock_here() {
            return;
        }
        let (_dir, ws, outside) = outside_setup();
        let before = listing(outside.path());
        let tool = BashTool::default();
        assert!(tool.sandbox_active());
        for attempt in outside_attempts(&outside.path().display().to_string()) {
            let r = sh(&tool, &ws, &attempt);
            assert!(r.error.is_some(), "{attempt} succeeded: {}", r.output);
            assert_eq!(listing(outside.path()), before, "after {attempt}");
        }
        assert_eq!(
            std::fs::read_to_string(ws.root().join("inside")).unwrap(),
            "in"
        );
        assert!(!ws.root().join("stolen").exists());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn with_the_sandbox_off_the_same_outside_writes_succeed() {
        let tool = BashTool::default().sandboxed(false);
        assert!(!tool.sandbox_active());
        let probe = outside_setup();
        for attempt in outside_attempts(&probe.2.path().display().to_string()) {
            let (_dir, ws, outside) = outside_setup();
            let attempt = attempt.replace(
                &probe.2.path().display().to_string(),
                &outside.path().display().to_string(),
            );
            let before = listing(outside.path());
            let r = sh(&tool, &ws, &attempt);
            assert_eq!(r.error, None, "{attempt}: {}", r.output);
            assert_ne!(listing(outside.path()), before, "{attempt} changed nothing");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn with_the_sandbox_on_writes_inside_the_workspace_tmpdir_and_dev_null_work() {
        if !landlock_here() {
            return;
        }
        let (_dir, ws) = setup();
        let r = sh(
            &BashTool::default(),
            &ws,
            "set -e; echo a > f; echo b >> f; mkdir -p d/e; mv f d/e/g; \
                   ln d/e/g h; ln -s h s; mkfifo p; rm p; truncate -s 1 h; \
                   echo t > \"$TMPDIR/t\"; mv \"$TMPDIR/t\" ./from-tmp; \
                   echo gone > /dev/null; echo err > /dev/stderr; cat s from-tmp",
        );
        assert_eq!(r.error, None, "{}", r.output);
        assert_eq!(r.output, "at\nerr\n");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn with_the_sandbox_on_a_command_cannot_signal_processes_outside_it() {
        if !landlock_here() {
            return;
        }
        let (_dir, ws) = setup();
        let mut bystander = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = bystander.id();
        let r = sh(
            &BashTool::default(),
            &ws,
            &format!("kill -9 {pid} && echo killed"),
        );
        let alive = bystander.try_wait().unwrap().is_none();
        let _ = bystander.kill();
        let _ = bystander.wait();
        let abi: u32 = sandbox::describe()
            .strip_prefix("Landlock ABI ")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if abi < 6 {
            eprintln!("note: this kernel's Landlock cannot scope signals (ABI < 6)");
            return;
        }
        assert!(r.is_error(), "{}", r.output);
        assert!(alive, "the sandboxed command killed a process outside it");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_spawned_process_inherits_the_confinement_and_the_host_does_not_get_it() {
        if !landlock_here() {
            return;
        }
        let (_dir, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("f");
        let host_nnp = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .any(|l| l.starts_with("NoNewPrivs:") && l.ends_with('1'));
        // The child (and its own child) is confined and has no_new_privs.
        let r = sh(
            &BashTool::default(),
            &ws,
            &format!(
                "grep NoNewPrivs /proc/self/status | tr -d ' \\t'; \
                 sh -c 'echo x > {}' 2>/dev/null || echo refused",
                target.display()
            ),
        );
        assert_eq!(r.output, "NoNewPrivs:1\nrefused\n");
        assert!(!target.exists());
        // The host is not: neither this thread nor a new one.
        std::fs::write(&target, "host").unwrap();
        let other = outside.path().join("g");
        let other_clone = other.clone();
        thread::spawn(move || std::fs::write(other_clone, "thread").unwrap())
            .join()
            .unwrap();
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "thread");
        let host_nnp_after = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .any(|l| l.starts_with("NoNewPrivs:") && l.ends_with('1'));
        assert_eq!(host_nnp, host_nnp_after);
        // And an unconfined call from the same host can write there.
        let r = run(
            &BashTool::default().sandboxed(false),
            &ws,
            json!({ "command": format!("echo y > {}", target.display()) }),
        );
        assert_eq!(r.error, None);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "y\n");
    }

    #[test]
    fn the_sandbox_summary_says_on_off_or_unavailable() {
        let off = BashTool::default().sandboxed(false).sandbox_summary();
        assert!(off.starts_with("bash sandbox off"), "{off}");
        let on = BashTool::default().sandbox_summary();
        if BashTool::sandbox_available() {
            assert!(on.contains("on ("), "{on}");
        } else {
            assert!(on.starts_with("bash sandbox unavailable"), "{on}");
        }
    }

    // ----- nothing outlives the call -----

    /// The pid and start time in a file the command wrote with
    /// `echo $pid $(cut -d' ' -f22 /proc/$pid/stat)`.
    #[cfg(target_os = "linux")]
    fn pid_and_start(path: &Path) -> (u32, String) {
        let text = std::fs::read_to_string(path).unwrap();
        let mut words = text.split_whitespace();
        (
            words.next().unwrap().parse().unwrap(),
            words.next().unwrap().to_owned(),
        )
    }

    /// Gone for good: no process with that pid and start time, not even a
    /// zombie (the host reaped it).
    #[cfg(target_os = "linux")]
    fn reaped(pid: u32, start: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                let fields: Vec<&str> = stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect();
                fields.get(19) != Some(&start)
            }
            Err(_) => true,
        }
    }

    /// What `/proc` says of `pid`, for a failure message.
    #[cfg(target_os = "linux")]
    fn describe(pid: u32) -> String {
        let read =
            |what: &str| std::fs::read_to_string(format!("/proc/{pid}/{what}")).unwrap_or_default();
        format!(
            "stat: {}; cgroup: {}; host: {}",
            read("stat").trim(),
            read("cgroup").lines().last().unwrap_or(""),
            std::process::id()
        )
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn setsid_children_and_double_forked_daemons_do_not_outlive_the_call() {
        let (_dir, ws) = setup();
        let started = Instant::now();
        let r = sh(&BashTool::default(), &ws, "
                setsid sh -c 'sleep 2; touch canary1' >/dev/null 2>&1 &
                echo $! $(cut -d' ' -f22 /proc/$!/stat) > setsid.pid
                (sh -c 'echo $$ $(cut -d\" \" -f22 /proc/$$/stat) > daemon.pid; sleep 2; touch canary2' >/dev/null 2>&1 &) &
                while [ ! -s daemon.pid ]; do sleep 0.01; done
                echo returned");
        assert_eq!(r.error, None, "{}", r.output);
        assert_eq!(r.output, "returned\n");
        assert!(started.elapsed() < Duration::from_secs(2));
        for file in ["setsid.pid", "daemon.pid"] {
            let (pid, start) = pid_and_start(&ws.root().join(file));
            assert!(
                reaped(pid, &start),
                "{file}: {pid} is still there: {}",
                describe(pid)
            );
        }
        thread::sleep(Duration::from_secs(3).saturating_sub(started.elapsed()));
        assert!(
            !ws.root().join("canary1").exists(),
            "the setsid child ran on"
        );
        assert!(!ws.root().join("canary2").exists(), "the daemon ran on");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_orphan_that_exits_by_itself_during_the_call_is_reaped() {
        let (_dir, ws) = setup();
        let r = sh(
            &BashTool::default(),
            &ws,
            "
                (sleep 0.2 & echo $! $(cut -d' ' -f22 /proc/$!/stat) > orphan.pid)
                sleep 0.6; echo done",
        );
        assert_eq!(r.output, "done\n");
        let (pid, start) = pid_and_start(&ws.root().join("orphan.pid"));
        assert!(reaped(pid, &start), "{pid} was left: {}", describe(pid));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn concurrent_calls_never_kill_each_others_processes() {
        let (_dir, ws) = setup();
        let long = {
            let ws = ws.clone();
            thread::spawn(move || sh(&BashTool::default(), &ws, "sleep 2; echo done"))
        };
        // Several short calls, each leaving a setsid child for its sweep to
        // kill, while the long one runs.
        thread::sleep(Duration::from_millis(200));
        for i in 0..5 {
            let r = sh(
                &BashTool::default(),
                &ws,
                &format!(
                    "setsid sleep 30 & echo $! $(cut -d' ' -f22 /proc/$!/stat) > short{i}.pid"
                ),
            );
            assert_eq!(r.error, None);
            let (pid, start) = pid_and_start(&ws.root().join(format!("short{i}.pid")));
            assert!(
                reaped(pid, &start),
                "{pid} is still there: {}",
                describe(pid)
            );
            thread::sleep(Duration::from_millis(100));
        }
        let r = long.join().unwrap();
        assert_eq!(r.error, None);
        assert_eq!(r.output, "done\n");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_that_drops_the_token_and_calls_setsid_is_killed_once_a_sweep_saw_it() {
        let (_dir, ws) = setup();
        // The shell lives on for a few watch sweeps, which see the child
        // while its parent is still the shell.
        let r = sh(
            &BashTool::default(),
            &ws,
            "
                env -u CHIMERA_BASH_CALL setsid sleep 30 &
                echo $! $(cut -d' ' -f22 /proc/$!/stat) > hidden.pid
                sleep 0.5",
        );
        assert_eq!(r.error, None);
        let (pid, start) = pid_and_start(&ws.root().join("hidden.pid"));
        assert!(reaped(pid, &start), "{pid} survived: {}", describe(pid));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn with_a_cgroup_even_an_unmarked_child_of_a_command_that_returns_at_once_is_killed() {
        if !CallProcesses::new().has_cgroup() {
            eprintln!("note: skipping: the host may not make a cgroup v2 here");
            return;
        }
        let (_dir, ws) = setup();
        let r = sh(
            &BashTool::default(),
            &ws,
            "
                env -u CHIMERA_BASH_CALL setsid sleep 30 &
                echo $! $(cut -d' ' -f22 /proc/$!/stat) > hidden.pid",
        );
        assert_eq!(r.error, None);
        let (pid, start) = pid_and_start(&ws.root().join("hidden.pid"));
        assert!(reaped(pid, &start), "{pid} survived: {}", describe(pid));
    }
}
