//! Tools the scenarios use: `echo`, `dangerous_delete`, and fixed-output tools.

use chimera_host::tools::{Tool, ToolContext, ToolError};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `echo(message)` → `Echo: <message>`.
pub struct Echo;

impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Echoes its message."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})
    }
    fn execute(&self, arguments: &Value, _cx: &ToolContext<'_>) -> Result<String, ToolError> {
        Ok(format!(
            "Echo: {}",
            arguments["message"].as_str().unwrap_or_default()
        ))
    }
}

/// `dangerous_delete()`: records that it ran, answers `deleted everything`.
#[derive(Default, Clone)]
pub struct Dangerous {
    /// Set when it ran.
    pub ran: Arc<AtomicBool>,
}

impl Dangerous {
    /// Whether it ran.
    pub fn ran(&self) -> bool {
        self.ran.load(Ordering::SeqCst)
    }
}

impl Tool for Dangerous {
    fn name(&self) -> &str {
        "dangerous_delete"
    }
    fn description(&self) -> &str {
        "Deletes everything."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn execute(&self, _arguments: &Value, _cx: &ToolContext<'_>) -> Result<String, ToolError> {
        self.ran.store(true, Ordering::SeqCst);
        Ok("deleted everything".to_owned())
    }
}

/// A tool named `name` that always returns `output`.
pub struct Fixed {
    /// Tool name.
    pub name: &'static str,
    /// Its output.
    pub output: &'static str,
}

impl Tool for Fixed {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Returns a fixed text."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn execute(&self, _arguments: &Value, _cx: &ToolContext<'_>) -> Result<String, ToolError> {
        Ok(self.output.to_owned())
    }
}
