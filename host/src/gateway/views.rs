//! Views of a client's document: the host's messages and tools read out of
//! it, each text knowing where in the document it lives, and the write-back
//! of what the seams changed.
//!
//! ```text
//!  body ─▶ jsondoc::parse ─▶ wire reader ─▶ RelayRequest (what the seams see)
//!                                       └─▶ Places (where each text came from)
//!  judged RelayRequest + Places ─▶ write-back ─▶ Splice on the body
//!      same shape: each changed text replaced at its place (nothing else moves)
//!      a new shape (a message added or dropped, a tool filtered out): that
//!      member re-encoded, unchanged messages and tools keeping their bytes
//! ```
//!
//! A wire reader says how its documents map to messages; the comparison
//! and the splicing are here, once.

use crate::jsondoc::{string_literal, Node, Splice};
use crate::types::{Arguments, ContentBlock, Message, ToolSchema};
use std::borrow::Cow;
use std::ops::Range;

/// Where one judged text of a message lives: the span of the JSON string
/// that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Slot {
    /// The message's `content`.
    Content(Range<usize>),
    /// Its block `index`'s text (a text block, a text part, a refusal).
    Block(usize, Range<usize>),
}

/// Where a tool call's arguments live, and how they are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ArgsSlot {
    /// A JSON string holding JSON text (chat completions'
    /// `function.arguments`).
    Text(Range<usize>),
    /// A JSON object (Messages' `tool_use.input`).
    Object(Range<usize>),
}

/// One host message read from the document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Placed {
    /// The wire message it came from (its index in the wire's array; for
    /// Messages' top-level `system`, `usize::MAX`).
    pub(super) wire: usize,
    /// Where each of its texts lives.
    pub(super) slots: Vec<Slot>,
    /// Where each tool call's arguments live, in call order.
    pub(super) calls: Vec<ArgsSlot>,
}

/// One tool read from the document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PlacedTool {
    /// The tool's whole value.
    pub(super) value: Range<usize>,
    /// Its description's string, when it has one.
    pub(super) description: Option<Range<usize>>,
}

/// Whether two messages have the same shape: the seams changed at most
/// their texts and their calls' arguments.
pub(super) fn same_shape(before: &Message, after: &Message) -> bool {
    before.role == after.role
        && before.tool_call_id == after.tool_call_id
        && before.name == after.name
        && before.blocks.len() == after.blocks.len()
        && before
            .blocks
            .iter()
            .zip(&after.blocks)
            .all(|(a, b)| a.kind == b.kind && a.data_json() == b.data_json())
        && before.tool_calls.len() == after.tool_calls.len()
        && before
            .tool_calls
            .iter()
            .zip(&after.tool_calls)
            .all(|(a, b)| a.id == b.id && a.name == b.name)
}

/// Whether every message kept its shape.
pub(super) fn all_same_shape(before: &[Message], after: &[Message]) -> bool {
    before.len() == after.len() && before.iter().zip(after).all(|(a, b)| same_shape(a, b))
}

/// The edits that write `after`'s texts and arguments over `before`'s, at
/// the places `placed` says (every message of the same shape).
pub(super) fn write_texts(
    splice: &mut Splice,
    before: &[Message],
    after: &[Message],
    placed: &[Placed],
) {
    for ((old, new), place) in before.iter().zip(after).zip(placed) {
        for slot in &place.slots {
            let (old_text, new_text, span) = match slot {
                Slot::Content(span) => (&old.content, &new.content, span),
                Slot::Block(index, span) => {
                    (&old.blocks[*index].text, &new.blocks[*index].text, span)
                }
            };
            if old_text != new_text {
                splice.replace(span.clone(), string_literal(new_text));
            }
        }
        for ((old_call, new_call), slot) in
            old.tool_calls.iter().zip(&new.tool_calls).zip(&place.calls)
        {
            if old_call.arguments.as_str() == new_call.arguments.as_str() {
                continue;
            }
            match slot {
                ArgsSlot::Text(span) => {
                    splice.replace(
                        span.clone(),
                        string_literal(&arguments_text(&new_call.arguments)),
                    );
                }
                ArgsSlot::Object(span) => {
                    let value = new_call.arguments.parse();
                    let object = if value.is_object() {
                        value
                    } else {
                        serde_json::json!({ "value": value })
                    };
                    splice.replace(span.clone(), object.to_string());
                }
            }
        }
    }
}

