//! What a case's golden file holds: the session's decisions as JSON lines,
//! normalised so that nothing in them depends on where or when the case
//! ran, and the readable diff shown when a run disagrees with it.

use crate::agent::AgentEvent;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The golden file's suffix, after the case name.
pub const GOLDEN_SUFFIX: &str = ".golden.jsonl";

/// The event types a golden file records: the turns, the packs' decisions
/// and what the operator and the user were shown because of them, and how
/// each turn ended. Loading, reloads and timing-dependent events
/// (`interceptor_slow`, `late_result_suppressed`) and the conversation
/// itself (replies, tool results) are left out.
pub const RECORDED_EVENTS: &[&str] = &[
    "user",
    "interceptor",
    "notice",
    "approval_requested",
    "approval_answered",
    "gate_retry",
    "turn_paused",
    "compaction",
    "model_changed",
    "tool_timeout",
    "stream_retract",
    "streaming_downgraded",
    "pack_quarantined",
    "run_end",
];

/// Fields that hold a measured duration, dropped wherever they appear.
const TIMING_FIELDS: &[&str] = &["wait_ms", "elapsed_ms", "budget_ms"];

/// The golden file of the case file `case` (`blocks.toml` →
/// `blocks.golden.jsonl`, beside it).
#[must_use]
pub fn golden_path(case: &Path) -> PathBuf {
    let stem = case
        .file_stem()
        .map_or_else(|| "case".into(), |s| s.to_string_lossy().into_owned());
    case.with_file_name(format!("{stem}{GOLDEN_SUFFIX}"))
}

/// Replaces the directories a run happened in with placeholders: the
/// scratch workspace (`<workspace>`), the case's directory (`<cases>`),
/// the plugins directories (`<plugins>`) and the temporary directory
/// (`<tmp>`). Each path is replaced absolute and canonical (a relative
/// spelling never is: `.` must not replace every dot), longest first.
#[derive(Debug, Default, Clone)]
pub struct Normaliser {
    replacements: Vec<(String, &'static str)>,
}

impl Normaliser {
    /// A normaliser replacing nothing yet.
    #[must_use]
    pub fn new() -> Self {
        Normaliser::default()
    }

    /// Also replaces `path` (made absolute, and canonical) with
    /// `placeholder`.
    #[must_use]
    pub fn replace(mut self, path: &Path, placeholder: &'static str) -> Self {
        let forms = [std::path::absolute(path).ok(), path.canonicalize().ok()];
        for form in forms.into_iter().flatten() {
            let text = form.display().to_string();
            let text = text.trim_end_matches('/');
            if !text.is_empty() && !self.replacements.iter().any(|(t, _)| t == text) {
                self.replacements.push((text.to_owned(), placeholder));
            }
        }
        self.replacements
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        self
    }

    fn text(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (path, placeholder) in &self.replacements {
            if text.contains(path.as_str()) {
                text = text.replace(path.as_str(), placeholder);
            }
        }
        text
    }

    fn value(&self, value: &mut Value) {
        match value {
            Value::String(text) => *text = self.text(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.value(item)),
            Value::Object(map) => {
                map.retain(|key, _| !TIMING_FIELDS.contains(&key.as_str()));
                map.values_mut().for_each(|item| self.value(item));
            }
            _ => {}
        }
    }

