//! The safe pack-authoring SDK.
//!
//! A pack implements [`Pack`]: a name, a serde configuration, a constructor,
//! and [`Pack::register`], which hands any number of named interceptors per
//! seam to a [`Registrar`]. Interceptors are plain closures over typed,
//! borrowed inputs ([`ToolCallRef`], [`Messages`], ...) that answer a
//! [`Decision`]. [`export_packs!`](crate::export_packs) turns one or more packs
//! into a loadable library.
//!
//! Every call from the host into pack code — constructor, registration,
//! interceptor, state handover — runs under `catch_unwind`; a panic becomes an
//! error value the host handles by the seam's failure policy.

mod decision;
mod declare;
mod edit;
pub(crate) mod export;
mod facts;
mod guard;
mod inputs;
mod instance;
mod pack;
mod registrar;
mod seam_kind;
mod segment;
mod state;
mod values;

pub use decision::{
    Ask, Decision, Exhausted, GateDecision, GateResult, InterceptError, InterceptResult,
    OutputDecision, OutputResult, Retry, StreamDecision, StreamResult, StreamRewrite,
    StreamRewriteResult,
};
pub use edit::{MessagesEdit, RequestEdit, HOST_SESSION_EXTENSION, HOST_TAKES_EDITS};
pub use guard::panic_message;
pub use inputs::{
    Billing, BlockRef, HeadersRef, MessageRef, Messages, Price, RequestRef, ResponseRef, Segment,
    Session, SourceUsage, ToolCallRef, ToolResultRef, Usage,
};
pub use instance::{
    instantiate, Failure as InstantiateFailure, InstantiateError, FAILURE_POLICY_METHOD,
};
pub use pack::{NoConfig, Pack, PackError};
pub use registrar::Registrar;
pub use seam_kind::SeamKind;
pub use state::{offer_payload, Scope, State, StateError, Taken, Window};
pub use values::{Block, Message, Request, ToolCall, ToolResult};
