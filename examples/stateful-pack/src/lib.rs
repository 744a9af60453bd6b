//! `call-quota`: a pack that keeps state, and hands it to its next build.
//!
//! It counts each conversation's tool calls and blocks every call past
//! `max_calls` (`--pack 'call-quota={"max_calls": 20}'`; default 20). The
//! counts are what a hot swap must not lose: a rebuilt pack that started
//! from zero would hand every conversation a fresh quota. So the running
//! build exports them ([`Pack::export_state`]) and the new build imports them
//! ([`Pack::import_state`]) — see the SDK docs, "State handover across a hot
//! swap", for when that runs and what a refused import means.
//!
//! A host that offers its gate state (`Registrar::state`) keeps the counts
//! instead: then they outlive any build without a handover, and every
//! replica of a gateway sharing one store counts into the same ones. The
//! pack's own map, and its handover, serve a host that offers none.
//!
//! The state is versioned JSON, `{"version": 1, "calls": {"<session>": n}}`.
//! A build refuses a version it does not know, and then starts fresh.
//!
//! The crate depends on `chimera-plugin-api` alone: the derives come through
//! the prelude's serde, hence `#[serde(crate = "chimera_plugin_api::serde")]`.

use chimera_plugin_api::prelude::*;
use chimera_plugin_api::sdk::{Scope, StateError, Window};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// `{"max_calls": N}`: tool calls a conversation may make (default 20).
#[derive(Debug, Deserialize)]
#[serde(crate = "chimera_plugin_api::serde", deny_unknown_fields)]
pub struct Config {
    /// Tool calls allowed per conversation; the next one is blocked.
    #[serde(default = "default_max_calls")]
    pub max_calls: u64,
}

fn default_max_calls() -> u64 {
    20
}

/// The state one build hands to the next.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "chimera_plugin_api::serde", deny_unknown_fields)]
struct Handover {
    /// [`HANDOVER_VERSION`] of the build that wrote it.
    version: u32,
    /// Tool calls so far, per conversation (session id).
    calls: BTreeMap<String, u64>,
}

/// The handover format this build writes and reads. Bump it when the
/// format changes, and read the older versions you still can.
const HANDOVER_VERSION: u32 = 1;

/// The pack.
pub struct CallQuota {
    max_calls: u64,
    /// Tool calls so far, per conversation.
    calls: Mutex<BTreeMap<String, u64>>,
}

impl CallQuota {
    fn calls(&self) -> MutexGuard<'_, BTreeMap<String, u64>> {
        // A panic while the lock was held left a count, not a broken map.
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one more call in `session`; the count it reached.
    fn count(&self, session: &str) -> u64 {
        let mut calls = self.calls();
        let count = calls.entry(session.to_owned()).or_insert(0);
        *count += 1;
        *count
    }
}

impl Pack for CallQuota {
    const NAME: &'static str = "call-quota";
    const VERSION: &'static str = "1.0.0";
    const DESCRIPTION: &'static str =
        "blocks tool calls past a per-conversation quota; the counts survive hot swaps";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ToolCall];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        Ok(CallQuota {
            max_calls: config.max_calls,
            calls: Mutex::new(BTreeMap::new()),
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        let state = registrar.state();
        registrar.tool_call("quota", move |session, call| {
            // The host's counter when it offers one (shared by every
            // replica when its store is), else this build's own.
            let count = match state.incr_by(Scope::conversation(&session), "calls", 1, Window::None)
            {
                Ok(total) => u64::try_from(total).unwrap_or(0),
                Err(StateError::NotOffered) => self.count(session.id()),
                Err(error) => {
                    return Ok(Decision::block(format!(
                        "call-quota: cannot count this call: {error}"
                    )))
                }
            };
            if count > self.max_calls {
                return Ok(Decision::block(format!(
                    "call-quota: {} would be tool call {count} of this conversation (quota {})",
                    call.name(),
                    self.max_calls
                )));
            }
            Ok(Decision::Allow)
        });
    }

    /// A copy of the counts: exporting leaves this build as it was, since
    /// it keeps running if the reload fails later.
    fn export_state(&self) -> Option<serde_json::Value> {
        let handover = Handover {
            version: HANDOVER_VERSION,
            calls: self.calls().clone(),
        };
        serde_json::to_value(handover).ok()
    }

    /// Checks the whole handover before taking any of it, so a refusal
    /// leaves this build exactly fresh.
    fn import_state(&self, state: serde_json::Value) -> Result<(), PackError> {
        let handover: Handover = serde_json::from_value(state)
            .map_err(|error| PackError::msg(format!("the earlier build's counts: {error}")))?;
        if handover.version != HANDOVER_VERSION {
            return Err(PackError::msg(format!(
                "the earlier build's counts are format {}, this build reads {HANDOVER_VERSION}",
                handover.version
            )));
        }
        self.calls().extend(handover.calls);
        Ok(())
    }
}

chimera_plugin_api::export_packs!(CallQuota);

#[cfg(test)]
mod tests {
    use super::*;
    use chimera_plugin_api::serde_json::json;

    fn quota(max_calls: u64) -> CallQuota {
        CallQuota::new(Config { max_calls }).unwrap()
    }

    #[test]
    fn the_counts_cross_to_a_new_build() {
        let old = quota(3);
        old.count("s1");
        old.count("s1");
        let new = quota(3);
        new.import_state(old.export_state().unwrap()).unwrap();
        assert_eq!(new.count("s1"), 3);
        assert_eq!(
            old.calls()["s1"],
            2,
            "exporting left the old build as it was"
        );
    }

    #[test]
    fn a_handover_of_an_unknown_version_is_refused_and_nothing_is_taken() {
        let new = quota(3);
        let error = new
            .import_state(json!({"version": 2, "calls": {"s1": 7}}))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "the earlier build's counts are format 2, this build reads 1"
        );
        assert!(new.calls().is_empty());
        assert!(new.import_state(json!({"calls": "lots"})).is_err());
        assert!(new.calls().is_empty());
    }

    #[test]
    fn the_config_derive_works_through_the_prelude() {
        let config: Config = serde_json::from_str("{}").unwrap();
        assert_eq!(config.max_calls, 20);
        assert!(serde_json::from_str::<Config>(r#"{"max_call": 3}"#).is_err());
    }
}
