//! The gate-state operations an isolated pack's interceptors ask inside a
//! call, answered from the host's service bound to that pack: the child
//! names a scope and a key, never the pack (the host bound that), and a
//! call may ask a bounded number of them.

use super::wire::{StateAnswer, StateOp};
use abi_stable::std_types::{RStr, RString};
use chimera_plugin_api::abi::state::{StateScope, StateServiceArc};

/// The most state operations one call of an isolated pack may ask: a
/// child that asks more is answered no more and counts as failed.
pub(super) const MAX_STATE_OPS: u32 = 64;

/// `op` asked of the host's gate state.
pub(super) fn answer_state(state: &StateServiceArc, op: StateOp) -> StateAnswer {
    let refused = |line: RString| StateAnswer::Refused(line.into_string());
    match op {
        StateOp::Incr {
            scope,
            conversation,
            key,
            n,
            window_ms,
        } => state
            .incr_by(
                StateScope(scope),
                RStr::from_str(&conversation),
                RStr::from_str(&key),
                n,
                window_ms,
            )
            .into_result()
            .map_or_else(refused, StateAnswer::Total),
        StateOp::Add {
            scope,
            conversation,
            key,
            n,
            window_ms,
        } => state
            .add(
                StateScope(scope),
                RStr::from_str(&conversation),
                RStr::from_str(&key),
                n,
                window_ms,
            )
            .into_result()
            .map_or_else(refused, |()| StateAnswer::Added),
        StateOp::Get {
            scope,
            conversation,
            key,
            window_ms,
        } => state
            .get(
                StateScope(scope),
                RStr::from_str(&conversation),
                RStr::from_str(&key),
                window_ms,
            )
            .into_result()
            .map_or_else(refused, StateAnswer::Total),
        StateOp::Take {
            scope,
            conversation,
            key,
            n,
            rate,
            burst,
        } => state
            .take(
                StateScope(scope),
                RStr::from_str(&conversation),
                RStr::from_str(&key),
                n,
                rate,
                burst,
            )
            .into_result()
            .map_or_else(refused, |taken| StateAnswer::Taken {
                allowed: taken.allowed,
                wait_ms: taken.wait_ms,
                remaining: taken.remaining,
            }),
    }
}
