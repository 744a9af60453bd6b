//! One reply built from its streamed deltas: text pieces joined, tool
//! calls split across deltas (by index) put back together, the usage
//! the last one reported. The agent's stream path and the recorder
//! both assemble with it.

use super::{ModelResponse, StreamDelta, Usage};
use crate::types::ToolCall;
use std::collections::BTreeMap;

#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Builds one reply from its deltas.
#[derive(Default)]
pub(crate) struct Assembler {
    content: String,
    calls: BTreeMap<usize, PartialCall>,
    usage: Usage,
}

impl Assembler {
    /// Takes one delta; returns the text to show now, if any.
    pub(crate) fn push(&mut self, delta: StreamDelta) -> Option<String> {
        match delta {
            StreamDelta::Text(text) => {
                self.content.push_str(&text);
                Some(text)
            }
            StreamDelta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                let call = self.calls.entry(index).or_default();
                if id.is_some() {
                    call.id = id;
                }
                if let Some(name) = name {
                    call.name.push_str(&name);
                }
                call.arguments.push_str(&arguments);
                None
            }
            StreamDelta::Usage(usage) => {
                self.usage = usage;
                None
            }
        }
    }

    /// The assembled reply.
    pub(crate) fn finish(self) -> ModelResponse {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| ToolCall {
                id: call.id.unwrap_or_else(|| format!("call_{index}")),
                name: call.name,
                arguments: super::arguments_from_text(&call.arguments),
            })
            .collect();
        ModelResponse {
            content: self.content,
            tool_calls,
            usage: self.usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_and_tool_calls_split_across_deltas_are_assembled() {
        let mut assembler = Assembler::default();
        let deltas = [
            StreamDelta::Text("Let me ".into()),
            StreamDelta::ToolCall {
                index: 1,
                id: Some("b".into()),
                name: Some("think".into()),
                arguments: "{\"thou".into(),
            },
            StreamDelta::Text("look.".into()),
            StreamDelta::ToolCall {
                index: 0,
                id: Some("a".into()),
                name: Some("bash".into()),
                arguments: String::new(),
            },
            StreamDelta::ToolCall {
                index: 0,
                id: None,
                name: None,
                arguments: "{\"command\":".into(),
            },
            StreamDelta::ToolCall {
                index: 1,
                id: None,
                name: None,
                arguments: "ght\": \"x\"}".into(),
            },
            StreamDelta::ToolCall {
                index: 0,
                id: None,
                name: None,
                arguments: " \"ls\"}".into(),
            },
            StreamDelta::Usage(Usage {
                input_tokens: 3,
                output_tokens: 4,
            }),
        ];
        let shown: Vec<String> = deltas
            .into_iter()
            .filter_map(|d| assembler.push(d))
            .collect();
        assert_eq!(shown, ["Let me ", "look."]);
        let reply = assembler.finish();
        assert_eq!(reply.content, "Let me look.");
        assert_eq!(
            (
                reply.tool_calls[0].id.as_str(),
                reply.tool_calls[0].name.as_str()
            ),
            ("a", "bash")
        );
        assert_eq!(
            reply.tool_calls[0].arguments.parse(),
            json!({"command": "ls"})
        );
        assert_eq!(
            reply.tool_calls[1].arguments.parse(),
            json!({"thought": "x"})
        );
        assert_eq!(reply.usage.output_tokens, 4);
    }
}
