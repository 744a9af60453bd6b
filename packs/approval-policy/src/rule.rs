//! One rule: its conditions over the action payload, and the question it
//! asks.

use chimera_plugin_api::prelude::PackError;
use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

/// A rule as written in the configuration; unknown keys are refused.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleConfig {
    #[serde(rename = "match", default)]
    conditions: serde_json::Map<String, Value>,
    #[serde(default)]
    mode: Mode,
    choices: Option<Vec<Choice>>,
    default_choice: Option<String>,
    prompt: Option<String>,
    prompt_synthesizer: Option<String>,
    timeout: Option<String>,
}

/// How the operator answers.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Mode {
    #[default]
    Choices,
    FreeText,
    Both,
}

/// A choice: its id, or `{id, label, kind}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Choice {
    Id(String),
    Full(ChoiceObject),
}

/// `{id, label, kind}`: the label is accepted (the operator sees the ids).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChoiceObject {
    id: String,
    #[serde(default, rename = "label")]
    _label: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

/// The answers this host's operator gives.
const ANSWERS: [&str; 3] = ["allow", "reject", "edit"];

/// What one condition expects at its path.
#[derive(Debug, Clone)]
enum Expect {
    /// A string value: a glob over the payload's value (as text).
    Glob(GlobMatcher),
    /// A number or boolean: equal to the payload's value, both formatted.
    Scalar(String),
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    conditions: Vec<(Vec<String>, Expect)>,
    /// `edit` is among the choices.
    pub(crate) edit: bool,
    /// The default choice is `allow`.
    pub(crate) default_allow: bool,
    prompt: Option<String>,
    /// How long the operator has; `None`: as long as it takes.
    pub(crate) timeout: Option<Duration>,
}

impl Rule {
    /// Compiles the rule at `index` of `rules`; every problem is one line
    /// naming it.
    pub(crate) fn parse(index: usize, raw: &Value) -> Result<Rule, PackError> {
        let fail = |text: &dyn std::fmt::Display| PackError::msg(format!("rules[{index}]: {text}"));
        let config = RuleConfig::deserialize(raw).map_err(|e| fail(&e))?;
        if config.mode != Mode::Choices {
            return Err(fail(
                &"mode must be `choices`: this host's operator answers with a choice (allow, reject or edit), not free text",
            ));
        }
        let ids = choice_ids(config.choices.as_deref()).map_err(|e| fail(&e))?;
        let default_allow = match config.default_choice.as_deref() {
            None | Some("reject") => false,
            Some("allow") => true,
            Some("edit") => {
                return Err(fail(
                    &"default_choice cannot be `edit`: an edit needs the operator's arguments",
                ))
            }
            Some(other) => {
                return Err(fail(&format_args!(
                    "default_choice `{other}` is not one of the choices"
                )))
            }
        };
        let timeout = config
            .timeout
            .as_deref()
            .map(parse_timeout)
            .transpose()
            .map_err(|e| fail(&e))?;
        // Accepted so a Nexus rule loads unchanged; see the crate docs.
        let _ = config.prompt_synthesizer;
        let conditions = config
            .conditions
            .iter()
            .map(|(key, value)| condition(key, value))
            .collect::<Result<_, _>>()
            .map_err(|e| fail(&e))?;
        Ok(Rule {
            conditions,
            edit: ids.contains(&"edit"),
            default_allow,
            prompt: config.prompt,
            timeout,
        })
    }

    /// True when every condition holds for `payload`.
    pub(crate) fn matches(&self, payload: &Value) -> bool {
        self.conditions.iter().all(|(path, expect)| {
            let Some(found) = lookup(payload, path) else {
                return false;
            };
            let text = formatted(found);
            match expect {
                Expect::Glob(glob) => glob.is_match(text.as_str()),
                Expect::Scalar(want) => *want == text,
            }
        })
    }

    /// True when the rule can match a payload of `kind`: its
    /// `action_kind` condition, if any, admits it, and every path it names
    /// can exist in such a payload (a rule about `tool` is never about a
    /// provider request).
    pub(crate) fn may_match_kind(&self, kind: &str) -> bool {
        self.conditions.iter().all(|(path, expect)| {
            let first = path[0].as_str();
            if first == "action_kind" {
                return path.len() == 1
                    && match expect {
                        Expect::Glob(glob) => glob.is_match(kind),
                        Expect::Scalar(want) => want == kind,
                    };
            }
            match kind {
                crate::TOOL_KIND => matches!(first, "tool" | "args" | "id" | "turn_id"),
                _ => {
                    first == "model"
                        || (first == "args"
                            && path.get(1).is_none_or(|key| {
                                matches!(
                                    key.as_str(),
                                    "model" | "tools" | "temperature" | "max_tokens"
                                )
                            }))
                }
            }
        })
    }

