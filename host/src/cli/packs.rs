//! `chimera packs list | check | lock | verify`.

use super::args::SearchArgs;
use super::failure::Failure;
use super::spec::parse_pack_spec;
use super::tools::print_stdout;
use chimera_host::config::{configured_dirs, search_path};
use chimera_host::plugins::trust::{TrustSettings, LOCK_FILE_NAME};
use chimera_host::plugins::{
    discover, path_list, pin_directory, pin_external, verify_directory, verify_external,
    DiscoveredPack, Discovery, PluginManager, Registry,
};
use chimera_host::types::terminal_safe;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `packs list`: every pack on the search path, from the manifests alone
/// (no pack code runs), with its version, seams, description, file and
/// precedence level, and which copies it shadows or is shadowed by; a
/// warning on stderr for each configured directory that does not exist,
/// and for each name two files claim within one level.
#[allow(
    clippy::unnecessary_wraps,
    reason = "every command returns the same Result, so the dispatch is uniform"
)]
pub(crate) fn list(search: &SearchArgs, json: bool) -> Result<(), Failure> {
    for dir in configured_dirs(&search.plugins_dirs) {
        if !dir.is_dir() {
            let what = if dir.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            eprintln!(
                "warning: plugins directory {} {what}",
                terminal_safe(&dir.display().to_string())
            );
        }
    }
    let dirs = search_path(&search.plugins_dirs);
    let discovery = discover(&dirs);
    let mut out = String::new();
    for pack in &discovery.packs {
        let seams: Option<Vec<String>> = pack
            .seams
            .as_ref()
            .map(|seams| seams.iter().map(ToString::to_string).collect());
        let (shadows, shadowed_by) = standing(&discovery, pack);
        if json {
            let shadows: Vec<&Path> = shadows.iter().map(|p| p.path.as_path()).collect();
            let line = serde_json::json!({
                "name": pack.name, "version": pack.version, "path": pack.path,
                "description": pack.description, "seams": seams,
                "level": pack.level.to_string(), "shadows": shadows,
                "shadowed_by": shadowed_by.map(|p| &p.path),
            });
            out.push_str(&line.to_string());
        } else {
            out.push_str(&pack_line(
                &pack.name,
                &pack.version,
                seams.as_deref(),
                pack.description.as_deref(),
            ));
            out.push_str("\n    ");
            out.push_str(&terminal_safe(&pack.path.display().to_string()));
            let notes = shadows
                .into_iter()
                .map(|copy| ("shadows", copy))
                .chain(shadowed_by.map(|by| ("shadowed by", by)));
            for (how, other) in notes {
                let _ = write!(
                    out,
                    " ({how} {} {})",
                    other.level,
                    terminal_safe(&other.path.display().to_string())
                );
            }
        }
        out.push('\n');
    }
    if discovery.packs.is_empty() && !json {
        let searched: Vec<PathBuf> = dirs.iter().map(|d| d.path.clone()).collect();
        let _ = writeln!(
            out,
            "no packs found (searched: {})",
            terminal_safe(&path_list(&searched))
        );
    }
    print_stdout(&out);
    for name in discovery.conflicts() {
        if let Err(error) = discovery.find(name) {
            eprintln!("warning: {error}");
        }
    }
    Ok(())
}

/// How `pack` stands among the files claiming its name: the copies at
/// lower levels it shadows (it is the file loaded by that name), or the
/// file that shadows it. Neither for a name two files claim at the best
/// level (that is a conflict, warned about).
fn standing<'d>(
    discovery: &'d Discovery,
    pack: &DiscoveredPack,
) -> (Vec<&'d DiscoveredPack>, Option<&'d DiscoveredPack>) {
    let Ok(Some(provider)) = discovery.find(&pack.name) else {
        return (Vec::new(), None);
    };
    if std::ptr::eq(provider, pack) {
        (discovery.shadowed(&pack.name), None)
    } else if pack.is_outranked_by(provider) {
        (Vec::new(), Some(provider))
    } else {
        (Vec::new(), None)
    }
}

