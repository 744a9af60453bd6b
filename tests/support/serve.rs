//! A running `chimera serve` for the tests and the gateway bench: started
//! on a free loopback port, found by its `listening on` line, killed when
//! dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A running `chimera serve`.
pub struct Served {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
}

impl Served {
    /// `chimera serve --listen 127.0.0.1:0 --upstream UPSTREAM` and then
    /// `args`, not yet started.
    pub fn command(upstream: &str, args: &[&str]) -> Command {
        let mut command = Command::new(super::chimera_bin());
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--upstream", upstream])
            .args(args);
        command
    }

    /// Starts `command` (a `chimera serve`, its stderr as `stderr`) and
    /// waits for its `listening on` line.
    pub fn start(mut command: Command, stderr: Stdio) -> Served {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("chimera serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("its listening line");
        let address = line
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("no listening line, got {line:?}"))
            .to_owned();
        Served { child, address }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its resident memory, in MiB (`VmRSS`; 0 where there is no /proc).
    pub fn rss_mib(&self) -> f64 {
        rss_mib(self.child.id())
    }

    /// Stops it now.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The child, to signal or wait on.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Process `pid`'s resident memory, in MiB (`VmRSS`; 0 where there is no /proc).
pub fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}
