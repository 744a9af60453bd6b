//! The chain runner: one algorithm for every seam.

use super::events::{EventDecision, InterceptorEvent};
use super::health::{coarse_now, PackHealth};
use super::interceptor::{Interceptor, Kind, RemotePack};
use super::seams::{Invalid, SeamSpec};
use super::session::SessionFacts;
use super::verdict::{host_verdict, pack_verdict, Act, Question, RetryAsk, Verdict};
use super::{AuditRecord, Changes};
use chimera_plugin_api::abi::{Decision, DecisionKind, SeamInput};
use std::sync::Arc;
use std::time::Duration;

/// What a chain run produced.
#[derive(Debug)]
pub struct ChainOutcome<V> {
    /// The final value when any interceptor replaced it; `None` means the
    /// input passes through as the very same value.
    pub replaced: Option<V>,
    /// The block reason when the chain stopped (by a block, or by a failure on
    /// a fail-closed seam).
    pub blocked: Option<String>,
    /// The interceptor whose block stopped the chain (its display name,
    /// `<pack>/<name>`), when one did.
    pub blocked_by: Option<String>,
    /// The chain stopped because an interceptor could not judge the value
    /// (an error, a panic, a pack unavailable or quarantined) on a seam
    /// that fails closed: `blocked` says why. A server answers this as
    /// unavailable (503), not as a policy's refusal.
    pub unjudged: bool,
    /// `stream_chunk` only: how many trailing bytes to withhold (the largest
    /// hold any interceptor answered; 0 releases everything).
    pub held: usize,
    /// `stream_chunk` only: the interceptor that answered that largest hold
    /// (its display name), when any held.
    pub held_by: Option<String>,
    /// User-facing notices the interceptors attached, in chain order. Shown
    /// to the user, never sent to the model.
    pub notices: Vec<Notice>,
    /// `output` only: the interceptor that asked for a retry (the chain
    /// stopped there), and what it asked.
    pub retry: Option<Box<(String, RetryAsk)>>,
    /// `tool_call` / `provider_request` only: an interceptor asks an
    /// operator. The chain stopped at it (its index in the chain, its name);
    /// the caller asks and resumes after it.
    pub ask: Option<Box<(usize, String, Question)>>,
    /// `provider_request` only: an interceptor paused the turn (its name,
    /// the wait it asked for, its reason); the chain stopped there.
    pub pause: Option<Box<(String, Duration, String)>>,
    /// `provider_request` only: an interceptor asked for the conversation
    /// to be compacted before the request is built again (its name, its
    /// reason); the chain stopped there.
    pub compact: Option<Box<(String, String)>>,
    /// `tool_call` only: the shortest deadline an interceptor gave the call
    /// (its name, the deadline, the error result recorded past it). The
    /// chain went on.
    pub deadline: Option<Box<(String, Duration, String)>>,
}

/// Nothing decided: the value passes, nothing held, no notices.
impl<V> Default for ChainOutcome<V> {
    fn default() -> Self {
        ChainOutcome {
            replaced: None,
            blocked: None,
            blocked_by: None,
            unjudged: false,
            held: 0,
            held_by: None,
            notices: Vec::new(),
            retry: None,
            ask: None,
            pause: None,
            compact: None,
            deadline: None,
        }
    }
}

/// A user-facing notice one interceptor attached to its decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Display name of the interceptor (`<pack>/<name>`).
    pub interceptor: String,
    /// The text to show.
    pub text: String,
}

/// Where a chain run reports.
pub struct ChainContext<'a> {
    /// The conversation the chain runs for.
    pub session: &'a SessionFacts,
    /// Receives one event per block / replace / error; `None` when nobody
    /// listens, and then no event is even built.
    pub events: Option<&'a dyn Fn(InterceptorEvent)>,
}

/// Receives every decision of a chain run for an audit log — allows too,
/// and each replacement with what it changed; `None` when no log is kept,
/// and then nothing more than the transcript's events is built.
pub(crate) type AuditSink<'a> = Option<&'a dyn Fn(AuditRecord)>;

/// Why a run of pack interceptors stopped before the end.
enum Stop {
    /// An interceptor answered something other than allow.
    Decided(Decision),
    /// The next interceptor's pack is quarantined, or its process is
    /// restarting; it was not called (and that is no new failure).
    Quarantined(String),
}

/// What the chain does after one interceptor's verdict (a failure already
/// turned into going on or stopping, by the seam's failure policy).
enum Flow<V> {
    Continue,
    Act(Act<V>),
    Stop(String),
    /// A failure stopped the chain (the seam fails closed).
    Unjudged(String),
}

