//! The rewrite, and the pack around it.

use crate::config::Config;
use crate::pydump::write_object_except;
use chimera_plugin_api::prelude::*;
use serde_json::Value;
use std::sync::Arc;

/// The delegate-spawner pack.
pub struct DelegateSpawner {
    config: Config,
}

/// Python truthiness of a JSON value.
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null | Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Bool(true)) => true,
    }
}

impl DelegateSpawner {
    /// True when a call named `name` is rewritten.
    #[must_use]
    pub fn matches(&self, name: &str) -> bool {
        name != self.config.delegate_tool
            && (self.config.names.contains(name)
                || (!self.config.prefix.is_empty() && name.starts_with(&self.config.prefix)))
    }

    /// The task handed to the sub-agent for a call `name(arguments)`.
    #[must_use]
    pub fn task(name: &str, arguments: &Value) -> String {
        let empty = serde_json::Map::new();
        let args = arguments.as_object().unwrap_or(&empty);
        let chosen = if truthy(args.get("task")) {
            args.get("task")
        } else {
            args.get("prompt")
        };
        match chosen {
            Some(Value::String(task)) if !task.trim().is_empty() => task.clone(),
            _ => {
                // The other arguments, rendered straight from the parsed map.
                let mut task = format!("{name}: ");
                write_object_except(&mut task, args, &["task", "prompt"]);
                task
            }
        }
    }

    /// The rewritten call's arguments, `{"task": <task>}`, as JSON text
    /// written directly (no tree built and serialised).
    #[must_use]
    pub fn task_arguments(task: &str) -> String {
        let quoted = serde_json::to_string(task).unwrap_or_else(|_| String::from("\"\""));
        format!(r#"{{"task":{quoted}}}"#)
    }

    /// The rewritten call, or `None` for calls that do not match.
    ///
    /// # Errors
    ///
    /// An [`InterceptError`] when a matching call's arguments are not JSON.
    pub fn rewrite(&self, call: ToolCallRef<'_>) -> Result<Option<ToolCall>, InterceptError> {
        if !self.matches(call.name()) {
            return Ok(None);
        }
        let task = Self::task(call.name(), &call.arguments()?);
        Ok(Some(ToolCall {
            id: call.id().to_owned(),
            name: self.config.delegate_tool.clone(),
            arguments_json: Self::task_arguments(&task),
        }))
    }
}

impl Pack for DelegateSpawner {
    const NAME: &'static str = "delegate-spawner";
    const VERSION: &'static str = "1.0.0";
    const DESCRIPTION: &'static str =
        "rewrites spawn_* (or named) tool calls into delegate(task) calls";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ToolCall];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        if config.delegate_tool.trim().is_empty() {
            return Err(PackError::msg("delegate_tool must name a tool"));
        }
        Ok(DelegateSpawner { config })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        registrar.tool_call("rewrite", move |_, call| {
            Ok(self
                .rewrite(call)?
                .map_or(Decision::Allow, Decision::Replace))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_task_comes_from_task_then_prompt_then_a_rendering_of_the_rest() {
        let task = DelegateSpawner::task;
        assert_eq!(
            task("spawn_research", &json!({"task": "count the beans"})),
            "count the beans"
        );
        assert_eq!(
            task("spawn_review", &json!({"prompt": "review it"})),
            "review it"
        );
        assert_eq!(
            task("spawn_lookup", &json!({"query": "bean varieties"})),
            r#"spawn_lookup: {"query": "bean varieties"}"#
        );
        // A whitespace-only task is truthy, so prompt is not consulted; both are omitted.
        assert_eq!(
            task("spawn_x", &json!({"task": "  ", "prompt": "p", "k": 1})),
            r#"spawn_x: {"k": 1}"#
        );
        // A non-string task falls back too.
        assert_eq!(task("spawn_x", &json!({"task": 5})), "spawn_x: {}");
        // An empty task is falsy: prompt is used.
        assert_eq!(task("spawn_x", &json!({"task": "", "prompt": "p"})), "p");
    }

    #[test]
    fn matching_respects_prefix_names_and_the_delegate_tool_itself() {
        let with = |prefix: &str, names: &[&str], delegate: &str| DelegateSpawner {
            config: Config {
                prefix: prefix.into(),
                names: names.iter().map(|n| (*n).to_owned()).collect(),
                delegate_tool: delegate.into(),
            },
        };
        let default = with("spawn_", &[], "delegate");
        assert!(
            default.matches("spawn_research")
                && !default.matches("write_file")
                && !default.matches("delegate")
        );
        let named = with("", &["research"], "delegate");
        assert!(named.matches("research") && !named.matches("spawn_research"));
        assert!(!with("", &[], "delegate").matches("spawn_research"));
        assert!(!with("spawn_", &[], "spawn_worker").matches("spawn_worker"));
    }
}
