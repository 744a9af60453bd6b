//! The gate-state operations as one table: each operation with its own
//! arguments ([`StateKind`]), what it is answered ([`StateAnswer`]), its
//! code on the isolated packs' wire, and how an answer becomes the ABI
//! method's result. Every place an operation passes through reads it from
//! here:
//!
//! - in process, the service bound to a pack ([`super::GateState::bind`])
//!   answers it from the store;
//! - an isolated pack's host process asks the host for it over the wire;
//! - the host answers that question from the service bound to the pack;
//! - the wire codec writes and reads it by [`StateKind::code`].
//!
//! A new operation is a new row here, which the compiler then asks every
//! one of those places to handle.

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RArc, RResult, RStr, RString};
use chimera_plugin_api::abi::state::{
    StateScope, StateServiceAbi, StateServiceAbi_TO, StateServiceArc, TakeAbi,
};

/// Where an operation counts: the scope, the conversation (for a
/// conversation's scope) and the pack's key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At<'a> {
    /// Global, or the conversation's.
    pub(crate) scope: StateScope,
    /// The conversation's id (empty for the global scope).
    pub(crate) conversation: RStr<'a>,
    /// The pack's key.
    pub(crate) key: RStr<'a>,
}

impl<'a> At<'a> {
    /// `key` in `scope` (of `conversation`, for a conversation's scope).
    pub(crate) fn new(scope: StateScope, conversation: RStr<'a>, key: RStr<'a>) -> Self {
        At {
            scope,
            conversation,
            key,
        }
    }
}

/// Which operation, with its own arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum StateKind {
    /// `incr_by`: adds `n` and answers the window's new total.
    Incr { n: i64, window_ms: u64 },
    /// `add`: adds `n` without waiting for the total.
    Add { n: i64, window_ms: u64 },
    /// `get`: the window's total.
    Get { window_ms: u64 },
    /// `take`: `n` tokens from a bucket of `burst` refilled `rate` a second.
    Take { n: u64, rate: f64, burst: u64 },
}

/// The answer to a [`StateKind`]: a counter's total, a take, or the
/// refusal's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StateAnswer {
    /// `incr_by`'s or `get`'s total.
    Total(i64),
    /// `add` was asked of the store.
    Added,
    /// `take`'s outcome.
    Taken {
        allowed: bool,
        wait_ms: u64,
        remaining: u64,
    },
    /// Refused (the store is down and the pack fails closed, an argument
    /// is out of range, the host could not be asked).
    Refused(String),
}

impl StateKind {
    /// The operation's code on the isolated packs' wire.
    pub(crate) fn code(self) -> u8 {
        match self {
            StateKind::Incr { .. } => 0,
            StateKind::Get { .. } => 1,
            StateKind::Take { .. } => 2,
            StateKind::Add { .. } => 3,
        }
    }

    /// Asks `service` (a pack's view of the state service) for this
    /// operation `at` a key.
    pub(crate) fn ask(self, service: &StateServiceArc, at: At<'_>) -> StateAnswer {
        let At {
            scope,
            conversation,
            key,
        } = at;
        let answered = match self {
            StateKind::Incr { n, window_ms } => service
                .incr_by(scope, conversation, key, n, window_ms)
                .map(StateAnswer::Total),
            StateKind::Add { n, window_ms } => service
                .add(scope, conversation, key, n, window_ms)
                .map(|()| StateAnswer::Added),
            StateKind::Get { window_ms } => service
                .get(scope, conversation, key, window_ms)
                .map(StateAnswer::Total),
            StateKind::Take { n, rate, burst } => service
                .take(scope, conversation, key, n, rate, burst)
                .map(|taken| StateAnswer::Taken {
                    allowed: taken.allowed,
                    wait_ms: taken.wait_ms,
                    remaining: taken.remaining,
                }),
        };
        answered
            .into_result()
            .unwrap_or_else(|line| StateAnswer::Refused(line.into_string()))
    }
}

impl StateAnswer {
    /// The answer as `incr_by`'s or `get`'s result.
    fn total(self) -> RResult<i64, RString> {
        match self {
            StateAnswer::Total(total) => RResult::ROk(total),
            other => other.not_this(),
        }
    }

    /// The answer as `add`'s result.
    fn added(self) -> RResult<(), RString> {
        match self {
            StateAnswer::Added => RResult::ROk(()),
            other => other.not_this(),
        }
    }

    /// The answer as `take`'s result.
    fn taken(self) -> RResult<TakeAbi, RString> {
        match self {
            StateAnswer::Taken {
                allowed,
                wait_ms,
                remaining,
            } => RResult::ROk(TakeAbi {
                allowed,
                wait_ms,
                remaining,
            }),
            other => other.not_this(),
        }
    }

    /// A refusal's line, or the line for an answer of another kind than
    /// the operation's.
    fn not_this<T>(self) -> RResult<T, RString> {
        RResult::RErr(RString::from(match self {
            StateAnswer::Refused(line) => line,
            _ => "a state operation was answered with another kind of answer".to_owned(),
        }))
    }
}

/// What answers one pack's state operations: the service in this process,
/// or the host across an isolated pack's connection.
pub(crate) trait AnswersState: Send + Sync + 'static {
    /// The answer to `kind` `at` a key.
    fn answer(&self, at: At<'_>, kind: StateKind) -> StateAnswer;

    /// Whether other processes count into the same store.
    fn is_shared(&self) -> bool;
}

/// `answers` as the state service a pack holds.
pub(crate) fn served<T: AnswersState>(answers: T) -> StateServiceArc {
    RArc::new(StateServiceAbi_TO::from_value(Served(answers), TD_Opaque))
}

/// An [`AnswersState`] behind the ABI's state service.
struct Served<T>(T);

impl<T: AnswersState> StateServiceAbi for Served<T> {
    fn incr_by(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
        n: i64,
        window_ms: u64,
    ) -> RResult<i64, RString> {
        let kind = StateKind::Incr { n, window_ms };
        self.0
            .answer(At::new(scope, conversation, key), kind)
            .total()
    }

    fn add(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
        n: i64,
        window_ms: u64,
    ) -> RResult<(), RString> {
        let kind = StateKind::Add { n, window_ms };
        self.0
            .answer(At::new(scope, conversation, key), kind)
            .added()
    }

    fn get(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
        window_ms: u64,
    ) -> RResult<i64, RString> {
        let kind = StateKind::Get { window_ms };
        self.0
            .answer(At::new(scope, conversation, key), kind)
            .total()
    }

    fn take(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
        n: u64,
        rate: f64,
        burst: u64,
    ) -> RResult<TakeAbi, RString> {
        let kind = StateKind::Take { n, rate, burst };
        self.0
            .answer(At::new(scope, conversation, key), kind)
            .taken()
    }

    fn is_shared(&self) -> bool {
        self.0.is_shared()
    }
}
