//! Small helpers shared by the test modules.

use chimera_host::interception::{
    run_chain, ChainContext, ChainOutcome, InterceptorEvent, Interceptors, SeamSpec, SessionFacts,
};
use chimera_host::plugins::{PluginManager, Registry};
use chimera_tests::packs_dir;
use std::sync::{Arc, Mutex};

/// A manager over a fresh registry, searching the built packs.
pub(crate) fn manager() -> PluginManager {
    PluginManager::new(Arc::new(Registry::new()), vec![packs_dir().to_owned()])
}

/// The chains of a fixture pack loaded with `config`, as a bundle.
pub(crate) fn fixture_bundle(config: serde_json::Value) -> (PluginManager, Interceptors) {
    let manager = manager();
    manager
        .load("fixture", &config.to_string())
        .expect("fixture loads");
    let bundle = manager.registry().get_all();
    (manager, bundle)
}

/// Runs one chain and collects the events it emitted.
pub(crate) fn run<S: SeamSpec>(
    chain: &[chimera_host::interception::Interceptor<S>],
    lead: &S::Lead,
    value: &S::Value,
) -> (ChainOutcome<S::Value>, Vec<InterceptorEvent>) {
    let events = Mutex::new(Vec::new());
    let facts = SessionFacts::new("test-session");
    let sink = |event: InterceptorEvent| events.lock().unwrap().push(event);
    let cx = ChainContext {
        session: &facts,
        events: Some(&sink),
    };
    let outcome = run_chain(chain, lead, value, &cx);
    (outcome, events.into_inner().unwrap())
}

/// `(seam, decision, reason)` of each event, for compact assertions.
pub(crate) fn summary(events: &[InterceptorEvent]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| (e.seam.to_owned(), e.decision.to_string(), e.reason.clone()))
        .collect()
}
