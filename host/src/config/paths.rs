//! The per-user directories: where the configuration file, the trust store
//! and the per-user packs live. Only absolute values of the environment
//! count (a relative `$HOME` would resolve against whatever directory
//! `chimera` was started in).

use std::path::PathBuf;

/// `$XDG_DATA_HOME/chimera/plugins`, else `$HOME/.local/share/chimera/plugins`.
#[must_use]
pub fn user_data_dir() -> Option<PathBuf> {
    absolute_env("XDG_DATA_HOME")
        .or_else(|| absolute_env("HOME").map(|home| home.join(".local/share")))
        .map(|data| data.join("chimera").join("plugins"))
}

/// `$XDG_CONFIG_HOME/chimera`, else `$HOME/.config/chimera`: the per-user
/// configuration file and trust store live here.
#[must_use]
pub fn user_config_dir() -> Option<PathBuf> {
    absolute_env("XDG_CONFIG_HOME")
        .or_else(|| absolute_env("HOME").map(|home| home.join(".config")))
        .map(|config| config.join("chimera"))
}

/// The variable `var` as a path, when it is set to an absolute one.
fn absolute_env(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}
