//! The Anthropic Messages wire as the gateway speaks it
//! (`POST /v1/messages`): views of the client's request and of the
//! upstream's reply or stream, and the gateway's own errors in its shape.
//! A veto is the notice as the reply's text with `stop_reason: end_turn`
//! (with `refusal`, Claude Code shows its own usage-policy message, not the
//! notice); a refused tool call's block becomes a text block of its
//! refusal line (`end_turn` when no call is left).

mod events;
mod reply;
mod request;

use super::request_views::RequestViews;
use super::wire::{Kind, OneChoice, Refusal, Wire};
use serde_json::{json, Value};

/// `max_tokens` the gateway's own calls send (a gate retry, a compaction's
/// summary): the Messages API requires it.
pub(super) const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The Messages wire.
pub(super) struct Anthropic;

impl Wire for Anthropic {
    const KIND: Kind = Kind::Anthropic;
    const NAME: &'static str = "messages";
    const PATH: &'static str = "/v1/messages";
    const ID_PREFIX: &'static str = "msg_";
    type Read = RequestViews<Self>;
    type Reply = OneChoice<reply::View>;

    fn error(refusal: Refusal, message: &str) -> Value {
        let kind = match refusal {
            Refusal::BadRequest | Refusal::HeadersTooLarge | Refusal::Timeout => {
                "invalid_request_error"
            }
            Refusal::UnknownModel | Refusal::NotFound => "not_found_error",
            Refusal::BadKey => "authentication_error",
            Refusal::Blocked => "permission_error",
            Refusal::TooLarge => "request_too_large",
            Refusal::Busy | Refusal::RateLimited => "rate_limit_error",
            Refusal::Upstream | Refusal::Unjudged => "api_error",
        };
        json!({"type": "error", "error": {"type": kind, "message": message}})
    }
}
