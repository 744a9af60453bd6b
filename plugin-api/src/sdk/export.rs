//! What [`export_packs!`](crate::export_packs) expands to: the root module,
//! the library header `abi_stable` looks for, and a manifest static the host
//! reads from the symbol table without running any pack code.

use super::guard;
use super::instance::{instantiate, InstantiateError};
use super::pack::Pack;
use super::seam_kind::SeamKind;
use crate::abi::manifest::{Writer, MANIFEST_LEN};
use crate::abi::{PackDescriptor, PackInstanceBox, PackLibrary, PackLibraryRef, ABI_REVISION};
use abi_stable::library::{LibHeader, RootModuleResult};
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RResult, RStr, RString, RVec};

/// One pack of a library, as the export macro lists it.
pub struct PackEntry {
    name: &'static str,
    descriptor: fn() -> PackDescriptor,
    instantiate: fn(&str) -> Result<PackInstanceBox, InstantiateError>,
}

impl PackEntry {
    /// The entry for pack `P`.
    #[must_use]
    pub const fn of<P: Pack>() -> PackEntry {
        PackEntry {
            name: P::NAME,
            descriptor: descriptor::<P>,
            instantiate: instantiate::<P>,
        }
    }
}

fn descriptor<P: Pack>() -> PackDescriptor {
    PackDescriptor {
        name: P::NAME.into(),
        version: P::VERSION.into(),
        description: P::DESCRIPTION.into(),
        seams: P::SEAMS.iter().map(|seam| seam.seam()).collect(),
    }
}

/// What the manifest says about one pack of a library.
pub struct ManifestEntry {
    name: &'static str,
    version: &'static str,
    description: &'static str,
    seams: &'static [SeamKind],
}

impl ManifestEntry {
    /// The entry for pack `P`.
    #[must_use]
    pub const fn of<P: Pack>() -> ManifestEntry {
        ManifestEntry {
            name: P::NAME,
            version: P::VERSION,
            description: P::DESCRIPTION,
            seams: P::SEAMS,
        }
    }
}

/// The manifest of a library whose header is `root_symbol`: every pack's
/// name and version, then (after the NUL that ends what every host reads)
/// its seams and description, cut to fit (see [`crate::abi::manifest`]).
#[must_use]
pub const fn pack_manifest(root_symbol: &str, entries: &[ManifestEntry]) -> [u8; MANIFEST_LEN] {
    let mut writer = Writer::new(root_symbol);
    let mut i = 0;
    while i < entries.len() {
        writer = writer.pack(entries[i].name, entries[i].version);
        i += 1;
    }
    writer = writer.details();
    i = 0;
    while i < entries.len() {
        let entry = &entries[i];
        writer = writer.detail(entry.name);
        let mut j = 0;
        while j < entry.seams.len() {
            writer = writer.seam(entry.seams[j].seam(), j == 0);
            j += 1;
        }
        writer = writer.description(entry.description);
        i += 1;
    }
    writer.finish()
}

/// `PackLibrary::packs` for these entries.
#[must_use]
pub fn list(entries: &[PackEntry]) -> RVec<PackDescriptor> {
    guard::catch(|| entries.iter().map(|entry| (entry.descriptor)()).collect()).unwrap_or_default()
}

/// `PackLibrary::instantiate` for these entries.
pub fn instantiate_named(
    entries: &[PackEntry],
    name: RStr<'_>,
    config_json: RStr<'_>,
) -> RResult<PackInstanceBox, RString> {
    let outcome = match entries.iter().find(|entry| entry.name == name.as_str()) {
        Some(entry) => (entry.instantiate)(config_json.as_str()).map_err(|e| e.to_string()),
        None => Err(format!(
            "this library has no pack named '{name}' (it has: {})",
            entries
                .iter()
                .map(|entry| entry.name)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    };
    outcome.map_err(RString::from).into()
}

/// Builds the root module. Runs once, when the host checks the library.
pub fn root_module(
    packs: extern "C" fn() -> RVec<PackDescriptor>,
    instantiate: extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<PackInstanceBox, RString>,
) -> PackLibraryRef {
    guard::install_quiet_hook();
    PackLibrary {
        abi_revision: ABI_REVISION,
        packs,
        instantiate,
    }
    .leak_into_prefix()
}

/// Runs the root-module constructor the way `#[export_root_module]` would
/// (a panic becomes an error the host reports).
pub fn call_root(constructor: fn() -> PackLibraryRef) -> RootModuleResult {
    abi_stable::library::__call_root_module_loader(constructor)
}

/// The library header `abi_stable` finds by its mangled symbol name.
pub const fn library_header(loader: extern "C" fn() -> RootModuleResult) -> LibHeader {
    // SAFETY: `loader` is always `call_root(root_fn)` as the export macro
    // writes it, so the erased prefix it returns was made from a
    // `PackLibraryRef`, which is what `from_constructor::<PackLibraryRef>`
    // requires.
    #[allow(unsafe_code, reason = "the one unsafe step of exporting a root module")]
    unsafe {
        LibHeader::from_constructor::<PackLibraryRef>(
            loader,
            abi_stable::library::CheckTypeLayout::Yes,
        )
    }
}

/// Exports one or more [`Pack`](crate::sdk::Pack) types as a loadable pack
/// library. Use it once, in the pack crate's `lib.rs`, with
/// `crate-type = ["cdylib", "rlib"]`:
///
/// ```ignore
/// chimera_plugin_api::export_packs!(PlanGate);
/// ```
#[macro_export]
macro_rules! export_packs {
    ($($pack:ty),+ $(,)?) => {
        const _: () = {
            static __CHIMERA_PACKS: &[$crate::__private::PackEntry] =
                &[$($crate::__private::PackEntry::of::<$pack>()),+];

            extern "C" fn __chimera_packs(
            ) -> $crate::__private::RVec<$crate::abi::PackDescriptor> {
                $crate::__private::list(__CHIMERA_PACKS)
            }

            extern "C" fn __chimera_instantiate(
                name: $crate::__private::RStr<'_>,
                config_json: $crate::__private::RStr<'_>,
            ) -> $crate::__private::RResult<$crate::abi::PackInstanceBox, $crate::__private::RString>
            {
                $crate::__private::instantiate_named(__CHIMERA_PACKS, name, config_json)
            }

            fn __chimera_root() -> $crate::abi::PackLibraryRef {
                $crate::__private::root_module(__chimera_packs, __chimera_instantiate)
            }

            extern "C" fn __chimera_loader() -> $crate::__private::RootModuleResult {
                $crate::__private::call_root(__chimera_root)
            }

            /// The library header, under a name unique to this pack crate (the
            /// manifest says which), so several pack crates can be linked
            /// into one binary as rlibs.
            #[export_name = concat!("_chimera_pack_root_", env!("CARGO_CRATE_NAME"))]
            pub static __CHIMERA_ROOT: $crate::__private::LibHeader =
                $crate::__private::library_header(__chimera_loader);

            /// Entry points, seams and descriptions, readable from the symbol table
            /// without loading.
            #[export_name = concat!("CHIMERA_PACK_MANIFEST_", env!("CARGO_CRATE_NAME"))]
            pub static __CHIMERA_MANIFEST: [u8; $crate::__private::MANIFEST_LEN] =
                $crate::__private::pack_manifest(
                    concat!("_chimera_pack_root_", env!("CARGO_CRATE_NAME")),
                    &[$($crate::__private::ManifestEntry::of::<$pack>()),+],
                );
        };
    };
}
