//! Interception: the four seams, their chains, the runner, and merging.
//!
//! # Ordering
//!
//! ```text
//!  before each provider call
//!    history ─▶ before-model middleware ─▶ context ─▶ provider_request ─▶ wire (headers per call)
//!               (durable)                  (ephemeral)  (ephemeral)
//!
//!  per proposed tool call
//!    call ─▶ tool_call ─▶ PreToolUse ─▶ permission ─▶ execute ─▶ tool_result ─▶ truncate
//!            (fail-closed)                                        (executed only)
//!         ─▶ transcript ─▶ PostToolUse ─▶ events
//!
//!  within one seam
//!    plugin chains (load order across packs, registration order within one) ─▶ host chains
//! ```
//!
//! Within a chain the first block wins and replacements chain: the host sees
//! the plugin-effective value, and nothing un-blocks.
//!
//! ```
//! use chimera_host::interception::*;
//! use chimera_host::types::ToolCall;
//! use serde_json::json;
//! use std::sync::Arc;
//!
//! fn tag(name: &'static str) -> ToolCallInterceptor {
//!     Interceptor::tool_call(name, move |call: &ToolCall| {
//!         let content = call.arguments.get_str("content").unwrap_or_default();
//!         Ok(InterceptDecision::Replace(ToolCall::new(
//!             "ignored-id",
//!             &call.name,
//!             json!({ "content": format!("{content}+{name}") }),
//!         )))
//!     })
//! }
//! let mut plugins = Interceptors::new();
//! plugins.tool_call.push(tag("plugin"));
//! let mut host = Interceptors::new();
//! host.tool_call.push(tag("host"));
//! let merged = merge_interceptors(&[Some(&Arc::new(plugins)), Some(&Arc::new(host))]).unwrap();
//!
//! let call = ToolCall::new("c1", "write_file", json!({ "content": "one" }));
//! let facts = SessionFacts::new("s1");
//! let cx = ChainContext { session: &facts, events: None };
//! let outcome = run_chain(&merged.tool_call, &(), &call, &cx);
//! let effective = outcome.replaced.unwrap();
//! assert_eq!(effective.arguments.get_str("content").unwrap(), "one+plugin+host");
//! assert_eq!(effective.id, "c1"); // the original id is always kept
//! ```

mod bundle;
mod chain;
mod decision;
mod diff;
mod events;
pub(crate) mod health;
mod interceptor;
mod merge;
mod record;
mod seams;
mod session;
mod verdict;

pub use bundle::{
    AnyInterceptor, ContextInterceptor, Interceptors, ModelResponseInterceptor, OutputInterceptor,
    ProviderRequestInterceptor, SeamName, StreamChunkInterceptor, ToolCallInterceptor,
    ToolResultInterceptor, UnknownSeam, SEAM_NAMES,
};
pub(crate) use chain::run_chain_spent;
pub use chain::{run_chain, ChainContext, ChainOutcome, Notice};
pub use decision::{InterceptDecision, InterceptError, InterceptResult};
pub(crate) use diff::Differ;
pub use diff::{Change, Changes, INSERT_CAP, SPAN_CAP};
pub use events::{EventDecision, InterceptorEvent};
pub use health::{HealthEvent, HealthPolicy, HealthSink, PackHealth};
pub(crate) use interceptor::RemotePack;
pub use interceptor::{ContentRole, Interceptor};
pub use merge::merge_interceptors;
pub use record::AuditRecord;
pub use seams::{
    withheld_result, ContextSeam, ModelResponseSeam, OutputSeam, ProviderRequestSeam, ReplyFacts,
    SeamSpec, StreamChunkSeam, StreamFacts, ToolCallSeam, ToolResultSeam,
};
pub use session::SessionFacts;
pub use verdict::{Question, RetryAsk};
