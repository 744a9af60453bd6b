//! Nothing of the host reaches an isolated pack: the `snoop` test pack
//! (tests/hostile-pack) reads its environment, `/proc/self/environ`, its
//! parent's `/proc/PID/environ`, `cmdline` and `status`, and every open
//! descriptor below 1024, at load and on each call, and blocks with all of
//! it. Run isolated under `chimera run` and `chimera serve`, with a secret
//! in the host's environment and another on a descriptor the host
//! inherited (a shell's `7<file`), neither secret appears in what it said;
//! run in-process (the control), both do.

use chimera_tests::http::{Reply, Server};
use chimera_tests::serve::Served;
use chimera_tests::{chimera_bin, test_packs_dir};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The secrets: one in the host's environment, one in a file the host
/// inherits open as descriptor 7.
struct Secrets {
    env: String,
    fd: String,
    file: tempfile::NamedTempFile,
}

impl Secrets {
    fn new() -> Self {
        let salt = format!("{:016x}", fastrand_u64());
        let fd = format!("sk-parent-secret-fd-{salt}");
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &fd).unwrap();
        Secrets {
            env: format!("sk-parent-secret-env-{salt}"),
            fd,
            file,
        }
    }

    /// `chimera <args>` in `dir`, started by a shell that opens the secret
    /// file as descriptor 7 (no close-on-exec) and sets the secret in the
    /// environment, as an operator's start-up script might.
    fn chimera(&self, dir: &Path, args: &[&str]) -> Command {
        let mut command = Command::new("sh");
        command
            .args(["-c", "exec \"$@\" 7<\"$SNOOP_SECRET_FILE\"", "sh"])
            .arg(chimera_bin())
            .args(args)
            .current_dir(dir)
            .env("GATEWAY_UPSTREAM_KEY", &self.env)
            .env("SNOOP_SECRET_FILE", self.file.path())
            .env("XDG_DATA_HOME", "/nonexistent/chimera-tests-data")
            .env("XDG_CONFIG_HOME", "/nonexistent/chimera-tests-config");
        for name in ["CHIMERA_ISOLATE", "CHIMERA_PLUGIN_PATH", "CHIMERA_LOG"] {
            command.env_remove(name);
        }
        command
    }

    /// Whether `text` holds either secret (the environment's, the file's).
    fn leaked(&self, text: &str) -> (bool, bool) {
        (text.contains(&self.env), text.contains(&self.fd))
    }
}

/// A pseudo-random number, from the clock and the process id.
fn fastrand_u64() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    (nanos as u64) ^ (u64::from(std::process::id()) << 32)
}

/// The environment section of a report (`env [..]`), at load and on the call.
fn env_sections(report: &str) -> Vec<&str> {
    report
        .match_indices("env [")
        .filter_map(|(at, _)| report[at + 5..].split_once(']').map(|(env, _)| env))
        .collect()
}

/// `chimera run` on a one-answer script with `snoop` loaded (isolated when
/// `isolate`): everything it printed.
fn run(secrets: &Secrets, isolate: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [{"content": "done"}]}).to_string(),
    )
    .unwrap();
    let (script, plugins, workspace) = (
        script.display().to_string(),
        test_packs_dir().display().to_string(),
        dir.path().display().to_string(),
    );
    let mut args = vec![
        "run",
        "--json",
        "--plugins-dir",
        &plugins,
        "--pack",
        "snoop",
        "--script",
        &script,
        "--workspace",
        &workspace,
    ];
    if isolate {
        args.extend(["--isolate", "snoop"]);
    }
    args.push("hello");
    let output = secrets
        .chimera(dir.path(), &args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn an_isolated_pack_under_run_finds_no_secret_of_its_host() {
    let secrets = Secrets::new();
    // The control: in-process, the pack is the host, and finds both.
    let inproc = run(&secrets, false);
    assert!(inproc.contains("snoop at load"), "{inproc}");
    assert_eq!(secrets.leaked(&inproc), (true, true), "{inproc}");

    let isolated = run(&secrets, true);
    assert!(isolated.contains("snoop on a call"), "{isolated}");
    assert_eq!(secrets.leaked(&isolated), (false, false), "{isolated}");
    // Its environment is `HOME` alone, at load and on the call.
    let sections = env_sections(&isolated);
    assert!(sections.len() >= 2, "{isolated}");
    for env in sections {
        assert!(
            env.is_empty() || (env.starts_with("HOME=") && !env.contains(", ")),
            "{env}"
        );
    }
    assert!(!isolated.contains("fd 7 "), "{isolated}");
    // Its host's environment and open files are closed to it, at load too.
    assert!(
        isolated.contains("snoop at load: env [")
            && !isolated.contains("parent environ [CARGO")
            && isolated.contains("parent environ [unreadable"),
        "{isolated}"
    );
}

#[test]
fn an_isolated_pack_behind_serve_finds_no_secret_of_its_host() {
    let secrets = Secrets::new();
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let base = format!("{}/v1", upstream.url);
    let plugins = test_packs_dir().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let ask = |isolate: bool| {
        let mut args = vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &base,
            "--model",
            "m",
            "--upstream-key-env",
            "GATEWAY_UPSTREAM_KEY",
            "--plugins-dir",
            &plugins,
            "--pack",
            "snoop",
        ];
        if isolate {
            args.extend(["--isolate", "snoop"]);
        }
        let gateway = Served::start(secrets.chimera(dir.path(), &args), Stdio::inherit());
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let (status, reply) = super::gateway::exchange_at(
            &gateway.address,
            "POST",
            "/v1/chat/completions",
            &[],
            &body.to_string(),
        );
        assert_eq!(status, 403, "{reply}");
        reply
    };
    let inproc = ask(false);
    assert_eq!(secrets.leaked(&inproc), (true, true), "{inproc}");

    let isolated = ask(true);
    assert!(isolated.contains("snoop on a call"), "{isolated}");
    assert_eq!(secrets.leaked(&isolated), (false, false), "{isolated}");
    assert!(!isolated.contains("fd 7 "), "{isolated}");
    // The upstream was never asked: the pack blocked every request.
    assert!(upstream.requests().is_empty());
}
