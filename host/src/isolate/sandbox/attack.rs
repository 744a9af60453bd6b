//! The sandbox's own attack test: the test binary re-runs itself as a
//! confined child that tries every escape the sandbox closes (writing,
//! connecting, exec, signals, ptrace-like reads, raising limits, growing
//! memory) and reports each outcome; the parent checks every one failed.

use super::limits::STDERR_GROWTH;
use super::{confine_pack_host, Limits};
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Set in the child: the directory it must not write to.
const DIR_VAR: &str = "CHIMERA_SANDBOX_TEST_DIR";
/// Set in the child: the listener it must not reach.
const ADDR_VAR: &str = "CHIMERA_SANDBOX_TEST_ADDR";
/// The child's memory limit (small, so the test is quick).
const TEST_MEMORY: u64 = 256 << 20;

fn errno_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) => "EPERM".to_owned(),
        Some(libc::EACCES) => "EACCES".to_owned(),
        Some(libc::ENOSYS) => "ENOSYS".to_owned(),
        Some(libc::ENOMEM) => "ENOMEM".to_owned(),
        Some(libc::EFBIG) => "EFBIG".to_owned(),
        Some(libc::ENOENT) => "ENOENT".to_owned(),
        Some(n) => format!("errno {n}"),
        None => e.to_string(),
    }
}

fn report<T>(what: &str, result: std::io::Result<T>) {
    let outcome = match result {
        Ok(_) => "ok".to_owned(),
        Err(e) => format!("denied {}", errno_name(&e)),
    };
    println!("ATTACK {what}: {outcome}");
}

/// The confined side of
/// [`a_confined_pack_host_cannot_write_connect_exec_signal_or_outgrow_memory`]:
/// does nothing unless that test started this binary for it.
#[test]
#[ignore = "runs only as the child of the sandbox test"]
fn confined_child_tries_every_attack() {
    let (Ok(dir), Ok(addr)) = (std::env::var(DIR_VAR), std::env::var(ADDR_VAR)) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let warnings = confine_pack_host(&Limits {
        memory_bytes: TEST_MEMORY,
        cpu_seconds: 30,
    });
    for w in &warnings {
        println!("WARNING {w}");
    }
    let fsize = rustix::process::getrlimit(rustix::process::Resource::Fsize);
    println!("ATTACK fsize: {}", fsize.maximum.unwrap_or(u64::MAX));
    eprintln!("a message on standard error");
    println!("ATTACK stderr: ok");
    report("write", std::fs::write(dir.join("canary"), "escaped"));
    report("mkdir", std::fs::create_dir(dir.join("made")));
    report("remove", std::fs::remove_file(dir.join("existing")));
    report(
        "truncate",
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("existing")),
    );
    report(
        "tcp",
        std::net::TcpStream::connect_timeout(
            &addr.parse().expect("address"),
            Duration::from_secs(2),
        ),
    );
    report("udp", std::net::UdpSocket::bind("127.0.0.1:0"));
    report(
        "unix",
        std::os::unix::net::UnixStream::connect(dir.join("no-such.sock")),
    );
    report("unixpair", std::os::unix::net::UnixStream::pair());
    report("exec", Command::new("/bin/true").status());
    let parent = std::os::unix::process::parent_id();
    report(
        "signal",
        rustix::process::test_kill_process(
            rustix::process::Pid::from_raw(parent.try_into().expect("pid")).expect("pid"),
        )
        .map_err(std::io::Error::from),
    );
    report("environ", std::fs::read(format!("/proc/{parent}/environ")));
    report(
        "rlimit",
        rustix::process::setrlimit(
            rustix::process::Resource::Data,
            rustix::process::Rlimit {
                current: None,
                maximum: None,
            },
        )
        .map_err(std::io::Error::from),
    );
    report(
        "prlimit-parent",
        rustix::process::prlimit(
            rustix::process::Pid::from_raw(parent.try_into().expect("pid")),
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(0),
                maximum: Some(0),
            },
        )
        .map_err(std::io::Error::from),
    );
    let caps = rustix::thread::capabilities(None).expect("capget");
    println!(
        "ATTACK capabilities: {}",
        if caps.effective.is_empty() && caps.permitted.is_empty() {
            "none"
        } else {
            "kept"
        }
    );
    let mut big: Vec<u8> = Vec::new();
    report(
        "memory",
        big.try_reserve_exact(usize::try_from(TEST_MEMORY * 2).expect("size"))
            .map_err(std::io::Error::other),
    );
    // What must keep working.
    report(
        "thread",
        std::thread::spawn(|| 7)
            .join()
            .map_err(|_| std::io::Error::other("panicked")),
    );
    report("read", std::fs::read("/proc/self/status"));
    let mut small = vec![0u8; 16 << 20];
    small.fill(1);
    report("allocate", Ok(small.len()));
    std::io::stdout().flush().expect("flush");
}

