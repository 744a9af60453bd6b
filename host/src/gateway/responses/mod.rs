//! The `OpenAI` Responses wire as the gateway speaks it (`POST
//! /v1/responses`, the only wire of the Codex CLI and the default of the
//! Agents SDK and the AI SDK's `openai(...)` models): views of the
//! client's request and of the upstream's response or event stream, and
//! the gateway's own errors in its shape (`{"error": {"message", "type",
//! "param", "code"}}`, as on chat completions).
//!
//! It goes to the `[serve.openai]` upstream: `OpenAI` and the servers that
//! speak its wires serve both under one base URL and one key, and the
//! clients that speak Responses are given one base URL for both.
//!
//! A veto is a response whose only `message` item holds the notice (its
//! `status` the upstream's: an `incomplete` response is an error to Codex
//! and to the SDKs' stream helpers, which would hide the notice). A
//! refused call is an assistant `message` item of its refusal line in the
//! call's place: the client runs nothing, reads why, and its agent loop
//! ends the turn as after any answer. `previous_response_id` and `store`
//! go upstream as written; the gateway remembers which conversation each
//! response id belongs to, so a client continuing a chain without a
//! session header or key stays in that conversation's budgets.

mod events;
mod reply;
mod request;

use super::request_views::RequestViews;
use super::wire::{Kind, OneChoice, Refusal, Wire};
use serde_json::Value;

/// The Responses wire.
pub(super) struct Responses;

impl Wire for Responses {
    const KIND: Kind = Kind::OpenAi;
    const NAME: &'static str = "responses";
    const PATH: &'static str = "/responses";
    const ID_PREFIX: &'static str = "resp_";
    const CHAINED: bool = true;
    type Read = RequestViews<Self>;
    type Reply = OneChoice<reply::View>;

    fn error(refusal: Refusal, message: &str) -> Value {
        super::OpenAi::error(refusal, message)
    }
}
