//! content-safety's configuration.

use serde::Deserialize;

/// What a match does.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Refuse the text (the default).
    #[default]
    Block,
    /// Replace every match with `[REDACTED]` and let the text through.
    Redact,
}

/// The gate's configuration; every key is optional and unknown keys are
/// refused.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `block` or `redact`.
    pub action: Action,
    /// The notice shown with a block; `{checks}` becomes the triggered
    /// check names, joined with `, `.
    pub message: String,
    /// Email addresses.
    pub check_pii_email: bool,
    /// Phone numbers.
    pub check_pii_phone: bool,
    /// US social security numbers (`ddd-dd-dddd`).
    pub check_pii_ssn: bool,
    /// API keys (AWS, OpenAI-style `sk-`, GitHub `ghp_`, Slack `xox?-`).
    pub check_secrets_api_key: bool,
    /// PEM private-key headers.
    pub check_secrets_private_key: bool,
    /// Password, secret and token assignments.
    pub check_secrets_password: bool,
    /// Card numbers that pass the Luhn check.
    pub check_credit_card: bool,
    /// Private IPv4 addresses.
    pub check_ip_internal: bool,
    /// More checks, one regular expression each: a string, or a table
    /// `{pattern, name}`. A check is named by its `name` in reasons and
    /// notices (`custom-N`, its position from 1, when it has none), never
    /// by its regex.
    pub custom_patterns: Vec<CustomPattern>,
    /// Also gate tool results.
    pub scan_tool_results: bool,
    /// Also gate each model reply.
    pub scan_llm_responses: bool,
    /// Also gate streamed text (default: `scan_llm_responses`).
    pub scan_stream: Option<bool>,
    /// Also gate the tool calls a model proposes, their arguments being
    /// text the model wrote (default: `scan_llm_responses`, and always in
    /// a relayed conversation, where the client runs what passes).
    pub scan_tool_calls: Option<bool>,
    /// At least this many bytes at the end of the streamed text are held
    /// back until the next delta (or the end): with more than the text,
    /// nothing is shown before the final check.
    pub stream_hold_back: usize,
    /// The most bytes of a possible match a stream may hold: when text
    /// that could still become a match would be held longer than this, the
    /// stream is blocked (it is never released unjudged). At least 1.
    pub stream_hold_limit: usize,
}

/// The default [`Config::stream_hold_limit`]: 64 KiB.
pub const DEFAULT_HOLD_LIMIT: usize = 64 * 1024;

/// A custom check: its regular expression and the name a user reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomPattern {
    /// The regular expression.
    pub pattern: String,
    /// The name shown in block reasons and notices (`custom-N` when
    /// `None`: N is its position among the custom patterns, from 1).
    pub name: Option<String>,
}

impl CustomPattern {
    /// The name shown for this check, the `position`-th (from 0) of the
    /// custom patterns.
    #[must_use]
    pub fn shown_name(&self, position: usize) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("custom-{}", position + 1))
    }
}

impl<'de> Deserialize<'de> for CustomPattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Bare(String),
            Named(Named),
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Named {
            pattern: String,
            name: Option<String>,
        }
        let (pattern, name) = match Wire::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom(
                "a custom pattern is a regular expression, or a table {pattern, name}",
            )
        })? {
            Wire::Bare(pattern) => (pattern, None),
            Wire::Named(Named { pattern, name }) => (pattern, name),
        };
        if let Some(name) = &name {
            check_name(name).map_err(serde::de::Error::custom)?;
        }
        Ok(CustomPattern { pattern, name })
    }
}

/// The built-in checks' names, which a custom check may not take.
pub(crate) const BUILTIN_NAMES: [&str; 8] = [
    "email",
    "phone",
    "ssn",
    "api_key",
    "private_key",
    "password",
    "credit_card",
    "ip_internal",
];

/// A custom check's name must read well in one line: 1 to 64 of
/// `A-Z a-z 0-9 _ - .`, and not a built-in check's.
fn check_name(name: &str) -> Result<(), String> {
    gate_kit::check_name("custom pattern name", name)?;
    if BUILTIN_NAMES.contains(&name) {
        return Err(format!(
            "custom pattern name {name:?} is a built-in check's name"
        ));
    }
    if name
        .strip_prefix("custom-")
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!(
            "custom pattern name {name:?} is kept for unnamed patterns (custom-1, custom-2, …)"
        ));
    }
    Ok(())
}

/// The default notice.
pub const DEFAULT_MESSAGE: &str = "Content blocked: contains sensitive information ({checks}).";

impl Default for Config {
    fn default() -> Self {
        Config {
            action: Action::Block,
            message: DEFAULT_MESSAGE.to_owned(),
            check_pii_email: true,
            check_pii_phone: true,
            check_pii_ssn: true,
            check_secrets_api_key: true,
            check_secrets_private_key: true,
            check_secrets_password: true,
            check_credit_card: true,
            check_ip_internal: true,
            custom_patterns: Vec::new(),
            scan_tool_results: false,
            scan_llm_responses: false,
            scan_stream: None,
            scan_tool_calls: None,
            stream_hold_back: 0,
            stream_hold_limit: DEFAULT_HOLD_LIMIT,
        }
    }
}

impl Config {
    /// Whether streamed text is gated: `scan_stream` when given, else
    /// `scan_llm_responses` (in either action: a stream is redacted as it
    /// is shown).
    #[must_use]
    pub fn scans_stream(&self) -> bool {
        self.scan_stream.unwrap_or(self.scan_llm_responses)
    }

    /// Whether proposed tool calls are gated in a conversation the host
    /// runs itself (a relayed one is always gated, unless switched off):
    /// `scan_tool_calls` when given, else `scan_llm_responses`.
    #[must_use]
    pub fn scans_tool_calls(&self, relayed: bool) -> bool {
        self.scan_tool_calls
            .unwrap_or(self.scan_llm_responses || relayed)
    }
}
