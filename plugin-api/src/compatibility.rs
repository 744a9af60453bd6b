//! Which packs load into which hosts, as this build of the crate sees it.
//! The rule and its reasons are in the crate docs, "Compatibility".
//!
//! ```
//! use chimera_plugin_api::compatibility;
//!
//! assert_eq!(compatibility::SDK_VERSION, env!("CARGO_PKG_VERSION"));
//! assert_eq!(compatibility::LOADABLE_SDK_VERSIONS, "0.1.x");
//! assert_eq!(compatibility::abi_stable_version(), "0.11");
//! ```

use crate::abi::ABI_REVISION;

/// The version of `chimera-plugin-api` this crate is: what a pack built
/// against it records in its root module and in every ABI type's layout.
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `chimera-plugin-api` versions whose packs a host built against this
/// crate loads: the same major and minor, any patch (`0.1.x`).
pub const LOADABLE_SDK_VERSIONS: &str = concat!(
    env!("CARGO_PKG_VERSION_MAJOR"),
    ".",
    env!("CARGO_PKG_VERSION_MINOR"),
    ".x"
);

/// The `abi_stable` ABI a host and its packs must share (`0.11`): its
/// library header is checked before anything else.
#[must_use]
pub fn abi_stable_version() -> String {
    let header = abi_stable::library::AbiHeader::VALUE;
    format!("{}.{}", header.abi_major, header.abi_minor)
}

/// The lines `chimera --version` prints after the host's own version: the
/// ABI revision and which packs this build loads.
#[must_use]
pub fn summary() -> String {
    format!(
        "ABI revision {ABI_REVISION}\n\
         loads packs built with chimera-plugin-api {LOADABLE_SDK_VERSIONS} \
         (this host: {SDK_VERSION}) on abi_stable {}",
        abi_stable_version()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`LOADABLE_SDK_VERSIONS`] spells the rule for `0.x` (the minor must
    /// match). At `1.0` `abi_stable`'s rule changes (same major, and a host
    /// minor no newer than the pack's): this fails so the text is rewritten.
    #[test]
    fn the_loadable_range_is_written_for_a_zero_major() {
        assert_eq!(env!("CARGO_PKG_VERSION_MAJOR"), "0");
        assert!(SDK_VERSION.starts_with(LOADABLE_SDK_VERSIONS.trim_end_matches('x')));
    }

    #[test]
    fn the_summary_names_the_revision_and_the_range() {
        let summary = summary();
        assert!(summary.contains(&format!("ABI revision {ABI_REVISION}")));
        assert!(summary.contains("chimera-plugin-api 0.1.x"));
        assert!(summary.contains("abi_stable 0.11"));
    }
}
