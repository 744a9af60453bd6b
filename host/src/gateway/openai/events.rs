//! A chat-completions stream relayed (see [`events`](super::super::events)):
//! each `chat.completion.chunk` forwarded as it came when every text it
//! carries was released as it is; otherwise written again with what was
//! released in place of its text and its tool-call deltas taken out.
//!
//! Per choice (`n` of them, each judged on its own): `delta.content` and
//! `delta.refusal` through a stream gate each; `delta.tool_calls` held
//! until the choice finishes. A chunk with a `finish_reason` finishes its
//! choice: the gates' final check, then `model_response`, `tool_call` on
//! each assembled call and `output`; then what was held goes out — each
//! passed call as one delta with its whole arguments (ids as proposed), a
//! refused call's line as text, a veto's notice as text — and the finish
//! chunk, its `finish_reason` the upstream's unless a veto made it
//! `content_filter` or no call was left (`stop`). The usage chunk and
//! `[DONE]` pass as they came; a stream without `[DONE]` ends with an
//! error chunk.

use super::super::events::{sse, sse_bytes, Judging, StreamContext, StreamWire, Streamed};
use super::super::views;
use super::super::views::{arguments_of, arguments_text};
use super::super::wire::{Refusal, Wire};
use super::reply::{shown, usage_of};
use crate::agent::{CallVerdict, StreamGate};
use crate::jsondoc::{array_from, parse_str, string_literal, Limits, Node};
use crate::types::ToolCall;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

/// One choice's stream so far.
#[derive(Default)]
struct ChoiceState {
    content: StreamGate,
    refusal: StreamGate,
    /// Text held whole (`hold_all`): offered once, at the end.
    held: String,
    /// Text sent to the client, content then refusal.
    sent: String,
    /// Calls by the upstream's tool index.
    calls: BTreeMap<u64, CallState>,
    /// The chunks that carried only this choice's tool-call deltas, as
    /// they came: what goes out when every call passes unchanged.
    call_events: Vec<String>,
    /// A tool-call delta came in a chunk with more in it: the calls go out
    /// written whole instead.
    calls_mixed: bool,
    finished: bool,
    /// Held whole and blocked at the end (`hold_all`).
    blocked: Option<crate::agent::StreamBlock>,
}

/// A tool call's deltas, assembled.
#[derive(Default)]
struct CallState {
    id: String,
    name: String,
    arguments: String,
}

/// The relay's state.
struct Relay<'a> {
    judging: Judging<'a>,
    /// Each choice's state, boxed: a map node holds room for eleven
    /// values, and a stream has one choice (kept apart, the node is small).
    choices: BTreeMap<u64, Box<ChoiceState>>,
    /// The first chunk's members but `choices` and `usage`: what a chunk
    /// the gateway writes repeats.
    template: Vec<(String, Vec<u8>)>,
}

