//! The pack manifest: entry-point names and versions in an exported static,
//! so a host indexes a plugins directory by reading symbol tables, without
//! running any pack code. Part of the frozen contract: symbol prefix, size
//! and format never change within `0.1.x`.
//!
//! ```text
//! chimera-pack-manifest/1
//! @root\t<symbol of the library header>      (optional)
//! <name>\t<version>                          (one line per pack)
//! ```
//!
//! The SDK names both statics after the pack crate
//! (`CHIMERA_PACK_MANIFEST_<crate>`, `_chimera_pack_root_<crate>`), so a
//! host can link several pack crates as rlibs without duplicate symbols. A
//! manifest without `@root` means `abi_stable`'s standard root-module symbol.

/// Size of the manifest static, in bytes.
pub const MANIFEST_LEN: usize = 1024;
/// First line of the manifest.
pub const MANIFEST_MAGIC: &str = "chimera-pack-manifest/1\n";
/// Every exported manifest symbol starts with this.
pub const MANIFEST_SYMBOL_PREFIX: &str = "CHIMERA_PACK_MANIFEST";
/// The line marker naming the library-header symbol.
pub const ROOT_MARKER: &str = "@root";

/// A parsed manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The library-header symbol, when not `abi_stable`'s standard one.
    pub root_symbol: Option<String>,
    /// `(name, version)` per pack.
    pub packs: Vec<(String, String)>,
}

/// The manifest bytes for a library whose header is `root_symbol` (empty:
/// the standard symbol). Fails the build (a const panic) when it does not fit.
#[must_use]
pub const fn manifest(root_symbol: &str, packs: &[(&str, &str)]) -> [u8; MANIFEST_LEN] {
    let mut out = [0u8; MANIFEST_LEN];
    let mut at = copy(&mut out, 0, MANIFEST_MAGIC.as_bytes());
    if !root_symbol.is_empty() {
        at = copy(&mut out, at, ROOT_MARKER.as_bytes());
        at = copy(&mut out, at, b"\t");
        at = copy(&mut out, at, root_symbol.as_bytes());
        at = copy(&mut out, at, b"\n");
    }
    let mut i = 0;
    while i < packs.len() {
        at = copy(&mut out, at, packs[i].0.as_bytes());
        at = copy(&mut out, at, b"\t");
        at = copy(&mut out, at, packs[i].1.as_bytes());
        at = copy(&mut out, at, b"\n");
        i += 1;
    }
    out
}

const fn copy(out: &mut [u8; MANIFEST_LEN], mut at: usize, bytes: &[u8]) -> usize {
    let mut i = 0;
    while i < bytes.len() {
        assert!(
            at < MANIFEST_LEN - 1,
            "pack names and versions do not fit the manifest"
        );
        out[at] = bytes[i];
        at += 1;
        i += 1;
    }
    at
}

/// Parses manifest bytes; `None` when the bytes are not a manifest.
#[must_use]
pub fn parse_manifest(bytes: &[u8]) -> Option<Manifest> {
    let text = std::str::from_utf8(bytes.split(|b| *b == 0).next()?).ok()?;
    let body = text.strip_prefix(MANIFEST_MAGIC)?;
    let mut manifest = Manifest {
        root_symbol: None,
        packs: Vec::new(),
    };
    for line in body.lines() {
        let (key, value) = line.split_once('\t')?;
        if key == ROOT_MARKER {
            manifest.root_symbol = Some(value.to_owned());
        } else {
            manifest.packs.push((key.to_owned(), value.to_owned()));
        }
    }
    Some(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_round_trips() {
        let bytes = manifest(
            "_chimera_pack_root_x",
            &[("plan-gate", "1.0.0"), ("redactor", "1.2.3")],
        );
        assert_eq!(
            parse_manifest(&bytes).unwrap(),
            Manifest {
                root_symbol: Some("_chimera_pack_root_x".to_owned()),
                packs: vec![
                    ("plan-gate".to_owned(), "1.0.0".to_owned()),
                    ("redactor".to_owned(), "1.2.3".to_owned())
                ],
            }
        );
        assert_eq!(
            parse_manifest(&manifest("", &[("a", "1")]))
                .unwrap()
                .root_symbol,
            None
        );
        assert_eq!(parse_manifest(b"garbage"), None);
    }
}
