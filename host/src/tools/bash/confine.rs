//! Starting the shell confined: in the write sandbox unless it is off or
//! the kernel lacks Landlock, saying once per process how far it confines;
//! and the tests that the confinement holds (writes outside the workspace
//! fail and change nothing, signals stay inside, the host stays free).

use super::BashTool;
use crate::tools::sandbox::{self, Confinement};
use crate::tools::ToolError;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::Once;

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
    pub(super) fn spawn(
        &self,
        cmd: &mut Command,
        root: &Path,
        tmp: &Path,
    ) -> Result<Child, ToolError> {
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
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::tools::bash::tests::sh;
    use crate::tools::testing::{run, setup};
    use crate::tools::Workspace;
    use serde_json::json;
    use std::thread;

    /// Whether the sandbox tests can run here; says why not when they
    /// cannot.
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
    fn outside_setup() -> (tempfile::TempDir, Workspace, tempfile::TempDir) {
        let (dir, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "keep").unwrap();
        std::fs::create_dir(outside.path().join("sub")).unwrap();
        std::fs::write(ws.root().join("inside"), "in").unwrap();
        (dir, ws, outside)
    }

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
}
