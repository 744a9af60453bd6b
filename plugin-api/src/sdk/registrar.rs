//! Collecting a pack's interceptors, and erasing them to ABI trait objects.

use super::decision::{
    Decision, Exhausted, GateDecision, GateResult, InterceptError, InterceptResult, OutputDecision,
    OutputResult, StreamResult, StreamRewrite, StreamRewriteResult,
};
use super::edit::{MessagesEdit, RequestEdit};
use super::guard;
use super::inputs::{
    Messages, NoticeSlot, RequestRef, ResponseRef, Segment, Session, ToolCallRef, ToolResultRef,
};
use super::seam_kind::SeamKind;
use super::segment::{held_bytes, rewritten_hold, segment_of};
use super::state::State;
use super::values::{messages_into_abi, Message, Request, ToolCall, ToolResult};
use crate::abi::{
    self, InterceptorAbi, InterceptorAbi_TO, InterceptorBox, Registration, SeamInput, SeamValue,
};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RString};

/// Where a pack registers its interceptors: any number per seam, each with a
/// name, run in registration order.
///
/// Every closure gets the [`Session`] and the seam's typed input, and answers
/// an [`InterceptResult`]: `Ok(Decision::Allow)`, `Ok(Decision::Replace(v))`,
/// `Ok(Decision::Block(reason))`, or `Err(e)` for a failure the seam's failure
/// policy handles. A panic counts as a failure.
pub struct Registrar {
    pub(crate) entries: Vec<(SeamKind, String, InterceptorBox)>,
    pub(crate) fail_closed: Vec<String>,
    pub(crate) redacts: Vec<String>,
    pub(crate) judges: Vec<String>,
    pub(crate) stream_windows: Vec<(String, usize)>,
    pub(crate) observes: Vec<String>,
    /// The instance's handle on the host's state, and whether the pack
    /// asked for it.
    pub(crate) state: State,
    pub(crate) wants_state: bool,
}

impl Registrar {
    pub(crate) fn new(state: State) -> Self {
        Registrar {
            entries: Vec::new(),
            fail_closed: Vec::new(),
            redacts: Vec::new(),
            judges: Vec::new(),
            stream_windows: Vec::new(),
            observes: Vec::new(),
            state,
            wants_state: false,
        }
    }

    /// Registers on `context`: sees the message list about to be sent; a
    /// replacement shapes this call only.
    pub fn context<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, Messages<'_>) -> InterceptResult<Vec<Message>> + Send + Sync + 'static,
    {
        self.push(SeamKind::Context, name, move |input| {
            decide(
                |notice| f(Session(input.session, notice), Messages(input.messages)),
                |messages| {
                    Ok(SeamValue {
                        messages: ROption::RSome(messages_into_abi(messages)),
                        ..SeamValue::default()
                    })
                },
            )
        });
    }

    /// Registers on `provider_request`: sees the whole envelope; a
    /// replacement shapes this call only (replaced headers travel with it;
    /// the provider's own are never changed).
    pub fn provider_request<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, RequestRef<'_>) -> InterceptResult<Request> + Send + Sync + 'static,
    {
        self.push(SeamKind::ProviderRequest, name, move |input| {
            let Some(request) = request_ref(input) else {
                return missing("request envelope");
            };
            decide(
                |notice| f(Session(input.session, notice), request),
                |request| Ok(Request::into_abi(request)),
            )
        });
    }

    /// Registers on `context` with a partial edit: the closure answers only
    /// the messages it changes ([`MessagesEdit`]); the rest stay as they are
    /// without being copied. The way to write an edit of a few messages.
    pub fn context_edit<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, Messages<'_>) -> InterceptResult<MessagesEdit> + Send + Sync + 'static,
    {
        self.push(SeamKind::Context, name, move |input| {
            let messages = Messages(input.messages);
            decide(
                |notice| f(Session(input.session, notice), messages),
                |edit| edit.into_abi(input.session, messages),
            )
        });
    }