/// The edits that write a tool's changed description back; `false` when a
/// tool changed otherwise (added, dropped, renamed, its schema replaced),
/// so the list must be re-encoded.
pub(super) fn write_tools(
    splice: &mut Splice,
    before: &[ToolSchema],
    after: &[ToolSchema],
    placed: &[PlacedTool],
) -> bool {
    let same = before.len() == after.len()
        && before
            .iter()
            .zip(after)
            .all(|(a, b)| a.name == b.name && a.parameters == b.parameters);
    if !same {
        return false;
    }
    let mut edits = Vec::new();
    for ((old, new), place) in before.iter().zip(after).zip(placed) {
        if old.description == new.description {
            continue;
        }
        match &place.description {
            Some(span) => edits.push((span.clone(), string_literal(&new.description))),
            None => return false,
        }
    }
    for (span, text) in edits {
        splice.replace(span, text);
    }
    true
}

/// The raw bytes of the tools of `after` that are unchanged from
/// `before` (by name and value), and `encode` for the others: a tool list
/// re-encoded, each kept tool as the client wrote it.
pub(super) fn tools_array(
    src: &[u8],
    before: &[ToolSchema],
    after: &[ToolSchema],
    placed: &[PlacedTool],
    encode: impl Fn(&ToolSchema) -> Vec<u8>,
) -> Vec<u8> {
    let parts = after.iter().map(|tool| {
        before
            .iter()
            .position(|old| old == tool)
            .and_then(|at| placed.get(at))
            .map_or_else(|| encode(tool), |place| src[place.value.clone()].to_vec())
    });
    crate::jsondoc::array_from(parts.collect::<Vec<_>>())
}

/// The document with `splice` applied and the top-level `members` set: a
/// member given a value takes it (a new one is appended), a member given
/// `None` is dropped. When every member named exists and none is dropped,
/// each value is spliced in place and nothing else moves; otherwise the
/// top-level object is rebuilt, every other member keeping its bytes.
///
/// # Errors
///
/// One line when the edits overlap (a bug, never the client's).
pub(super) fn write_members(
    src: &[u8],
    root: &Node,
    mut splice: Splice,
    members: &[(String, Option<Vec<u8>>)],
) -> Result<Vec<u8>, String> {
    let in_place = members
        .iter()
        .all(|(key, value)| value.is_some() && root.get(src, key).is_some());
    if in_place {
        for (key, value) in members {
            if let (Some(node), Some(value)) = (root.get(src, key), value) {
                splice.replace(node.span.clone(), value.clone());
            }
        }
        return splice
            .render(src)
            .map_err(|e| format!("cannot write the request: {e}"));
    }
    let edited = splice
        .render(src)
        .map_err(|e| format!("cannot write the request: {e}"))?;
    let edited_root = crate::jsondoc::parse(&edited, &crate::jsondoc::Limits::default())
        .map_err(|e| format!("cannot write the request: {e}"))?;
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for (key, node) in edited_root.as_object().unwrap_or_default() {
        let name = key.text(&edited).into_owned();
        match members.iter().find(|(k, _)| *k == name) {
            Some((_, Some(value))) => out.push((name, value.clone())),
            Some((_, None)) => {}
            None => out.push((name, node.raw(&edited).to_vec())),
        }
    }
    for (key, value) in members {
        if let (Some(value), None) = (value, edited_root.get(&edited, key)) {
            out.push((key.clone(), value.clone()));
        }
    }
    Ok(crate::jsondoc::object_from(
        out.iter().map(|(k, v)| (k.as_str(), v.as_slice())),
    ))
}

/// `node` (an object of `src`) rebuilt with `set` applied: a member given
/// bytes takes them (a new one is appended), a member given `None` is
/// dropped, every other member keeps its bytes, in order.
pub(super) fn rebuild_object(src: &[u8], node: &Node, set: &[(&str, Option<Vec<u8>>)]) -> Vec<u8> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for (key, value) in node.as_object().unwrap_or_default() {
        let name = key.text(src).into_owned();
        match set.iter().find(|(k, _)| *k == name) {
            Some((_, Some(bytes))) => out.push((name, bytes.clone())),
            Some((_, None)) => {}
            None => out.push((name, value.raw(src).to_vec())),
        }
    }
    for (key, value) in set {
        if let (Some(bytes), None) = (value, node.get(src, key)) {
            out.push(((*key).to_owned(), bytes.clone()));
        }
    }
    crate::jsondoc::object_from(out.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
}