impl StreamWire for super::OpenAi {
    fn relay(cx: StreamContext<'_>) -> Pin<Box<dyn Future<Output = Streamed> + Send + '_>> {
        Box::pin(relay(cx))
    }
}

async fn relay(cx: StreamContext<'_>) -> Streamed {
    let StreamContext {
        judging,
        mut pump,
        out,
    } = cx;
    let mut relay = Relay {
        judging,
        choices: BTreeMap::new(),
        template: Vec::new(),
    };
    let mut streamed = Streamed::default();
    let mut done = false;
    while let Some(event) = pump.next(out, &mut streamed).await {
        if event.data.trim() == "[DONE]" {
            // The end marker: a choice the upstream never finished ends
            // here (as it would have, with `stop`), judged like any other.
            let open: Vec<u64> = relay
                .choices
                .iter()
                .filter(|(_, c)| !c.finished)
                .map(|(i, _)| *i)
                .collect();
            for index in open {
                let (mut text, reason) = Box::pin(relay.finish(index, "stop")).await;
                text.push_str(&relay.write_delta(index, &serde_json::json!({}), Some(&reason)));
                out.send_judged(relay.judging.session, text, unjudged_chunk)
                    .await;
            }
            done = true;
            continue;
        }
        let data = event.data.as_str();
        let src = data.as_bytes();
        let Ok(root) = parse_str(data, &Limits::default()) else {
            streamed.broken = Some("the upstream sent an event that is not JSON".to_owned());
            break;
        };
        if super::super::wire::error_message(src, &root).is_some() {
            let judged = super::super::wire::judged_error(
                relay.judging.session,
                relay.judging.exchange,
                src,
            );
            out.send(sse_bytes(&event.kind, &judged)).await;
            streamed.broken = Some(String::new());
            return streamed;
        }
        if relay.template.is_empty() {
            relay.template = root
                .as_object()
                .unwrap_or_default()
                .iter()
                .filter(|(k, _)| !k.is(src, "choices") && !k.is(src, "usage"))
                .map(|(k, v)| (k.text(src).into_owned(), v.raw(src).to_vec()))
                .collect();
        }
        if root.get(src, "usage").is_some_and(|u| !u.is_null()) {
            streamed.usage = usage_of(src, &root);
        }
        match relay.chunk(&event.kind, data, &root).await {
            Chunk::AsItCame => {
                out.send_judged_event(relay.judging.session, &event.kind, data, unjudged_chunk)
                    .await;
            }
            Chunk::Written(text) => {
                out.send_judged(relay.judging.session, text, unjudged_chunk)
                    .await;
            }
        }
    }
    if streamed.broken.is_none() && !done {
        streamed.broken = Some("the upstream's stream ended before its end".to_owned());
    }
    match &streamed.broken {
        None => out.send("data: [DONE]\n\n".to_owned()).await,
        Some(line) if !line.is_empty() => out.send(error_chunk(line)).await,
        Some(_) => {}
    }
    streamed
}

/// The error chunk a stream ends with when a pack could not judge it.
fn unjudged_chunk(line: &str) -> String {
    sse(
        "",
        &super::OpenAi::error(Refusal::Unjudged, line).to_string(),
    )
}

/// The error chunk a broken stream ends with.
fn error_chunk(line: &str) -> String {
    let body = serde_json::json!({"error": {"message": line, "type": "upstream_error", "param": null, "code": "upstream_failed"}});
    sse("", &body.to_string())
}

/// What goes to the client for a chunk.
enum Chunk {
    /// The chunk as it came (every choice goes on unchanged).
    AsItCame,
    /// This text (empty: nothing, for now).
    Written(String),
}

impl Relay<'_> {
    /// One chunk (`data`, parsed as `root`): what goes to the client for
    /// it. A chunk whose every choice goes on unchanged is sent as it
    /// came, and nothing of it is written again.
    async fn chunk(&mut self, kind: &str, data: &str, root: &Node) -> Chunk {
        let src = data.as_bytes();
        let choices = root
            .get(src, "choices")
            .and_then(Node::as_array)
            .unwrap_or_default();
        // The chunk as it came, written only where it goes out so.
        let raw = || sse(kind, data);
        let single = choices.len() == 1;
        let mut clean = true;
        // A stream has one choice, mostly: its offer is kept in place.
        let mut offers: SmallVec<[(&Node, Offered, bool); 1]> =
            SmallVec::with_capacity(choices.len());
        let mut finishing = Vec::new();
        for choice in choices {
            let index = choice
                .get(src, "index")
                .and_then(|n| n.as_u64(src))
                .unwrap_or(0);
            let finish = choice.get(src, "finish_reason").filter(|n| !n.is_null());
            let offered = self.delta(data, choice, index);
            if offered.calls {
                let state = self.choices.entry(index).or_default();
                if single && offered.same_but_calls && finish.is_none() {
                    // Held as it came, until the choice is judged.
                    state.call_events.push(raw());
                    return Chunk::Written(String::new());
                }
                state.calls_mixed = true;
            }
            clean &= offered.same && finish.is_none();
            if let Some(finish) = finish {
                let reason = finish
                    .text(src)
                    .map(std::borrow::Cow::into_owned)
                    .unwrap_or_default();
                finishing.push((index, reason, offered.empty));
            }
            offers.push((choice, offered, finish.is_some()));
        }
        if clean {
            return Chunk::AsItCame;
        }
        // A choice written again goes out only if it still says something
        // (its finish goes in a chunk of its own).
        let rewritten: Vec<Vec<u8>> = offers
            .into_iter()
            .filter(|(choice, offered, _)| {
                offered.says_something || choice.get(src, "logprobs").is_some_and(|n| !n.is_null())
            })
            .map(|(choice, offered, finish)| {
                let mut set: Vec<(&str, Option<Vec<u8>>)> =
                    vec![("delta", Some(offered.written(src, choice)))];
                if finish {
                    set.push(("finish_reason", Some(b"null".to_vec())));
                }
                views::rebuild_object(src, choice, &set)
            })
            .collect();
        let mut out = String::new();
        let usage = root.get(src, "usage").filter(|u| !u.is_null());
        if !rewritten.is_empty() {
            out.push_str(&self.write(&rewritten, None));
        }
        let as_it_came = single && usage.is_none();
        for (index, reason, empty) in finishing {
            // Boxed, here and at `[DONE]`: a finish's state is large and
            // needed once per choice, not for the whole stream's life.
            let (before, judged) = Box::pin(self.finish(index, &reason)).await;
            out.push_str(&before);
            if as_it_came && empty && judged == reason {
                // The finish chunk itself, as it came.
                out.push_str(&raw());
            } else {
                out.push_str(&self.write_delta(index, &serde_json::json!({}), Some(&judged)));
            }
        }
        if let Some(usage) = usage {
            out.push_str(&self.write(&[], Some(usage.raw(src))));
        }
        Chunk::Written(out)
    }