    /// Registers on `provider_request` with a partial edit: the closure
    /// answers only the messages (and headers) it changes
    /// ([`RequestEdit`]); everything else is kept without being copied. The
    /// way to write a scrub that touches a few messages of a long envelope.
    pub fn provider_request_edit<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, RequestRef<'_>) -> InterceptResult<RequestEdit> + Send + Sync + 'static,
    {
        self.push(SeamKind::ProviderRequest, name, move |input| {
            let Some(request) = request_ref(input) else {
                return missing("request envelope");
            };
            decide(
                |notice| f(Session(input.session, notice), request),
                |edit| edit.into_abi(input.session, request),
            )
        });
    }

    /// Registers on `tool_call` with the full set of answers, ask included:
    /// [`GateDecision::Ask`] puts the call to the operator (a terminal
    /// prompt, an answers file, `--yes`). An approved call goes on through
    /// the rest of the chain; an edited one too, with the operator's
    /// arguments — an edit never skips a check.
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.tool_call_gate("confirm-shell", |_session, call| {
    ///     if call.name() != "bash" {
    ///         return Ok(GateDecision::Allow);
    ///     }
    ///     Ok(GateDecision::Ask(Ask {
    ///         prompt: format!("run {}?", call.arguments_json()),
    ///         edit: true,
    ///         timeout: Some(std::time::Duration::from_secs(60)),
    ///         default_allow: false,
    ///     }))
    /// });
    /// # }
    /// ```
    pub fn tool_call_gate<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, ToolCallRef<'_>) -> GateResult<ToolCall> + Send + Sync + 'static,
    {
        self.push(SeamKind::ToolCall, name, move |input| {
            let Some(call) = input.tool_call.into_option() else {
                return missing("tool call");
            };
            gate(
                |notice| f(Session(input.session, notice), ToolCallRef(call)),
                tool_call_value,
            )
        });
    }

    /// Registers on `provider_request` with the full set of answers: ask
    /// ([`GateDecision::Ask`]; `edit` is not offered on this seam) and
    /// retry-after ([`GateDecision::RetryAfter`]: a rate limiter pauses the
    /// turn instead of failing it).
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # use std::sync::atomic::{AtomicU64, Ordering};
    /// # fn register(registrar: &mut Registrar) {
    /// let sent = AtomicU64::new(0);
    /// registrar.provider_request_gate("two-per-turn", move |session, _request| {
    ///     if session.is_gate_retry() || sent.fetch_add(1, Ordering::Relaxed) % 3 < 2 {
    ///         return Ok(GateDecision::Allow);
    ///     }
    ///     Ok(GateDecision::RetryAfter {
    ///         wait: std::time::Duration::from_millis(500),
    ///         reason: "rate limit: two requests per window".into(),
    ///     })
    /// });
    /// # }
    /// ```
    pub fn provider_request_gate<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, RequestRef<'_>) -> GateResult<Request> + Send + Sync + 'static,
    {
        self.push(SeamKind::ProviderRequest, name, move |input| {
            let Some(request) = request_ref(input) else {
                return missing("request envelope");
            };
            gate(
                |notice| f(Session(input.session, notice), request),
                |request| Ok(Request::into_abi(request)),
            )
        });
    }

    /// Registers on `tool_call`: sees each proposed call before permission
    /// checks. This seam fails closed: an error blocks the call.
    pub fn tool_call<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, ToolCallRef<'_>) -> InterceptResult<ToolCall> + Send + Sync + 'static,
    {
        self.push(SeamKind::ToolCall, name, move |input| {
            let Some(call) = input.tool_call.into_option() else {
                return missing("tool call");
            };
            decide(
                |notice| f(Session(input.session, notice), ToolCallRef(call)),
                tool_call_value,
            )
        });
    }

    /// Registers on `tool_result`: sees the effective call and the result of
    /// a tool that actually ran.
    pub fn tool_result<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, ToolCallRef<'_>, ToolResultRef<'_>) -> InterceptResult<ToolResult>
            + Send
            + Sync
            + 'static,
    {
        self.push(SeamKind::ToolResult, name, move |input| {
            let (Some(call), Some(result)) = (
                input.tool_call.into_option(),
                input.tool_result.into_option(),
            ) else {
                return missing("tool call and result");
            };
            decide(
                |notice| {
                    f(
                        Session(input.session, notice),
                        ToolCallRef(call),
                        ToolResultRef(result),
                    )
                },
                |result| {
                    Ok(SeamValue {
                        tool_result: ROption::RSome(result.into_abi()),
                        ..SeamValue::default()
                    })
                },
            )
        });
    }

    /// Registers on `model_response`: sees each model reply, streamed or
    /// not, before it enters the conversation. A replacement is the new
    /// text (the tool calls are kept: the way to redact a reply); a block
    /// publishes one substitute reply instead — no tool calls, finish
    /// reason `vetoed`, the notice (or the reason) as its text — which the
    /// `output` seam never judges again.
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.model_response("ban", |session, reply| {
    ///     if reply.content().contains("forbidden") {
    ///         session.notice("Content blocked: contains prohibited terms.");
    ///         return Ok(Decision::block("reply contains a prohibited term"));
    ///     }
    ///     Ok(Decision::Allow)
    /// });
    /// # }
    /// ```
    pub fn model_response<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, ResponseRef<'_>) -> InterceptResult<String> + Send + Sync + 'static,
    {
        self.push(SeamKind::ModelResponse, name, move |input| {
            let Some(message) = input.messages.as_slice().first() else {
                return missing("model reply");
            };
            let reply = ResponseRef {
                message,
                streamed: input.extension_json.as_str().contains("\"streamed\":true"),
            };
            decide(
                |notice| f(Session(input.session, notice), reply),
                |text| Ok(text_value(text)),
            )
        });
    }

    /// Registers an *observer* on `model_response`: sees each reply after
    /// the host has charged its call (what [`Session::last_call`] says),
    /// and can neither block nor change it — its answer is `Ok(())` or an
    /// error the seam's policy handles (skipped: an observer never fails
    /// a reply). Because it cannot take back streamed text, the host keeps
    /// streaming on for it, where a `model_response` gate turns streaming
    /// off. For counting what replies cost, in a store other processes
    /// share ([`Registrar::state`]).
    ///
    /// Behind a host that relays a client's requests (a gateway), an
    /// observer sees each upstream call once, when its exchange ends —
    /// after the whole reply was read, every choice of it, or when the
    /// client left, a gate after it blocked the request, or the upstream
    /// refused it — with an empty reply text and
    /// [`Session::last_call_billing`] saying how the charge is known; the
    /// calls the host makes itself (a gate retry) are seen as their
    /// replies come.
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.observe_model_response("spent", |session, _reply| {
    ///     if let Some((_source, usage)) = session.last_call() {
    ///         let _ = usage.output_tokens; // add it to a shared counter
    ///     }
    ///     Ok(())
    /// });
    /// # }
    /// ```
    pub fn observe_model_response<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, ResponseRef<'_>) -> Result<(), InterceptError> + Send + Sync + 'static,
    {
        self.model_response(name, move |session, reply| {
            f(session, reply).map(|()| Decision::Allow)
        });
        self.observes.push(name.to_owned());
    }

    /// Registers on `output`: sees the final answer before the user does.
    /// A replacement is the text shown instead (redaction); a block shows
    /// the notice (or the reason), never the text.
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.output("no-emails", |_session, answer| {
    ///     if answer.contains("@example.com") {
    ///         return Ok(Decision::Replace(answer.replace("@example.com", "@[REDACTED]")));
    ///     }
    ///     Ok(Decision::Allow)
    /// });
    /// # }
    /// ```
    pub fn output<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, &str) -> InterceptResult<String> + Send + Sync + 'static,
    {
        self.push(SeamKind::Output, name, move |input| {
            decide(
                |notice| f(Session(input.session, notice), input.text.as_str()),
                |text| Ok(text_value(text)),
            )
        });
    }

    /// Registers on `output` with the full set of answers, retry included:
    /// [`OutputDecision::Retry`] asks the model again — the host sends it
    /// exactly two messages, the current answer (assistant) and the
    /// feedback (user), through the `context` and `provider_request` seams
    /// (so redaction still applies; [`Session::is_gate_retry`] is true
    /// there) — and judges the new answer from the start of the chain.
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.output_gate("json-only", |_session, answer| {
    ///     if serde_json::from_str::<serde_json::Value>(answer).is_ok() {
    ///         return Ok(OutputDecision::Allow);
    ///     }
    ///     Ok(OutputDecision::Retry(Retry {
    ///         feedback: "Answer with JSON only.".into(),
    ///         max: 2,
    ///         exhausted: Exhausted::Block("the model did not answer in JSON".into()),
    ///     }))
    /// });
    /// # }
    /// ```
    pub fn output_gate<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, &str) -> OutputResult + Send + Sync + 'static,
    {
        self.push(SeamKind::Output, name, move |input| {
            let notice = NoticeSlot::new(None);
            let answer = guard::catch(|| {
                let decision = f(Session(input.session, &notice), input.text.as_str());
                match decision {
                    Ok(OutputDecision::Allow) => abi::Decision::allow(),
                    Ok(OutputDecision::Replace(text)) => abi::Decision::replace(text_value(text)),
                    Ok(OutputDecision::Block(reason)) => abi::Decision::block(reason),
                    Ok(OutputDecision::Retry(retry)) => {
                        let exhausted = match &retry.exhausted {
                            Exhausted::Allow => None,
                            Exhausted::Block(reason) => Some(reason.as_str()),
                        };
                        abi::Decision::retry(&retry.feedback, retry.max, exhausted)
                    }
                    Err(error) => abi::Decision::error(error.as_str()),
                }
            });
            match answer {
                Ok(decision) => attach_notice(decision, &notice),
                Err(panic) => abi::Decision::error(panic),
            }
        });
    }

    /// Registers on `stream_chunk`: sees every streamed text delta before
    /// it is released, as a [`Segment`]. Answer
    /// [`StreamDecision::Release`], [`StreamDecision::HoldFrom`] (withhold a
    /// suffix you cannot judge yet; it comes back with the next delta) or
    /// [`StreamDecision::Block`] (nothing more is shown this turn). At the
    /// end of the stream the held text is offered once more with
    /// [`Segment::is_final`] set; a hold is ignored then.
    ///
    /// Scan only what can still change your verdict — from the start of
    /// the word that straddles [`Segment::released_offset`] — so the cost
    /// stays linear in the stream's length:
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.stream_chunk("ban", |_session, segment| {
    ///     let full = segment.full();
    ///     let word = |b: u8| b.is_ascii_alphanumeric();
    ///     // Back to the start of the word straddling the released boundary.
    ///     let mut from = segment.released_offset();
    ///     while from > 0 && word(full.as_bytes()[from - 1]) {
    ///         from -= 1;
    ///     }
    ///     if full[from..].contains("forbidden") {
    ///         return Ok(StreamDecision::Block("prohibited term".into()));
    ///     }
    ///     // Hold a trailing partial word: `forb` may become `forbidden`.
    ///     let mut end = full.len();
    ///     while end > segment.released_offset() && word(full.as_bytes()[end - 1]) {
    ///         end -= 1;
    ///     }
    ///     Ok(StreamDecision::HoldFrom(end))
    /// });
    /// # }
    /// ```
    pub fn stream_chunk<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, Segment<'_>) -> StreamResult + Send + Sync + 'static,
    {
        self.stream_chunk_rewrite(name, move |session, segment| {
            f(session, segment).map(StreamRewrite::from)
        });
    }

    /// Registers on `stream_chunk` like [`stream_chunk`](Self::stream_chunk),
    /// with one more answer: [`StreamRewrite::Replace`] publishes a rewritten
    /// candidate (a redaction) instead of the original, holding what it
    /// cannot judge yet. Released text is never rewritten; a match that
    /// began in it can only be blocked. On a host that cannot rewrite
    /// streamed text ([`Segment::can_replace`] is false) a replacement is
    /// turned into a block, never into releasing the original.
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.stream_chunk_rewrite("mask", |_session, segment| {
    ///     let candidate = segment.candidate();
    ///     if !candidate.contains("hunter2") {
    ///         return Ok(StreamRewrite::Release);
    ///     }
    ///     let candidate = candidate.replace("hunter2", "*******");
    ///     // Hold nothing: `hold_from` past the end of the rewritten text.
    ///     let hold_from = segment.released_offset() + candidate.len();
    ///     Ok(StreamRewrite::Replace { candidate, hold_from })
    /// });
    /// # }
    /// ```
    pub fn stream_chunk_rewrite<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, Segment<'_>) -> StreamRewriteResult + Send + Sync + 'static,
    {
        let label = name.to_owned();
        self.push(SeamKind::StreamChunk, name, move |input| {
            let Some(segment) = segment_of(input) else {
                return missing("stream segment");
            };
            let notice = NoticeSlot::new(None);
            let answer = guard::catch(|| f(Session(input.session, &notice), segment));
            let decision = match answer {
                Ok(Ok(StreamRewrite::Release)) => abi::Decision::allow(),
                Ok(Ok(StreamRewrite::HoldFrom(offset))) => {
                    abi::Decision::hold(held_bytes(segment, offset))
                }
                Ok(Ok(StreamRewrite::Replace {
                    candidate,
                    hold_from,
                })) if segment.can_replace() => {
                    let held = rewritten_hold(segment.released, &candidate, hold_from);
                    abi::Decision::hold_replacing(candidate.into(), held)
                }
                Ok(Ok(StreamRewrite::Replace { .. })) => {
                    abi::Decision::block(format!("{label}: this host cannot rewrite streamed text"))
                }
                Ok(Ok(StreamRewrite::Block(reason))) => abi::Decision::block(reason),
                Ok(Err(error)) => abi::Decision::error(error.as_str()),
                Err(panic) => return abi::Decision::error(panic),
            };
            attach_notice(decision, &notice)
        });
    }

    /// Erases `f` straight into the ABI trait object: the host's call
    /// reaches the closure through one vtable, with no second indirection.
    fn push<F>(&mut self, seam: SeamKind, name: &str, f: F)
    where
        F: Fn(&SeamInput<'_>) -> abi::Decision + Send + Sync + 'static,
    {
        let interceptor = InterceptorAbi_TO::from_value(Typed(f), TD_Opaque);
        self.entries.push((seam, name.to_owned(), interceptor));
    }

    pub(crate) fn into_registrations(self) -> Vec<Registration> {
        self.entries
            .into_iter()
            .map(|(seam, name, interceptor)| Registration {
                seam: seam.seam(),
                name: RString::from(name),
                interceptor,
            })
            .collect()
    }
}

fn missing(what: &str) -> abi::Decision {
    abi::Decision::error(format!("the host sent no {what} for this seam"))
}

/// Runs the pack's closure under `catch_unwind` and turns its answer into
/// the ABI's decision inside the same guard, so a panic anywhere — in the
/// closure or while its replacement is converted — is an error decision.
///
/// The guard itself only carries a flag out: the common allow is built
/// after it, straight into the return value. (A whole decision carried
/// out of `catch_unwind` is copied from memory just written, and that
/// copy stalls on store forwarding: measured at a third of a call.)
fn decide<T>(
    body: impl FnOnce(&NoticeSlot) -> InterceptResult<T>,
    into_value: impl FnOnce(T) -> Result<SeamValue, String>,
) -> abi::Decision {
    let notice = NoticeSlot::new(None);
    let mut other: Option<abi::Decision> = None;
    let allowed = guard::catch(|| match body(&notice) {
        Ok(Decision::Allow) => true,
        Ok(Decision::Block(reason)) => {
            other = Some(abi::Decision::block(reason));
            false
        }
        Ok(Decision::Replace(value)) => {
            other = Some(match into_value(value) {
                Ok(value) => abi::Decision::replace(value),
                Err(error) => abi::Decision::error(error),
            });
            false
        }
        Err(error) => {
            other = Some(abi::Decision::error(error.as_str()));
            false
        }
    });
    // The common case (no notice) builds the decision straight into the
    // return value; matched one at a time, since moving both into a tuple
    // would copy them.
    let Some(text) = notice.take() else {
        return match allowed {
            Ok(true) => abi::Decision::allow(),
            Ok(false) => other.unwrap_or_else(|| abi::Decision::error("no decision was made")),
            Err(panic) => abi::Decision::error(panic),
        };
    };
    match allowed {
        Ok(true) => abi::Decision::allow().with_notice(&text),
        Ok(false) => other
            .unwrap_or_else(|| abi::Decision::error("no decision was made"))
            .with_notice(&text),
        Err(panic) => abi::Decision::error(panic),
    }
}

/// The decision with the call's notice, when it left one.
#[inline]
fn attach_notice(decision: abi::Decision, notice: &NoticeSlot) -> abi::Decision {
    match notice.take() {
        None => decision,
        Some(text) => decision.with_notice(&text),
    }
}

/// A gate's answer as the ABI's decision, under the same guard as
/// [`decide`].
fn gate<T>(
    body: impl FnOnce(&NoticeSlot) -> GateResult<T>,
    into_value: impl FnOnce(T) -> Result<SeamValue, String>,
) -> abi::Decision {
    let notice = NoticeSlot::new(None);
    let answer = guard::catch(|| match body(&notice) {
        Ok(GateDecision::Allow) => abi::Decision::allow(),
        Ok(GateDecision::Block(reason)) => abi::Decision::block(reason),
        Ok(GateDecision::Replace(value)) => match into_value(value) {
            Ok(value) => abi::Decision::replace(value),
            Err(error) => abi::Decision::error(error),
        },
        Ok(GateDecision::Ask(ask)) => {
            let choices: &[&str] = if ask.edit {
                &["allow", "reject", "edit"]
            } else {
                &["allow", "reject"]
            };
            let timeout = ask
                .timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
            let default = if ask.default_allow { "allow" } else { "reject" };
            abi::Decision::ask(&ask.prompt, choices, timeout, default)
        }
        Ok(GateDecision::RetryAfter { wait, reason }) => {
            abi::Decision::retry_after(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX), &reason)
        }
        Ok(GateDecision::Compact { reason }) => abi::Decision::compact(&reason),
        Ok(GateDecision::AllowWithin { within, on_timeout }) => abi::Decision::allow_within(
            u64::try_from(within.as_millis()).unwrap_or(u64::MAX),
            &on_timeout,
        ),
        Err(error) => abi::Decision::error(error.as_str()),
    });
    match answer {
        Ok(decision) => attach_notice(decision, &notice),
        Err(panic) => abi::Decision::error(panic),
    }
}

/// The envelope a `provider_request` input carries.
fn request_ref<'a>(input: &SeamInput<'a>) -> Option<RequestRef<'a>> {
    let view = input.request.into_option()?;
    Some(RequestRef {
        messages: Messages(input.messages),
        view,
    })
}

/// A tool-call replacement.
#[allow(
    clippy::unnecessary_wraps,
    reason = "the shape `decide` and `gate` take for every seam's conversion"
)]
fn tool_call_value(call: ToolCall) -> Result<SeamValue, String> {
    Ok(SeamValue {
        tool_call: ROption::RSome(call.into_abi()),
        ..SeamValue::default()
    })
}

/// A text replacement (`model_response`, `output`).
fn text_value(text: String) -> SeamValue {
    SeamValue {
        text: ROption::RSome(text.into()),
        ..SeamValue::default()
    }
}

/// A registered closure as the ABI's interceptor.
struct Typed<F>(F);

impl<F> InterceptorAbi for Typed<F>
where
    F: Fn(&SeamInput<'_>) -> abi::Decision + Send + Sync + 'static,
{
    fn intercept(&self, input: &SeamInput<'_>) -> abi::Decision {
        (self.0)(input)
    }
}
