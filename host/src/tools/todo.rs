//! `todo`: the model's task list, replaced whole on each call.

use super::{ToolContext, ToolError, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::{Mutex, PoisonError};

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started yet: `[ ]`.
    Pending,
    /// Being worked on: `[~]`.
    InProgress,
    /// Finished: `[x]`.
    Done,
}

impl TodoStatus {
    fn mark(self) -> &'static str {
        match self {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[~]",
            TodoStatus::Done => "[x]",
        }
    }
}

/// A task: what it is, and its state.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    /// What the task is.
    pub content: String,
    /// The task's state.
    pub status: TodoStatus,
}

/// The arguments of `todo` (the field docs are what the model reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoArgs {
    /// The complete task list, in order.
    pub todos: Vec<TodoItem>,
}

/// `todo`: holds the current task list; each call replaces it with the
/// given list and returns it rendered one task per line (`[ ]` pending,
/// `[~]` in progress, `[x]` done).
#[derive(Default)]
pub struct TodoTool {
    items: Mutex<Vec<TodoItem>>,
}

impl TodoTool {
    /// The current list, rendered as the tool returns it.
    pub fn rendered(&self) -> String {
        render(&self.items.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl TypedTool for TodoTool {
    /// Inline under a deadline: it records a list.
    fn stops_by_deadline(&self) -> bool {
        true
    }

    type Args = TodoArgs;

    fn name(&self) -> &str {
        "todo"
    }

    fn description(&self) -> &str {
        "Keep a task list for the current work. Each call REPLACES the whole list with \
         `todos`; send every task each time, with its status: pending, in_progress or \
         done. Returns the list, one task per line: [ ] pending, [~] in progress, [x] done."
    }

    /// Replaces the list, each task's content trimmed; a task with no
    /// content is refused and the list kept.
    fn run(&self, arguments: TodoArgs, _cx: &ToolContext<'_>) -> Result<String, ToolError> {
        let mut items = arguments.todos;
        for (i, item) in items.iter_mut().enumerate() {
            let trimmed = item.content.trim();
            if trimmed.is_empty() {
                return Err(ToolError::invalid(
                    format!("todos[{i}].content"),
                    format!("todo {} has empty `content`", i + 1),
                ));
            }
            item.content = trimmed.to_owned();
        }
        let mut current = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        *current = items;
        Ok(render(&current))
    }
}

fn render(items: &[TodoItem]) -> String {
    if items.is_empty() {
        return "The todo list is empty.".to_owned();
    }
    items
        .iter()
        .map(|item| format!("{} {}", item.status.mark(), item.content))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{run, setup};
    use serde_json::json;

    #[test]
    fn the_schema_offered_lists_the_statuses_and_closes_every_object() {
        assert_eq!(
            crate::tools::Tool::parameters(&TodoTool::default()),
            json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "description": "The complete task list, in order.",
                        "items": {
                            "type": "object",
                            "description": "A task: what it is, and its state.",
                            "properties": {
                                "content": {
                                    "type": "string",
                                    "description": "What the task is."
                                },
                                "status": {
                                    "type": "string",
                                    "enum": ["pending", "in_progress", "done"],
                                    "description": "The task's state."
                                }
                            },
                            "required": ["content", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["todos"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn each_call_replaces_the_list_and_returns_it_rendered() {
        let (_dir, ws) = setup();
        let tool = TodoTool::default();
        assert_eq!(tool.rendered(), "The todo list is empty.");
        let r = run(
            &tool,
            &ws,
            json!({"todos": [
                {"content": "write tests", "status": "pending"},
                {"content": " refactor ", "status": "in_progress"},
                {"content": "done thing", "status": "done"}
            ]}),
        );
        assert_eq!(r.error, None);
        assert_eq!(r.output, "[ ] write tests\n[~] refactor\n[x] done thing");
        let r = run(
            &tool,
            &ws,
            json!({"todos": [{"content": "only", "status": "done"}]}),
        );
        assert_eq!(r.output, "[x] only");
        assert_eq!(tool.rendered(), "[x] only");
    }

    #[test]
    fn an_ill_formed_list_is_refused_naming_the_task_and_the_list_is_kept() {
        let (_dir, ws) = setup();
        let tool = TodoTool::default();
        run(
            &tool,
            &ws,
            json!({"todos": [{"content": "a", "status": "pending"}]}),
        );
        let error = |args| run(&tool, &ws, args).error.unwrap();
        assert_eq!(
            error(json!({"todos": [{"content": "b", "status": "finished"}]})),
            "argument `todos[0].status` must be one of `pending`, `in_progress`, `done`, got \"finished\""
        );
        assert_eq!(
            error(json!({})),
            "missing required argument `todos` (an array)"
        );
        assert_eq!(
            error(json!({"todos": "x"})),
            "argument `todos` must be an array, got \"x\""
        );
        assert_eq!(
            error(json!({"todos": [1]})),
            "argument `todos[0]` must be an object, got 1"
        );
        assert_eq!(
            error(json!({"todos": [{"status": "done"}]})),
            "missing required field `content` in `todos[0]` (a string)"
        );
        assert_eq!(
            error(
                json!({"todos": [{"content": "a", "status": "done"}, {"content": " ", "status": "done"}]})
            ),
            "todo 2 has empty `content`"
        );
        assert_eq!(
            error(json!({"todos": [{"content": "a", "status": "done", "owner": "me"}]})),
            "unknown field `owner` in `todos[0]`; expected `content` or `status`"
        );
        assert_eq!(tool.rendered(), "[ ] a");
    }
}
