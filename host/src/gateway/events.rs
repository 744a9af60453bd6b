//! A streamed reply relayed: the upstream's events read one by one, each
//! forwarded as it came unless a gate changes or holds what it carries,
//! and re-written only where a judged view changed.
//!
//! ```text
//!  upstream SSE ─▶ Pump (bounded: body and line limits) ─▶ the wire's relay
//!     text deltas ─▶ stream_chunk (a gate per choice / text block) ─▶ released text
//!     tool-call deltas ─▶ held until the reply ends ─▶ model_response, tool_call
//!     everything else ─▶ as it came, in order
//!  ─▶ Out (a bounded channel: a client that stops reading holds back the
//!     upstream, never memory) ─▶ the client
//! ```
//!
//! A stream the upstream ends early (no end marker) ends with the wire's
//! error event, never a normal finish. An event that is not JSON where the
//! wire promises JSON ends the stream the same way: what cannot be read
//! is never forwarded.

use crate::agent::{AgentSession, Choice, Exchange, JudgedChoice, StreamBlock};
use crate::providers::sse::{Event, Limits, Reader, SseError};
use crate::providers::Usage;
use crate::types::ToolCall;
use axum::body::Bytes;
use std::future::Future;
use std::pin::Pin;

/// How a stream ended, for the gateway's bookkeeping.
#[derive(Debug, Default)]
pub(super) struct Streamed {
    /// The tokens the upstream reported.
    pub(super) usage: Usage,
    /// Why it ended early, when it did (said to the client as an error
    /// event).
    pub(super) broken: Option<String>,
    /// The id a later request can continue it by (Responses).
    pub(super) response_id: Option<String>,
}

/// Where a relay writes what goes to the client: what it writes while
/// the upstream's events keep coming is gathered and handed on as one
/// piece when the relay waits for the upstream (or the piece grows past
/// [`Out::GATHER`]), so a burst of events is one write to the client,
/// not one each.
pub(super) struct Out {
    sender: crate::listen::Writer,
    /// Written, not yet handed on.
    gathered: String,
    /// Nothing more is written (the relay still reads the upstream to
    /// its end, for the usage it reports).
    ended: bool,
    /// The client is gone.
    gone: bool,
}

impl Out {
    /// The most bytes gathered before they are handed on.
    const GATHER: usize = 16 * 1024;

    /// A writer into `sender`.
    pub(super) fn new(sender: crate::listen::Writer) -> Self {
        Out {
            sender,
            gathered: String::new(),
            ended: false,
            gone: false,
        }
    }

    /// Writes `text` (nothing when empty), waiting while the client reads
    /// when a full piece is handed on.
    pub(super) async fn send(&mut self, text: String) {
        if text.is_empty() || self.ended || self.gone {
            return;
        }
        if self.gathered.is_empty() {
            self.gathered = text;
        } else {
            self.gathered.push_str(&text);
        }
        self.gathered().await;
    }

    /// Writes an event of `kind` carrying `data` (see [`sse`]) as [`Out::send`]
    /// would, without the event's own copy.
    async fn send_event(&mut self, kind: &str, data: &str) {
        if self.ended || self.gone {
            return;
        }
        write_sse(&mut self.gathered, kind, data);
        self.gathered().await;
    }

    /// Hands on what was gathered once it is a full piece.
    async fn gathered(&mut self) {
        if self.gathered.len() >= Self::GATHER {
            self.flush().await;
        }
    }

    /// Hands on what was gathered, waiting while the client reads.
    pub(super) async fn flush(&mut self) {
        if self.gathered.is_empty() || self.gone {
            return;
        }
        let piece = Bytes::from(std::mem::take(&mut self.gathered));
        if !self.sender.send(piece).await {
            self.gone = true;
        }
    }

    /// Sends `text` judged by `session`'s exchange, unless a judgement of
    /// the exchange could not be made: then the wire's error event
    /// (`error` of the line saying so) is the client's last, and nothing
    /// more is written (the relay still reads the upstream to its end,
    /// for the usage it reports).
    pub(super) async fn send_judged(
        &mut self,
        session: &AgentSession,
        text: String,
        error: fn(&str) -> String,
    ) {
        if !self.unjudged(session, error).await {
            self.send(text).await;
        }
    }