fn run_child(dir: &Path, addr: &str, stderr: Stdio) -> String {
    let exe = std::env::current_exe().expect("test binary");
    let output = Command::new(exe)
        .args([
            "isolate::sandbox::attack::confined_child_tries_every_attack",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_VAR, dir)
        .env(ADDR_VAR, addr)
        .stdin(Stdio::null())
        .stderr(stderr)
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "child failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn outcome<'a>(stdout: &'a str, what: &str) -> &'a str {
    let prefix = format!("ATTACK {what}: ");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no result for {what} in:\n{stdout}"))
}

#[test]
fn a_confined_pack_host_cannot_write_connect_exec_signal_or_outgrow_memory() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("existing"), "keep me").expect("write");
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("address").to_string();

    let stdout = run_child(dir.path(), &addr, Stdio::piped());
    assert_eq!(outcome(&stdout, "fsize"), "0", "no file may grow");
    assert_eq!(outcome(&stdout, "stderr"), "ok");

    for (what, expected) in [
        ("write", "denied EACCES"),
        ("mkdir", "denied EACCES"),
        ("remove", "denied EACCES"),
        ("truncate", "denied EACCES"),
        ("tcp", "denied EPERM"),
        ("udp", "denied EPERM"),
        ("unix", "denied EPERM"),
        ("unixpair", "denied EPERM"),
        ("exec", "denied EPERM"),
        ("signal", "denied EPERM"),
        ("environ", "denied EACCES"),
        ("rlimit", "denied EPERM"),
        ("prlimit-parent", "denied EPERM"),
        ("capabilities", "none"),
        ("thread", "ok"),
        ("read", "ok"),
        ("allocate", "ok"),
    ] {
        assert_eq!(outcome(&stdout, what), expected, "{what}:\n{stdout}");
    }
    assert!(
        outcome(&stdout, "memory").starts_with("denied"),
        "memory:\n{stdout}"
    );
    assert!(
        !dir.path().join("canary").exists(),
        "the canary was written"
    );
    assert!(!dir.path().join("made").exists(), "a directory was made");
    let mut kept = String::new();
    std::fs::File::open(dir.path().join("existing"))
        .and_then(|mut f| f.read_to_string(&mut kept))
        .expect("read");
    assert_eq!(kept, "keep me");
    assert!(
        listener.accept().is_err(),
        "the listener accepted a connection"
    );
    // This kernel's warnings, if any, name what is missing; none claims
    // seccomp is gone (every EPERM above came from it).
    assert!(
        !stdout.contains("WARNING seccomp"),
        "seccomp warning:\n{stdout}"
    );
}

#[test]
fn a_pack_host_whose_stderr_is_a_file_may_grow_only_that_file_and_keeps_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("existing"), "keep me").expect("write");
    let log = dir.path().join("stderr.log");
    std::fs::write(&log, "before\n").expect("write");
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let addr = listener.local_addr().expect("address").to_string();
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .expect("open");

    let stdout = run_child(dir.path(), &addr, Stdio::from(file));

    assert_eq!(outcome(&stdout, "stderr"), "ok", "{stdout}");
    let grown = "before\n".len() as u64 + STDERR_GROWTH;
    assert_eq!(outcome(&stdout, "fsize"), grown.to_string());
    let written = std::fs::read_to_string(&log).expect("read");
    assert!(written.contains("a message on standard error"), "{written}");
    assert_eq!(outcome(&stdout, "write"), "denied EACCES");
    assert!(!dir.path().join("canary").exists());
}
