//! What a client wire is to the gateway: how its request is read into
//! views and written back, how a reply is read and written back, how its
//! stream is relayed, and how the gateway's own answers look in it. The
//! gateway's handling (keys, caps, models, slots, the exchange) is written
//! once over this trait; each wire is a module of its own.

use super::events::StreamWire;
use crate::agent::{Choice, JudgedChoice, RelayRequest};
use crate::jsondoc::Node;
use crate::providers::Usage;
use axum::http::StatusCode;
use serde_json::Value;
use std::ops::Range;

/// Why the gateway answers with an error of its own, whatever the wire.
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
    /// The route is unknown (404).
    NotFound,
    /// The body is over the cap (413).
    TooLarge,
    /// The headers are over the cap (431).
    HeadersTooLarge,
    /// Every request slot is taken, or the client's share, or the
    /// gateway's buffer of request bodies is full (429).
    Busy,
    /// A rate limit (a pack's pause) is reached for this client (429,
    /// with its `retry-after`).
    RateLimited,
    /// The body did not arrive in time (408).
    Timeout,
    /// The upstream gave no answer, or one the gateway cannot read (502).
    Upstream,
    /// A pack could not judge what the exchange carried (an error, a
    /// timeout, a pack restarting or quarantined) and it was held back
    /// (503): nothing unjudged passes.
    Unjudged,
}

