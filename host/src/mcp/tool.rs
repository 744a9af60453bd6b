//! One MCP tool as a tool of the session: offered as `SERVER__tool` with
//! the server's description and input schema, called with the model's
//! arguments, its result turned into the text the conversation records.
//!
//! What a server lists is checked before anything is offered: a tool
//! whose full name is not 1 to 64 letters, digits, `_` and `-` (what model
//! APIs take as a function name), that repeats a name, or whose input
//! schema is not a JSON object schema of at most [`MAX_SCHEMA_BYTES`] is
//! skipped with one line; descriptions are cut at
//! [`MAX_DESCRIPTION_CHARS`]; at most [`MAX_TOOLS`] are taken from one
//! server. A result longer than [`MAX_RESULT_BYTES`] is cut, saying so.

use super::connection::Server;
use super::view::View;
use crate::jsondoc::{parse, Limits};
use crate::tools::{Tool, ToolContext, ToolError};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::ServiceError;
use serde_json::Value;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

/// The most tools taken from one server.
pub const MAX_TOOLS: usize = 256;

/// The longest input schema offered, serialised.
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;

/// The longest description offered; longer ones are cut.
pub const MAX_DESCRIPTION_CHARS: usize = 4096;

/// The longest result kept; longer ones are cut.
pub const MAX_RESULT_BYTES: usize = 1 << 20;

/// The longest function name model APIs accept.
const MAX_NAME: usize = 64;

/// An MCP server's tool, as the session offers and calls it.
pub struct McpTool {
    server: Arc<Server>,
    /// `SERVER__tool`.
    name: String,
    /// The tool's own name, which the server is called with.
    remote: String,
    description: String,
    parameters: Value,
}

impl McpTool {
    /// The tool as its server listed it (name, description, input
    /// schema), as JSON: what a listing judgement reads.
    pub(super) fn listing(&self) -> Vec<u8> {
        serde_json::json!({
            "name": self.remote,
            "description": self.description,
            "inputSchema": self.parameters,
        })
        .to_string()
        .into_bytes()
    }

    /// Takes the description and input schema of `listing` (a judged
    /// [`listing`](Self::listing)).
    pub(super) fn relist(&mut self, listing: &Value) {
        if let Some(description) = listing.get("description").and_then(Value::as_str) {
            description.clone_into(&mut self.description);
        }
        if let Some(schema) = listing.get("inputSchema").filter(|s| s.is_object()) {
            self.parameters = schema.clone();
        }
    }

    /// Whether its server is still there.
    pub(super) fn is_offered(&self) -> bool {
        self.server.gone().is_none()
    }

