//! Typed, borrowed inputs: thin wrappers over the ABI views, so reading a
//! value costs nothing and pack code never names an ABI type.

use super::facts;
use super::values::{Block, Message, Request, ToolCall, ToolResult};
use crate::abi::{
    BlockView, HeaderView, MessageView, RequestView, SessionView, ToolCallView, ToolResultView,
};
use abi_stable::std_types::{RSlice, RStr};

fn non_empty(text: RStr<'_>) -> Option<&str> {
    let text = text.as_str();
    (!text.is_empty()).then_some(text)
}

/// Where an interceptor's notice waits for its decision (one per call, on
/// the SDK's stack).
pub(crate) type NoticeSlot = std::cell::Cell<Option<String>>;

/// The conversation an interceptor call belongs to.
#[derive(Clone, Copy)]
pub struct Session<'a>(pub(crate) &'a SessionView<'a>, pub(crate) &'a NoticeSlot);

impl<'a> Session<'a> {
    /// Attaches a user-facing notice to the decision this call returns,
    /// whatever it is (e.g. `Content blocked: contains prohibited terms.`
    /// beside a block, or a warning beside an allow). The host shows it to
    /// the user — a `notice` event, a line of its own in the readable
    /// transcript — and never sends it to the model. A second call replaces
    /// the first.
    pub fn notice(&self, text: impl Into<String>) {
        self.1.set(Some(text.into()));
    }
    /// Stable id of the conversation; key per-conversation state by it.
    #[must_use]
    pub fn id(&self) -> &'a str {
        self.0.session_id.as_str()
    }
    /// True while the host asks the model again for an `output` gate (a
    /// gate retry): a gate that counts model calls may skip it.
    #[must_use]
    pub fn is_gate_retry(&self) -> bool {
        facts::has(self.0.extension_json.as_str(), &facts::GATE_RETRY)
    }
    /// True when the host relays a conversation it did not run (a gateway
    /// in front of a client's own agent): the client wrote the whole
    /// history, so every message of every role is new input to a gate
    /// that judges input, and so are the tools' descriptions.
    #[must_use]
    pub fn is_relayed(&self) -> bool {
        facts::has(self.0.extension_json.as_str(), &facts::RELAYED)
    }
    /// Zero-based index of the current user turn.
    #[must_use]
    pub fn turn_index(&self) -> u64 {
        self.0.turn_index
    }
    /// Provider calls already made in this turn.
    #[must_use]
    pub fn provider_calls_this_turn(&self) -> u64 {
        self.0.provider_calls_this_turn
    }
    /// Tool calls already processed in this turn.
    #[must_use]
    pub fn tool_calls_this_turn(&self) -> u64 {
        self.0.tool_calls_this_turn
    }
    /// Input tokens reported so far in the session.
    #[must_use]
    pub fn input_tokens(&self) -> u64 {
        self.0.input_tokens
    }
    /// Output tokens reported so far in the session.
    #[must_use]
    pub fn output_tokens(&self) -> u64 {
        self.0.output_tokens
    }
    /// Who the provider call being prepared is for: `agent` (the loop's
    /// own call), `gate_retry` (an `output` gate asked the model again) or
    /// `compaction` (the summary call that shortens a long history). A
    /// gate that counts or judges the user's requests skips the other two.
    #[must_use]
    pub fn source(&self) -> &'a str {
        facts::string_after(self.0.extension_json.as_str(), &facts::SOURCE).unwrap_or("agent")
    }
    /// The provider call being prepared (on `provider_request`), as the
    /// host numbers it: unique in the host's process, and the same when
    /// the host offers the request again (after a pause or a compaction),
    /// so a pack that counts calls in a shared store counts each once.
    /// `None` from a host that does not say.
    #[must_use]
    pub fn call_id(&self) -> Option<u64> {
        facts::number_after(self.0.extension_json.as_str(), &facts::CALL, |id| id != 0)
    }
    /// What the last provider call of this session was charged, and for
    /// whom (`(source, usage)`), as the host said after the call: on
    /// `model_response` it is the reply being judged. A pack that adds
    /// each call to a counter other processes share reads it there. `None`
    /// before the first call, or from a host that does not say.
    #[must_use]
    pub fn last_call(&self) -> Option<(String, SourceUsage)> {
        // Its members named one by one (not `SourceUsage` flattened in,
        // which buffers the whole object before reading it); the facts
        // after it are not read.
        #[derive(Default, serde::Deserialize)]
        #[serde(default)]
        struct LastCall {
            charged_to: String,
            input_tokens: u64,
            output_tokens: u64,
            cost_usd: f64,
        }
        let last: Option<LastCall> = facts::member(self.0.extension_json.as_str(), "last_call")?;
        last.map(|last| {
            let usage = SourceUsage {
                input_tokens: last.input_tokens,
                output_tokens: last.output_tokens,
                cost_usd: last.cost_usd,
            };
            (last.charged_to, usage)
        })
    }
    /// How the host knows what the last provider call was billed: the
    /// provider's report ([`Billing::Reported`]: what
    /// [`Session::last_call`] says), nothing billed, or not known. A host
    /// that relays a client's requests (a gateway) ends each upstream call
    /// this way, however its exchange ended — answered, refused, blocked
    /// after a gate reserved for it, or its client gone — so a pack that
    /// reserved an estimate when the call was judged settles it here.
    /// [`Billing::Reported`] from a host that does not say.
    #[must_use]
    pub fn last_call_billing(&self) -> Billing {
        #[derive(serde::Deserialize)]
        struct Billed<'a> {
            #[serde(borrow)]
            billed: Option<std::borrow::Cow<'a, str>>,
        }
        let last: Option<Option<Billed<'_>>> =
            facts::member(self.0.extension_json.as_str(), "last_call");
        match last.flatten().and_then(|last| last.billed).as_deref() {
            Some("none") => Billing::Nothing,
            Some("unknown") => Billing::Unknown,
            _ => Billing::Reported,
        }
    }
    /// The host's price of `model` (USD per million tokens), read from
    /// its price table alone: what [`Session::usage`]'s `prices` says of
    /// it, for a pack that needs one price and not the whole of the facts.
    /// `None` when the host prices it not.
    #[must_use]
    pub fn price(&self, model: &str) -> Option<Price> {
        facts::entry(self.0.extension_json.as_str(), "prices", model)
    }
    /// What the host says beyond the fixed facts: the call's source, the
    /// session's charges per source, its cost and the host's price table.
    /// A host that says nothing gives [`Usage::default`] (source `agent`,
    /// nothing charged, no prices).
    #[must_use]
    pub fn usage(&self) -> Usage {
        serde_json::from_str(self.0.extension_json.as_str()).unwrap_or_default()
    }
}

