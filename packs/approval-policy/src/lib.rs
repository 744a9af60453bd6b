//! # approval-policy
//!
//! Asks the operator before the tool calls and provider requests its rules
//! match: the rule's question goes to the host's operator (the terminal,
//! an answers file, `--yes` / `--no`), whose answer decides.
//!
//! * `tool_call` (a gate that asks): the call is described as the payload
//!   `{"action_kind": "tool.invoke", "tool": <name>, "args": <arguments>,
//!   "id": <call id>, "turn_id": <turn index>}`. The first rule that matches
//!   asks; no rule matching, the call passes untouched. `allow` lets the call
//!   go on through the rest of the chain; `reject` blocks it; `edit` (when
//!   the rule offers it) replaces the call's arguments with the operator's —
//!   and the edited call still passes the rest of the chain, the hooks and
//!   the permission policy. Arguments that are not JSON are an error, so
//!   the call is blocked (this seam fails closed).
//! * `provider_request` (a gate that asks): the request is the payload
//!   `{"action_kind": "llm.request", "model": <model>, "args": {"model":
//!   <model>, "tools": [<tool names>], "temperature": .., "max_tokens":
//!   ..}}` (the last two when the call options carry them). `edit` is not
//!   offered here. The host's own gate retries (an `output` gate asking the
//!   model again) are not asked about, as in Nexus. This interceptor fails
//!   closed: should it ever fail, the request is blocked, not sent unasked.
//!
//! One question per call: the first matching rule asks, whatever rules
//! follow it. The pack registers on a seam only when some rule can be
//! about it (its `action_kind` admits the kind and every path it names can
//! exist in that payload: a rule on `tool` or `args.command` never looks at
//! provider requests), so requests cost nothing when every rule is about
//! tools.
//!
//! Configuration: `rules`, a list of rules, each with every key optional:
//! * `match`: an object of conditions that must all hold. A key is a dotted
//!   path into the payload (`tool`, `args.command`, `args.tools.0`); a
//!   string value is a glob over the value found there (`*` any run of
//!   characters, `/` and newlines included, `?` one character, `\` escapes
//!   the next one; `[..]` and `{a,b}` work too); a number or boolean must
//!   equal it. A path with nothing at it does not match. No `match`: every
//!   call and every request.
//! * `mode`: `choices` (the only one this host's operator supports; Nexus's
//!   `free_text` and `both` refuse the load).
//! * `choices`: the answers offered, as ids or `{id, label, kind}` objects:
//!   `allow`, `reject` and optionally `edit` (default: allow and reject).
//!   Labels are accepted; the operator sees the ids.
//! * `default_choice`: the answer a timeout (or an answers file with no
//!   answer left) gives: `allow` or `reject` (default `reject`).
//! * `prompt`: the question, a template in which `{dotted.path}` is the
//!   payload's value there (missing: empty), e.g. `Run shell
//!   {args.command}?`. Default: `Approve <kind>: <target>` — the tool name
//!   or the model, e.g. `Approve tool.invoke: bash`.
//! * `prompt_synthesizer`: accepted so a Nexus rule loads unchanged, and
//!   unused: Nexus let another plugin rewrite the prompt before it was
//!   shown; this host has no such step, so `prompt` (or the default) is
//!   what the operator reads.
//! * `timeout`: how long the operator has, a duration (`30s`, `500ms`,
//!   `1m 30s`); then the default choice stands. Sub-second timeouts are
//!   honoured (Nexus kept whole seconds, so they meant "no timeout"); under
//!   a millisecond is refused. Default: as long as it takes.
//!
//! A malformed rule, an unknown key or a bad glob refuses the load with one
//! line naming the rule (`rules[2]: ...`).

mod rule;

use chimera_plugin_api::prelude::*;
use rule::Rule;
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

chimera_plugin_api::export_packs!(ApprovalPolicy);

#[cfg(test)]
mod tests;
