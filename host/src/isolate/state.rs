//! The gate-state operations an isolated pack's interceptors ask inside a
//! call, answered from the host's service bound to that pack: the child
//! names a scope and a key, never the pack (the host bound that), and a
//! call may ask a bounded number of them.

use super::wire::{StateAnswer, StateKind, StateOp};
use abi_stable::std_types::{RStr, RString};
use chimera_plugin_api::abi::state::{StateScope, StateServiceArc};

/// The most state operations one call of an isolated pack may ask: a
/// child that asks more is answered no more and counts as failed.
pub(super) const MAX_STATE_OPS: u32 = 64;

/// `op` asked of the host's gate state.
pub(super) fn answer_state(state: &StateServiceArc, op: StateOp) -> StateAnswer {
    let (scope, conversation, key) = (
        StateScope(op.scope),
        RStr::from_str(&op.conversation),
        RStr::from_str(&op.key),
    );
    let refused = |line: RString| StateAnswer::Refused(line.into_string());
    match op.kind {
        StateKind::Incr { n, window_ms } => state
            .incr_by(scope, conversation, key, n, window_ms)
            .into_result()
            .map_or_else(refused, StateAnswer::Total),
        StateKind::Add { n, window_ms } => state
            .add(scope, conversation, key, n, window_ms)
            .into_result()
            .map_or_else(refused, |()| StateAnswer::Added),
        StateKind::Get { window_ms } => state
            .get(scope, conversation, key, window_ms)
            .into_result()
            .map_or_else(refused, StateAnswer::Total),
        StateKind::Take { n, rate, burst } => state
            .take(scope, conversation, key, n, rate, burst)
            .into_result()
            .map_or_else(refused, |taken| StateAnswer::Taken {
                allowed: taken.allowed,
                wait_ms: taken.wait_ms,
                remaining: taken.remaining,
            }),
    }
}
