//! The payloads, the first matching rule, and the pack around them.

use crate::rule::Rule;
use chimera_plugin_api::prelude::*;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// `{"rules": [...]}`; unknown keys are refused. Each rule is checked when
/// the pack is built, so an error names it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The rules, in the order they are tried.
    pub rules: Vec<Value>,
}

/// The kind of a tool call's payload.
pub const TOOL_KIND: &str = "tool.invoke";
/// The kind of a provider request's payload.
pub const REQUEST_KIND: &str = "llm.request";

/// The approval-policy pack.
#[derive(Debug)]
pub struct ApprovalPolicy {
    rules: Vec<Rule>,
}

impl ApprovalPolicy {
    /// The payload a tool call is matched against.
    #[must_use]
    pub fn tool_payload(name: &str, id: &str, args: Value, turn: u64) -> Value {
        json!({"action_kind": TOOL_KIND, "tool": name, "args": args, "id": id, "turn_id": turn})
    }

    /// The payload a provider request is matched against: the tool names
    /// from `tools_json`, `temperature` and `max_tokens` from `kwargs_json`
    /// when they are there.
    ///
    /// # Errors
    ///
    /// The [`serde_json::Error`] when `tools_json` is neither blank nor a JSON
    /// array of objects with a `name`. A `kwargs_json` that does not parse is
    /// ignored.
    pub fn request_payload(
        model: &str,
        tools_json: &str,
        kwargs_json: &str,
    ) -> Result<Value, serde_json::Error> {
        #[derive(Deserialize)]
        struct Named {
            name: String,
        }
        let tools: Vec<Named> = if tools_json.trim().is_empty() {
            Vec::new()
        } else {
            serde_json::from_str(tools_json)?
        };
        let mut args = json!({
            "model": model,
            "tools": tools.into_iter().map(|t| t.name).collect::<Vec<_>>(),
        });
        if let Ok(Value::Object(kwargs)) = serde_json::from_str::<Value>(kwargs_json) {
            for key in ["temperature", "max_tokens"] {
                if let Some(value) = kwargs.get(key) {
                    args[key] = value.clone();
                }
            }
        }
        Ok(json!({"action_kind": REQUEST_KIND, "model": model, "args": args}))
    }

    /// The question for `payload`, from the first rule that matches it;
    /// `edit` only where the seam takes an edit.
    #[must_use]
    pub fn ask_for(&self, payload: &Value, edit_offered: bool) -> Option<Ask> {
        let rule = self.rules.iter().find(|rule| rule.matches(payload))?;
        let kind = payload["action_kind"].as_str().unwrap_or_default();
        let target = match kind {
            TOOL_KIND => payload["tool"].as_str(),
            _ => payload["model"].as_str(),
        };
        Some(Ask {
            prompt: rule.prompt(payload, kind, target.unwrap_or_default()),
            edit: edit_offered && rule.edit,
            timeout: rule.timeout,
            default_allow: rule.default_allow,
        })
    }

    fn asks_about(&self, kind: &str) -> bool {
        self.rules.iter().any(|rule| rule.may_match_kind(kind))
    }
}

impl Pack for ApprovalPolicy {
    const NAME: &'static str = "approval-policy";
    const VERSION: &'static str = "1.0.0";
    const DESCRIPTION: &'static str =
        "asks the operator before tool calls and provider requests that match its rules";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ToolCall, SeamKind::ProviderRequest];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        let rules = config
            .rules
            .iter()
            .enumerate()
            .map(|(index, raw)| Rule::parse(index, raw))
            .collect::<Result<_, _>>()?;
        Ok(ApprovalPolicy { rules })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        if self.asks_about(REQUEST_KIND) {
            let policy = Arc::clone(&self);
            registrar.provider_request_gate("request", move |session, request| {
                if session.is_gate_retry() {
                    return Ok(GateDecision::Allow);
                }
                let payload = ApprovalPolicy::request_payload(
                    request.model(),
                    request.tools_json(),
                    request.kwargs_json(),
                )?;
                Ok(policy
                    .ask_for(&payload, false)
                    .map_or(GateDecision::Allow, GateDecision::Ask))
            });
            registrar.fail_closed("request");
        }
        if self.asks_about(TOOL_KIND) {
            registrar.tool_call_gate("tool", move |session, call| {
                let payload = ApprovalPolicy::tool_payload(
                    call.name(),
                    call.id(),
                    call.arguments()?,
                    session.turn_index(),
                );
                Ok(self
                    .ask_for(&payload, true)
                    .map_or(GateDecision::Allow, GateDecision::Ask))
            });
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
