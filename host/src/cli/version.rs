//! What `chimera --version` says (a leaf: the argument definitions read it).

use std::sync::OnceLock;

/// What `chimera --version` prints after the name: the host's version, the
/// ABI revision, and which SDK versions this host loads packs from.
pub(crate) fn long_version() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{}\n{}",
            env!("CARGO_PKG_VERSION"),
            chimera_plugin_api::compatibility::summary()
        )
    })
}
