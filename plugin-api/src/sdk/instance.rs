//! Building a pack instance from JSON configuration, behind the ABI.

use super::guard;
use super::pack::Pack;
use super::registrar::Registrar;
use super::seam_kind::SeamKind;
use super::state::State;
use crate::abi::state::STATE_METHOD;
use crate::abi::{PackInstanceAbi, PackInstanceAbi_TO, PackInstanceBox, Registration};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RResult, RStr, RString, RVec};
use std::sync::{Arc, Mutex};

struct Instance<P: Pack> {
    pack: Arc<P>,
    /// Registrations collected (and checked) at construction, handed out once.
    first: Mutex<Option<Vec<Registration>>>,
    /// What the pack declared about its interceptors: fail-closed
    /// ([`Registrar::fail_closed`]), redacting and judging ones.
    declared: Declared,
    /// The handle the pack's interceptors count through, filled when the
    /// host offers its state service (only to a pack that asked).
    state: State,
    wants_state: bool,
}

/// The names [`Registrar::fail_closed`], [`Registrar::redacts`] and
/// [`Registrar::judges`] collected, and the windows
/// [`Registrar::stream_window`] declared.
#[derive(Default)]
struct Declared {
    fail_closed: Vec<String>,
    redacts: Vec<String>,
    judges: Vec<String>,
    stream_windows: Vec<(String, usize)>,
    observes: Vec<String>,
}

/// The `PackInstance::extension` method a host asks for the failure policy:
/// answers `{"fail_closed": [names], "redacts": [names], "judges": [names],
/// "stream_windows": {name: bytes}, "observes": [names]}` (interceptor
/// names). A host that predates a key ignores it.
pub const FAILURE_POLICY_METHOD: &str = "failure_policy";

/// Builds pack `P` from `config_json` (empty means `{}`), runs its
/// registration and checks every seam it used is one it declared.
///
/// Hosts use this directly to run a pack crate in-process, without a shared
/// library; the loader reaches the same function through the root module.
/// Every failure — bad JSON, a constructor error, a panic, an undeclared
/// seam — is one line, prefixed with the pack's name.
///
/// # Errors
///
/// That line, when `config_json` is not JSON for `P::Config`, [`Pack::new`]
/// refuses it or panics, or a registration uses a seam `P::SEAMS` does not
/// declare.
pub fn instantiate<P: Pack>(config_json: &str) -> Result<PackInstanceBox, InstantiateError> {
    guard::catch(|| build::<P>(config_json))
        .unwrap_or_else(|panic| Err(Failure::Panicked(panic)))
        .map_err(|failure| InstantiateError {
            pack: P::NAME,
            failure,
        })
}

/// Why [`instantiate`] could not build a pack: one line, headed by the
/// pack's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pack}: {failure}")]
#[non_exhaustive]
pub struct InstantiateError {
    /// The pack's name.
    pub pack: &'static str,
    /// What failed.
    pub failure: Failure,
}

/// What failed in [`instantiate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Failure {
    /// The config is not JSON for the pack's `Config`.
    #[error("bad config: {0}")]
    Config(String),
    /// [`Pack::new`] refused the config.
    #[error("{0}")]
    Refused(String),
    /// [`Pack::new`] or the registration panicked.
    #[error("constructor {0}")]
    Panicked(String),
    /// A registration breaks what the pack declared (a seam it did not
    /// declare, a declaration naming no interceptor).
    #[error("{0}")]
    Registration(String),
}

fn build<P: Pack>(config_json: &str) -> Result<PackInstanceBox, Failure> {
    let text = if config_json.trim().is_empty() {
        "{}"
    } else {
        config_json
    };
    let config: P::Config =
        serde_json::from_str(text).map_err(|error| Failure::Config(error.to_string()))?;
    let pack = Arc::new(P::new(config).map_err(|error| Failure::Refused(error.to_string()))?);
    let state = State::default();
    let (registrations, declared, wants_state) =
        collect(&pack, &state).map_err(Failure::Registration)?;
    let instance = Instance {
        pack,
        first: Mutex::new(Some(registrations)),
        declared,
        state,
        wants_state,
    };
    Ok(PackInstanceAbi_TO::from_value(instance, TD_Opaque))
}

/// What one registration run gave: the interceptors, what the pack
/// declared about them, and whether it asked for state.
type Collected = (Vec<Registration>, Declared, bool);

