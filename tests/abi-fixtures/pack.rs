//! A pack written directly against the ABI snapshot, as a pack built by an
//! older toolchain would be: entry point `frozen-fixture` (or
//! `mismatch-fixture` with the `layout-change` snapshot). Its one interceptor
//! blocks every tool call with a reason naming the pack.
#![allow(
    non_local_definitions,
    unsafe_code,
    reason = "abi_stable expansions in a test fixture"
)]

use abi_stable::export_root_module;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RResult, RStr, RString, RVec};
use chimera_plugin_api::abi::manifest::{manifest, MANIFEST_LEN};
use chimera_plugin_api::abi::*;

const NAME: &str = if cfg!(feature = "layout-change") {
    "mismatch-fixture"
} else {
    "frozen-fixture"
};

#[no_mangle]
pub static CHIMERA_PACK_MANIFEST: [u8; MANIFEST_LEN] = manifest("", &[(NAME, "1.0.0")]);

struct Gate;

impl InterceptorAbi for Gate {
    fn intercept(&self, input: &SeamInput<'_>) -> Decision {
        match input.tool_call.into_option() {
            Some(call) => Decision::block(format!(
                "{NAME}: {} blocked by a pack built against ABI revision 1",
                call.name
            )),
            None => Decision::allow(),
        }
    }
}

struct Instance;

impl PackInstanceAbi for Instance {
    fn registrations(&self) -> RVec<Registration> {
        RVec::from(vec![Registration {
            seam: Seam::TOOL_CALL,
            name: RString::from("gate"),
            interceptor: InterceptorAbi_TO::from_value(Gate, TD_Opaque),
        }])
    }

    fn export_state(&self) -> RString {
        RString::new()
    }

    fn import_state(&self, _state_json: RStr<'_>) -> RResult<(), RString> {
        RResult::ROk(())
    }

    fn extension(&self, method: RStr<'_>, _payload_json: RStr<'_>) -> RResult<RString, RString> {
        RResult::RErr(format!("unsupported: {method}").into())
    }
}

extern "C" fn packs() -> RVec<PackDescriptor> {
    RVec::from(vec![PackDescriptor {
        name: NAME.into(),
        version: "1.0.0".into(),
        description: "blocks every tool call (ABI fixture)".into(),
        seams: RVec::from(vec![Seam::TOOL_CALL]),
    }])
}

extern "C" fn instantiate(name: RStr<'_>, _config: RStr<'_>) -> RResult<PackInstanceBox, RString> {
    if name.as_str() == NAME {
        RResult::ROk(PackInstanceAbi_TO::from_value(Instance, TD_Opaque))
    } else {
        RResult::RErr(format!("no pack named {name}").into())
    }
}

#[export_root_module]
fn root() -> PackLibraryRef {
    PackLibrary {
        abi_revision: ABI_REVISION,
        packs,
        instantiate,
    }
    .leak_into_prefix()
}
