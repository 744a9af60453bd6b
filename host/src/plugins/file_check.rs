//! Reading a pack file without loading it: is it a complete shared library,
//! and which entry points does its manifest name? No pack code runs here.

use super::errors::FileError;
use chimera_plugin_api::abi::manifest::{
    parse_manifest, Manifest, MANIFEST_LEN, MANIFEST_SYMBOL_PREFIX,
};
use object::read::ReadRef;
use object::{Object, ObjectKind, ObjectSection};

/// What a pack file says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inspection {
    /// One manifest per pack crate linked into the library.
    pub(crate) manifests: Vec<Manifest>,
}

impl Inspection {
    /// `(name, version)` of every pack, in manifest order.
    pub(crate) fn packs(&self) -> impl Iterator<Item = &(String, String)> {
        self.manifests.iter().flat_map(|m| m.packs.iter())
    }
}

/// Checks `data` (the whole file, `len` bytes) and reads its manifest.
pub(crate) fn inspect<'data, R: ReadRef<'data>>(
    data: R,
    len: u64,
) -> Result<Inspection, FileError> {
    if len == 0 {
        return Err(FileError::Incomplete("the file is empty".to_owned()));
    }
    let head = data.read_bytes_at(0, len.min(64)).unwrap_or_default();
    if head.starts_with(b"\x7fELF") {
        elf_complete(head, len)?;
    }
    let file = object::File::parse(data)
        .map_err(|error| FileError::NotALibrary(error.to_string().to_lowercase()))?;
    match file.kind() {
        ObjectKind::Dynamic => {}
        ObjectKind::Executable => return Err(FileError::NotALibrary("an executable".to_owned())),
        ObjectKind::Relocatable => {
            return Err(FileError::NotALibrary("a relocatable object".to_owned()))
        }
        _ => return Err(FileError::NotALibrary("not a dynamic library".to_owned())),
    }
    let manifests = read_manifests(&file);
    if manifests.is_empty() {
        return Err(FileError::NotAPack);
    }
    Ok(Inspection { manifests })
}

/// Every manifest the library exports (one per pack crate linked into it).
fn read_manifests<'data, R: ReadRef<'data>>(file: &object::File<'data, R>) -> Vec<Manifest> {
    let Ok(exports) = file.exports() else {
        return Vec::new();
    };
    let prefix = MANIFEST_SYMBOL_PREFIX.as_bytes();
    exports
        .iter()
        .filter(|export| {
            let name = export.name();
            name.starts_with(prefix)
                || name
                    .strip_prefix(b"_")
                    .is_some_and(|n| n.starts_with(prefix))
        })
        .filter_map(|export| {
            let address = export.address();
            let len = MANIFEST_LEN as u64;
            let bytes = file.sections().find_map(|section| {
                let start = section.address();
                (address >= start && address + len <= start + section.size())
                    .then(|| section.data_range(address, len).ok().flatten())
                    .flatten()
            })?;
            parse_manifest(bytes)
        })
        .collect()
}

/// An ELF file is complete when its section header table ends at (or
/// before) the end of the file; a truncated copy loses the table, which sits
/// at the end. Measured to flag every truncation the loader would otherwise
/// map (ABI-FINDINGS §g).
fn elf_complete(head: &[u8], len: u64) -> Result<(), FileError> {
    let field = |at: usize, width: usize| -> Option<u64> {
        let bytes = head.get(at..at + width)?;
        let little = head.get(5) == Some(&1);
        let mut value = 0u64;
        for (i, byte) in bytes.iter().enumerate() {
            let shift = if little { i } else { width - 1 - i };
            value |= u64::from(*byte) << (8 * shift);
        }
        Some(value)
    };
    let layout = match head.get(4) {
        Some(2) => (0x28, 8, 0x3A, 0x3C),
        Some(1) => (0x20, 4, 0x2E, 0x30),
        _ => {
            return Err(FileError::Incomplete(
                "the ELF header is cut short".to_owned(),
            ))
        }
    };
    let (Some(shoff), Some(shentsize), Some(shnum)) = (
        field(layout.0, layout.1),
        field(layout.2, 2),
        field(layout.3, 2),
    ) else {
        return Err(FileError::Incomplete(
            "the ELF header is cut short".to_owned(),
        ));
    };
    let end = shoff.saturating_add(shentsize.saturating_mul(shnum));
    if end > len {
        return Err(FileError::Incomplete(format!(
            "{len} bytes, but its section table ends at byte {end}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_is_incomplete() {
        assert!(matches!(inspect(&[][..], 0), Err(FileError::Incomplete(_))));
    }

    #[test]
    fn text_is_not_a_library() {
        let text = b"definitely not a shared library, just some text";
        assert!(matches!(
            inspect(&text[..], text.len() as u64),
            Err(FileError::NotALibrary(_))
        ));
    }

    #[test]
    fn a_header_whose_section_table_lies_past_the_end_is_incomplete() {
        let mut head = vec![0u8; 64];
        head[..4].copy_from_slice(b"\x7fELF");
        head[4] = 2; // 64-bit
        head[5] = 1; // little endian
        head[0x28..0x30].copy_from_slice(&4096u64.to_le_bytes());
        head[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        head[0x3C..0x3E].copy_from_slice(&10u16.to_le_bytes());
        let error = elf_complete(&head, 1000).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("section table ends at byte 4736"),
            "{error}"
        );
        assert!(elf_complete(&head, 4736).is_ok());
    }
}
