//! The pack: the scanner on each seam the configuration turns on.

use crate::config::{Action, Config};
use crate::scan::{Scanner, Verdict};
use crate::stream::{self, Rules, Why};
use chimera_plugin_api::prelude::*;
use std::sync::Arc;

/// What a redacting stream's block notice adds when the match began in
/// text already shown, which cannot be taken back to redact it.
pub const ESCALATED: &str =
    "It could not be redacted: part of it had already been shown, so the reply was stopped.";

/// What a stream's block notice adds when text that could still become a
/// match ran past the hold limit (`stream_hold_limit`) before it could be
/// judged.
#[must_use]
pub fn over_limit(limit: usize) -> String {
    format!(
        "A possible match ran past the {limit}-byte hold limit before it could be judged, so the reply was stopped."
    )
}

/// The content-safety gate.
#[derive(Debug)]
pub struct ContentSafety {
    scanner: Scanner,
    config: Config,
}

impl ContentSafety {
    /// The compiled checks.
    #[must_use]
    pub fn scanner(&self) -> &Scanner {
        &self.scanner
    }

    /// The notice for a block: the message with `{checks}` filled in.
    #[must_use]
    pub fn notice(&self, checks: &str) -> String {
        self.config.message.replace("{checks}", checks)
    }

    /// The verdict on `text` under the configured action.
    #[must_use]
    pub fn judge(&self, text: &str) -> Verdict {
        self.scanner.judge(self.config.action, text)
    }

    /// A text seam's answer (`output`, `model_response`): a block with
    /// `Content safety<place>: <checks>` and the notice, or the redacted
    /// text.
    fn text_decision(&self, session: Session<'_>, text: &str, place: &str) -> Decision<String> {
        match self.judge(text) {
            Verdict::Clean => Decision::Allow,
            Verdict::Redacted(text, _) => Decision::Replace(text),
            Verdict::Block(checks) => {
                session.notice(self.notice(&checks));
                Decision::block(format!("Content safety{place}: {checks}"))
            }
        }
    }

    /// The `tool_call` answer on a call the model proposed: block (the
    /// call is refused, `Content safety (tool call): <checks>`), or each
    /// string of its arguments redacted (the call keeps its id).
    fn call_decision(&self, session: Session<'_>, call: ToolCallRef<'_>) -> Decision<ToolCall> {
        let text = call.arguments_json();
        let Ok(arguments) = serde_json::from_str::<serde_json::Value>(text) else {
            // Not JSON: judged as the text it is.
            return match self.judge(text) {
                Verdict::Clean => Decision::Allow,
                Verdict::Redacted(redacted, _) => {
                    let mut owned = call.to_owned();
                    owned.arguments_json = serde_json::Value::String(redacted).to_string();
                    Decision::Replace(owned)
                }
                Verdict::Block(checks) => {
                    session.notice(self.notice(&checks));
                    Decision::block(format!("Content safety (tool call): {checks}"))
                }
            };
        };
        let fired = self.scanner.triggered(text);
        if fired.is_empty() {
            return Decision::Allow;
        }
        let checks = self.scanner.names(&fired);
        if self.config.action == Action::Block {
            session.notice(self.notice(&checks));
            return Decision::block(format!("Content safety (tool call): {checks}"));
        }
        let mut owned = call.to_owned();
        owned.arguments_json = redact_strings(&self.scanner, arguments).to_string();
        Decision::Replace(owned)
    }

    /// The `tool_result` answer: the output redacted, or (block) the result
    /// replaced by the error `blocked by content_safety: <checks>`, so the
    /// model learns the call failed and never sees the output.
    fn result_decision(&self, result: ToolResultRef<'_>) -> Decision<ToolResult> {
        match self.judge(result.output()) {
            Verdict::Clean => Decision::Allow,
            Verdict::Redacted(output, _) => {
                let mut owned = result.to_owned();
                owned.output = output;
                Decision::Replace(owned)
            }
            Verdict::Block(checks) => Decision::Replace(ToolResult {
                output: String::new(),
                error: Some(format!("blocked by content_safety: {checks}")),
                metadata_json: result.metadata_json().to_owned(),
            }),
        }
    }
}

