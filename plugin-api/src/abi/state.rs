//! The host's gate-state service, as a pack reaches it.
//!
//! Grown by data, not layout: the host offers the service through the
//! existing [`PackInstanceAbi::extension`](super::PackInstanceAbi::extension)
//! method, [`STATE_METHOD`], whose payload names where the service and the
//! layout it was built with live in the host's memory
//! (`{"service": <address>, "layout": <address>}`). A pack that predates the
//! method answers "unsupported" and is never offered anything again; a pack
//! that does not ask for state answers "unused"; a pack that asks checks the
//! host's layout against its own with `abi_stable` and keeps a reference
//! (an [`RArc`] clone) to the service, so the host may drop its own at once.
//!
//! Each operation names a scope ([`StateScope`]): the host keys it under
//! the pack's own name (bound when the service was offered, never taken
//! from the pack) and that scope, so no pack reaches another's counters.
//! A later version of the service is a new method name
//! (`chimera.state.v2`), never a change to these types.

// `#[sabi_trait]` and `#[derive(StableAbi)]` expand to impl blocks inside
// const items, unsafe impls and fully qualified paths: abi_stable's, audited
// upstream.
#![allow(non_local_definitions, reason = "abi_stable's sabi_trait expansion")]
#![allow(unsafe_code, reason = "abi_stable's sabi_trait expansion")]
#![allow(unused_qualifications, reason = "abi_stable's sabi_trait expansion")]
#![allow(
    clippy::must_use_candidate,
    clippy::used_underscore_binding,
    clippy::cast_ptr_alignment,
    clippy::expl_impl_clone_on_copy,
    reason = "abi_stable's sabi_trait and StableAbi expansions"
)]

use abi_stable::sabi_trait;
use abi_stable::std_types::{RArc, RBox, RResult, RStr, RString};
use abi_stable::StableAbi;

/// The extension method that offers a pack the state service.
pub const STATE_METHOD: &str = "chimera.state.v1";

/// Which of the host's scopes an operation is kept under.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StateScope(pub u8);

impl StateScope {
    /// Shared by every conversation the host serves (a rate limit that
    /// protects one provider).
    pub const GLOBAL: StateScope = StateScope(0);
    /// The conversation named by the scope argument (a session id the
    /// host handed the pack).
    pub const CONVERSATION: StateScope = StateScope(1);
}

/// What a token-bucket `take` found.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct TakeAbi {
    /// The tokens were there and are taken.
    pub allowed: bool,
    /// When not: milliseconds until they would be.
    pub wait_ms: u64,
    /// Whole tokens left in the bucket.
    pub remaining: u64,
}

/// The service. Every call is atomic in the store; an `RErr` is one line
/// (the store is unavailable and this pack's policy is to refuse, or an
/// argument is out of range).
#[sabi_trait]
pub trait StateServiceAbi: Send + Sync {
    /// Adds `n` to `key`'s counter for the current window of `window_ms`
    /// milliseconds (0: no window) under `scope` (`conversation` names it
    /// for [`StateScope::CONVERSATION`]); the new total.
    fn incr_by(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
        n: i64,
        window_ms: u64,
    ) -> RResult<i64, RString>;

    /// [`incr_by`](Self::incr_by) without waiting for the total: the
    /// store is asked and this returns (a store that can read the answer
    /// later does, so the caller pays no round trip).
    fn add(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
        n: i64,
        window_ms: u64,
    ) -> RResult<(), RString>;

    /// `key`'s total for the current window (0 when none).
    fn get(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
        window_ms: u64,
    ) -> RResult<i64, RString>;

    /// Takes `n` tokens from `key`'s bucket, which holds at most `burst`
    /// and refills `rate` tokens a second.
    fn take(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
        n: u64,
        rate: f64,
        burst: u64,
    ) -> RResult<TakeAbi, RString>;

    /// Whether the store is shared with other processes (`false`: this
    /// process only, so a pack may keep its richer in-process logic).
    #[sabi(last_prefix_field)]
    fn is_shared(&self) -> bool;
}

/// The service as the host offers it: a trait object behind a reference
/// count, so a pack keeps its own clone.
pub type StateServiceArc = RArc<StateServiceAbi_TO<'static, RBox<()>>>;
