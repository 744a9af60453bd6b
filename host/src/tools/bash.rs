//! `bash`: run a shell command in the workspace, with a timeout.
//!
//! The command runs as `bash -c <command>` in the workspace root with stdin
//! closed, in its own process group (on unix), so that a timeout can kill
//! everything it started. Reader threads drain stdout and stderr; a
//! background process that keeps the pipes open cannot make the tool hang:
//! once the shell has exited, the readers get a short grace period, then
//! the process group is killed and the output collected so far returned.

use super::args::{optional_u64, required_str};
use super::{Tool, ToolContext};
use crate::types::ToolResult;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// How long the readers may take to reach end-of-file after the shell exits.
const READER_GRACE: Duration = Duration::from_millis(300);
/// How long to wait for the readers after the process group was killed.
const KILL_GRACE: Duration = Duration::from_millis(200);
/// How often the shell's status is polled.
const POLL: Duration = Duration::from_millis(10);

/// `bash`: runs `bash -c <command>` in the workspace root with a timeout
/// (default 120 s) and an output cap (default 30 000 bytes).
#[derive(Debug, Clone)]
pub struct BashTool {
    default_timeout: Duration,
    output_cap: usize,
}

impl Default for BashTool {
    /// A 120 s default timeout and a 30 000-byte output cap.
    fn default() -> Self {
        BashTool::new(Duration::from_secs(120), 30_000)
    }
}

impl BashTool {
    /// A tool whose commands time out after `default_timeout` unless the
    /// call sets `timeout_secs`, and whose output is cut at `output_cap`
    /// bytes.
    pub fn new(default_timeout: Duration, output_cap: usize) -> Self {
        BashTool {
            default_timeout,
            output_cap,
        }
    }
}

impl Tool for BashTool {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "Run a shell command with `bash -c` in the workspace root (stdin is closed, so \
         nothing can prompt). Returns stdout then stderr; long output is cut. A non-zero \
         exit status is reported as an error with the output kept. On timeout (default \
         120 s, or `timeout_secs`) the command and every process it started are killed."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The bash command line to run."
                },
                "timeout_secs": {
                    "type": "integer",
                    "minimum": 1,
                    "description": format!(
                        "Seconds before the command is killed (default {}).",
                        self.default_timeout.as_secs().max(1)
                    )
                }
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn execute(&self, arguments: &serde_json::Value, cx: &ToolContext<'_>) -> ToolResult {
        let command = match required_str(arguments, "command") {
            Ok(command) => command,
            Err(error) => return ToolResult::err(error),
        };
        let timeout = match optional_u64(arguments, "timeout_secs") {
            Ok(None) => self.default_timeout,
            Ok(Some(0)) => return ToolResult::err("argument `timeout_secs` must be at least 1"),
            Ok(Some(secs)) => Duration::from_secs(secs),
            Err(error) => return ToolResult::err(error),
        };
        if command.trim().is_empty() {
            return ToolResult::err("argument `command` is empty: give a command to run");
        }
        self.run(command, timeout, cx)
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

impl BashTool {
    fn run(&self, command: &str, timeout: Duration, cx: &ToolContext<'_>) -> ToolResult {
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(command)
            .current_dir(cx.workspace.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => return ToolResult::err(format!("could not start bash: {e}")),
        };

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

        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if started.elapsed() >= timeout => break None,
                Ok(None) => thread::sleep(POLL),
                Err(_) => {
                    // Cannot poll: treat as a timeout so nothing is left running.
                    break None;
                }
            }
        };

        let status = match status {
            Some(status) => {
                let left = wait_readers(&done_rx, readers, Instant::now() + READER_GRACE);
                if left > 0 {
                    // Something in the background still holds the pipes.
                    kill_group(&mut child);
                    wait_readers(&done_rx, left, Instant::now() + KILL_GRACE);
                }
                Ok(status)
            }
            None => {
                kill_group(&mut child);
                let _ = child.wait();
                wait_readers(&done_rx, readers, Instant::now() + KILL_GRACE);
                Err(timeout)
            }
        };

        let output = self.combine(stdout.as_ref(), stderr.as_ref());
        match status {
            Ok(status) if status.success() => ToolResult::ok(output),
            Ok(status) => ToolResult {
                output,
                error: Some(describe_failure(status)),
                ..ToolResult::default()
            },
            Err(timeout) => ToolResult {
                output,
                error: Some(format!(
                    "command timed out after {}s; its process group was killed",
                    timeout.as_secs()
                )),
                ..ToolResult::default()
            },
        }
    }

    /// Stdout then stderr (each only if non-empty), cut at the cap.
    fn combine(&self, stdout: Option<&Shared>, stderr: Option<&Shared>) -> String {
        let mut bytes = Vec::new();
        let mut total = 0;
        for stream in [stdout, stderr].into_iter().flatten() {
            let captured = stream.lock().unwrap_or_else(PoisonError::into_inner);
            total += captured.total;
            if captured.kept.is_empty() {
                continue;
            }
            if !bytes.is_empty() && !bytes.ends_with(b"\n") {
                bytes.push(b'\n');
                total += 1;
            }
            bytes.extend_from_slice(&captured.kept);
        }
        let text = String::from_utf8_lossy(&bytes);
        let mut cut = text.len().min(self.output_cap);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let shown = &text[..cut];
        // Bytes of the original output not shown (lossy replacement aside).
        let shown_raw = shown.len().min(bytes.len());
        let more = total.saturating_sub(shown_raw);
        if more == 0 {
            return shown.to_owned();
        }
        let mut out = shown.to_owned();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("[output truncated: {more} more bytes]"));
        out
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

