//! The permission policy (allow / ask / deny per tool) and approvals.

use crate::types::ToolCall;
use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};

/// What the policy says about one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Run it.
    Allow,
    /// Ask for approval first.
    Ask,
    /// Refuse: `Permission denied for <tool>`.
    Deny,
}

/// Decides whether a (interceptor-effective) call may run.
pub trait PermissionPolicy: Send + Sync {
    /// The verdict for `call`, which already passed the `tool_call` seam.
    fn evaluate(&self, call: &ToolCall) -> Permission;
}

/// Per-tool rules over a default.
#[derive(Debug, Clone)]
pub struct ToolRules {
    default: Permission,
    rules: HashMap<String, Permission>,
}

impl ToolRules {
    /// Every tool gets `default` unless a rule says otherwise.
    pub fn new(default: Permission) -> Self {
        ToolRules {
            default,
            rules: HashMap::new(),
        }
    }

    /// Sets the rule for `tool`.
    pub fn set(mut self, tool: impl Into<String>, permission: Permission) -> Self {
        self.rules.insert(tool.into(), permission);
        self
    }
}

impl PermissionPolicy for ToolRules {
    fn evaluate(&self, call: &ToolCall) -> Permission {
        self.rules.get(&call.name).copied().unwrap_or(self.default)
    }
}

/// Answers `Ask`.
pub trait Approver: Send + Sync {
    /// True to approve `call`.
    fn approve(&self, call: &ToolCall) -> bool;
}

/// Approves everything (`--yes`).
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn approve(&self, _call: &ToolCall) -> bool {
        true
    }
}

/// Denies everything.
pub struct DenyAll;

impl Approver for DenyAll {
    fn approve(&self, _call: &ToolCall) -> bool {
        false
    }
}

/// Prompts on the terminal; denies when stdin is not a terminal.
pub struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve(&self, call: &ToolCall) -> bool {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return false;
        }
        let mut stderr = std::io::stderr();
        let _ = write!(
            stderr,
            "allow {}({})? [y/N] ",
            call.name,
            call.arguments.as_str()
        );
        let _ = stderr.flush();
        let mut answer = String::new();
        if stdin.lock().read_line(&mut answer).is_err() {
            return false;
        }
        matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
    }
}