/// How the host knows what a provider call was billed (see
/// [`Session::last_call_billing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Billing {
    /// The provider reported its usage: [`Session::last_call`] is what it
    /// billed.
    Reported,
    /// Nothing was billed: the call never left (a gate blocked it, the
    /// provider could not be reached), or the provider refused it.
    Nothing,
    /// It went, and what it was billed is not known: the reply broke off
    /// or reported no usage.
    Unknown,
}

/// The session's charges as the host reports them (see [`Session::usage`]).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Who the provider call being prepared is for: `agent` (the loop),
    /// `gate_retry` (an `output` gate asked again), `compaction` (the
    /// summary call of a compaction).
    pub source: String,
    /// The model the call goes to unless an interceptor changes it.
    pub model: String,
    /// The session's cost so far, in USD.
    pub cost_usd: f64,
    /// Tokens and cost per source.
    pub usage: std::collections::BTreeMap<String, SourceUsage>,
    /// USD per million input and output tokens, per model.
    pub prices: std::collections::BTreeMap<String, Price>,
}

/// Nothing said: the loop's own call (`agent`, as [`Session::source`]
/// reads it), nothing charged, no prices.
impl Default for Usage {
    fn default() -> Self {
        Usage {
            source: "agent".to_owned(),
            model: String::new(),
            cost_usd: 0.0,
            usage: std::collections::BTreeMap::new(),
            prices: std::collections::BTreeMap::new(),
        }
    }
}

