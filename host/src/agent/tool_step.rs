//! One proposed tool call, from the `tool_call` seam to the transcript.

use super::events::AgentEvent;
use super::permission::Permission;
use super::session::AgentSession;
use super::subagent::Inherited;
use crate::interception::{
    withheld_result, AuditRecord, EventDecision, InterceptorEvent, Interceptors,
};
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::types::{Message, ToolCall, ToolResult};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// A deadline a `tool_call` interceptor gave a call: who set it, how
/// long, and the error result recorded past it.
type Deadline = (String, Duration, String);

/// How a call was settled before execution.
pub(super) enum Gate {
    /// Run the effective call (within the deadline, when one was given).
    Run(ToolCall, Option<Box<Deadline>>),
    /// Do not run it; record this (synthetic) failure.
    Refuse(ToolCall, String),
}

impl AgentSession {
    /// Settles one call: seams, hooks, permission, execution, transcript,
    /// event. Every call of a batch goes through all of it: an approval
    /// covers exactly the call it was given for. True when the tool ran.
    pub(crate) async fn settle_call(
        &mut self,
        call: &ToolCall,
        bundle: Option<&Arc<Interceptors>>,
    ) -> bool {
        self.facts.tool_calls_this_turn += 1;
        let (effective, result, executed) = match self.gate(call, bundle.map(Arc::as_ref)).await {
            Gate::Refuse(effective, text) => (effective, ToolResult::err(text), false),
            Gate::Run(effective, _) if self.tools.get(&effective.name).is_none() => {
                let text = format!("Unknown tool: {}", effective.name);
                (effective, ToolResult::err(text), false)
            }
            Gate::Run(effective, Some(deadline)) => {
                match self.execute_within(&effective, bundle, &deadline).await {
                    Ok(result) => {
                        let result = match bundle {
                            Some(bundle) => self.result_seam(bundle, &effective, result),
                            None => result,
                        };
                        (effective, self.truncate(result), true)
                    }
                    Err(timed_out) => (effective, timed_out, false),
                }
            }
            Gate::Run(effective, None) => {
                let result = self.execute(&effective, bundle).await;
                let result = match bundle {
                    Some(bundle) => self.result_seam(bundle, &effective, result),
                    None => result,
                };
                (effective, self.truncate(result), true)
            }
        };
        self.history
            .push(Message::tool(call.id.clone(), result.transcript_text()));
        // PostToolUse follows execution only: a refused call short-circuits it.
        if executed {
            for hook in &self.hooks.post_tool_use {
                hook(&effective, &result);
            }
        }
        let recorded = self.history.last().map(|m| m.content.as_str());
        self.bus.emit(|| AgentEvent::ToolResult {
            call_id: call.id.clone(),
            name: effective.name.clone(),
            content: recorded.unwrap_or_default().to_owned(),
            is_error: result.is_error(),
        });
        executed
    }

    /// `tool_call` seam → `PreToolUse` hooks → permission policy.
    pub(super) async fn gate(&self, call: &ToolCall, bundle: Option<&Interceptors>) -> Gate {
        let mut effective = call.clone();
        let mut deadline = None;
        if let Some(bundle) = bundle.filter(|b| !b.tool_call.is_empty()) {
            let outcome = self.run_asking_seam(&bundle.tool_call, &(), call).await;
            if let Some(reason) = outcome.blocked {
                return Gate::Refuse(call.clone(), super::tool_gate::blocked(&reason));
            }
            if let Some(replaced) = outcome.replaced {
                effective = replaced;
            }
            deadline = outcome.deadline;
        }
        let mut decided = None;
        for hook in &self.hooks.pre_tool_use {
            let verdict = hook(&effective);
            if let Some(reason) = verdict.deny {
                return Gate::Refuse(effective, format!("Blocked by hook: {reason}"));
            }
            if let Some(updates) = verdict.updated_input {
                let mut arguments = effective.arguments.parse();
                if let Some(map) = arguments.as_object_mut() {
                    map.extend(updates);
                }
                effective.arguments = crate::types::Arguments::from_value(&arguments);
            }
            decided = verdict.permission.or(decided);
        }
        let permission = match (decided, &self.permissions) {
            (Some(true), _) | (None, None) => Permission::Allow,
            (Some(false), _) => Permission::Deny,
            (None, Some(policy)) => policy.evaluate(&effective),
        };
        let allowed = match permission {
            Permission::Allow => true,
            Permission::Ask => self.ask_permission(&effective).await,
            Permission::Deny => false,
        };
        if allowed {
            Gate::Run(effective, deadline)
        } else {
            let text = super::tool_gate::denied(&effective.name);
            Gate::Refuse(effective, text)
        }
    }

