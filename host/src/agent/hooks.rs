//! Host lifecycle hooks around the seams: durable before-model middleware,
//! and `PreToolUse` / `PostToolUse` hooks.

use crate::types::{Message, ToolCall, ToolResult};
use std::sync::Arc;

/// What a `PreToolUse` hook decides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PreToolUse {
    /// Deny the call: `Blocked by hook: <reason>`.
    pub deny: Option<String>,
    /// Argument keys to overwrite.
    pub updated_input: Option<serde_json::Map<String, serde_json::Value>>,
    /// `Some(true)` allows without consulting the permission policy,
    /// `Some(false)` denies: the hook decided permission.
    pub permission: Option<bool>,
}

type BeforeModel = Arc<dyn Fn(&mut Vec<Message>) + Send + Sync>;
type PreHook = Arc<dyn Fn(&ToolCall) -> PreToolUse + Send + Sync>;
type PostHook = Arc<dyn Fn(&ToolCall, &ToolResult) + Send + Sync>;

/// The hooks of a session.
#[derive(Clone, Default)]
pub struct Hooks {
    pub(crate) before_model: Vec<BeforeModel>,
    pub(crate) pre_tool_use: Vec<PreHook>,
    pub(crate) post_tool_use: Vec<PostHook>,
}

impl Hooks {
    /// No hooks.
    #[must_use]
    pub fn new() -> Self {
        Hooks::default()
    }

    /// Middleware that may rewrite the durable history before every provider
    /// call (runs before the context seam).
    #[must_use]
    pub fn before_model(mut self, f: impl Fn(&mut Vec<Message>) + Send + Sync + 'static) -> Self {
        self.before_model.push(Arc::new(f));
        self
    }

    /// A hook run after the `tool_call` seam, before the permission policy.
    #[must_use]
    pub fn pre_tool_use(
        mut self,
        f: impl Fn(&ToolCall) -> PreToolUse + Send + Sync + 'static,
    ) -> Self {
        self.pre_tool_use.push(Arc::new(f));
        self
    }

    /// A hook run after the result is recorded.
    #[must_use]
    pub fn post_tool_use(
        mut self,
        f: impl Fn(&ToolCall, &ToolResult) + Send + Sync + 'static,
    ) -> Self {
        self.post_tool_use.push(Arc::new(f));
        self
    }
}
