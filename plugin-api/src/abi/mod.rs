//! The frozen binary interface between the host and a pack library.
//!
//! Everything in this module crosses the `dlopen` boundary and is checked by
//! `abi_stable` when a pack loads. Pack authors never touch it: the [`sdk`](crate::sdk)
//! hides it. Host authors see it only through `chimera-host`.
//!
//! # Shape
//!
//! ```text
//!  PackLibrary (root module, frozen)
//!   ├─ packs()        -> [PackDescriptor { name, version, description, seams }]
//!   └─ instantiate(name, config_json) -> PackInstance | error line
//!        PackInstance
//!         ├─ registrations() -> [Registration { seam, name, Interceptor }]
//!         ├─ export_state() / import_state(json)      (hot-swap handover)
//!         └─ extension(method, json) -> json          (reserved, see below)
//!              Interceptor::intercept(&SeamInput) -> Decision
//! ```
//!
//! Inputs are **borrowed views** ([`SeamInput`] and the `*View` types) pointing
//! into the host's own strings: crossing costs no allocation. Only a
//! replacement allocates, as owned `*Value` types inside a [`Decision`].
//!
//! # Growing the ABI
//!
//! `abi_stable` accepts a pack only when every type the host expects has *no
//! more* fields, variants or methods than the pack's copy of that type (a host
//! built against a larger type rejects older packs: measured when this crate
//! was designed, by adding one root-module field). Packs built once must keep loading into
//! hosts built later, so **no type in this module may change layout**: no new
//! field, variant, method, or root-module field, ever, within `0.1.x`. The
//! frozen-ABI fixture (`tests/abi-fixtures`) is a pack built against a snapshot of
//! this module; the integration suite loads it, so a layout change fails CI.
//!
//! The ABI grows through *data*, not through layout:
//!
//! * **A new seam** (`model_response`, `output`, `stream_chunk`) is a new
//!   [`Seam`] constant. [`Seam`] is an open integer set, so old packs still load;
//!   they simply never register on the new seam. Its input travels in the
//!   existing slots of [`SeamInput`] (the table there): `messages` (a model
//!   reply is a one-element list), `text` (the final answer, the stream's
//!   text so far) and `extension_json` for anything else (for a stream
//!   chunk: `{"released":R,"delta":D,"final":B}`). Its replacement travels in
//!   the matching slots of [`SeamValue`] (`text` for a reply or an answer).
//! * **A new meaning for an existing answer** is announced by the host
//!   before a pack may use it. A stream chunk's facts end with
//!   `"replace":true` when the host takes a rewrite of the candidate: the
//!   new candidate in the value's `text`, on `REPLACE` or on a hold kind
//!   (rewrite, then hold). A pack must not rewrite for a host that does not
//!   say so (it would read the hold and ignore the text); the SDK turns such
//!   a rewrite into a block.
//! * **A new decision kind** is a new [`DecisionKind`] constant whose payload
//!   is the decision's `reason` string, or a range of constants when the
//!   payload is a number on a hot path: a stream hold is
//!   `DecisionKind::HOLD_BASE + n` (withhold the last `n` bytes), so
//!   answering it on every delta allocates nothing. A host that meets a kind
//!   it does not know treats it as an interceptor error (`unknown decision
//!   kind`), under the seam's failure policy.
//! * **A notice** (user-facing text beside any decision) is
//!   `{"notice": "…"}` in the decision value's `extension_json`.
//! * **A new pack capability** is a method name understood by
//!   `PackInstance::extension`; packs that predate it answer "unsupported".
//!   The host's gate-state service ([`state`]) is offered this way.
//! * **New session facts** go into [`SessionView::extension_json`].
//!
//! A pack registering on a seam the host does not know is refused at load with
//! a line naming the seam, so a gate never silently stops gating.
//!
//! Anything that cannot be expressed this way needs a new major ABI
//! (`chimera-plugin-api 0.2`), which every pack must be rebuilt against.

mod decision;
pub mod manifest;
mod root;
mod seam;
pub mod state;
mod values;
mod views;

pub use decision::{Decision, DecisionKind};
pub use root::{
    InterceptorAbi, InterceptorAbi_TO, InterceptorBox, PackDescriptor, PackInstanceAbi,
    PackInstanceAbi_TO, PackInstanceBox, PackLibrary, PackLibraryRef, Registration, ABI_REVISION,
};
pub use seam::Seam;
pub use values::{
    BlockValue, HeaderValue, MessageValue, RequestValue, SeamValue, ToolCallValue, ToolResultValue,
};
pub use views::{
    BlockView, HeaderView, MessageView, RequestView, SeamInput, SessionView, ToolCallView,
    ToolResultView,
};