    /// Puts the permission policy's `Ask` for `call` to the approver, as a
    /// pack's question is put: an `approval_requested` event before (and an
    /// `ask` record on the audit channel), an `approval_answered` after.
    /// True when it was allowed.
    async fn ask_permission(&self, call: &ToolCall) -> bool {
        let prompt = permission_prompt(call);
        if self.bus.is_audited() {
            self.bus.publish_audit(AuditRecord {
                event: InterceptorEvent {
                    seam: PERMISSION_SEAM,
                    decision: EventDecision::Ask,
                    reason: prompt.clone(),
                    tool_name: call.name.clone(),
                    call_id: call.id.clone(),
                    interceptor: PERMISSION_POLICY.to_owned(),
                    monitor: false,
                },
                from_pack: false,
                changes: None,
                depth: 0,
                parent_call_id: None,
            });
        }
        self.bus.emit(|| AgentEvent::ApprovalRequested {
            seam: PERMISSION_SEAM,
            interceptor: PERMISSION_POLICY.to_owned(),
            subject: call.name.clone(),
            prompt,
            choices: vec!["allow".to_owned(), "reject".to_owned()],
        });
        let allowed = self.approver.approve_async(call).await;
        self.bus.emit(|| AgentEvent::ApprovalAnswered {
            seam: PERMISSION_SEAM,
            interceptor: PERMISSION_POLICY.to_owned(),
            answer: if allowed { "allow" } else { "reject" },
            subject: call.name.clone(),
            source: self.approver.source().to_owned(),
        });
        allowed
    }

    /// What this session hands down with a call (for `delegate`'s sub-agent).
    fn inherited(&self, bundle: Option<&Arc<Interceptors>>) -> Inherited {
        Inherited {
            bundle: bundle.cloned(),
            permissions: self.permissions.clone(),
            approver: Arc::clone(&self.approver),
            hooks: self.hooks.clone(),
            bus: self.bus.clone(),
            depth: self.depth,
        }
    }

    /// Runs a tool that exists (see `settle_call`) on a blocking thread of
    /// the runtime, handing down this session's policy with the call.
    async fn execute(&self, call: &ToolCall, bundle: Option<&Arc<Interceptors>>) -> ToolResult {
        let Some(tool) = self.tools.get(&call.name).cloned() else {
            return ToolResult::err(format!("Unknown tool: {}", call.name));
        };
        self.spawn_tool(tool, call, bundle, None)
            .await
            .unwrap_or_else(|_| panicked(call))
    }

    /// Starts `tool` on `call` on a blocking thread of the runtime (tools
    /// block: a shell, the file system), so the executor goes on meanwhile.
    /// Its result comes back through the receiver; when nobody waits for it
    /// any more (its deadline passed), it is dropped with a
    /// `late_result_suppressed` event.
    fn spawn_tool(
        &self,
        tool: Arc<dyn Tool>,
        call: &ToolCall,
        bundle: Option<&Arc<Interceptors>>,
        deadline: Option<Duration>,
    ) -> oneshot::Receiver<ToolResult> {
        let inherited = self.inherited(bundle);
        let workspace = self.workspace.clone();
        let owned = call.clone();
        let bus = self.bus.clone();
        let (sender, receiver) = oneshot::channel();
        tokio::task::spawn_blocking(move || {
            let cx = ToolContext {
                workspace: &workspace,
                call_id: &owned.id,
                extensions: &inherited,
                deadline,
            };
            let result = run_tool(tool.as_ref(), &owned, &cx);
            if sender.send(result).is_err() {
                let reason = late_reason(&owned);
                tracing::info!(call_id = %owned.id, "{reason}");
                bus.emit(|| AgentEvent::LateResultSuppressed {
                    call_id: owned.id.clone(),
                    reason,
                });
            }
        });
        receiver
    }