/// Tokens and dollars charged to one source.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Deserialize)]
#[serde(default)]
pub struct SourceUsage {
    /// Input tokens the provider reported.
    pub input_tokens: u64,
    /// Output tokens the provider reported.
    pub output_tokens: u64,
    /// Their price in USD.
    pub cost_usd: f64,
}

/// The price of one model: USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Deserialize)]
pub struct Price {
    /// USD per million input tokens.
    pub input: f64,
    /// USD per million output tokens.
    pub output: f64,
}

/// A borrowed tool call.
#[derive(Clone, Copy)]
pub struct ToolCallRef<'a>(pub(crate) &'a ToolCallView<'a>);

impl<'a> ToolCallRef<'a> {
    /// The call id.
    #[must_use]
    pub fn id(&self) -> &'a str {
        self.0.id.as_str()
    }
    /// The tool name as dispatched.
    #[must_use]
    pub fn name(&self) -> &'a str {
        self.0.name.as_str()
    }
    /// The arguments exactly as the model sent them (JSON text).
    #[must_use]
    pub fn arguments_json(&self) -> &'a str {
        self.0.arguments_json.as_str()
    }
    /// The arguments parsed as JSON.
    ///
    /// # Errors
    ///
    /// The [`serde_json::Error`] when the arguments the model sent are not
    /// valid JSON.
    pub fn arguments(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(self.arguments_json())
    }
    /// An owned copy, to edit and hand back in a replacement.
    #[must_use]
    pub fn to_owned(&self) -> ToolCall {
        ToolCall {
            id: self.id().to_owned(),
            name: self.name().to_owned(),
            arguments_json: self.arguments_json().to_owned(),
        }
    }
}

/// A borrowed content block.
#[derive(Clone, Copy)]
pub struct BlockRef<'a>(pub(crate) &'a BlockView<'a>);

impl<'a> BlockRef<'a> {
    /// `text`, `image`, ...
    #[must_use]
    pub fn kind(&self) -> &'a str {
        self.0.kind.as_str()
    }
    /// The text of a text block (empty otherwise).
    #[must_use]
    pub fn text(&self) -> &'a str {
        self.0.text.as_str()
    }
    /// An owned copy.
    #[must_use]
    pub fn to_owned(&self) -> Block {
        Block {
            kind: self.kind().to_owned(),
            text: self.text().to_owned(),
            data_json: self.0.data_json.as_str().to_owned(),
        }
    }
}

/// A borrowed message.
#[derive(Clone, Copy)]
pub struct MessageRef<'a>(pub(crate) &'a MessageView<'a>);

impl<'a> MessageRef<'a> {
    /// `system`, `user`, `assistant` or `tool`.
    #[must_use]
    pub fn role(&self) -> &'a str {
        self.0.role.as_str()
    }
    /// The text content.
    #[must_use]
    pub fn content(&self) -> &'a str {
        self.0.content.as_str()
    }
    /// Content blocks of a multimodal message.
    pub fn blocks(&self) -> impl ExactSizeIterator<Item = BlockRef<'a>> + 'a {
        let blocks: RSlice<'a, BlockView<'a>> = self.0.blocks;
        blocks.as_slice().iter().map(BlockRef)
    }
    /// Tool calls of an assistant message.
    pub fn tool_calls(&self) -> impl ExactSizeIterator<Item = ToolCallRef<'a>> + 'a {
        let calls: RSlice<'a, ToolCallView<'a>> = self.0.tool_calls;
        calls.as_slice().iter().map(ToolCallRef)
    }
    /// For a tool message, the call it answers.
    #[must_use]
    pub fn tool_call_id(&self) -> Option<&'a str> {
        non_empty(self.0.tool_call_id)
    }
    /// The author name, if any.
    #[must_use]
    pub fn name(&self) -> Option<&'a str> {
        non_empty(self.0.name)
    }
    /// An owned copy, to edit and hand back in a replacement.
    pub fn to_owned(&self) -> Message {
        Message {
            role: self.role().to_owned(),
            content: self.content().to_owned(),
            blocks: self.blocks().map(|b| b.to_owned()).collect(),
            tool_calls: self.tool_calls().map(|c| c.to_owned()).collect(),
            tool_call_id: self.tool_call_id().map(str::to_owned),
            name: self.name().map(str::to_owned),
        }
    }
}

