//! A Responses reply read into one view (the `output_text` and `refusal`
//! parts of its `message` items, joined; its `function_call` and
//! `custom_tool_call` items as tool calls) and written back with what the
//! seams decided: a rewritten text in the part it was in, a rewritten
//! call's `arguments` (`input`) at its place, a refused call's item
//! replaced by a `message` item of its refusal line at the same place, a
//! veto's notice as the only `message` item (after the items it did not
//! judge). `reasoning` items and their `encrypted_content`, built-in
//! tools' items, annotations, `usage`, `status` and every unknown member
//! are the upstream's, byte for byte.

use super::super::views;
use super::super::wire::OneChoiceView;
use crate::agent::{CallVerdict, Choice, JudgedChoice};
use crate::jsondoc::{array_from, string_literal, Node, Splice};
use crate::types::ToolCall;
use serde_json::{json, Value};
use std::ops::Range;

/// What one output item is to the gateway.
#[derive(Debug, Clone)]
enum Item {
    /// A `message`: each text part's string.
    Message(Vec<Range<usize>>),
    /// A call: its arguments' (input's) string.
    Call(Range<usize>),
    /// Anything else (of this type): the upstream's.
    Other(String),
}

/// Where a reply's texts and calls live, and what it carries that no pack
/// reads.
#[derive(Debug, Clone)]
pub(in crate::gateway) struct View {
    /// The `output` array.
    output: Range<usize>,
    /// Each output item: its span and what it is.
    items: Vec<(Range<usize>, Item)>,
    /// Each text part's text, in order.
    pieces: Vec<String>,
    /// The response's `id`.
    id: Option<String>,
}

/// Which member of a call item holds what the model proposed: a
/// function's `arguments`, a custom tool's `input`.
pub(super) fn call_field(kind: &str) -> Option<&'static str> {
    match kind {
        "function_call" => Some("arguments"),
        "custom_tool_call" => Some("input"),
        _ => None,
    }
}

/// Which member of a content part holds its text, for the parts the
/// seams read.
pub(super) fn part_field(kind: &str) -> Option<&'static str> {
    match kind {
        "output_text" => Some("text"),
        "refusal" => Some("refusal"),
        _ => None,
    }
}

impl OneChoiceView for View {
    /// Reads a `response` object: an error when it is not one (no
    /// `output` array, an item or a part that cannot be read).
    fn read(src: &[u8], root: &Node) -> Result<(Self, Choice), String> {
        let output = root
            .get(src, "output")
            .filter(|n| n.as_array().is_some())
            .ok_or("the upstream's reply has no `output` array")?;
        let mut choice = Choice::default();
        let mut read = View {
            output: output.span.clone(),
            items: Vec::new(),
            pieces: Vec::new(),
            id: root.get(src, "id").and_then(|n| views::text(src, n)),
        };
        for (at, item) in output.as_array().unwrap_or_default().iter().enumerate() {
            let read_item = item_of(src, item, &mut read, &mut choice)
                .map_err(|e| format!("the upstream's output[{at}]: {e}"))?;
            read.items.push((item.span.clone(), read_item));
        }
        Ok((read, choice))
    }

