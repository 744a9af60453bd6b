//! The pack manifest: entry-point names and versions in an exported static,
//! so a host indexes a plugins directory by reading symbol tables, without
//! running any pack code. Part of the frozen contract: symbol prefix, size
//! and format never change within `0.1.x`.
//!
//! ```text
//! chimera-pack-manifest/1
//! @root\t<symbol of the library header>      (optional)
//! <name>\t<version>                          (one line per pack)
//! \0chimera-pack-details/1                   (optional, after a NUL byte)
//! <name>\t<seam ids, comma-separated>\t<description>
//! ```
//!
//! The SDK names both statics after the pack crate
//! (`CHIMERA_PACK_MANIFEST_<crate>`, `_chimera_pack_root_<crate>`), so a
//! host can link several pack crates as rlibs without duplicate symbols. A
//! manifest without `@root` means `abi_stable`'s standard root-module symbol.
//!
//! **Details.** Everything up to the first NUL byte is the manifest every
//! host reads, and it stays exactly as above. After that NUL the SDK adds
//! what `chimera packs list` shows without loading the pack: each pack's
//! seams (their [`Seam`] ids) and its one-line description, control
//! characters written as spaces, a description cut short (at a character
//! boundary) where the static is full. A host that predates the details
//! stops at the NUL and never sees them; a library without them (built by
//! hand, or by an SDK that predates them) lists its packs with description
//! and seams unknown.

use super::seam::Seam;

/// Size of the manifest static, in bytes.
pub const MANIFEST_LEN: usize = 1024;
/// First line of the manifest.
pub const MANIFEST_MAGIC: &str = "chimera-pack-manifest/1\n";
/// First line of the details, after the manifest's NUL byte.
pub const DETAILS_MAGIC: &str = "chimera-pack-details/1\n";
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
    /// What the details say about each pack (empty when the library has
    /// none).
    pub details: Vec<PackDetails>,
}

impl Manifest {
    /// The details of pack `name`, when the library has them.
    #[must_use]
    pub fn details_of(&self, name: &str) -> Option<&PackDetails> {
        self.details.iter().find(|details| details.name == name)
    }
}

/// What a manifest's details say about one pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackDetails {
    /// The entry-point name.
    pub name: String,
    /// The seams its interceptors use.
    pub seams: Vec<Seam>,
    /// Its one-line description.
    pub description: String,
}

/// The manifest bytes for a library whose header is `root_symbol` (empty:
/// the standard symbol), without details. Fails the build (a const panic)
/// when it does not fit.
#[must_use]
pub const fn manifest(root_symbol: &str, packs: &[(&str, &str)]) -> [u8; MANIFEST_LEN] {
    let mut writer = Writer::new(root_symbol);
    let mut i = 0;
    while i < packs.len() {
        writer = writer.pack(packs[i].0, packs[i].1);
        i += 1;
    }
    writer.finish()
}

/// Builds manifest bytes in const context: the header, the pack lines
/// (which must fit), then optionally the details (which are cut to fit).
pub(crate) struct Writer {
    out: [u8; MANIFEST_LEN],
    at: usize,
    /// Where the details line being written started.
    line: usize,
    /// The details stopped: nothing more fits.
    full: bool,
}

impl Writer {
    /// The magic line, then `@root` when `root_symbol` is not empty.
    pub(crate) const fn new(root_symbol: &str) -> Writer {
        let mut writer = Writer {
            out: [0; MANIFEST_LEN],
            at: 0,
            line: 0,
            full: false,
        };
        writer = writer.copy(MANIFEST_MAGIC.as_bytes());
        if !root_symbol.is_empty() {
            writer = writer
                .copy(ROOT_MARKER.as_bytes())
                .copy(b"\t")
                .copy(root_symbol.as_bytes())
                .copy(b"\n");
        }
        writer
    }

