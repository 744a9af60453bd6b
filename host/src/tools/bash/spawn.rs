//! Running the shell: `bash -c` in the workspace root, in its own process
//! group with a private `TMPDIR` and the call's token; waiting for it
//! (sweeping the call's processes meanwhile) until it exits or the timeout
//! passes; then killing every process the call started, collecting the
//! output and saying how the command ended.

use super::capture::{render, spawn_reader, wait_readers, Captured};
use super::BashTool;
use crate::tools::process_tree::{CallProcesses, GATE, TOKEN_VAR, WATCH_EVERY};
use crate::tools::{ToolContext, ToolError};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::PoisonError;
use std::thread;
use std::time::{Duration, Instant};

/// How long to wait for the readers to reach end-of-file once every process
/// of the call was killed (only a process that escaped can hold them).
const KILL_GRACE: Duration = Duration::from_millis(300);
/// How often the shell's status is polled: from the first interval,
/// doubling up to the second (short commands return quickly, long ones
/// cost little).
const POLL: (Duration, Duration) = (Duration::from_millis(1), Duration::from_millis(10));

impl BashTool {
    pub(super) fn run_command(
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
    use crate::tools::bash::tests::{output_with_cap, sh};
    use crate::tools::testing::{run, setup};
    use serde_json::json;

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
