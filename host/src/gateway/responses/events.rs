//! A Responses stream relayed (see [`events`](super::super::events)):
//! each event forwarded as it came when what it carries was released as
//! it is, its `sequence_number` and `output_index` rewritten only where
//! the gateway took an event out or wrote one in, so the client's stream
//! always counts up with no gap.
//!
//! - `response.created`, `response.in_progress`, `reasoning` items and
//!   their summaries, built-in tools' items and every unknown event: as
//!   they came.
//! - A `message` item's `output_text` (`refusal`) part: each
//!   `.delta` through the part's stream gate (forwarded as it came when the
//!   gate released exactly its text, else with what was released, nothing
//!   when it held it); at `.done` the gate's final check releases what it
//!   held, and the `.done`, `content_part.done` and `output_item.done`
//!   events carry the part's text as the client received it.
//! - A `function_call` / `custom_tool_call` item: held, with everything
//!   after it, until the response ends. Then `model_response`, `tool_call`
//!   on each call and `output` judge it, and what was held goes out: a
//!   passed call as it came (or, rewritten, as one delta of its new
//!   arguments, its `.done` and item carrying them; its `call_id` kept), a
//!   refused call as a `message` item of its refusal line at its place, a
//!   veto's notice as a `message` item after what was sent.
//! - `response.completed` / `response.incomplete`: its `response.output`
//!   the items the client received, as it received them.
//! - `response.failed` and `error`: their message judged; they end the
//!   stream, and nothing held goes out.
//!
//! A stream that ends without `response.completed` (`.incomplete`,
//! `.failed`) ends with an `error` event: never a completion.
//!
//! One file past 700 lines on purpose: the relay is one state machine
//! (items, parts, held events, numbering) whose pieces share that state;
//! split, each piece would reach into the others'.

use super::super::events::{sse, sse_bytes, EventRelay, EventWire, Judging, Step, Streamed};
use super::super::views;
use super::super::wire::{Refusal, Wire};
use super::reply::{call_field, message_item, new_item_id, part_field};
use crate::agent::{AgentSession, CallVerdict, JudgedChoice, StreamGate};
use crate::jsondoc::{array_from, parse, parse_str, string_literal, Limits, Node, Splice};
use crate::providers::sse::Event;
use crate::providers::Usage;
use crate::types::ToolCall;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A text part of a message item.
struct Part {
    gate: StreamGate,
    /// Text held (the part is held): offered whole at its `.done`.
    held: String,
    /// What the gate released: what the client reads of the part.
    released: String,
    /// Its text as the gate left it (`.done` seen).
    whole: Option<String>,
}

/// A call item's events and what they assembled.
struct Call {
    /// Its `call_id`.
    id: String,
    name: String,
    arguments: String,
    /// `arguments` or `input`.
    field: &'static str,
    events: Vec<(String, Vec<u8>)>,
}

/// What one output item is to the relay.
enum Item {
    /// A message: its text parts by content index (boxed: a map node
    /// holds room for eleven, and a message mostly has one).
    Message(BTreeMap<u64, Box<Part>>),
    /// A call, held.
    Call(Call),
    /// Anything else (of this type): as it comes.
    Other(String),
}

/// A held event.
enum Queued {
    /// An event to write at the end as it then reads.
    Event(String, Vec<u8>),
    /// A text delta held, with its part's place (output index, content
    /// index; 0 for either it names not): at the end the part goes out as
    /// one delta, so every later delta of it is dropped unread.
    Delta(String, Vec<u8>, (u64, u64)),
    /// A call item (by output index), written as judged.
    Call(u64),
}

/// The relay's state.
pub(in crate::gateway) struct Relay<'a> {
    judging: Judging<'a>,
    items: BTreeMap<u64, Item>,
    queue: Vec<Queued>,
    /// Upstream output index → the client's.
    indexes: BTreeMap<u64, u64>,
    next_index: u64,
    /// No event was read yet.
    first: bool,
    /// The next sequence number the client gets (`None`: the upstream
    /// numbers no event).
    seq: Option<u64>,
    /// Each item the client received whole (`output_item.done`), by its
    /// output index.
    done: BTreeMap<u64, Vec<u8>>,
    blocked: Option<crate::agent::StreamBlock>,
    usage: Usage,
    id: Option<String>,
    /// A virtual upstream index for the items the gateway writes.
    extra: u64,
    /// Text went out as it streamed (before the response was judged).
    streamed_text: bool,
}

impl EventWire for super::Responses {
    type Relay<'a> = Relay<'a>;

