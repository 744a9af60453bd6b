//! The agent: a session (a conversation across turns), its `ReAct` loop and
//! the other [`strategies`] a turn can run on the same machinery.
//!
//! ```text
//!  run_turn(input)
//!    merge(plugin registry, host chains)         ← read once, at the start of the turn
//!    loop (≤ max_steps)
//!      before-model middleware (durable) → context → provider_request → provider (headers per call)
//!        block → run ends: "Blocked by interceptor: <reason>", no provider call
//!      no tool calls → run ends with the answer
//!      per tool call, in order:
//!        tool_call → PreToolUse → permission → resolve → execute → tool_result → truncate
//!        → transcript → PostToolUse → event
//! ```

mod compaction;
pub(crate) mod drive;
mod events;
mod hooks;
mod permission;
mod react;
mod session;
pub mod strategies;
mod stream;
mod subagent;
mod tool_step;
mod usage;
mod user_file;

pub use compaction::DEFAULT_KEEP_TURNS;
pub use events::{AgentEvent, EventBus, NestedEvent, RunUsage};
pub use hooks::{Hooks, PreToolUse};
pub use permission::{
    Answering, AnswersFile, ApproveAll, Approver, DenyAll, OperatorAnswer, Permission,
    PermissionPolicy, TerminalApprover, ToolRules,
};
pub use session::{AgentSession, EndReason, RunResult, SessionBuilder, StreamPolicy};
pub use strategies::{Strategy, StrategyError, READ_ONLY_TOOLS, STRATEGY_NAMES};
pub use stream::{Offered, StreamBlock, StreamEnd, StreamGate, WINDOW_LATENCY};
pub use subagent::SessionSubAgent;
pub use usage::{CallSource, Ledger, Price, PriceTable, SourceUsage};
pub use user_file::read_user_file;