    /// Waits for `call` on the shared runtime, at most `within`: `None`
    /// past it.
    fn wait(
        &self,
        call: CallToolRequestParams,
        within: Duration,
    ) -> Option<Result<CallToolResult, ServiceError>> {
        let peer = self.server.peer.clone();
        let (sender, receiver) = std::sync::mpsc::channel();
        self.server.handle.spawn(async move {
            let answer = tokio::time::timeout(within, peer.call_tool(call)).await;
            let _ = sender.send(answer.ok());
        });
        receiver.recv().ok().flatten()
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn offered(&self) -> bool {
        self.is_offered()
    }

    /// The call waits at most the interceptor's deadline (the session then
    /// records the timeout) or the server's call timeout (the server is
    /// then taken for hung: stopped, and its tools go away).
    fn stops_by_deadline(&self) -> bool {
        true
    }

    fn execute(&self, arguments: &Value, cx: &ToolContext<'_>) -> Result<String, ToolError> {
        let server = &self.server;
        if let Some(why) = server.gone() {
            return Err(ToolError::failed(format!(
                "MCP server {} is gone ({why}): {} can no longer be called",
                server.name, self.name
            )));
        }
        let arguments = match arguments {
            Value::Object(map) => Some(map.clone()),
            Value::Null => None,
            _ => {
                return Err(ToolError::InvalidArguments {
                    argument: None,
                    message: format!("the arguments of {} must be a JSON object", self.name),
                })
            }
        };
        let mut call = CallToolRequestParams::new(self.remote.clone());
        call.arguments = arguments;
        let interceptors_first = cx.deadline.is_some_and(|d| d < server.call_timeout);
        let within = cx
            .deadline
            .map_or(server.call_timeout, |d| d.min(server.call_timeout));
        match self.wait(call, within) {
            Some(Ok(result)) => from_result(&result),
            Some(Err(ServiceError::McpError(error))) => Err(ToolError::failed(format!(
                "MCP server {} refused the call: {}",
                server.name, error.message
            ))),
            Some(Err(error)) => {
                // The connection ended: what watches it says how (the
                // process's end, the garbage it sent) unless it cannot.
                if server.gone_within(Duration::from_secs(3)).is_none() {
                    server.go(format!("its connection failed ({error})"));
                }
                let why = server.gone().unwrap_or("its connection failed");
                Err(ToolError::failed(format!(
                    "MCP server {} is gone ({why}): the call was not answered",
                    server.name
                )))
            }
            None if interceptors_first => Err(ToolError::failed(format!(
                "MCP server {} did not answer within the call's deadline",
                server.name
            ))),
            None => {
                let why = format!(
                    "did not answer a call of {} within {} s",
                    self.remote,
                    within.as_secs()
                );
                server.go(why.clone());
                Err(ToolError::failed(format!(
                    "MCP server {} {why}; it was stopped",
                    server.name
                )))
            }
        }
    }
}

/// The tools of `listed` that may be offered, as tools of `server`; each
/// one skipped is one warning line.
pub(super) fn listed_tools(server: &Arc<Server>, listed: Vec<rmcp::model::Tool>) -> Vec<McpTool> {
    let mut seen = HashSet::new();
    let mut tools = Vec::new();
    let total = listed.len();
    for tool in listed.into_iter().take(MAX_TOOLS) {
        match offered(server, tool, &mut seen) {
            Ok(tool) => tools.push(tool),
            Err(why) => tracing::warn!("MCP server {}: {why}", server.name),
        }
    }
    if total > MAX_TOOLS {
        tracing::warn!(
            "MCP server {}: lists {total} tools; only the first {MAX_TOOLS} are offered",
            server.name
        );
    }
    tools
}

/// `tool` checked, as a tool of `server`; `seen` holds the names taken.
fn offered(
    server: &Arc<Server>,
    tool: rmcp::model::Tool,
    seen: &mut HashSet<String>,
) -> Result<McpTool, String> {
    let remote = tool.name.to_string();
    let shown = crate::types::terminal_safe(&remote);
    let name = format!("{}__{remote}", server.name);
    let fits = name.len() <= MAX_NAME
        && remote
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !remote.is_empty();
    if !fits {
        return Err(format!(
            "tool `{shown}` skipped: {}__TOOL must be at most {MAX_NAME} letters, digits, `_` and `-`",
            server.name
        ));
    }
    if !seen.insert(remote.clone()) {
        return Err(format!(
            "tool `{shown}` is listed twice; the second is skipped"
        ));
    }
    let parameters = Value::Object((*tool.input_schema).clone());
    let is_object_schema = parameters
        .get("type")
        .is_none_or(|kind| kind == &Value::String("object".to_owned()));
    if !is_object_schema {
        return Err(format!(
            "tool `{shown}` skipped: its input schema is not an object schema"
        ));
    }
    let size = serde_json::to_string(&parameters).map_or(usize::MAX, |s| s.len());
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "tool `{shown}` skipped: its input schema is {size} bytes, over the {MAX_SCHEMA_BYTES} taken"
        ));
    }
    let description = tool.description.as_deref().unwrap_or_default();
    let mut description: String = description.chars().take(MAX_DESCRIPTION_CHARS).collect();
    if description.len() < tool.description.as_deref().map_or(0, str::len) {
        description.push('…');
    }
    Ok(McpTool {
        server: Arc::clone(server),
        name,
        remote,
        description,
        parameters,
    })
}

/// The text the conversation records of `result`: what a model reads of
/// it ([`View::recorded_result`]: the text `chimera mcp guard` judges, but
/// for structured content that its content repeats).
/// An `isError` result is the call's error.
fn from_result(result: &CallToolResult) -> Result<String, ToolError> {
    let src = serde_json::to_vec(result).unwrap_or_default();
    let text = match parse(&src, &Limits::new().with_max_depth(super::MAX_DEPTH)) {
        Ok(root) => View::recorded_result(&src, &root).text(),
        Err(e) => format!("[a result this host cannot read: {e}]"),
    };
    let text = cut(text);
    if result.is_error == Some(true) {
        return Err(ToolError::failed(text));
    }
    Ok(text)
}

/// `text` cut at [`MAX_RESULT_BYTES`] (on a character boundary), saying so.
fn cut(mut text: String) -> String {
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    let total = text.len();
    let mut end = MAX_RESULT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    let _ = write!(text, "\n[cut: the result was {total} bytes; {end} kept]");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ContentBlock, ImageContent, TextContent};

    #[test]
    fn a_result_is_its_items_in_order_and_an_error_result_is_an_error() {
        let mut result = CallToolResult::success(vec![
            ContentBlock::Text(TextContent::new("first")),
            ContentBlock::Image(ImageContent::new("aGk=", "image/png")),
        ]);
        assert_eq!(
            from_result(&result).unwrap(),
            "first\n[image image/png, 4 bytes of base64]"
        );
        result.is_error = Some(true);
        assert_eq!(
            from_result(&result).unwrap_err().to_string(),
            "first\n[image image/png, 4 bytes of base64]"
        );
    }

    #[test]
    fn a_result_with_only_structured_content_is_its_json_and_a_huge_one_is_cut() {
        let mut result = CallToolResult::success(Vec::new());
        result.structured_content = Some(serde_json::json!({"sum": 3}));
        assert_eq!(from_result(&result).unwrap(), r#"{"sum":3}"#);
        let huge = "é".repeat(MAX_RESULT_BYTES);
        let kept = cut(huge);
        assert!(kept.len() < MAX_RESULT_BYTES + 100);
        assert!(kept.ends_with(" kept]"), "{}", &kept[kept.len() - 60..]);
    }
}