    /// One `<name>\t<version>` line. Every pack line comes before
    /// [`Writer::details`].
    pub(crate) const fn pack(self, name: &str, version: &str) -> Writer {
        self.copy(name.as_bytes())
            .copy(b"\t")
            .copy(version.as_bytes())
            .copy(b"\n")
    }

    /// Ends the manifest with its NUL and starts the details.
    pub(crate) const fn details(mut self) -> Writer {
        if self.at + 1 >= MANIFEST_LEN - 1 {
            self.full = true;
            return self;
        }
        self.at += 1;
        self.line = self.at;
        self.fit(DETAILS_MAGIC.as_bytes(), Fit::Raw)
    }

    /// Starts the details line of pack `name`.
    pub(crate) const fn detail(mut self, name: &str) -> Writer {
        self.line = self.at;
        self.fit(name.as_bytes(), Fit::Text).fit(b"\t", Fit::Raw)
    }

    /// Adds one seam id to the current details line.
    pub(crate) const fn seam(mut self, seam: Seam, first: bool) -> Writer {
        if !first {
            self = self.fit(b",", Fit::Raw);
        }
        let mut digits = [0u8; 10];
        let (mut n, mut len) = (seam.0, 0);
        loop {
            #[allow(clippy::cast_possible_truncation, reason = "a digit")]
            let digit = (n % 10) as u8;
            digits[digits.len() - 1 - len] = b'0' + digit;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let (_, tail) = digits.split_at(digits.len() - len);
        self.fit(tail, Fit::Raw)
    }

    /// Ends the current details line with `description`, cut (at a
    /// character boundary) to what still fits.
    pub(crate) const fn description(self, description: &str) -> Writer {
        self.fit(b"\t", Fit::Raw)
            .fit(description.as_bytes(), Fit::CutText)
            .fit(b"\n", Fit::Raw)
    }

    /// The bytes.
    pub(crate) const fn finish(self) -> [u8; MANIFEST_LEN] {
        self.out
    }

    /// Appends `bytes` to the manifest proper; they must fit (a const
    /// panic fails the pack's build otherwise). The last byte stays NUL.
    const fn copy(mut self, bytes: &[u8]) -> Writer {
        let mut i = 0;
        while i < bytes.len() {
            assert!(
                self.at < MANIFEST_LEN - 1,
                "pack names and versions do not fit the manifest"
            );
            self.out[self.at] = bytes[i];
            self.at += 1;
            i += 1;
        }
        self
    }

    /// Appends `bytes` to the details, as `how` says. What does not fit:
    /// [`Fit::CutText`] keeps as much as fits, ending at a character
    /// boundary and leaving room for the newline that ends the line; the
    /// others take the current line back and end the details.
    const fn fit(mut self, bytes: &[u8], how: Fit) -> Writer {
        if self.full {
            return self;
        }
        let cut = matches!(how, Fit::CutText);
        // The last byte stays NUL.
        let room = MANIFEST_LEN - 1 - self.at;
        let limit = if cut { room.saturating_sub(1) } else { room };
        let mut len = bytes.len();
        if len > limit {
            if !cut || limit == 0 {
                while self.at > self.line {
                    self.at -= 1;
                    self.out[self.at] = 0;
                }
                self.full = true;
                return self;
            }
            len = limit;
            while len > 0 && bytes[len] & 0xC0 == 0x80 {
                len -= 1;
            }
        }
        let clean = !matches!(how, Fit::Raw);
        let mut i = 0;
        while i < len {
            let byte = bytes[i];
            self.out[self.at] = if clean && (byte < 0x20 || byte == 0x7f) {
                b' '
            } else {
                byte
            };
            self.at += 1;
            i += 1;
        }
        self
    }
}

/// How [`Writer::fit`] writes its bytes.
#[derive(Clone, Copy)]
enum Fit {
    /// As they are (separators, the magic line); all or nothing.
    Raw,
    /// Control characters as spaces (a name); all or nothing.
    Text,
    /// Control characters as spaces, cut to fit (a description).
    CutText,
}

/// Parses manifest bytes; `None` when the bytes are not a manifest. The
/// details are read when present and well formed; a details line that is
/// not is skipped.
#[must_use]
pub fn parse_manifest(bytes: &[u8]) -> Option<Manifest> {
    let mut parts = bytes.split(|b| *b == 0);
    let text = std::str::from_utf8(parts.next()?).ok()?;
    let body = text.strip_prefix(MANIFEST_MAGIC)?;
    let mut manifest = Manifest {
        root_symbol: None,
        packs: Vec::new(),
        details: parts.next().map(parse_details).unwrap_or_default(),
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

/// The details lines after the manifest's NUL byte.
fn parse_details(bytes: &[u8]) -> Vec<PackDetails> {
    let Some(body) = std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| text.strip_prefix(DETAILS_MAGIC))
    else {
        return Vec::new();
    };
    body.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            let (name, seams, description) = (fields.next()?, fields.next()?, fields.next()?);
            let seams = seams
                .split(',')
                .filter(|id| !id.is_empty())
                .map(|id| id.parse().ok().map(Seam))
                .collect::<Option<Vec<Seam>>>()?;
            Some(PackDetails {
                name: name.to_owned(),
                seams,
                description: description.to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str, version: &str) -> (String, String) {
        (name.to_owned(), version.to_owned())
    }

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
                packs: vec![pair("plan-gate", "1.0.0"), pair("redactor", "1.2.3")],
                details: Vec::new(),
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

    const fn with_details(description: &str) -> [u8; MANIFEST_LEN] {
        Writer::new("")
            .pack("gate", "1.0.0")
            .details()
            .detail("gate")
            .seam(Seam::TOOL_CALL, true)
            .seam(Seam(12), false)
            .description(description)
            .finish()
    }

    #[test]
    fn details_follow_the_nul_so_an_older_reader_sees_the_same_manifest() {
        let bytes = with_details("blocks\tthings\n");
        let head = bytes.split(|b| *b == 0).next().unwrap();
        assert_eq!(head, b"chimera-pack-manifest/1\ngate\t1.0.0\n");
        let manifest = parse_manifest(&bytes).unwrap();
        assert_eq!(manifest.packs, [pair("gate", "1.0.0")]);
        assert_eq!(
            manifest.details_of("gate"),
            Some(&PackDetails {
                name: "gate".to_owned(),
                seams: vec![Seam::TOOL_CALL, Seam(12)],
                description: "blocks things ".to_owned(),
            })
        );
    }

    #[test]
    fn a_long_description_is_cut_at_a_character_boundary() {
        let long = "é".repeat(MANIFEST_LEN);
        let bytes = with_details(&long);
        assert_eq!(bytes[MANIFEST_LEN - 1], 0, "the static ends with a NUL");
        let description = &parse_manifest(&bytes).unwrap().details[0].description;
        assert!(description.len() > 900, "cut, not dropped");
        assert!(description.chars().all(|c| c == 'é'));
    }

    #[test]
    fn details_that_are_not_well_formed_are_ignored() {
        let mut bytes = manifest("", &[("a", "1")]).to_vec();
        let at = bytes.iter().position(|b| *b == 0).unwrap() + 1;
        for (details, expected) in [
            (
                &b"chimera-pack-details/1\na\t2,x\tbad seam\nb\t\tno seams\n"[..],
                1,
            ),
            (b"chimera-pack-details/9\na\t2\tother format\n", 0),
            (b"chimera-pack-details/1\na\t2\t\xff\n", 0),
            (b"chimera-pack-details/1\na\t2\n", 0),
        ] {
            bytes[at..at + details.len()].copy_from_slice(details);
            let parsed = parse_manifest(&bytes).unwrap();
            assert_eq!(parsed.packs, [pair("a", "1")]);
            assert_eq!(parsed.details.len(), expected, "{details:?}");
            bytes[at..].fill(0);
        }
    }
}
