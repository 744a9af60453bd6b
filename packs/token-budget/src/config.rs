//! The configuration, as written and as checked.

use chimera_plugin_api::prelude::*;
use chimera_plugin_api::sdk::Price;
use serde::Deserialize;
use std::collections::BTreeMap;

/// What a ceiling does when a call would exceed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Action {
    /// Block the call.
    #[serde(rename = "block")]
    Block,
    /// Let it go with a notice.
    #[serde(rename = "warn")]
    Warn,
    /// Send it to a cheaper model.
    #[serde(rename = "downgrade-model")]
    DowngradeModel,
}

/// Whose spending a ceiling counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// The whole session.
    #[default]
    Session,
    /// One call source (`agent`, `gate_retry`, `compaction`).
    SourcePlugin,
}

impl Dimension {
    /// How reasons name it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Session => "session",
            Dimension::SourcePlugin => "source_plugin",
        }
    }
}

/// Over which time a ceiling counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// The whole session.
    #[default]
    Session,
    /// Since UTC midnight.
    Day,
}

/// One ceiling as written.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
struct RawCeiling {
    dimension: Option<String>,
    window: Option<Window>,
    #[serde(rename = "match")]
    matches: Option<String>,
    on_exceed: Option<Action>,
    message: Option<String>,
    max_input_tokens: Option<u64>,
    max_output_tokens: Option<u64>,
    max_total_tokens: Option<u64>,
    max_usd: Option<f64>,
    max_usd_per_session: Option<f64>,
    max_usd_per_day: Option<f64>,
}

/// The configuration as written; unknown keys are refused.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Legacy: a session total-token block ceiling.
    max_tokens: Option<u64>,
    /// Legacy: its notice.
    message: Option<String>,
    /// The default action of every ceiling.
    on_exceed: Action,
    ceilings: Vec<RawCeiling>,
    /// Models a `downgrade-model` ceiling may switch to.
    pub downgrade_candidates: Vec<String>,
    /// Multiplies the characters / 4 input estimate.
    pub estimate_factor: f64,
    /// USD per million tokens per model, over the host's table.
    pub pricing: BTreeMap<String, Price>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_tokens: None,
            message: None,
            on_exceed: Action::Block,
            ceilings: Vec::new(),
            downgrade_candidates: Vec::new(),
            estimate_factor: 1.5,
            pricing: BTreeMap::new(),
        }
    }
}

/// A checked ceiling.
#[derive(Debug, Clone, PartialEq)]
pub struct Ceiling {
    /// Whose spending it counts.
    pub dimension: Dimension,
    /// Over which time.
    pub window: Window,
    /// `source_plugin` only: the source it applies to.
    pub matches: Option<String>,
    /// What happens past it.
    pub action: Action,
    /// The notice of a block (`None`: the reason).
    pub message: Option<String>,
    /// Input-token limit.
    pub max_input_tokens: Option<u64>,
    /// Output-token limit.
    pub max_output_tokens: Option<u64>,
    /// Total-token limit.
    pub max_total_tokens: Option<u64>,
    /// Dollar limit.
    pub max_usd: Option<f64>,
}

/// The default notice of the legacy `max_tokens` ceiling.
pub(crate) const LEGACY_MESSAGE: &str = "Token budget exhausted for this session.";

impl Config {
    /// The ceilings this configuration defines, checked.
    ///
    /// # Errors
    ///
    /// A `PackError` when `estimate_factor` is not above 0, a price is negative
    /// or not finite, `message` is set without `max_tokens`, or a ceiling is
    /// wrong (`ceilings[N]: …`: an unknown dimension, `source_plugin` without
    /// `match`, a dollar limit that is negative or not finite, a window that
    /// contradicts it).
    pub fn ceilings(&self) -> Result<Vec<Ceiling>, PackError> {
        if !(self.estimate_factor.is_finite() && self.estimate_factor > 0.0) {
            return Err(PackError::msg("estimate_factor must be a number above 0"));
        }
        for (model, price) in &self.pricing {
            if !(price.input.is_finite() && price.output.is_finite())
                || price.input < 0.0
                || price.output < 0.0
            {
                return Err(PackError::msg(format!(
                    "pricing.{model}: prices must be finite and not negative"
                )));
            }
        }
        let mut ceilings = Vec::new();
        if let Some(max) = self.max_tokens {
            ceilings.push(Ceiling {
                dimension: Dimension::Session,
                window: Window::Session,
                matches: None,
                action: Action::Block,
                message: Some(
                    self.message
                        .clone()
                        .unwrap_or_else(|| LEGACY_MESSAGE.to_owned()),
                ),
                max_input_tokens: None,
                max_output_tokens: None,
                max_total_tokens: Some(max),
                max_usd: None,
            });
        } else if self.message.is_some() {
            return Err(PackError::msg(
                "message is the notice of the legacy max_tokens ceiling: set max_tokens too, or give each ceiling its own message",
            ));
        }
        for (index, raw) in self.ceilings.iter().enumerate() {
            ceilings.push(
                self.ceiling(raw)
                    .map_err(|e| PackError::msg(format!("ceilings[{index}]: {e}")))?,
            );
        }
        Ok(ceilings)
    }

    fn ceiling(&self, raw: &RawCeiling) -> Result<Ceiling, String> {
        let dimension = match raw.dimension.as_deref() {
            None | Some("session") => Dimension::Session,
            Some("source_plugin") => Dimension::SourcePlugin,
            Some("tenant") => {
                return Err(
                    "dimension tenant: this host has no tenants; use session or source_plugin"
                        .to_owned(),
                )
            }
            Some(other) => {
                return Err(format!(
                    "unknown dimension `{other}` (expected session or source_plugin)"
                ))
            }
        };
        if dimension == Dimension::SourcePlugin && raw.matches.is_none() {
            return Err(
                "a source_plugin ceiling needs `match`: agent, gate_retry or compaction".to_owned(),
            );
        }
        let usd = [raw.max_usd, raw.max_usd_per_session, raw.max_usd_per_day];
        if usd.iter().flatten().any(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err("dollar limits must be finite and not negative".to_owned());
        }
        let mut window = raw.window.unwrap_or_default();
        if raw.max_usd_per_day.is_some() {
            if raw.max_usd_per_session.is_some() || raw.window == Some(Window::Session) {
                return Err("max_usd_per_day counts a day: not with a session window".to_owned());
            }
            window = Window::Day;
        }
        if raw.max_usd_per_session.is_some() && window == Window::Day {
            return Err("max_usd_per_session counts a session: not with a day window".to_owned());
        }
        let max_usd = usd.into_iter().flatten().reduce(f64::min);
        let ceiling = Ceiling {
            dimension,
            window,
            matches: raw.matches.clone(),
            action: raw.on_exceed.unwrap_or(self.on_exceed),
            message: raw.message.clone(),
            max_input_tokens: raw.max_input_tokens,
            max_output_tokens: raw.max_output_tokens,
            max_total_tokens: raw.max_total_tokens,
            max_usd,
        };
        if ceiling.max_input_tokens.is_none()
            && ceiling.max_output_tokens.is_none()
            && ceiling.max_total_tokens.is_none()
            && ceiling.max_usd.is_none()
        {
            return Err("a ceiling needs at least one limit (max_input_tokens, max_output_tokens, max_total_tokens, max_usd, max_usd_per_session, max_usd_per_day)".to_owned());
        }
        Ok(ceiling)
    }
}
