//! The reference MCP servers from the npm registry, pinned, for tests that
//! put the guard in front of a real server. They live in a directory the
//! tests own (`target/mcp-servers`, installed once per machine: `.ci/run`
//! installs them before the tests, and the first test that needs them
//! does otherwise). Where they cannot be had (no `npm`, no registry), the
//! MCP tests say so in one line and are skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The servers, pinned: (package, version).
pub const SERVERS: &[(&str, &str)] = &[
    ("@modelcontextprotocol/server-filesystem", "2026.8.31"),
    ("@modelcontextprotocol/server-everything", "2026.8.31"),
];

/// Where they are installed.
pub fn servers_dir() -> PathBuf {
    super::workspace_root().join("target/mcp-servers")
}

/// The command that runs server `package` (`node …/dist/index.js`), or
/// `None` (said once, on stderr) when the servers cannot be installed.
pub fn server(package: &str) -> Option<Vec<String>> {
    static INSTALLED: OnceLock<Option<PathBuf>> = OnceLock::new();
    let dir = INSTALLED
        .get_or_init(|| match install() {
            Ok(dir) => Some(dir),
            Err(why) => {
                eprintln!("skipping the MCP server tests: {why}");
                None
            }
        })
        .as_deref()?;
    let script = entry(dir, package);
    Some(vec!["node".to_owned(), script.display().to_string()])
}

fn entry(dir: &Path, package: &str) -> PathBuf {
    dir.join("node_modules").join(package).join("dist/index.js")
}

fn install() -> Result<PathBuf, String> {
    let dir = servers_dir();
    if SERVERS
        .iter()
        .all(|(package, _)| entry(&dir, package).is_file())
    {
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let pinned: Vec<String> = SERVERS
        .iter()
        .map(|(package, version)| format!("{package}@{version}"))
        .collect();
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&dir)
        .args(&pinned)
        .output()
        .map_err(|e| format!("npm cannot run ({e}); .ci/run installs it"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "npm install failed: {}",
            why.lines().last().unwrap_or("no output")
        ));
    }
    Ok(dir)
}
