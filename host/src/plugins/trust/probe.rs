//! Probe before trust: load-test a pack file in a child process first, so a
//! pack whose load-time code crashes, aborts or hangs never reaches the host.

use crate::plugins::sealed::Sealed;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
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
    ///
    /// # Errors
    ///
    /// The I/O error when the running binary's path cannot be found
    /// ([`std::env::current_exe`]).
    pub fn current_exe(timeout: Duration) -> std::io::Result<Self> {
        Ok(Probe {
            program: std::env::current_exe()?,
            timeout,
        })
    }

    /// Loads `sealed` in a child and instantiates `packs` (name, config)
    /// there. A sealed memfd is handed to the child as its standard input, so
    /// the child maps exactly the bytes this process checked.
    pub(crate) fn run(&self, sealed: &Sealed, packs: &[(&str, &str)]) -> Result<(), ProbeError> {
        let mut command = Command::new(&self.program);
        command.args(["packs", "check"]);
        let stdin = if let Some(stdin) = sealed.for_child().map_err(ProbeError::Handover)? {
            command.arg("--sealed-stdin");
            stdin
        } else {
            command.arg(sealed.path());
            Stdio::null()
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
            .map_err(|source| ProbeError::Start {
                program: self.program.clone(),
                source,
            })?;
        let status = self.wait(&mut child)?;
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
            .find_map(|l| l.strip_prefix("error: "))
            .map(str::to_owned);
        Err(match (status.code(), said) {
            (Some(_), Some(line)) => ProbeError::Refused { line },
            (Some(code), None) => ProbeError::Exited { code },
            (None, _) => ProbeError::Crashed {
                signal: signal_of(status),
            },
        })
    }

    /// Waits for `child` until the timeout, then kills it.
    fn wait(&self, child: &mut Child) -> Result<ExitStatus, ProbeError> {
        let started = Instant::now();
        loop {
            match child.try_wait().map_err(ProbeError::Watch)? {
                Some(status) => return Ok(status),
                None if started.elapsed() >= self.timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(ProbeError::TimedOut {
                        after: self.timeout,
                    });
                }
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}

/// How the load test in the child process failed. Each says the pack was
/// not loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The child was killed by a signal while loading the pack (its load-time
    /// code crashed or aborted).
    #[error("the probe crashed while loading it ({}); not loaded", signal_name(*.signal))]
    Crashed {
        /// The signal, where the platform reports one.
        signal: Option<i32>,
    },
    /// The child had not finished when the timeout ran out (and was killed).
    #[error("the probe did not finish loading it within {after:?} (it hangs); not loaded")]
    TimedOut {
        /// How long the child was given ([`Probe::timeout`]).
        after: Duration,
    },
    /// The child refused the pack, saying why.
    #[error("the probe refused it: {line}")]
    Refused {
        /// The child's `error: ` line, without the prefix.
        line: String,
    },
    /// The child failed without saying why.
    #[error("the probe exited with status {code} while loading it; not loaded")]
    Exited {
        /// Its exit status.
        code: i32,
    },
    /// The child process could not be started.
    #[error("cannot start the probe {}: {source}", program.display())]
    Start {
        /// The program that was run.
        program: PathBuf,
        /// Why it did not start.
        #[source]
        source: std::io::Error,
    },
    /// The sealed pack could not be handed to the child.
    #[error("cannot hand the pack to the probe: {0}")]
    Handover(#[source] std::io::Error),
    /// Waiting for the child failed.
    #[error("the probe could not be watched: {0}")]
    Watch(#[source] std::io::Error),
}

#[cfg(unix)]
fn signal_of(status: ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(not(unix))]
fn signal_of(_status: ExitStatus) -> Option<i32> {
    None
}

/// `SIGABRT` for 6, …; `signal N` for the rest.
fn signal_name(signal: Option<i32>) -> String {
    match signal {
        Some(6) => "SIGABRT".to_owned(),
        Some(9) => "SIGKILL".to_owned(),
        Some(11) => "SIGSEGV".to_owned(),
        Some(7) => "SIGBUS".to_owned(),
        Some(signal) => format!("signal {signal}"),
        None => "no exit status".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_way_the_probe_fails_is_one_line_saying_what_happened() {
        for (error, expected) in [
            (
                ProbeError::Crashed { signal: Some(6) },
                "the probe crashed while loading it (SIGABRT); not loaded",
            ),
            (
                ProbeError::TimedOut {
                    after: Duration::from_secs(1),
                },
                "the probe did not finish loading it within 1s (it hangs); not loaded",
            ),
            (
                ProbeError::Refused {
                    line: "bad config".to_owned(),
                },
                "the probe refused it: bad config",
            ),
            (
                ProbeError::Exited { code: 4 },
                "the probe exited with status 4 while loading it; not loaded",
            ),
        ] {
            assert_eq!(error.to_string(), expected);
        }
    }
}