/// The node of `root` whose span is `span`.
pub(super) fn find<'a>(root: &'a Node, span: &Range<usize>) -> Option<&'a Node> {
    if root.span == *span {
        return Some(root);
    }
    let children: Box<dyn Iterator<Item = &Node>> = match &root.kind {
        crate::jsondoc::Kind::Array(items) => Box::new(items.iter()),
        crate::jsondoc::Kind::Object(members) => Box::new(members.iter().map(|(_, n)| n)),
        _ => return None,
    };
    children
        .filter(|child| child.span.start <= span.start && span.end <= child.span.end)
        .find_map(|child| find(child, span))
}

/// `pieces` (texts that were judged joined, with no separator) after the
/// joined text became `joined`: the change between the common prefix and
/// the common suffix goes to the first piece it touches, and the pieces
/// after it lose what it covered of them. One contiguous change (a
/// redaction) lands exactly where it was; several are merged into one
/// span, so the whole text is always right and only a block boundary
/// inside the changed span may move.
pub(super) fn redistribute(pieces: &[String], joined: &str) -> Vec<String> {
    let old: String = pieces.concat();
    if old == joined {
        return pieces.to_vec();
    }
    let (old_b, new_b) = (old.as_bytes(), joined.as_bytes());
    let mut prefix = old_b.iter().zip(new_b).take_while(|(a, b)| a == b).count();
    while !old.is_char_boundary(prefix) || !joined.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let limit = old_b.len().min(new_b.len()) - prefix;
    let mut suffix = old_b
        .iter()
        .rev()
        .zip(new_b.iter().rev())
        .take(limit)
        .take_while(|(a, b)| a == b)
        .count();
    while !old.is_char_boundary(old_b.len() - suffix)
        || !joined.is_char_boundary(new_b.len() - suffix)
    {
        suffix -= 1;
    }
    let (old_end, middle) = (old_b.len() - suffix, &joined[prefix..new_b.len() - suffix]);
    let bounds: Vec<(usize, usize)> = pieces
        .iter()
        .scan(0, |at, piece| {
            let start = *at;
            *at += piece.len();
            Some((start, *at))
        })
        .collect();
    let owner = bounds
        .iter()
        .position(|&(start, end)| start <= prefix && prefix < end)
        .unwrap_or(pieces.len().saturating_sub(1));
    pieces
        .iter()
        .zip(&bounds)
        .enumerate()
        .map(|(index, (piece, &(start, end)))| {
            let head = prefix.clamp(start, end) - start;
            let tail = old_end.clamp(start, end) - start;
            let mut text = piece[..head].to_owned();
            if index == owner {
                text.push_str(middle);
            }
            text.push_str(&piece[tail..]);
            text
        })
        .collect()
}

/// A request's `model`: a non-empty string.
///
/// # Errors
///
/// One line when it is missing or not one.
pub(super) fn model_of(src: &[u8], root: &Node) -> Result<String, String> {
    match root.get(src, "model") {
        Some(node) => match node.text(src) {
            Some(model) if !model.is_empty() => Ok(model.into_owned()),
            _ => Err("`model` must be a non-empty string".to_owned()),
        },
        None => Err("`model` is required".to_owned()),
    }
}

/// A request's `tools` (none when missing or null), each read by `tool`.
///
/// # Errors
///
/// One line naming the tool that cannot be read.
pub(super) fn tools_of(
    src: &[u8],
    root: &Node,
    tool: impl Fn(&[u8], &Node) -> Result<(ToolSchema, PlacedTool), String>,
) -> Result<(Vec<ToolSchema>, Vec<PlacedTool>), String> {
    match root.get(src, "tools") {
        None => Ok((Vec::new(), Vec::new())),
        Some(node) if node.is_null() => Ok((Vec::new(), Vec::new())),
        Some(node) => match node.as_array() {
            Some(tools) => Ok(tools
                .iter()
                .enumerate()
                .map(|(index, one)| tool(src, one).map_err(|e| format!("tools[{index}]: {e}")))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .unzip()),
            None => Err("`tools` must be an array".to_owned()),
        },
    }
}

/// Checks a request's `stream`: a boolean, or none.
///
/// # Errors
///
/// One line when it is something else.
pub(super) fn check_stream(src: &[u8], root: &Node) -> Result<(), String> {
    match root.get(src, "stream") {
        Some(node) if !node.is_null() && node.as_bool().is_none() => {
            Err("`stream` must be a boolean".to_owned())
        }
        _ => Ok(()),
    }
}

