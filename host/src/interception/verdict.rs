//! Reading a decision: what an interceptor answered (a host closure's
//! result, or a pack's ABI decision with its value and extension) as a
//! [`Verdict`] the chain enacts, including the operator questions and
//! retries some seams take.

use super::seams::{Invalid, SeamSpec};
use super::InterceptDecision;
use chimera_plugin_api::abi::{Decision, DecisionKind};
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

/// A question for the operator, from an interceptor's *ask* decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// What to ask.
    pub prompt: String,
    /// The choices offered: `allow`, `reject`, and maybe `edit`.
    pub choices: Vec<String>,
    /// How long to wait, in milliseconds (`None`: as long as it takes).
    pub timeout_ms: Option<u64>,
    /// The answer a timeout (or an operator who cannot answer) gives:
    /// `allow` or `reject`.
    pub default: String,
}

impl Question {
    /// The question a pack's decision carries, if it is a well-formed one.
    fn from_decision(decision: &Decision) -> Option<Question> {
        #[derive(serde::Deserialize)]
        struct Wire {
            ask: Body,
        }
        #[derive(serde::Deserialize)]
        struct Body {
            choices: Vec<String>,
            timeout_ms: Option<u64>,
            default: String,
        }
        let value = decision.value.as_ref().into_option()?;
        let json = value.extension_json.as_ref().into_option()?;
        let wire: Wire = serde_json::from_str(json.as_str()).ok()?;
        let known = |c: &str| matches!(c, "allow" | "reject" | "edit");
        (wire.ask.choices.iter().all(|c| known(c))
            && matches!(wire.ask.default.as_str(), "allow" | "reject"))
        .then(|| Question {
            prompt: decision.reason.as_str().to_owned(),
            choices: wire.ask.choices,
            timeout_ms: wire.ask.timeout_ms,
            default: wire.ask.default,
        })
    }
}

/// A retry an `output` interceptor asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryAsk {
    /// The user message of the retry request.
    pub feedback: String,
    /// At most this many retries by this interceptor for one answer.
    pub max: u32,
    /// On exhaustion: `None` accepts the answer, `Some(reason)` blocks.
    pub exhausted_block: Option<String>,
}

impl RetryAsk {
    /// The retry a pack's decision carries, if it is a well-formed one.
    fn from_decision(decision: &Decision) -> Option<RetryAsk> {
        #[derive(serde::Deserialize)]
        struct Wire {
            retry: Bound,
        }
        #[derive(serde::Deserialize)]
        struct Bound {
            max: u32,
            exhausted: String,
            #[serde(default)]
            reason: String,
        }
        let value = decision.value.as_ref().into_option()?;
        let json = value.extension_json.as_ref().into_option()?;
        let wire: Wire = serde_json::from_str(json.as_str()).ok()?;
        let exhausted_block = match wire.retry.exhausted.as_str() {
            "allow" => None,
            "block" => Some(wire.retry.reason),
            _ => return None,
        };
        Some(RetryAsk {
            feedback: decision.reason.as_str().to_owned(),
            max: wire.retry.max,
            exhausted_block,
        })
    }
}

/// What one interceptor answered.
pub(super) enum Verdict<V> {
    Allow,
    Act(Act<V>),
    Block(String),
    Error(String),
    Invalid(Invalid),
    Unknown(DecisionKind),
}

impl<V> Verdict<V> {
    pub(super) fn is_failure(&self) -> bool {
        matches!(
            self,
            Verdict::Error(_) | Verdict::Invalid(_) | Verdict::Unknown(_)
        )
    }
}

/// An answer beyond allow and block, as the seam takes it: the chain
/// records it and goes on (`Deadline`, `Hold`, `Replace`) or stops there.
pub(super) enum Act<V> {
    Deadline(Duration, String),
    /// Withhold this many trailing bytes, of the rewritten text when a
    /// rewrite rides along (`stream_chunk`).
    Hold(usize, Option<V>),
    Retry(Box<RetryAsk>),
    Ask(Box<Question>),
    Pause(Duration, String),
    Compact(String),
    Replace(V),
}

pub(super) fn host_verdict<S: SeamSpec>(
    f: &S::HostFn,
    lead: &S::Lead,
    value: &S::Value,
) -> Verdict<S::Value> {
    match panic::catch_unwind(AssertUnwindSafe(|| S::call_host(f, lead, value))) {
        Ok(Ok(InterceptDecision::Allow)) => Verdict::Allow,
        Ok(Ok(InterceptDecision::Replace(new))) => Verdict::Act(Act::Replace(new)),
        Ok(Ok(InterceptDecision::Block(reason))) => Verdict::Block(reason),
        Ok(Err(error)) => Verdict::Error(error.as_str().to_owned()),
        Err(payload) => Verdict::Error(format!(
            "panicked: {}",
            chimera_plugin_api::sdk::panic_message(&*payload)
        )),
    }
}