/// A borrowed message list.
#[derive(Clone, Copy)]
pub struct Messages<'a>(pub(crate) RSlice<'a, MessageView<'a>>);

impl<'a> Messages<'a> {
    /// Number of messages.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// True when there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The message at `index`.
    pub fn get(&self, index: usize) -> Option<MessageRef<'a>> {
        let all: &'a [MessageView<'a>] = self.0.as_slice();
        all.get(index).map(MessageRef)
    }
    /// The messages in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = MessageRef<'a>> + ExactSizeIterator + 'a {
        let all: &'a [MessageView<'a>] = self.0.as_slice();
        all.iter().map(MessageRef)
    }
    /// Owned copies of every message.
    #[must_use]
    pub fn to_owned(&self) -> Vec<Message> {
        self.iter().map(|m| m.to_owned()).collect()
    }
}

/// Borrowed request headers.
#[derive(Clone, Copy)]
pub struct HeadersRef<'a>(pub(crate) RSlice<'a, HeaderView<'a>>);

impl<'a> HeadersRef<'a> {
    /// `(name, value)` pairs in the provider's order.
    #[must_use]
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&'a str, &'a str)> + 'a {
        let all: &'a [HeaderView<'a>] = self.0.as_slice();
        all.iter().map(|h| (h.name.as_str(), h.value.as_str()))
    }
    /// The value of the first header named `name` (ASCII case-insensitive).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
    /// Owned copies.
    #[must_use]
    pub fn to_owned(&self) -> Vec<(String, String)> {
        self.iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect()
    }
}

/// A borrowed provider request envelope.
#[derive(Clone, Copy)]
pub struct RequestRef<'a> {
    pub(crate) messages: Messages<'a>,
    pub(crate) view: &'a RequestView<'a>,
}

impl<'a> RequestRef<'a> {
    /// The provider's model name.
    #[must_use]
    pub fn model(&self) -> &'a str {
        self.view.model.as_str()
    }
    /// The messages about to be sent (after the context seam).
    #[must_use]
    pub fn messages(&self) -> Messages<'a> {
        self.messages
    }
    /// The tool schemas offered, as JSON text (an array).
    #[must_use]
    pub fn tools_json(&self) -> &'a str {
        self.view.tools_json.as_str()
    }
    /// Extra call options passed verbatim to the provider, as JSON text.
    #[must_use]
    pub fn kwargs_json(&self) -> &'a str {
        self.view.kwargs_json.as_str()
    }
    /// The per-request headers, or `None` when the provider has no header surface.
    pub fn headers(&self) -> Option<HeadersRef<'a>> {
        self.view.headers.into_option().map(HeadersRef)
    }
    /// An owned copy, to edit and hand back in a replacement.
    #[must_use]
    pub fn to_owned(&self) -> Request {
        Request {
            model: self.model().to_owned(),
            messages: self.messages.to_owned(),
            tools_json: self.tools_json().to_owned(),
            kwargs_json: self.kwargs_json().to_owned(),
            headers: self.headers().map(|h| h.to_owned()),
        }
    }
}

/// A borrowed tool result.
#[derive(Clone, Copy)]
pub struct ToolResultRef<'a>(pub(crate) &'a ToolResultView<'a>);