/// One pack, readable: name, version, `[seams]` and description, each
/// escaped (they come from the pack file). `None`: the file does not say.
fn pack_line(
    name: &str,
    version: &str,
    seams: Option<&[String]>,
    description: Option<&str>,
) -> String {
    format!(
        "{:<20} {:<10} [{}] {}",
        terminal_safe(name),
        terminal_safe(version),
        seams.map_or_else(|| "seams unknown".to_owned(), |seams| seams.join(", ")),
        terminal_safe(description.unwrap_or("(no description in its manifest)"))
    )
}

/// Loads the file in this process (the loader refuses incomplete files and
/// foreign formats before mapping them), builds each `--pack` with its
/// config, and prints what the file provides. The probe re-executes this.
pub(crate) fn check(
    file: Option<&Path>,
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
    let info = match file {
        Some(file) => manager.check_file(file, &packs),
        None => manager.check_inherited_stdin(&packs),
    }
    .map_err(|error| Failure::pack(error.to_string()))?;
    for pack in &info.packs {
        let seams: Vec<String> = pack.seams.iter().map(ToString::to_string).collect();
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
                "{}",
                pack_line(
                    &pack.name,
                    &pack.version,
                    Some(&seams),
                    Some(&pack.description)
                )
            );
        }
    }
    Ok(())
}

/// The directories `packs lock` / `verify` work on; at least one.
fn lock_dirs(search: &SearchArgs) -> Result<Vec<PathBuf>, Failure> {
    let dirs = configured_dirs(&search.plugins_dirs);
    if dirs.is_empty() {
        return Err(Failure::usage(
            "no plugins directory to lock: give --plugins-dir DIR (or set CHIMERA_PLUGIN_PATH)",
        ));
    }
    Ok(dirs)
}

/// Writes `text` to `path` atomically; a failure is a usage error naming the file.
pub(crate) fn write_atomically(path: &Path, text: &str) -> Result<(), Failure> {
    chimera_host::files::write_atomically(path, text)
        .map_err(|e| Failure::usage(format!("cannot write {}: {e}", path.display())))
}

pub(crate) fn lock(search: &SearchArgs, external: Option<&Path>) -> Result<(), Failure> {
    let mut written = Vec::new();
    match external {
        Some(path) => {
            let (lock, skipped) = pin_external(&search_path(&search.plugins_dirs))
                .map_err(|e| Failure::usage(e.to_string()))?;
            written.push((path.to_owned(), lock, skipped));
        }
        None => {
            for dir in lock_dirs(search)? {
                let (lock, skipped) =
                    pin_directory(&dir).map_err(|e| Failure::usage(e.to_string()))?;
                written.push((dir.join(LOCK_FILE_NAME), lock, skipped));
            }
        }
    }
    for (path, lock, skipped) in written {
        for line in skipped {
            eprintln!("note: {line}");
        }
        write_atomically(&path, &lock.to_string())?;
        println!(
            "pinned {} pack file(s) in {}",
            lock.entries.len(),
            path.display()
        );
    }
    Ok(())
}

pub(crate) fn verify(search: &SearchArgs, external: Option<&Path>) -> Result<(), Failure> {
    let mut problems = Vec::new();
    let mut checked = Vec::new();
    match external {
        Some(path) => {
            checked.push((
                path.display().to_string(),
                verify_external(path, &search_path(&search.plugins_dirs))
                    .map_err(|e| Failure::usage(e.to_string()))?,
            ));
        }
        None => {
            for dir in lock_dirs(search)? {
                checked.push((
                    dir.join(LOCK_FILE_NAME).display().to_string(),
                    verify_directory(&dir).map_err(|e| Failure::usage(e.to_string()))?,
                ));
            }
        }
    }
    for (lock, found) in checked {
        if found.is_empty() {
            println!("every pack file matches {lock}");
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
