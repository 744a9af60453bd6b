//! Policy tests from a pack's own `cargo test` (feature `testing`).
//!
//! A policy test case is a TOML file — the packs to load, the user's
//! prompts and the scripted model's replies — with a golden file beside it
//! holding the decisions the session should produce (the host's
//! `chimera_host::pack_test` documents the format; `chimera pack new`
//! generates one). [`run_cases`] replays every case of a directory through
//! this crate's own build of the pack, with the real host and agent loop,
//! by running `chimera pack test`, and panics with the diff when a
//! decision changed:
//!
//! ```no_run
//! // tests/policy.rs, with chimera-plugin-api's `testing` feature in
//! // [dev-dependencies]
//! #[test]
//! fn the_policy_cases_pass() {
//!     chimera_plugin_api::testing::run_cases("tests/cases");
//! }
//! ```
//!
//! Why a binary and not a library: the host is a large crate with its own
//! dependencies (an HTTP client, a sandbox, a file watcher) that a pack
//! must never link, and it is the `chimera` a user runs that the pack must
//! satisfy. The binary is the one `$CHIMERA` names, else `chimera` on
//! `PATH`.
//!
//! `cargo test` links the crate as an rlib and leaves its shared library
//! as the last `cargo build` left it, so [`run_cases`] first builds the
//! library (`cargo build --lib`, same target directory and profile as the
//! test): the cases always judge the code under test. `chimera` then
//! searches only that target directory, the directories a case names and
//! the bundled packs (`--isolated`), so an installed copy of the pack
//! neither conflicts with the build nor stands in for it. With
//! `CHIMERA_BLESS=1` the golden files are rewritten instead (`--bless`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable naming the `chimera` binary to run.
pub const CHIMERA_VAR: &str = "CHIMERA";

/// The variable that, set to `1`, rewrites the golden files.
pub const BLESS_VAR: &str = "CHIMERA_BLESS";

/// Replays every case in `dir` (relative to the crate's root) through this
/// crate's build of the pack; panics with `chimera pack test`'s report —
/// the failing cases' diffs — when any fails.
///
/// # Panics
///
/// When a case fails, or `chimera` cannot be found or run.
pub fn run_cases(dir: impl AsRef<Path>) {
    if let Err(report) = try_run_cases(dir.as_ref()) {
        panic!("{report}");
    }
}

/// Why [`try_run_cases`] did not pass.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CasesError {
    /// The cases could not be run: `chimera` cannot be found or run, the
    /// test was not run by `cargo test`, or the pack's library does not
    /// build. One line (the build's errors follow a build failure).
    #[error("{0}")]
    NotRun(String),
    /// `chimera pack test` ran and a case failed (or could not be judged).
    #[error("chimera pack test {dir} failed ({status}):\n{report}")]
    Failed {
        /// The cases' directory.
        dir: String,
        /// How `chimera` exited.
        status: String,
        /// Its report: each case's verdict and the failing cases' diffs.
        report: String,
    },
}

/// [`run_cases`] without the panic: `chimera pack test`'s report when
/// every case passed.
///
/// # Errors
///
/// [`CasesError::Failed`] with the report when a case fails;
/// [`CasesError::NotRun`] when `chimera` cannot be found or run, the test
/// was not run by `cargo test`, or the pack's library does not build.
pub fn try_run_cases(dir: &Path) -> Result<String, CasesError> {
    let chimera = chimera().map_err(CasesError::NotRun)?;
    let plugins = plugins_dir().map_err(CasesError::NotRun)?;
    let root = crate_root().map_err(CasesError::NotRun)?;
    build_library(&root, &plugins).map_err(CasesError::NotRun)?;
    let dir = root.join(dir);
    let mut command = Command::new(&chimera);
    command
        .args(["pack", "test", "--isolated", "--plugins-dir"])
        .arg(&plugins)
        .arg(&dir)
        .env("NO_COLOR", "1");
    if std::env::var_os(BLESS_VAR).is_some_and(|v| v == "1") {
        command.arg("--bless");
    }
    let output = command
        .output()
        .map_err(|e| CasesError::NotRun(format!("cannot run {}: {e}", chimera.display())))?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(report)
    } else {
        Err(CasesError::Failed {
            dir: dir.display().to_string(),
            status: output.status.to_string(),
            report,
        })
    }
}

/// The crate being tested (cargo sets `CARGO_MANIFEST_DIR` for the tests
/// it runs).
fn crate_root() -> Result<PathBuf, String> {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .ok_or_else(|| "CARGO_MANIFEST_DIR is not set: run the tests with cargo test".to_owned())
}

/// Builds the crate at `root`'s library into `plugins` (`<target>/<profile>`),
/// so the shared library is the code under test.
fn build_library(root: &Path, plugins: &Path) -> Result<(), String> {
    let target = plugins
        .parent()
        .ok_or_else(|| format!("{} has no target directory above it", plugins.display()))?;
    let profile = match plugins.file_name().and_then(|name| name.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&cargo)
        .current_dir(root)
        .args([
            "build",
            "--quiet",
            "--lib",
            "--profile",
            profile,
            "--target-dir",
        ])
        .arg(target)
        .output()
        .map_err(|e| format!("cannot run cargo to build the pack: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "building the pack's library failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// `$CHIMERA`, else `chimera` on `PATH`.
fn chimera() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(CHIMERA_VAR).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let name = format!("chimera{}", std::env::consts::EXE_SUFFIX);
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(&name))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            format!("cannot find `{name}` on PATH: install it, or set {CHIMERA_VAR} to its path")
        })
}

/// Where cargo put this profile's libraries: the directory above the
/// running test binary's `deps`.
fn plugins_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the test binary: {e}"))?;
    exe.parent()
        .filter(|dir| dir.ends_with("deps"))
        .and_then(Path::parent)
        .map(Path::to_owned)
        .ok_or_else(|| {
            format!(
                "the test binary {} is not in <target>/<profile>/deps; run it with cargo test",
                exe.display()
            )
        })
}