impl<'a> ToolResultRef<'a> {
    /// The output text.
    #[must_use]
    pub fn output(&self) -> &'a str {
        self.0.output.as_str()
    }
    /// The error text, when the tool failed.
    #[must_use]
    pub fn error(&self) -> Option<&'a str> {
        self.0.error.into_option().map(|e| e.as_str())
    }
    /// Result metadata as JSON text.
    #[must_use]
    pub fn metadata_json(&self) -> &'a str {
        self.0.metadata_json.as_str()
    }
    /// An owned copy, to edit and hand back in a replacement.
    pub fn to_owned(&self) -> ToolResult {
        ToolResult {
            output: self.output().to_owned(),
            error: self.error().map(str::to_owned),
            metadata_json: self.metadata_json().to_owned(),
        }
    }
}

/// A model reply, as the `model_response` seam sees it: its text and the
/// tool calls it proposes.
#[derive(Clone, Copy)]
pub struct ResponseRef<'a> {
    pub(crate) message: &'a MessageView<'a>,
    pub(crate) streamed: bool,
}

impl<'a> ResponseRef<'a> {
    /// The reply's text.
    #[must_use]
    pub fn content(&self) -> &'a str {
        self.message.content.as_str()
    }
    /// The tool calls it proposes, in order.
    #[must_use]
    pub fn tool_calls(&self) -> impl ExactSizeIterator<Item = ToolCallRef<'a>> + 'a {
        MessageRef(self.message).tool_calls()
    }
    /// True when the reply was streamed (its text has been offered to the
    /// `stream_chunk` seam delta by delta already).
    #[must_use]
    pub fn was_streamed(&self) -> bool {
        self.streamed
    }
}

/// One offer of streamed text on the `stream_chunk` seam.
///
/// `full()` is the turn's whole text so far: the part already released
/// (`..released_offset()`), then the candidate — text held back earlier
/// followed by the new delta. Scan `full()` from where a match could still
/// end at or after `released_offset()`, not from the start: that keeps the
/// cost of a stream linear in its length.
#[derive(Clone, Copy)]
pub struct Segment<'a> {
    pub(crate) full: &'a str,
    pub(crate) released: usize,
    pub(crate) delta: usize,
    pub(crate) last: bool,
    pub(crate) replace: bool,
}

impl<'a> Segment<'a> {
    /// Everything of this turn's text so far: released, then the candidate.
    #[must_use]
    pub fn full(&self) -> &'a str {
        self.full
    }
    /// The length of the text already released (and shown): where the
    /// candidate starts in [`full`](Self::full).
    #[must_use]
    pub fn released_offset(&self) -> usize {
        self.released
    }
    /// The candidate: held text, then the new delta.
    #[must_use]
    pub fn candidate(&self) -> &'a str {
        self.full.get(self.released..).unwrap_or("")
    }
    /// The new delta alone (the end of the candidate).
    #[must_use]
    pub fn delta(&self) -> &'a str {
        self.full
            .get(self.full.len().saturating_sub(self.delta)..)
            .unwrap_or("")
    }
    /// True for the final check at the end of the stream: a hold is ignored
    /// then (the held text is released unless this call blocks).
    #[must_use]
    pub fn is_final(&self) -> bool {
        self.last
    }
    /// True when the host takes a rewrite of the candidate
    /// ([`StreamRewrite::Replace`](super::StreamRewrite::Replace)); a host
    /// that predates rewrites turns one into a block.
    #[must_use]
    pub fn can_replace(&self) -> bool {
        self.replace
    }
}

#[cfg(test)]
mod tests {
    use super::{Billing, NoticeSlot, Price, Session, SourceUsage};
    use crate::abi::SessionView;
    use abi_stable::std_types::RStr;

    fn last_call_of(extension: &str) -> Option<(String, SourceUsage)> {
        read(extension, |session| session.last_call())
    }

