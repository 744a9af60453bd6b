//! `chimera packs list` and `chimera packs check`.

use super::args::SearchArgs;
use super::failure::Failure;
use super::search_path::search_path;
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
/// foreign formats before mapping them) and prints what it provides.
pub(crate) fn check(file: &Path, json: bool) -> Result<(), Failure> {
    let manager = PluginManager::new(Arc::new(Registry::new()), Vec::new());
    let info = manager
        .inspect_file(file)
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
