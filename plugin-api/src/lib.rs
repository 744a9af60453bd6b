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
//!
//! What a pack sees of the host is described by the host itself:
//! `chimera tools list --json` prints every built-in tool with the JSON
//! schema of its arguments (what [`ToolCallRef::arguments`](sdk::ToolCallRef::arguments)
//! returns for its calls), and the repository's `docs/EVENTS.md` lists every
//! event `chimera run --json` prints, the `interceptor` events a pack's
//! decisions become among them.
//!
//! # Configuration
//!
//! A pack's configuration is the JSON the user gives after `--pack NAME=`
//! (`{}` when none), parsed into [`Pack::Config`](sdk::Pack::Config) with
//! serde. The prelude re-exports `serde` (with its derives, `Deserialize`
//! and `Serialize`) and `serde_json`, so a pack needs no dependency besides
//! this crate. A derive reached through a re-export must be told where serde
//! is — `#[serde(crate = "chimera_plugin_api::serde")]` — because the code it
//! generates names the `serde` crate itself:
//!
//! ```
//! use chimera_plugin_api::prelude::*;
//!
//! /// `{"max_calls": 3, "tools": ["bash"]}`; both keys optional.
//! #[derive(Debug, Deserialize)]
//! #[serde(crate = "chimera_plugin_api::serde", deny_unknown_fields)]
//! pub struct Config {
//!     #[serde(default = "three")]
//!     pub max_calls: u64,
//!     #[serde(default)]
//!     pub tools: Vec<String>,
//! }
//!
//! fn three() -> u64 {
//!     3
//! }
//!
//! let config: Config = serde_json::from_str(r#"{"tools": ["bash"]}"#).unwrap();
//! assert_eq!((config.max_calls, config.tools.len()), (3, 1));
//! // `deny_unknown_fields`: a misspelt key is a load error, not a default.
//! assert!(serde_json::from_str::<Config>(r#"{"max_call": 3}"#).is_err());
//! ```
//!
//! A pack that does depend on `serde` itself may leave the attribute out.
//! Either way, the host shows a configuration error as one line,
//! `<pack>: bad config: …`, and refuses the load (exit 3).
//!
//! # State handover across a hot swap
//!
//! With `chimera run --watch`, a rebuilt pack file replaces the running build
//! between two turns (ARCHITECTURE.md, "Hot swap"). Whatever the running
//! build keeps in memory — counts, windows, which conversations planned —
//! would be lost, so the SDK lets the old build hand it to the new one:
//! [`Pack::export_state`](sdk::Pack::export_state) on the old build,
//! [`Pack::import_state`](sdk::Pack::import_state) on the new one.
//!
//! **When they run.** Once per reload, in this order: the new build is
//! constructed with the same configuration; the old build's `export_state`
//! runs; when it returned `Some`, the new build's `import_state` runs with
//! that value; then the new build registers its interceptors and its chains
//! take the old build's place in one step. Neither runs on a first load, on
//! a reload whose file content did not change, or at exit: state lives for
//! the process only. A turn in flight finishes on the old build, so what the
//! old build records after its export (for that turn) is not carried over.
//!
//! **Export must not change the old build.** A reload can still fail after
//! the export (the new build's registration is refused, say); the old build
//! then keeps running, and it must still have its state.
//!
//! **A failed import.** An `Err`, a panic, or state that is not valid JSON
//! does not stop the reload: the host logs one warning line (`the new build
//! did not take the old state; it starts fresh`) and swaps the new build in
//! with whatever `import_state` left. So parse and check everything before
//! you apply any of it — then a refusal leaves the new build exactly fresh.
//! A panicking `export_state` hands over nothing.
//!
//! **Format and versioning.** The state is any JSON value; the host only
//! carries it. The build reading it may be *older* than the one that wrote
//! it (rolling a change back is a reload too), so put a version in it,
//! refuse versions you do not know (`Err`: a fresh start beats a misread
//! count), read the versions you can upgrade, and give new fields a
//! `#[serde(default)]`. Keep it bounded: it is held in memory twice while it
//! crosses.
//!
//! ```
//! use chimera_plugin_api::prelude::*;
//! use std::collections::BTreeMap;
//! use std::sync::Mutex;
//!
//! /// What one build hands to the next.
//! #[derive(Serialize, Deserialize)]
//! #[serde(crate = "chimera_plugin_api::serde", deny_unknown_fields)]
//! struct Handover {
//!     version: u32,
//!     calls: BTreeMap<String, u64>,
//! }
//!
//! const HANDOVER_VERSION: u32 = 1;
//!
//! struct Counter {
//!     calls: Mutex<BTreeMap<String, u64>>,
//! }
//!
//! impl Counter {
//!     fn export_state(&self) -> Option<serde_json::Value> {
//!         let calls = self.calls.lock().ok()?.clone();
//!         serde_json::to_value(Handover { version: HANDOVER_VERSION, calls }).ok()
//!     }
//!
//!     fn import_state(&self, state: serde_json::Value) -> Result<(), PackError> {
//!         // Everything is checked before anything is applied.
//!         let handover: Handover = serde_json::from_value(state)?;
//!         if handover.version != HANDOVER_VERSION {
//!             return Err(PackError::msg(format!("unknown state version {}", handover.version)));
//!         }
//!         let mut calls = self.calls.lock().map_err(|_| PackError::msg("poisoned"))?;
//!         *calls = handover.calls;
//!         Ok(())
//!     }
//! }
//!
//! let old = Counter { calls: Mutex::new(BTreeMap::from([("s1".to_owned(), 2)])) };
//! let new = Counter { calls: Mutex::new(BTreeMap::new()) };
//! new.import_state(old.export_state().unwrap()).unwrap();
//! assert_eq!(new.calls.lock().unwrap()["s1"], 2);
//! assert!(new.import_state(serde_json::json!({"version": 2, "calls": {}})).is_err());
//! assert_eq!(new.calls.lock().unwrap()["s1"], 2, "a refused import applies nothing");
//! ```
//!
//! (These are the bodies of the two [`Pack`](sdk::Pack) methods.) The
//! workspace's `examples/stateful-pack` is this counter as a whole pack,
//! and the integration suite hot-swaps its real library to see the counts
//! carried over.
//!
//! # Counting across processes
//!
//! A gate that counts (a quota, a budget, a rate limit) keeps its counts
//! in its own memory, or asks the host for counters it keeps:
//! [`Registrar::state`](sdk::Registrar::state) returns a
//! [`State`](sdk::State) with an atomic `incr_by`, `get` and a token-bucket
//! `take`, under the pack's name and a scope the host gives (one
//! conversation, or everything it serves). When the host keeps them in a
//! store other processes share (`chimera serve --state-redis`), every
//! replica of a gateway counts into the same ones. A host that predates
//! the service never offers it, and the pack counts in process as before.
//!
//! # Compatibility
//!
//! A pack library records two things when it is built, and the host checks
//! both when it opens the library:
//!
//! * the version of `chimera-plugin-api` it was built with, in its root
//!   module: `abi_stable` refuses a library whose major differs from the
//!   host's, or — for `0.x` — whose minor is *older* than the host's;
//! * the layout of every type that crosses the boundary, each carrying its
//!   crate's name and version: same name, and for `0.x` the same minor, in
//!   either direction.
//!
//! Together, for today's `0.x` line:
//!
//! | pack built with | host built with | loads? |
//! |---|---|---|
//! | `chimera-plugin-api 0.1.x` | `chimera-plugin-api 0.1.y`, any `x`, `y` | yes |
//! | `0.2.x` | `0.1.y` | no: one line, `incompatible pack ABI … rebuild the pack` |
//! | `0.1.x` | `0.2.y` | no: one line, `built against chimera-plugin-api 0.1.x, but this host speaks 0.2.y` |
//! | `abi_stable` other than `0.11` | any | no: one line |
//!
//! The host says which it loads: `chimera --version` prints its own version,
//! the ABI revision and the range ([`compatibility`]).
//!
//! [`abi::ABI_REVISION`] is not part of that check. It counts the meanings
//! given to seam and decision-kind constants (a new seam is a new constant,
//! not a new layout) and is reported by `chimera packs check --json`; every
//! `0.1.x` pack loads whatever its revision, and a pack that registers on a
//! seam the host does not run is refused at load with one line.
//!
//! **Every release of this crate is an ABI question**, because the SDK and
//! the ABI share one crate version. A `0.1.x` release may add to the SDK
//! (new methods, new types, new re-exports) but must leave every type in
//! [`abi`] and the manifest format exactly as they are; the frozen-ABI
//! fixture in the integration suite fails otherwise. A change that would
//! break the SDK's Rust API needs `0.2`, which is a new ABI: every pack
//! rebuilt, and no `0.1` pack loads into a `0.2` host or the other way
//! round. ARCHITECTURE.md ("Compatibility") records why the ABI and the SDK
//! are one crate for now, and what splitting them would take.
#![deny(missing_docs)]

