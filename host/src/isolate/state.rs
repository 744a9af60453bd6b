//! The gate-state operations an isolated pack's interceptors ask inside a
//! call, answered from the host's service bound to that pack: the child
//! names a scope and a key, never the pack (the host bound that), and a
//! call may ask a bounded number of them.

use super::wire::{StateAnswer, StateOp};
use crate::state::At;
use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::state::{StateScope, StateServiceArc};

/// The most state operations one call of an isolated pack may ask: a
/// child that asks more is answered no more and counts as failed.
pub(super) const MAX_STATE_OPS: u32 = 64;

/// `op` asked of the host's gate state.
pub(super) fn answer_state(state: &StateServiceArc, op: StateOp) -> StateAnswer {
    let at = At::new(
        StateScope(op.scope),
        RStr::from_str(&op.conversation),
        RStr::from_str(&op.key),
    );
    op.kind.ask(state, at)
}
