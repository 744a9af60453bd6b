//! The host's gate state as a pack sees it: see [`State`].

use crate::abi::state::{StateScope, StateServiceArc, STATE_METHOD};
use abi_stable::abi_stability::abi_checking::check_layout_compatibility;
use abi_stable::std_types::{RResult, RStr, RString};
use abi_stable::type_layout::TypeLayout;
use abi_stable::StableAbi;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::inputs::Session;

/// Where a counter is kept, besides under the pack's own name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// One counter for everything the host serves: a rate limit in front of
    /// one provider.
    Global,
    /// One counter per conversation (the session id the host gave).
    Conversation(&'a str),
}

impl<'a> Scope<'a> {
    /// The conversation `session` belongs to.
    #[must_use]
    pub fn conversation(session: &Session<'a>) -> Self {
        Scope::Conversation(session.id())
    }

    fn abi(self) -> (StateScope, RStr<'a>) {
        match self {
            Scope::Global => (StateScope::GLOBAL, RStr::from_str("")),
            Scope::Conversation(id) => (StateScope::CONVERSATION, RStr::from_str(id)),
        }
    }
}

/// A counter's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// One counter that never rolls over.
    None,
    /// A fixed window of this length (at least a millisecond).
    Every(Duration),
}

impl Window {
    fn millis(self) -> u64 {
        match self {
            Window::None => 0,
            Window::Every(window) => u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1),
        }
    }
}

/// What [`State::take`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// The tokens were there and are taken.
    pub allowed: bool,
    /// When not: how long until they would be.
    pub wait: Duration,
    /// Whole tokens left in the bucket.
    pub remaining: u64,
}

/// Why a state operation did not count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The host offered no state service (a host that predates it): keep
    /// counting in process. An isolated pack is offered one: its pack host
    /// relays each operation to the host's service.
    #[error("the host offers no state service")]
    NotOffered,
    /// The store is unavailable and this pack's policy is to refuse, or an
    /// argument is out of range: the host's one line.
    #[error("{0}")]
    Unavailable(String),
}

/// Counters and token buckets kept by the host, so several processes (the
/// replicas of a gateway) count into one.
///
/// A pack asks for them once, in [`Pack::register`](super::Pack::register),
/// with [`Registrar::state`](super::Registrar::state), and keeps the
/// [`State`] handle in its interceptors. The host offers its service when
/// the pack is loaded; until it does — or for good, with a host that
/// predates it — [`State::is_offered`] is `false` and every operation
/// answers [`StateError::NotOffered`], so a pack keeps its own in-process
/// counts as before. A pack that never asks pays nothing: the host offers
/// nothing to it.
///
/// ```
/// use chimera_plugin_api::prelude::*;
/// use chimera_plugin_api::sdk::{Scope, Window};
///
/// # fn register(registrar: &mut Registrar) {
/// let state = registrar.state();
/// registrar.tool_call("quota", move |session, _call| {
///     // One atomic add in the host's store: every replica counts here.
///     let calls = state.incr_by(Scope::conversation(&session), "calls", 1, Window::None)?;
///     Ok(if calls > 20 { Decision::block("quota reached") } else { Decision::Allow })
/// });
/// # }
/// ```
///
/// Semantics (the host's, whatever its store): each operation is atomic; a
/// window is fixed (the counter of window `w` is the one numbered
/// `now / w` by the store's clock, so replicas agree), and a counter
/// without one lapses after a day unused. When the store is down, the
/// host's policy for this pack decides: refuse (the operation answers
/// [`StateError::Unavailable`], whose line a gate blocks with) or count in
/// the host's process alone until the store answers again.
///
/// Cheap to clone; every clone sees the service once the host offers it.
#[derive(Clone, Default)]
pub struct State {
    service: Arc<OnceLock<StateServiceArc>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("offered", &self.is_offered())
            .finish()
    }
}

impl State {
    /// Whether the host has offered its service.
    #[must_use]
    pub fn is_offered(&self) -> bool {
        self.service.get().is_some()
    }

