//! Packs seen as plugins: a pack instance in this process
//! ([`PackPlugin`]) or in a pack host of its own ([`IsolatedPlugin`]),
//! each registration an interceptor named `<pack>/<name>` with the failure
//! policy, content role and stream window the pack declares.

use crate::interception::{
    AnyInterceptor, ContentRole, HealthPolicy, Interceptors, PackHealth, SeamName,
};
use crate::isolate::pool::IsolatedPool;
use crate::plugins::errors::{LoadError, PluginError};
use crate::plugins::plugin::{Plugin, PluginRegistrar};
use chimera_plugin_api::abi::{PackInstanceBox, Seam};
use chimera_plugin_api::sdk::{self, Pack};
use std::sync::Arc;

/// A pack instance (from a library or linked in) seen as a plugin.
pub(super) struct PackPlugin {
    pub(super) name: String,
    pub(super) version: String,
    pub(super) description: String,
    pub(super) instance: PackInstanceBox,
    pub(super) health: Arc<PackHealth>,
}

impl Plugin for PackPlugin {
    fn name(&self) -> &str {
        &self.name
    }

    fn export_state(&self) -> Option<String> {
        let state = self.instance.export_state().into_string();
        (!state.is_empty()).then_some(state)
    }

    fn import_state(&self, state: &str) -> Result<(), PluginError> {
        self.instance
            .import_state(abi_stable::std_types::RStr::from_str(state))
            .into_result()
            .map_err(|e| PluginError::Failed(e.into_string()))
    }

    fn version(&self) -> &str {
        &self.version
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn activate(&self, registrar: &mut PluginRegistrar) -> Result<(), PluginError> {
        for interceptor in pack_interceptors(&self.name, &self.instance, &self.health)? {
            let seam = interceptor.seam();
            registrar.register(seam.as_str(), interceptor)?;
        }
        Ok(())
    }
}

/// A pack instance's registrations as host interceptors named
/// `<pack>/<name>`. A seam this host does not know refuses the whole pack.
pub(crate) fn pack_interceptors(
    pack: &str,
    instance: &PackInstanceBox,
    health: &Arc<PackHealth>,
) -> Result<Vec<AnyInterceptor>, PluginError> {
    let policy = declared_policy(instance);
    instance
        .registrations()
        .into_iter()
        .map(|registration| {
            let interceptor = registration.interceptor;
            declared(
                pack,
                registration.name.as_str(),
                registration.seam,
                &policy,
                |seam, name, closed| {
                    let health = Some(Arc::clone(health));
                    AnyInterceptor::from_pack(seam, name, interceptor, health, closed)
                },
            )
        })
        .collect()
}

/// Interceptor `own` of `pack` on `seam`, made by `make` (seam, display
/// name, fail closed) with the role and stream window `policy` declares. A
/// seam this host does not know refuses it with one line.
fn declared(
    pack: &str,
    own: &str,
    seam: Seam,
    policy: &DeclaredPolicy,
    make: impl FnOnce(SeamName, String, bool) -> AnyInterceptor,
) -> Result<AnyInterceptor, PluginError> {
    let closed = policy.fail_closed.iter().any(|n| n == own);
    let role = if policy.observes.iter().any(|n| n == own) {
        ContentRole::Observes
    } else if policy.redacts.iter().any(|n| n == own) {
        ContentRole::Redacts
    } else if policy.judges.iter().any(|n| n == own) {
        ContentRole::Judges
    } else {
        ContentRole::Unstated
    };
    let name = format!("{pack}/{own}");
    let seam_name = SeamName::ALL
        .into_iter()
        .find(|s| Seam::from_name(s.as_str()) == Some(seam))
        .ok_or_else(|| PluginError::UnsupportedSeam {
            interceptor: name.clone(),
            seam,
        })?;
    let window = policy.stream_windows.get(own).copied().unwrap_or(0);
    let mut interceptor = make(seam_name, name, closed);
    interceptor.set_role(role);
    interceptor.set_stream_window(window.min(MAX_STREAM_WINDOW));
    Ok(interceptor)
}

/// An isolated pack's registrations (from its hello) as host interceptors
/// named `<pack>/<name>`, each a call into its process.
fn isolated_interceptors(pack: &Arc<IsolatedPool>) -> Result<Vec<AnyInterceptor>, PluginError> {
    let hello = pack.hello();
    let policy = parse_policy(&hello.policy_json);
    hello
        .registrations
        .iter()
        .enumerate()
        .map(|(index, (seam, own))| {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            declared(
                &hello.name,
                own,
                Seam(*seam),
                &policy,
                |seam, name, closed| {
                    AnyInterceptor::from_isolated(
                        seam,
                        name,
                        Arc::<IsolatedPool>::clone(pack),
                        index,
                        closed,
                    )
                },
            )
        })
        .collect()
}

/// A pack instance running in its own process, seen as a plugin.
pub(super) struct IsolatedPlugin {
    pub(super) pack: Arc<IsolatedPool>,
}

impl Plugin for IsolatedPlugin {
    fn name(&self) -> &str {
        &self.pack.hello().name
    }

    fn version(&self) -> &str {
        &self.pack.hello().version
    }

    fn description(&self) -> &str {
        &self.pack.hello().description
    }

