//! A pack crate's directory, as `chimera pack test DIR` reads it where an
//! author stands: its cases (`tests/cases`) and the directory cargo built
//! its library into. Cargo itself says where that is (`cargo metadata`,
//! which honours `CARGO_TARGET_DIR` and the crate's cargo configuration),
//! so the crate's README commands work however its target is set.

use super::failure::Failure;
use chimera_host::plugins::platform::library_file_name;
use chimera_host::types::terminal_safe;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// Where a pack crate keeps its policy test cases.
const CASES: &str = "tests/cases";

/// The profiles whose output directory may hold the built pack.
const PROFILES: [&str; 2] = ["debug", "release"];

/// A pack crate's cases and the directory holding its built library.
#[derive(Debug)]
pub(crate) struct PackCrate {
    /// The crate's `tests/cases`.
    pub(crate) cases: PathBuf,
    /// The profile directory (`<target>/debug` or `<target>/release`)
    /// holding the newest build of the crate's library.
    pub(crate) built: PathBuf,
}

/// What `cargo metadata` says that this reads.
#[derive(Deserialize)]
struct Metadata {
    target_directory: PathBuf,
    packages: Vec<Package>,
}

/// One package of the metadata.
#[derive(Deserialize)]
struct Package {
    manifest_path: PathBuf,
    targets: Vec<Target>,
}

/// One of a package's targets.
#[derive(Deserialize)]
struct Target {
    name: String,
    kind: Vec<String>,
}

/// `dir` as a pack crate when it holds a `Cargo.toml`; `None` when it does
/// not (then it is a directory of cases, or one case file).
///
/// # Errors
///
/// One line (exit 2) when cargo cannot read the crate, the crate builds no
/// `cdylib`, it has no `tests/cases`, or its library has not been built.
pub(crate) fn pack_crate(dir: &Path) -> Result<Option<PackCrate>, Failure> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        return Ok(None);
    }
    let shown = terminal_safe(&dir.display().to_string());
    let metadata = metadata(&manifest, &shown)?;
    let library = library_of(&metadata, &manifest).ok_or_else(|| {
        Failure::usage(format!(
            "{shown}: not a pack crate (its Cargo.toml builds no cdylib library)"
        ))
    })?;
    let cases = dir.join(CASES);
    if !cases.is_dir() {
        return Err(Failure::usage(format!(
            "{shown}: no {CASES} directory (a pack crate keeps its policy cases there)"
        )));
    }
    let built = newest_build(&metadata.target_directory, &library).ok_or_else(|| {
        Failure::usage(format!(
            "{shown}: {library} is not built in {} (run `cargo build` there first)",
            terminal_safe(&metadata.target_directory.display().to_string())
        ))
    })?;
    Ok(Some(PackCrate { cases, built }))
}

/// `cargo metadata` of the crate whose manifest is `manifest`.
fn metadata(manifest: &Path, shown: &str) -> Result<Metadata, Failure> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .map_err(|e| Failure::usage(format!("{shown}: cannot run cargo to read the crate: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let why = stderr
            .lines()
            .find(|line| line.starts_with("error"))
            .unwrap_or("cargo metadata failed");
        return Err(Failure::usage(format!("{shown}: {}", terminal_safe(why))));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        Failure::usage(format!(
            "{shown}: cargo metadata said something unreadable: {e}"
        ))
    })
}

/// The file name of the cdylib the package at `manifest` builds.
fn library_of(metadata: &Metadata, manifest: &Path) -> Option<String> {
    let manifest = manifest.canonicalize().ok()?;
    metadata
        .packages
        .iter()
        .find(|package| package.manifest_path.canonicalize().ok().as_ref() == Some(&manifest))?
        .targets
        .iter()
        .find(|target| target.kind.iter().any(|kind| kind == "cdylib"))
        .map(|target| library_file_name(&target.name))
}

/// The profile directory under `target` whose `library` was built last.
fn newest_build(target: &Path, library: &str) -> Option<PathBuf> {
    PROFILES
        .iter()
        .map(|profile| target.join(profile))
        .filter_map(|dir| {
            let modified = std::fs::metadata(dir.join(library))
                .and_then(|m| m.modified())
                .ok()?;
            Some((modified, dir))
        })
        .max_by_key(|(modified, _): &(SystemTime, PathBuf)| *modified)
        .map(|(_, dir)| dir)
}
