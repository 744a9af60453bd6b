//! The root module a pack library exports, and the trait objects behind it.

// `#[sabi_trait]` expands to impl blocks inside a const item, which rustc's
// `non_local_definitions` lint flags.
#![allow(non_local_definitions, reason = "abi_stable's sabi_trait expansion")]
// The same expansion implements `unsafe` traits and writes fully qualified
// paths; the unsafety is abi_stable's, audited upstream.
#![allow(unsafe_code, reason = "abi_stable's sabi_trait expansion")]
#![allow(unused_qualifications, reason = "abi_stable's sabi_trait expansion")]
#![allow(
    clippy::must_use_candidate,
    clippy::used_underscore_binding,
    clippy::cast_ptr_alignment,
    clippy::expl_impl_clone_on_copy,
    reason = "abi_stable's sabi_trait and StableAbi expansions"
)]

use super::decision::Decision;
use super::seam::Seam;
use super::views::SeamInput;
use abi_stable::library::RootModule;
use abi_stable::package_version_strings;
use abi_stable::sabi_trait;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RBox, RResult, RStr, RString, RVec};
use abi_stable::StableAbi;

/// Revision of this ABI that a pack was built against. Packs report it in
/// [`PackLibrary::abi_revision`]; a host uses it to know which seams and
/// decision kinds a pack can possibly produce. Bumped (never re-used) each time
/// a seam or decision kind constant gains behaviour.
pub const ABI_REVISION: u32 = 1;

/// One interceptor of a pack.
#[sabi_trait]
pub trait InterceptorAbi: Send + Sync {
    /// Decides on one value. Must not unwind: the SDK catches panics and
    /// answers [`DecisionKind::ERROR`](crate::abi::DecisionKind::ERROR) instead.
    fn intercept(&self, input: &SeamInput<'_>) -> Decision;
}

/// An owned, type-erased interceptor.
pub type InterceptorBox = InterceptorAbi_TO<'static, RBox<()>>;

/// One interceptor registered on one seam.
#[repr(C)]
#[derive(StableAbi)]
pub struct Registration {
    /// The seam it runs on.
    pub seam: Seam,
    /// Its name within the pack (shown in events as `<pack>/<name>`).
    pub name: RString,
    /// The interceptor.
    pub interceptor: InterceptorBox,
}

/// One configured pack.
#[sabi_trait]
pub trait PackInstanceAbi: Send + Sync {
    /// Every interceptor of the pack, in registration order (the order they
    /// run in within one seam).
    fn registrations(&self) -> RVec<Registration>;

    /// State to hand to the next build of this pack on hot swap, as JSON;
    /// empty when the pack keeps none.
    fn export_state(&self) -> RString;

    /// Adopts state exported by an earlier build of the same pack.
    fn import_state(&self, state_json: RStr<'_>) -> RResult<(), RString>;

    /// Reserved for capabilities added later: answers `method` with a JSON
    /// payload. Packs that do not know `method` answer `RErr("unsupported: …")`.
    fn extension(&self, method: RStr<'_>, payload_json: RStr<'_>) -> RResult<RString, RString>;
}

/// An owned, type-erased pack instance.
pub type PackInstanceBox = PackInstanceAbi_TO<'static, RBox<()>>;

/// What a library says about one of its packs, without instantiating it.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct PackDescriptor {
    /// The entry-point name (`plan-gate`).
    pub name: RString,
    /// The pack's own version.
    pub version: RString,
    /// One line for `chimera packs list`.
    pub description: RString,
    /// The seams its interceptors use.
    pub seams: RVec<Seam>,
}

/// The root module of a pack library. **Frozen**: see "Growing the ABI".
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PackLibraryRef)))]
#[sabi(missing_field(panic))]
pub struct PackLibrary {
    /// [`ABI_REVISION`] as the pack saw it at build time.
    pub abi_revision: u32,
    /// The packs this library provides.
    pub packs: extern "C" fn() -> RVec<PackDescriptor>,
    /// Builds the pack named `name` from its JSON configuration (an empty
    /// string means defaults). A bad configuration is an `RErr` line, never a
    /// panic.
    #[sabi(last_prefix_field)]
    pub instantiate:
        extern "C" fn(name: RStr<'_>, config_json: RStr<'_>) -> RResult<PackInstanceBox, RString>,
}

impl RootModule for PackLibraryRef {
    abi_stable::declare_root_module_statics! {PackLibraryRef}
    const BASE_NAME: &'static str = "chimera_pack";
    const NAME: &'static str = "chimera policy pack";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
