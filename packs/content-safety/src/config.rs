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
    /// More checks, one regular expression each, named `custom:<regex>`.
    pub custom_patterns: Vec<String>,
    /// Also gate tool results.
    pub scan_tool_results: bool,
    /// Also gate each model reply.
    pub scan_llm_responses: bool,
    /// Also gate streamed text (default: `scan_llm_responses` in block
    /// mode; off in redact mode, see the crate docs).
    pub scan_stream: Option<bool>,
    /// Bytes of streamed text always held back, besides the trailing word.
    pub stream_hold_back: usize,
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
            stream_hold_back: 0,
        }
    }
}

impl Config {
    /// Whether streamed text is gated: `scan_stream` when given, else
    /// `scan_llm_responses` in block mode. In redact mode a stream cannot be
    /// redacted (the `stream_chunk` seam takes no replacement), so by
    /// default it is left to the whole-reply seams.
    #[must_use]
    pub fn scans_stream(&self) -> bool {
        self.scan_stream
            .unwrap_or(self.scan_llm_responses && self.action == Action::Block)
    }
}
