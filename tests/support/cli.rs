//! Running the built `chimera` binary in tests: a clean environment, and
//! the transcript and exit status read back.

use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// Environment variables the binary reads that a test must not inherit.
const INHERITED: &[&str] = &[
    "CHIMERA_PLUGIN_PATH",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "CHIMERA_HOSTILE",
    "CHIMERA_LOG",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
];

/// `chimera <args>` in `cwd`, with `env` set on a clean environment.
pub fn command(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(super::chimera_bin());
    command.args(args).current_dir(cwd).env("NO_COLOR", "1");
    for name in INHERITED {
        command.env_remove(name);
    }
    // No per-user packs: a test names every plugins directory it uses.
    command.env("XDG_DATA_HOME", "/nonexistent/chimera-tests-data");
    // No per-user chimera.toml or trust store unless a test makes one.
    command.env("XDG_CONFIG_HOME", "/nonexistent/chimera-tests-config");
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// A finished run.
pub struct Ran {
    /// What the process left.
    pub output: Output,
}

impl Ran {
    /// The exit code (`None`: killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    /// The exit code; panics when a signal ended the process.
    pub fn status(&self) -> i32 {
        self.code().expect("exited, not killed by a signal")
    }

    /// Standard output.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Standard error.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The single line on stderr (asserted single).
    pub fn error_line(&self) -> String {
        let stderr = self.stderr();
        assert_eq!(
            stderr.lines().count(),
            1,
            "one line on stderr, got: {stderr}"
        );
        stderr.trim_end().to_owned()
    }

    /// Every stdout line, parsed as JSON (panics on a line that is not).
    pub fn events(&self) -> Vec<Value> {
        self.stdout()
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
            })
            .collect()
    }

    /// The events of one `type`.
    pub fn of_type(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["type"] == kind)
            .collect()
    }
}

/// Runs `chimera <args>` to completion, feeding `stdin`.
pub fn chimera(cwd: &Path, args: &[&str], env: &[(&str, &str)], stdin: impl AsRef<[u8]>) -> Ran {
    let mut child = command(cwd, args, env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chimera");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_ref())
        .expect("write stdin");
    Ran {
        output: child.wait_with_output().expect("chimera runs"),
    }
}

/// Reads a live child's stdout line by line (JSON, else the raw line).
pub fn lines_of(child: &mut Child) -> Receiver<Value> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = sender.send(serde_json::from_str(&line).unwrap_or(Value::String(line)));
        }
    });
    receiver
}

/// Collects events up to and including the next one of `kind`.
pub fn until(events: &Receiver<Value>, kind: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let event = events
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no {kind} event; saw {seen:?}"));
        let done = event["type"] == kind;
        seen.push(event);
        if done {
            return seen;
        }
    }
}