pub mod abi;
pub mod compatibility;
pub mod sdk;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// The serde the SDK is built with, for a pack's configuration and state:
/// derive through it with `#[serde(crate = "chimera_plugin_api::serde")]`
/// (see "Configuration").
#[doc(no_inline)]
pub use serde;
/// The `serde_json` the SDK is built with (state is a `serde_json::Value`).
#[doc(no_inline)]
pub use serde_json;

/// Everything a pack author needs, in one `use`: the SDK's types, and `serde`
/// (with `Deserialize` and `Serialize`) and `serde_json` for configuration
/// and state.
pub mod prelude {
    pub use crate::sdk::{
        Ask, Decision, Exhausted, GateDecision, GateResult, InterceptError, InterceptResult,
        Message, MessageRef, Messages, MessagesEdit, NoConfig, OutputDecision, OutputResult, Pack,
        PackError, Registrar, Request, RequestEdit, RequestRef, ResponseRef, Retry, SeamKind,
        Segment, Session, StreamDecision, StreamResult, StreamRewrite, StreamRewriteResult,
        ToolCall, ToolCallRef, ToolResult, ToolResultRef,
    };
    pub use crate::{serde, serde_json};
    pub use serde::{Deserialize, Serialize};
}

#[doc(hidden)]
pub mod __private {
    pub use crate::abi::manifest::MANIFEST_LEN;
    pub use crate::sdk::export::{
        call_root, instantiate_named, library_header, list, pack_manifest, root_module,
        ManifestEntry, PackEntry,
    };
    pub use abi_stable::library::{LibHeader, RootModuleResult};
    pub use abi_stable::std_types::{RResult, RStr, RString, RVec};
}
