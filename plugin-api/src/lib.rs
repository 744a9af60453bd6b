//! # chimera-plugin-api
//!
//! The contract between the Chimera host and its policy **packs**: a frozen,
//! `abi_stable`-checked binary interface ([`abi`]) and a safe SDK ([`sdk`]) so
//! that a pack is plain Rust — no `unsafe`, no ABI types.
//!
//! ```
//! use chimera_plugin_api::prelude::*;
//!
//! /// Blocks `rm -rf` in shell calls.
//! #[derive(Default)]
//! pub struct NoDelete;
//!
//! impl Pack for NoDelete {
//!     const NAME: &'static str = "no-delete";
//!     const VERSION: &'static str = "1.0.0";
//!     const DESCRIPTION: &'static str = "blocks recursive removal";
//!     const SEAMS: &'static [SeamKind] = &[SeamKind::ToolCall];
//!     type Config = NoConfig;
//!
//!     fn new(_config: NoConfig) -> Result<Self, PackError> {
//!         Ok(NoDelete)
//!     }
//!
//!     fn register(self: std::sync::Arc<Self>, registrar: &mut Registrar) {
//!         registrar.tool_call("gate", |_session, call| {
//!             if call.arguments_json().contains("rm -rf") {
//!                 return Ok(Decision::Block("no-delete: recursive removal is gated".into()));
//!             }
//!             Ok(Decision::Allow)
//!         });
//!     }
//! }
//!
//! // In the pack's lib.rs (crate-type = ["cdylib", "rlib"]):
//! chimera_plugin_api::export_packs!(NoDelete);
//! # fn main() {}
//! ```
//!
//! The crate is split in two:
//!
//! * [`abi`] — the types that cross the `dlopen` boundary, and the rule for
//!   growing them without breaking packs already built;
//! * [`sdk`] — the [`Pack`](sdk::Pack) trait, the [`Registrar`](sdk::Registrar),
//!   typed inputs and replacements, and [`export_packs!`]. Every call into pack
//!   code goes through `catch_unwind`: a panic becomes an interceptor error.
#![deny(missing_docs)]

pub mod abi;
pub mod sdk;

/// Everything a pack author needs, in one `use`.
pub mod prelude {
    pub use crate::sdk::{
        Ask, Decision, Exhausted, GateDecision, GateResult, InterceptError, InterceptResult,
        Message, MessageRef, Messages, MessagesEdit, NoConfig, OutputDecision, OutputResult, Pack,
        PackError, Registrar, Request, RequestEdit, RequestRef, ResponseRef, Retry, SeamKind,
        Segment, Session, StreamDecision, StreamResult, ToolCall, ToolCallRef, ToolResult,
        ToolResultRef,
    };
}

#[doc(hidden)]
pub mod __private {
    pub use crate::abi::manifest::{manifest, MANIFEST_LEN};
    pub use crate::sdk::export::{
        call_root, instantiate_named, library_header, list, root_module, PackEntry,
    };
    pub use abi_stable::library::{LibHeader, RootModuleResult};
    pub use abi_stable::std_types::{RResult, RStr, RString, RVec};
}
