//! Which configuration file is used, and the trust step a project file
//! needs.
//!
//! `--config FILE` if given; else `./chimera.toml` (the project directory,
//! never its parents); else the per-user file
//! (`$XDG_CONFIG_HOME/chimera/chimera.toml`, else
//! `~/.config/chimera/chimera.toml`). The first found is the one used;
//! files are not merged.
//!
//! A project file names code to load, so a cloned repository's
//! `chimera.toml` must not run anything just because `chimera` was started
//! inside it: it is used only once `chimera config trust` has pinned its
//! SHA-256 (in the per-user `trusted.json`), and again after every change.
//! `--config FILE` and the per-user file are the user's own choice and need
//! no trust step.

use super::file::{parse, read, FILE_NAME};
use super::paths::user_config_dir;
use super::ConfigError;
use crate::files::write_atomically;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The trust store's name in the user config directory.
const TRUST_STORE: &str = "trusted.json";

/// How a file was found, which decides whether it must be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// `--config FILE`.
    Named,
    /// `./chimera.toml`.
    Project,
    /// The per-user file.
    User,
}

/// A parsed configuration file and where it is.
#[derive(Debug)]
pub struct Loaded {
    /// The file (absolute for a project file).
    pub path: PathBuf,
    /// Its text (to name the line of a key the reader refuses).
    pub text: String,
    /// What it says, as TOML.
    pub table: toml::Table,
}

/// What a reader of the file checks of it (its keys and their types),
/// before it is used or trusted.
pub type Check<'a> = &'a dyn Fn(&Loaded) -> Result<(), ConfigError>;

/// The per-user configuration file's path.
#[must_use]
pub fn user_file() -> Option<PathBuf> {
    user_config_dir().map(|dir| dir.join(FILE_NAME))
}

/// The file to use, if any, and how it was found.
fn locate(named: Option<&Path>) -> Option<(PathBuf, Found)> {
    if let Some(path) = named {
        return Some((path.to_owned(), Found::Named));
    }
    let project = Path::new(FILE_NAME);
    if project.exists() {
        let absolute = std::path::absolute(project).unwrap_or_else(|_| project.to_owned());
        return Some((absolute, Found::Project));
    }
    user_file()
        .filter(|path| path.exists())
        .map(|path| (path, Found::User))
}

/// The trust store: configuration file path → the SHA-256 it was trusted at.
fn trust_store() -> Result<(PathBuf, BTreeMap<String, String>), ConfigError> {
    let dir = user_config_dir().ok_or(ConfigError::NoUserDir)?;
    let path = dir.join(TRUST_STORE);
    if !path.exists() {
        return Ok((path, BTreeMap::new()));
    }
    let text = read(&path)?;
    let store = serde_json::from_str(&text).map_err(|e| ConfigError::TrustStore {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    Ok((path, store))
}

fn digest(text: &str) -> String {
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

/// Loads the configuration file `named` (`--config`) or the search finds,
/// checked by `check`; a project file must have been trusted at its
/// current contents. `None` when there is no file.
///
/// # Errors
///
/// `ConfigError::Read` when the file cannot be read (not a regular file, too
/// large, not UTF-8); `ConfigError::Untrusted` or `ConfigError::Changed` for a
/// project file never trusted, or changed since; `ConfigError::NoUserDir` or
/// `ConfigError::TrustStore` when the trust store cannot be found or read.
/// `ConfigError::Parse` as [`parse`] refuses it, and whatever `check`
/// returns.
pub fn load(named: Option<&Path>, check: Check<'_>) -> Result<Option<Loaded>, ConfigError> {
    let Some((path, found)) = locate(named) else {
        return Ok(None);
    };
    let text = read(&path)?;
    if found == Found::Project {
        let (_, store) = trust_store()?;
        match store.get(&path.display().to_string()) {
            Some(hash) if *hash == digest(&text) => {}
            Some(_) => return Err(ConfigError::Changed { path }),
            None => return Err(ConfigError::Untrusted { path }),
        }
    }
    let table = parse(&path, &text)?;
    let loaded = Loaded { path, text, table };
    check(&loaded)?;
    Ok(Some(loaded))
}

/// Pins the project file `file` (default `./chimera.toml`) at its current
/// contents, after checking that it parses and passes `check`. Returns the
/// file's absolute path and the trust store's.
///
/// # Errors
///
/// `ConfigError::Read` or `ConfigError::Parse` when the file cannot be read or
/// does not parse, whatever `check` returns; `ConfigError::NoUserDir` or `ConfigError::TrustStore` when
/// the trust store cannot be found or read; `ConfigError::Write` when it cannot
/// be written.
pub fn trust(file: Option<&Path>, check: Check<'_>) -> Result<(PathBuf, PathBuf), ConfigError> {
    let file = file.unwrap_or(Path::new(FILE_NAME));
    let path = std::path::absolute(file).map_err(|e| ConfigError::Read {
        path: file.to_owned(),
        reason: e.to_string(),
    })?;
    let text = read(&path)?;
    let table = parse(&path, &text)?;
    let digest = digest(&text);
    check(&Loaded {
        path: path.clone(),
        text,
        table,
    })?;
    let (store_path, mut store) = trust_store()?;
    store.insert(path.display().to_string(), digest);
    let body = serde_json::to_string_pretty(&store).map_err(|e| ConfigError::TrustStore {
        path: store_path.clone(),
        reason: e.to_string(),
    })?;
    if let Some(dir) = store_path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| ConfigError::Write {
            path: dir.to_owned(),
            source,
        })?;
    }
    write_atomically(&store_path, &body).map_err(|source| ConfigError::Write {
        path: store_path.clone(),
        source,
    })?;
    Ok((path, store_path))
}
