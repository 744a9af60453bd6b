//! A real `redis-server` for the tests, on a loopback port of its own,
//! with nothing saved to disk; stopped when dropped. `.ci/run` installs
//! Debian's package when it is missing; where it cannot be had, the tests
//! that need it say so in one line and skip, or fail with that line when
//! `CHIMERA_REQUIRE_REAL_PARTS` is set, as `.ci/run` sets it (see
//! [`real_parts`]).

use super::real_parts;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`.
pub struct RedisServer {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl RedisServer {
    /// Starts one on a free port; `None` (said on stderr) when
    /// `redis-server` cannot run here.
    ///
    /// # Panics
    ///
    /// When it cannot run and `CHIMERA_REQUIRE_REAL_PARTS` is set, or it
    /// runs but does not answer.
    pub fn start() -> Option<RedisServer> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut server = RedisServer { child: None, port };
        match server.run() {
            Ok(()) => Some(server),
            Err(why) => {
                real_parts::missing(
                    &format!("redis-server cannot run ({why}); .ci/run installs it"),
                    true,
                );
                None
            }
        }
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (an outage).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server (`SIGSTOP`) without closing anything: connections
    /// are accepted by the kernel and commands are never answered, as a
    /// hung store's are, until [`RedisServer::resume`].
    pub fn hang(&self) {
        self.signal("-STOP");
    }

    /// Lets a [`RedisServer::hang`]ed server go on (`SIGCONT`).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Sends `signal` (`kill`'s spelling) to the server.
    fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let sent = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status()
                .is_ok_and(|status| status.success());
            assert!(sent, "kill {signal} redis-server");
        }
    }

    /// Starts it again on the same port, empty; `false` when it cannot run.
    pub fn restart(&mut self) -> bool {
        self.run().is_ok()
    }

    /// Starts it on its port, empty (killing a running one first); why
    /// not when it cannot run.
    fn run(&mut self) -> Result<(), String> {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| error.to_string())?;
        self.child = Some(child);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if self.ping() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server did not answer PING on port {} within 10 s",
            self.port
        );
    }

    /// How many scripts the server has run (`EVALSHA` and `EVAL` calls, from
    /// `INFO commandstats`): each gate-state operation is one.
    pub fn script_calls(&self) -> u64 {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("redis answers");
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        stream
            .write_all(b"INFO commandstats\r\n")
            .expect("ask redis");
        let mut reader = BufReader::new(stream);
        let mut head = String::new();
        reader.read_line(&mut head).expect("a bulk reply");
        let len: usize = head
            .trim()
            .trim_start_matches('$')
            .parse()
            .expect("a length");
        let mut body = vec![0; len];
        std::io::Read::read_exact(&mut reader, &mut body).expect("the reply");
        String::from_utf8_lossy(&body)
            .lines()
            .filter(|line| {
                line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:")
            })
            .filter_map(|line| {
                line.split_once("calls=")
                    .and_then(|(_, rest)| rest.split(',').next())
                    .and_then(|calls| calls.parse::<u64>().ok())
            })
            .sum()
    }

    /// `true` when the server answers `PING`.
    fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).is_ok() && line.starts_with("+PONG")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