    /// What `reading` reads of a session whose facts are `extension`.
    fn read<T>(extension: &str, reading: impl FnOnce(Session<'_>) -> T) -> T {
        let view = SessionView {
            session_id: RStr::from_str("s"),
            turn_index: 0,
            provider_calls_this_turn: 0,
            tool_calls_this_turn: 0,
            input_tokens: 0,
            output_tokens: 0,
            extension_json: RStr::from_str(extension),
        };
        let slot = NoticeSlot::default();
        reading(Session(&view, &slot))
    }

    /// Facts as a gateway renders them, a client's model name saying
    /// what the members say, escaped.
    const FACTS: &str = r#"{"capabilities":["edits"],"call":7,"cost_usd":0.5,
        "last_call":{"billed":"none","charged_to":"agent","cost_usd":0.0,
        "input_tokens":0,"output_tokens":0},
        "model":"x\",\"relayed\":false,\"source\":\"compaction\",\"prices\":{\"m\":{}}",
        "relayed":true,"source":"gate_retry",
        "usage":{"agent":{"cost_usd":0.5,"input_tokens":9,"output_tokens":9}},
        "prices":{"m":{"input":1.5,"output":2.0},"n":{"input":0.5,"output":1.0}}}"#;

    #[test]
    fn each_fact_is_read_as_the_whole_facts_read_and_a_client_string_says_none() {
        let whole: serde_json::Value = serde_json::from_str(FACTS).unwrap();
        read(FACTS, |session| {
            assert_eq!(session.source(), whole["source"]);
            assert!(session.is_relayed());
            assert!(!session.is_gate_retry());
            assert_eq!(session.call_id(), Some(7));
            assert_eq!(session.last_call_billing(), Billing::Nothing);
            let usage = session.usage();
            assert_eq!(usage.model, whole["model"]);
            for model in ["m", "n", "x"] {
                assert_eq!(
                    session.price(model),
                    usage.prices.get(model).copied(),
                    "{model}"
                );
            }
            assert_eq!(
                session.price("m"),
                Some(Price {
                    input: 1.5,
                    output: 2.0
                })
            );
        });
        // A host that says nothing: the loop's own call, nothing billed
        // known, no price, and `usage` says the same.
        read(r#"{"capabilities":["edits"]}"#, |session| {
            assert_eq!(session.source(), "agent");
            assert_eq!(session.usage().source, "agent");
            assert_eq!(session.last_call_billing(), Billing::Reported);
            assert_eq!(session.price("m"), None);
            assert_eq!(session.call_id(), None);
        });
    }

    #[test]
    fn the_last_call_is_read_member_by_member_among_the_other_facts() {
        let facts = r#"{"capabilities":["edits"],"call":7,"cost_usd":0.5,
            "last_call":{"billed":"reported","charged_to":"gate_retry","cost_usd":0.25,
            "input_tokens":3,"output_tokens":4},"model":"m","source":"agent",
            "usage":{"agent":{"cost_usd":0.5,"input_tokens":9,"output_tokens":9}},
            "prices":{"m":{"input":1.5,"output":2.0}}}"#;
        let usage = SourceUsage {
            input_tokens: 3,
            output_tokens: 4,
            cost_usd: 0.25,
        };
        assert_eq!(last_call_of(facts), Some(("gate_retry".to_owned(), usage)));
        // Members left out are zero; a member of the wrong type, or no
        // last call, is none.
        let partial = r#"{"last_call":{"charged_to":"agent","input_tokens":3}}"#;
        let usage = SourceUsage {
            input_tokens: 3,
            ..SourceUsage::default()
        };
        assert_eq!(last_call_of(partial), Some(("agent".to_owned(), usage)));
        assert_eq!(last_call_of(r#"{"last_call":{"input_tokens":"3"}}"#), None);
        assert_eq!(last_call_of(r#"{"last_call":null}"#), None);
        assert_eq!(last_call_of("{}"), None);
    }
}
