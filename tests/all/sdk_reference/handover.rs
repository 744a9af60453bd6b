//! State handover through the real library: the stateful example pack
//! (`call-quota`) is hot-swapped and its counts carry over.

use chimera_host::interception::{run_chain, ChainContext, SessionFacts};
use chimera_host::plugins::platform::library_file_name;
use chimera_host::plugins::{PluginManager, Registry, ReloadOutcome};
use chimera_host::types::ToolCall;
use chimera_tests::{publish, stateful_pack_path};
use serde_json::json;
use std::sync::Arc;

/// What the live chains say about one tool call in `session`.
fn call(manager: &PluginManager, session: &str) -> Option<String> {
    let facts = SessionFacts::new(session);
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    let call = ToolCall::new("c", "bash", json!({"command": "true"}));
    run_chain(&manager.registry().get_all().tool_call, &(), &call, &cx).blocked
}

#[test]
fn a_hot_swapped_stateful_pack_keeps_counting_where_the_old_build_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let file = library_file_name("stateful-pack");
    let original = std::fs::read(stateful_pack_path()).unwrap();
    publish(dir.path(), &file, &original);
    let manager = PluginManager::new(Arc::new(Registry::new()), vec![dir.path().to_owned()]);
    manager.load("call-quota", r#"{"max_calls": 3}"#).unwrap();
    assert_eq!(call(&manager, "a"), None);
    assert_eq!(call(&manager, "a"), None);
    assert_eq!(call(&manager, "b"), None);

    // A rebuild: the same pack, other bytes. A new build that started
    // fresh would allow two more calls in `a`.
    let mut rebuilt = original;
    rebuilt.extend_from_slice(b"rebuilt");
    publish(dir.path(), &file, &rebuilt);
    assert!(matches!(
        manager.reload("call-quota").unwrap(),
        ReloadOutcome::Reloaded(_)
    ));
    assert_eq!(call(&manager, "a"), None, "call 3 of 3");
    assert_eq!(
        call(&manager, "a").as_deref(),
        Some("call-quota: bash would be tool call 4 of this conversation (quota 3)")
    );
    assert_eq!(call(&manager, "b"), None, "b had made one call");
}
