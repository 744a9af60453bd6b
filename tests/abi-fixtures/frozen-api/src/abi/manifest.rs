//! The pack manifest: entry-point names and versions in an exported static,
//! so a host indexes a plugins directory by reading symbol tables, without
//! running any pack code. Part of the frozen contract: symbol, size and
//! format never change within `0.1.x`.

/// Size of the manifest static, in bytes.
pub const MANIFEST_LEN: usize = 1024;
/// First line of the manifest.
pub const MANIFEST_MAGIC: &str = "chimera-pack-manifest/1\n";
/// The exported symbol holding the manifest.
pub const MANIFEST_SYMBOL: &str = "CHIMERA_PACK_MANIFEST";

/// The manifest bytes: the magic line, then `name\tversion\n` per pack, zero
/// padded. Fails the build (a const panic) when the names do not fit.
pub const fn manifest(packs: &[(&str, &str)]) -> [u8; MANIFEST_LEN] {
    let mut out = [0u8; MANIFEST_LEN];
    let mut at = copy(&mut out, 0, MANIFEST_MAGIC.as_bytes());
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

/// Parses manifest bytes into `(name, version)` pairs; `None` when the bytes
/// are not a manifest.
pub fn parse_manifest(bytes: &[u8]) -> Option<Vec<(String, String)>> {
    let text = std::str::from_utf8(bytes.split(|b| *b == 0).next()?).ok()?;
    let body = text.strip_prefix(MANIFEST_MAGIC)?;
    body.lines()
        .map(|line| {
            let (name, version) = line.split_once('\t')?;
            Some((name.to_owned(), version.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_round_trips() {
        let bytes = manifest(&[("plan-gate", "1.0.0"), ("redactor", "1.2.3")]);
        assert_eq!(
            parse_manifest(&bytes).unwrap(),
            vec![
                ("plan-gate".to_owned(), "1.0.0".to_owned()),
                ("redactor".to_owned(), "1.2.3".to_owned())
            ]
        );
        assert_eq!(parse_manifest(b"garbage"), None);
    }
}
