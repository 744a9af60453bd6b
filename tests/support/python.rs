//! The official `openai`, `anthropic` and `mcp` Python SDKs, for tests
//! that drive a server the way real clients do, `mockllm` (pinned), a
//! mock model server some users test against, and the agent frameworks
//! the client tests run (pinned: the `OpenAI` Agents SDK and `LangChain`'s
//! `OpenAI` and Anthropic chat models, see [`clients`](super::clients)).
//! They live in a venv the tests own (`target/sdk-venv`, made once per
//! machine: `.ci/run` makes it before the tests, and the first test that
//! needs it makes it otherwise).
//! Where it cannot be made (no Python, no network to the package index),
//! the tests that need it say so in one line and skip, or fail with that
//! line when `CHIMERA_REQUIRE_REAL_PARTS` is set, as `.ci/run` sets it (see
//! [`real_parts`]).

use super::real_parts;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Python packages installed into the venv (`.ci/run` installs the
/// same list).
pub const PACKAGES: &[&str] = &[
    "openai",
    "anthropic",
    "mcp",
    "mockllm==0.0.8",
    "openai-agents==0.24.0",
    "langchain-openai==1.8.1",
    "langchain-anthropic==1.7.10",
];

/// The venv's Python with the packages importable, or `None` (said once,
/// on stderr) when they cannot be installed here.
///
/// # Panics
///
/// When they cannot be installed and `CHIMERA_REQUIRE_REAL_PARTS` is set.
pub fn sdk_python() -> Option<&'static Path> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let mut first = false;
    let python = PYTHON.get_or_init(|| {
        first = true;
        install()
    });
    match python {
        Ok(python) => Some(python),
        Err(why) => {
            real_parts::missing(&format!("the Python SDKs cannot be had: {why}"), first);
            None
        }
    }
}

/// Whether every package is installed, a pinned one at its version.
fn importable(python: &Path) -> bool {
    let mut check = String::from("import importlib.metadata\n");
    for package in PACKAGES {
        match package.split_once("==") {
            Some((name, version)) => check.push_str(&format!(
                "assert importlib.metadata.version('{name}') == '{version}'\n"
            )),
            None => check.push_str(&format!("importlib.metadata.version('{package}')\n")),
        }
    }
    Command::new(python)
        .args(["-c", &check])
        .output()
        .is_ok_and(|out| out.status.success())
}

fn install() -> Result<PathBuf, String> {
    let venv = super::workspace_root().join("target/sdk-venv");
    let python = venv.join("bin/python");
    if importable(&python) {
        return Ok(python);
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !made.status.success() {
        let said = String::from_utf8_lossy(&made.stderr);
        let last = said.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!(
            "python3 -m venv failed: {}",
            last.unwrap_or("no output")
        ));
    }
    let pip = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(PACKAGES)
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if !pip.status.success() {
        let said = String::from_utf8_lossy(&pip.stderr);
        let last = said
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!(
            "pip could not install {} (offline?): {last}; .ci/run installs them",
            PACKAGES.join(", ")
        ));
    }
    if importable(&python) {
        Ok(python)
    } else {
        Err("they installed but do not import".to_owned())
    }
}