    fn start(judging: Judging<'_>) -> Relay<'_> {
        Relay {
            judging,
            items: BTreeMap::new(),
            queue: Vec::new(),
            indexes: BTreeMap::new(),
            next_index: 0,
            first: true,
            seq: None,
            done: BTreeMap::new(),
            blocked: None,
            usage: Usage::default(),
            id: None,
            extra: u64::MAX / 2,
            streamed_text: false,
        }
    }
}

impl EventRelay for Relay<'_> {
    const END: &'static str = "response.completed";

    fn session(&self) -> &AgentSession {
        self.judging.session
    }

    /// One upstream event (see the module docs).
    async fn on_event(&mut self, event: &Event) -> Result<Step, String> {
        let src = event.data.as_bytes();
        let root = parse_str(&event.data, &Limits::default())
            .map_err(|_| "the upstream sent an event that is not JSON".to_owned())?;
        let kind = views::member_text_in(&event.data, &root, "type");
        if std::mem::take(&mut self.first) {
            self.seq = number(src, &root, "sequence_number");
        }
        let index = number(src, &root, "output_index");
        Ok(match &*kind {
            "response.created" | "response.in_progress" => {
                if let Some(id) = root.get(src, "response").map(|r| string(src, r, "id")) {
                    self.id = Some(id).filter(|id| !id.is_empty());
                }
                Step::Go(self.response_event(&event.kind, src, &root, false))
            }
            "response.output_item.added" => self.item_added(&event.kind, src, &root),
            "response.content_part.added" => {
                let field = root
                    .get(src, "part")
                    .and_then(|p| part_field(&string(src, p, "type")));
                if let (Some(_), Some(index)) = (field, index) {
                    self.open_part(index, number(src, &root, "content_index").unwrap_or(0));
                }
                self.pass_event(&event.kind, &event.data, &root)
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                self.text_delta(&event.kind, &event.data, &root)
            }
            "response.output_text.done" | "response.refusal.done" => {
                Step::Go(self.text_done(&event.kind, src, &root))
            }
            "response.function_call_arguments.delta"
            | "response.custom_tool_call_input.delta"
            | "response.function_call_arguments.done"
            | "response.custom_tool_call_input.done"
            | "response.output_item.done"
                if matches!(index.and_then(|i| self.items.get(&i)), Some(Item::Call(_))) =>
            {
                if let Some(Item::Call(call)) = index.and_then(|i| self.items.get_mut(&i)) {
                    if last_word(&kind) == "delta" {
                        call.arguments.push_str(&string(src, &root, "delta"));
                    }
                    call.events.push((event.kind.clone(), src.to_vec()));
                }
                Step::Go(String::new())
            }
            "response.completed" | "response.incomplete" => {
                self.usage = views::usage_of(
                    src,
                    root.get(src, "response").and_then(|r| r.get(src, "usage")),
                );
                Step::Stop(self.finish(&event.kind, src, &root).await)
            }
            "response.failed" | "error" => {
                let path: &[&str] = if kind == "error" {
                    &["message"]
                } else {
                    &["response", "error", "message"]
                };
                let judged = super::super::wire::judged_message(
                    self.judging.session,
                    self.judging.exchange,
                    src,
                    path,
                );
                self.queue.clear();
                let root = parse(&judged, &Limits::default())
                    .map_err(|_| "the upstream sent an event that is not JSON".to_owned())?;
                Step::Error(self.pass(&event.kind, &judged, &root))
            }
            _ => self.pass_event(&event.kind, &event.data, &root),
        })
    }

    fn report(&mut self, streamed: &mut Streamed) {
        streamed.usage = self.usage;
        streamed.response_id = self.id.take();
    }

    fn unjudged_event(line: &str) -> String {
        let error = super::Responses::error(Refusal::Unjudged, line);
        let body = json!({"type": "error", "code": error["error"]["code"], "message": line, "param": null});
        sse("error", &body.to_string())
    }

    fn broken_event(&self, line: &str) -> String {
        let mut body =
            json!({"type": "error", "code": "upstream_failed", "message": line, "param": null});
        if let Some(seq) = self.seq {
            body["sequence_number"] = json!(seq);
        }
        body.to_string()
    }
}

/// Where an event of a text part (`root`) is: its item's output index
/// and its part's content index (0 when it names none); `None` when it
/// names no item.
fn place(src: &[u8], root: &Node) -> Option<(u64, u64)> {
    let index = number(src, root, "output_index")?;
    Some((index, number(src, root, "content_index").unwrap_or(0)))
}