    fn export_state(&self) -> Option<String> {
        self.pack.export_state()
    }

    fn import_state(&self, state: &str) -> Result<(), PluginError> {
        self.pack.import_state(state).map_err(PluginError::Failed)
    }

    fn activate(&self, registrar: &mut PluginRegistrar) -> Result<(), PluginError> {
        for interceptor in isolated_interceptors(&self.pack)? {
            let seam = interceptor.seam();
            registrar.register(seam.as_str(), interceptor)?;
        }
        Ok(())
    }
}

/// The largest stream window the host grants: however many bytes a
/// `stream_chunk` interceptor asks to take unjudged, at most this many
/// gather before it is offered the stream again.
pub const MAX_STREAM_WINDOW: usize = 4096;

/// What a pack declared about its interceptors: which fail closed, which
/// redact, which judge content, and the stream windows of its
/// `stream_chunk` interceptors.
#[derive(serde::Deserialize, Default)]
struct DeclaredPolicy {
    fail_closed: Vec<String>,
    #[serde(default)]
    redacts: Vec<String>,
    #[serde(default)]
    judges: Vec<String>,
    #[serde(default)]
    stream_windows: std::collections::BTreeMap<String, usize>,
    #[serde(default)]
    observes: Vec<String>,
}

/// The policy a pack declares. A pack built before the failure policy
/// existed answers "unsupported": nothing declared.
fn declared_policy(instance: &PackInstanceBox) -> DeclaredPolicy {
    let answer = instance.extension(
        abi_stable::std_types::RStr::from_str(sdk::FAILURE_POLICY_METHOD),
        abi_stable::std_types::RStr::from_str("{}"),
    );
    answer
        .into_result()
        .ok()
        .map(|json| parse_policy(json.as_str()))
        .unwrap_or_default()
}

/// A declared policy from its JSON; anything unreadable declares nothing.
fn parse_policy(json: &str) -> DeclaredPolicy {
    serde_json::from_str::<DeclaredPolicy>(json).unwrap_or_default()
}

/// Pack `P`'s interceptors as a bundle, for a host that links the pack crate
/// and hands the chains to a session itself (no registry, no library file).
///
/// # Errors
///
/// `LoadError::Instantiate` when `P` refuses `config_json`, its constructor
/// fails or panics, or it registers on a seam it does not declare;
/// `LoadError::Activation` when it registers on a seam this host does not run.
pub fn interceptors_of<P: Pack>(config_json: &str) -> Result<Interceptors, LoadError> {
    let instance =
        sdk::instantiate::<P>(config_json).map_err(|e| LoadError::Instantiate(e.to_string()))?;
    let health = Arc::new(PackHealth::new(P::NAME, HealthPolicy::default(), None));
    let mut bundle = Interceptors::new();
    for interceptor in
        pack_interceptors(P::NAME, &instance, &health).map_err(|source| LoadError::Activation {
            name: P::NAME.to_owned(),
            source,
        })?
    {
        bundle.push(interceptor);
    }
    Ok(bundle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::sabi_trait::TD_Opaque;
    use abi_stable::std_types::{RResult, RStr, RString, RVec};
    use chimera_plugin_api::abi::{
        Decision, InterceptorAbi, InterceptorAbi_TO, PackInstanceAbi, PackInstanceAbi_TO,
        Registration, SeamInput,
    };

    struct Allow;
    impl InterceptorAbi for Allow {
        fn intercept(&self, _input: &SeamInput<'_>) -> Decision {
            Decision::allow()
        }
    }

    /// A pack written against the raw ABI that registers on `seam`.
    struct OnSeam(Seam);
    impl PackInstanceAbi for OnSeam {
        fn registrations(&self) -> RVec<Registration> {
            RVec::from(vec![Registration {
                seam: self.0,
                name: RString::from("gate"),
                interceptor: InterceptorAbi_TO::from_value(Allow, TD_Opaque),
            }])
        }
        fn export_state(&self) -> RString {
            RString::new()
        }
        fn import_state(&self, _state: RStr<'_>) -> RResult<(), RString> {
            RResult::ROk(())
        }
        fn extension(&self, method: RStr<'_>, _payload: RStr<'_>) -> RResult<RString, RString> {
            RResult::RErr(format!("unsupported: {method}").into())
        }
    }

    #[test]
    fn a_pack_on_a_seam_this_host_does_not_run_is_refused_with_one_line() {
        let health = Arc::new(PackHealth::new("later", HealthPolicy::default(), None));
        let later = PackInstanceAbi_TO::from_value(OnSeam(Seam(9)), TD_Opaque);
        let error = pack_interceptors("later", &later, &health).unwrap_err();
        let line = error.to_string();
        assert_eq!(
            line,
            "interceptor 'later/gate' registers on seam#9 which this host does not run; upgrade the host or drop the pack"
        );
        assert!(!line.contains('\n'));
        // The seven known seams are all accepted, the new ones included.
        for seam in Seam::KNOWN {
            let known = PackInstanceAbi_TO::from_value(OnSeam(seam), TD_Opaque);
            let interceptors = pack_interceptors("now", &known, &health).expect("known seam");
            assert_eq!(
                interceptors[0].seam().as_str(),
                seam.name().unwrap_or_default()
            );
        }
    }
}
