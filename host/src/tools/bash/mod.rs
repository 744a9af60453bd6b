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
//!
//! # Where it lives
//!
//! This file holds the tool, its settings and its [`TypedTool`] impl;
//! [`limits`] the timeout and output-cap limits and the `timeout_secs`
//! checks; [`spawn`] running the shell, waiting and killing; [`confine`]
//! the sandbox it starts in; [`capture`] the output and its truncation
//! note.

mod capture;
mod confine;
mod limits;
mod spawn;

use super::args::optional_whole;
use super::sandbox::{self, Confinement};
use super::{ToolContext, ToolError, TypedTool};
use limits::{call_timeout, max_secs, DEFAULT_MAX_TIMEOUT, MIN_OUTPUT_CAP};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

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
        let max = max_secs(self.max_timeout);
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
        let timeout = call_timeout(timeout_secs, self.default_timeout, self.max_timeout)?;
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::tools::testing::{run, setup};
    use crate::tools::{Tool, Workspace};
    use crate::types::ToolResult;
    use serde_json::json;

    /// Runs `command` with `tool` in `ws`.
    pub(super) fn sh(tool: &BashTool, ws: &Workspace, command: &str) -> ToolResult {
        run(tool, ws, json!({ "command": command }))
    }

    /// The output of `command`, run successfully in a fresh workspace by a
    /// tool whose output cap is `cap`.
    pub(super) fn output_with_cap(cap: usize, command: &str) -> String {
        let (_dir, ws) = setup();
        let r = sh(&BashTool::new(Duration::from_secs(10), cap), &ws, command);
        assert_eq!(r.error, None, "{command}");
        r.output
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
    fn a_default_timeout_longer_than_the_maximum_raises_the_maximum() {
        let tool = BashTool::new(Duration::from_secs(900), 1000);
        assert_eq!(
            tool.parameters()["properties"]["timeout_secs"]["maximum"],
            json!(900)
        );
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
}