    /// One choice's delta offered (see [`Offered`]).
    fn delta(&mut self, data: &str, choice: &Node, index: u64) -> Offered {
        let src = data.as_bytes();
        let state = self.choices.entry(index).or_default();
        let Some(delta) = delta_of(src, choice) else {
            return Offered {
                released: Released::default(),
                same: true,
                same_but_calls: true,
                calls: false,
                empty: true,
                says_something: false,
            };
        };
        let empty = delta.as_object().is_none_or(|members| {
            members.iter().all(|(k, v)| {
                (k.is(src, "content") || k.is(src, "refusal"))
                    && v.text_in(data).is_none_or(|t| t.is_empty())
                    || v.is_null()
            })
        });
        let mut same = true;
        let mut released_texts = Released::default();
        for (at, field) in ["content", "refusal"].into_iter().enumerate() {
            let Some(text) = delta.get(src, field).and_then(|n| n.text_in(data)) else {
                continue;
            };
            let released = if self.judging.hold_all {
                state.held.push_str(&text);
                ""
            } else {
                let gate = if field == "content" {
                    &mut state.content
                } else {
                    &mut state.refusal
                };
                let offered = self
                    .judging
                    .session
                    .offer(self.judging.exchange, gate, &text, false);
                if let Some(started) = offered.hold {
                    self.judging
                        .session
                        .publish_hold_edge(self.judging.exchange, started);
                }
                offered.release.map_or("", |r| &gate.text()[r])
            };
            state.sent.push_str(released);
            // The usual case, the text as it came, keeps no copy.
            let as_it_came = released == text.as_ref();
            same &= as_it_came;
            released_texts.0[at] = Some((
                field,
                (!as_it_came).then(|| released.to_owned()),
                released.is_empty(),
            ));
        }
        let texts_same = same;
        let mut calls_seen = false;
        if let Some(calls) = delta.get(src, "tool_calls").and_then(Node::as_array) {
            same = false;
            calls_seen = true;
            for call in calls {
                let at = call
                    .get(src, "index")
                    .and_then(|n| n.as_u64(src))
                    .unwrap_or(0);
                let held = state.calls.entry(at).or_default();
                if let Some(id) = call.get(src, "id").and_then(|n| n.text(src)) {
                    held.id.push_str(&id);
                }
                if let Some(function) = call.get(src, "function") {
                    if let Some(name) = function.get(src, "name").and_then(|n| n.text(src)) {
                        held.name.push_str(&name);
                    }
                    if let Some(arguments) =
                        function.get(src, "arguments").and_then(|n| n.text(src))
                    {
                        held.arguments.push_str(&arguments);
                    }
                }
            }
        }
        let says_something = delta.as_object().unwrap_or_default().iter().any(|(k, _)| {
            let taken_out = calls_seen && k.is(src, "tool_calls");
            let emptied = released_texts
                .iter()
                .any(|(field, _, empty)| k.is(src, field) && *empty);
            !(taken_out || emptied)
        });
        Offered {
            released: released_texts,
            same,
            same_but_calls: texts_same,
            calls: calls_seen,
            empty,
            says_something,
        }
    }

