//! What a client wire is to the gateway: how its request body is read,
//! and how a relayed reply, a stream and a refusal are written in it. The
//! gateway's handling (keys, caps, models, slots, the relay) is written
//! once over this trait; each wire is a module of its own.

use crate::agent::{Relay, Reply};
use axum::http::StatusCode;
use serde_json::Value;

/// A request body, read.
#[derive(Debug)]
pub(super) struct Parsed {
    /// The model the client asked for.
    pub(super) model: String,
    /// What to relay.
    pub(super) relay: Relay,
    /// A stream's last event carries the usage (`OpenAI`'s
    /// `stream_options.include_usage`; always on a Messages stream).
    pub(super) include_usage: bool,
}

/// What every event of one reply repeats.
#[derive(Debug)]
pub(super) struct Head {
    /// The reply's id (`chatcmpl-…`, `msg_…`).
    pub(super) id: String,
    /// The model, as the client asked for it.
    pub(super) model: String,
    /// Unix seconds.
    pub(super) created: u64,
}

/// Why the gateway answers with an error, whatever the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The body is not a request of this wire (400).
    BadRequest,
    /// Client keys are configured and this one is not accepted (401).
    BadKey,
    /// A gate blocked the request before the upstream was asked (403).
    Blocked,
    /// The model is not one the gateway serves (404).
    UnknownModel,
    /// The body is over the cap (413).
    TooLarge,
    /// The headers are over the cap (431).
    HeadersTooLarge,
    /// Every request slot is taken (429).
    Busy,
    /// The upstream failed (502).
    Upstream,
}

impl Refusal {
    /// The status the refusal is sent with.
    pub(super) fn status(self) -> StatusCode {
        match self {
            Refusal::BadRequest => StatusCode::BAD_REQUEST,
            Refusal::BadKey => StatusCode::UNAUTHORIZED,
            Refusal::Blocked => StatusCode::FORBIDDEN,
            Refusal::UnknownModel => StatusCode::NOT_FOUND,
            Refusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Refusal::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Refusal::Busy => StatusCode::TOO_MANY_REQUESTS,
            Refusal::Upstream => StatusCode::BAD_GATEWAY,
        }
    }
}

/// Which wire a request came in on (and so which upstream it goes to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `OpenAI` chat completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// A client wire.
pub(super) trait Wire: Send + Sync + 'static {
    /// Which wire it is.
    const KIND: Kind;
    /// Its name in lines the operator reads (`chat completions`).
    const NAME: &'static str;
    /// The prefix of its reply ids.
    const ID_PREFIX: &'static str;

    /// Reads a request body.
    fn parse(body: &[u8]) -> Result<Parsed, String>;

    /// A whole judged reply.
    fn reply(reply: &Reply, head: &Head) -> Value;

    /// The error body of `refusal` saying `message`.
    fn error(refusal: Refusal, message: &str) -> Value;

    /// The events that open a stream.
    fn stream_start(head: &Head) -> String;

    /// The event carrying released `text`.
    fn stream_text(head: &Head, text: &str) -> String;

    /// The events that close a stream once the reply is judged: what of
    /// its text was not `sent` yet, its tool calls, why it ended, its
    /// usage (when `include_usage`), and the wire's end marker.
    fn stream_end(head: &Head, reply: &Reply, sent: &str, include_usage: bool) -> String;

    /// The event that ends a stream whose relay failed, saying `message`.
    fn stream_error(message: &str) -> String;
}

/// The text the client reads: the reply's, then one line per refused call
/// (the model proposed it; a gate refused it).
pub(super) fn shown_text(reply: &Reply) -> String {
    let mut text = reply.content.clone();
    for (_, line) in &reply.refused {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(line);
    }
    text
}

/// What of the reply's shown text has not been streamed yet, when `sent`
/// went out: the rest, or — when a gate's notice stands for what was
/// streamed — the notice, on a line of its own after what the client has.
pub(super) fn unsent(reply: &Reply, sent: &str) -> String {
    let text = shown_text(reply);
    match text.strip_prefix(sent) {
        Some(rest) => rest.to_owned(),
        None if sent.is_empty() => text,
        None => format!("\n{text}"),
    }
}

/// A client's word, cut short and made printable for an error line.
pub(super) fn one_word(text: &str) -> String {
    crate::types::one_line(&text.chars().take(40).collect::<String>())
}

/// The text of an array of content parts (`{"type": "text", "text": …}`).
/// Parts of any other type are refused rather than dropped: a gate never
/// judges what it cannot see. `what` names them in the error (`content
/// parts`, `content blocks`).
pub(super) fn text_of(parts: &[Value], what: &str) -> Result<String, String> {
    let mut text = String::new();
    for part in parts {
        match (part["type"].as_str(), part["text"].as_str()) {
            (Some("text"), Some(piece)) => text.push_str(piece),
            (Some(kind), _) => {
                return Err(format!(
                    "{what} of type '{}' are not supported by this gateway",
                    one_word(kind)
                ))
            }
            (None, _) => return Err(format!("each of the {what} needs a `type`")),
        }
    }
    Ok(text)
}
