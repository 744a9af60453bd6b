//! Spending counted in the host's store, by reservation: every call of a
//! conversation — concurrent ones too, on whichever replica of a gateway
//! — sees what the others hold.
//!
//! Counters: one per quantity a limit reads,
//! `spent:<dimension>:<window>:<source>:<kind>` in the conversation's
//! scope, kind `in`, `out`, `tokens` or `usd_micros` (millionths of a
//! dollar). Ceilings that count the same spending share their counters,
//! so a rebuilt pack with its ceilings reordered still reads what was
//! counted. A day window is the store's fixed window of one day: its days
//! start at UTC midnight by the store's clock.
//!
//! A call *reserves* its estimate: one atomic add to each counter it
//! counts in, whose total — what was spent, what every call under way
//! holds, and this call's estimate — is what the limits judge (the
//! store's incr-then-check: two calls never both see room that only one
//! has). A call that is blocked gives its reservation back at once. When
//! the call ends, its reservation is *settled*: replaced by what the
//! provider reported, given back when nothing was billed, kept when what
//! was billed is not known (the reply broke off or reported no usage: the
//! estimate is the charge). The settling adds are sent without waiting for
//! their answers (`State::add`).

use crate::config::{Ceiling, Dimension, Window as Span};
use crate::spent::Spent;
use chimera_plugin_api::sdk::{Scope, SourceUsage, State, StateError, Window};
use std::collections::BTreeSet;
use std::time::Duration;

/// What a limit reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    In,
    Out,
    Tokens,
    UsdMicros,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::In => "in",
            Kind::Out => "out",
            Kind::Tokens => "tokens",
            Kind::UsdMicros => "usd_micros",
        }
    }

    /// The kinds `ceiling`'s limits read.
    fn of(ceiling: &Ceiling) -> impl Iterator<Item = Kind> + '_ {
        [
            (ceiling.max_input_tokens.is_some(), Kind::In),
            (ceiling.max_output_tokens.is_some(), Kind::Out),
            (ceiling.max_total_tokens.is_some(), Kind::Tokens),
            (ceiling.max_usd.is_some(), Kind::UsdMicros),
        ]
        .into_iter()
        .filter_map(|(read, kind)| read.then_some(kind))
    }

    /// How much of `usage` it counts.
    fn amount(self, usage: &SourceUsage) -> i64 {
        let tokens = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        match self {
            Kind::In => tokens(usage.input_tokens),
            Kind::Out => tokens(usage.output_tokens),
            Kind::Tokens => tokens(usage.input_tokens.saturating_add(usage.output_tokens)),
            #[allow(
                clippy::cast_possible_truncation,
                reason = "micro-dollars of one call, far below 2^63"
            )]
            Kind::UsdMicros => (usage.cost_usd.max(0.0) * 1e6).round() as i64,
        }
    }
}

/// The counter of `kind` for `ceiling`.
fn key(ceiling: &Ceiling, kind: Kind) -> String {
    let span = match ceiling.window {
        Span::Session => "session",
        Span::Day => "day",
    };
    let source = match ceiling.dimension {
        Dimension::Session => "*",
        Dimension::SourcePlugin => ceiling.matches.as_deref().unwrap_or("*"),
    };
    format!(
        "spent:{}:{span}:{source}:{}",
        ceiling.dimension.as_str(),
        kind.as_str()
    )
}

fn window(ceiling: &Ceiling) -> Window {
    match ceiling.window {
        Span::Session => Window::None,
        Span::Day => Window::Every(Duration::from_secs(86_400)),
    }
}

/// Whether `ceiling` counts a call from `source`.
fn counts(ceiling: &Ceiling, source: &str) -> bool {
    ceiling.dimension == Dimension::Session || ceiling.matches.as_deref() == Some(source)
}

/// What one call holds in the store: per counter, its amount.
#[derive(Debug)]
pub(crate) struct Held {
    /// The conversation whose counters they are.
    session: String,
    counters: Vec<Counter>,
}

/// One counter a call added to, and how much.
#[derive(Debug)]
struct Counter {
    key: String,
    kind: Kind,
    window: Window,
    amount: i64,
    /// Its total once this call's amount was added.
    total: i64,
}

/// Reserves `estimate` for a call from `source` in conversation `session`:
/// adds its amount to every counter a ceiling that counts the call reads,
/// each once. What each counter holds then is in the [`Held`].
///
/// # Errors
///
/// The store's, when it refuses (down, and this pack fails closed); what
/// was already added is given back first.
pub(crate) fn reserve(
    state: &State,
    session: &str,
    ceilings: &[Ceiling],
    source: &str,
    estimate: &SourceUsage,
) -> Result<Held, StateError> {
    let mut held = Held {
        session: session.to_owned(),
        counters: Vec::new(),
    };
    let mut seen = BTreeSet::new();
    for ceiling in ceilings.iter().filter(|c| counts(c, source)) {
        for kind in Kind::of(ceiling) {
            let key = key(ceiling, kind);
            if !seen.insert(key.clone()) {
                continue;
            }
            let amount = kind.amount(estimate);
            let window = window(ceiling);
            match state.incr_by(Scope::Conversation(session), &key, amount, window) {
                Ok(total) => held.counters.push(Counter {
                    key,
                    kind,
                    window,
                    amount,
                    total,
                }),
                Err(error) => {
                    let _ = release(state, &held);
                    return Err(error);
                }
            }
        }
    }
    Ok(held)
}

/// What `ceiling` counts as spent besides the call `held` reserved for:
/// what was spent and what the calls under way hold.
pub(crate) fn spent_besides(held: &Held, ceiling: &Ceiling) -> Spent {
    let mut spent = Spent::default();
    for kind in Kind::of(ceiling) {
        let key = key(ceiling, kind);
        let Some(counter) = held.counters.iter().find(|c| c.key == key) else {
            continue;
        };
        let total = u64::try_from(counter.total - counter.amount).unwrap_or(0);
        match kind {
            Kind::In => spent.input = total,
            Kind::Out => spent.output = total,
            Kind::Tokens => spent.total = total,
            #[allow(
                clippy::cast_precision_loss,
                reason = "micro-dollars shown as dollars: exact far beyond any budget"
            )]
            Kind::UsdMicros => spent.usd = total as f64 / 1e6,
        }
    }
    spent
}

/// Gives back what `held` reserved.
///
/// # Errors
///
/// The store's, when it refuses.
pub(crate) fn release(state: &State, held: &Held) -> Result<(), StateError> {
    adjust(state, held, |counter| -counter.amount)
}

/// Settles `held` to what the provider reported: each counter gets what
/// `actual` counts there instead of the estimate.
///
/// # Errors
///
/// The store's, when it refuses.
pub(crate) fn settle(state: &State, held: &Held, actual: &SourceUsage) -> Result<(), StateError> {
    adjust(state, held, |counter| {
        counter.kind.amount(actual) - counter.amount
    })
}

/// Adds `change(counter)` to each counter of `held` (none when zero),
/// without waiting for the answers. Every counter is tried; the first
/// refusal is the answer.
fn adjust(state: &State, held: &Held, change: impl Fn(&Counter) -> i64) -> Result<(), StateError> {
    let mut outcome = Ok(());
    for counter in &held.counters {
        let n = change(counter);
        if n == 0 {
            continue;
        }
        let added = state.add(
            Scope::Conversation(&held.session),
            &counter.key,
            n,
            counter.window,
        );
        if outcome.is_ok() {
            outcome = added;
        }
    }
    outcome
}
