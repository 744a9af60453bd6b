//! `todo`: the model's task list, replaced whole on each call.

use super::args::{kind, required_array};
use super::{Tool, ToolContext};
use crate::types::ToolResult;
use serde_json::Value;
use std::sync::{Mutex, PoisonError};

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Pending,
    InProgress,
    Done,
}

impl Status {
    fn parse(name: &str) -> Option<Status> {
        match name {
            "pending" => Some(Status::Pending),
            "in_progress" => Some(Status::InProgress),
            "done" => Some(Status::Done),
            _ => None,
        }
    }

    fn mark(self) -> &'static str {
        match self {
            Status::Pending => "[ ]",
            Status::InProgress => "[~]",
            Status::Done => "[x]",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    content: String,
    status: Status,
}

/// `todo`: holds the current task list; each call replaces it with the
/// given list and returns it rendered one task per line (`[ ]` pending,
/// `[~]` in progress, `[x]` done).
#[derive(Default)]
pub struct TodoTool {
    items: Mutex<Vec<Item>>,
}

impl TodoTool {
    /// The current list, rendered as the tool returns it.
    pub fn rendered(&self) -> String {
        render(&self.items.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Tool for TodoTool {
    fn name(&self) -> &str {
        "todo"
    }

    fn description(&self) -> &str {
        "Keep a task list for the current work. Each call REPLACES the whole list with \
         `todos`; send every task each time, with its status: pending, in_progress or \
         done. Returns the list, one task per line: [ ] pending, [~] in progress, [x] done."
    }

    fn parameters(&self) -> Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The complete task list, in order.",
                    "items": {
                        "type": "object",
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
    }

    fn execute(&self, arguments: &Value, _cx: &ToolContext<'_>) -> ToolResult {
        let items = match parse(arguments) {
            Ok(items) => items,
            Err(error) => return ToolResult::err(error),
        };
        let mut current = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        *current = items;
        ToolResult::ok(render(&current))
    }
}

fn parse(arguments: &Value) -> Result<Vec<Item>, String> {
    let todos = required_array(arguments, "todos")?;
    todos
        .iter()
        .enumerate()
        .map(|(i, todo)| {
            let n = i + 1;
            let Value::Object(fields) = todo else {
                return Err(format!(
                    "todo {n} must be an object with `content` and `status`, got {}",
                    kind(todo)
                ));
            };
            let content = match fields.get("content") {
                Some(Value::String(text)) if !text.trim().is_empty() => text.trim().to_owned(),
                Some(Value::String(_)) => return Err(format!("todo {n} has empty `content`")),
                Some(other) => {
                    return Err(format!(
                        "todo {n}: `content` must be a string, got {}",
                        kind(other)
                    ))
                }
                None => return Err(format!("todo {n} is missing `content` (a string)")),
            };
            let status = match fields.get("status") {
                Some(Value::String(name)) => Status::parse(name).ok_or_else(|| {
                    format!(
                        "todo {n} has invalid status {name:?}: use pending, in_progress or done"
                    )
                })?,
                Some(other) => {
                    return Err(format!(
                    "todo {n}: `status` must be a string (pending, in_progress or done), got {}",
                    kind(other)
                ))
                }
                None => {
                    return Err(format!(
                        "todo {n} is missing `status` (pending, in_progress or done)"
                    ))
                }
            };
            Ok(Item { content, status })
        })
        .collect()
}

fn render(items: &[Item]) -> String {
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
    use crate::tools::Workspace;
    use serde_json::json;

    #[test]
    fn replaces_and_renders() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let cx = ToolContext::new(&ws);
        let tool = TodoTool::default();
        assert_eq!(tool.rendered(), "The todo list is empty.");
        let r = tool.execute(
            &json!({"todos": [
                {"content": "write tests", "status": "pending"},
                {"content": "refactor", "status": "in_progress"},
                {"content": "done thing", "status": "done"}
            ]}),
            &cx,
        );
        assert_eq!(r.error, None);
        assert_eq!(r.output, "[ ] write tests\n[~] refactor\n[x] done thing");
        let r = tool.execute(
            &json!({"todos": [{"content": "only", "status": "done"}]}),
            &cx,
        );
        assert_eq!(r.output, "[x] only");
        assert_eq!(tool.rendered(), "[x] only");
    }

    #[test]
    fn invalid_input_keeps_the_list() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let cx = ToolContext::new(&ws);
        let tool = TodoTool::default();
        tool.execute(
            &json!({"todos": [{"content": "a", "status": "pending"}]}),
            &cx,
        );
        let r = tool.execute(
            &json!({"todos": [{"content": "b", "status": "finished"}]}),
            &cx,
        );
        assert!(r.error.unwrap().contains("invalid status"));
        assert!(tool.execute(&json!({}), &cx).is_error());
        assert!(tool.execute(&json!({"todos": "x"}), &cx).is_error());
        assert!(tool.execute(&json!({"todos": [1]}), &cx).is_error());
        assert!(tool
            .execute(&json!({"todos": [{"status": "done"}]}), &cx)
            .is_error());
        assert_eq!(tool.rendered(), "[ ] a");
    }
}
