//! Interception: the seven seams, their chains, the runner, and merging.
//!
//! Every interceptor answers *allow*, *replace* or *block* (see
//! [`InterceptDecision`]); some seams take more:
//!
//! | seam | what it sees, and when | beyond allow / replace / block |
//! |---|---|---|
//! | `context` | the messages about to be sent, before each provider call | — |
//! | `provider_request` | the request envelope {model, messages, tools, kwargs, headers}, before the wire | *ask* an operator; *pause* the turn (retry after a wait) or ask for compaction |
//! | `stream_chunk` | the turn's streamed text so far, at each delta, before it is shown | *hold* the candidate's end until the next delta |
//! | `model_response` | each model reply, before it enters the conversation | — |
//! | `output` | the final answer, before the user sees it | *retry*: the model is asked again with the interceptor's feedback |
//! | `tool_call` | each proposed call, before hooks and the permission policy (fail-closed) | *ask* an operator; a deadline for the allowed call |
//! | `tool_result` | what an executed tool returned, before truncation and hooks | — |
//!
//! # Ordering
//!
//! ```text
//!  before each provider call
//!    history ─▶ before-model middleware ─▶ context ─▶ provider_request ─▶ wire (headers per call)
//!               (durable)                  (ephemeral)  (ephemeral)
//!
//!  each model reply
//!    streamed: each delta ─▶ stream_chunk ─▶ shown
//!    ─▶ model_response ─▶ history ─▶ no tool calls: output ─▶ the user
//!                        (a block: one substitute reply, not judged again)
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
pub use health::{
    HealthEvent, HealthPolicy, HealthSink, PackHealth, DEFAULT_PER_MIB, SERVER_QUARANTINE_CLIENTS,
};
pub(crate) use interceptor::RemotePack;
pub use interceptor::{ContentRole, Interceptor, PackMode};
pub use merge::merge_interceptors;
pub use record::AuditRecord;
pub use seams::{
    withheld_result, ContextSeam, ModelResponseSeam, OutputSeam, ProviderRequestSeam, ReplyFacts,
    SeamSpec, StreamChunkSeam, StreamFacts, ToolCallSeam, ToolResultSeam,
};
pub use session::SessionFacts;
pub use verdict::{Question, RetryAsk};