/// Every top-level member but the `read` ones, as the envelope's `kwargs`.
pub(super) fn kwargs_of(
    src: &[u8],
    members: &[(crate::jsondoc::Key, Node)],
    read: &[&str],
) -> serde_json::Map<String, serde_json::Value> {
    let mut kwargs = serde_json::Map::new();
    for (key, node) in members {
        if read.iter().any(|k| key.is(src, k)) {
            continue;
        }
        kwargs.insert(key.text(src).into_owned(), node.to_value(src));
    }
    kwargs
}

/// The top-level members the seams changed in the envelope: the `model`,
/// and each of the `kwargs` set, changed or dropped.
pub(super) fn envelope_changes(
    before: &crate::agent::RelayRequest,
    judged: &crate::agent::RelayRequest,
) -> Vec<(String, Option<Vec<u8>>)> {
    let mut members: Vec<(String, Option<Vec<u8>>)> = Vec::new();
    if judged.model != before.model {
        members.push((
            "model".to_owned(),
            Some(string_literal(&judged.model).into_bytes()),
        ));
    }
    for (key, value) in &judged.kwargs {
        if before.kwargs.get(key) != Some(value) {
            members.push((key.clone(), Some(value.to_string().into_bytes())));
        }
    }
    for key in before.kwargs.keys() {
        if !judged.kwargs.contains_key(key) {
            members.push((key.clone(), None));
        }
    }
    members
}

/// A part or an item the seams do not read, as a block of `kind` holding
/// its bytes (kept as written; named in the audit line as not judged).
pub(super) fn opaque_block(src: &[u8], node: &Node, kind: &str) -> ContentBlock {
    ContentBlock {
        kind: kind.to_owned(),
        text: String::new(),
        data: serde_json::value::RawValue::from_string(
            String::from_utf8_lossy(node.raw(src)).into_owned(),
        )
        .ok(),
    }
}

/// A message's content (`node`) read into `message`, its texts' places
/// into `place`: a string is its content; each element of an array is a
/// block `part` reads (given the block index it will have), named in an
/// error as `field[i]`. Anything else is the error `wrong` says.
///
/// # Errors
///
/// One line naming what cannot be read.
pub(super) fn read_content(
    src: &[u8],
    node: &Node,
    field: &str,
    (message, place): (&mut Message, &mut Placed),
    part: impl Fn(&Node, usize) -> Result<(ContentBlock, Option<Slot>), String>,
    wrong: impl FnOnce() -> String,
) -> Result<(), String> {
    match &node.kind {
        crate::jsondoc::Kind::String { .. } => {
            message.content = text(src, node).unwrap_or_default();
            place.slots.push(Slot::Content(node.span.clone()));
        }
        crate::jsondoc::Kind::Array(parts) => {
            for (at, one) in parts.iter().enumerate() {
                let (block, slot) =
                    part(one, message.blocks.len()).map_err(|e| format!("{field}[{at}]: {e}"))?;
                message.blocks.push(block);
                place.slots.extend(slot);
            }
        }
        _ => return Err(wrong()),
    }
    Ok(())
}

/// One content part (a `noun` to the client): a text block with its
/// place, at block `index`, when `field` names the member holding its text
/// (by the part's `type`); any other as a block of its type with no text,
/// kept as written.
///
/// # Errors
///
/// One line when it is not an object, has no `type`, or its text is
/// missing or not a string.
pub(super) fn part_of(
    src: &[u8],
    part: &Node,
    noun: &str,
    field: fn(&str) -> Option<&'static str>,
    index: usize,
) -> Result<(ContentBlock, Option<Slot>), String> {
    if part.as_object().is_none() {
        return Err(format!("a {noun} must be an object"));
    }
    let kind = member_text(src, part, "type").ok_or_else(|| format!("a {noun} needs a `type`"))?;
    let Some(field) = field(&kind) else {
        return Ok((opaque_block(src, part, &kind), None));
    };
    let node = part
        .get(src, field)
        .ok_or_else(|| format!("a {kind} part needs `{field}`"))?;
    let text = text(src, node).ok_or_else(|| format!("`{field}` must be a string"))?;
    Ok((
        ContentBlock::text(text),
        Some(Slot::Block(index, node.span.clone())),
    ))
}