/// Runs `chain` over `value`, in list order:
///
/// * allow → next interceptor, same value, no event;
/// * replace → the value becomes the replacement; later interceptors see it;
/// * block → stop; the first block wins and later interceptors never run;
/// * failure (error, panic, a replacement of the wrong type, an unknown
///   decision kind) → an `error` event, then the seam's policy: fail-open
///   seams skip the interceptor and keep the last good value, `tool_call`
///   stops with `interceptor error: …`;
/// * any decision of an interceptor in monitor mode
///   ([`PackMode::Monitor`](super::PackMode)) → reported as above (its
///   event and audit record marked `monitor`), then the next interceptor,
///   same value: nothing it answers (a block, a replacement, a hold, a
///   retry, a question, a pause, a compaction, a deadline, a failure, a
///   notice) is enacted.
///
/// Pack interceptors see the value through ABI views built once per run of
/// consecutive pack interceptors, and rebuilt only after a replacement.
pub fn run_chain<S: SeamSpec>(
    chain: &[Interceptor<S>],
    lead: &S::Lead,
    value: &S::Value,
    cx: &ChainContext<'_>,
) -> ChainOutcome<S::Value> {
    run_chain_spent(chain, lead, value, cx, None, &|_| false)
}

/// [`run_chain`], reporting every decision to `audit` as well, where a
/// retry from an interceptor `spent` names (its bound used up) is answered
/// by its exhaustion outcome instead.
pub(crate) fn run_chain_spent<S: SeamSpec>(
    chain: &[Interceptor<S>],
    lead: &S::Lead,
    value: &S::Value,
    cx: &ChainContext<'_>,
    audit: AuditSink<'_>,
    spent: &dyn Fn(&str) -> bool,
) -> ChainOutcome<S::Value> {
    let session = cx.session.view();
    let ids = S::tool_ids(lead, value);
    let sinks = Sinks {
        events: cx.events,
        audit,
    };
    // A bare allow inside a run of pack interceptors never reaches
    // `apply`: the run reports it, by index, only when a log is kept.
    let allowed = |index: usize| {
        Report::new(&chain[index], ids, &sinks).audited(EventDecision::Allowed, String::new);
    };
    let allowed = audit.map(|_| &allowed as &dyn Fn(usize));
    let mut outcome = ChainOutcome::default();
    let mut next = 0;
    while next < chain.len() {
        let current = outcome.replaced.as_ref().unwrap_or(value);
        let (index, verdict) = match &chain[next].inner.kind {
            Kind::Host(f) => (next, host_verdict::<S>(f, lead, current)),
            Kind::Pack(..) | Kind::Isolated(..) => {
                let stop = S::with_input(lead, current, &session, |input| {
                    run_packs::<S>(chain, &mut next, input, allowed)
                });
                match stop {
                    None => continue,
                    Some((index, Stop::Quarantined(reason))) => (index, Verdict::Error(reason)),
                    Some((index, Stop::Decided(decision))) => {
                        // A monitored interceptor's notice is not shown:
                        // it changes nothing the user sees.
                        if let Some(text) =
                            decision.notice().filter(|_| !chain[index].is_monitored())
                        {
                            outcome.notices.push(Notice {
                                interceptor: chain[index].name().to_owned(),
                                text,
                            });
                        }
                        let verdict = pack_verdict::<S>(decision, lead, current);
                        if verdict.is_failure() {
                            if let Kind::Pack(_, Some(health))
                            | Kind::Isolated(_, _, Some(health)) = &chain[index].inner.kind
                            {
                                health.failed(&cx.session.session_id);
                            }
                        }
                        (index, verdict)
                    }
                }
            }
        };
        next = index + 1;
        let entry = &chain[index];
        let verdict = match verdict {
            Verdict::Act(Act::Retry(ask)) if spent(entry.name()) => match ask.exhausted_block {
                None => Verdict::Allow,
                Some(reason) => Verdict::Block(reason),
            },
            other => other,
        };
        let name = || entry.name().to_owned();
        match apply::<S>(verdict, current, &Report::new(entry, ids, &sinks)) {
            Flow::Continue => continue,
            Flow::Act(Act::Hold(bytes, rewritten)) => {
                if let Some(new) = rewritten {
                    outcome.replaced = Some(new);
                }
                if bytes > outcome.held {
                    outcome.held = bytes;
                    outcome.held_by = Some(name());
                }
                continue;
            }
            Flow::Act(Act::Deadline(within, on_timeout)) => {
                if outcome.deadline.as_ref().is_none_or(|d| within < d.1) {
                    outcome.deadline = Some(Box::new((name(), within, on_timeout)));
                }
                continue;
            }
            Flow::Act(Act::Replace(new)) => {
                outcome.replaced = Some(new);
                continue;
            }
            Flow::Act(Act::Retry(ask)) => outcome.retry = Some(Box::new((name(), *ask))),
            Flow::Act(Act::Ask(question)) => {
                outcome.ask = Some(Box::new((index, name(), *question)));
            }
            Flow::Act(Act::Pause(wait, reason)) => {
                outcome.pause = Some(Box::new((name(), wait, reason)));
            }
            Flow::Act(Act::Compact(reason)) => outcome.compact = Some(Box::new((name(), reason))),
            Flow::Stop(reason) => {
                outcome.blocked = Some(reason);
                outcome.blocked_by = Some(name());
            }
            Flow::Unjudged(reason) => {
                outcome.blocked = Some(reason);
                outcome.blocked_by = Some(name());
                outcome.unjudged = true;
            }
        }
        // Every other flow stops the chain here.
        break;
    }
    outcome
}