    /// Finishes choice `index` (see the module docs): what goes out before
    /// its finish chunk, and the finish reason that chunk carries.
    async fn finish(&mut self, index: u64, reason: &str) -> (String, String) {
        let mut state = self.choices.remove(&index).unwrap_or_default();
        let mut out = self.final_release(index, &mut state);
        let content_end = self
            .judging
            .session
            .finish_stream(self.judging.exchange, std::mem::take(&mut state.content));
        let refusal_end = self
            .judging
            .session
            .finish_stream(self.judging.exchange, std::mem::take(&mut state.refusal));
        let mut content = content_end.rewritten.unwrap_or_default();
        if content.is_empty() {
            content.clone_from(&state.sent);
        }
        let calls: Vec<ToolCall> = state
            .calls
            .values()
            .map(|call| ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: arguments_of(&call.arguments),
            })
            .collect();
        let blocked = state
            .blocked
            .clone()
            .or(content_end.blocked)
            .or(refusal_end.blocked);
        let judged = self.judging.judge_streamed(content, calls, blocked).await;
        let shown = shown(&judged);
        let unsent = match shown.strip_prefix(state.sent.as_str()) {
            Some(rest) => rest.to_owned(),
            None if state.sent.is_empty() => shown,
            None => format!("\n{shown}"),
        };
        if !unsent.is_empty() {
            out.push_str(&self.write_delta(index, &serde_json::json!({"content": unsent}), None));
        }
        let unchanged = !state.calls_mixed
            && judged.calls.len() == state.calls.len()
            && judged.calls.iter().zip(state.calls.values()).all(|(verdict, proposed)| {
                matches!(verdict, CallVerdict::Pass(call) if call.arguments.as_str() == arguments_of(&proposed.arguments).as_str())
            });
        let mut kept = 0;
        if unchanged {
            // Every call passed as proposed: its deltas go out as they came.
            out.extend(std::mem::take(&mut state.call_events));
            kept = judged.calls.len();
        } else {
            for verdict in &judged.calls {
                if let CallVerdict::Pass(call) = verdict {
                    let delta = serde_json::json!({"tool_calls": [{
                        "index": kept, "id": call.id, "type": "function",
                        "function": {"name": call.name, "arguments": arguments_text(&call.arguments)},
                    }]});
                    out.push_str(&self.write_delta(index, &delta, None));
                    kept += 1;
                }
            }
        }
        let reason = if judged.vetoed_by.is_some() {
            "content_filter"
        } else if kept == 0 && !judged.calls.is_empty() {
            "stop"
        } else {
            reason
        };
        self.choices.insert(
            index,
            Box::new(ChoiceState {
                finished: true,
                ..ChoiceState::default()
            }),
        );
        (out, reason.to_owned())
    }

    /// The gates' final check of choice `index`: a chunk of what they
    /// still held, if any (text held whole, `hold_all`: all of it, judged
    /// now).
    fn final_release(&mut self, index: u64, state: &mut ChoiceState) -> String {
        if state.blocked.is_some() {
            return String::new();
        }
        let mut delta = serde_json::Map::new();
        if self.judging.hold_all {
            let mut gate = self.judging.session.stream_gate(self.judging.exchange);
            let held = std::mem::take(&mut state.held);
            let offered = self
                .judging
                .session
                .offer(self.judging.exchange, &mut gate, &held, true);
            let released = offered
                .release
                .map(|r| gate.text()[r].to_owned())
                .unwrap_or_default();
            if offered.retract.is_some() {
                state.blocked = self
                    .judging
                    .session
                    .finish_stream(self.judging.exchange, gate)
                    .blocked;
                return String::new();
            }
            state.content = gate;
            if !released.is_empty() {
                state.sent.push_str(&released);
                delta.insert("content".to_owned(), serde_json::Value::String(released));
            }
        } else {
            for (field, gate) in [
                ("content", &mut state.content),
                ("refusal", &mut state.refusal),
            ] {
                let offered = self
                    .judging
                    .session
                    .offer(self.judging.exchange, gate, "", true);
                if let Some(range) = offered.release.filter(|r| !r.is_empty()) {
                    let released = gate.text()[range].to_owned();
                    state.sent.push_str(&released);
                    delta.insert(field.to_owned(), serde_json::Value::String(released));
                }
            }
        }
        if delta.is_empty() {
            return String::new();
        }
        self.write_delta(index, &serde_json::Value::Object(delta), None)
    }

    /// A chunk carrying `delta` for choice `index` (and `finish_reason`).
    fn write_delta(&self, index: u64, delta: &serde_json::Value, finish: Option<&str>) -> String {
        let choice = serde_json::json!({"index": index, "delta": delta, "finish_reason": finish});
        self.write(&[choice.to_string().into_bytes()], None)
    }

    /// A chunk of the stream's own (the first chunk's members) with these
    /// choices (and `usage`).
    fn write(&self, choices: &[Vec<u8>], usage: Option<&[u8]>) -> String {
        let mut members: Vec<(&str, Vec<u8>)> = self
            .template
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        members.push(("choices", array_from(choices)));
        if let Some(usage) = usage {
            members.push(("usage", usage.to_vec()));
        }
        let data = crate::jsondoc::object_from(members.iter().map(|(k, v)| (*k, v.as_slice())));
        sse_bytes("", &data)
    }
}

