//! A stdio MCP server as the client starts it: its own process (in a
//! process group of its own, so stopping it stops what it started), whose
//! output is checked line by line before the SDK reads it: a line that is
//! not a JSON-RPC message, or one longer than [`MAX_LINE`], ends the
//! connection, so a server that sends garbage is stopped and said, rather
//! than ignored while its calls hang. The last line it wrote on standard
//! error is kept, for the line saying how it ended.

use super::error::MAX_LINE;
use crate::types::terminal_safe;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};

/// The longest line of standard error kept as a server's last words.
const LAST_WORDS: usize = 200;

/// A started server: what the SDK speaks through (the checked output,
/// the process's input), and the process.
pub(super) struct Child {
    pub(super) transport: (DuplexStream, ChildStdin),
    pub(super) process: Process,
}

/// A server's process, with what is known of how it ends.
pub(super) struct Process {
    child: tokio::process::Child,
    /// Reads its standard error to the end.
    stderr: tokio::task::JoinHandle<()>,
    exit: Arc<ExitCell>,
}

/// What is known of how a server ends: the rule its output broke, if it
/// broke one, and its last words on standard error.
#[derive(Default)]
pub(super) struct ExitCell {
    broke: OnceLock<String>,
    last_words: Mutex<String>,
}

impl ExitCell {
    fn last_words(&self) -> String {
        self.last_words
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// How a server's process ended.
#[derive(Debug)]
pub(super) enum Exit {
    /// Its output broke a rule (the rule): it was stopped.
    Broke(String),
    /// It ended by itself.
    Ended {
        status: ExitStatus,
        last_words: String,
    },
    /// It was still running when its connection ended: killed.
    Killed,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Broke(why) => write!(f, "{why}; stopped"),
            Exit::Ended { status, last_words } if last_words.is_empty() => {
                write!(f, "ended ({status})")
            }
            Exit::Ended { status, last_words } => {
                write!(f, "ended ({status}); its last words: {last_words}")
            }
            Exit::Killed => f.write_str("closed its connection; stopped"),
        }
    }
}

/// Starts `command` with `args` in `dir`, its environment the host's with
/// `env` added.
///
/// # Errors
///
/// The line saying why it could not be started.
pub(super) fn spawn(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    dir: &Path,
) -> Result<Child, String> {
    let mut builder = Command::new(command);
    builder
        .args(args)
        .envs(env)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    builder.process_group(0);
    let mut process = builder
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", terminal_safe(command)))?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (
        process.stdin.take(),
        process.stdout.take(),
        process.stderr.take(),
    ) else {
        return Err("its standard streams could not be connected".to_owned());
    };
    let exit = Arc::new(ExitCell::default());
    let (checked, relay) = tokio::io::duplex(64 << 10);
    tokio::spawn(relay_messages(stdout, relay, Arc::clone(&exit)));
    let stderr = tokio::spawn(keep_last_words(stderr, Arc::clone(&exit)));
    Ok(Child {
        transport: (checked, stdin),
        process: Process {
            child: process,
            stderr,
            exit,
        },
    })
}

impl Process {
    /// Waits up to `grace` for the process to end, kills it (and its
    /// process group) otherwise, and says how it ended.
    pub(super) async fn reap(mut self, grace: Duration) -> Exit {
        let status = if let Ok(Ok(status)) = tokio::time::timeout(grace, self.child.wait()).await {
            Some(status)
        } else {
            kill_group(&self.child);
            let _ = self.child.kill().await;
            None
        };
        if let Some(why) = self.exit.broke.get() {
            return Exit::Broke(why.clone());
        }
        let Some(status) = status else {
            return Exit::Killed;
        };
        // Its last words are read to the end (what it started may hold
        // the stream open: not for long).
        let _ = tokio::time::timeout(Duration::from_millis(500), &mut self.stderr).await;
        Exit::Ended {
            status,
            last_words: self.exit.last_words(),
        }
    }
}

/// Kills every process of `process`'s group (what a server started: `npx`
/// starts `node`).
fn kill_group(process: &tokio::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = process
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = process;
}

/// Copies each line of the server's output to the SDK while it is a
/// JSON-RPC message (a JSON object or batch); the first that is not, or
/// that is longer than [`MAX_LINE`], is recorded and ends the copy (the
/// SDK then sees the connection close).
async fn relay_messages(stdout: ChildStdout, mut into: DuplexStream, exit: Arc<ExitCell>) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX) + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > MAX_LINE {
            let _ = exit
                .broke
                .set(format!("sent a message longer than {} MiB", MAX_LINE >> 20));
            return;
        }
        let message = line.trim_ascii();
        if message.is_empty() {
            continue;
        }
        if !is_json_rpc(message) {
            let _ = exit.broke.set(format!(
                "sent something that is not a JSON-RPC message: {}",
                preview(message)
            ));
            return;
        }
        if !line.ends_with(b"\n") {
            line.push(b'\n');
        }
        if into.write_all(&line).await.is_err() {
            return;
        }
    }
}

/// A JSON object or array (a message or a batch), whole.
fn is_json_rpc(message: &[u8]) -> bool {
    matches!(message.first(), Some(b'{' | b'['))
        && serde_json::from_slice::<serde::de::IgnoredAny>(message).is_ok()
}

/// The start of what a server sent, safe to print.
fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut shown: String = text.chars().take(80).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    format!("`{}`", terminal_safe(&shown))
}

/// Keeps the last line the server wrote on standard error (each shown at
/// the `debug` level of `CHIMERA_LOG`).
async fn keep_last_words(stderr: ChildStderr, exit: Arc<ExitCell>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader).take(4096).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        tracing::debug!("MCP server stderr: {}", terminal_safe(text));
        let mut kept: String = text.chars().take(LAST_WORDS).collect();
        if kept.len() < text.len() {
            kept.push('…');
        }
        *exit
            .last_words
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = terminal_safe(&kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_json_object_or_batch_is_a_message() {
        assert!(is_json_rpc(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(is_json_rpc(br#"[{"jsonrpc":"2.0","method":"x"}]"#));
        for garbage in [
            &b"Server started on stdio"[..],
            b"{\"jsonrpc\":",
            b"42",
            b"\"text\"",
            b"{} {}",
        ] {
            assert!(
                !is_json_rpc(garbage),
                "{}",
                String::from_utf8_lossy(garbage)
            );
        }
    }

    #[test]
    fn a_preview_is_short_and_safe_to_print() {
        let shown = preview(format!("\u{1b}[2J{}", "x".repeat(200)).as_bytes());
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(shown.chars().count() < 100, "{shown}");
        assert!(shown.ends_with("…`"), "{shown}");
    }
}