    /// Whether the host's store is shared with other processes. `false`
    /// when none is offered, or the host counts in its own process only:
    /// then a pack may keep logic richer than counters (a sliding window)
    /// in process without counting wrong.
    #[must_use]
    pub fn is_shared(&self) -> bool {
        self.service
            .get()
            .is_some_and(|service| service.is_shared())
    }

    fn service(&self) -> Result<&StateServiceArc, StateError> {
        self.service.get().ok_or(StateError::NotOffered)
    }

    /// Adds `n` to `key`'s counter in `scope` for the current `window`;
    /// the new total.
    ///
    /// # Errors
    ///
    /// [`StateError::NotOffered`] without a service;
    /// [`StateError::Unavailable`] when the host refuses (its store is down
    /// and this pack fails closed, or the key is too long).
    pub fn incr_by(
        &self,
        scope: Scope<'_>,
        key: &str,
        n: i64,
        window: Window,
    ) -> Result<i64, StateError> {
        let (scope, conversation) = scope.abi();
        answer(self.service()?.incr_by(
            scope,
            conversation,
            RStr::from_str(key),
            n,
            window.millis(),
        ))
    }

    /// Adds `n` to `key`'s counter in `scope` like [`State::incr_by`],
    /// without waiting for the total: the host sends the add and reads its
    /// answer later (with Redis: no round trip for the caller). For a
    /// count the next call reads, not this one (a reply's charge).
    ///
    /// # Errors
    ///
    /// As [`State::incr_by`].
    pub fn add(
        &self,
        scope: Scope<'_>,
        key: &str,
        n: i64,
        window: Window,
    ) -> Result<(), StateError> {
        let (scope, conversation) = scope.abi();
        answer(
            self.service()?
                .add(scope, conversation, RStr::from_str(key), n, window.millis()),
        )
    }

    /// `key`'s total in `scope` for the current `window` (0 when none).
    ///
    /// # Errors
    ///
    /// As [`State::incr_by`].
    pub fn get(&self, scope: Scope<'_>, key: &str, window: Window) -> Result<i64, StateError> {
        let (scope, conversation) = scope.abi();
        answer(
            self.service()?
                .get(scope, conversation, RStr::from_str(key), window.millis()),
        )
    }

    /// Takes `n` tokens from `key`'s bucket in `scope`: at most `burst`
    /// tokens, refilled `rate` a second.
    ///
    /// # Errors
    ///
    /// As [`State::incr_by`]; a rate that is not above zero is refused.
    pub fn take(
        &self,
        scope: Scope<'_>,
        key: &str,
        n: u64,
        rate: f64,
        burst: u64,
    ) -> Result<Taken, StateError> {
        let (scope, conversation) = scope.abi();
        answer(
            self.service()?
                .take(scope, conversation, RStr::from_str(key), n, rate, burst),
        )
        .map(|taken| Taken {
            allowed: taken.allowed,
            wait: Duration::from_millis(taken.wait_ms),
            remaining: taken.remaining,
        })
    }

    /// Answers the host's offer ([`STATE_METHOD`]'s payload): checks the
    /// layout the host built its service with against this pack's and
    /// keeps a clone. A second offer is ignored.
    pub(crate) fn accept(&self, payload_json: &str) -> Result<(), String> {
        let offer: Offer = serde_json::from_str(payload_json)
            .map_err(|error| format!("{STATE_METHOD}: a bad offer: {error}"))?;
        let (service, layout) = (offer.service.0, offer.layout.0);
        if service == 0 || layout == 0 {
            return Err(format!("{STATE_METHOD}: a bad offer: a null address"));
        }
        // SAFETY: the host put the address of its own `&'static TypeLayout`
        // in the offer and keeps it (a static) for the life of the process.
        #[allow(unsafe_code, reason = "reading the layout the host offered")]
        let host_layout: &'static TypeLayout = unsafe { &*(layout as *const TypeLayout) };
        check_layout_compatibility(<StateServiceArc as StableAbi>::LAYOUT, host_layout).map_err(
            |errors| {
                let first = errors.to_string();
                let first = first.lines().next().unwrap_or("layouts differ").trim();
                format!(
                    "{STATE_METHOD}: the host's state service does not match this pack's: {first}"
                )
            },
        )?;
        // SAFETY: the layout matches ours, and the host keeps the service
        // alive for the duration of this call; the clone is ours to keep.
        #[allow(unsafe_code, reason = "cloning the service the host offered")]
        let service: StateServiceArc = unsafe { (*(service as *const StateServiceArc)).clone() };
        let _ = self.service.set(service);
        Ok(())
    }
}

