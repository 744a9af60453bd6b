//! `chimera tools list [--json] [--mcp …]`: the tools a session offers
//! the model — the standard set, `bash` and `delegate`, then each MCP
//! server's (`[mcp.servers]` or `--mcp`, started for the listing and
//! stopped after it) as `NAME__tool` — each with its description and the
//! JSON schema of its arguments, exactly as `chimera run` offers them by
//! default (bash sandboxed). What a pack's `tool_call` interceptor sees as
//! a call's arguments follows these schemas.

use super::args::McpArgs;
use super::failure::Failure;
use super::mcp_servers::start_servers;
use chimera_host::tools::{DelegateTool, SubAgent, ToolContext, ToolSet};
use chimera_host::types::{terminal_safe, ToolSchema};
use serde_json::Value;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

/// `delegate`'s sub-agent for a listing: the tool is described, never run.
struct NotRun;

impl SubAgent for NotRun {
    fn run(&self, _task: &str, _cx: &ToolContext<'_>) -> Result<String, (String, String)> {
        Err((
            String::new(),
            "tools list describes delegate; it does not run it".to_owned(),
        ))
    }
}

/// The tools `chimera run` offers: the standard set (its `bash` is
/// sandboxed, as a run's is by default) and `delegate`.
fn built_in() -> ToolSet {
    let mut tools = ToolSet::standard();
    tools.insert(Arc::new(DelegateTool::new(Arc::new(NotRun))));
    tools
}

pub(crate) fn list(json: bool, mcp: &McpArgs, workspace: Option<&Path>) -> Result<(), Failure> {
    let dir = workspace.unwrap_or_else(|| Path::new("."));
    if !dir.is_dir() {
        return Err(Failure::usage(format!(
            "--workspace {}: not a directory",
            dir.display()
        )));
    }
    let servers = start_servers(mcp, dir)?;
    let mut tools = built_in();
    for tool in servers.tools() {
        tools.insert(tool);
    }
    let mut out = String::new();
    for schema in tools.schemas() {
        if json {
            let line = serde_json::to_string(&schema)
                .map_err(|e| Failure::run_failed(format!("cannot print {}: {e}", schema.name)))?;
            out.push_str(&line);
            out.push('\n');
        } else {
            readable(&mut out, &schema);
        }
    }
    print_stdout(&out);
    Ok(())
}

/// Writes `text` to standard output; a reader that went away (`| head`)
/// ends the output quietly, never with a panic.
pub(super) fn print_stdout(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

/// One tool, readable: its name, its description, then one line per
/// argument (`name: type, required — description`).
fn readable(out: &mut String, schema: &ToolSchema) {
    let _ = writeln!(out, "{}", schema.name);
    let _ = writeln!(out, "  {}", terminal_safe(&schema.description));
    let required: Vec<&str> = schema.parameters["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match schema.parameters["properties"].as_object() {
        Some(properties) if !properties.is_empty() => {
            let _ = writeln!(out, "  arguments:");
            for (name, property) in properties {
                let needed = if required.contains(&name.as_str()) {
                    ", required"
                } else {
                    ""
                };
                let _ = write!(out, "    {name}: {}{needed}", type_of(property));
                match property["description"].as_str() {
                    Some(text) => {
                        let _ = writeln!(out, " — {}", terminal_safe(text));
                    }
                    None => out.push('\n'),
                }
            }
        }
        _ => {
            let _ = writeln!(out, "  arguments: none");
        }
    }
    out.push('\n');
}

/// A schema's type in a few words: `string`, `integer`, `array of object`,
/// `one of "pending", "done"`.
fn type_of(schema: &Value) -> String {
    if let Some(choices) = schema["enum"].as_array() {
        let choices: Vec<String> = choices.iter().map(Value::to_string).collect();
        return format!("one of {}", choices.join(", "));
    }
    let names: Vec<&str> = match &schema["type"] {
        Value::String(name) => vec![name.as_str()],
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .filter(|name| *name != "null")
            .collect(),
        _ => Vec::new(),
    };
    match names.as_slice() {
        [] => "any".to_owned(),
        ["array"] => format!("array of {}", type_of(&schema["items"])),
        names => names.join(" or "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_type_is_said_in_a_few_words() {
        assert_eq!(type_of(&json!({"type": "string"})), "string");
        assert_eq!(type_of(&json!({"type": ["integer", "null"]})), "integer");
        assert_eq!(
            type_of(&json!({"type": "array", "items": {"type": "object"}})),
            "array of object"
        );
        assert_eq!(
            type_of(&json!({"type": "string", "enum": ["pending", "done"]})),
            r#"one of "pending", "done""#
        );
        assert_eq!(type_of(&json!({})), "any");
    }
}
