//! The configuration and the gate.

use crate::duration;
use chimera_plugin_api::prelude::*;
use globset::{Glob, GlobMatcher};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The configuration as written; unknown keys are refused.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The deadline of a tool no entry names.
    pub default_timeout: String,
    /// Tool name or glob → deadline.
    pub per_tool: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            default_timeout: "30s".to_owned(),
            per_tool: BTreeMap::new(),
        }
    }
}

/// The loaded gate.
#[derive(Debug)]
pub struct ToolTimeout {
    default: Duration,
    exact: BTreeMap<String, Duration>,
    /// Globs, longest pattern first.
    globs: Vec<(GlobMatcher, Duration)>,
}

fn positive(key: &str, text: &str) -> Result<Duration, PackError> {
    let parsed = duration::parse(text).map_err(|e| PackError::msg(format!("{key}: {e}")))?;
    if parsed.is_zero() {
        return Err(PackError::msg(format!(
            "{key}: a timeout must be above zero"
        )));
    }
    Ok(parsed)
}

impl ToolTimeout {
    /// The deadline of a call to `tool`: its exact entry, else the longest
    /// matching glob's, else the default.
    #[must_use]
    pub fn deadline(&self, tool: &str) -> Duration {
        if let Some(exact) = self.exact.get(tool) {
            return *exact;
        }
        self.globs
            .iter()
            .find(|(glob, _)| glob.is_match(tool))
            .map_or(self.default, |(_, deadline)| *deadline)
    }

    /// The error result recorded when a call to `tool` runs past `deadline`.
    #[must_use]
    pub fn timeout_text(tool: &str, deadline: Duration) -> String {
        format!(
            "tool {tool} exceeded timeout {}; raise via gates.tool_timeout.per_tool.{tool}: <duration>",
            duration::format(deadline)
        )
    }
}

impl Pack for ToolTimeout {
    const NAME: &'static str = "tool-timeout";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "gives every tool call a deadline; the host stops a call that runs past it";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ToolCall];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        let default = positive("default_timeout", &config.default_timeout)?;
        let mut exact = BTreeMap::new();
        let mut globs = Vec::new();
        for (pattern, text) in &config.per_tool {
            let deadline = positive(&format!("per_tool.{pattern}"), text)?;
            if pattern.contains(['*', '?', '[', '{']) {
                let glob = Glob::new(pattern)
                    .map_err(|e| PackError::msg(format!("per_tool.{pattern}: {e}")))?;
                globs.push((pattern.len(), glob.compile_matcher(), deadline));
            } else {
                exact.insert(pattern.clone(), deadline);
            }
        }
        globs.sort_by_key(|g| std::cmp::Reverse(g.0));
        Ok(ToolTimeout {
            default,
            exact,
            globs: globs.into_iter().map(|(_, glob, d)| (glob, d)).collect(),
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        registrar.tool_call_gate("deadline", move |_session, call| {
            let within = self.deadline(call.name());
            Ok(GateDecision::AllowWithin {
                within,
                on_timeout: ToolTimeout::timeout_text(call.name(), within),
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gate(config: serde_json::Value) -> Result<ToolTimeout, PackError> {
        ToolTimeout::new(serde_json::from_value(config).map_err(PackError::from)?)
    }

    #[test]
    fn a_deadline_is_the_exact_name_then_the_longest_glob_then_the_default() {
        let gate = gate(json!({
            "default_timeout": "50ms",
            "per_tool": {"mcp.*": "1s", "mcp.sub.*": "2s", "mcp.sub.exact": "3s"}
        }))
        .unwrap();
        assert_eq!(gate.deadline("mcp.sub.exact"), Duration::from_secs(3));
        assert_eq!(gate.deadline("mcp.sub.other"), Duration::from_secs(2));
        assert_eq!(gate.deadline("mcp.top"), Duration::from_secs(1));
        assert_eq!(gate.deadline("bash"), Duration::from_millis(50));
        assert_eq!(
            ToolTimeout::timeout_text("stuck", Duration::from_millis(50)),
            "tool stuck exceeded timeout 50ms; raise via gates.tool_timeout.per_tool.stuck: <duration>"
        );
    }

    #[test]
    fn zero_malformed_or_unknown_settings_refuse_the_load() {
        let refused = |config| gate(config).unwrap_err().to_string();
        assert!(refused(json!({"default_timeout": "0s"})).contains("above zero"));
        assert!(refused(json!({"per_tool": {"bash": "soon"}})).starts_with("per_tool.bash:"));
        assert!(refused(json!({"per_tool": {"[": "1s"}})).starts_with("per_tool.[:"));
        assert!(refused(json!({"timeout": "1s"})).contains("unknown field"));
    }
}
