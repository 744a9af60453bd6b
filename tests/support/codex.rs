//! The Codex CLI (npm [`PACKAGE`], pinned), whose only wire is the
//! `OpenAI` Responses API, run as `codex exec` for one turn against a
//! base URL.
//!
//! It lives in a directory the tests own (`target/codex`, installed once
//! per machine: `.ci/run` installs it before the tests, and the first test
//! that needs it does otherwise). Where it cannot be had, the tests that
//! need it say so in one line and skip, or fail with that line when
//! `CHIMERA_REQUIRE_REAL_PARTS` is set, as `.ci/run` sets it (see
//! [`real_parts`](super::real_parts)).
//!
//! Every run has a scratch directory of its own: its `HOME`, its
//! `CODEX_HOME` (`HOME/.codex`, holding the [`config`] that points a
//! custom model provider at the base URL), its `TMPDIR`, and the working
//! directory the shell commands run in (outside any git repository, so no
//! project's instructions reach the prompt). Codex runs with a cleared
//! environment (`PATH`, those, a UTF-8 locale and the key), reading
//! nothing on stdin, bounded in time.

use super::real_parts;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The Codex CLI's npm package and its pinned version.
pub const PACKAGE: (&str, &str) = ("@openai/codex", "0.171.0");

/// How long one `codex exec` run may take before it is killed.
pub const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The model Codex asks for (the gateway in front serves every name).
pub const MODEL: &str = "chimera-test";

/// The environment variable Codex reads its key from (the provider's
/// `env_key`).
pub const KEY_VAR: &str = "CHIMERA_CODEX_KEY";

/// Where the Codex CLI is installed.
pub fn codex_dir() -> PathBuf {
    super::workspace_root().join("target/codex")
}

/// The `codex` executable under `dir`.
fn codex_bin(dir: &Path) -> PathBuf {
    dir.join("node_modules/.bin/codex")
}

/// The installed version of [`PACKAGE`] under `dir`, if any.
fn installed_version(dir: &Path) -> Option<String> {
    let manifest = dir
        .join("node_modules")
        .join(PACKAGE.0)
        .join("package.json");
    let manifest: Value = serde_json::from_slice(&std::fs::read(manifest).ok()?).ok()?;
    manifest["version"].as_str().map(str::to_owned)
}

/// The `codex` executable at its pinned version, or `None` (said once,
/// on stderr) when it cannot be had.
///
/// # Panics
///
/// When it cannot be had and `CHIMERA_REQUIRE_REAL_PARTS` is set.
pub fn codex() -> Option<&'static Path> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let mut first = false;
    let installed = INSTALLED.get_or_init(|| {
        first = true;
        install()
    });
    match installed {
        Ok(bin) => Some(bin),
        Err(why) => {
            real_parts::missing(&format!("the Codex CLI cannot be had: {why}"), first);
            None
        }
    }
}