    /// The question: the rule's template over `payload`, or
    /// `Approve <kind>: <target>`.
    pub(crate) fn prompt(&self, payload: &Value, kind: &str, target: &str) -> String {
        match &self.prompt {
            Some(template) => render(template, payload),
            None => format!("Approve {kind}: {target}"),
        }
    }
}

/// The choice ids, checked: each one of [`ANSWERS`], `allow` and `reject`
/// both there (the host always offers them). No list: allow and reject.
fn choice_ids(choices: Option<&[Choice]>) -> Result<Vec<&str>, String> {
    let Some(choices) = choices else {
        return Ok(vec!["allow", "reject"]);
    };
    let mut ids = Vec::with_capacity(choices.len());
    for choice in choices {
        let (id, kind) = match choice {
            Choice::Id(id) => (id.as_str(), None),
            Choice::Full(choice) => (choice.id.as_str(), choice.kind.as_deref()),
        };
        if !ANSWERS.contains(&id) {
            return Err(format!(
                "choice `{id}` is not one this host's operator can give (allow, reject, edit)"
            ));
        }
        if let Some(kind) = kind.filter(|k| *k != id) {
            return Err(format!("choice `{id}` cannot be of kind `{kind}`"));
        }
        ids.push(id);
    }
    for needed in ["allow", "reject"] {
        if !ids.contains(&needed) {
            return Err(format!(
                "choices must include `{needed}` (the operator is always offered allow and reject)"
            ));
        }
    }
    Ok(ids)
}

/// A duration string (`1s`, `500ms`, `2m 30s`); at least a millisecond.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let timeout = humantime::parse_duration(text)
        .map_err(|e| format!("timeout `{text}` is not a duration ({e})"))?;
    if timeout < Duration::from_millis(1) {
        return Err(format!(
            "timeout `{text}` is under a millisecond (leave it out to wait as long as it takes)"
        ));
    }
    Ok(timeout)
}

/// One `match` entry: a dotted path and what it expects.
fn condition(key: &str, value: &Value) -> Result<(Vec<String>, Expect), String> {
    let path: Vec<String> = key.split('.').map(str::to_owned).collect();
    if path.iter().any(String::is_empty) {
        return Err(format!("match key `{key}` is not a dotted path"));
    }
    let expect = match value {
        Value::String(pattern) => Expect::Glob(
            GlobBuilder::new(pattern)
                .literal_separator(false)
                .backslash_escape(true)
                .build()
                .map_err(|e| format!("match `{key}`: {e}"))?
                .compile_matcher(),
        ),
        Value::Number(_) | Value::Bool(_) => Expect::Scalar(value.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => {
            return Err(format!(
                "match `{key}` must be a string (a glob), a number or a boolean"
            ))
        }
    };
    Ok((path, expect))
}

/// The value at `path` (object keys; array indices as numbers).
fn lookup<'a>(payload: &'a Value, path: &[impl AsRef<str>]) -> Option<&'a Value> {
    path.iter().try_fold(payload, |value, key| {
        let key = key.as_ref();
        match value {
            Value::Object(map) => map.get(key),
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        }
    })
}

/// A value as text: a string as it is, anything else as JSON.
fn formatted(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `template` with each `{dotted.path}` replaced by the payload's value
/// there (empty when there is none). Braces around anything that is not a
/// path (spaces, nothing, another brace) are kept as they are.
pub(crate) fn render(template: &str, payload: &Value) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let path = after
            .find('}')
            .map(|close| &after[..close])
            .filter(|inner| {
                !inner.is_empty()
                    && inner
                        .chars()
                        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
            });
        if let Some(path) = path {
            let keys: Vec<&str> = path.split('.').collect();
            if let Some(value) = lookup(payload, &keys) {
                out.push_str(&formatted(value));
            }
            rest = &after[path.len() + 1..];
        } else {
            out.push('{');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}
