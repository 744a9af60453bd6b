//! A chat-completions reply read into one view per choice (its text or
//! refusal, its tool calls) and written back with what the seams decided:
//! a rewritten text at its place, a rewritten call's arguments at theirs,
//! a refused call dropped with its refusal line joining the text, a veto's
//! notice as the text with `finish_reason: content_filter`. Everything
//! else — the id, `usage`, `system_fingerprint`, logprobs, annotations,
//! every other choice's members and an untouched `finish_reason`
//! (`length` included) — is the upstream's, byte for byte.

use super::super::views;
use super::super::views::{arguments_of, arguments_text};
use super::super::wire::ReplyView;
use crate::agent::{CallVerdict, Choice, JudgedChoice};
use crate::jsondoc::{array_from, string_literal, Node, Splice};
use crate::providers::Usage;
use crate::types::ToolCall;
use std::ops::Range;

/// One choice read.
#[derive(Debug, Clone)]
pub(in crate::gateway) struct ReadChoice {
    /// What the seams see.
    pub(in crate::gateway) choice: Choice,
    /// The choice's `message` object.
    message: Range<usize>,
    /// Where its text is: `message.content` (or `message.refusal` when it
    /// has no content), when it is a string.
    text: Option<Range<usize>>,
    /// Each call's element in `message.tool_calls`, and its arguments.
    calls: Vec<(Range<usize>, Range<usize>)>,
    /// The `finish_reason` value.
    finish_reason: Option<Range<usize>>,
}

/// A reply read.
#[derive(Debug, Clone)]
pub(in crate::gateway) struct ReadReply {
    /// Each choice, in order.
    pub(in crate::gateway) choices: Vec<ReadChoice>,
    /// The tokens the upstream reported.
    pub(in crate::gateway) usage: Usage,
}

impl ReplyView for ReadReply {
    fn read(src: &[u8], root: &Node) -> Result<Self, String> {
        read(src, root)
    }