/// Which part a held delta is of, to write each part's once: its output
/// and content indexes, 0 for either it names not.
fn part_key(src: &[u8], root: &Node) -> (u64, u64) {
    (
        number(src, root, "output_index").unwrap_or(0),
        number(src, root, "content_index").unwrap_or(0),
    )
}

/// The part of `items` at `place` (see [`place`]).
fn part_at(items: &mut BTreeMap<u64, Item>, place: Option<(u64, u64)>) -> Option<&mut Part> {
    let (index, content) = place?;
    match items.get_mut(&index) {
        Some(Item::Message(parts)) => parts.get_mut(&content).map(|part| &mut **part),
        _ => None,
    }
}

/// `root` (a delta event) carrying `delta` instead.
fn with_delta(src: &[u8], root: &Node, delta: &str) -> Vec<u8> {
    views::rebuild_object(
        src,
        root,
        &[("delta", Some(string_literal(delta).into_bytes()))],
    )
}

/// The last dot-separated word of an event's type (`delta`, `done`).
fn last_word(kind: &str) -> &str {
    kind.rfind('.').map_or(kind, |dot| &kind[dot + 1..])
}

/// A number member of `node`.
fn number(src: &[u8], node: &Node, name: &str) -> Option<u64> {
    node.get(src, name).and_then(|n| n.as_u64(src))
}

/// A string member of `node`.
fn string(src: &[u8], node: &Node, name: &str) -> String {
    node.get(src, name)
        .and_then(|n| views::text(src, n))
        .unwrap_or_default()
}

