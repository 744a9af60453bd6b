//! Small helpers shared by the test modules.

use chimera_host::interception::{
    run_chain, ChainContext, ChainOutcome, InterceptorEvent, Interceptors, SeamSpec, SessionFacts,
};
use chimera_host::plugins::platform::library_file_name;
use chimera_host::plugins::{PackSource, PluginManager, Registry};
use chimera_tests::{pack_path, publish, test_packs_dir};
use std::sync::{Arc, Mutex};

/// A manager over a fresh registry, searching the built packs (the bundled
/// ones and the test packs).
pub(crate) fn manager() -> PluginManager {
    PluginManager::new(Arc::new(Registry::new()), chimera_tests::pack_dirs())
}

/// A fresh directory holding a copy of the shipped packs' one library
/// (`libchimera_packs`, as built): the directory, the copy's file name
/// and its bytes.
pub(crate) fn one_library_dir() -> (tempfile::TempDir, String, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let file = library_file_name("chimera-packs");
    let built = std::fs::read(pack_path("chimera-packs")).unwrap();
    publish(dir.path(), &file, &built);
    (dir, file, built)
}

/// The SHA-256 each loaded pack's file had when it was loaded, by name,
/// in load order.
pub(crate) fn loaded_hashes(manager: &PluginManager) -> Vec<(String, String)> {
    manager
        .list()
        .into_iter()
        .map(|info| match info.source {
            PackSource::File { sha256, .. } => (info.name, sha256),
            PackSource::InProcess => panic!("{} is not from a file", info.name),
        })
        .collect()
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

/// `chimera run --json` in `dir` with each `(pack, config)` loaded in
/// order (`--pack NAME=JSON`) from the built packs (the bundled ones beside
/// the binary, the test packs from their directory), on a script of
/// `responses`, then `args` (more flags, and the prompt if any), with
/// `stdin` as standard input.
pub(crate) fn run_with_packs(
    dir: &std::path::Path,
    packs: &[(&str, serde_json::Value)],
    responses: &serde_json::Value,
    args: &[&str],
    stdin: &str,
) -> chimera_tests::cli::Ran {
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({ "responses": responses }).to_string(),
    )
    .expect("write the script");
    let script = script.display().to_string();
    let plugins = test_packs_dir().display().to_string();
    let specs: Vec<String> = packs
        .iter()
        .map(|(name, config)| format!("{name}={config}"))
        .collect();
    let mut all = vec![
        "run",
        "--json",
        "--plugins-dir",
        &plugins,
        "--script",
        &script,
    ];
    for spec in &specs {
        all.extend(["--pack", spec.as_str()]);
    }
    all.extend_from_slice(args);
    chimera_tests::cli::chimera(dir, &all, &[], stdin)
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