/// What offering one choice's delta came to.
struct Offered {
    /// What the gates released of each text the delta carries (`content`,
    /// `refusal`), in order.
    released: Released,
    /// Nothing changed (no text held back, no tool call).
    same: bool,
    /// Nothing changed but that it carries tool-call deltas.
    same_but_calls: bool,
    /// It carries tool-call deltas.
    calls: bool,
    /// It says nothing (no text, no call): a finish chunk's.
    empty: bool,
    /// Written again (texts as released, calls taken out), it still says
    /// something: a text, or a member other than its texts and calls.
    says_something: bool,
}

/// What the gates released of a delta's `content` and `refusal`: each
/// text's field, its released text when that is not the text as it came
/// (`None`: as it came), and whether what was released is empty.
#[derive(Default)]
struct Released([Option<(&'static str, Option<String>, bool)>; 2]);

impl Released {
    /// The texts the delta carries, in order.
    fn iter(&self) -> impl Iterator<Item = &(&'static str, Option<String>, bool)> {
        self.0.iter().flatten()
    }
}

impl Offered {
    /// The delta of `choice` as it goes out: as it came when nothing
    /// changed, else with its texts as released and its tool calls taken
    /// out (`{}` when the choice has no delta object).
    fn written(&self, src: &[u8], choice: &Node) -> Vec<u8> {
        let Some(delta) = delta_of(src, choice) else {
            return b"{}".to_vec();
        };
        if self.same {
            return delta.raw(src).to_vec();
        }
        let mut set: Vec<(&str, Option<Vec<u8>>)> = self
            .released
            .iter()
            .map(|(field, released, _)| {
                // A text as it came is written as it came.
                let written = match (released, delta.get(src, field)) {
                    (None, Some(node)) => node.raw(src).to_vec(),
                    (released, _) => {
                        string_literal(released.as_deref().unwrap_or_default()).into_bytes()
                    }
                };
                (*field, Some(written))
            })
            .collect();
        if self.calls {
            set.push(("tool_calls", None));
        }
        views::rebuild_object(src, delta, &set)
    }
}

/// A choice's `delta`, when it is an object.
fn delta_of<'a>(src: &[u8], choice: &'a Node) -> Option<&'a Node> {
    choice.get(src, "delta").filter(|d| d.as_object().is_some())
}
