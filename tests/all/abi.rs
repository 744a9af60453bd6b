//! ABI compatibility, pinned with packs built outside the workspace: a pack
//! built against the frozen snapshot of today's ABI keeps loading, and the
//! out-of-tree example pack loads by entry-point name.

use crate::helpers::run;
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::types::ToolCall;
use chimera_tests::out_of_tree_dir;
use serde_json::json;
use std::sync::Arc;

fn manager() -> PluginManager {
    PluginManager::new(
        Arc::new(Registry::new()),
        vec![out_of_tree_dir().to_owned()],
    )
}

#[test]
fn a_pack_built_against_the_frozen_abi_snapshot_loads_and_gates() {
    let manager = manager();
    let info = manager.load("frozen-fixture", "").unwrap();
    assert_eq!(info.version, "1.0.0");
    let chain = manager.registry().get_all().tool_call;
    let (outcome, events) = run(
        &chain,
        &(),
        &ToolCall::new("c1", "bash", json!({"command": "ls"})),
    );
    assert_eq!(
        outcome.blocked.as_deref(),
        Some("frozen-fixture: bash blocked by a pack built against ABI revision 1")
    );
    assert_eq!(events[0].interceptor, "frozen-fixture/gate");
}

#[test]
fn the_out_of_tree_example_pack_loads_by_entry_point_name() {
    let manager = manager();
    manager.load("no-rm-rf", "").unwrap();
    let chain = manager.registry().get_all().tool_call;
    let blocked = run(
        &chain,
        &(),
        &ToolCall::new("c1", "bash", json!({"command": "rm -rf /"})),
    )
    .0;
    assert_eq!(
        blocked.blocked.as_deref(),
        Some("no-rm-rf: `rm -rf` is not allowed in bash commands")
    );
    let allowed = run(
        &chain,
        &(),
        &ToolCall::new("c2", "bash", json!({"command": "ls"})),
    )
    .0;
    assert!(allowed.blocked.is_none());
}