/// `value` with every string in it (keys excepted) redacted.
fn redact_strings(scanner: &Scanner, value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(text) => {
            Value::String(scanner.redact(&text).map_or(text, |(redacted, _)| redacted))
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| redact_strings(scanner, v))
                .collect(),
        ),
        Value::Object(members) => Value::Object(
            members
                .into_iter()
                .map(|(k, v)| (k, redact_strings(scanner, v)))
                .collect(),
        ),
        other => other,
    }
}

impl Pack for ContentSafety {
    const NAME: &'static str = "content-safety";
    const VERSION: &'static str = "1.0.0";
    const DESCRIPTION: &'static str =
        "Blocks or redacts PII and secrets (emails, phones, SSNs, keys, passwords, cards, private IPs).";
    const SEAMS: &'static [SeamKind] = &[
        SeamKind::Output,
        SeamKind::ToolResult,
        SeamKind::ModelResponse,
        SeamKind::StreamChunk,
        SeamKind::ToolCall,
    ];

    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        if config.stream_hold_limit == 0 {
            return Err(PackError::msg(
                "stream_hold_limit must be at least 1 (bytes a possible match may be held)",
            ));
        }
        let scanner = Scanner::new(&config)?;
        Ok(ContentSafety { scanner, config })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        let me = Arc::clone(&self);
        registrar.output("output", move |session, answer| {
            Ok(me.text_decision(session, answer, ""))
        });
        registrar.fail_closed("output");
        if self.config.scan_tool_calls != Some(false) {
            let me = Arc::clone(&self);
            registrar.tool_call("tool_call", move |session, call| {
                if !me.config.scans_tool_calls(session.is_relayed()) {
                    return Ok(Decision::Allow);
                }
                Ok(me.call_decision(session, call))
            });
            registrar.fail_closed("tool_call");
        }
        if self.config.scan_tool_results {
            let me = Arc::clone(&self);
            registrar.tool_result("tool_result", move |_session, _call, result| {
                Ok(me.result_decision(result))
            });
            registrar.fail_closed("tool_result");
        }
        if self.config.scan_llm_responses {
            let me = Arc::clone(&self);
            registrar.model_response("model_response", move |session, reply| {
                Ok(me.text_decision(session, reply.content(), " (llm.response)"))
            });
            registrar.fail_closed("model_response");
        }
        if self.config.scans_stream() {
            let me = Arc::clone(&self);
            registrar.stream_chunk_rewrite("stream_chunk", move |session, segment| {
                Ok(stream::decide(
                    &me.scanner,
                    segment,
                    Rules::of(&me.config),
                    |checks, why| {
                        let notice = me.notice(checks);
                        let reason = format!("Content safety (llm.stream.chunk): {checks}");
                        match why {
                            Why::Matched => {
                                session.notice(notice);
                                reason
                            }
                            Why::Escalated => {
                                session.notice(format!("{notice} {ESCALATED}"));
                                reason
                            }
                            Why::OverLimit(limit) => {
                                session.notice(format!("{notice} {}", over_limit(limit)));
                                format!("{reason} (a possible match held past {limit} bytes)")
                            }
                        }
                    },
                ))
            });
            registrar.fail_closed("stream_chunk");
            registrar.stream_window("stream_chunk", stream::WINDOW);
        }
        // What every registered interceptor does to content, for the
        // host's order check: in redact mode it rewrites, otherwise it
        // refuses.
        let redact = self.config.action == Action::Redact;
        for (name, on) in [
            ("output", true),
            ("tool_call", self.config.scan_tool_calls != Some(false)),
            ("tool_result", self.config.scan_tool_results),
            ("model_response", self.config.scan_llm_responses),
            ("stream_chunk", self.config.scans_stream()),
        ] {
            if !on {
                continue;
            }
            if redact {
                registrar.redacts(name);
            } else {
                registrar.judges(name);
            }
        }
    }
}

impl ContentSafety {
    /// The configured action.
    #[must_use]
    pub fn action(&self) -> Action {
        self.config.action
    }
}
