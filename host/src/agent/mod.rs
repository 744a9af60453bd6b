//! The agent: a session (a conversation across turns), its `ReAct` loop and
//! the other strategies ([`Strategy`]) a turn can run on the same machinery.
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

mod answer;
mod compaction;
mod config;
mod events;
mod gated;
mod hooks;
mod outcome;
mod permission;
mod react;
mod relay;
mod session;
mod strategies;
mod stream;
mod subagent;
mod tool_gate;
mod tool_step;
mod usage;

pub use crate::files::read_user_file;
pub use config::{
    Compaction, SessionConfig, Strategy, StrategyError, StreamPolicy, DEFAULT_ATTEMPTS,
    DEFAULT_CANDIDATES, DEFAULT_KEEP_TURNS, DEFAULT_MAX_PLAN_STEPS, DEFAULT_REFLECT_EVERY,
    READ_ONLY_TOOLS, STRATEGY_NAMES,
};
pub use events::{AgentEvent, EventBus, NestedEvent, RunUsage};
pub use hooks::{Hooks, PreToolUse};
pub use outcome::{EndReason, RunResult};
pub use permission::{
    Answering, AnswersFile, ApproveAll, Approver, DenyAll, OperatorAnswer, Permission,
    PermissionPolicy, TerminalApprover, ToolRules,
};
pub(crate) use react::whole_reply_gates;
pub use relay::{
    CallEnd, CallVerdict, Carried, Choice, Exchange, JudgedChoice, Refused, RelayRequest,
};
pub use session::{AgentSession, SessionBuilder};
pub use stream::{Offered, StreamBlock, StreamEnd, StreamGate, WINDOW_LATENCY};
pub use subagent::SessionSubAgent;
pub use tool_gate::{unattended, Unattended};
pub use usage::{CallSource, LastCall, Ledger, Price, PriceTable, SourceUsage};
