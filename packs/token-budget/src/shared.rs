//! Spending counted in the host's shared store, when it has one: several
//! gateway replicas then enforce one budget per conversation.
//!
//! Each reply adds its call's charge (`Session::last_call`, on
//! `model_response`) to the conversation's counters, one per quantity a
//! limit reads: `spent:<dimension>:<window>:<source>:<kind>`, kind `in`,
//! `out`, `tokens` or `usd_micros` (millionths of a dollar). Ceilings that
//! count the same spending share their counters, so a rebuilt pack with
//! its ceilings reordered still reads what was counted. A day window is
//! the store's fixed window of one day: its days start at UTC midnight
//! by the store's clock. Before each call the gate reads the counters its
//! limits need (one round trip a limit); the add after a reply is sent
//! without waiting for its answer (`State::add`), so it costs the request
//! no round trip, and it is on its way to the store before the reply
//! reaches the client, so before the client's next request is read
//! anywhere.

use crate::budget::Spent;
use crate::config::{Ceiling, Dimension, Window as Span};
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

/// What `ceiling` counts as spent in conversation `session`, from the
/// store (only the quantities its limits read).
pub(crate) fn spent(state: &State, session: &str, ceiling: &Ceiling) -> Result<Spent, StateError> {
    let mut spent = Spent::default();
    for kind in Kind::of(ceiling) {
        let total = state.get(
            Scope::Conversation(session),
            &key(ceiling, kind),
            window(ceiling),
        )?;
        let total = u64::try_from(total).unwrap_or(0);
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
    Ok(spent)
}

/// Adds one call's charge (from `source`) to every counter a ceiling that
/// counts it reads, each once.
pub(crate) fn record(
    state: &State,
    session: &str,
    ceilings: &[Ceiling],
    source: &str,
    usage: &SourceUsage,
) -> Result<(), StateError> {
    let mut added = BTreeSet::new();
    for ceiling in ceilings.iter().filter(|c| counts(c, source)) {
        for kind in Kind::of(ceiling) {
            let key = key(ceiling, kind);
            let amount = kind.amount(usage);
            if amount == 0 || !added.insert(key.clone()) {
                continue;
            }
            state.add(Scope::Conversation(session), &key, amount, window(ceiling))?;
        }
    }
    Ok(())
}