/// The wait a `retry_after` decision carries.
fn retry_after(decision: &Decision) -> Option<Duration> {
    #[derive(serde::Deserialize)]
    struct Wire {
        retry_after_ms: u64,
    }
    let value = decision.value.as_ref().into_option()?;
    let json = value.extension_json.as_ref().into_option()?;
    let wire: Wire = serde_json::from_str(json.as_str()).ok()?;
    Some(Duration::from_millis(wire.retry_after_ms))
}

/// True when a block carries `{"compact":true}` (the SDK's spelling; a
/// notice may ride beside it).
fn asks_compaction(decision: &Decision) -> bool {
    decision
        .value
        .as_ref()
        .into_option()
        .and_then(|value| value.extension_json.as_ref().into_option())
        .is_some_and(|json| json.as_str().contains("\"compact\":true"))
}

/// The deadline an allow carries: `{"deadline_ms":N,"on_timeout":"…"}`.
fn deadline(decision: &Decision) -> Option<(Duration, String)> {
    #[derive(serde::Deserialize)]
    struct Wire {
        deadline_ms: u64,
        on_timeout: String,
    }
    let value = decision.value.as_ref().into_option()?;
    let json = value.extension_json.as_ref().into_option()?;
    if !json.as_str().contains("\"deadline_ms\"") {
        return None;
    }
    let wire: Wire = serde_json::from_str(json.as_str()).ok()?;
    Some((Duration::from_millis(wire.deadline_ms), wire.on_timeout))
}

pub(super) fn pack_verdict<S: SeamSpec>(
    decision: Decision,
    lead: &S::Lead,
    current: &S::Value,
) -> Verdict<S::Value> {
    if S::DEADLINES && decision.kind == DecisionKind::ALLOW {
        if let Some((within, on_timeout)) = deadline(&decision) {
            return Verdict::Act(Act::Deadline(within, on_timeout));
        }
    }
    if let Some(bytes) = decision.kind.held_bytes() {
        if !S::HOLDS {
            return Verdict::Unknown(decision.kind);
        }
        // A rewrite rides on a hold as the value's text; a notice alone
        // (the value's extension) is no rewrite.
        return match decision.value.into_option() {
            Some(value) if value.text.is_some() => {
                match S::from_abi(
                    lead,
                    abi_stable::std_types::RBox::into_inner(value),
                    current,
                ) {
                    Ok(new) => Verdict::Act(Act::Hold(bytes, Some(new))),
                    Err(invalid) => Verdict::Invalid(invalid),
                }
            }
            _ => Verdict::Act(Act::Hold(bytes, None)),
        };
    }
    if decision.kind == DecisionKind::BLOCK && S::PAUSES && asks_compaction(&decision) {
        return Verdict::Act(Act::Compact(decision.reason.into_string()));
    }
    if decision.kind == DecisionKind::RETRY && S::PAUSES {
        return match retry_after(&decision) {
            Some(wait) => Verdict::Act(Act::Pause(wait, decision.reason.into_string())),
            None => Verdict::Invalid(Invalid::Malformed(
                "a retry here needs {\"retry_after_ms\":N}".to_owned(),
            )),
        };
    }
    if decision.kind == DecisionKind::RETRY && S::RETRIES {
        return match RetryAsk::from_decision(&decision) {
            Some(ask) => Verdict::Act(Act::Retry(Box::new(ask))),
            None => Verdict::Invalid(Invalid::Malformed(
                "a retry needs {\"retry\":{\"max\":N,\"exhausted\":\"allow\"|\"block\"}}"
                    .to_owned(),
            )),
        };
    }
    if decision.kind == DecisionKind::ASK && S::ASKS {
        return match Question::from_decision(&decision) {
            Some(question) => Verdict::Act(Act::Ask(Box::new(question))),
            None => Verdict::Invalid(Invalid::Malformed(
                "an ask needs {\"ask\":{\"choices\":[…],\"timeout_ms\":N,\"default\":\"allow\"|\"reject\"}}"
                    .to_owned(),
            )),
        };
    }
    match decision.kind {
        DecisionKind::ALLOW => Verdict::Allow,
        DecisionKind::BLOCK => Verdict::Block(decision.reason.into_string()),
        DecisionKind::ERROR => Verdict::Error(decision.reason.into_string()),
        DecisionKind::REPLACE => match decision.value.into_option() {
            Some(boxed) => {
                match S::from_abi(
                    lead,
                    abi_stable::std_types::RBox::into_inner(boxed),
                    current,
                ) {
                    Ok(new) => Verdict::Act(Act::Replace(new)),
                    Err(invalid) => Verdict::Invalid(invalid),
                }
            }
            None => Verdict::Invalid(Invalid::WrongType("nothing".to_owned())),
        },
        other => Verdict::Unknown(other),
    }
}
