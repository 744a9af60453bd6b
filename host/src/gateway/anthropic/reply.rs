//! A Messages reply read into one view (its text blocks' text, joined; its
//! `tool_use` blocks as tool calls) and written back with what the seams
//! decided: a rewritten text in the block it was in, a rewritten call's
//! `input` at its place, a refused call's `tool_use` block replaced by a
//! text block with its refusal line (block indexes stay contiguous), a
//! veto's notice as the reply's only text. `thinking` blocks and their
//! signatures, server-tool blocks, citations, `usage`, `stop_sequence` and
//! every unknown field are the upstream's, byte for byte; `stop_reason`
//! (`max_tokens` included) too, unless no call is left (`end_turn`).
//!
//! A veto ends with `stop_reason: end_turn`, its notice the text: with
//! `refusal`, Claude Code shows its own usage-policy message instead of
//! the notice.

use super::super::views;
use super::super::wire::OneChoiceView;
use crate::agent::{CallVerdict, Choice, JudgedChoice};
use crate::jsondoc::{string_literal, Node, Splice};
use crate::types::{Arguments, ToolCall};
use std::ops::Range;

/// Where a reply's texts and calls live.
#[derive(Debug, Clone)]
pub(in crate::gateway) struct View {
    /// The `content` array, and how many blocks it holds.
    content: Range<usize>,
    blocks: usize,
    /// Each text block's `text` string, and its text.
    texts: Vec<(Range<usize>, String)>,
    /// Each `tool_use` block, and its `input`.
    calls: Vec<(Range<usize>, Range<usize>)>,
    /// The `stop_reason` value.
    stop_reason: Option<Range<usize>>,
}

/// A text block holding `text`, as the wire writes it.
pub(in crate::gateway) fn text_block(text: &str) -> String {
    format!(r#"{{"type":"text","text":{}}}"#, string_literal(text))
}

impl OneChoiceView for View {
    /// Reads a Messages reply: an error when it is not one (no `content`
    /// array, a block that cannot be read).
    fn read(src: &[u8], root: &Node) -> Result<(Self, Choice), String> {
        let content = root
            .get(src, "content")
            .filter(|n| n.as_array().is_some())
            .ok_or("the upstream's reply has no `content` array")?;
        let mut choice = Choice::default();
        let mut read = View {
            content: content.span.clone(),
            blocks: content.as_array().map_or(0, <[Node]>::len),
            texts: Vec::new(),
            calls: Vec::new(),
            stop_reason: root.get(src, "stop_reason").map(|n| n.span.clone()),
        };
        for (at, block) in content.as_array().unwrap_or_default().iter().enumerate() {
            let kind = block
                .get(src, "type")
                .and_then(|t| t.text(src))
                .ok_or_else(|| format!("the upstream's content[{at}] has no `type`"))?;
            match kind.as_ref() {
                "text" => {
                    let node = block
                        .get(src, "text")
                        .ok_or_else(|| format!("the upstream's content[{at}] has no `text`"))?;
                    let text = views::text(src, node).ok_or_else(|| {
                        format!("the upstream's content[{at}].text is not a string")
                    })?;
                    choice.content.push_str(&text);
                    read.texts.push((node.span.clone(), text));
                }
                "tool_use" => {
                    let id = block
                        .get(src, "id")
                        .and_then(|n| n.text(src))
                        .ok_or_else(|| format!("the upstream's content[{at}] has no `id`"))?;
                    let name = block
                        .get(src, "name")
                        .and_then(|n| n.text(src))
                        .ok_or_else(|| format!("the upstream's content[{at}] has no `name`"))?;
                    let input = block
                        .get(src, "input")
                        .ok_or_else(|| format!("the upstream's content[{at}] has no `input`"))?;
                    let arguments = Arguments::from_json(&String::from_utf8_lossy(input.raw(src)))
                        .map_err(|e| format!("the upstream's content[{at}].input: {e}"))?;
                    choice.tool_calls.push(ToolCall {
                        id: id.into_owned(),
                        name: name.into_owned(),
                        arguments,
                    });
                    read.calls.push((block.span.clone(), input.span.clone()));
                }
                _ => {}
            }
        }
        Ok((read, choice))
    }

    /// See the module docs; an error only when the edits cannot be
    /// rendered (a bug, never the peer's).
    fn write(&self, src: &[u8], choice: &Choice, judged: &JudgedChoice) -> Result<Vec<u8>, String> {
        let mut splice = Splice::new();
        if judged.vetoed_by.is_some() {
            splice.replace(
                self.content.clone(),
                format!("[{}]", text_block(&judged.content)),
            );
            if let Some(span) = &self.stop_reason {
                splice.replace(span.clone(), string_literal("end_turn"));
            }
            return splice
                .render(src)
                .map_err(|e| format!("cannot write the reply: {e}"));
        }
        if judged.content != choice.content {
            let pieces: Vec<String> = self.texts.iter().map(|(_, text)| text.clone()).collect();
            if pieces.is_empty() {
                // Text where the model wrote none: a block of its own, first.
                let comma = if self.blocks == 0 { "" } else { "," };
                splice.replace(
                    self.content.start + 1..self.content.start + 1,
                    format!("{}{comma}", text_block(&judged.content)),
                );
            } else {
                for ((span, old), new) in self
                    .texts
                    .iter()
                    .zip(views::redistribute(&pieces, &judged.content))
                {
                    if *old != new {
                        splice.replace(span.clone(), string_literal(&new));
                    }
                }
            }
        }
        let mut kept = 0;
        for ((block, input), (before, verdict)) in self
            .calls
            .iter()
            .zip(choice.tool_calls.iter().zip(&judged.calls))
        {
            match verdict {
                CallVerdict::Pass(after) => {
                    kept += 1;
                    if after.arguments.as_str() != before.arguments.as_str() {
                        let value = after.arguments.parse();
                        let object = if value.is_object() {
                            value
                        } else {
                            serde_json::json!({ "value": value })
                        };
                        splice.replace(input.clone(), object.to_string());
                    }
                }
                CallVerdict::Refused(_, line) => splice.replace(block.clone(), text_block(line)),
            }
        }
        if kept == 0 && !self.calls.is_empty() {
            if let Some(span) = &self.stop_reason {
                splice.replace(span.clone(), string_literal("end_turn"));
            }
        }
        splice
            .render(src)
            .map_err(|e| format!("cannot write the reply: {e}"))
    }
}