/// One pack's consecutive interceptors in a run: containment is paid once
/// for them — one quarantine check, and (when the pack has a call budget)
/// one clock read at each end.
struct Group<'c> {
    health: Option<&'c PackHealth>,
    first: usize,
    started: Option<Duration>,
}

#[allow(
    clippy::inline_always,
    reason = "measured: out of line, reading the returned group right after the call \
              stalls on store forwarding, a third of a pack call's cost"
)]
impl<'c> Group<'c> {
    #[inline(always)]
    fn start(health: Option<&'c PackHealth>, first: usize, timed: bool) -> Self {
        let started = health
            .filter(|_| timed)
            .and_then(PackHealth::budget)
            .map(|_| coarse_now());
        Group {
            health,
            first,
            started,
        }
    }

    #[inline(always)]
    fn same_pack(&self, health: Option<&PackHealth>) -> bool {
        match (self.health, health) {
            (Some(a), Some(b)) => std::ptr::eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    /// The group ran `chain[first..end]` on `input`: a group over its
    /// budget (for the input's size) is one overrun of that pack (its
    /// interceptors are named; a group of one is exactly the old per-call
    /// measure). The input is measured only past the base budget.
    fn finish<S: SeamSpec>(self, chain: &[Interceptor<S>], input: &SeamInput<'_>, end: usize) {
        let (Some(health), Some(started)) = (self.health, self.started) else {
            return;
        };
        let elapsed = coarse_now().saturating_sub(started);
        if health.budget().is_some_and(|budget| elapsed > budget) {
            let names: Vec<&str> = chain[self.first..end]
                .iter()
                .map(Interceptor::name)
                .collect();
            health.took(&names.join(", "), S::NAME, elapsed, input_bytes(input));
        }
    }
}

/// The bytes of text a seam input hands a pack: what its budget grows by.
fn input_bytes(input: &SeamInput<'_>) -> usize {
    let call = |c: &chimera_plugin_api::abi::ToolCallView<'_>| {
        c.id.len() + c.name.len() + c.arguments_json.len()
    };
    let messages: usize = input
        .messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.blocks
                    .iter()
                    .map(|b| b.text.len() + b.data_json.len())
                    .sum::<usize>()
                + m.tool_calls.iter().map(call).sum::<usize>()
        })
        .sum();
    let request = input.request.as_ref().map_or(0, |r| {
        r.tools_json.len()
            + r.kwargs_json.len()
            + r.headers
                .as_ref()
                .map_or(0, |h| h.iter().map(|h| h.name.len() + h.value.len()).sum())
    });
    let result = input
        .tool_result
        .as_ref()
        .map_or(0, |r| r.output.len() + r.metadata_json.len());
    messages
        + request
        + input.tool_call.as_ref().map_or(0, |c| call(c))
        + result
        + input.text.len()
        + input.extension_json.len()
}