/// Kills the child's whole process group (unix), or the child alone.
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        use rustix::process::{kill_process_group, Pid, Signal};
        let _ = kill_process_group(Pid::from_child(child), Signal::KILL);
    }
    let _ = child.kill();
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::tools::Workspace;
    use serde_json::json;

    use crate::tools::testing::setup;

    fn run(tool: &BashTool, ws: &Workspace, args: serde_json::Value) -> ToolResult {
        tool.execute(&args, &ToolContext::new(ws))
    }

    /// Alive and not a zombie (a zombie may wait for a reaper that is slow
    /// or absent in containers).
    fn alive(pid: u32) -> bool {
        let stat = std::path::PathBuf::from(format!("/proc/{pid}/stat"));
        if std::path::Path::new("/proc/self/stat").exists() {
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
            .map(|s| s.success())
            .unwrap_or(false)
    }

    #[test]
    fn success_in_workspace_root() {
        let (_dir, ws) = setup();
        let r = run(
            &BashTool::default(),
            &ws,
            json!({"command": "pwd; echo err >&2"}),
        );
        assert_eq!(r.error, None);
        assert_eq!(r.output, format!("{}\nerr\n", ws.root().display()));
    }

    #[test]
    fn stdin_is_closed() {
        let (_dir, ws) = setup();
        let r = run(
            &BashTool::default(),
            &ws,
            json!({"command": "cat; echo ok"}),
        );
        assert_eq!(r.error, None);
        assert_eq!(r.output, "ok\n");
    }

    #[test]
    fn nonzero_exit_keeps_output() {
        let (_dir, ws) = setup();
        let r = run(
            &BashTool::default(),
            &ws,
            json!({"command": "echo out; echo oops >&2; exit 3"}),
        );
        assert_eq!(r.error.as_deref(), Some("exit status 3"));
        assert_eq!(r.output, "out\noops\n");
    }

    #[test]
    fn output_is_capped() {
        let (_dir, ws) = setup();
        let tool = BashTool::new(Duration::from_secs(10), 100);
        let r = run(
            &tool,
            &ws,
            json!({"command": "head -c 5000 /dev/zero | tr '\\0' a"}),
        );
        assert_eq!(r.error, None);
        assert_eq!(
            r.output,
            format!("{}\n[output truncated: 4900 more bytes]", "a".repeat(100))
        );
    }

    #[test]
    fn bad_arguments() {
        let (_dir, ws) = setup();
        let tool = BashTool::default();
        assert!(run(&tool, &ws, json!({}))
            .error
            .unwrap()
            .contains("command"));
        assert!(run(&tool, &ws, json!({"command": "true", "timeout_secs": 0})).is_error());
        assert!(run(&tool, &ws, json!({"command": "true", "timeout_secs": "5"})).is_error());
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
            Some("command timed out after 1s; its process group was killed")
        );
        assert_eq!(r.output, "started\n");
        let pid: u32 = std::fs::read_to_string(ws.root().join("child.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        while alive(pid) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(pid), "background child {pid} survived the timeout");
    }

    #[test]
    fn background_holding_pipes_does_not_hang() {
        let (_dir, ws) = setup();
        let started = Instant::now();
        let r = run(
            &BashTool::default(),
            &ws,
            json!({"command": "sleep 30 & echo $! > bg.pid; echo done"}),
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(r.error, None);
        assert_eq!(r.output, "done\n");
        let pid: u32 = std::fs::read_to_string(ws.root().join("bg.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        while alive(pid) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(pid));
    }
}