/// `{"service": "<address>", "layout": "<address>"}`, decimal.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Offer {
    service: Address,
    layout: Address,
}

/// An address written as a decimal string (JSON numbers lose precision
/// past 2^53).
struct Address(usize);

impl<'de> serde::Deserialize<'de> for Address {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse()
            .map(Address)
            .map_err(|_| serde::de::Error::custom("an address is a decimal number"))
    }
}

/// The payload offering `service`: what a host passes to
/// [`STATE_METHOD`]. The host must keep `service` alive until the call
/// returns.
#[must_use]
pub fn offer_payload(service: &StateServiceArc) -> String {
    let layout: &'static TypeLayout = <StateServiceArc as StableAbi>::LAYOUT;
    format!(
        r#"{{"service":"{}","layout":"{}"}}"#,
        std::ptr::from_ref(service) as usize,
        std::ptr::from_ref(layout) as usize
    )
}

fn answer<T>(result: RResult<T, RString>) -> Result<T, StateError> {
    result
        .into_result()
        .map_err(|line| StateError::Unavailable(line.into_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::state::{StateServiceAbi, StateServiceAbi_TO, TakeAbi};
    use crate::prelude::*;
    use crate::sdk::instantiate;
    use abi_stable::sabi_trait::TD_Opaque;
    use abi_stable::std_types::RArc;
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// A host's service in a test: counters by (scope, conversation, key).
    #[derive(Default)]
    struct Counters(Mutex<HashMap<(u8, String, String), i64>>);

    impl StateServiceAbi for Counters {
        fn incr_by(
            &self,
            scope: StateScope,
            conversation: RStr<'_>,
            key: RStr<'_>,
            n: i64,
            _window_ms: u64,
        ) -> RResult<i64, RString> {
            let mut counters = self.0.lock().unwrap();
            let total = counters
                .entry((scope.0, conversation.to_string(), key.to_string()))
                .or_insert(0);
            *total += n;
            RResult::ROk(*total)
        }
        fn add(
            &self,
            scope: StateScope,
            conversation: RStr<'_>,
            key: RStr<'_>,
            n: i64,
            window_ms: u64,
        ) -> RResult<(), RString> {
            self.incr_by(scope, conversation, key, n, window_ms)
                .map(|_| ())
        }
        fn get(
            &self,
            scope: StateScope,
            conversation: RStr<'_>,
            key: RStr<'_>,
            window_ms: u64,
        ) -> RResult<i64, RString> {
            self.incr_by(scope, conversation, key, 0, window_ms)
        }
        fn take(
            &self,
            _scope: StateScope,
            _conversation: RStr<'_>,
            _key: RStr<'_>,
            _n: u64,
            _rate: f64,
            _burst: u64,
        ) -> RResult<TakeAbi, RString> {
            RResult::RErr(RString::from("the state store is unavailable: down"))
        }
        fn is_shared(&self) -> bool {
            true
        }
    }

    /// Counts each tool call through the host's state when it offers it.
    struct Counting {
        asks: bool,
    }

    impl Pack for Counting {
        const NAME: &'static str = "counting";
        const VERSION: &'static str = "0.0.1";
        const DESCRIPTION: &'static str = "counts tool calls in the host's state";
        const SEAMS: &'static [SeamKind] = &[SeamKind::ToolCall];
        type Config = bool;

        fn new(asks: bool) -> Result<Self, PackError> {
            Ok(Counting { asks })
        }

        fn register(self: Arc<Self>, registrar: &mut Registrar) {
            if !self.asks {
                registrar.tool_call("count", |_, _| Ok(Decision::Allow));
                return;
            }
            let state = registrar.state();
            registrar.tool_call("count", move |session, _| {
                let calls =
                    state.incr_by(Scope::conversation(&session), "calls", 1, Window::None)?;
                Ok(if calls > 1 {
                    Decision::block(format!("call {calls}"))
                } else {
                    Decision::Allow
                })
            });
        }
    }

    fn service() -> StateServiceArc {
        RArc::new(StateServiceAbi_TO::from_value(
            Counters::default(),
            TD_Opaque,
        ))
    }

    fn offer(instance: &crate::abi::PackInstanceBox, payload: &str) -> Result<String, String> {
        instance
            .extension(RStr::from_str(STATE_METHOD), RStr::from_str(payload))
            .into_result()
            .map(RString::into_string)
            .map_err(RString::into_string)
    }

    #[test]
    fn a_pack_that_asks_takes_the_hosts_offer_and_counts_there() {
        let state = State::default();
        assert!(!state.is_offered());
        assert_eq!(
            state.incr_by(Scope::Global, "k", 1, Window::None),
            Err(StateError::NotOffered)
        );
        let host = service();
        state
            .accept(&offer_payload(&host))
            .expect("the layouts match");
        drop(host);
        // The pack keeps its own clone: the host's copy may go.
        assert!(state.is_offered() && state.is_shared());
        let one = Scope::Conversation("one");
        assert_eq!(state.incr_by(one, "k", 2, Window::None), Ok(2));
        assert_eq!(state.incr_by(one, "k", 3, Window::None), Ok(5));
        assert_eq!(state.add(one, "k", 1, Window::None), Ok(()));
        assert_eq!(state.get(one, "k", Window::None), Ok(6));
        assert_eq!(
            state.get(Scope::Conversation("two"), "k", Window::None),
            Ok(0)
        );
        assert_eq!(
            state.take(Scope::Global, "b", 1, 1.0, 1),
            Err(StateError::Unavailable(
                "the state store is unavailable: down".into()
            ))
        );
        // Through a whole instance, as a host offers it.
        let instance = instantiate::<Counting>("true").unwrap();
        let host = service();
        assert_eq!(offer(&instance, &offer_payload(&host)).as_deref(), Ok("{}"));
    }

    #[test]
    fn a_pack_that_never_asks_is_offered_nothing() {
        let instance = instantiate::<Counting>("false").unwrap();
        let host = service();
        let refused = offer(&instance, &offer_payload(&host)).unwrap_err();
        assert_eq!(refused, "unused: chimera.state.v1");
    }

    #[test]
    fn an_offer_whose_layout_differs_or_is_not_an_offer_is_refused_in_one_line() {
        let state = State::default();
        let host = service();
        let wrong: &'static TypeLayout = <u64 as StableAbi>::LAYOUT;
        let payload = format!(
            r#"{{"service":"{}","layout":"{}"}}"#,
            std::ptr::from_ref(&host) as usize,
            std::ptr::from_ref(wrong) as usize
        );
        let refused = state.accept(&payload).unwrap_err();
        assert!(
            refused.starts_with(
                "chimera.state.v1: the host's state service does not match this pack's"
            ),
            "{refused}"
        );
        assert!(!refused.contains('\n'), "{refused}");
        assert!(!state.is_offered());
        for bad in [
            r#"{"service":"0","layout":"0"}"#,
            r#"{"service":12}"#,
            "not json",
        ] {
            let refused = state.accept(bad).unwrap_err();
            assert!(
                refused.starts_with("chimera.state.v1: a bad offer"),
                "{refused}"
            );
        }
        assert!(!state.is_offered());
    }
}