/// Runs consecutive pack interceptors from `chain[*next]` on one borrowed
/// input until one answers something other than allow (returned with its
/// index), a quarantined pack is met, or a host interceptor (or the end)
/// comes. Leaves `*next` at the first interceptor not run. Each bare allow
/// is reported to `allowed` (by index), when there is one.
fn run_packs<S: SeamSpec>(
    chain: &[Interceptor<S>],
    next: &mut usize,
    input: &SeamInput<'_>,
    allowed: Option<&dyn Fn(usize)>,
) -> Option<(usize, Stop)> {
    let mut group: Option<Group<'_>> = None;
    while let Some(entry) = chain.get(*next) {
        let health = match &entry.inner.kind {
            Kind::Pack(_, health) | Kind::Isolated(_, _, health) => health.as_deref(),
            Kind::Host(_) => break,
        };
        if !group.as_ref().is_some_and(|g| g.same_pack(health)) {
            if let Some(done) = group.take() {
                done.finish(chain, input, *next);
            }
            if let Some(reason) = health.and_then(PackHealth::quarantine) {
                return Some((*next, Stop::Quarantined(reason)));
            }
            // An isolated pack's host enforces the budget itself (it
            // kills the call and says so in one line): not timed twice.
            let timed = matches!(entry.inner.kind, Kind::Pack(..));
            group = Some(Group::start(health, *next, timed));
        }
        let decision = match &entry.inner.kind {
            Kind::Pack(pack, _) => pack.intercept(input),
            Kind::Isolated(pack, ..) => match run_isolated(chain, next, pack, input, allowed) {
                Ok(Some(decision)) => decision,
                Ok(None) => continue,
                Err(reason) => {
                    if let Some(done) = group.take() {
                        done.finish(chain, input, *next);
                    }
                    return Some((*next, Stop::Quarantined(reason)));
                }
            },
            Kind::Host(_) => break,
        };
        // Anything but a bare allow (a notice rides on a value) is handled
        // by the caller.
        if decision.kind != DecisionKind::ALLOW || decision.value.is_some() {
            if let Some(done) = group.take() {
                done.finish(chain, input, *next + 1);
            }
            return Some((*next, Stop::Decided(decision)));
        }
        if let Some(allowed) = allowed {
            allowed(*next);
        }
        // An allow that holds nothing (no reason text, no value) owns no
        // memory: it is forgotten in place rather than dropped, whose field
        // drops are calls back into the pack that would free nothing.
        if decision.reason.capacity() == 0 && decision.value.is_none() {
            std::mem::forget(decision);
        }
        *next += 1;
    }
    if let Some(done) = group {
        done.finish(chain, input, *next);
    }
    None
}

/// Runs the interceptors of isolated pack `pack` that follow one another
/// from `chain[*next]` as one round trip to its process. Leaves `*next` at
/// the interceptor that answered something other than allow (returned), or
/// after the run when all allowed (`None`); `Err` when the pack's process
/// is restarting and nothing was called.
fn run_isolated<S: SeamSpec>(
    chain: &[Interceptor<S>],
    next: &mut usize,
    pack: &Arc<dyn RemotePack>,
    input: &SeamInput<'_>,
    allowed: Option<&dyn Fn(usize)>,
) -> Result<Option<Decision>, String> {
    let indices: Vec<u32> = chain[*next..]
        .iter()
        .map_while(|entry| match &entry.inner.kind {
            Kind::Isolated(other, index, _) if Arc::ptr_eq(other, pack) => Some(*index),
            _ => None,
        })
        .collect();
    let (passed, decision) = pack.call(&indices, input)?;
    if let Some(allowed) = allowed {
        for offset in 0..passed {
            allowed(*next + offset);
        }
    }
    *next += passed;
    Ok(decision)
}

/// Where a chain run's decisions go: the transcript's events and the
/// audit log's.
struct Sinks<'a> {
    events: Option<&'a dyn Fn(InterceptorEvent)>,
    audit: AuditSink<'a>,
}

/// Reports one interceptor's decision.
struct Report<'a, S: SeamSpec> {
    entry: &'a Interceptor<S>,
    ids: (&'a str, &'a str),
    sinks: &'a Sinks<'a>,
}

impl<'a, S: SeamSpec> Report<'a, S> {
    fn new(entry: &'a Interceptor<S>, ids: (&'a str, &'a str), sinks: &'a Sinks<'a>) -> Self {
        Report { entry, ids, sinks }
    }

    fn event(&self, decision: EventDecision, reason: String) -> InterceptorEvent {
        InterceptorEvent {
            seam: S::NAME,
            decision,
            reason,
            tool_name: self.ids.0.to_owned(),
            call_id: self.ids.1.to_owned(),
            interceptor: self.entry.name().to_owned(),
            monitor: self.entry.is_monitored(),
        }
    }

    fn record(&self, event: InterceptorEvent, changes: Option<Changes>) -> AuditRecord {
        AuditRecord {
            event,
            from_pack: self.entry.is_pack(),
            changes,
            depth: 0,
            parent_call_id: None,
        }
    }