fn collect<P: Pack>(pack: &Arc<P>, state: &State) -> Result<Collected, String> {
    let mut registrar = Registrar::new(state.clone());
    Arc::clone(pack).register(&mut registrar);
    if let Some((seam, name, _)) = registrar
        .entries
        .iter()
        .find(|(seam, _, _)| !P::SEAMS.contains(seam))
    {
        return Err(format!(
            "interceptor '{name}' registers on {} which the pack does not declare in Pack::SEAMS",
            seam.seam()
        ));
    }
    let declared = Declared {
        fail_closed: std::mem::take(&mut registrar.fail_closed),
        redacts: std::mem::take(&mut registrar.redacts),
        judges: std::mem::take(&mut registrar.judges),
        stream_windows: std::mem::take(&mut registrar.stream_windows),
        observes: std::mem::take(&mut registrar.observes),
    };
    let windowed: Vec<String> = declared
        .stream_windows
        .iter()
        .map(|(name, _)| name.clone())
        .collect();
    for (what, names) in [
        ("fail_closed", &declared.fail_closed),
        ("redacts", &declared.redacts),
        ("judges", &declared.judges),
        ("stream_window", &windowed),
    ] {
        if let Some(unknown) = names
            .iter()
            .find(|name| !registrar.entries.iter().any(|(_, n, _)| n == *name))
        {
            return Err(format!(
                "{what} names '{unknown}', which no interceptor is registered as"
            ));
        }
    }
    if let Some(name) = windowed.iter().find(|name| {
        registrar
            .entries
            .iter()
            .any(|(seam, n, _)| n == *name && *seam != SeamKind::StreamChunk)
    }) {
        return Err(format!(
            "stream_window names '{name}', which is not a stream_chunk interceptor"
        ));
    }
    let wants_state = registrar.wants_state;
    Ok((registrar.into_registrations(), declared, wants_state))
}

impl<P: Pack> PackInstanceAbi for Instance<P> {
    fn registrations(&self) -> RVec<Registration> {
        let first = self.first.lock().map(|mut slot| slot.take()).ok().flatten();
        let registrations = match first {
            Some(registrations) => registrations,
            None => guard::catch(|| collect(&self.pack, &self.state))
                .ok()
                .and_then(Result::ok)
                .map(|(registrations, ..)| registrations)
                .unwrap_or_default(),
        };
        registrations.into_iter().collect()
    }

    fn export_state(&self) -> RString {
        guard::catch(|| self.pack.export_state())
            .ok()
            .flatten()
            .map(|state| RString::from(state.to_string()))
            .unwrap_or_default()
    }

    fn import_state(&self, state_json: RStr<'_>) -> RResult<(), RString> {
        let outcome = serde_json::from_str(state_json.as_str())
            .map_err(|error| format!("bad state: {error}"))
            .and_then(|state| {
                guard::catch(|| self.pack.import_state(state))
                    .and_then(|result| result.map_err(|error| error.to_string()))
            });
        outcome.map_err(RString::from).into()
    }

    fn extension(&self, method: RStr<'_>, payload_json: RStr<'_>) -> RResult<RString, RString> {
        if method.as_str() == STATE_METHOD {
            if !self.wants_state {
                return RResult::RErr(RString::from(format!("unused: {STATE_METHOD}")));
            }
            return match self.state.accept(payload_json.as_str()) {
                Ok(()) => RResult::ROk(RString::from("{}")),
                Err(line) => RResult::RErr(RString::from(line)),
            };
        }
        if method.as_str() == FAILURE_POLICY_METHOD {
            let Declared {
                fail_closed,
                redacts,
                judges,
                stream_windows,
                observes,
            } = &self.declared;
            let windows: serde_json::Map<String, serde_json::Value> = stream_windows
                .iter()
                .map(|(name, bytes)| (name.clone(), (*bytes).into()))
                .collect();
            let policy = serde_json::json!({
                "fail_closed": fail_closed,
                "redacts": redacts,
                "judges": judges,
                "stream_windows": windows,
                "observes": observes,
            });
            return RResult::ROk(RString::from(policy.to_string()));
        }
        RResult::RErr(RString::from(format!("unsupported: {method}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    /// A pack whose config says which name its stream window names.
    struct Windowed {
        names: String,
    }

    impl Pack for Windowed {
        const NAME: &'static str = "windowed";
        const VERSION: &'static str = "0.0.1";
        const DESCRIPTION: &'static str = "declares a stream window";
        const SEAMS: &'static [SeamKind] = &[SeamKind::StreamChunk, SeamKind::Output];
        type Config = String;

        fn new(names: String) -> Result<Self, PackError> {
            Ok(Windowed { names })
        }

        fn register(self: Arc<Self>, registrar: &mut Registrar) {
            registrar.stream_chunk("scan", |_, _| Ok(StreamDecision::Release));
            registrar.output("answer", |_, _| Ok(Decision::Allow));
            registrar.stream_window(&self.names, 512);
        }
    }

    #[test]
    fn a_stream_window_is_declared_to_the_host_and_must_name_a_stream_chunk_interceptor() {
        let instance = instantiate::<Windowed>(r#""scan""#).expect("builds");
        let answer = instance
            .extension(RStr::from_str(FAILURE_POLICY_METHOD), RStr::from_str("{}"))
            .into_result()
            .expect("answers");
        let policy: serde_json::Value = serde_json::from_str(answer.as_str()).unwrap();
        assert_eq!(policy["stream_windows"], serde_json::json!({"scan": 512}));

        let error = instantiate::<Windowed>(r#""answer""#)
            .err()
            .expect("refused");
        assert_eq!(
            error.to_string(),
            "windowed: stream_window names 'answer', which is not a stream_chunk interceptor"
        );
        let error = instantiate::<Windowed>(r#""nobody""#)
            .err()
            .expect("refused");
        assert_eq!(
            error.to_string(),
            "windowed: stream_window names 'nobody', which no interceptor is registered as"
        );
    }
}