    /// [`Out::send_judged`] of an upstream event as it came (`kind`,
    /// `data`), written straight into what is gathered.
    pub(super) async fn send_judged_event(
        &mut self,
        session: &AgentSession,
        kind: &str,
        data: &str,
        error: fn(&str) -> String,
    ) {
        if !self.unjudged(session, error).await {
            self.send_event(kind, data).await;
        }
    }

    /// Whether a judgement of `session`'s exchange could not be made:
    /// then the wire's error event (`error` of the line saying so) was
    /// written as the client's last, and nothing more will be.
    async fn unjudged(&mut self, session: &AgentSession, error: fn(&str) -> String) -> bool {
        let Some(reason) = session.unjudged() else {
            return false;
        };
        let last = error(&unjudged_line(reason));
        self.send(last).await;
        self.ended = true;
        true
    }
}

/// The line a client is told when a pack could not judge its exchange
/// (`reason`: the chain's, naming the interceptor and what failed).
pub(super) fn unjudged_line(reason: &str) -> String {
    format!("a policy could not judge this exchange, so it was held back; retry shortly ({reason})")
}

/// Where the reader puts the events it completes.
type Queue = std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<Event>>>;

/// The reader's sink: each complete event into the queue.
type Sink = Box<dyn FnMut(Event) -> bool + Send>;

/// The upstream's event stream, read within limits.
pub(super) struct Pump {
    body: crate::upstream::ReplyBody,
    reader: Reader<Sink>,
    queue: Queue,
    done: bool,
    /// The event last handed out; given back to the reader when the next
    /// is asked for, so events are read into buffers already grown.
    current: Event,
}

impl Pump {
    /// Reads `response`'s body as events, at most `max_bytes` of it and
    /// lines of at most 1 MiB.
    pub(super) fn new(body: crate::upstream::ReplyBody, max_bytes: u64) -> Self {
        let queue = Queue::default();
        let into = std::sync::Arc::clone(&queue);
        let sink: Sink = Box::new(move |event| {
            into.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push_back(event);
            true
        });
        Pump {
            body,
            reader: Reader::new(
                Limits {
                    max_bytes,
                    max_line: 1 << 20,
                },
                sink,
            ),
            queue,
            done: false,
            current: Event::default(),
        }
    }

    /// The next event (held until the next is asked for, then its
    /// buffers reused); `None` when there is none: the body ended, or it
    /// broke off or passed a limit (`streamed.broken` then says so). What
    /// `out` gathered is handed on before the upstream is waited for
    /// (never while the upstream's next piece is already here).
    pub(super) async fn next(&mut self, out: &mut Out, streamed: &mut Streamed) -> Option<&Event> {
        let last = std::mem::take(&mut self.current);
        self.reader.recycle(last);
        match self.read(out).await {
            Ok(Some(event)) => {
                self.current = event;
                Some(&self.current)
            }
            Ok(None) => None,
            Err(line) => {
                streamed.broken = Some(line);
                None
            }
        }
    }

    /// The next event; `Ok(None)` when the body ended, one line when it
    /// broke off or passed a limit.
    async fn read(&mut self, out: &mut Out) -> Result<Option<Event>, String> {
        loop {
            let queued = self
                .queue
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop_front();
            if let Some(event) = queued {
                return Ok(Some(event));
            }
            if self.done {
                return Ok(None);
            }
            // What the upstream sent together goes to the client together:
            // handed on only when the next piece is not here yet.
            let next = if let Some(next) = self.body.ready_chunk() {
                next
            } else {
                out.flush().await;
                self.body.chunk().await
            };
            match next {
                Ok(Some(piece)) => {
                    self.reader.feed(&piece).map_err(describe)?;
                }
                Ok(None) => {
                    self.reader.finish();
                    self.done = true;
                }
                Err(error) => return Err(format!("the upstream's stream broke off: {error}")),
            }
        }
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        // A relay stops at its wire's end event: what follows it (the
        // body's last chunk) is read when it is already here, so the
        // upstream connection is reused rather than closed.
        if !self.done {
            self.body.drain_ready();
        }
    }
}