    /// A decision the transcript shows (a block, a replacement, a
    /// failure); the audit log records it too, with what a replacement
    /// changed.
    fn shown(
        &self,
        decision: EventDecision,
        reason: String,
        changes: impl FnOnce() -> Option<Changes>,
    ) {
        match (self.sinks.events, self.sinks.audit) {
            (None, None) => {}
            (Some(events), None) => events(self.event(decision, reason)),
            (events, Some(audit)) => {
                let event = self.event(decision, reason);
                if let Some(events) = events {
                    events(event.clone());
                }
                audit(self.record(event, changes()));
            }
        }
    }

    /// Reports an answer beyond allow and block: a change is shown
    /// (with what it changed), the others only audited.
    fn act(&self, act: &Act<S::Value>, current: &S::Value) {
        match act {
            Act::Deadline(within, _) => self.audited(EventDecision::Allowed, || {
                format!("within {} ms", within.as_millis())
            }),
            Act::Hold(_, None) => {}
            Act::Hold(_, Some(new)) | Act::Replace(new) => {
                self.shown(EventDecision::Replaced, String::new(), || {
                    Some(S::changes(current, new))
                });
            }
            Act::Retry(ask) => self.audited(EventDecision::Retry, || ask.feedback.clone()),
            Act::Ask(question) => self.audited(EventDecision::Ask, || question.prompt.clone()),
            Act::Pause(_, reason) => self.audited(EventDecision::Pause, || reason.clone()),
            Act::Compact(reason) => self.shown(EventDecision::Blocked, reason.clone(), || None),
        }
    }

    /// A decision only the audit log records. A streamed delta's allow is
    /// not recorded (one per delta and gate).
    fn audited(&self, decision: EventDecision, reason: impl FnOnce() -> String) {
        if S::HOLDS && decision == EventDecision::Allowed {
            return;
        }
        if let Some(audit) = self.sinks.audit {
            audit(self.record(self.event(decision, reason()), None));
        }
    }
}

/// Reports `verdict` and says what the chain does next. A monitored
/// interceptor's verdict is reported all the same (marked `monitor`) and
/// never enacted: the chain goes on as if it allowed.
fn apply<S: SeamSpec>(
    verdict: Verdict<S::Value>,
    current: &S::Value,
    report: &Report<'_, S>,
) -> Flow<S::Value> {
    let flow = enact::<S>(verdict, current, report);
    if report.entry.is_monitored() {
        Flow::Continue
    } else {
        flow
    }
}

/// Reports `verdict` and turns it into the chain's next step.
fn enact<S: SeamSpec>(
    verdict: Verdict<S::Value>,
    current: &S::Value,
    report: &Report<'_, S>,
) -> Flow<S::Value> {
    let entry = report.entry;
    let name = entry.name();
    let fail = |event_reason: String, block_text: String| {
        report.shown(EventDecision::Error, event_reason, || None);
        if entry.fails_closed() {
            Flow::Unjudged(format!("interceptor error: {block_text}"))
        } else {
            Flow::Continue
        }
    };
    match verdict {
        Verdict::Allow => {
            report.audited(EventDecision::Allowed, String::new);
            Flow::Continue
        }
        Verdict::Act(act) => {
            let act = match act {
                Act::Replace(new) => Act::Replace(S::adopt(new, current)),
                other => other,
            };
            report.act(&act, current);
            Flow::Act(act)
        }
        Verdict::Block(reason) => {
            report.shown(EventDecision::Blocked, reason.clone(), || None);
            Flow::Stop(if reason.is_empty() {
                "blocked by interceptor".to_owned()
            } else {
                reason
            })
        }
        Verdict::Error(text) => fail(format!("{name}: {text}"), text),
        Verdict::Invalid(Invalid::WrongType(got)) => {
            let text = format!("{name}: replace value must be {}, got {got}", S::EXPECTED);
            fail(text.clone(), text)
        }
        Verdict::Invalid(Invalid::Malformed(detail)) => {
            let text = format!("{name}: invalid {} replacement: {detail}", S::EXPECTED);
            fail(text.clone(), text)
        }
        Verdict::Unknown(kind) => {
            let label = match kind {
                DecisionKind::RETRY => "retry".to_owned(),
                DecisionKind::ASK => "ask".to_owned(),
                other if other.held_bytes().is_some() => "hold".to_owned(),
                other => other.0.to_string(),
            };
            let text = format!("unknown decision kind '{label}'");
            fail(format!("{name}: {text}"), text)
        }
    }
}