/// Installs [`PACKAGE`] into [`codex_dir`] unless it is there at its pinned
/// version, and checks that it runs; returns the executable.
fn install() -> Result<PathBuf, String> {
    let dir = codex_dir();
    let bin = codex_bin(&dir);
    let (package, version) = PACKAGE;
    if installed_version(&dir).as_deref() != Some(version) || !bin.is_file() {
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(&dir)
            .arg(format!("{package}@{version}"))
            .output()
            .map_err(|e| format!("npm cannot run ({e}); .ci/run installs it"))?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "npm install failed: {}",
                why.lines().last().unwrap_or("no output")
            ));
        }
        if installed_version(&dir).as_deref() != Some(version) {
            return Err(format!("npm installed {package} but not at {version}"));
        }
    }
    let out = Command::new(&bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{} cannot run ({e})", bin.display()))?;
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !said.contains(version) {
        return Err(format!(
            "`codex --version` said {:?}, not {version}: {}",
            said.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(bin)
}

/// Codex's `config.toml` for a run against `base_url` (up to and including
/// `/v1`): the model provider `chimera` on the Responses wire with its key
/// in [`KEY_VAR`], no retries (a stream the client cannot read fails the
/// run instead of being asked again), and no update check or analytics
/// (no traffic but to the base URL).
pub fn config(base_url: &str) -> String {
    format!(
        "model = \"{MODEL}\"\n\
         model_provider = \"chimera\"\n\
         check_for_update_on_startup = false\n\
         \n\
         [analytics]\n\
         enabled = false\n\
         \n\
         [model_providers.chimera]\n\
         name = \"Chimera\"\n\
         base_url = \"{base_url}\"\n\
         wire_api = \"responses\"\n\
         env_key = \"{KEY_VAR}\"\n\
         request_max_retries = 0\n\
         stream_max_retries = 0\n"
    )
}

/// What one `codex exec` run did, and the scratch directory it ran in
/// (kept until this is dropped, so a test can look at what its commands
/// left there).
#[derive(Debug)]
pub struct Run {
    /// Whether it exited with success (and in time).
    pub success: bool,
    /// Its standard output: the turn's last message.
    pub stdout: String,
    /// Its standard error: the session as Codex shows it (the commands it
    /// ran, their output), and a line saying so when it was killed for
    /// taking longer than [`RUN_LIMIT`].
    pub stderr: String,
    /// The working directory its shell commands ran in.
    pub work: PathBuf,
    _scratch: tempfile::TempDir,
}

impl Run {
    /// Everything it printed, for a failure message.
    pub fn transcript(&self) -> String {
        format!(
            "codex exec {}: stdout {:?}\nstderr:\n{}",
            if self.success { "succeeded" } else { "failed" },
            self.stdout,
            self.stderr
        )
    }
}

/// Runs `codex exec PROMPT` for one turn against `base_url` (up to and
/// including `/v1`) with `key` as its API key, or `None` when Codex cannot
/// be had here (see the module's doc).
///
/// It runs with `--dangerously-bypass-approvals-and-sandbox`: the model's
/// commands run without asking and without Codex's own sandbox (which needs
/// user namespaces a CI container may not have); the scratch directory is
/// the test's isolation. `--strict-config` makes a key this version does
/// not know fail the run instead of being ignored, and `--ephemeral` keeps
/// no session files.
pub fn exec(base_url: &str, key: &str, prompt: &str) -> Option<Run> {
    let bin = codex()?;
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let home = scratch.path().join("home");
    let codex_home = home.join(".codex");
    let tmp = scratch.path().join("tmp");
    let work = scratch.path().join("work");
    for dir in [&codex_home, &tmp, &work] {
        std::fs::create_dir_all(dir).expect("a scratch directory");
    }
    std::fs::write(codex_home.join("config.toml"), config(base_url)).expect("write the config");
    let mut command = Command::new(bin);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("CODEX_HOME", &codex_home)
        .env("TMPDIR", &tmp)
        .env("LANG", "C.UTF-8")
        .env(KEY_VAR, key)
        .current_dir(&work)
        .stdin(Stdio::null())
        .args([
            "exec",
            "--strict-config",
            "--ephemeral",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--color",
            "never",
            prompt,
        ]);
    let (success, stdout, stderr) = run_bounded(command);
    Some(Run {
        success,
        stdout,
        stderr,
        work,
        _scratch: scratch,
    })
}

/// Runs `command` to its end or for [`RUN_LIMIT`], whichever is first:
/// whether it succeeded in time, its stdout and its stderr.
///
/// It runs in a process group of its own, killed whole when late: npm's
/// `codex` is a Node script that runs the native binary as its child
/// (Node before 22.15 cannot exec it in its place), and the child and the
/// commands it runs would otherwise outlive it holding the pipes.
fn run_bounded(mut command: Command) -> (bool, String, String) {
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("codex starts");
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = reader(Box::new(child.stdout.take().expect("its stdout")));
    let stderr = reader(Box::new(child.stderr.take().expect("its stderr")));
    let deadline = Instant::now() + RUN_LIMIT;
    let (success, late) = loop {
        if let Some(status) = child.try_wait().expect("wait for codex") {
            break (status.success(), false);
        }
        if Instant::now() > deadline {
            #[cfg(unix)]
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.kill();
            let _ = child.wait();
            break (false, true);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = stderr.join().expect("its stderr is read");
    if late {
        stderr.push_str(&format!("\nkilled after {}s\n", RUN_LIMIT.as_secs()));
    }
    (success, stdout.join().expect("its stdout is read"), stderr)
}