fn describe(error: SseError) -> String {
    match error {
        SseError::Io(e) => format!("the upstream's stream broke off: {e}"),
        SseError::BodyTooLarge(limit) => {
            format!("the upstream's stream is over the limit of {limit} bytes")
        }
        SseError::LineTooLong(limit) => {
            format!("a line of the upstream's stream is over {limit} bytes")
        }
    }
}

/// One server-sent event as the gateway writes it: `event: NAME` (when it
/// has one), then its data, one `data:` line per line.
pub(super) fn sse(kind: &str, data: &str) -> String {
    let mut out = String::new();
    write_sse(&mut out, kind, data);
    out
}

/// [`sse`] written at the end of `out`.
fn write_sse(out: &mut String, kind: &str, data: &str) {
    // Room for all of it at once (its lines' prefixes past the first
    // grow it again).
    out.reserve(data.len() + kind.len() + 16);
    if !kind.is_empty() {
        out.push_str("event: ");
        out.push_str(kind);
        out.push('\n');
    }
    let mut rest = data;
    // Lines found by `memchr` (JSON text mostly has none).
    while let Some(at) = memchr::memchr(b'\n', rest.as_bytes()) {
        out.push_str("data: ");
        out.push_str(&rest[..at]);
        out.push('\n');
        rest = &rest[at + 1..];
    }
    out.push_str("data: ");
    out.push_str(rest);
    out.push_str("\n\n");
}

/// [`sse`] of an event's data given as bytes: JSON text, so UTF-8 (a
/// byte that is not is written as U+FFFD; see [`crate::jsondoc::utf8`]).
pub(super) fn sse_bytes(kind: &str, data: &[u8]) -> String {
    sse(kind, &crate::jsondoc::utf8(data))
}

/// What judges a stream.
pub(super) struct Judging<'a> {
    /// The session judging the exchange.
    pub(super) session: &'a mut AgentSession,
    /// The exchange's chains.
    pub(super) exchange: &'a Exchange,
    /// Hold every text to the reply's end (`--stream-policy downgrade`
    /// with a pack that gates whole replies only).
    pub(super) hold_all: bool,
}

impl Judging<'_> {
    /// A streamed reply's choice judged (`model_response`, `tool_call` on
    /// each call, `output`): its text as the stream gates left it, its
    /// calls, and what a stream gate blocked.
    pub(super) async fn judge_streamed(
        &mut self,
        content: String,
        tool_calls: Vec<ToolCall>,
        stream_blocked: Option<StreamBlock>,
    ) -> JudgedChoice {
        let choice = Choice {
            content,
            tool_calls,
            stream_blocked,
            streamed: true,
        };
        self.session.judge_choice(self.exchange, choice).await
    }
}

/// What a wire's stream relay is given.
pub(super) struct StreamContext<'a> {
    /// What judges the stream.
    pub(super) judging: Judging<'a>,
    /// The upstream's events.
    pub(super) pump: Pump,
    /// Where the client's events go (handed on at the end by the caller).
    pub(super) out: &'a mut Out,
}

/// A wire's stream relay.
pub(super) trait StreamWire {
    /// Relays the upstream's events to the client (see the module docs).
    fn relay(cx: StreamContext<'_>) -> Pin<Box<dyn Future<Output = Streamed> + Send + '_>>;
}

/// What one upstream event comes to (see [`EventRelay`]).
pub(super) enum Step {
    /// Send this and go on.
    Go(String),
    /// Send the upstream's event as it came (its own name and data,
    /// written straight into what is gathered) and go on.
    AsItCame,
    /// Send this: the stream is over (its end event).
    Stop(String),
    /// Send this: the upstream's failure ends the stream.
    Error(String),
}

/// The relay of an [`EventWire`]'s stream.
pub(super) trait EventRelay: Send {
    /// The event a whole stream ends with (`message_stop`): a stream
    /// that ends before it is broken.
    const END: &'static str;