    /// [`execute`](Self::execute) under a deadline. A tool that stops by
    /// the deadline itself (`Tool::stops_by_deadline`: `bash` kills its
    /// process tree then) is waited for to the end; any other is waited for
    /// at most the deadline. Past it: a `tool_timeout` event, and `Err` with
    /// the interceptor's error result; whatever the tool returns later is
    /// dropped, with a `late_result_suppressed` event.
    async fn execute_within(
        &self,
        call: &ToolCall,
        bundle: Option<&Arc<Interceptors>>,
        deadline: &Deadline,
    ) -> Result<ToolResult, ToolResult> {
        let Some(tool) = self.tools.get(&call.name).cloned() else {
            return Ok(ToolResult::err(format!("Unknown tool: {}", call.name)));
        };
        let (interceptor, within, on_timeout) = deadline;
        let within = *within;
        let timed_out = || {
            self.bus.emit(|| AgentEvent::ToolTimeout {
                call_id: call.id.clone(),
                name: call.name.clone(),
                timeout_ms: u64::try_from(within.as_millis()).unwrap_or(u64::MAX),
                interceptor: interceptor.clone(),
                turn: self.facts.turn_index,
            });
            ToolResult::err(on_timeout.clone())
        };
        let stops_itself = tool.stops_by_deadline();
        let started = std::time::Instant::now();
        let running = self.spawn_tool(tool, call, bundle, Some(within));
        if stops_itself {
            // It stops by the deadline itself: waited for to the end. What
            // comes back past it is late, and dropped like a late result.
            let result = running.await.unwrap_or_else(|_| panicked(call));
            if started.elapsed() < within {
                return Ok(result);
            }
            let timeout = timed_out();
            self.bus.emit(|| AgentEvent::LateResultSuppressed {
                call_id: call.id.clone(),
                reason: late_reason(call),
            });
            return Err(timeout);
        }
        match tokio::time::timeout(within, running).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(_)) => Ok(panicked(call)),
            Err(_) => Err(timed_out()),
        }
    }

    pub(super) fn result_seam(
        &self,
        bundle: &Interceptors,
        call: &ToolCall,
        result: ToolResult,
    ) -> ToolResult {
        if bundle.tool_result.is_empty() {
            return result;
        }
        let outcome = self.run_seam(&bundle.tool_result, call, &result);
        match (outcome.blocked, outcome.replaced) {
            (Some(reason), _) => withheld_result(&reason),
            (None, Some(replaced)) => replaced,
            (None, None) => result,
        }
    }

    /// Caps successful output at `output_cap` bytes (on a char boundary).
    fn truncate(&self, mut result: ToolResult) -> ToolResult {
        if result.is_error() || result.output.len() <= self.config.output_cap {
            return result;
        }
        let mut cut = self.config.output_cap;
        while !result.output.is_char_boundary(cut) {
            cut -= 1;
        }
        let dropped = result.output.len() - cut;
        result.output.truncate(cut);
        let _ = write!(result.output, "\n[output truncated: {dropped} more bytes]");
        result
    }
}

/// The seam the permission policy's questions are published on.
const PERMISSION_SEAM: &str = "permission";

/// The name the permission policy asks by, where a pack's question names
/// its interceptor.
const PERMISSION_POLICY: &str = "permission-policy";

/// At most this many bytes of a call's arguments are quoted in its
/// permission question.
const PROMPT_ARGUMENTS_CAP: usize = 200;

/// The permission question about `call`: `Allow bash({"command":"ls"})?`,
/// the arguments cut at [`PROMPT_ARGUMENTS_CAP`] bytes (with `…`).
fn permission_prompt(call: &ToolCall) -> String {
    let arguments = call.arguments.as_str();
    let mut cut = arguments.len().min(PROMPT_ARGUMENTS_CAP);
    while !arguments.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = if cut < arguments.len() { "…" } else { "" };
    format!("Allow {}({}{more})?", call.name, &arguments[..cut])
}

/// The result of a call whose tool panicked.
fn panicked(call: &ToolCall) -> ToolResult {
    ToolResult::err(format!("the {} tool panicked", call.name))
}

/// Why a result that came back past its deadline is not used.
fn late_reason(call: &ToolCall) -> String {
    format!(
        "tool {} already timed out; suppressing late result",
        call.name
    )
}

/// Runs `tool` on `call`'s arguments; a panic is the call's error result.
fn run_tool(tool: &dyn Tool, call: &ToolCall, cx: &ToolContext<'_>) -> ToolResult {
    let arguments = call.arguments.parse();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tool.execute(&arguments, cx)
    })) {
        Ok(outcome) => ToolResult::from(outcome),
        Err(_) => panicked(call),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_question_names_the_tool_and_quotes_its_arguments_cut_on_a_character() {
        let call = ToolCall::new("c1", "bash", serde_json::json!({"command": "ls"}));
        assert_eq!(
            permission_prompt(&call),
            "Allow bash({\"command\":\"ls\"})?"
        );
        let long = "é".repeat(PROMPT_ARGUMENTS_CAP);
        let call = ToolCall::new("c1", "write_file", serde_json::json!({ "content": long }));
        let prompt = permission_prompt(&call);
        assert!(
            prompt.starts_with("Allow write_file({\"content\":\"é"),
            "{prompt}"
        );
        assert!(prompt.ends_with("é…)?"), "{prompt}");
        assert!(prompt.len() <= PROMPT_ARGUMENTS_CAP + "Allow write_file(…)?".len());
    }
}