impl Refusal {
    /// The status the refusal is sent with.
    pub(super) fn status(self) -> StatusCode {
        match self {
            Refusal::BadRequest => StatusCode::BAD_REQUEST,
            Refusal::BadKey => StatusCode::UNAUTHORIZED,
            Refusal::Blocked => StatusCode::FORBIDDEN,
            Refusal::UnknownModel | Refusal::NotFound => StatusCode::NOT_FOUND,
            Refusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Refusal::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Refusal::Busy | Refusal::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Refusal::Timeout => StatusCode::REQUEST_TIMEOUT,
            Refusal::Upstream => StatusCode::BAD_GATEWAY,
            Refusal::Unjudged => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Whether a client should not try again as it is: policy and input
    /// refusals say `x-should-retry: false` (Claude Code retries a 401
    /// for minutes otherwise).
    pub(super) fn final_answer(self) -> bool {
        !matches!(
            self,
            Refusal::Busy
                | Refusal::RateLimited
                | Refusal::Timeout
                | Refusal::Upstream
                | Refusal::Unjudged
        )
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
pub(super) trait Wire: StreamWire + Send + Sync + 'static {
    /// Which wire it is.
    const KIND: Kind;
    /// Its name in lines the operator reads (`chat completions`).
    const NAME: &'static str;
    /// Its endpoint under the upstream's base URL (`/chat/completions`).
    const PATH: &'static str;
    /// How the ids of its requests begin (what the audit lines name).
    const ID_PREFIX: &'static str;
    /// Whether a request asks the model for a reply. One that does not
    /// (counting tokens, embedding text) is judged on the request seams in
    /// a session of its own (it is no turn of a conversation, and no pack
    /// counts it against one), and its answer passes as it came.
    const MODEL_CALL: bool = true;
    /// Whether its responses chain (a request names the one it continues):
    /// a request that names no conversation then starts one of its own,
    /// which the requests continuing its response resume (see
    /// [`chains`](super::chains)).
    const CHAINED: bool = false;
    /// A request read into views.
    type Read: RequestView;
    /// A reply read into views.
    type Reply: ReplyView;

    /// The error body of the gateway's own `refusal` saying `message`.
    fn error(refusal: Refusal, message: &str) -> Value;
}

/// A wire's request read into views: what the seams see of it, and how
/// their changes are written back.
pub(super) trait RequestView: Sized + Send + Sync {
    /// Reads a request (`root` parsed from `src`); one line naming what
    /// is wrong otherwise.
    fn read(src: &[u8], root: &Node) -> Result<Self, String>;
    /// What the seams see of it.
    fn request(&self) -> &RelayRequest;
    /// The request with the seams' changes written back.
    fn write(&self, src: &[u8], root: &Node, judged: &RelayRequest) -> Result<Vec<u8>, String>;
    /// The response it continues (Responses' `previous_response_id`),
    /// when its wire chains them.
    fn previous(&self) -> Option<&str> {
        None
    }
}

/// A wire's reply read into views: what the seams see of it, and how
/// their judgements are written back.
pub(super) trait ReplyView: Sized + Send {
    /// Reads a reply; one line when it cannot be read.
    fn read(src: &[u8], root: &Node) -> Result<Self, String>;
    /// Its choices, as the seams see them.
    fn choices(&self) -> Vec<Choice>;
    /// The tokens it reports.
    fn usage(&self) -> Usage;
    /// The kinds of what it carries that no pack reads (Responses'
    /// `reasoning` and built-in tools' items), one entry each.
    fn unjudged(&self) -> Vec<&str> {
        Vec::new()
    }
    /// The id a later request can continue it by, when its wire chains
    /// responses.
    fn reply_id(&self) -> Option<String> {
        None
    }
    /// The reply with each choice's judgement written back.
    fn write(&self, src: &[u8], root: &Node, judged: &[JudgedChoice]) -> Result<Vec<u8>, String>;
}

/// A reply of one choice (Messages, Responses) read: what the seams see
/// of it, the tokens it reports (its `usage`'s `input_tokens` and
/// `output_tokens`), and the wire's view `V` of where its texts and calls
/// live.
#[derive(Debug, Clone)]
pub(super) struct OneChoice<V> {
    /// What the seams see: its one choice.
    pub(super) choice: Choice,
    usage: Usage,
    /// Where its texts and calls live.
    pub(super) view: V,
}

/// What differs between the wires whose replies hold one choice.
pub(super) trait OneChoiceView: Sized + Send {
    /// Reads a reply (`root` parsed from `src`): the view, and the choice
    /// the seams see; one line when it cannot be read (such a reply is
    /// never passed on unjudged).
    fn read(src: &[u8], root: &Node) -> Result<(Self, Choice), String>;
    /// The reply with `judged` (the judgement of `choice`, as read)
    /// written back.
    fn write(&self, src: &[u8], choice: &Choice, judged: &JudgedChoice) -> Result<Vec<u8>, String>;
    /// See [`ReplyView::unjudged`].
    fn unjudged(&self) -> Vec<&str> {
        Vec::new()
    }
    /// See [`ReplyView::reply_id`].
    fn reply_id(&self) -> Option<String> {
        None
    }
}

impl<V: OneChoiceView> ReplyView for OneChoice<V> {
    fn read(src: &[u8], root: &Node) -> Result<Self, String> {
        let (view, choice) = V::read(src, root)?;
        Ok(OneChoice {
            choice,
            usage: super::views::usage_of(src, root.get(src, "usage")),
            view,
        })
    }

    fn choices(&self) -> Vec<Choice> {
        vec![self.choice.clone()]
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn unjudged(&self) -> Vec<&str> {
        self.view.unjudged()
    }

    fn reply_id(&self) -> Option<String> {
        self.view.reply_id()
    }

    /// The reply with its choice's judgement written back; with none, as
    /// it came.
    fn write(&self, src: &[u8], _root: &Node, judged: &[JudgedChoice]) -> Result<Vec<u8>, String> {
        match judged.first() {
            Some(judged) => self.view.write(src, &self.choice, judged),
            None => Ok(src.to_vec()),
        }
    }
}

/// Where an upstream error body (`{"error": {"message": …}}` on both
/// wires) says what went wrong, and what it says.
pub(super) fn error_message(src: &[u8], root: &Node) -> Option<(Range<usize>, String)> {
    let message = root.get(src, "error")?.get(src, "message")?;
    Some((message.span.clone(), message.text(src)?.into_owned()))
}

/// An upstream error body with its message judged as the model's text is
/// (a secret in it is redacted, a gate's block puts its notice there);
/// every other byte as it came. A body that is not JSON is judged whole.
pub(super) fn judged_error(
    session: &crate::agent::AgentSession,
    exchange: &crate::agent::Exchange,
    bytes: &[u8],
) -> Vec<u8> {
    judged_message(session, exchange, bytes, &["error", "message"])
}

/// A JSON body with the string at `path` (an error's message) judged as
/// the model's text is; every other byte as it came. A body that is not
/// JSON is judged whole.
pub(super) fn judged_message(
    session: &crate::agent::AgentSession,
    exchange: &crate::agent::Exchange,
    bytes: &[u8],
    path: &[&str],
) -> Vec<u8> {
    use crate::jsondoc::{parse, string_literal, Limits, Splice};
    let Ok(root) = parse(bytes, &Limits::default()) else {
        return session
            .judge_text(exchange, &String::from_utf8_lossy(bytes))
            .into_bytes();
    };
    let found = path
        .iter()
        .try_fold(&root, |node, key| node.get(bytes, key))
        .and_then(|node| Some((node.span.clone(), node.text(bytes)?.into_owned())));
    let Some((span, message)) = found else {
        return bytes.to_vec();
    };
    let judged = session.judge_text(exchange, &message);
    if judged == message {
        return bytes.to_vec();
    }
    let mut splice = Splice::new();
    splice.replace(span, string_literal(&judged));
    splice.render(bytes).unwrap_or_else(|_| bytes.to_vec())
}

/// A client's word, cut short and made printable for an error line.
pub(super) fn one_word(text: &str) -> String {
    crate::types::one_line(&text.chars().take(40).collect::<String>())
}
