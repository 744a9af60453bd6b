//! The official `openai`, `anthropic` and `mcp` Python SDKs, for tests
//! that drive a server the way real clients do. They live in a venv the tests own
//! (`target/sdk-venv`, made once per machine: `.ci/run` makes it before
//! the tests, and the first test that needs it makes it otherwise). Where
//! it cannot be made (no Python, no network to the package index), the
//! SDK tests say so in one line and are skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Python SDKs installed into the venv.
pub const PACKAGES: &[&str] = &["openai", "anthropic", "mcp"];

/// The venv's Python with the SDKs importable, or `None` (said once, on
/// stderr) when they cannot be installed here.
pub fn sdk_python() -> Option<&'static Path> {
    static PYTHON: OnceLock<Option<PathBuf>> = OnceLock::new();
    PYTHON
        .get_or_init(|| match install() {
            Ok(python) => Some(python),
            Err(why) => {
                eprintln!("skipping the Python SDK tests: {why}");
                None
            }
        })
        .as_deref()
}

fn importable(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import openai, anthropic, mcp"])
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
        return Err(format!(
            "python3 -m venv failed: {}",
            String::from_utf8_lossy(&made.stderr).trim()
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
            "pip could not install {} (offline?): {last}",
            PACKAGES.join(", ")
        ));
    }
    if importable(&python) {
        Ok(python)
    } else {
        Err("the SDKs installed but do not import".to_owned())
    }
}
