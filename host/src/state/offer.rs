//! The state service as packs reach it: one object per pack instance,
//! bound to the pack's name and failure policy, offered through the ABI's
//! `chimera.state.v1` extension (see `chimera_plugin_api::abi::state`).

use super::{scoped_key, FailPolicy, StateError, StateService};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RArc, RResult, RStr, RString};
use chimera_plugin_api::abi::state::{
    StateScope, StateServiceAbi, StateServiceAbi_TO, StateServiceArc, TakeAbi, STATE_METHOD,
};
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
    /// The pack's line when it asked but refused the offer (its build of
    /// the service's layout differs from the host's).
    pub fn offer(&self, pack: &str, instance: &PackInstanceBox) -> Result<bool, String> {
        let bound = PackState {
            pack: pack.to_owned(),
            policy: self.policy(pack),
            service: self.service.clone(),
            shared: self.service.is_shared(),
        };
        let service: StateServiceArc = RArc::new(StateServiceAbi_TO::from_value(bound, TD_Opaque));
        let payload = chimera_plugin_api::sdk::offer_payload(&service);
        match instance
            .extension(RStr::from_str(STATE_METHOD), RStr::from_str(&payload))
            .into_result()
        {
            Ok(_) => Ok(true),
            Err(line) if line.starts_with("unsupported") || line.starts_with("unused") => Ok(false),
            Err(line) => Err(line.into_string()),
        }
    }
}

/// The service bound to one pack.
struct PackState {
    pack: String,
    policy: FailPolicy,
    service: StateService,
    shared: bool,
}

impl PackState {
    /// The store key of `key` in `scope`.
    fn key(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
    ) -> Result<String, StateError> {
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

fn line<T>(result: Result<T, StateError>) -> RResult<T, RString> {
    result
        .map_err(|error| RString::from(error.to_string()))
        .into()
}

impl StateServiceAbi for PackState {
    fn incr_by(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
        n: i64,
        window_ms: u64,
    ) -> RResult<i64, RString> {
        line(self.key(scope, conversation, key).and_then(|key| {
            self.service
                .incr_by(self.policy, &key, n, Duration::from_millis(window_ms))
                .map(|counted| counted.value)
        }))
    }

    fn get(
        &self,
        scope: StateScope,
        conversation: RStr<'_>,
        key: RStr<'_>,
        window_ms: u64,
    ) -> RResult<i64, RString> {
        line(self.key(scope, conversation, key).and_then(|key| {
            self.service
                .get(self.policy, &key, Duration::from_millis(window_ms))
                .map(|counted| counted.value)
        }))
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
        line(self.key(scope, conversation, key).and_then(|key| {
            self.service
                .take(self.policy, &key, n, rate, burst)
                .map(|counted| TakeAbi {
                    allowed: counted.value.allowed,
                    wait_ms: u64::try_from(counted.value.wait.as_micros().div_ceil(1000))
                        .unwrap_or(u64::MAX),
                    remaining: counted.value.remaining,
                })
        }))
    }

    fn is_shared(&self) -> bool {
        self.shared
    }
}
