//! A Messages stream relayed (see [`events`](super::super::events)): each
//! event forwarded as it came when what it carries was released as it is.
//!
//! - `message_start` (with the prompt's `input_tokens`), `ping`, every
//!   `thinking` / `redacted_thinking` / server-tool block and its deltas
//!   (signatures included): as they came.
//! - A `text` block: each `text_delta` through the block's stream gate; a
//!   delta is forwarded as it came when the gate released exactly its
//!   text, else written with what was released (nothing when it held it);
//!   at `content_block_stop` the gate's final check releases what it held.
//! - A `tool_use` block: held, with everything after it, until the reply
//!   ends (`message_delta`). Then `model_response`, `tool_call` on each
//!   call and `output` judge the reply, and what was held goes out: a
//!   passed call as it came (or, rewritten, as one `input_json_delta` of
//!   its new input), a refused call as a text block of its refusal line at
//!   the same index, a veto's notice as a text block after the others.
//! - `message_delta` (its `stop_reason` the upstream's unless a veto or
//!   refusing every call made it `end_turn`, its usage as it came),
//!   `message_stop`.
//!
//! A stream that ends without `message_stop` ends with an `error` event.

use super::super::events::{sse, sse_bytes, EventRelay, EventWire, Judging, Step, Streamed};
use super::super::views::usage_of;
use super::super::wire::{Refusal, Wire};
use crate::agent::{AgentSession, CallVerdict, JudgedChoice, StreamGate};
use crate::jsondoc::{parse_str, string_literal, Limits, Node, Splice};
use crate::providers::sse::Event;
use crate::providers::Usage;
use crate::types::{Arguments, ToolCall};
use serde_json::json;
use std::collections::BTreeMap;

/// What one content block is to the relay.
enum Block {
    /// A text block: its gate, and what of it was sent.
    Text { gate: StreamGate, held: String },
    /// A `tool_use` block: its call so far, and its events as they came.
    Tool {
        id: String,
        name: String,
        input: String,
        events: Vec<String>,
    },
    /// Anything else: passed as it comes.
    Other,
}

/// The relay's state.
pub(in crate::gateway) struct Relay<'a> {
    judging: Judging<'a>,
    /// Blocks by index.
    blocks: Vec<(u64, Block)>,
    /// Events held behind a tool block (or everything, `hold_all`), in
    /// order: (the event, text a text delta released when it is written).
    queue: Vec<Queued>,
    /// The reply's text, as the gates left it, and as sent.
    text: String,
    sent: String,
    /// The next block index the client has not seen.
    next_index: u64,
    blocked: Option<crate::agent::StreamBlock>,
    usage: Usage,
}

/// A held event.
enum Queued {
    /// An event to write as it came.
    Raw(String),
    /// A text block's start, deltas and stop, written at the end with its
    /// released text.
    Text(u64),
    /// A tool block, written at the end as judged.
    Tool(u64),
}

impl EventWire for super::Anthropic {
    type Relay<'a> = Relay<'a>;

    fn start(judging: Judging<'_>) -> Relay<'_> {
        Relay {
            judging,
            blocks: Vec::new(),
            queue: Vec::new(),
            text: String::new(),
            sent: String::new(),
            next_index: 0,
            blocked: None,
            usage: Usage::default(),
        }
    }
}

impl EventRelay for Relay<'_> {
    const END: &'static str = "message_stop";

    fn session(&self) -> &AgentSession {
        self.judging.session
    }

    /// One upstream event (see the module docs).
    async fn on_event(&mut self, event: &Event) -> Result<Step, String> {
        if event.data.trim() == "[DONE]" {
            return Ok(Step::Go(String::new()));
        }
        let src = event.data.as_bytes();
        let root = parse_str(&event.data, &Limits::default())
            .map_err(|_| "the upstream sent an event that is not JSON".to_owned())?;
        let kind = root
            .get(src, "type")
            .and_then(|t| t.text(src))
            .map(std::borrow::Cow::into_owned)
            .unwrap_or_default();
        Ok(match kind.as_str() {
            "message_start" => {
                self.usage = usage_of(
                    src,
                    root.get(src, "message").and_then(|m| m.get(src, "usage")),
                );
                Step::AsItCame
            }
            "content_block_start" => Step::Go(self.block_start(&event.kind, src, &root)),
            "content_block_delta" => self.block_delta(&event.kind, src, &root),
            "content_block_stop" => Step::Go(self.block_stop(&event.kind, src, &root)),
            "message_delta" => {
                let usage = usage_of(src, root.get(src, "usage"));
                self.usage.output_tokens = self.usage.output_tokens.max(usage.output_tokens);
                self.usage.input_tokens = self.usage.input_tokens.max(usage.input_tokens);
                Step::Go(self.message_delta(&event.kind, src, &root).await)
            }
            "message_stop" => Step::Stop(sse(&event.kind, &event.data)),
            "error" => {
                let judged = super::super::wire::judged_error(
                    self.judging.session,
                    self.judging.exchange,
                    src,
                );
                Step::Error(sse_bytes(&event.kind, &judged))
            }
            _ if self.holding() => {
                self.queue.push(Queued::Raw(sse(&event.kind, &event.data)));
                Step::Go(String::new())
            }
            _ => Step::AsItCame,
        })
    }

