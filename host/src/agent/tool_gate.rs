//! The tool gate's verdicts, one implementation for every place a
//! proposed call is judged: the loop ([`super::tool_step`], which asks an
//! operator) and a server with no operator on hand (`chimera mcp guard`):
//! the `tool_call` chain's block, then the permission policy, in the
//! words the model reads.

use super::permission::{Permission, PermissionPolicy};
use crate::interception::ChainOutcome;
use crate::types::ToolCall;

/// What the model reads of a call the `tool_call` chain blocked.
pub(crate) fn blocked(reason: &str) -> String {
    format!("Blocked by interceptor: {reason}")
}

/// What the model reads of a call the permission policy refused.
pub(crate) fn denied(name: &str) -> String {
    format!("Permission denied for {name}")
}

/// The gate's verdict on a call, with no operator to ask.
#[derive(Debug)]
pub enum Unattended {
    /// Refused, with what the model reads.
    Refused(String),
    /// Sent: rewritten by the chain (`Some`), or as it came.
    Sent(Option<ToolCall>),
}

/// The tool gate after the `tool_call` chain's `outcome` on `call`, where
/// nobody can be asked: a block refuses; a pack's question takes its
/// default answer; then `policy`, whose `Ask` refuses too.
#[must_use]
pub fn unattended(
    outcome: ChainOutcome<ToolCall>,
    call: &ToolCall,
    policy: &dyn PermissionPolicy,
) -> Unattended {
    if let Some(reason) = outcome.blocked {
        return Unattended::Refused(blocked(&reason));
    }
    if let Some(ask) = outcome.ask {
        let (_, by, question) = *ask;
        if question.default != "allow" {
            return Unattended::Refused(blocked(&format!(
                "{by} asks an operator ({}), and there is none: its default answer is {}",
                question.prompt, question.default
            )));
        }
    }
    let effective = outcome.replaced.as_ref().unwrap_or(call);
    if policy.evaluate(effective) != Permission::Allow {
        return Unattended::Refused(format!(
            "{} (the guard has no operator to ask)",
            denied(&effective.name)
        ));
    }
    Unattended::Sent(outcome.replaced)
}
