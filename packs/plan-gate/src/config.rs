//! plan-gate's configuration.

use serde::Deserialize;
use std::collections::BTreeSet;

/// `{"gated_tools": [...], "plan_tools": [...]}`; unknown keys are refused.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Tools blocked until a plan is issued.
    pub gated_tools: BTreeSet<String>,
    /// Tools whose call counts as a plan.
    pub plan_tools: BTreeSet<String>,
}

impl Default for Config {
    fn default() -> Self {
        let set = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
        Config {
            gated_tools: set(&[
                "apply_patch",
                "bash",
                "edit_file",
                "replace_in_file",
                "write_file",
            ]),
            plan_tools: set(&["think", "todo"]),
        }
    }
}

impl Config {
    /// The block reason for `tool` (plan tools sorted, `, `-joined; the dash
    /// is U+2014).
    pub fn block_reason(&self, tool: &str) -> String {
        let plan_tools: Vec<&str> = self.plan_tools.iter().map(String::as_str).collect();
        format!(
            "plan-gate: no plan recorded this turn \u{2014} call one of [{}] to record a plan before using {tool}",
            plan_tools.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_block_reason_is_the_pinned_text() {
        assert_eq!(
            Config::default().block_reason("write_file"),
            "plan-gate: no plan recorded this turn — call one of [think, todo] to record a plan before using write_file"
        );
    }
}
