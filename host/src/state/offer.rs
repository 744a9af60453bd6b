//! The state service as packs reach it: one object per pack instance,
//! bound to the pack's name and failure policy, offered through the ABI's
//! `chimera.state.v1` extension (see `chimera_plugin_api::abi::state`).

use super::op::{served, AnswersState, At, StateAnswer, StateKind};
use super::{scoped_key, FailPolicy, StateError, StateService};
use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::state::{StateScope, StateServiceArc, STATE_METHOD};
use chimera_plugin_api::abi::PackInstanceBox;
use std::collections::BTreeMap;
use std::time::Duration;

/// The state service and each pack's failure policy: what the host offers
/// the packs it loads.
#[derive(Clone)]
pub struct GateState {
    service: StateService,
    default_policy: FailPolicy,
    policies: BTreeMap<String, FailPolicy>,
}

impl GateState {
    /// `service` for every pack, failing by `default_policy` unless
    /// `policies` names the pack.
    #[must_use]
    pub fn new(
        service: StateService,
        default_policy: FailPolicy,
        policies: BTreeMap<String, FailPolicy>,
    ) -> Self {
        GateState {
            service,
            default_policy,
            policies,
        }
    }

    /// In this process, failing closed (nothing to fail: the store is
    /// memory).
    #[must_use]
    pub fn in_process() -> Self {
        GateState::new(
            StateService::in_process(),
            FailPolicy::Closed,
            BTreeMap::new(),
        )
    }

    /// The service.
    #[must_use]
    pub fn service(&self) -> &StateService {
        &self.service
    }

    /// Pack `pack`'s failure policy.
    #[must_use]
    pub fn policy(&self, pack: &str) -> FailPolicy {
        self.policies
            .get(pack)
            .copied()
            .unwrap_or(self.default_policy)
    }

    /// Offers the service to `instance` of pack `pack`. `Ok(true)`: the
    /// pack took it; `Ok(false)`: it never asked, or predates the service.
    ///
    /// # Errors
    ///
    /// [`OfferRefused`] with the pack's line when it asked but refused
    /// the offer (its build of the service's layout differs from the
    /// host's).
    pub fn offer(&self, pack: &str, instance: &PackInstanceBox) -> Result<bool, OfferRefused> {
        offer(&self.bind(pack), instance)
    }

    /// The service bound to pack `pack`: its keys under its name, its
    /// failures under its policy.
    #[must_use]
    pub fn bind(&self, pack: &str) -> StateServiceArc {
        let bound = PackState {
            pack: pack.to_owned(),
            policy: self.policy(pack),
            service: self.service.clone(),
            shared: self.service.is_shared(),
        };
        served(bound)
    }
}

/// Offers `service` to `instance`: `Ok(true)` when taken, `Ok(false)` when
/// the pack never asked or predates the service.
///
/// # Errors
///
/// [`OfferRefused`] with the pack's line when it asked and refused the
/// offer.
pub fn offer(service: &StateServiceArc, instance: &PackInstanceBox) -> Result<bool, OfferRefused> {
    let payload = chimera_plugin_api::sdk::offer_payload(service);
    match instance
        .extension(RStr::from_str(STATE_METHOD), RStr::from_str(&payload))
        .into_result()
    {
        Ok(_) => Ok(true),
        Err(line) if line.starts_with("unsupported") || line.starts_with("unused") => Ok(false),
        Err(line) => Err(OfferRefused(line.into_string())),
    }
}

/// A pack asked for the state service and could not take it: the pack's
/// line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OfferRefused(pub String);

/// The service bound to one pack.
struct PackState {
    pack: String,
    policy: FailPolicy,
    service: StateService,
    shared: bool,
}

impl PackState {
    /// The store key of `key` in `scope`.
    fn key(&self, at: At<'_>) -> Result<String, StateError> {
        let At {
            scope,
            conversation,
            key,
        } = at;
        let scope = match scope {
            StateScope::GLOBAL => "",
            StateScope::CONVERSATION if !conversation.is_empty() => conversation.as_str(),
            StateScope::CONVERSATION => {
                return Err(StateError::Invalid(
                    "a conversation's counter needs the session id".into(),
                ))
            }
            StateScope(other) => {
                return Err(StateError::Invalid(format!(
                    "state scope #{other} is not one this host knows"
                )))
            }
        };
        scoped_key(&self.pack, scope, key.as_str())
    }
}

impl AnswersState for PackState {
    fn answer(&self, at: At<'_>, kind: StateKind) -> StateAnswer {
        let (service, policy) = (&self.service, self.policy);
        let answered =
            self.key(at).and_then(|key| match kind {
                StateKind::Incr { n, window_ms } => service
                    .incr_by(policy, &key, n, Duration::from_millis(window_ms))
                    .map(|counted| StateAnswer::Total(counted.value)),
                StateKind::Add { n, window_ms } => service
                    .add(policy, &key, n, Duration::from_millis(window_ms))
                    .map(|_| StateAnswer::Added),
                StateKind::Get { window_ms } => service
                    .get(policy, &key, Duration::from_millis(window_ms))
                    .map(|counted| StateAnswer::Total(counted.value)),
                StateKind::Take { n, rate, burst } => service
                    .take(policy, &key, n, rate, burst)
                    .map(|counted| StateAnswer::Taken {
                        allowed: counted.value.allowed,
                        wait_ms: u64::try_from(counted.value.wait.as_micros().div_ceil(1000))
                            .unwrap_or(u64::MAX),
                        remaining: counted.value.remaining,
                    }),
            });
        answered.unwrap_or_else(|error| StateAnswer::Refused(error.to_string()))
    }

    fn is_shared(&self) -> bool {
        self.shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::{RResult, RString};

    fn total(result: RResult<i64, RString>) -> Result<i64, String> {
        result.into_result().map_err(RString::into_string)
    }

    #[test]
    fn each_pack_counts_under_its_own_name_and_each_conversation_apart() {
        let state = GateState::in_process();
        let (a, b) = (state.bind("a"), state.bind("b"));
        let conversation = |id: &'static str| (StateScope::CONVERSATION, RStr::from_str(id));
        let add = |service: &StateServiceArc, (scope, id): (StateScope, RStr<'_>)| {
            total(service.incr_by(scope, id, RStr::from_str("k"), 1, 0))
        };
        assert_eq!(add(&a, conversation("one")), Ok(1));
        assert_eq!(add(&a, conversation("one")), Ok(2));
        assert_eq!(add(&a, conversation("two")), Ok(1), "another conversation");
        assert_eq!(add(&b, conversation("one")), Ok(1), "another pack");
        let global = (StateScope::GLOBAL, RStr::from_str("one"));
        assert_eq!(add(&a, global), Ok(1), "global is no conversation's");
        // A conversation's counter needs its id; an unknown scope is refused.
        let refused = add(&a, conversation("")).unwrap_err();
        assert_eq!(refused, "a conversation's counter needs the session id");
        let refused = add(&a, (StateScope(7), RStr::from_str("x"))).unwrap_err();
        assert_eq!(refused, "state scope #7 is not one this host knows");
        assert!(!a.is_shared(), "memory is this process's only");
    }

    #[test]
    fn a_pack_without_a_policy_of_its_own_takes_the_default() {
        let policies = BTreeMap::from([("open".to_owned(), FailPolicy::Open)]);
        let state = GateState::new(StateService::in_process(), FailPolicy::Closed, policies);
        assert_eq!(state.policy("open"), FailPolicy::Open);
        assert_eq!(state.policy("other"), FailPolicy::Closed);
    }
}
