//! Probe before trust: load-test a pack file in a child process first, so a
//! pack whose load-time code crashes, aborts or hangs never reaches the host.

use crate::plugins::sealed::Sealed;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How to probe: a program (the `chimera` binary) run as
/// `<program> packs check <file> --pack <name>=<config>…`, with a timeout.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The program to run.
    pub program: PathBuf,
    /// How long the child may take.
    pub timeout: Duration,
}

impl Probe {
    /// A probe that re-executes the running binary (which must be `chimera`).
    pub fn current_exe(timeout: Duration) -> std::io::Result<Self> {
        Ok(Probe {
            program: std::env::current_exe()?,
            timeout,
        })
    }

    /// Loads `sealed` in a child and instantiates `packs` (name, config)
    /// there. A sealed memfd is handed to the child as its standard input, so
    /// the child maps exactly the bytes this process checked. `Err` is one
    /// line: how the child failed.
    pub(crate) fn run(&self, sealed: &Sealed, packs: &[(&str, &str)]) -> Result<(), String> {
        let mut command = Command::new(&self.program);
        command.args(["packs", "check"]);
        let stdin = match sealed
            .for_child()
            .map_err(|e| format!("cannot hand the pack to the probe: {e}"))?
        {
            Some(stdin) => {
                command.arg("--sealed-stdin");
                stdin
            }
            None => {
                command.arg(sealed.path());
                Stdio::null()
            }
        };
        for (name, config) in packs {
            command.arg("--pack").arg(if config.is_empty() {
                (*name).to_owned()
            } else {
                format!("{name}={config}")
            });
        }
        let mut child = command
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the probe {}: {e}", self.program.display()))?;
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() >= self.timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "the probe did not finish loading it within {:?} (it hangs); not loaded",
                        self.timeout
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(format!("the probe could not be watched: {e}")),
            }
        };
        if status.success() {
            return Ok(());
        }
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            use std::io::Read;
            let _ = pipe.read_to_string(&mut stderr);
        }
        let said = stderr
            .lines()
            .rev()
            .find(|l| l.starts_with("error: "))
            .map(|l| l.trim_start_matches("error: ").to_owned());
        Err(match (status.code(), said) {
            (Some(_), Some(line)) => format!("the probe refused it: {line}"),
            (Some(code), None) => {
                format!("the probe exited with status {code} while loading it; not loaded")
            }
            (None, _) => format!(
                "the probe crashed while loading it ({}); not loaded",
                describe(&status)
            ),
        })
    }
}

#[cfg(unix)]
fn describe(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(6) => "SIGABRT".to_owned(),
        Some(9) => "SIGKILL".to_owned(),
        Some(11) => "SIGSEGV".to_owned(),
        Some(7) => "SIGBUS".to_owned(),
        Some(signal) => format!("signal {signal}"),
        None => status.to_string(),
    }
}

#[cfg(not(unix))]
fn describe(status: &std::process::ExitStatus) -> String {
    status.to_string()
}