    fn report(&mut self, streamed: &mut Streamed) {
        streamed.usage = self.usage;
    }

    fn unjudged_event(line: &str) -> String {
        sse(
            "error",
            &super::Anthropic::error(Refusal::Unjudged, line).to_string(),
        )
    }

    fn broken_event(&self, line: &str) -> String {
        json!({"type": "error", "error": {"type": "api_error", "message": line}}).to_string()
    }
}

/// A number member of `root`.
fn index_of(src: &[u8], root: &Node) -> u64 {
    root.get(src, "index")
        .and_then(|n| n.as_u64(src))
        .unwrap_or(0)
}

impl Relay<'_> {
    fn block(&mut self, index: u64) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
    }

    fn holding(&self) -> bool {
        self.judging.hold_all || !self.queue.is_empty()
    }

    fn block_start(&mut self, kind: &str, src: &[u8], root: &Node) -> String {
        let index = index_of(src, root);
        self.next_index = self.next_index.max(index + 1);
        let block = root.get(src, "content_block");
        let block_kind = block
            .and_then(|b| b.get(src, "type"))
            .and_then(|t| t.text(src))
            .unwrap_or_default();
        let raw = sse_bytes(kind, src);
        match block_kind.as_ref() {
            "text" => {
                let gate = self.judging.session.stream_gate(self.judging.exchange);
                self.blocks.push((
                    index,
                    Block::Text {
                        gate,
                        held: String::new(),
                    },
                ));
                if self.holding() {
                    self.queue.push(Queued::Text(index));
                    return String::new();
                }
                // The start as it came, but with no text of its own: any
                // text it carries goes through the gate.
                let initial = block
                    .and_then(|b| b.get(src, "text"))
                    .and_then(|t| t.text(src))
                    .unwrap_or_default();
                if initial.is_empty() {
                    raw
                } else {
                    let released = self.offer_text(index, &initial);
                    let start = json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}});
                    let mut out = sse(kind, &start.to_string());
                    out.push_str(&text_delta(index, &released));
                    out
                }
            }
            "tool_use" => {
                let text = |name| {
                    block
                        .and_then(|b| b.get(src, name))
                        .and_then(|n| n.text(src))
                        .unwrap_or_default()
                        .into_owned()
                };
                self.blocks.push((
                    index,
                    Block::Tool {
                        id: text("id"),
                        name: text("name"),
                        input: String::new(),
                        events: vec![raw],
                    },
                ));
                self.queue.push(Queued::Tool(index));
                String::new()
            }
            _ => {
                self.blocks.push((index, Block::Other));
                if self.holding() {
                    self.queue.push(Queued::Raw(raw));
                    String::new()
                } else {
                    raw
                }
            }
        }
    }

    /// A block's delta: a text's offered to its gate (as it came when
    /// released as it is), a tool call's input held with its events.
    fn block_delta(&mut self, kind: &str, src: &[u8], root: &Node) -> Step {
        let index = index_of(src, root);
        let raw = || sse_bytes(kind, src);
        let delta = root.get(src, "delta");
        let holding = self.holding();
        match self.block(index) {
            Some(Block::Text { held, .. }) => {
                let text = delta
                    .and_then(|d| d.get(src, "text"))
                    .and_then(|t| t.text(src))
                    .unwrap_or_default();
                if holding {
                    held.push_str(&text);
                    return Step::Go(String::new());
                }
                let released = self.offer_text(index, &text);
                if released == text {
                    Step::AsItCame
                } else if released.is_empty() {
                    Step::Go(String::new())
                } else {
                    Step::Go(text_delta(index, &released))
                }
            }
            Some(Block::Tool { input, events, .. }) => {
                if let Some(part) = delta
                    .and_then(|d| d.get(src, "partial_json"))
                    .and_then(|t| t.text(src))
                {
                    input.push_str(&part);
                }
                events.push(raw());
                Step::Go(String::new())
            }
            Some(Block::Other) | None if holding => {
                self.queue.push(Queued::Raw(raw()));
                Step::Go(String::new())
            }
            _ => Step::AsItCame,
        }
    }

    fn block_stop(&mut self, kind: &str, src: &[u8], root: &Node) -> String {
        let index = index_of(src, root);
        let raw = sse_bytes(kind, src);
        let holding = self.holding();
        match self.block(index) {
            Some(Block::Text { .. }) if holding => String::new(),
            Some(Block::Text { .. }) => {
                let (released, _) = self.final_text(index);
                let mut out = if released.is_empty() {
                    String::new()
                } else {
                    text_delta(index, &released)
                };
                out.push_str(&raw);
                out
            }
            Some(Block::Tool { events, .. }) => {
                events.push(raw);
                String::new()
            }
            _ if holding => {
                self.queue.push(Queued::Raw(raw));
                String::new()
            }
            _ => raw,
        }
    }

    /// Offers `text` to text block `index`'s gate: what it released.
    fn offer_text(&mut self, index: u64, text: &str) -> String {
        let exchange = self.judging.exchange;
        let session = &*self.judging.session;
        let Some((_, Block::Text { gate, .. })) = self.blocks.iter_mut().find(|(i, _)| *i == index)
        else {
            return String::new();
        };
        let offered = session.offer(exchange, gate, text, false);
        let released = offered
            .release
            .map(|r| gate.text()[r].to_owned())
            .unwrap_or_default();
        if let Some(started) = offered.hold {
            session.publish_hold_edge(exchange, started);
        }
        self.sent.push_str(&released);
        released
    }

    /// Text block `index`'s final check: what it released now; its whole
    /// text (as the gate left it) joins the reply's, and is returned too.
    fn final_text(&mut self, index: u64) -> (String, String) {
        let exchange = self.judging.exchange;
        let Some(position) = self.blocks.iter().position(|(i, _)| *i == index) else {
            return (String::new(), String::new());
        };
        let (_, block) = std::mem::replace(&mut self.blocks[position], (index, Block::Other));
        let Block::Text { mut gate, held } = block else {
            return (String::new(), String::new());
        };
        let offered = self.judging.session.offer(exchange, &mut gate, &held, true);
        let released = offered
            .release
            .map(|r| gate.text()[r].to_owned())
            .unwrap_or_default();
        self.sent.push_str(&released);
        let whole = gate.text().to_owned();
        let end = self.judging.session.finish_stream(exchange, gate);
        if let Some(blocked) = end.blocked {
            self.blocked.get_or_insert(blocked);
        }
        self.text.push_str(&whole);
        (released, whole)
    }

    /// The reply ends: it is judged, and what was held goes out, then the
    /// `message_delta` itself.
    async fn message_delta(&mut self, kind: &str, src: &[u8], root: &Node) -> String {
        // Text blocks still open (held) get their final check now, in order.
        let open: Vec<u64> = self
            .blocks
            .iter()
            .filter(|(_, b)| matches!(b, Block::Text { .. }))
            .map(|(i, _)| *i)
            .collect();
        let mut finals = BTreeMap::new();
        for index in open {
            finals.insert(index, self.final_text(index));
        }
        let judged = self.judge().await;
        let vetoed = judged.vetoed_by.is_some();
        // Held whole, the texts take what the seams made of them, each in
        // its block; streamed, they went out as released.
        let rewritten = if self.judging.hold_all && !vetoed {
            let pieces: Vec<String> = finals.values().map(|(_, whole)| whole.clone()).collect();
            finals
                .keys()
                .copied()
                .zip(super::super::views::redistribute(&pieces, &judged.content))
                .collect()
        } else {
            BTreeMap::new()
        };
        let (mut out, kept) = self.write_held(&judged, &finals, rewritten);
        // What the client has not seen of the verdict: a veto's notice, or
        // an answer the output seam changed after it streamed.
        let unsent = if vetoed {
            judged.content.clone()
        } else if self.judging.hold_all {
            String::new()
        } else {
            match judged.content.strip_prefix(self.text.as_str()) {
                Some(rest) => rest.to_owned(),
                None => format!("\n{}", judged.content),
            }
        };
        if !unsent.is_empty() {
            out.push_str(&text_block(self.next_index, &unsent));
            self.next_index += 1;
        }
        let mut splice = Splice::new();
        if vetoed || (kept == 0 && !judged.calls.is_empty()) {
            if let Some(reason) = root
                .get(src, "delta")
                .and_then(|d| d.get(src, "stop_reason"))
            {
                splice.replace(reason.span.clone(), string_literal("end_turn"));
            }
        }
        let data = splice.render(src).unwrap_or_else(|_| src.to_vec());
        out.push_str(&sse_bytes(kind, &data));
        out
    }

    /// The reply's seams on what streamed: its text as the gates left it,
    /// its calls as assembled.
    async fn judge(&mut self) -> JudgedChoice {
        let calls: Vec<ToolCall> = self
            .blocks
            .iter()
            .filter_map(|(_, b)| match b {
                Block::Tool {
                    id, name, input, ..
                } => Some(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: input_arguments(input),
                }),
                _ => None,
            })
            .collect();
        self.judging
            .judge_streamed(self.text.clone(), calls, self.blocked.clone())
            .await
    }

    /// What was held, written as judged: raw events as they came, text
    /// blocks with their text (`rewritten`, else what their gate released
    /// at the end), tool blocks as they came, rewritten, or as a text block
    /// of their refusal line; nothing after a veto. How many calls passed.
    fn write_held(
        &mut self,
        judged: &JudgedChoice,
        finals: &BTreeMap<u64, (String, String)>,
        mut rewritten: BTreeMap<u64, String>,
    ) -> (String, usize) {
        let mut out = String::new();
        let mut verdicts = judged.calls.iter();
        let mut kept = 0;
        if judged.vetoed_by.is_some() {
            self.queue.clear();
            return (out, kept);
        }
        for queued in std::mem::take(&mut self.queue) {
            match queued {
                Queued::Raw(text) => out.push_str(&text),
                Queued::Text(index) => {
                    let text = rewritten
                        .remove(&index)
                        .or_else(|| finals.get(&index).map(|(released, _)| released.clone()))
                        .unwrap_or_default();
                    out.push_str(&text_block(index, &text));
                }
                Queued::Tool(index) => {
                    let Some(position) = self.blocks.iter().position(|(i, _)| *i == index) else {
                        continue;
                    };
                    let (_, block) =
                        std::mem::replace(&mut self.blocks[position], (index, Block::Other));
                    let Block::Tool { events, input, .. } = block else {
                        continue;
                    };
                    match verdicts.next() {
                        Some(CallVerdict::Pass(call)) => {
                            kept += 1;
                            if call.arguments.parse() == input_arguments(&input).parse() {
                                out.extend(events);
                            } else {
                                out.push_str(&tool_block(index, call));
                            }
                        }
                        Some(CallVerdict::Refused(_, line)) => {
                            out.push_str(&text_block(index, line));
                        }
                        None => {}
                    }
                }
            }
        }
        (out, kept)
    }
}

/// A `tool_use` block's streamed input as arguments (none: `{}`).
fn input_arguments(input: &str) -> Arguments {
    if input.trim().is_empty() {
        return Arguments::empty();
    }
    Arguments::from_json(input)
        .unwrap_or_else(|_| Arguments::from_value(&serde_json::Value::String(input.to_owned())))
}

/// A whole `tool_use` block at `index` for `call`: start, its input as one
/// delta, stop.
fn tool_block(index: u64, call: &ToolCall) -> String {
    let start = json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}});
    let delta = json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": call.arguments.as_str()}});
    let mut out = sse("content_block_start", &start.to_string());
    out.push_str(&sse("content_block_delta", &delta.to_string()));
    out.push_str(&sse(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}).to_string(),
    ));
    out
}

/// A `text_delta` event for block `index`.
fn text_delta(index: u64, text: &str) -> String {
    let delta = json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}});
    sse("content_block_delta", &delta.to_string())
}

/// A whole text block at `index`: start, one delta, stop.
fn text_block(index: u64, text: &str) -> String {
    let mut out = sse(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}).to_string(),
    );
    if !text.is_empty() {
        out.push_str(&text_delta(index, text));
    }
    out.push_str(&sse(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}).to_string(),
    ));
    out
}
