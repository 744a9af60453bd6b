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
    /// environment, as an operator's start-up script might; `as_user`: with
    /// no capability at all, as an ordinary user's process runs (root's
    /// capabilities keep a pack host from its host's `/proc` entries for
    /// another reason than an ordinary user's gateway).
    fn chimera(&self, dir: &Path, args: &[&str], as_user: bool) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", "exec \"$@\" 7<\"$SNOOP_SECRET_FILE\"", "sh"]);
        if as_user {
            command.args(["setpriv", "--bounding-set=-all", "--inh-caps=-all"]);
        }
        command
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

/// Whether the tests can run a process with no capability (`setpriv`
/// drops them); said on stderr when not.
fn without_capabilities() -> bool {
    let works = Command::new("setpriv")
        .args(["--bounding-set=-all", "--inh-caps=-all", "true"])
        .status()
        .is_ok_and(|status| status.success());
    if !works {
        eprintln!("setpriv cannot drop capabilities here: the ordinary user's case is not run");
    }
    works
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
/// `isolate`, without capabilities when `as_user`): everything it printed.
fn run(secrets: &Secrets, isolate: bool, as_user: bool) -> String {
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
        .chimera(dir.path(), &args, as_user)
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
    let inproc = run(&secrets, false, false);
    assert!(inproc.contains("snoop at load"), "{inproc}");
    assert_eq!(secrets.leaked(&inproc), (true, true), "{inproc}");

    let mut runs = vec![run(&secrets, true, false)];
    if without_capabilities() {
        runs.push(run(&secrets, true, true));
    }
    for isolated in &runs {
        finds_nothing(&secrets, isolated);
    }
}

/// What an isolated `snoop` said holds no secret of its host, names no
/// variable but `HOME`, no descriptor 7, and could not read its host's
/// environment.
fn finds_nothing(secrets: &Secrets, isolated: &str) {
    assert!(isolated.contains("snoop on a call"), "{isolated}");
    assert_eq!(secrets.leaked(isolated), (false, false), "{isolated}");
    // Its environment is `HOME` alone, at load and on the call.
    let sections = env_sections(isolated);
    assert!(sections.len() >= 2, "{isolated}");
    for env in sections {
        assert!(
            env.is_empty() || (env.starts_with("HOME=") && !env.contains(", ")),
            "{env}"
        );
    }
    assert!(!isolated.contains("fd 7 "), "{isolated}");
    // Its host's environment and open files are closed to it, at load too.
    assert!(isolated.contains("snoop at load: env ["), "{isolated}");
    let tried = isolated.matches("parent environ [").count();
    let refused = isolated.matches("parent environ [unreadable").count();
    assert!(tried >= 2 && refused == tried, "{isolated}");
}

#[test]
fn an_isolated_pack_behind_serve_finds_no_secret_of_its_host() {
    let secrets = Secrets::new();
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let base = format!("{}/v1", upstream.url);
    let plugins = test_packs_dir().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let ask = |isolate: bool, as_user: bool| {
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
        let gateway = Served::start(
            secrets.chimera(dir.path(), &args, as_user),
            Stdio::inherit(),
        );
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
    let inproc = ask(false, false);
    assert_eq!(secrets.leaked(&inproc), (true, true), "{inproc}");

    finds_nothing(&secrets, &ask(true, false));
    if without_capabilities() {
        finds_nothing(&secrets, &ask(true, true));
    }
    // The upstream was never asked: the pack blocked every request.
    assert!(upstream.requests().is_empty());
}
