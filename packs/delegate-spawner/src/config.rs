//! delegate-spawner's configuration.

use serde::Deserialize;
use std::collections::BTreeSet;

/// `{"prefix": "spawn_", "names": [...], "delegate_tool": "delegate"}`;
/// unknown keys are refused.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Calls whose name starts with this are rewritten (empty: off).
    pub prefix: String,
    /// Calls with exactly these names are rewritten.
    pub names: BTreeSet<String>,
    /// The tool the calls are rewritten to.
    pub delegate_tool: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            prefix: "spawn_".to_owned(),
            names: BTreeSet::new(),
            delegate_tool: "delegate".to_owned(),
        }
    }
}