    /// The session judging the stream.
    fn session(&self) -> &AgentSession;
    /// What one upstream event comes to; one line when it cannot be read
    /// (the stream ends, broken).
    fn on_event(&mut self, event: &Event) -> impl Future<Output = Result<Step, String>> + Send;
    /// What the upstream reported, read at the stream's end into
    /// `streamed` (its usage; the response's id).
    fn report(&mut self, streamed: &mut Streamed);
    /// The error event a stream ends with when a pack could not judge it
    /// (`line` says so).
    fn unjudged_event(line: &str) -> String;
    /// The data of the `error` event a broken stream ends with (`line`:
    /// why).
    fn broken_event(&self, line: &str) -> String;
}

/// A wire whose stream is relayed event by event, each event coming to a
/// [`Step`] (Messages, Responses): its [`StreamWire`] is
/// [`relay_events`] through its relay.
pub(super) trait EventWire {
    /// Its relay.
    type Relay<'a>: EventRelay + 'a;

    /// A relay judged by `judging`.
    fn start(judging: Judging<'_>) -> Self::Relay<'_>;
}

impl<W: EventWire> StreamWire for W {
    fn relay(cx: StreamContext<'_>) -> Pin<Box<dyn Future<Output = Streamed> + Send + '_>> {
        Box::pin(relay_events(cx, W::start))
    }
}

/// Relays the upstream's events through a relay `new` makes: each sent as its step says
/// (judged: a pack that could not judge ends the stream with the wire's
/// error event), until the end event, the upstream's failure or the
/// body's end. A stream that ends before its end event, or cannot be
/// read, ends with an `error` event of the line saying why.
async fn relay_events<'a, R: EventRelay + 'a>(
    cx: StreamContext<'a>,
    new: fn(Judging<'a>) -> R,
) -> Streamed {
    let StreamContext {
        judging,
        mut pump,
        out,
    } = cx;
    let mut relay = new(judging);
    let mut streamed = Streamed::default();
    let mut stopped = false;
    while let Some(event) = pump.next(out, &mut streamed).await {
        let (text, last) = match relay.on_event(event).await {
            Ok(Step::AsItCame) => {
                out.send_judged_event(relay.session(), &event.kind, &event.data, R::unjudged_event)
                    .await;
                continue;
            }
            Ok(Step::Go(text)) => (text, false),
            Ok(Step::Stop(text)) => {
                stopped = true;
                (text, true)
            }
            Ok(Step::Error(text)) => {
                streamed.broken = Some(String::new());
                (text, true)
            }
            Err(line) => {
                streamed.broken = Some(line);
                break;
            }
        };
        out.send_judged(relay.session(), text, R::unjudged_event)
            .await;
        if last {
            break;
        }
    }
    relay.report(&mut streamed);
    if streamed.broken.is_none() && !stopped {
        streamed.broken = Some(format!("the upstream's stream ended before {}", R::END));
    }
    if let Some(line) = streamed.broken.as_ref().filter(|l| !l.is_empty()) {
        out.send(sse("error", &relay.broken_event(line))).await;
    }
    streamed
}

#[cfg(test)]
mod tests {
    use super::{sse, sse_bytes};

    #[test]
    fn an_event_is_one_data_line_for_each_of_its_lines() {
        assert_eq!(sse("", "{}"), "data: {}\n\n");
        assert_eq!(sse("k", ""), "event: k\ndata: \n\n");
        assert_eq!(
            sse("k", "{\n\"a\": 1\n}\n"),
            "event: k\ndata: {\ndata: \"a\": 1\ndata: }\ndata: \n\n"
        );
        assert_eq!(sse("", "\n\n"), "data: \ndata: \ndata: \n\n");
    }

    #[test]
    fn an_events_bytes_are_written_as_its_text_a_stray_byte_as_a_replacement() {
        let data = "{\"delta\":\"h\u{e9}llo\"}\n{\"x\":1}";
        assert_eq!(sse_bytes("k", data.as_bytes()), sse("k", data));
        assert_eq!(
            sse_bytes("", b"{\"a\":\"\xff\"}"),
            "data: {\"a\":\"\u{fffd}\"}\n\n"
        );
    }
}
