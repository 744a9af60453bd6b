//! The requests that send text upstream without asking the model for a
//! reply: Anthropic's `POST /v1/messages/count_tokens` and `OpenAI`'s
//! `POST /v1/embeddings`. Their text passes the request seams (`context`,
//! `provider_request`), so a redactor's change reaches the upstream and an
//! input gate's block is a 403 before it is asked; each runs in a session
//! of its own (no pack counts it as a model call of a conversation), and
//! the answer (a count, vectors) passes as it came.
//!
//! | wire | what the seams see | place |
//! |---|---|---|
//! | `count_tokens` | what a Messages request's seams see (system, every message, tools) | as on `/v1/messages` |
//! | `embeddings` `input`: a string, or an array of strings | a user message per string | each string |
//! | `embeddings` `input` of token ids | a user message holding a block of them, not judged | — |
//!
//! A change of shape (an input added or dropped) cannot be sent: an
//! embeddings answer holds one vector per input the client sent.

use super::events::{sse, StreamContext, StreamWire, Streamed};
use super::views::{self, Placed, Slot};
use super::wire::{Kind, Refusal, ReplyView, RequestView, Wire};
use super::{Anthropic, OpenAi};
use crate::agent::{Choice, JudgedChoice, RelayRequest};
use crate::jsondoc::{Kind as NodeKind, Node, Splice};
use crate::providers::Usage;
use crate::types::{Message, ToolList};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// `POST /v1/messages/count_tokens`: a Messages request, counted.
pub(super) struct CountTokens;

/// `POST /v1/embeddings`.
pub(super) struct Embeddings;

/// An embeddings request read.
#[derive(Debug, Clone)]
pub(super) struct EmbeddingsRead {
    request: RelayRequest,
    placed: Vec<Placed>,
}

/// An answer that passes as it came: nothing in it is read.
#[derive(Debug, Clone, Copy)]
pub(super) struct AsItCame;

/// A stream of an input-only request (none is expected): its events as
/// they came.
async fn pass_events(cx: StreamContext<'_>) -> Streamed {
    let StreamContext { mut pump, out, .. } = cx;
    let mut streamed = Streamed::default();
    while let Some(event) = pump.next(out, &mut streamed).await {
        out.send(sse(&event.kind, &event.data)).await;
    }
    streamed
}

impl StreamWire for CountTokens {
    fn relay(cx: StreamContext<'_>) -> Pin<Box<dyn Future<Output = Streamed> + Send + '_>> {
        Box::pin(pass_events(cx))
    }
}

impl StreamWire for Embeddings {
    fn relay(cx: StreamContext<'_>) -> Pin<Box<dyn Future<Output = Streamed> + Send + '_>> {
        Box::pin(pass_events(cx))
    }
}

impl Wire for CountTokens {
    const KIND: Kind = Kind::Anthropic;
    const NAME: &'static str = "count tokens";
    const PATH: &'static str = "/v1/messages/count_tokens";
    const ID_PREFIX: &'static str = "count_";
    const MODEL_CALL: bool = false;
    type Read = <Anthropic as Wire>::Read;
    type Reply = AsItCame;

    fn error(refusal: Refusal, message: &str) -> Value {
        Anthropic::error(refusal, message)
    }
}

impl Wire for Embeddings {
    const KIND: Kind = Kind::OpenAi;
    const NAME: &'static str = "embeddings";
    const PATH: &'static str = "/embeddings";
    const ID_PREFIX: &'static str = "embd-";
    const MODEL_CALL: bool = false;
    type Read = EmbeddingsRead;
    type Reply = AsItCame;

    fn error(refusal: Refusal, message: &str) -> Value {
        OpenAi::error(refusal, message)
    }
}

impl ReplyView for AsItCame {
    fn read(_src: &[u8], _root: &Node) -> Result<Self, String> {
        Ok(AsItCame)
    }

    fn choices(&self) -> Vec<Choice> {
        Vec::new()
    }

    fn usage(&self) -> Usage {
        Usage::default()
    }

    fn write(&self, src: &[u8], _root: &Node, _judged: &[JudgedChoice]) -> Result<Vec<u8>, String> {
        Ok(src.to_vec())
    }
}

impl RequestView for EmbeddingsRead {
    fn read(src: &[u8], root: &Node) -> Result<Self, String> {
        let members = root
            .as_object()
            .ok_or("the request body is not a JSON object")?;
        let model = views::model_of(src, root)?;
        let input = root.get(src, "input").ok_or("`input` is required")?;
        let mut messages = Vec::new();
        let mut placed = Vec::new();
        let mut text = |node: &Node, wire: usize| {
            messages.push(Message::user(views::text(src, node).unwrap_or_default()));
            placed.push(Placed {
                wire,
                slots: vec![Slot::Content(node.span.clone())],
                calls: Vec::new(),
            });
        };
        match &input.kind {
            NodeKind::String { .. } => text(input, 0),
            NodeKind::Array(items)
                if items
                    .iter()
                    .all(|i| matches!(i.kind, NodeKind::String { .. })) =>
            {
                for (at, item) in items.iter().enumerate() {
                    text(item, at);
                }
            }
            NodeKind::Array(items)
                if items
                    .iter()
                    .all(|i| !matches!(i.kind, NodeKind::String { .. })) =>
            {
                // Token ids: no text the seams can read.
                messages.push(Message {
                    blocks: vec![views::opaque_block(src, input, "tokens")],
                    ..Message::user(String::new())
                });
                placed.push(Placed::default());
            }
            _ => {
                return Err("`input` must be a string, an array of strings or token ids".to_owned())
            }
        }
        Ok(EmbeddingsRead {
            request: RelayRequest {
                model,
                messages,
                tools: ToolList::new(Vec::new()),
                kwargs: views::kwargs_of(src, members, &["model", "input"]),
                headers: crate::types::Headers::default(),
            },
            placed,
        })
    }

    fn request(&self) -> &RelayRequest {
        &self.request
    }

    fn write(&self, src: &[u8], root: &Node, judged: &RelayRequest) -> Result<Vec<u8>, String> {
        let before = &self.request;
        if !views::all_same_shape(&before.messages, &judged.messages) {
            return Err(
                "a policy added or dropped an input: an embeddings request keeps one vector per input, so it is not sent"
                    .to_owned(),
            );
        }
        let mut splice = Splice::new();
        views::write_texts(
            &mut splice,
            &before.messages,
            &judged.messages,
            &self.placed,
        );
        views::write_members(src, root, splice, &views::envelope_changes(before, judged))
    }
}
