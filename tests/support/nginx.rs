//! nginx as a plain reverse proxy, for the gateway bench's baseline: one
//! process (`daemon off`, `master_process off`), a config generated into
//! a temporary directory, a free loopback port, keep-alive HTTP/1.1
//! connections to the upstream, no buffering of replies (streams pass as
//! they come), no access log. Debian's package is installed when nginx is
//! missing (`apt-get install -y nginx`, as root or through `sudo -n`);
//! where it cannot be had, [`Nginx::start`] says why and the caller skips.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running nginx, killed when dropped.
pub struct Nginx {
    child: Child,
    /// Holds the config, the temp paths and the error log until the
    /// process is done with them.
    dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// `nginx -v`'s version, e.g. `nginx/1.22.1`.
    pub version: String,
}

impl Nginx {
    /// nginx proxying every path to `upstream` (`host:port`), installed
    /// first when missing. `Err` says in a few words why it cannot run.
    ///
    /// # Errors
    ///
    /// Why nginx cannot be had or started here.
    pub fn start(upstream: &str) -> Result<Nginx, String> {
        let bin = binary()
            .or_else(|| install().and_then(|()| binary()))
            .ok_or_else(|| "nginx is not installed and apt-get could not install it".to_owned())?;
        let version = Command::new(&bin)
            .arg("-v")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_owned())
            .and_then(|v| v.strip_prefix("nginx version: ").map(str::to_owned))
            .unwrap_or_else(|| "nginx".to_owned());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free port: {e}"))?;
        let dir = tempfile::tempdir().map_err(|e| format!("no temp dir: {e}"))?;
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, config(dir.path(), port, upstream))
            .map_err(|e| format!("cannot write its config: {e}"))?;
        let log = dir.path().join("error.log");
        let child = Command::new(&bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut nginx = Nginx {
            child,
            dir,
            port,
            version,
        };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                let last = said.lines().rev().find(|l| !l.trim().is_empty());
                return Err(format!("nginx exited, {status}: {}", last.unwrap_or("")));
            }
            if nginx.listening() {
                return Ok(nginx);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err("nginx did not listen within 10 s".to_owned())
    }

    /// Its process id (the only process: no master, no workers).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The last `n` lines of its error log (errors only: it logs at
    /// `error`), to say why requests failed through it.
    pub fn errors(&self, n: usize) -> Vec<String> {
        let log = std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default();
        let lines: Vec<String> = log.lines().map(str::to_owned).collect();
        lines[lines.len().saturating_sub(n)..].to_vec()
    }

    /// Whether it answers a request on its port (any status: the
    /// upstream may refuse a GET).
    fn listening(&self) -> bool {
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let probe = "GET /nginx-probe HTTP/1.1\r\nhost: probe\r\nconnection: close\r\n\r\n";
        let mut head = [0u8; 5];
        stream.write_all(probe.as_bytes()).is_ok()
            && stream.read_exact(&mut head).is_ok()
            && &head == b"HTTP/"
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The config: one process, one `server` on `port`, everything proxied to
/// `upstream` over kept-alive HTTP/1.1 connections, replies unbuffered.
fn config(dir: &Path, port: u16, upstream: &str) -> String {
    let d = dir.display();
    format!(
        "daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 16384;
pid {d}/nginx.pid;
error_log {d}/error.log error;
events {{
    worker_connections 8192;
}}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    tcp_nodelay on;
    upstream chat {{
        server {upstream};
        keepalive 1024;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 16m;
        location / {{
            proxy_pass http://chat;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"
    )
}

/// nginx's binary, when installed; `CHIMERA_NGINX` names another (a
/// wrapper that runs the installed one under a profiler, as
/// `tests/benches/per-request.sh` does).
fn binary() -> Option<PathBuf> {
    if let Some(given) = std::env::var_os("CHIMERA_NGINX") {
        return Some(PathBuf::from(given)).filter(|p| p.exists());
    }
    ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// `apt-get install -y nginx` as root, or through `sudo -n`; on a first
/// failure, `apt-get update` and once more. `Some` when it installed.
fn install() -> Option<()> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let apt = |args: &[&str]| {
        let mut command = if root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.args(["-n", "apt-get"]);
            sudo
        };
        command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    eprintln!("installing nginx (apt-get install -y nginx) ...");
    let installed = apt(&["install", "-y", "-q", "nginx"])
        || (apt(&["update", "-q"]) && apt(&["install", "-y", "-q", "nginx"]));
    installed.then_some(())
}