/// A message's text: its content, or its text blocks joined by lines.
pub(super) fn joined_text(message: &Message) -> String {
    if message.blocks.is_empty() {
        return message.content.clone();
    }
    message
        .blocks
        .iter()
        .filter(|b| b.kind == "text")
        .map(|b| b.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Arguments text as the model wrote it: JSON, or (text that is not) a
/// JSON string holding it, so it is judged and sent as it was.
pub(super) fn arguments_of(text: &str) -> Arguments {
    Arguments::from_json(text)
        .unwrap_or_else(|_| Arguments::from_value(&serde_json::Value::String(text.to_owned())))
}

/// The text a call's arguments string carries for `arguments` (a string
/// the model wrote that was not JSON goes back as it was).
pub(super) fn arguments_text(arguments: &Arguments) -> String {
    match arguments.parse() {
        serde_json::Value::String(text) if Arguments::from_json(&text).is_err() => text,
        _ => arguments.as_str().to_owned(),
    }
}

/// The tokens of a `usage` object (`input_tokens`, `output_tokens`: a
/// Messages reply's or stream event's, a Responses reply's); what it
/// leaves out is 0.
pub(super) fn usage_of(src: &[u8], usage: Option<&Node>) -> crate::providers::Usage {
    let count = |name: &str| {
        usage
            .and_then(|u| u.get(src, name))
            .and_then(|n| n.as_u64(src))
            .unwrap_or(0)
    };
    crate::providers::Usage {
        input_tokens: count("input_tokens"),
        output_tokens: count("output_tokens"),
    }
}

/// The text of a JSON string node, or `None` for any other kind.
pub(super) fn text(src: &[u8], node: &Node) -> Option<String> {
    node.text(src).map(Cow::into_owned)
}

/// The text of `node`'s member `name`, when it has one that is a string.
pub(super) fn member_text<'a>(src: &'a [u8], node: &Node, name: &str) -> Option<Cow<'a, str>> {
    node.get(src, name).and_then(|n| n.text(src))
}

/// [`member_text`] of a node parsed from `data` (text: read with
/// [`Node::text_in`], not checked for UTF-8 again); empty when there is
/// none.
pub(super) fn member_text_in<'a>(data: &'a str, node: &Node, name: &str) -> Cow<'a, str> {
    node.get(data.as_bytes(), name)
        .and_then(|n| n.text_in(data))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ContentBlock;

    #[test]
    fn only_the_changed_texts_are_written_back_at_their_places() {
        let src = br#"{"a":"one","b":["two","three"]}"#;
        let before = vec![Message {
            blocks: vec![ContentBlock::text("two"), ContentBlock::text("three")],
            ..Message::user("one")
        }];
        let mut after = before.clone();
        after[0].blocks[1].text = "THREE".to_owned();
        let placed = [Placed {
            wire: 0,
            slots: vec![
                Slot::Content(5..10),
                Slot::Block(0, 16..21),
                Slot::Block(1, 22..29),
            ],
            calls: Vec::new(),
        }];
        assert!(all_same_shape(&before, &after));
        let mut splice = Splice::new();
        write_texts(&mut splice, &before, &after, &placed);
        assert_eq!(
            splice.render(src).unwrap(),
            br#"{"a":"one","b":["two","THREE"]}"#
        );
    }

    #[test]
    fn a_change_of_joined_pieces_lands_in_the_piece_it_was_in() {
        let pieces = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let three = pieces(&["mail bob@x.org ", "then ", "call 555"]);
        assert_eq!(
            redistribute(&three, "mail [REDACTED] then call 555"),
            pieces(&["mail [REDACTED] ", "then ", "call 555"])
        );
        assert_eq!(
            redistribute(&three, "mail bob@x.org then call [N]"),
            pieces(&["mail bob@x.org ", "then ", "call [N]"])
        );
        // A change across two pieces goes to the first; the text is whole.
        let across = redistribute(&three, "mail bob@x.org [GONE]call 555");
        assert_eq!(across.concat(), "mail bob@x.org [GONE]call 555");
        assert_eq!(across[2], "call 555");
        assert_eq!(redistribute(&three, &three.concat()), three);
        // Text added at the very end.
        assert_eq!(redistribute(&pieces(&["a", "b"]), "ab!").concat(), "ab!");
    }

    #[test]
    fn a_message_added_or_a_block_dropped_is_a_new_shape() {
        let before = vec![Message::user("a")];
        let mut longer = before.clone();
        longer.push(Message::user("b"));
        assert!(!all_same_shape(&before, &longer));
        let blocks = vec![Message {
            blocks: vec![ContentBlock::text("x")],
            ..Message::user("")
        }];
        let mut fewer = blocks.clone();
        fewer[0].blocks.clear();
        assert!(!all_same_shape(&blocks, &fewer));
    }
}
