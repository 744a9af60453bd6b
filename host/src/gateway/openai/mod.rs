//! The `OpenAI` chat-completions wire as the gateway speaks it
//! (`POST /v1/chat/completions`): views of the client's request and of
//! the upstream's reply or stream, and the gateway's own errors in its
//! shape. A veto is the notice as the choice's text with
//! `finish_reason: content_filter`; a refused tool call is dropped and its
//! refusal line joins the text (`finish_reason: stop` when no call is
//! left).

mod events;
mod reply;
mod request;

use super::request_views::RequestViews;
use super::wire::{Kind, Refusal, Wire};
use serde_json::{json, Value};

/// The chat-completions wire.
pub(super) struct OpenAi;

impl Wire for OpenAi {
    const KIND: Kind = Kind::OpenAi;
    const NAME: &'static str = "chat completions";
    const PATH: &'static str = "/chat/completions";
    const ID_PREFIX: &'static str = "chatcmpl-";
    type Read = RequestViews<Self>;
    type Reply = reply::ReadReply;

    fn error(refusal: Refusal, message: &str) -> Value {
        let (kind, code) = match refusal {
            Refusal::BadRequest => ("invalid_request_error", None),
            Refusal::BadKey => ("authentication_error", Some("invalid_api_key")),
            Refusal::Blocked => ("permission_error", Some("blocked_by_policy")),
            Refusal::UnknownModel => ("invalid_request_error", Some("model_not_found")),
            Refusal::NotFound => ("invalid_request_error", Some("not_found")),
            Refusal::TooLarge => ("invalid_request_error", Some("body_too_large")),
            Refusal::HeadersTooLarge => ("invalid_request_error", Some("headers_too_large")),
            Refusal::Busy => ("rate_limit_error", Some("gateway_busy")),
            Refusal::RateLimited => ("rate_limit_error", Some("rate_limit_exceeded")),
            Refusal::Timeout => ("invalid_request_error", Some("request_timeout")),
            Refusal::Upstream => ("upstream_error", Some("upstream_failed")),
            Refusal::Unjudged => ("server_error", Some("policy_unavailable")),
        };
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
    }
}
