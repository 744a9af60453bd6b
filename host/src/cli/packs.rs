//! `chimera packs list | check | lock | verify`.

use super::args::SearchArgs;
use super::failure::Failure;
use super::run::parse_pack_spec;
use super::search_path::{configured_dirs, search_path};
use crate::plugins::trust::{pin_directory, verify_directory, TrustSettings, LOCK_FILE_NAME};
use crate::plugins::{discover, PluginManager, Registry};
use std::path::Path;
use std::sync::Arc;

pub(crate) fn list(search: &SearchArgs, json: bool) -> Result<(), Failure> {
    let dirs = search_path(search);
    let discovery = discover(&dirs);
    for pack in &discovery.packs {
        if json {
            println!(
                "{}",
                serde_json::json!({"name": pack.name, "version": pack.version, "path": pack.path})
            );
        } else {
            println!(
                "{:<20} {:<10} {}",
                pack.name,
                pack.version,
                pack.path.display()
            );
        }
    }
    if discovery.packs.is_empty() && !json {
        let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        println!("no packs found (searched: {})", searched.join(":"));
    }
    Ok(())
}

/// Loads the file in this process (the loader refuses incomplete files and
/// foreign formats before mapping them), builds each `--pack` with its
/// config, and prints what the file provides. The probe re-executes this.
pub(crate) fn check(
    file: &Path,
    specs: &[String],
    json: bool,
    allow_insecure: bool,
) -> Result<(), Failure> {
    let specs = specs
        .iter()
        .map(|spec| parse_pack_spec(spec))
        .collect::<Result<Vec<_>, _>>()?;
    let packs: Vec<(&str, &str)> = specs
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect();
    let manager = PluginManager::new(Arc::new(Registry::new()), Vec::new());
    manager.set_trust(TrustSettings {
        allow_insecure,
        ..TrustSettings::default()
    });
    let info = manager
        .check_file(file, &packs)
        .map_err(|error| Failure::pack(error.to_string()))?;
    for pack in &info.packs {
        let seams: Vec<String> = pack.seams.iter().map(|s| s.to_string()).collect();
        if json {
            println!(
                "{}",
                serde_json::json!({
                    "name": pack.name, "version": pack.version, "description": pack.description,
                    "seams": seams, "path": info.path, "sha256": info.sha256,
                    "abi_revision": info.abi_revision,
                })
            );
        } else {
            println!(
                "{:<20} {:<10} [{}] {}",
                pack.name,
                pack.version,
                seams.join(", "),
                pack.description
            );
        }
    }
    Ok(())
}

pub(crate) fn lock(search: &SearchArgs) -> Result<(), Failure> {
    for dir in configured_dirs(search) {
        let (lock, skipped) = pin_directory(&dir).map_err(|e| Failure::usage(e.to_string()))?;
        for line in skipped {
            eprintln!("note: {line}");
        }
        let path = dir.join(LOCK_FILE_NAME);
        let temporary = dir.join(format!(".{LOCK_FILE_NAME}.tmp"));
        std::fs::write(&temporary, lock.to_string())
            .and_then(|()| std::fs::rename(&temporary, &path))
            .map_err(|e| Failure::usage(format!("cannot write {}: {e}", path.display())))?;
        println!(
            "pinned {} pack file(s) in {}",
            lock.entries.len(),
            path.display()
        );
    }
    Ok(())
}

pub(crate) fn verify(search: &SearchArgs) -> Result<(), Failure> {
    let mut problems = Vec::new();
    for dir in configured_dirs(search) {
        let found = verify_directory(&dir).map_err(|e| Failure::usage(e.to_string()))?;
        if found.is_empty() {
            println!(
                "{}: every pack file matches {LOCK_FILE_NAME}",
                dir.display()
            );
        }
        problems.extend(found);
    }
    for problem in &problems {
        println!("{problem}");
    }
    match problems.len() {
        0 => Ok(()),
        n => Err(Failure::pack(format!(
            "{n} pack file(s) do not match their lock"
        ))),
    }
}
