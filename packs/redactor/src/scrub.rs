//! The scrubbing itself, and the pack around it.

use crate::config::Config;
use chimera_plugin_api::prelude::*;
use regex::{NoExpand, Regex};
use std::borrow::Cow;
use std::sync::Arc;

/// The redactor pack.
pub struct Redactor {
    pattern: Regex,
    replacement: String,
    /// Lower-cased header names replaced wholesale.
    headers: Vec<String>,
}

impl Redactor {
    /// Scrubs `text`; `None` when nothing matched.
    #[must_use]
    pub fn text(&self, text: &str) -> Option<String> {
        match self.pattern.replace_all(text, NoExpand(&self.replacement)) {
            Cow::Borrowed(_) => None,
            Cow::Owned(scrubbed) => Some(scrubbed),
        }
    }

    /// Scrubs every string nested in `value`; true when any changed.
    fn json_strings(&self, value: &mut serde_json::Value) -> bool {
        match value {
            serde_json::Value::String(text) => match self.text(text) {
                Some(scrubbed) => {
                    *text = scrubbed;
                    true
                }
                None => false,
            },
            serde_json::Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, item| self.json_strings(item) | changed),
            serde_json::Value::Object(map) => map
                .values_mut()
                .fold(false, |changed, item| self.json_strings(item) | changed),
            _ => false,
        }
    }

    /// Scrubs the string values inside tool-call arguments (JSON text);
    /// `None` when nothing changed, so the model's text is kept verbatim.
    #[must_use]
    pub fn arguments(&self, arguments_json: &str) -> Option<String> {
        // A match inside a string is visible in the raw text unless JSON
        // escapes hide it; only then is parsing needed.
        if !self.pattern.is_match(arguments_json) && !arguments_json.contains('\\') {
            return None;
        }
        let mut value: serde_json::Value = serde_json::from_str(arguments_json).ok()?;
        self.json_strings(&mut value).then(|| value.to_string())
    }

    /// A scrubbed copy of `message`, or `None` when nothing in it matched.
    fn message(&self, message: MessageRef<'_>) -> Option<Message> {
        let content = self.text(message.content());
        let blocks: Vec<Option<String>> = message
            .blocks()
            .map(|b| {
                if b.kind() == "text" {
                    self.text(b.text())
                } else {
                    None
                }
            })
            .collect();
        let calls: Vec<Option<String>> = message
            .tool_calls()
            .map(|c| self.arguments(c.arguments_json()))
            .collect();
        if content.is_none()
            && blocks.iter().all(Option::is_none)
            && calls.iter().all(Option::is_none)
        {
            return None;
        }
        let mut owned = message.to_owned();
        if let Some(content) = content {
            owned.content = content;
        }
        for (block, scrubbed) in owned.blocks.iter_mut().zip(blocks) {
            if let Some(text) = scrubbed {
                block.text = text;
            }
        }
        for (call, scrubbed) in owned.tool_calls.iter_mut().zip(calls) {
            if let Some(arguments) = scrubbed {
                call.arguments_json = arguments;
            }
        }
        Some(owned)
    }

    /// One header's scrubbed value: a listed header is replaced wholesale,
    /// any other is scrubbed like text; `None` when it stays as it is.
    #[must_use]
    pub fn header(&self, name: &str, value: &str) -> Option<String> {
        if self.headers.iter().any(|h| h.eq_ignore_ascii_case(name)) {
            (value != self.replacement).then(|| self.replacement.clone())
        } else {
            self.text(value)
        }
    }

    /// The scrubbed headers, or `None` when none changed.
    fn header_values(&self, request: RequestRef<'_>) -> Option<Vec<(String, String)>> {
        let headers = request.headers()?;
        let mut changed = false;
        let scrubbed = headers
            .iter()
            .map(|(name, value)| {
                let new = self.header(name, value);
                changed |= new.is_some();
                (name.to_owned(), new.unwrap_or_else(|| value.to_owned()))
            })
            .collect();
        changed.then_some(scrubbed)
    }

    /// The wire scrub: an edit of the messages and headers that matched, or
    /// `None` when nothing did. Unchanged messages are not copied.
    #[must_use]
    pub fn request(&self, request: RequestRef<'_>) -> Option<RequestEdit> {
        let mut edit = RequestEdit::new();
        for (index, message) in request.messages().iter().enumerate() {
            if let Some(scrubbed) = self.message(message) {
                edit.message(index, scrubbed);
            }
        }
        if let Some(headers) = self.header_values(request) {
            edit.headers(headers);
        }
        (!edit.is_empty()).then_some(edit)
    }

    /// The durable scrub of a tool result, or `None` when nothing matched.
    #[must_use]
    pub fn result(&self, result: ToolResultRef<'_>) -> Option<ToolResult> {
        let output = self.text(result.output());
        let error = result.error().and_then(|e| self.text(e));
        if output.is_none() && error.is_none() {
            return None;
        }
        Some(ToolResult {
            output: output.unwrap_or_else(|| result.output().to_owned()),
            error: error.or_else(|| result.error().map(str::to_owned)),
            metadata_json: result.metadata_json().to_owned(),
        })
    }
}