    /// The golden text of `events`: one line per recorded event (a
    /// sub-agent's included, with its `depth`), normalised, each object
    /// with `type` first and the other keys sorted.
    #[must_use]
    pub fn golden(&self, events: &[AgentEvent]) -> String {
        let mut text = String::new();
        for event in events {
            let Ok(mut value) = serde_json::to_value(event) else {
                continue;
            };
            if !value["type"]
                .as_str()
                .is_some_and(|kind| RECORDED_EVENTS.contains(&kind))
            {
                continue;
            }
            if kind_is(&value, "run_end") {
                // The script's token counts and their price are inputs of
                // the run, not decisions; a price-table update must not
                // change every golden file.
                // A veto is a decision (it stays, with the gate); its
                // absence is the rule, and goldens written before the field
                // existed keep matching.
                if let Some(map) = value.as_object_mut() {
                    map.remove("usage");
                    if map.get("vetoed") == Some(&Value::Bool(false)) {
                        map.remove("vetoed");
                    }
                }
            }
            self.value(&mut value);
            write_canonical(&value, &mut text);
            text.push('\n');
        }
        text
    }
}

fn kind_is(value: &Value, kind: &str) -> bool {
    value["type"].as_str() == Some(kind)
}

/// `value` as compact JSON, an object's `type` first and its other keys
/// sorted, so the text does not depend on `serde_json`'s map order.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by_key(|key| (key.as_str() != "type", key.as_str()));
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A unified diff from `expected` (the golden file, named `golden`) to
/// `actual` (this run of case `case`), safe to print on a terminal: the
/// packs' text in it has its control characters shown escaped.
#[must_use]
pub fn diff(golden: &str, case: &str, expected: &str, actual: &str) -> String {
    let patch = diffy::DiffOptions::new()
        .set_original_filename(format!("{golden} (expected)"))
        .set_modified_filename(format!("{case} (this run)"))
        .create_patch(expected, actual);
    crate::types::terminal_safe(&patch.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_decisions_are_kept_and_paths_and_timings_never_appear() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("work");
        std::fs::create_dir(&workspace).unwrap();
        let normaliser = Normaliser::new()
            .replace(dir.path(), "<tmp>")
            .replace(&workspace, "<workspace>");
        let canonical = workspace.canonicalize().unwrap();
        let events = [
            AgentEvent::PackLoaded {
                name: "p".into(),
                version: "1".into(),
                path: Some("/somewhere/libp.so".into()),
            },
            AgentEvent::User {
                content: "hi".into(),
            },
            AgentEvent::Notice {
                seam: "tool_call",
                interceptor: "p/gate".into(),
                text: format!(
                    "no writes to {}/a or {}/b",
                    workspace.display(),
                    canonical.display()
                ),
            },
            AgentEvent::TurnPaused {
                interceptor: "p/limit".into(),
                wait_ms: 1234,
                reason: "slow down".into(),
            },
            AgentEvent::InterceptorSlow {
                seam: "tool_call".into(),
                interceptor: "p/gate".into(),
                elapsed_ms: 150,
                budget_ms: 100,
            },
            AgentEvent::Notice {
                seam: "output",
                interceptor: "p/length".into(),
                text: format!("trimmed in {}", dir.path().display()),
            },
        ];
        let golden = normaliser.golden(&events);
        assert_eq!(
            golden,
            concat!(
                "{\"type\":\"user\",\"content\":\"hi\"}\n",
                "{\"type\":\"notice\",\"interceptor\":\"p/gate\",\"seam\":\"tool_call\",",
                "\"text\":\"no writes to <workspace>/a or <workspace>/b\"}\n",
                "{\"type\":\"turn_paused\",\"interceptor\":\"p/limit\",\"reason\":\"slow down\"}\n",
                "{\"type\":\"notice\",\"interceptor\":\"p/length\",\"seam\":\"output\",\"text\":\"trimmed in <tmp>\"}\n",
            )
        );
    }

    #[test]
    fn a_changed_line_shows_as_a_unified_diff_with_escaped_control_characters() {
        let diff = diff(
            "blocks.golden.jsonl",
            "blocks",
            "{\"a\":1}\n{\"b\":2}\n",
            "{\"a\":1}\n{\"b\":\"\u{1b}[2J\"}\n",
        );
        assert!(
            diff.contains("--- blocks.golden.jsonl (expected)"),
            "{diff}"
        );
        assert!(diff.contains("+++ blocks (this run)"), "{diff}");
        assert!(diff.contains("\n-{\"b\":2}\n"), "{diff}");
        assert!(diff.contains("\n+{\"b\":\"\\u{1b}[2J\"}\n"), "{diff}");
        assert!(!diff.contains('\u{1b}'));
    }

    #[test]
    fn the_golden_file_sits_beside_its_case() {
        assert_eq!(
            golden_path(Path::new("tests/cases/blocks.toml")),
            PathBuf::from("tests/cases/blocks.golden.jsonl")
        );
    }
}