impl Relay<'_> {
    /// `response.output_item.added`: a call is held from here (with
    /// everything after it), a message held whole when every text is.
    fn item_added(&mut self, kind: &str, src: &[u8], root: &Node) -> Step {
        let item = root.get(src, "item");
        let item_kind = item.map(|i| string(src, i, "type")).unwrap_or_default();
        let index = number(src, root, "output_index").unwrap_or(0);
        if let (Some(field), Some(item)) = (call_field(&item_kind), item) {
            self.items.insert(
                index,
                Item::Call(Call {
                    id: string(src, item, "call_id"),
                    name: string(src, item, "name"),
                    arguments: string(src, item, field),
                    field,
                    events: vec![(kind.to_owned(), src.to_vec())],
                }),
            );
            self.queue.push(Queued::Call(index));
            return Step::Go(String::new());
        }
        if item_kind == "message" {
            self.items.insert(index, Item::Message(BTreeMap::new()));
            if self.judging.hold_all {
                // Held whole, a message goes out at the end, as
                // judged (or not at all, for a veto's notice).
                self.queue
                    .push(Queued::Event(kind.to_owned(), src.to_vec()));
                return Step::Go(String::new());
            }
        } else {
            self.items.insert(index, Item::Other(item_kind));
        }
        Step::Go(self.pass(kind, src, root))
    }

    /// Opens text part `content` of message item `index` (a fresh gate),
    /// unless it is open or the item is no message.
    fn open_part(&mut self, index: u64, content: u64) {
        let Some(Item::Message(parts)) = self.items.get_mut(&index) else {
            return;
        };
        parts.entry(content).or_insert_with(|| {
            Box::new(Part {
                gate: self.judging.session.stream_gate(self.judging.exchange),
                held: String::new(),
                released: String::new(),
                whole: None,
            })
        });
    }

    /// An event that carries nothing judged: written now (its numbers
    /// kept consistent), or held behind a held call.
    fn pass(&mut self, kind: &str, src: &[u8], root: &Node) -> String {
        if self.held_behind_a_call(kind, src) {
            return String::new();
        }
        self.write(kind, src, root)
    }

    /// [`Relay::pass`] of an upstream event's own `data`: written with
    /// [`Relay::write_event`].
    fn pass_event(&mut self, kind: &str, data: &str, root: &Node) -> Step {
        if self.held_behind_a_call(kind, data.as_bytes()) {
            return Step::Go(String::new());
        }
        self.write_event(kind, data, root)
    }

    /// Whether an event (`kind`, `src`) is held behind a held call (it
    /// is, queued, when anything is queued).
    fn held_behind_a_call(&mut self, kind: &str, src: &[u8]) -> bool {
        if self.queue.is_empty() {
            return false;
        }
        self.queue
            .push(Queued::Event(kind.to_owned(), src.to_vec()));
        true
    }

    /// Writes an upstream event for the client: its `sequence_number` the
    /// next, its `output_index` the client's; what it carries of a text
    /// part, the part's released text; an item it completes recorded.
    fn write(&mut self, kind: &str, src: &[u8], root: &Node) -> String {
        self.write_edited(kind, src, root, Splice::new())
    }

    /// [`Relay::write`] with `splice`'s edits (of `src`) made as well.
    fn write_edited(&mut self, kind: &str, src: &[u8], root: &Node, splice: Splice) -> String {
        let event_type = views::member_text(src, root, "type").unwrap_or_default();
        match self.edited(src, root, &event_type, splice) {
            Some(data) => sse_bytes(kind, &data),
            None => sse_bytes(kind, src),
        }
    }

    /// [`Relay::write`] of an upstream event's own `data`: one that goes
    /// out unchanged goes as it came (not copied, not read again).
    fn write_event(&mut self, kind: &str, data: &str, root: &Node) -> Step {
        let event_type = views::member_text_in(data, root, "type");
        match self.edited(data.as_bytes(), root, &event_type, Splice::new()) {
            Some(edited) => Step::Go(sse_bytes(kind, &edited)),
            None => Step::AsItCame,
        }
    }

    /// The edits an event (`src`, of type `event_kind`) written for the
    /// client takes (its numbers, its texts as released) and `splice`'s,
    /// made: the event's data written again, `None` when nothing changed.
    /// An item it completes is recorded.
    fn edited(
        &mut self,
        src: &[u8],
        root: &Node,
        event_kind: &str,
        mut splice: Splice,
    ) -> Option<Vec<u8>> {
        if let (Some(seq), Some(node)) = (self.seq, root.get(src, "sequence_number")) {
            if node.as_u64(src) != Some(seq) {
                splice.replace(node.span.clone(), seq.to_string());
            }
            self.seq = Some(seq + 1);
        }
        let index_node = root.get(src, "output_index");
        let upstream = index_node.and_then(|node| node.as_u64(src));
        if let (Some(upstream), Some(node)) = (upstream, index_node) {
            let client = self.client_index(upstream, event_kind == "response.output_item.added");
            if client != upstream {
                splice.replace(node.span.clone(), client.to_string());
            }
        }
        if let Some(upstream) = upstream {
            self.texts_as_released(&mut splice, src, root, event_kind, upstream);
        }
        // An event nothing was changed in goes out as it came (not
        // copied, not read again).
        let rendered =
            (!splice.is_empty()).then(|| splice.render(src).unwrap_or_else(|_| src.to_vec()));
        let data = rendered.as_deref().unwrap_or(src);
        if event_kind == "response.output_item.done" {
            if let Some(upstream) = upstream {
                let reread = rendered
                    .as_deref()
                    .map(|data| parse(data, &Limits::default()));
                let written = match &reread {
                    Some(Ok(written)) => Some(written),
                    Some(Err(_)) => None,
                    None => Some(root),
                };
                if let Some(item) = written.and_then(|w| w.get(data, "item")) {
                    let client = self.client_index(upstream, false);
                    self.done.insert(client, item.raw(data).to_vec());
                }
            }
        }
        rendered
    }

    /// The client's output index for the upstream's `upstream` (a new
    /// item takes the next one).
    fn client_index(&mut self, upstream: u64, added: bool) -> u64 {
        if let Some(client) = self.indexes.get(&upstream) {
            return *client;
        }
        let client = self.next_index;
        if added {
            self.indexes.insert(upstream, client);
            self.next_index += 1;
        }
        client
    }

    /// The edits that make every text an event carries (a part's `.done`,
    /// a part's `added` / `done`, a message item's `added` / `done`) what
    /// the client received of it: a text of no part the relay followed
    /// was never judged, so it goes out empty.
    fn texts_as_released(
        &self,
        splice: &mut Splice,
        src: &[u8],
        root: &Node,
        kind: &str,
        upstream: u64,
    ) {
        let parts = match self.items.get(&upstream) {
            Some(Item::Message(parts)) => Some(parts),
            _ => None,
        };
        let released = |at: u64| {
            parts
                .and_then(|p| p.get(&at))
                .map_or("", |p| p.released.as_str())
        };
        let mut set = |node: Option<&Node>, text: &str| {
            if let Some(node) = node {
                if node.text(src).as_deref() != Some(text) {
                    splice.replace(node.span.clone(), string_literal(text));
                }
            }
        };
        let content = || number(src, root, "content_index").unwrap_or(0);
        // What is added has no text yet: its text comes in its deltas.
        let added = last_word(kind) == "added";
        let released = |at: u64| if added { "" } else { released(at) };
        match kind {
            "response.output_text.done" => set(root.get(src, "text"), released(content())),
            "response.refusal.done" => set(root.get(src, "refusal"), released(content())),
            "response.content_part.added" | "response.content_part.done" => {
                let part = root.get(src, "part");
                for field in ["text", "refusal"] {
                    set(part.and_then(|p| p.get(src, field)), released(content()));
                }
            }
            "response.output_item.added" | "response.output_item.done" => {
                let item = root.get(src, "item");
                if item.is_none_or(|i| string(src, i, "type") != "message") {
                    return;
                }
                let items = item
                    .and_then(|i| i.get(src, "content"))
                    .and_then(Node::as_array)
                    .unwrap_or_default();
                for (at, part) in items.iter().enumerate() {
                    for field in ["text", "refusal"] {
                        set(part.get(src, field), released(at as u64));
                    }
                }
            }
            _ => {}
        }
    }

    /// The part an event of a text part is about.
    fn part(&mut self, src: &[u8], root: &Node) -> Option<&mut Part> {
        part_at(&mut self.items, place(src, root))
    }

    /// A text delta: through its part's gate, or held.
    fn text_delta(&mut self, kind: &str, data: &str, root: &Node) -> Step {
        let src = data.as_bytes();
        let text = views::member_text_in(data, root, "delta");
        let holding = self.judging.hold_all || !self.queue.is_empty();
        // A part no `content_part.added` opened (some servers leave it
        // out) opens with its first delta.
        let at = place(src, root);
        if let Some((index, content)) = at {
            self.open_part(index, content);
        }
        let exchange = self.judging.exchange;
        let session = &*self.judging.session;
        let Some(part) = part_at(&mut self.items, at) else {
            // A delta of no message the relay knows: what it carries
            // cannot be judged, so it does not go out.
            return Step::Go(String::new());
        };
        if holding {
            part.held.push_str(&text);
            self.queue.push(Queued::Delta(
                kind.to_owned(),
                src.to_vec(),
                part_key(src, root),
            ));
            return Step::Go(String::new());
        }
        let offered = session.offer(exchange, &mut part.gate, &text, false);
        if let Some(started) = offered.hold {
            session.publish_hold_edge(exchange, started);
        }
        let released = offered.release.map_or("", |r| &part.gate.text()[r]);
        part.released.push_str(released);
        self.streamed_text |= !released.is_empty();
        if released == text {
            // The usual case: the delta as it came (nothing copied).
            return self.write_event(kind, data, root);
        }
        if released.is_empty() {
            return Step::Go(String::new());
        }
        let released = released.to_owned();
        Step::Go(self.write_delta(kind, src, root, &released))
    }

    /// A held part's first delta event, carrying all of the part's text
    /// that was released (nothing when none was).
    fn write_part_delta(&mut self, kind: &str, src: &[u8], root: &Node) -> String {
        let text = self
            .part(src, root)
            .map(|p| p.released.clone())
            .unwrap_or_default();
        if text.is_empty() {
            return String::new();
        }
        self.write_delta(kind, src, root, &text)
    }

    /// A delta event written carrying `text` in place of its own: one more
    /// edit of the event as it came (rebuilt, and read again, only when it
    /// has no `delta` member to put `text` in).
    fn write_delta(&mut self, kind: &str, src: &[u8], root: &Node, text: &str) -> String {
        if let Some(delta) = root.get(src, "delta") {
            let mut splice = Splice::new();
            splice.replace(delta.span.clone(), string_literal(text));
            return self.write_edited(kind, src, root, splice);
        }
        let written = with_delta(src, root, text);
        let root = parse(&written, &Limits::default()).unwrap_or_else(|_| root.clone());
        self.write(kind, &written, &root)
    }

    /// A text part's `.done`: the gate's final check (what it still held
    /// goes out as a delta first), then the event with the part's text.
    fn text_done(&mut self, kind: &str, src: &[u8], root: &Node) -> String {
        let holding = self.judging.hold_all || !self.queue.is_empty();
        let exchange = self.judging.exchange;
        let (released, end) = {
            let session = &*self.judging.session;
            let Some(part) = part_at(&mut self.items, place(src, root)) else {
                return self.pass(kind, src, root);
            };
            let held = std::mem::take(&mut part.held);
            let offered = session.offer(exchange, &mut part.gate, &held, true);
            let released = offered
                .release
                .map(|r| part.gate.text()[r].to_owned())
                .unwrap_or_default();
            part.released.push_str(&released);
            part.whole = Some(part.gate.text().to_owned());
            let gate = std::mem::take(&mut part.gate);
            (released, session.finish_stream(exchange, gate))
        };
        if let Some(blocked) = end.blocked {
            self.blocked.get_or_insert(blocked);
        }
        if holding {
            self.queue
                .push(Queued::Event(kind.to_owned(), src.to_vec()));
            return String::new();
        }
        let mut out = String::new();
        if !released.is_empty() {
            self.streamed_text = true;
            let delta = delta_event(src, root, &released);
            if let Ok(delta_root) = parse(delta.1.as_bytes(), &Limits::default()) {
                out.push_str(&self.write_new(&delta.0, delta.1.as_bytes(), &delta_root));
            }
        }
        out.push_str(&self.write(kind, src, root));
        out
    }

    /// An event the gateway wrote: numbered and indexed like the others.
    fn write_new(&mut self, kind: &str, src: &[u8], root: &Node) -> String {
        let mut data = src.to_vec();
        if let Some(seq) = self.seq {
            data = views::rebuild_object(
                src,
                root,
                &[("sequence_number", Some(seq.to_string().into_bytes()))],
            );
        }
        let root = parse(&data, &Limits::default()).unwrap_or_else(|_| root.clone());
        // The number is now the next one: written as it reads.
        self.write(kind, &data, &root)
    }

    /// The response ends: open parts get their final check, the response
    /// is judged, what was held goes out as judged, then the terminal
    /// event with the output the client received.
    async fn finish(&mut self, kind: &str, src: &[u8], root: &Node) -> String {
        self.close_open_parts();
        let unjudged =
            super::super::exchange::counted(self.items.values().filter_map(|item| match item {
                Item::Other(kind) => Some(kind.as_str()),
                _ => None,
            }));
        self.judging
            .session
            .note_unjudged("model_response", &unjudged);
        let whole = self.text_so_far();
        let judged = self.judge().await;
        let vetoed = judged.vetoed_by.is_some();
        let mut out = String::new();
        if vetoed {
            self.queue.clear();
        } else {
            if self.judging.hold_all {
                self.take_judged_text(&judged);
            }
            out.push_str(&self.write_held(&judged));
        }
        let unsent = if vetoed && self.streamed_text {
            // The SDKs join every message's text with nothing between:
            // the notice begins a line of its own after what streamed.
            format!("\n{}", judged.content)
        } else if vetoed {
            judged.content.clone()
        } else if self.judging.hold_all {
            String::new()
        } else {
            match judged.content.strip_prefix(whole.as_str()) {
                Some(rest) => rest.to_owned(),
                None => format!("\n{}", judged.content),
            }
        };
        if !unsent.is_empty() {
            self.extra += 1;
            out.push_str(&self.write_message(self.extra, &new_item_id(), &unsent));
        }
        out.push_str(&self.response_event(kind, src, root, true));
        out
    }

    /// An event carrying the `response`, its `output` the items the client
    /// received (see [`Relay::with_output_received`]): written now when
    /// `now`, else passed (held behind a held call).
    fn response_event(&mut self, kind: &str, src: &[u8], root: &Node, now: bool) -> String {
        let rewritten = self.with_output_received(src, root).map(|data| {
            let reread = parse(&data, &Limits::default()).unwrap_or_else(|_| root.clone());
            (data, reread)
        });
        let (src, root) = rewritten
            .as_ref()
            .map_or((src, root), |(data, reread)| (data.as_slice(), reread));
        if now {
            self.write(kind, src, root)
        } else {
            self.pass(kind, src, root)
        }
    }

    /// An event carrying the `response` (`created`, `in_progress`, the
    /// terminal one) with its `output` the items the client received
    /// whole, unless it already says exactly that (`None`: as it came): a
    /// text the upstream put there and nowhere else was never judged.
    fn with_output_received(&self, src: &[u8], root: &Node) -> Option<Vec<u8>> {
        let node = root
            .get(src, "response")
            .and_then(|r| r.get(src, "output"))?;
        let output = array_from(self.done.values());
        // The same bytes (the usual case: the items as the upstream wrote
        // them) need no reading to be the same value.
        let same = output == node.raw(src)
            || serde_json::from_slice::<Value>(&output).ok()
                == serde_json::from_slice::<Value>(node.raw(src)).ok();
        if same {
            return None;
        }
        let mut splice = Splice::new();
        splice.replace(node.span.clone(), output);
        Some(splice.render(src).unwrap_or_else(|_| src.to_vec()))
    }

    /// The final check of each part the upstream never said was done:
    /// what it held is judged with the rest (and goes out only if held
    /// behind a call, at its place).
    fn close_open_parts(&mut self) {
        let exchange = self.judging.exchange;
        let session = &*self.judging.session;
        let mut blocked = None;
        for item in self.items.values_mut() {
            let Item::Message(parts) = item else { continue };
            for part in parts.values_mut().filter(|p| p.whole.is_none()) {
                let held = std::mem::take(&mut part.held);
                let offered = session.offer(exchange, &mut part.gate, &held, true);
                if let Some(range) = offered.release {
                    part.released.push_str(&part.gate.text()[range]);
                }
                part.whole = Some(part.gate.text().to_owned());
                let end = session.finish_stream(exchange, std::mem::take(&mut part.gate));
                blocked = blocked.or(end.blocked);
            }
        }
        if let Some(stream_block) = blocked {
            self.blocked.get_or_insert(stream_block);
        }
    }

    /// Every text part's text as the gates left it, in order.
    fn text_so_far(&self) -> String {
        self.items
            .values()
            .filter_map(|item| match item {
                Item::Message(parts) => Some(parts.values()),
                _ => None,
            })
            .flatten()
            .map(|part| {
                part.whole
                    .clone()
                    .unwrap_or_else(|| part.gate.text().to_owned())
            })
            .collect()
    }

    /// Held whole (`hold_all`), the parts take what the seams made of the
    /// reply's text, each in its place.
    fn take_judged_text(&mut self, judged: &JudgedChoice) {
        let mut parts: Vec<&mut Part> = self
            .items
            .values_mut()
            .filter_map(|item| match item {
                Item::Message(parts) => Some(parts.values_mut()),
                _ => None,
            })
            .flatten()
            .map(|part| &mut **part)
            .collect();
        let pieces: Vec<String> = parts
            .iter()
            .map(|p| p.whole.clone().unwrap_or_default())
            .collect();
        for (part, text) in parts
            .iter_mut()
            .zip(views::redistribute(&pieces, &judged.content))
        {
            part.released = text;
        }
    }

    /// The reply's seams on what streamed: its text as the gates left it,
    /// its calls as assembled.
    async fn judge(&mut self) -> JudgedChoice {
        let calls: Vec<ToolCall> = self
            .items
            .values()
            .filter_map(|item| match item {
                Item::Call(call) => Some(ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: views::arguments_of(&call.arguments),
                }),
                _ => None,
            })
            .collect();
        let content = self.text_so_far();
        self.judging
            .judge_streamed(content, calls, self.blocked.clone())
            .await
    }

    /// What was held, written as judged (see the module docs).
    fn write_held(&mut self, judged: &JudgedChoice) -> String {
        let mut verdicts: BTreeMap<u64, &CallVerdict> = BTreeMap::new();
        let mut calls = judged.calls.iter();
        for (index, item) in &self.items {
            if matches!(item, Item::Call(_)) {
                if let Some(verdict) = calls.next() {
                    verdicts.insert(*index, verdict);
                }
            }
        }
        let mut written_deltas: Vec<(u64, u64)> = Vec::new();
        let mut out = String::new();
        for queued in std::mem::take(&mut self.queue) {
            match queued {
                Queued::Delta(kind, data, key) => {
                    // A part's later deltas are not read: its first goes
                    // out carrying all of its text.
                    if written_deltas.contains(&key) {
                        continue;
                    }
                    let Ok(root) = parse(&data, &Limits::default()) else {
                        continue;
                    };
                    written_deltas.push(key);
                    out.push_str(&self.write_part_delta(&kind, &data, &root));
                }
                Queued::Event(kind, data) => {
                    let Ok(root) = parse(&data, &Limits::default()) else {
                        continue;
                    };
                    let event_kind = string(&data, &root, "type");
                    if event_kind == "response.output_text.delta"
                        || event_kind == "response.refusal.delta"
                    {
                        let key = part_key(&data, &root);
                        if written_deltas.contains(&key) {
                            continue;
                        }
                        written_deltas.push(key);
                        out.push_str(&self.write_part_delta(&kind, &data, &root));
                    } else {
                        out.push_str(&self.write(&kind, &data, &root));
                    }
                }
                Queued::Call(index) => {
                    let Some(Item::Call(call)) = self.items.remove(&index) else {
                        continue;
                    };
                    self.items
                        .insert(index, Item::Other("function_call".to_owned()));
                    match verdicts.get(&index) {
                        Some(CallVerdict::Pass(after)) => {
                            out.push_str(&self.write_call(&call, after));
                        }
                        Some(CallVerdict::Refused(_, line)) => {
                            let line = line.clone();
                            out.push_str(&self.write_message(index, &new_item_id(), &line));
                        }
                        None => {}
                    }
                }
            }
        }
        out
    }

    /// A passed call's events: as they came, or carrying its new
    /// arguments (one delta of them; `.done` and the item with them).
    fn write_call(&mut self, call: &Call, after: &ToolCall) -> String {
        let same = after.arguments.as_str() == views::arguments_of(&call.arguments).as_str();
        let arguments = views::arguments_text(&after.arguments);
        let mut out = String::new();
        let mut delta_written = false;
        for (kind, data) in &call.events {
            let Ok(root) = parse(data, &Limits::default()) else {
                continue;
            };
            if same {
                out.push_str(&self.write(kind, data, &root));
                continue;
            }
            let event_kind = string(data, &root, "type");
            let literal = string_literal(&arguments).into_bytes();
            let rewritten = if last_word(&event_kind) == "delta" {
                if std::mem::replace(&mut delta_written, true) {
                    continue;
                }
                views::rebuild_object(data, &root, &[("delta", Some(literal))])
            } else if last_word(&event_kind) == "done" && event_kind != "response.output_item.done"
            {
                views::rebuild_object(data, &root, &[(call.field, Some(literal))])
            } else if let Some(item) = root.get(data, "item") {
                let item = views::rebuild_object(data, item, &[(call.field, Some(literal))]);
                views::rebuild_object(data, &root, &[("item", Some(item))])
            } else {
                data.clone()
            };
            let rewritten_root = parse(&rewritten, &Limits::default()).unwrap_or(root);
            out.push_str(&self.write(kind, &rewritten, &rewritten_root));
        }
        out
    }

    /// A whole assistant message item of `text` at the upstream's output
    /// index `index` (a refused call's place, or one past the end): its
    /// added, part, delta, done events.
    fn write_message(&mut self, index: u64, id: &str, text: &str) -> String {
        let part = Box::new(Part {
            gate: StreamGate::default(),
            held: String::new(),
            released: text.to_owned(),
            whole: Some(text.to_owned()),
        });
        self.items
            .insert(index, Item::Message(BTreeMap::from([(0, part)])));
        let part = json!({"type": "output_text", "annotations": [], "text": ""});
        let whole = json!({"type": "output_text", "annotations": [], "text": text});
        let events = [
            (
                "response.output_item.added",
                json!({"item": message_item(id, "", "in_progress").as_object().map(|o| {
                    let mut o = o.clone();
                    o.insert("content".to_owned(), json!([]));
                    Value::Object(o)
                })}),
            ),
            (
                "response.content_part.added",
                json!({"item_id": id, "content_index": 0, "part": part}),
            ),
            (
                "response.output_text.delta",
                json!({"item_id": id, "content_index": 0, "delta": text, "logprobs": []}),
            ),
            (
                "response.output_text.done",
                json!({"item_id": id, "content_index": 0, "text": text, "logprobs": []}),
            ),
            (
                "response.content_part.done",
                json!({"item_id": id, "content_index": 0, "part": whole}),
            ),
            (
                "response.output_item.done",
                json!({"item": message_item(id, text, "completed")}),
            ),
        ];
        let mut out = String::new();
        for (kind, mut body) in events {
            body["type"] = json!(kind);
            body["output_index"] = json!(index);
            if let Some(seq) = self.seq {
                body["sequence_number"] = json!(seq);
            }
            let data = body.to_string().into_bytes();
            let Ok(root) = parse(&data, &Limits::default()) else {
                continue;
            };
            out.push_str(&self.write(kind, &data, &root));
        }
        out
    }
}

/// The delta event (its type and data) that carries `text` for the part
/// a `.done` event (`src`) is about.
fn delta_event(src: &[u8], root: &Node, text: &str) -> (String, String) {
    let delta_kind = string(src, root, "type").replace(".done", ".delta");
    let mut body = json!({
        "type": delta_kind,
        "item_id": string(src, root, "item_id"),
        "output_index": number(src, root, "output_index").unwrap_or(0),
        "content_index": number(src, root, "content_index").unwrap_or(0),
        "delta": text,
    });
    if delta_kind == "response.output_text.delta" {
        body["logprobs"] = json!([]);
    }
    if let Some(seq) = number(src, root, "sequence_number") {
        body["sequence_number"] = json!(seq);
    }
    (delta_kind, body.to_string())
}
