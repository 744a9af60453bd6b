//! Reading a pack file without loading it: is it a complete shared library,
//! and which entry points does its manifest name? No pack code runs here.

use super::errors::{ElfPart, FileError, Incomplete, WrongFormat};
use super::MAX_PACK_BYTES;
use chimera_plugin_api::abi::manifest::{
    parse_manifest, Manifest, MANIFEST_LEN, MANIFEST_SYMBOL_PREFIX,
};
use object::elf::{FileHeader32, FileHeader64, ELFCLASS32, ELFCLASS64, ELFMAG};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::read::ReadRef;
use object::{Endianness, Object, ObjectKind, ObjectSection};
use sha2::{Digest, Sha256};
use std::io::Read;

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

/// The SHA-256 of `bytes`, lower-case hex: what locks pin and listings show.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// The whole file, up to [`MAX_PACK_BYTES`].
pub(crate) fn read_bounded(file: std::fs::File) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::new();
    file.take(MAX_PACK_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(FileError::Io)?;
    if bytes.len() as u64 > MAX_PACK_BYTES {
        return Err(WrongFormat::TooLarge {
            limit: MAX_PACK_BYTES,
        }
        .into());
    }
    Ok(bytes)
}

/// Checks `data` (the whole file, `len` bytes) and reads its manifest:
/// first that the file is complete, then that it is a dynamic library, then
/// its manifests.
pub(crate) fn inspect<'data, R: ReadRef<'data>>(
    data: R,
    len: u64,
) -> Result<Inspection, FileError> {
    if len == 0 {
        return Err(Incomplete::Empty.into());
    }
    let magic = data.read_bytes_at(0, len.min(4)).unwrap_or_default();
    if ELFMAG.starts_with(magic) {
        elf_complete(data, len)?;
    }
    let file =
        object::File::parse(data).map_err(|error| WrongFormat::Unrecognised(error.to_string()))?;
    let wrong = match file.kind() {
        ObjectKind::Dynamic => None,
        ObjectKind::Executable => Some(WrongFormat::Executable),
        ObjectKind::Relocatable => Some(WrongFormat::Relocatable),
        _ => Some(WrongFormat::OtherKind),
    };
    if let Some(wrong) = wrong {
        return Err(wrong.into());
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

/// An ELF file (or a prefix of one) is complete when everything its header
/// describes lies inside the file: the section and program header tables
/// and the contents of every segment and section. A copy cut short anywhere
/// loses at least the section table, which linkers put last.
///
/// Only completeness is judged here: a header this reader does not know
/// passes, and the format check that follows refuses it.
fn elf_complete<'data, R: ReadRef<'data>>(data: R, len: u64) -> Result<(), Incomplete> {
    match data
        .read_bytes_at(4, 1)
        .ok()
        .and_then(|class| class.first())
    {
        None => Err(Incomplete::Header { len }),
        Some(&ELFCLASS64) => elf_parts_complete::<FileHeader64<Endianness>, R>(data, len),
        Some(&ELFCLASS32) => elf_parts_complete::<FileHeader32<Endianness>, R>(data, len),
        Some(_) => Ok(()),
    }
}

fn elf_parts_complete<'data, Elf, R>(data: R, len: u64) -> Result<(), Incomplete>
where
    Elf: FileHeader<Endian = Endianness>,
    R: ReadRef<'data>,
{
    if len < size_of::<Elf>() as u64 {
        return Err(Incomplete::Header { len });
    }
    let Ok(header) = Elf::parse(data) else {
        return Ok(());
    };
    let Ok(endian) = header.endian() else {
        return Ok(());
    };
    let within = |part: ElfPart, start: u64, size: u64| {
        let end = start.saturating_add(size);
        if end > len {
            return Err(Incomplete::CutShort { len, part, end });
        }
        Ok(())
    };
    let shoff: u64 = header.e_shoff(endian).into();
    let shentsize = u64::from(header.e_shentsize(endian));
    if shoff != 0 {
        // Section 0 first: with extended numbering it holds the real count
        // (`e_shnum == 0`) and the section-name table's index
        // (`e_shstrndx == SHN_XINDEX`), which `object` reads from it.
        within(ElfPart::SectionTable, shoff, shentsize)?;
        let count = header.shnum(endian, data).unwrap_or(0) as u64;
        within(
            ElfPart::SectionTable,
            shoff,
            shentsize.saturating_mul(count),
        )?;
    }
    let phoff: u64 = header.e_phoff(endian).into();
    if phoff != 0 {
        let count = header.phnum(endian, data).unwrap_or(0) as u64;
        let size = u64::from(header.e_phentsize(endian)).saturating_mul(count);
        within(ElfPart::ProgramHeaders, phoff, size)?;
    }
    for (index, segment) in header
        .program_headers(endian, data)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let (start, size) = segment.file_range(endian);
        within(ElfPart::Segment(index), start, size)?;
    }
    for (index, section) in header
        .section_headers(endian, data)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if let Some((start, size)) = section.file_range(endian) {
            within(ElfPart::Section(index), start, size)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::elf::{Ident, SectionHeader64, ELFDATA2LSB, ET_DYN, EV_CURRENT, SHN_XINDEX};
    use object::endian::{LittleEndian as LE, U16, U32, U64};

    #[test]
    fn an_empty_file_is_incomplete() {
        assert!(matches!(
            inspect(&[][..], 0),
            Err(FileError::Incomplete(Incomplete::Empty))
        ));
    }

    #[test]
    fn text_is_not_a_library() {
        let text = b"definitely not a shared library, just some text";
        assert!(matches!(
            inspect(&text[..], text.len() as u64),
            Err(FileError::NotALibrary(WrongFormat::Unrecognised(_)))
        ));
    }

    #[test]
    fn the_hash_is_lower_case_hex_of_sha256() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    /// A 64-bit little-endian ELF header (no program headers) whose
    /// section table starts right after it, with `e_shnum` and
    /// `e_shstrndx` as given.
    fn header(shnum: u16, shstrndx: u16) -> Vec<u8> {
        let header = FileHeader64::<LE> {
            e_ident: Ident {
                magic: ELFMAG,
                class: ELFCLASS64,
                data: ELFDATA2LSB,
                version: EV_CURRENT,
                os_abi: 0,
                abi_version: 0,
                padding: [0; 7],
            },
            e_type: U16::new(LE, ET_DYN),
            e_machine: U16::new(LE, 0),
            e_version: U32::new(LE, u32::from(EV_CURRENT)),
            e_entry: U64::new(LE, 0),
            e_phoff: U64::new(LE, 0),
            e_shoff: U64::new(LE, 64),
            e_flags: U32::new(LE, 0),
            e_ehsize: U16::new(LE, 64),
            e_phentsize: U16::new(LE, 56),
            e_phnum: U16::new(LE, 0),
            e_shentsize: U16::new(LE, 64),
            e_shnum: U16::new(LE, shnum),
            e_shstrndx: U16::new(LE, shstrndx),
        };
        object::pod::bytes_of(&header).to_vec()
    }

    /// A section header whose contents are `size` bytes at `offset`, with
    /// `link` in `sh_link`.
    fn section(offset: u64, size: u64, link: u32) -> Vec<u8> {
        let section = SectionHeader64::<LE> {
            sh_name: U32::new(LE, 0),
            sh_type: U32::new(LE, object::elf::SHT_STRTAB),
            sh_flags: U64::new(LE, 0),
            sh_addr: U64::new(LE, 0),
            sh_offset: U64::new(LE, offset),
            sh_size: U64::new(LE, size),
            sh_link: U32::new(LE, link),
            sh_info: U32::new(LE, 0),
            sh_addralign: U64::new(LE, 1),
            sh_entsize: U64::new(LE, 0),
        };
        object::pod::bytes_of(&section).to_vec()
    }

    #[test]
    fn a_header_whose_section_table_lies_past_the_end_is_incomplete() {
        let mut file = header(10, 0);
        file.resize(500, 0);
        let error = elf_complete(&file[..], 500).unwrap_err();
        assert_eq!(
            error.to_string(),
            "500 bytes, but its section table ends at byte 704"
        );
        file.resize(704, 0);
        assert_eq!(elf_complete(&file[..], 704), Ok(()));
    }

    #[test]
    fn extended_section_numbering_takes_the_count_from_section_zero() {
        // e_shnum = 0: the real count (3) is section 0's sh_size; the
        // section-name table's index (2) is its sh_link (SHN_XINDEX).
        let mut file = header(0, SHN_XINDEX);
        file.extend(section(0, 3, 2));
        let error = elf_complete(&file[..], file.len() as u64).unwrap_err();
        assert_eq!(
            error,
            Incomplete::CutShort {
                len: 128,
                part: ElfPart::SectionTable,
                end: 256
            },
            "three sections, not none"
        );
        file.extend(section(0, 0, 0));
        file.extend(section(256, 5, 0));
        assert_eq!(
            elf_complete(&file[..], 256).unwrap_err().to_string(),
            "256 bytes, but its section 2 ends at byte 261"
        );
        file.extend(b"\0names");
        assert_eq!(elf_complete(&file[..], file.len() as u64), Ok(()));
        let read = object::read::elf::ElfFile64::<LE>::parse(&file[..]).unwrap();
        assert_eq!(read.elf_section_table().len(), 3);
    }

    #[test]
    fn a_library_cut_short_anywhere_is_incomplete() {
        // The test binary is a real linked ELF file like any pack (an
        // executable, but completeness is judged apart from the kind).
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(&bytes[..4], ELFMAG, "this test runs on ELF platforms");
        let len = bytes.len();
        assert_eq!(elf_complete(&bytes[..], len as u64), Ok(()));
        let near_the_ends = (0..4096).chain(len.saturating_sub(8192)..len);
        let spread = (1..1000).map(|i| len / 1000 * i);
        for keep in near_the_ends.chain(spread).filter(|&keep| keep < len) {
            let cut = &bytes[..keep];
            match inspect(cut, keep as u64) {
                Err(FileError::Incomplete(_)) => {}
                other => panic!("{keep} of {len} bytes: {other:?}"),
            }
        }
    }
}