    /// See the module docs; an error only when the edits cannot be
    /// rendered (a bug, never the peer's).
    fn write(&self, src: &[u8], choice: &Choice, judged: &JudgedChoice) -> Result<Vec<u8>, String> {
        let mut splice = Splice::new();
        let render = |splice: Splice| {
            splice
                .render(src)
                .map_err(|e| format!("cannot write the reply: {e}"))
        };
        if judged.vetoed_by.is_some() {
            let mut kept: Vec<Vec<u8>> = self
                .items
                .iter()
                .filter(|(_, item)| matches!(item, Item::Other(_)))
                .map(|(span, _)| src[span.clone()].to_vec())
                .collect();
            kept.push(
                message_item(&new_item_id(), &judged.content, "completed")
                    .to_string()
                    .into_bytes(),
            );
            splice.replace(self.output.clone(), array_from(&kept));
            return render(splice);
        }
        let mut texts = self.items.iter().flat_map(|(_, item)| match item {
            Item::Message(texts) => texts.as_slice(),
            _ => &[],
        });
        if judged.content != choice.content {
            if self.pieces.is_empty() {
                // Text where the model wrote none: an item of its own, first.
                let comma = if self.items.is_empty() { "" } else { "," };
                let item = message_item(&new_item_id(), &judged.content, "completed");
                splice.replace(
                    self.output.start + 1..self.output.start + 1,
                    format!("{item}{comma}"),
                );
            } else {
                for ((span, old), new) in texts
                    .by_ref()
                    .zip(&self.pieces)
                    .zip(views::redistribute(&self.pieces, &judged.content))
                {
                    if *old != new {
                        splice.replace(span.clone(), string_literal(&new));
                    }
                }
            }
        }
        let calls = self.items.iter().filter_map(|(span, item)| match item {
            Item::Call(arguments) => Some((span, arguments)),
            _ => None,
        });
        for ((item, arguments), (before, verdict)) in
            calls.zip(choice.tool_calls.iter().zip(&judged.calls))
        {
            match verdict {
                CallVerdict::Pass(after) => {
                    if after.arguments.as_str() != before.arguments.as_str() {
                        splice.replace(
                            arguments.clone(),
                            string_literal(&views::arguments_text(&after.arguments)),
                        );
                    }
                }
                CallVerdict::Refused(_, line) => splice.replace(
                    item.clone(),
                    message_item(&new_item_id(), line, "completed").to_string(),
                ),
            }
        }
        render(splice)
    }

    /// The type of each item no pack reads.
    fn unjudged(&self) -> Vec<&str> {
        self.items
            .iter()
            .filter_map(|(_, item)| match item {
                Item::Other(kind) => Some(kind.as_str()),
                _ => None,
            })
            .collect()
    }

    fn reply_id(&self) -> Option<String> {
        self.id.clone()
    }
}

/// One output item: what it is, its texts and calls joining `choice`.
fn item_of(src: &[u8], item: &Node, read: &mut View, choice: &mut Choice) -> Result<Item, String> {
    let kind = item
        .get(src, "type")
        .and_then(|t| t.text(src))
        .ok_or("an item needs a `type`")?;
    if kind == "message" {
        let mut texts = Vec::new();
        let content = item
            .get(src, "content")
            .and_then(Node::as_array)
            .ok_or("a message needs a `content` array")?;
        for part in content {
            let part_kind = part
                .get(src, "type")
                .and_then(|t| t.text(src))
                .ok_or("a part needs a `type`")?;
            let Some(field) = part_field(&part_kind) else {
                continue;
            };
            let node = part
                .get(src, field)
                .ok_or_else(|| format!("a {part_kind} part needs `{field}`"))?;
            let text =
                views::text(src, node).ok_or_else(|| format!("`{field}` must be a string"))?;
            choice.content.push_str(&text);
            read.pieces.push(text);
            texts.push(node.span.clone());
        }
        return Ok(Item::Message(texts));
    }
    let Some(field) = call_field(&kind) else {
        return Ok(Item::Other(kind.into_owned()));
    };
    let text_of = |name: &str| {
        item.get(src, name)
            .and_then(|n| views::text(src, n))
            .ok_or_else(|| format!("a {kind} needs `{name}` as a string"))
    };
    let node = item
        .get(src, field)
        .ok_or_else(|| format!("a {kind} needs `{field}`"))?;
    let arguments = views::text(src, node).ok_or_else(|| format!("`{field}` must be a string"))?;
    choice.tool_calls.push(ToolCall {
        id: text_of("call_id")?,
        name: text_of("name")?,
        arguments: views::arguments_of(&arguments),
    });
    Ok(Item::Call(node.span.clone()))
}

/// A whole assistant `message` item of one `output_text` part holding
/// `text` (a refusal line, a veto's notice, text the output seam added),
/// with item id `id` and `status`.
pub(super) fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({"id": id, "type": "message", "status": status, "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "text": text}]})
}

/// A fresh id for an item the gateway writes.
pub(super) fn new_item_id() -> String {
    format!("msg_chimera_{:016x}", fastrand::u64(..))
}