    fn choices(&self) -> Vec<Choice> {
        self.choices.iter().map(|c| c.choice.clone()).collect()
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn write(&self, src: &[u8], root: &Node, judged: &[JudgedChoice]) -> Result<Vec<u8>, String> {
        write(src, root, self, judged)
    }
}

/// Reads a `chat.completion` (`root` parsed from `src`).
///
/// # Errors
///
/// One line when it is not one (no `choices` array, a choice without a
/// `message` object, a call that cannot be read): such a reply is never
/// passed on unjudged.
fn read(src: &[u8], root: &Node) -> Result<ReadReply, String> {
    let choices = root
        .get(src, "choices")
        .and_then(Node::as_array)
        .ok_or("the upstream's reply has no `choices` array")?;
    let mut read = Vec::with_capacity(choices.len());
    for (at, choice) in choices.iter().enumerate() {
        read.push(
            choice_of(src, choice).map_err(|e| format!("the upstream's choices[{at}]: {e}"))?,
        );
    }
    Ok(ReadReply {
        choices: read,
        usage: usage_of(src, root),
    })
}

/// The `usage` of a completion or of a stream's last chunk.
pub(in crate::gateway) fn usage_of(src: &[u8], root: &Node) -> Usage {
    let count = |name: &str| {
        root.get(src, "usage")
            .and_then(|u| u.get(src, name))
            .and_then(|n| n.as_u64(src))
            .unwrap_or(0)
    };
    Usage {
        input_tokens: count("prompt_tokens"),
        output_tokens: count("completion_tokens"),
    }
}

fn choice_of(src: &[u8], choice: &Node) -> Result<ReadChoice, String> {
    let message = choice
        .get(src, "message")
        .filter(|m| m.as_object().is_some())
        .ok_or("a choice needs a `message` object")?;
    let mut text = None;
    let mut content = String::new();
    for field in ["content", "refusal"] {
        match message.get(src, field) {
            Some(node) if !node.is_null() => {
                content =
                    views::text(src, node).ok_or_else(|| format!("`{field}` must be a string"))?;
                text = Some(node.span.clone());
                break;
            }
            _ => {}
        }
    }
    let mut tool_calls = Vec::new();
    let mut calls = Vec::new();
    if let Some(list) = message.get(src, "tool_calls").filter(|n| !n.is_null()) {
        for (at, call) in list
            .as_array()
            .ok_or("`tool_calls` must be an array")?
            .iter()
            .enumerate()
        {
            let (read, arguments) =
                call_of(src, call, "call").map_err(|e| format!("tool_calls[{at}]: {e}"))?;
            tool_calls.push(read);
            calls.push((call.span.clone(), arguments));
        }
    }
    Ok(ReadChoice {
        choice: Choice {
            content,
            tool_calls,
            ..Choice::default()
        },
        message: message.span.clone(),
        text,
        calls,
        finish_reason: choice.get(src, "finish_reason").map(|n| n.span.clone()),
    })
}

/// One element of a message's `tool_calls` (a `noun` to the peer), and
/// where its arguments string lives.
///
/// # Errors
///
/// One line naming the member that is missing or not a string.
pub(super) fn call_of(
    src: &[u8],
    call: &Node,
    noun: &str,
) -> Result<(ToolCall, Range<usize>), String> {
    let id =
        views::member_text(src, call, "id").ok_or_else(|| format!("a {noun} needs an `id`"))?;
    let function = call
        .get(src, "function")
        .ok_or_else(|| format!("a {noun} needs `function`"))?;
    let name = views::member_text(src, function, "name")
        .ok_or_else(|| format!("a {noun} needs `function.name`"))?;
    let arguments = function
        .get(src, "arguments")
        .ok_or_else(|| format!("a {noun} needs `function.arguments`"))?;
    let text = views::text(src, arguments).ok_or("`function.arguments` must be a string")?;
    Ok((
        ToolCall {
            id: id.into_owned(),
            name: name.into_owned(),
            arguments: arguments_of(&text),
        },
        arguments.span.clone(),
    ))
}

/// The text a client reads for a judged choice: its text, then one line
/// per refused call.
pub(in crate::gateway) fn shown(judged: &JudgedChoice) -> String {
    let mut text = judged.content.clone();
    for verdict in &judged.calls {
        if let CallVerdict::Refused(_, line) = verdict {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(line);
        }
    }
    text
}

/// The reply with each choice's judgement written back (see the module
/// docs).
///
/// # Errors
///
/// One line when the edits cannot be rendered (a bug, never the peer's).
fn write(
    src: &[u8],
    root: &Node,
    read: &ReadReply,
    judged: &[JudgedChoice],
) -> Result<Vec<u8>, String> {
    let mut splice = Splice::new();
    for (choice, verdict) in read.choices.iter().zip(judged) {
        write_choice(src, root, &mut splice, choice, verdict)?;
    }
    splice
        .render(src)
        .map_err(|e| format!("cannot write the reply: {e}"))
}

fn write_choice(
    src: &[u8],
    root: &Node,
    splice: &mut Splice,
    read: &ReadChoice,
    judged: &JudgedChoice,
) -> Result<(), String> {
    let refused = judged
        .calls
        .iter()
        .any(|v| matches!(v, CallVerdict::Refused(..)));
    let vetoed = judged.vetoed_by.is_some();
    if !vetoed && !refused {
        if judged.content != read.choice.content {
            if let Some(span) = &read.text {
                splice.replace(span.clone(), string_literal(&judged.content));
            }
        }
        for ((_, arguments), (before, verdict)) in read
            .calls
            .iter()
            .zip(read.choice.tool_calls.iter().zip(&judged.calls))
        {
            if let CallVerdict::Pass(after) = verdict {
                if after.arguments.as_str() != before.arguments.as_str() {
                    splice.replace(
                        arguments.clone(),
                        string_literal(&arguments_text(&after.arguments)),
                    );
                }
            }
        }
        return Ok(());
    }
    // The message changes shape: rebuilt from its own members, each kept
    // as written but `content`, `refusal` and `tool_calls`.
    let message = views::find(root, &read.message).ok_or("the reply's message moved")?;
    let mut kept_calls: Vec<Vec<u8>> = Vec::new();
    if !vetoed {
        for ((element, arguments), (before, verdict)) in read
            .calls
            .iter()
            .zip(read.choice.tool_calls.iter().zip(&judged.calls))
        {
            if let CallVerdict::Pass(after) = verdict {
                let mut call = Splice::new();
                if after.arguments.as_str() != before.arguments.as_str() {
                    call.replace(
                        arguments.start - element.start..arguments.end - element.start,
                        string_literal(&arguments_text(&after.arguments)),
                    );
                }
                kept_calls.push(
                    call.render(&src[element.clone()])
                        .map_err(|e| format!("cannot write the reply: {e}"))?,
                );
            }
        }
    }
    let mut members: Vec<(String, Vec<u8>)> = Vec::new();
    let mut had_content = false;
    for (key, node) in message.as_object().unwrap_or_default() {
        let name = key.text(src).into_owned();
        match name.as_str() {
            "content" => {
                had_content = true;
                members.push((name, string_literal(&shown(judged)).into_bytes()));
            }
            "refusal" => {}
            "tool_calls" if kept_calls.is_empty() => {}
            "tool_calls" => members.push((name, array_from(&kept_calls))),
            _ => members.push((name, node.raw(src).to_vec())),
        }
    }
    if !had_content {
        members.push((
            "content".to_owned(),
            string_literal(&shown(judged)).into_bytes(),
        ));
    }
    splice.replace(
        read.message.clone(),
        crate::jsondoc::object_from(members.iter().map(|(k, v)| (k.as_str(), v.as_slice()))),
    );
    let finish = if vetoed {
        Some("content_filter")
    } else if kept_calls.is_empty() {
        Some("stop")
    } else {
        None
    };
    if let (Some(reason), Some(span)) = (finish, &read.finish_reason) {
        splice.replace(span.clone(), string_literal(reason));
    }
    Ok(())
}