impl Pack for Redactor {
    const NAME: &'static str = "redactor";
    const VERSION: &'static str = "1.0.0";
    const DESCRIPTION: &'static str =
        "scrubs a secret pattern from the wire (ephemeral) and from tool results (durable)";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ProviderRequest, SeamKind::ToolResult];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        let pattern = Regex::new(&config.pattern).map_err(|error| {
            PackError::msg(format!("invalid pattern: {}", one_line(&error.to_string())))
        })?;
        Ok(Redactor {
            pattern,
            replacement: config.replacement,
            headers: config.headers,
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        let wire = Arc::clone(&self);
        registrar.provider_request_edit("wire", move |_, request| {
            Ok(wire
                .request(request)
                .map_or(Decision::Allow, Decision::Replace))
        });
        registrar.tool_result("result", move |_, _, result| {
            Ok(self
                .result(result)
                .map_or(Decision::Allow, Decision::Replace))
        });
        registrar.redacts("wire");
        registrar.redacts("result");
    }
}

/// regex's errors span several lines (the pattern, a caret, the message).
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '^'))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor(config: Config) -> Redactor {
        Redactor::new(config).unwrap()
    }

    #[test]
    fn the_default_pattern_scrubs_secrets_and_leaves_the_rest() {
        let r = redactor(Config::default());
        assert_eq!(
            r.text("connected using sk-livekey12345678 just fine")
                .as_deref(),
            Some("connected using [redacted] just fine")
        );
        assert_eq!(r.text("sk-short and no secret here"), None);
    }

    #[test]
    fn the_default_pattern_has_ascii_word_boundaries() {
        let r = redactor(Config::default());
        // A key against a non-ASCII letter, either side, is still a key.
        assert_eq!(
            r.text("éclair:sk-livekey12345678é").as_deref(),
            Some("éclair:[redacted]é")
        );
        assert_eq!(
            r.text("ésk-livekey12345678").as_deref(),
            Some("é[redacted]")
        );
        // Near-misses stay as they are.
        assert_eq!(r.text(&"sk-aaaaaaaé ".repeat(1000)), None);
    }

    #[test]
    fn a_custom_pattern_and_replacement_apply_literally() {
        let r = redactor(Config {
            pattern: "acme-[0-9]{4}".into(),
            replacement: "<hidden>".into(),
            ..Config::default()
        });
        assert_eq!(
            r.text("acme-1234 and sk-livekey12345678").as_deref(),
            Some("<hidden> and sk-livekey12345678")
        );
    }

    #[test]
    fn an_invalid_pattern_fails_at_construction_with_one_line() {
        let error = Redactor::new(Config {
            pattern: "(".into(),
            ..Config::default()
        })
        .err()
        .unwrap();
        assert!(
            error.to_string().starts_with("invalid pattern: "),
            "{error}"
        );
        assert!(!error.to_string().contains('\n'));
    }

    #[test]
    fn nested_argument_strings_are_scrubbed_and_other_values_kept() {
        let r = redactor(Config::default());
        let args = r#"{"cmd": "curl -H 'X-Key: sk-livekey12345678'", "depth": 2, "flags": ["--token=sk-livekey12345678", "--verbose"]}"#;
        let scrubbed: serde_json::Value =
            serde_json::from_str(&r.arguments(args).unwrap()).unwrap();
        assert_eq!(
            scrubbed,
            serde_json::json!({"cmd": "curl -H 'X-Key: [redacted]'", "depth": 2, "flags": ["--token=[redacted]", "--verbose"]})
        );
        assert_eq!(r.arguments(r#"{"cmd": "ls"}"#), None);
        assert!(
            r.arguments(r#"{"cmd": "\u0073k-livekey12345678"}"#)
                .is_some(),
            "escapes cannot hide a secret"
        );
    }
}
